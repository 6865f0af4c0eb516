"""A pytest plugin for bench/suite.py: each test's processor time, its own (the worker's)
and its child processes' (those reaped while it ran, as `resource.getrusage` counts them),
and its wall time, one JSON line per test in ``$GPUFLEET_PERTEST_DIR/<pid>.jsonl``; at the
end of each process a line of its totals (the children reaped outside any test included:
a module's server, an oracle's process). Not a benchmark script: loaded with
``-p pertest`` and this folder on PYTHONPATH.

    PYTHONPATH=bench GPUFLEET_PERTEST_DIR=/some/dir python -m pytest -p pertest ...
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Generator
from pathlib import Path
from typing import IO, Any

import pytest
from measured import processor_seconds

SELF, KIDS = resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN
_OUT: list[IO[str]] = []


def _write(record: dict[str, Any]) -> None:
    folder = os.environ.get("GPUFLEET_PERTEST_DIR")
    if not folder:
        return
    if not _OUT:
        _OUT.append((Path(folder) / f"{os.getpid()}.jsonl").open("a", encoding="utf-8"))
    _OUT[0].write(json.dumps(record) + "\n")
    _OUT[0].flush()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None
                            ) -> Generator[None, None, None]:
    own, kids = processor_seconds(SELF), processor_seconds(KIDS)
    start = time.perf_counter()
    yield
    _write({"test": item.nodeid, "own": processor_seconds(SELF) - own,
            "children": processor_seconds(KIDS) - kids,
            "wall": time.perf_counter() - start})


def pytest_unconfigure(config: pytest.Config) -> None:
    _write({"test": None, "own": processor_seconds(SELF),
            "children": processor_seconds(KIDS), "wall": 0.0})
    for out in _OUT:
        out.close()
