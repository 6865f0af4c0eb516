"""A process that gets the stack program ready while a command does what comes before it
(`gpufleet diff` reads the stack export; `plan` and `quota` validate and compile their
files), then runs the calls the command sends it.

A one-fleet diff reads a large export (the JSON parse and its checks) and then runs the
changed fleet's program (loading the Pulumi SDK and the provider SDK modules, making their
classes, registering); a cold plan validates and compiles its files and then loads the
Pulumi SDK (0.15-0.2 s) before its run. Neither half depends on the other until the run
starts, so a process forked when the command starts loads what the run needs while the
command does the rest: for the diff it also runs the program once over a fleet of each
cloud the files name (``warm``; the result is thrown away) at a lower priority (nice 10:
speculative work only takes a processor the command leaves idle), and is sent the preview
only if it says it is ready by then (else it was starved, and the command runs the preview
itself); for plan and quota it imports the program and the policy pack at the command's
own priority, and the command waits for it. The command then sends it calls by name
(``CALLS``: the run, the preview, the policy pack's rules) with their arguments, and reads
back each answer.

Nothing here changes an answer: the runner calls the function the command would; if a call
fails in any way (the runner dead, an answer that does not read back, the function
raising), the command makes that call itself and sends the runner nothing more. Only a
process of one thread forks, and only when the CLI grants more than one processor
(``gpufleet.cli.processors``).
"""

from __future__ import annotations

import contextlib
import copyreg
import dataclasses
import os
import pickle
import select
import signal
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from gpufleet.compile import FleetDesign
from gpufleet.compile.runs import RunInputs

from . import forks

# a preview whose seed holds more resources than this runs in the command's process:
# sending them would cost what the runner saves (bench/diff.py's 5,000: 48 MB, pickled in
# 0.18 s and read back in 0.39 s)
MAX_SENT = 1000
READY = b"r"  # what the runner sends when it has loaded what it loads, before any answer


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


def load_program(asked: Callable[[], bool]) -> None:
    """Import the stack program and the policy pack (the Pulumi SDK and pulumi-policy)."""
    from . import plan, policy  # noqa: F401


def _registered(*args: Any) -> Any:
    from .plan import registered

    return registered(*args)


def _seeded(*args: Any) -> Any:
    from .diff import run_seeded

    return run_seeded(*args)


def _rules(*args: Any) -> Any:
    from .policy import run_rules

    return run_rules(*args)


# what a command may ask the runner to call, by name
CALLS: dict[str, Callable[..., Any]] = {
    "registered": _registered, "seeded": _seeded, "rules": _rules}


class Runner:
    """The command's end: ``call`` sends one call and reads its answer; ``close`` ends the
    process."""

    def __init__(self, pid: int, requests: int, answers: int) -> None:
        self.pid = pid
        self.fds = {"requests": requests, "answers": answers}  # closed: removed
        self.ready = False
        self.broken = False

    def call(self, name: str, *args: Any, wait: bool = True,
             tick: Callable[[], None] | None = None) -> Any:
        """``CALLS[name](*args)`` in the runner; None when the runner failed or failed a
        call before, or (``wait`` False) has not said it is ready. The runner's arguments
        must pickle (a run's inputs without the catalog, compiled plans, plain data).
        ``tick`` is called about four times a second while the answer is awaited."""
        if self.broken or not self.pid or not self._is_ready(wait):
            return None
        try:
            forks.send(self.fds["requests"], (name, args))
            while tick is not None and not select.select([self.fds["answers"]], [], [],
                                                         0.25)[0]:
                tick()
            kind, result = pickle.loads(forks.receive(self.fds["answers"]))
        except Exception:
            kind, result = "failed", None
        if kind != "ok":
            self.broken = True
            return None
        return result

    def _is_ready(self, wait: bool) -> bool:
        if not self.ready:
            fd = self.fds["answers"]
            if wait or select.select([fd], [], [], 0)[0]:
                self.ready = os.read(fd, len(READY)) == READY
                self.broken = not self.ready
        return self.ready

    def close(self) -> None:
        """End the runner, whatever it is doing, and reap it."""
        for name in list(self.fds):
            fd = self.fds.pop(name)
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.pid:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            self.pid = 0


@contextlib.contextmanager
def runner(prepare: Callable[[Callable[[], bool]], None], jobs: int, nice: bool = False
           ) -> Iterator[Runner | None]:
    """A runner forked now that runs ``prepare`` (given a function that says whether a
    call has come, to stop early), says it is ready and serves calls (at nice 10 with
    ``nice``); None when only one processor is granted, or this process has another thread
    (its locks could be held in the child). Ended, whatever it was doing, when the block
    ends."""
    if jobs < 2 or not forks.forkable():
        yield None
        return
    try:
        pid, (requests_in, requests_out), (answers_in, answers_out) = _forked()
    except OSError:  # no process or pipe to be had (a limit reached, no memory)
        yield None
        return
    if pid == 0:  # the runner: never returns into the caller's code
        _serve(prepare, nice, requests_in, answers_out, (requests_out, answers_in))
    os.close(requests_in)
    os.close(answers_out)
    end = Runner(pid, requests_out, answers_in)
    try:
        yield end
    finally:
        end.close()


def _forked() -> tuple[int, tuple[int, int], tuple[int, int]]:
    """The runner's two pipes and its process (0 in the runner); whatever was opened is
    closed again when a pipe or the fork cannot be had."""
    opened: list[int] = []
    try:
        requests = os.pipe()
        opened += requests
        answers = os.pipe()
        opened += answers
        return os.fork(), requests, answers
    except OSError:
        for fd in opened:
            os.close(fd)
        raise


def _serve(prepare: Callable[[Callable[[], bool]], None], nice: bool, requests: int,
           answers: int, inherited: Sequence[int]) -> None:
    status = 1
    try:
        forks.detach(inherited)
        if nice:
            os.nice(10)  # the command's own work first where they share a processor
        with contextlib.suppress(Exception):
            prepare(lambda: bool(select.select([requests], [], [], 0)[0]))
        forks.write_all(answers, READY)
        while request := forks.receive(requests):
            try:
                name, args = pickle.loads(request)
                message: tuple[str, Any] = ("ok", CALLS[name](*args))
            except BaseException:
                message = ("failed", None)
            forks.send(answers, message)
            if message[0] != "ok":
                break
        status = 0
    finally:
        os._exit(status)
