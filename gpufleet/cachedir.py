"""Where gpufleet keeps what it can compute again: `$GPUFLEET_CACHE_DIR`, else
`$XDG_CACHE_HOME/gpufleet`, else `~/.cache/gpufleet`; `GPUFLEET_CACHE=off` (or 0, no,
false) turns every cache off. One folder per kind: `runs` and `policies` (the stack
program's registrations and the policy pack's findings, ``gpufleet.cli.runcache``), `sdk`
(the provider SDKs' type indexes, ``components/lazyinputs.py``), `code` (the compiled
methods of gpufleet's dataclasses, ``gpufleet.classcode``) and `catalog` (the catalog
files' parsed rows, ``gpufleet.offers.rowcache``)."""

from __future__ import annotations

import os
from pathlib import Path


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
    """Write a cache entry whole or not at all: a temporary file in the entry's folder (made
    readable by its owner only) renamed into place, readable by its owner only. False when
    it could not be written: a cache that cannot be written is no cache, never a failed
    command."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        import tempfile  # only where an entry is written (most runs write none)

        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".entry-", suffix=".tmp")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
        return False
    return True
