"""How many processors an offline run of the stack program may use: the processors this
process may run on, or `GPUFLEET_JOBS` (1: one process, as the library always runs). Only
the CLI's one-shot commands, run as the process's own command line, use more than one
(``gpufleet.components.run.parallel`` forks a process per cloud's part of the run); a
program that imports gpufleet keeps its one process."""

from __future__ import annotations

import os

import click

ENV = "GPUFLEET_JOBS"
_GRANTED: list[int] = []  # set by the entry point for a one-shot command


def available() -> int:
    """The processors this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def grant() -> None:
    """Let this process's offline runs use ``$GPUFLEET_JOBS`` processors, else every one it
    may run on. A value that is not a whole number of at least 1 is a usage error."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        _GRANTED[:] = [available()]
        return
    try:
        jobs = int(raw)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise click.UsageError(f"{ENV}={raw!r}: give a whole number of processors, at least 1 "
                               f"(1 runs the stack program in one process), or unset it")
    _GRANTED[:] = [jobs]


def jobs() -> int:
    """The processors granted (1 unless ``grant`` ran)."""
    return _GRANTED[0] if _GRANTED else 1
