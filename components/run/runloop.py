"""The event loop one offline run of the stack program runs on."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Coroutine, Generator
from contextvars import Context
from dataclasses import dataclass
from typing import Any

_RUNS = [0]  # runs this process has started


@dataclass
class RunLoop:
    """A fresh loop, and, from a process's second run on, the tasks made on it (weakly)."""

    loop: asyncio.AbstractEventLoop
    tasks: weakref.WeakSet[asyncio.Task[Any]] | None

    def pending(self) -> list[asyncio.Task[Any]]:
        """The run's tasks not done. ``asyncio.all_tasks(loop)`` copies every task alive in
        the process, of every loop: in a process's first run those are about all this
        run's, but a process of many runs (the tests) keeps the finished runs' tasks until a
        full collection, and it cost 11 ms a run there (1.6 s of a property test's 25). The
        record costs a microsecond a task, so the first run goes without it (a 1,000-node
        run with every node registered: 3%)."""
        found = list(self.tasks) if self.tasks is not None else asyncio.all_tasks(self.loop)
        return [t for t in found if not t.done()]


def run_loop() -> RunLoop:
    """A loop for one run. Errors nobody reads are dropped: after a failed program the SDK
    leaves sibling RPC futures whose errors nobody reads; the first error is raised to the
    caller, the echoes are not logged."""
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(lambda _loop, _ctx: None)
    _RUNS[0] += 1
    if _RUNS[0] == 1:
        return RunLoop(loop, None)
    tasks: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()

    def made(loop: asyncio.AbstractEventLoop,
             coro: Coroutine[Any, Any, Any] | Generator[Any, None, Any],
             context: Context | None = None) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, context=context)
        tasks.add(task)
        return task
    loop.set_task_factory(made)
    return RunLoop(loop, tasks)
