"""The one writer of every file gpufleet writes, so that a reader never sees half a file and
nothing the user had is lost.

Targets are checked before any work is done (``check_file``, ``check_folder``): the folder
must exist (or be creatable) and be writable; an existing target must be a regular file,
never a FIFO, device, socket, folder or symlink (each is refused, not followed or replaced);
a file another tool or a person wrote is replaced only with ``force`` when the caller names
the marker its own files carry. ``-`` means standard output, and a terminal is written to
directly. Regular files are replaced atomically (temporary file + rename) and keep their
permission bits.
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

STDOUT = "-"
MARKER_BYTES = 4096  # how much of an existing file is read to find the marker


class WriteError(Exception):
    """A target gpufleet will not write; the message says why and what to do."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return "not a regular file"


def _is_terminal(path: str) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        return os.isatty(fd)
    finally:
        os.close(fd)


def check_folder(folder: str, create: bool = True) -> None:
    """A folder files will go into: it exists (or its parent does, when ``create``), is a
    folder and is writable."""
    target = folder or "."
    if os.path.isdir(target):
        if not os.access(target, os.W_OK | os.X_OK):
            raise WriteError(f"{target}: the folder is not writable")
        return
    if os.path.lexists(target):
        raise WriteError(f"{target} is {_kind(os.lstat(target).st_mode)}, not a folder")
    if not create:
        raise WriteError(f"{target}: no such folder")
    parent = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(parent):
        raise WriteError(f"{target}: its parent folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise WriteError(f"{target}: the folder {parent} is not writable")


def check_file(path: str, marker: str | None = None, force: bool = False) -> None:
    """Whether ``path`` may be written: `-` and terminals always; else its folder must be
    there and writable, and an existing entry must be a regular file (not a symlink) -
    carrying ``marker`` near its top unless ``force``."""
    if path == STDOUT:
        return
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise WriteError(f"{path}: {e.strerror or e}") from None
    if st is not None and stat.S_ISCHR(st.st_mode) and _is_terminal(path):
        return
    check_folder(os.path.dirname(path) or ".", create=False)
    if st is None:
        return
    if not stat.S_ISREG(st.st_mode):
        raise WriteError(f"{path} is {_kind(st.st_mode)}; gpufleet writes only regular "
                         "files (give another path, or `-` for standard output)")
    if marker is not None and not force and marker not in _head(path):
        raise WriteError(f"{path} exists and was not written by gpufleet; nothing was written "
                         "(use --force to replace it, or another path)")


def _head(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(MARKER_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""


def write_text(path: str, text: str, marker: str | None = None, force: bool = False) -> None:
    """Write ``text`` (checked again just before): to standard output for `-`, straight to a
    terminal, else atomically through a temporary file in the same folder."""
    text = text if text.endswith("\n") else text + "\n"
    check_file(path, marker, force)
    if path == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    if os.path.lexists(path) and stat.S_ISCHR(os.lstat(path).st_mode):
        with open(path, "w", encoding="utf-8") as tty:
            tty.write(text)
        return
    write_atomically(path, text)


def write_chunks(path: str, chunks: Iterable[str], marker: str | None = None,
                 force: bool = False) -> None:
    """``write_text`` for a text made in pieces, written as they come: to standard output for
    `-`, else atomically (a failure part-way leaves the target as it was)."""
    check_file(path, marker, force)
    if path == STDOUT:
        _stream(chunks, sys.stdout.write)
        sys.stdout.flush()
    elif os.path.lexists(path) and stat.S_ISCHR(os.lstat(path).st_mode):
        with open(path, "w", encoding="utf-8") as tty:
            _stream(chunks, tty.write)
    else:
        _atomically(path, lambda fh: _stream(chunks, lambda s: fh.write(s.encode("utf-8"))))


def _stream(chunks: Iterable[str], write: Callable[[str], object]) -> None:
    """Each chunk written, and a final newline unless the text ends with one."""
    last = ""
    for chunk in chunks:
        if chunk:
            write(chunk)
            last = chunk
    if not last.endswith("\n"):
        write("\n")


def write_bytes(path: str, data: bytes, marker: str, force: bool = False) -> None:
    """Write a binary file (a PNG or SVG plot) whose first bytes carry ``marker`` (a PNG text
    chunk, SVG metadata), checked and replaced like the text files: a file gpufleet wrote is
    replaced, another needs ``force``."""
    if marker.encode("utf-8") not in data[:MARKER_BYTES]:
        raise ValueError(f"{path}: the data does not carry its marker near its top")
    check_file(path, marker, force)
    write_atomically(path, data)


def write_atomically(path: str, text: str | bytes, owner_only: bool = False) -> None:
    """Write ``text`` (or bytes) to ``path`` through a temporary file in the same folder, then
    rename. An existing file keeps its permission bits (``owner_only``: readable and
    writable by its owner alone, whatever it had). Callers check the target first."""
    data = text if isinstance(text, bytes) else \
        (text if text.endswith("\n") else text + "\n").encode("utf-8")
    _atomically(path, lambda fh: fh.write(data), 0o600 if owner_only else None)


def _atomically(path: str, fill: Callable[[BinaryIO], object], mode: int | None = None
                ) -> None:
    """A temporary file in ``path``'s folder, filled, given ``mode``, else the target's
    permission bits (or the umask's), and renamed over it; removed if anything fails."""
    folder = os.path.dirname(os.path.abspath(path))
    if mode is None and os.path.isfile(path):
        mode = stat.S_IMODE(os.lstat(path).st_mode)
    import tempfile  # here, not at import: validate writes nothing

    fd, tmp = tempfile.mkstemp(prefix=".gpufleet-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fill(fh)
        os.chmod(tmp, mode if mode is not None else 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# a single path component of portable characters: no separator, no leading dot
SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,200}")


def write_many(folder: str, files: Iterable[tuple[str, str]], marker: str | None,
               force: bool) -> list[str]:
    """Several files into ``folder``: every target is checked before the first is written,
    so a refusal leaves everything as it was."""
    check_folder(folder)
    listed = list(files)
    for name, _ in listed:
        if not SAFE_NAME.fullmatch(name) or name in (".", ".."):
            raise WriteError(f"{name!r} is not a plain file name; nothing was written (names "
                             "come from the data, and every file stays inside the folder)")
    seen = [name for name, _ in listed]
    twice = sorted({n for n in seen if seen.count(n) > 1})
    if twice:
        raise WriteError(f"two outputs would be written to {', '.join(twice)}; nothing was "
                         "written")
    items = [(os.path.join(folder, name), text) for name, text in listed]
    for path, _ in items:
        check_file_in(path, marker, force)
    os.makedirs(folder, exist_ok=True)
    for path, text in items:
        write_text(path, text, marker, force)
    return [path for path, _ in items]


def check_file_in(path: str, marker: str | None, force: bool) -> None:
    """``check_file`` for a file of a folder that may not exist yet."""
    if os.path.isdir(os.path.dirname(path) or "."):
        check_file(path, marker, force)


@contextmanager
def folder_lock(path: str) -> Iterator[None]:
    """An advisory lock (flock) on the folder of ``path`` for a read-modify-write of it:
    concurrent runs wait for each other instead of losing an update. The folder is locked,
    not the file, because the file itself is replaced by a rename."""
    fd = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def package_data(*parts: str) -> Path:
    """A file of gpufleet's own data (``gpufleet/data/...``). Read from the package's folder:
    importlib.resources, and the zipfile, tempfile and shutil it imports, cost every command
    about 9 ms of its start, and gpufleet is not installed zipped (its catalog folder is
    read as a folder)."""
    return Path(__file__).resolve().parent.joinpath("data", *parts)
