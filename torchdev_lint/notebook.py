"""Jupyter notebooks: their code cells as one Python module, and back.

A notebook runs its cells in one namespace, so imports in the first cell resolve names in
the last: the cells are checked as one module. Each cell is preceded by a marker comment,
which maps positions back to (cell, line) and splits fixed code back into cells. IPython
syntax LibCST cannot parse (``%magic``, ``!shell``, ``obj?``) is masked by a placeholder
statement and restored on the way back; cells run by a cell magic (``%%bash``) are skipped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

_MARKER = "# torchdev-lint: cell {}"
_MARKER_LINE = re.compile(r"^# torchdev-lint: cell (\d+)\n", re.M)
_MAGIC = re.compile(r"^\s*(%|!|\?)|\?\s*$")
_PLACEHOLDER = "pass  # torchdev-lint: magic {}"
_PLACEHOLDER_LINE = re.compile(r"^(\s*)pass  # torchdev-lint: magic (\d+)$")


class NotebookError(ValueError):
    pass


@dataclass
class Notebook:
    raw: str  # the notebook file's text
    data: dict
    text: str = ""  # the code cells as one Python module
    # (cell number as users count it: 1-based over all cells, first line in `text`)
    starts: list[tuple[int, int]] = field(default_factory=list)
    magics: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, raw: str) -> Notebook:
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as error:
            raise NotebookError(f"not a valid notebook: {error.msg} at line {error.lineno}") from None
        cells = data.get("cells") if isinstance(data, dict) else None
        if not isinstance(cells, list):
            raise NotebookError("not a valid notebook: no list of cells")
        notebook = cls(raw, data)
        lines: list[str] = []
        for number, cell in enumerate(cells, start=1):
            if not isinstance(cell, dict) or cell.get("cell_type") != "code":
                continue
            source = _cell_source(cell)
            if source.lstrip().startswith("%%"):
                continue
            lines.append(_MARKER.format(number))
            notebook.starts.append((number, len(lines) + 1))
            lines.extend(notebook._mask(line) for line in source.split("\n"))
        notebook.text = "\n".join(lines) + "\n" if lines else ""
        return notebook

    def _mask(self, line: str) -> str:
        if not _MAGIC.search(line):
            return line
        self.magics.append(line)
        indent = line[: len(line) - len(line.lstrip())]
        return indent + _PLACEHOLDER.format(len(self.magics) - 1)

    def locate(self, line: int) -> tuple[int, int]:
        """(cell number, line in that cell) of a line of ``text``."""
        cell, start = self.starts[0]
        for number, first in self.starts:
            if first > line:
                break
            cell, start = number, first
        return cell, line - start + 1

    def render(self, text: str) -> str:
        """The notebook file with its code cells replaced by the cells of ``text``."""
        pieces = _MARKER_LINE.split(text)
        new_sources = {int(number): body for number, body in zip(pieces[1::2], pieces[2::2])}
        cells = self.data["cells"]
        for number, body in new_sources.items():
            cell = cells[number - 1]
            # Every cell ends with one newline more in `text` than in the notebook.
            body = "\n".join(self._unmask(line) for line in body[:-1].split("\n"))
            cell["source"] = body.splitlines(keepends=True) if isinstance(cell.get("source"), list) else body
        return _dump(self.data, self.raw)

    def _unmask(self, line: str) -> str:
        match = _PLACEHOLDER_LINE.match(line)
        return self.magics[int(match.group(2))] if match else line

    def round_trips(self) -> bool:
        """Writing the notebook back unchanged gives the same bytes: fixes can be written
        without reformatting anything else."""
        return _dump(json.loads(self.raw), self.raw) == self.raw


def _cell_source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _dump(data: dict, like: str) -> str:
    """JSON laid out as ``like`` is: its indentation, its escaping, its final newline."""
    second = like.split("\n", 2)[1] if "\n" in like else ""
    indent = len(second) - len(second.lstrip(" ")) or None
    text = json.dumps(data, indent=indent, ensure_ascii="\\u" in like and not _has_non_ascii(like))
    return text + "\n" if like.endswith("\n") else text


def _has_non_ascii(text: str) -> bool:
    return any(ord(c) > 127 for c in text)
