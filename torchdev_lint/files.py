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
from typing import Sequence
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
        if self.notebook:
            return self.notebook.render(text)
        if self.text.endswith("\r") and not text.endswith(("\r", "\n")):
            return text + "\r"  # LibCST drops the last newline of a file that ends lines with CR alone
        return text


def repository_root(path: str | Path, fallback: Path) -> Path:
    """The version-control checkout ``path`` lies in (the nearest directory above it with a
    ``.git`` directory or file), where CI services place annotations; ``fallback`` (the
    configuration's root) outside one."""
    start = Path(path).resolve()
    for directory in [start, *start.parents]:
        try:
            if (directory / ".git").exists():
                return directory
        except OSError:
            continue
    return fallback


def discover(arguments: list[str], settings, respect_gitignore: bool = True) -> tuple[list[str], list[FileError]]:
    """The files to check under ``arguments``, in a stable order, and the paths that cannot be
    checked: missing, not regular files (a named pipe would block the run), unlistable.
    ``settings.for_path`` gives the settings governing a path (a ``Resolver``, or one
    ``Settings`` for all): each directory is pruned by its own configuration's excludes.
    A file named explicitly is checked unless its configuration excludes it (pre-commit names
    every file), and files git ignores are skipped in walked directories."""
    found: list[str] = []
    errors: list[FileError] = []
    for argument in arguments:
        path = Path(argument)
        try:
            os.stat(path)
        except FileNotFoundError:
            errors.append(FileError(argument, "no such file or directory"))
            continue
        except OSError as error:  # a directory on the way that this user cannot enter
            errors.append(_unreachable(argument, error))
            continue
        try:
            if path.is_dir():
                walked = _walk(argument, settings, errors)
                found.extend(_not_ignored_by_git(argument, walked) if respect_gitignore else walked)
            elif not excluded(settings.for_path(path), path, defaults=False):
                _add_regular(os.path.normpath(argument), found, errors)
        except OSError as error:  # the settings' search above it met a directory it cannot enter
            errors.append(_unreachable(argument, error))
    return list(dict.fromkeys(found)), errors


def _unreachable(argument: str, error: OSError) -> FileError:
    """One line for a path that cannot even be looked at, naming the directory in the way."""
    reason = error.strerror or str(error)
    parent = os.path.dirname(os.path.normpath(argument)) or "."
    if isinstance(error, PermissionError) and not os.access(parent, os.X_OK):
        reason += f" (cannot enter directory {parent})"
    return FileError(os.path.normpath(argument), f"cannot read: {reason}")


def _walk(top: str, settings, errors: list[FileError]) -> list[str]:
    def unlistable(error: OSError) -> None:
        where = os.path.normpath(error.filename) if error.filename else top  # `locked`, as named
        errors.append(FileError(where, f"cannot list directory: {error.strerror or error}"))

    def wanted(path: str, defaults: bool = True) -> bool:
        """Not excluded; a path whose settings cannot be looked up (in a directory that can
        be listed but not entered) is one error line, and the walk goes on."""
        try:
            return not excluded(settings.for_path(Path(path)), Path(path), defaults)
        except OSError as error:
            errors.append(_unreachable(path, error))
            return False

    files = []
    for directory, subdirs, names in os.walk(top, onerror=unlistable):
        subdirs[:] = sorted(
            d for d in subdirs
            if wanted(os.path.normpath(os.path.join(directory, d)))
            and not _is_virtual_environment(Path(directory, d))
        )
        for name in sorted(names):
            if name.endswith(SUFFIXES):
                full = os.path.normpath(os.path.join(directory, name))
                if wanted(full):
                    _add_regular(full, files, errors)
            elif name.startswith(".") and _TEMPORARY.match(name):
                _remove_if_stale(os.path.join(directory, name))
    return files


def _is_virtual_environment(directory: Path) -> bool:
    """It holds a ``pyvenv.cfg``. A directory that cannot be looked into is none: the walk
    reports it (asking raised PermissionError, a traceback instead of that line)."""
    try:
        return (directory / "pyvenv.cfg").exists()
    except OSError:
        return False


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


def _add_regular(path: str, found: list[str], errors: list[FileError]) -> None:
    """Only regular files are read: opening a named pipe blocks until someone writes to it,
    and a device never ends. Everything else is one line, and never opened."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        errors.append(_unreachable(path, error))
        return
    if stat.S_ISREG(mode):
        found.append(path)
    else:
        errors.append(FileError(path, f"not a regular file ({_KINDS.get(stat.S_IFMT(mode), 'a special file')}): not read"))


def read(path: str) -> SourceFile | FileError:
    try:
        data = Path(path).read_bytes()
    except IsADirectoryError:
        return FileError(path, "is a directory")
    except OSError as error:
        return FileError(path, f"cannot read: {error.strerror or error}")
    return decode(path, data)


_KINDS = {stat.S_IFIFO: "a named pipe", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFDIR: "a directory"}
# `.<name>.tdl-<pid>-<random>.tmp`: a fix being written. The pid tells a later run whether the
# writer is gone (killed mid-write), so its leftover can be removed without racing a live run.
_TEMPORARY = re.compile(r"^\..+\.tdl-(\d+)-\w+\.tmp$")


def _remove_if_stale(path: str) -> None:
    pid = int(_TEMPORARY.match(os.path.basename(path)).group(1))
    try:
        os.kill(pid, 0)
        return  # its writer still runs
    except ProcessLookupError:
        pass
    except OSError:
        return  # another user's process: not ours to judge
    try:
        os.unlink(path)
    except OSError:
        pass


def write_atomically(source: SourceFile, text: str, within: Sequence[str] = ()) -> FileError | None:
    """Replace the file's contents in one rename, keeping its encoding and mode.
    A read-only file (or one whose text cannot be encoded back) is left untouched. A symbolic
    link stays a link: the file it points to is rewritten, in its own directory, when it lies
    inside ``within`` (the paths asked to be checked); otherwise it is left alone."""
    path = Path(source.path)
    if path.is_symlink():
        target = Path(os.path.realpath(path))
        if within and not any(_inside(target, Path(os.path.realpath(p))) for p in within):
            return FileError(source.path, f"fix not written: a link to {target}, outside the paths checked")
        path = target
    try:
        data = text.encode(source.encoding)
    except UnicodeEncodeError as error:
        return FileError(source.path, f"fix not written: cannot encode as {source.encoding}: {error.reason}")
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if not mode & stat.S_IWUSR:
            return FileError(source.path, "fix not written: file is read-only")
        handle, temporary = tempfile.mkstemp(
            dir=path.parent, prefix=f".{path.name}.tdl-{os.getpid()}-", suffix=".tmp"
        )
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


def _inside(path: Path, top: Path) -> bool:
    return path == top or top in path.parents
