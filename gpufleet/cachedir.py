"""Where gpufleet keeps what it can compute again: `$GPUFLEET_CACHE_DIR`, else
`$XDG_CACHE_HOME/gpufleet`, else `~/.cache/gpufleet`; `GPUFLEET_CACHE=off` (or 0, no,
false) turns every cache off. One folder per kind: `runs` and `policies` (the stack
program's registrations and the policy pack's findings, ``gpufleet.cli.runcache``), `sdk`
(the provider SDKs' type indexes, ``components/lazyinputs.py``), `code` (the compiled
methods of gpufleet's dataclasses, ``gpufleet.classcode``) and `catalog` (the catalog
files' parsed rows, ``gpufleet.offers.rowcache``)."""

from __future__ import annotations

import marshal
import os
import sys
from pathlib import Path
from typing import Any

# Entries are in ``marshal``'s format, which is Python's own: an entry names the Python that
# wrote it, and another's is not read. The folder is trusted as Python's .pyc files are.
PYTHON = sys.implementation.cache_tag or "none"


def cache_dir(kind: str = "runs") -> Path | None:
    """Where entries of ``kind`` live; None when the cache is off, or when there is no
    home folder to put it in (a user without a passwd entry and no $HOME)."""
    if os.environ.get("GPUFLEET_CACHE", "").lower() in ("off", "0", "no", "false"):
        return None
    explicit = os.environ.get("GPUFLEET_CACHE_DIR")
    if explicit:
        return Path(explicit) / kind
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = os.path.join(Path.home(), ".cache")
        except (RuntimeError, KeyError, OSError):
            return None
    return Path(base) / "gpufleet" / kind


def write_entry(path: Path, data: bytes) -> bool:
    """Write a cache entry whole or not at all (``fileio``'s atomic write), readable by its
    owner only, its folder made so too. False when it could not be written: a cache that
    cannot be written is no cache, never a failed command."""
    from gpufleet.fileio import write_atomically  # only where an entry is written

    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomically(str(path), data, owner_only=True)
    except OSError:
        return False
    return True


def store_entry(path: Path, doc: dict[str, Any]) -> bool:
    """``doc`` marshalled with this Python's tag (``PYTHON``) and written by write_entry;
    False when it is not plain data or could not be written."""
    try:
        data = marshal.dumps({**doc, "python": PYTHON})
    except ValueError:
        return False
    return write_entry(path, data)


def read_entry(path: Path) -> dict[str, Any] | None:
    """An entry store_entry wrote, as the dict it stored; None when there is none, it does
    not read back whole, or another Python wrote it."""
    try:
        doc = marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    return doc if isinstance(doc, dict) and doc.get("python") == PYTHON else None
