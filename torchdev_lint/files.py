"""Finding the files to check, reading them faithfully and writing fixes back safely."""

from __future__ import annotations

import io
import os
import re
import stat
import subprocess
import tempfile
import tokenize
from dataclasses import dataclass
from pathlib import Path

from torchdev_lint.config import excluded
from torchdev_lint.finding import FileError
from torchdev_lint.notebook import Notebook, NotebookError

SUFFIXES = (".py", ".pyi", ".ipynb")
_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=]", re.M)


@dataclass
class SourceFile:
    path: str  # as shown to the user
    text: str  # decoded, newlines untouched (for a notebook: its code cells as one module)
    encoding: str  # what to encode it back with ("utf-8-sig" keeps a BOM)
    notebook: Notebook | None = None

    @property
    def file_text(self) -> str:
        """The file's own text (a notebook's JSON)."""
        return self.notebook.raw if self.notebook else self.text

    def file_text_for(self, text: str) -> str:
        """The file's text once its Python code is ``text``."""
        return self.notebook.render(text) if self.notebook else text


def discover(arguments: list[str], settings, respect_gitignore: bool = True) -> tuple[list[str], list[FileError]]:
    """The files to check under ``arguments``, in a stable order, and paths that do not exist.
    ``settings.for_path`` gives the settings governing a path (a ``Resolver``, or one
    ``Settings`` for all): each directory is pruned by its own configuration's excludes.
    A file named explicitly is checked unless its configuration excludes it (pre-commit names
    every file), and files git ignores are skipped in walked directories."""
    found: list[str] = []
    errors: list[FileError] = []
    for argument in arguments:
        path = Path(argument)
        if not path.exists():
            errors.append(FileError(argument, "no such file or directory"))
        elif path.is_dir():
            walked = _walk(argument, settings)
            found.extend(_not_ignored_by_git(argument, walked) if respect_gitignore else walked)
        elif not excluded(settings.for_path(path), path, defaults=False):
            found.append(os.path.normpath(argument))
    return list(dict.fromkeys(found)), errors


def _walk(top: str, settings) -> list[str]:
    files = []
    for directory, subdirs, names in os.walk(top, onerror=None):
        subdirs[:] = sorted(
            d for d in subdirs
            if not excluded(settings.for_path(Path(directory, d)), Path(directory, d))
            and not (Path(directory, d) / "pyvenv.cfg").exists()
        )
        for name in sorted(names):
            if name.endswith(SUFFIXES):
                full = os.path.normpath(os.path.join(directory, name))
                if not excluded(settings.for_path(Path(full)), Path(full)):
                    files.append(full)
    return files


def _not_ignored_by_git(top: str, paths: list[str]) -> list[str]:
    """``paths`` less those .gitignore (and git's other ignore files) exclude; all of them
    outside a git work tree or without git. Git answers, so its matching rules apply exactly."""
    if not paths:
        return paths
    try:
        done = subprocess.run(
            ["git", "-C", top, "check-ignore", "--no-index", "-z", "--stdin"],
            input="\0".join(os.path.relpath(p, top) for p in paths) + "\0",
            capture_output=True, text=True, timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return paths
    if done.returncode not in (0, 1):  # 128: not a git work tree
        return paths
    ignored = {os.path.normpath(os.path.join(top, p)) for p in done.stdout.split("\0") if p}
    return [p for p in paths if p not in ignored]


def decode(path: str, data: bytes) -> SourceFile | FileError:
    if path.endswith(".ipynb"):
        return _decode_notebook(path, data)
    if b"\0" in data:
        return FileError(path, "binary file, not Python source")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        if _COOKIE.search(b"\n".join(data.splitlines()[:2])):
            return FileError(path, f"bad encoding declaration: {error.msg}")
        encoding = "utf-8"  # no declaration: the bytes are not UTF-8, said below
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as error:
        return FileError(
            path, f"cannot decode as {encoding}: {error.reason} at byte {error.start}"
        )
    except LookupError:
        return FileError(path, f"unknown encoding '{encoding}'")
    return SourceFile(path, text, encoding)


def _decode_notebook(path: str, data: bytes) -> SourceFile | FileError:
    try:
        notebook = Notebook.parse(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        return FileError(path, f"cannot decode notebook as utf-8: {error.reason} at byte {error.start}")
    except NotebookError as error:
        return FileError(path, str(error))
    return SourceFile(path, notebook.text, "utf-8", notebook)


def read(path: str) -> SourceFile | FileError:
    try:
        data = Path(path).read_bytes()
    except IsADirectoryError:
        return FileError(path, "is a directory")
    except OSError as error:
        return FileError(path, f"cannot read: {error.strerror or error}")
    return decode(path, data)


def write_atomically(source: SourceFile, text: str) -> FileError | None:
    """Replace the file's contents in one rename, keeping its encoding and mode.
    A read-only file (or one whose text cannot be encoded back) is left untouched."""
    path = Path(source.path)
    try:
        data = text.encode(source.encoding)
    except UnicodeEncodeError as error:
        return FileError(source.path, f"fix not written: cannot encode as {source.encoding}: {error.reason}")
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if not mode & stat.S_IWUSR:
            return FileError(source.path, "fix not written: file is read-only")
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:
        return FileError(source.path, f"fix not written: {error.strerror or error}")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except OSError as error:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        return FileError(source.path, f"fix not written: {error.strerror or error}")
    return None
