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
