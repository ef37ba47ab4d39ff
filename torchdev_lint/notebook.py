"""Jupyter notebooks: their code cells as one Python module, and back.

A notebook runs its cells in one namespace, so imports in the first cell resolve names in
the last: the cells are checked as one module, their lines joined in order. A line table kept
beside that text says, for each of its lines, which cell and which line of that cell it came
from: positions map back, and fixed code is split back into cells, by position alone (never by
looking for marker text, which a user's own code could contain). IPython syntax LibCST cannot
parse (``%magic``, ``!shell``, ``obj?``, ``x = !ls``, with their backslash continuations) is
masked line for line by ``pass`` and restored on the way back; cells run by a cell magic
(``%%bash``) are skipped, and so are notebooks whose kernel is not Python.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field

from torchdev_lint.lines import split as split_lines

_MAGIC = re.compile(r"^\s*[%!?]|^\s*[\w.]+\?{1,2}\s*$|^\s*[\w.]+(\s*,\s*[\w.]+)*\s*=\s*[%!]")
_PLACEHOLDER = "pass"
# Cell magics whose body is the kernel's own Python (`%%time` runs the cell and times it);
# any other (`%%bash`, `%%writefile`, `%%html`) holds something else and is skipped.
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun"})


class NotebookError(ValueError):
    pass


@dataclass(frozen=True)
class _Line:
    cell: int  # index into the notebook's cells
    number: int  # 1-based line within that cell
    magic: str | None = None  # the IPython line this one masks
    tail: bool = False  # the empty rest after a cell's final newline


@dataclass
class Notebook:
    raw: str  # the notebook file's text
    data: dict
    text: str = ""  # the code cells as one Python module
    lines: list[_Line] = field(default_factory=list)  # one per line of `text`
    language: str = "python"

    @classmethod
    def parse(cls, raw: str) -> Notebook:
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as error:
            raise NotebookError(f"not a valid notebook: {error.msg} at line {error.lineno}") from None
        cells = data.get("cells") if isinstance(data, dict) else None
        if not isinstance(cells, list):
            raise NotebookError("not a valid notebook: no list of cells")
        notebook = cls(raw, data, language=_language(data))
        if not notebook.language.startswith("python"):
            return notebook  # an R or Julia notebook: nothing here is Python
        pieces: list[str] = []
        for index, cell in enumerate(cells):
            if not isinstance(cell, dict) or cell.get("cell_type") != "code":
                continue
            source = _cell_source(cell, index)
            if source.lstrip().startswith("%%") and not _python_cell_magic(source):
                continue
            for text, line in _masked(source.split("\n"), index):
                pieces.append(text)
                notebook.lines.append(line)
        notebook.text = "\n".join(pieces) + "\n" if pieces else ""
        return notebook

    def locate(self, line: int) -> tuple[int, int]:
        """(cell number as users count it, 1-based over all cells; line in that cell) of a
        line of ``text``. A line past the end (where a parser reports an unexpected end of
        file) is the last line of the last cell."""
        entry = self.lines[min(max(line, 1), len(self.lines)) - 1]
        return entry.cell + 1, entry.number

    def cell_texts(self):
        """(lines of ``text`` before it, its masked text) for each code cell checked."""
        lines = self.text.split("\n")
        start = 0
        for end in range(1, len(self.lines) + 1):
            if end == len(self.lines) or self.lines[end].cell != self.lines[start].cell:
                yield start, "\n".join(lines[start:end]) + "\n"
                start = end

    def render(self, text: str) -> str:
        """The notebook file with its code cells replaced by the cells of ``text``, a fixed
        version of ``self.text``: each line goes to the cell of the old line it replaces or
        follows, found by aligning old and new lines."""
        old = self.text.split("\n")[:-1]
        new = (text[:-1] if text.endswith("\n") else text).split("\n")
        sources: dict[int, list[str]] = {line.cell: [] for line in self.lines}
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                for i, j in zip(range(i1, i2), range(j1, j2)):
                    entry = self.lines[i]
                    sources[entry.cell].append(entry.magic if entry.magic is not None else new[j])
            elif tag != "delete":
                for offset, j in enumerate(range(j1, j2)):
                    sources[self._cell_for_new_line(i1, i2, offset)].append(new[j])
        cells = self.data["cells"]
        for index, lines in sources.items():
            body = "\n".join(lines)
            if body == _cell_source(cells[index], index):
                continue
            cells[index]["source"] = (
                split_lines(body, keepends=True) if isinstance(cells[index].get("source"), list) else body
            )
        return _dump(self.data, self.raw)

    def _cell_for_new_line(self, i1: int, i2: int, offset: int) -> int:
        """The cell of a line that replaced old lines ``i1:i2`` (or was inserted before old
        line ``i1`` when they are equal): the replaced line's cell, line for line. An insertion
        between two cells joins the cell before, unless that cell ended with a newline: then
        the new line starts the next cell."""
        if i2 > i1:
            return self.lines[min(i1 + offset, i2 - 1)].cell
        if i1 == 0:
            return self.lines[0].cell
        before = self.lines[i1 - 1]
        return self.lines[i1].cell if before.tail and i1 < len(self.lines) else before.cell

    def gpu_runtime(self) -> str | None:
        """What the notebook's metadata asks its host for, when it is a GPU runtime
        (Colab's ``"accelerator": "GPU"`` or ``gpuType``, Kaggle's ``accelerator``): the
        notebook is written for a machine with one. None when it asks for none."""
        metadata = self.data.get("metadata") if isinstance(self.data, dict) else None
        if not isinstance(metadata, dict):
            return None
        if str(metadata.get("accelerator", "")).upper() == "GPU":
            return '"accelerator": "GPU"'
        colab, kaggle = metadata.get("colab"), metadata.get("kaggle")
        if isinstance(colab, dict) and isinstance(colab.get("gpuType"), str) and colab["gpuType"]:
            return f'Colab\'s "gpuType": "{colab["gpuType"]}"'
        accelerator = kaggle.get("accelerator") if isinstance(kaggle, dict) else None
        if isinstance(accelerator, str) and accelerator.lower() not in ("", "none") \
                and "tpu" not in accelerator.lower():
            return f'Kaggle\'s "accelerator": "{accelerator}"'
        return None

    def round_trips(self) -> bool:
        """Writing the notebook back unchanged gives the same bytes: fixes can be written
        without reformatting anything else."""
        return _dump(json.loads(self.raw), self.raw) == self.raw


def _masked(lines: list[str], cell: int):
    """(text, table entry) per line of a cell, IPython lines and their continuations masked."""
    continuing: str | None = None  # the indentation of a magic continued by a backslash
    for number, line in enumerate(lines, start=1):
        tail = number == len(lines) > 1 and line == ""
        if continuing is None and _MAGIC.search(line):
            continuing = line[: len(line) - len(line.lstrip())]
        if continuing is None:
            yield line, _Line(cell, number, None, tail)
            continue
        yield continuing + _PLACEHOLDER, _Line(cell, number, line, tail)
        if not line.endswith("\\"):
            continuing = None


def _python_cell_magic(source: str) -> bool:
    """A cell that starts with a cell magic running its body as Python (the magic's line is
    then masked like any other IPython line)."""
    name = source.lstrip()[2:].split(None, 1)[0] if source.lstrip()[2:].strip() else ""
    return name in _PYTHON_CELL_MAGICS


def _language(data: dict) -> str:
    metadata = data.get("metadata")
    if not isinstance(metadata, dict):
        return "python"
    for key, name in (("kernelspec", "language"), ("language_info", "name")):
        section = metadata.get(key)
        if isinstance(section, dict) and isinstance(section.get(name), str):
            return section[name].lower()
    return "python"


def _cell_source(cell: dict, index: int) -> str:
    source = cell.get("source", "")
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(piece, str) for piece in source):
        return "".join(source)
    raise NotebookError(f"not a valid notebook: cell {index + 1}'s source is not text")


def _dump(data: dict, like: str) -> str:
    """JSON laid out as ``like`` is: its indentation, its escaping, its final newline."""
    second = like.split("\n", 2)[1] if "\n" in like else ""
    indent = len(second) - len(second.lstrip(" ")) or None
    text = json.dumps(data, indent=indent, ensure_ascii="\\u" in like and not _has_non_ascii(like))
    return text + "\n" if like.endswith("\n") else text


def _has_non_ascii(text: str) -> bool:
    return any(ord(c) > 127 for c in text)
