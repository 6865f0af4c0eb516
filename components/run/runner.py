"""A process that gets the stack program ready while `gpufleet diff` reads the stack export,
then runs the preview the diff sends it.

Half a one-fleet diff's time is reading a large export (the JSON parse and its checks) and
the other half running the changed fleet's program: loading the Pulumi SDK and the provider
SDK modules, making their classes, registering. The two do not depend on each other until
the preview starts, so a process forked when the command starts loads the SDKs and runs the
program once over a fleet of each cloud the files name (``warm``; its result is thrown
away) while the command reads the export. The diff then sends it the preview to run: the
compiled plans that run and the part of the export's state they can register (a small part
when few fleets changed; `diff --full` runs in the command's own process instead), and it
sends back what the preview registered. The runner works at a lower priority (nice 10), so
it takes only a processor the command leaves idle; one that has not finished loading when
the preview is asked for (the processors were busy) is not sent it.

Nothing here changes a diff's answer: the runner runs ``run_seeded`` on what it is sent; if
it fails in any way (its warm-up included, which only costs time), the command runs the
preview itself. Only a process of one thread forks, and only when the CLI grants more than
one processor (``gpufleet.cli.processors``).
"""

from __future__ import annotations

import contextlib
import copyreg
import dataclasses
import os
import pickle
import select
import signal
import threading
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from gpufleet.compile import Compiled, FleetDesign
from gpufleet.compile.runs import RunInputs

# a preview whose seed holds more resources than this runs in the command's process:
# sending them would cost what the runner saves (bench/diff.py's 5,000: 48 MB, pickled in
# 0.18 s and read back in 0.39 s)
MAX_SENT = 1000
READY = b"r"  # what the runner sends when it has loaded the SDKs and waits


def read_only(d: dict[Any, Any]) -> types.MappingProxyType[Any, Any]:
    """A read-only mapping made again from its dict (what ``_proxy`` pickles)."""
    return types.MappingProxyType(d)


def _proxy(m: types.MappingProxyType[Any, Any]) -> tuple[Any, tuple[dict[Any, Any]]]:
    return read_only, (dict(m),)


# the compiled plans hold read-only mappings; pickle sends them as such
copyreg.pickle(types.MappingProxyType, _proxy)


def warm(paths: Sequence[str], profile: str | None, catalog_dir: str | None,
         asked: Callable[[], bool] = lambda: False) -> None:
    """Run the program offline over the first fleet of each cloud the files plan, one cloud
    at a time until ``asked()``, so that the SDK modules a preview of them uses are loaded
    (the results are not kept)."""
    from gpufleet.compile import compile_inputs
    from gpufleet.input import validate_paths
    from gpufleet.offers import load_catalog

    from .plan import run_offline

    validated = validate_paths(list(paths))
    if not validated.ok:
        return
    compiled = compile_inputs(validated.inputs, load_catalog(catalog_dir), profile)
    firsts: dict[str, FleetDesign] = {}
    for p in compiled.plans:
        firsts.setdefault(p.backend, p)
    for plan in firsts.values():
        if asked():
            return
        run_offline(RunInputs(tuple(paths)), dataclasses.replace(
            compiled, plans=(plan,), gateways=(), volumes=(), buckets=(), quota_requests=()))


class Runner:
    """The parent's end: ``preview`` sends one request; ``close`` ends the process."""

    def __init__(self, pid: int, requests: int, answers: int, jobs: int) -> None:
        self.pid, self.jobs = pid, jobs
        self.fds = {"requests": requests, "answers": answers}  # closed: removed
        self.done = False

    def preview(self, run: RunInputs, compiled: Compiled,
                seed: Mapping[str, tuple[str, Mapping[str, Any]]], project: str
                ) -> tuple[dict[str, Any], ...] | None:
        """What ``run_seeded`` returns for these arguments, run by the runner (its clouds'
        parts in processes of their own, as the command would); None when it is not worth
        sending, already used, or the runner failed."""
        if self.done or len(seed) > MAX_SENT or not self.pid or not self._ready():
            return None
        self.done = True
        try:
            data = pickle.dumps((dataclasses.replace(run, catalog=None), compiled, dict(seed),
                                 project, True, self.jobs), protocol=pickle.HIGHEST_PROTOCOL)
            _write_all(self.fds["requests"], data)
        except (OSError, pickle.PicklingError, TypeError, AttributeError):
            return None
        finally:
            self._close("requests")
        answer = _read_all(self.fds["answers"])
        self._close("answers")
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        try:
            kind, result = pickle.loads(answer) if status == 0 else ("failed", None)
        except Exception:
            return None
        return result if kind == "ok" and isinstance(result, tuple) else None

    def _ready(self) -> bool:
        """Whether the runner has loaded what it loads (at its lower priority, it has not
        when the processors are busy: then it would run the preview slower than this
        process, which runs it instead)."""
        fd = self.fds["answers"]
        return bool(select.select([fd], [], [], 0)[0]) and os.read(fd, len(READY)) == READY

    def close(self) -> None:
        """End the runner, whatever it is doing, and reap it."""
        for name in list(self.fds):
            self._close(name)
        if self.pid:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            self.pid = 0

    def _close(self, name: str) -> None:
        fd = self.fds.pop(name, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


@contextlib.contextmanager
def runner(prepare: Callable[[Callable[[], bool]], None], jobs: int
           ) -> Iterator[Runner | None]:
    """A runner forked now that runs ``prepare`` (given a function that says whether a
    request has come, to stop early) and waits for a request; None when only
    one processor is granted, or this process has another thread (its locks could be held
    in the child). Ended, whatever it was doing, when the block ends."""
    if jobs < 2 or not hasattr(os, "fork") or threading.active_count() > 1:
        yield None
        return
    requests_in, requests_out = os.pipe()
    answers_in, answers_out = os.pipe()
    pid = os.fork()
    if pid == 0:  # the runner: never returns into the caller's code
        _serve(prepare, requests_in, answers_out, (requests_out, answers_in))
    os.close(requests_in)
    os.close(answers_out)
    end = Runner(pid, requests_out, answers_in, jobs)
    try:
        yield end
    finally:
        end.close()


def _serve(prepare: Callable[[Callable[[], bool]], None], requests: int, answers: int,
           inherited: Sequence[int]) -> None:
    status = 1
    try:
        for fd in inherited:
            os.close(fd)
        os.nice(10)  # the command's own work first where they share a processor
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 1)
        os.dup2(quiet, 2)
        with contextlib.suppress(Exception):
            prepare(lambda: bool(select.select([requests], [], [], 0)[0]))
        _write_all(answers, READY)
        request = _read_all(requests)
        if request:
            from .diff import run_seeded

            try:
                message: tuple[str, Any] = ("ok", run_seeded(*pickle.loads(request)))
            except BaseException:
                message = ("failed", None)
            _write_all(answers, pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))
        status = 0
    finally:
        os._exit(status)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)

