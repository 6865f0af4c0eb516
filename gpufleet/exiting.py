"""A process's exit without the interpreter's last collections.

At exit the interpreter collects cycles once more, walking every object still alive: the
loaded Pulumi SDK's and provider SDKs' classes (some 350,000 objects), and after a program
run every resource, Output and future it made. That walk decides nothing (the OS takes the
memory back): 0.8 s of a 3 s `gpufleet plan examples/` when the CLI first skipped it,
1.0-1.3 s of a process that ran a 1,000-node program (bench/README, stop 79). Objects
frozen (``gc.freeze``) are not walked. What a command writes is written and closed before
it returns (``gpufleet.fileio``), so no file waits on a finalizer the walk would have run.
"""

from __future__ import annotations

import atexit
import gc

_REGISTERED: list[bool] = []


def freeze_at_exit() -> None:
    """Freeze what is alive when the process exits, before the last collections; registered
    once per process. atexit runs its handlers last in, first out: those registered after
    this one (a command's own) run before it, those registered earlier (at an import, as
    logging's flush) after it, and lose nothing: freezing only keeps the last collections
    from walking, and from finalizing, what is frozen."""
    if not _REGISTERED:
        _REGISTERED.append(True)
        atexit.register(gc.freeze)
