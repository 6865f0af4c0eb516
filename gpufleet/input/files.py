"""Files and folders -> loaded documents: which files a path means (folders walked, dstack's
profiles found), which of them are gpufleet's or dstack's, each read within its size limit and
as UTF-8, then parsed by the loader."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

from gpufleet.codes import L000, L001, L002
from gpufleet.diagnostics import Diagnostic, display_path
from gpufleet.input.loader import MAX_FILE_BYTES, YAML_SUFFIXES, LoadResult, load_text
from gpufleet.input.lockspec import LOCK_FILE
from gpufleet.input.spec import SETTINGS_KEYS

DSTACK_DIR = ".dstack"


DSTACK_PROFILES = ("profiles.yml", "profiles.yaml")


def expand_paths(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files as given, directories recursed for ``*.yml``/``*.yaml`` and ``gpufleet.lock``
    (hidden folders skipped, but for the profiles file dstack keeps in ``.dstack/``)."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for root, dirs, files in os.walk(p):
                out.extend(Path(root) / DSTACK_DIR / name for name in DSTACK_PROFILES
                           if DSTACK_DIR in dirs and (Path(root) / DSTACK_DIR / name).is_file())
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                out.extend(Path(root) / f for f in sorted(files)
                           if f.endswith(YAML_SUFFIXES) or f == LOCK_FILE)
        else:
            out.append(p)
    seen: set[Path] = set()
    unique = []
    for p in out:
        try:
            key = p.resolve()
        except (OSError, RuntimeError):  # a symlink loop: load_file reports it
            key = p.absolute()
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


def load_paths(paths: Iterable[str | os.PathLike[str]], only_ours: bool = False
               ) -> LoadResult:
    """Load the files; with ``only_ours`` the YAML files that look like neither dstack's nor
    gpufleet's (CI configs, `Pulumi.yaml`, pre-commit hooks) are skipped and counted."""
    result = LoadResult()
    for p in expand_paths(paths):
        if only_ours and not looks_like_ours(p):
            result.skipped.append(display_path(str(p)))
            continue
        load_file(p, result)
    return result


OUR_NAMES = ("backends.yml", "backends.yaml", *DSTACK_PROFILES, ".dstack.yml", ".dstack.yaml",
             LOCK_FILE)


# A top-level `type:` of a dstack configuration, or a backends or profiles file's key.
_OURS = re.compile(rb"^(type:[ \t]*[\"']?(fleet|gateway|volume|task|service|dev-environment)"
                   rb"\b|(" + "|".join(sorted({"backends", "profiles", *SETTINGS_KEYS})).encode()
                   + rb"):)", re.MULTILINE)


PEEK = 65536


def looks_like_ours(path: Path) -> bool:
    """A dstack or gpufleet file by its name (`*.dstack.yml`, `backends.yml`, ...) or its
    first 64 KB (a top-level `type: fleet`, `backends:`, ...). Unreadable files count as
    ours, so that loading them reports why; a file that is not regular (a FIFO would block
    the peek) and not ours by name is skipped unopened."""
    name = path.name
    if name in OUR_NAMES or name.endswith((".dstack.yml", ".dstack.yaml")) \
            or path.parent.name == DSTACK_DIR:
        return True
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return False  # a FIFO or device named like a CI config: never opened to peek
        with path.open("rb") as f:
            head = f.read(PEEK)
    except OSError:
        return True
    return _OURS.search(head) is not None


def read_small_text(path: str, limit: int) -> str:
    """A small text file (a key, a certificate), read at most ``limit`` bytes; OSError on
    anything else (missing, a folder, too large, not UTF-8)."""
    p = Path(path)
    if not p.is_file():
        raise OSError(2, "no such file")
    if p.stat().st_size > limit:
        raise OSError(27, f"larger than {limit} bytes")
    try:
        return p.read_bytes()[:limit].decode("utf-8")
    except UnicodeDecodeError:
        raise OSError(22, "not UTF-8 text") from None


def load_file(path: Path, result: LoadResult) -> None:
    name = display_path(str(path))
    result.files.append(name)
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            result.diagnostics.append(Diagnostic(
                name, 1, 1, L000, "not a regular file (a device, pipe or socket)",
                hint="give gpufleet the YAML files themselves"))
            return
        size = st.st_size
        if size > MAX_FILE_BYTES:
            result.diagnostics.append(
                Diagnostic(name, 1, 1, L001, f"file is {size:,} bytes; the limit is "
                           f"{MAX_FILE_BYTES:,} (10 MB)",
                           hint="split the file or check that it is a fleet/gateway file")
            )
            return
        with path.open("rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            result.diagnostics.append(Diagnostic(
                name, 1, 1, L001, f"file grew past the limit of {MAX_FILE_BYTES:,} bytes "
                "while being read"))
            return
    except OSError as e:
        result.diagnostics.append(
            Diagnostic(name, 1, 1, L000, f"cannot read file: {e.strerror or e}")
        )
        return
    load_bytes(name, raw, result)


def load_bytes(name: str, raw: bytes, result: LoadResult) -> None:
    """Decode and parse one file's bytes into ``result``."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        result.diagnostics.append(
            Diagnostic(name, line, col, L002,
                       f"file is not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})",
                       hint="save the file as UTF-8")
        )
        return
    result.sources[name] = text.splitlines()
    load_text(name, text, result)
