"""Where a saved checkpoint's tensors were, read without torch and without running the file.

``torch.save`` records each storage's device (``"cpu"``, ``"cuda:0"``) and ``torch.load``
puts it back there unless ``map_location`` says otherwise: on a machine without that device
the load raises. The tracer reads these records of the files a run writes; the static checks
read those of the files a repository ships. The pickles are read with a ``find_class`` that
builds nothing, so no code of the file runs; a file that is no checkpoint (a Git LFS pointer,
a plain pickle, a truncated archive) says nothing.
"""

from __future__ import annotations

import io
import os
import pickle
import zipfile

# What is read of a file: a checkpoint's pickles name its storages before their bytes, and a
# state dict's pickle is kilobytes. More than this is no checkpoint worth reading here.
MAX_PICKLE_BYTES = 16 * 1024 * 1024
# The first pickle of torch's legacy (pre-zip) format.
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_MEMBERS = ("data.pkl", "constants.pkl")  # torch.save's, and torch.jit.save's constants


class _Nothing(dict):
    """What every class of the file becomes: it accepts any arguments and any state."""

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass


def _peek(data: bytes, seen: list[str], pickles: int = 1) -> list[object]:
    """Read up to ``pickles`` pickles of ``data`` in turn, adding each storage's location to
    ``seen``; the objects read (built of nothing but ``_Nothing`` and plain values). Stops at
    the first that breaks off."""
    stream = io.BytesIO(data)

    class Peek(pickle.Unpickler):
        def find_class(self, module, name):
            return _Nothing

        def persistent_load(self, pid):
            # ("storage", type, key, location, numel[, view]): zip and legacy formats alike
            if isinstance(pid, tuple) and len(pid) > 3 and isinstance(pid[3], str) and pid[3] not in seen:
                seen.append(pid[3])
            return _Nothing()

    found: list[object] = []
    for _ in range(pickles):
        try:
            found.append(Peek(stream).load())
        except Exception:  # noqa: BLE001 - a peek, never an error
            break
    return found


def storage_locations(f) -> list[str] | None:
    """The devices (``"cpu"``, ``"cuda:0"``) the tensors of a checkpoint were saved from, in the
    order first seen (empty: it holds no tensor storage). ``f``: a path or a binary file
    object (left at its position). None when it is no checkpoint torch could load."""
    try:
        if hasattr(f, "read"):
            position = f.tell()
            data = f.read()
            f.seek(position)
            source = io.BytesIO(data)
        else:
            source = f
        if zipfile.is_zipfile(source):
            return _zip_locations(source)
        if hasattr(source, "seek"):
            source.seek(0)
            head = source.read(MAX_PICKLE_BYTES)
        else:
            with open(source, "rb") as handle:
                head = handle.read(MAX_PICKLE_BYTES)
    except (OSError, ValueError):
        return None
    return _legacy_locations(head)


def _zip_locations(source) -> list[str] | None:
    seen: list[str] = []
    found = False
    try:
        with zipfile.ZipFile(source) as archive:
            for info in archive.infolist():
                if info.filename.endswith(_MEMBERS) and info.file_size <= MAX_PICKLE_BYTES:
                    found = True
                    _peek(archive.read(info), seen)
    except (OSError, zipfile.BadZipFile, ValueError, EOFError, RuntimeError):
        return None
    return seen if found else None


def _legacy_locations(head: bytes) -> list[str] | None:
    """The legacy format: a magic number, a protocol version and system facts, each a pickle
    of its own, then the object's pickle, which names the storages."""
    seen: list[str] = []
    read = _peek(head, seen, pickles=4)
    return seen if read and read[0] == _LEGACY_MAGIC else None


def file_locations(path: str) -> list[str] | None:
    """``storage_locations`` of the file at ``path``, remembered by its size and time."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    key = (os.path.realpath(path), stat.st_size, stat.st_mtime_ns)
    if key not in _READ:
        if len(_READ) >= 256:
            del _READ[next(iter(_READ))]
        _READ[key] = storage_locations(path)
    return _READ[key]


_READ: dict[tuple[str, int, int], list[str] | None] = {}
