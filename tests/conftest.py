"""Shared pytest options: ``--update-golden`` rewrites expected files instead of comparing."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# Property and fuzz tests: "ci" (the default, fixed seed) keeps CI short; run thousands of
# inputs locally with `pytest tests/test_fuzz.py --hypothesis-profile=long`.
_QUIET = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
settings.register_profile("ci", max_examples=150, deadline=None, derandomize=True,
                          suppress_health_check=_QUIET)
settings.register_profile("long", max_examples=5000, deadline=None,
                          suppress_health_check=_QUIET)
settings.load_profile("ci")

ROOT = Path(__file__).resolve().parent.parent

# every test runs the stack program itself (a test that patches the program must see its
# patch); tests/test_runcache.py turns the run cache on where it tests it
os.environ["GPUFLEET_CACHE"] = "off"


# Modules whose fixtures cost seconds: a dstack server (tests/dstackserver.py, about 5 s of
# processor), dstack's parser in a process of its own (test_conformance.oracle, 3 s), the
# examples exported for SkyPilot and loaded by its own code (5 s). Under `pytest -n`, all of
# a group's tests go to one worker, which makes the fixture once (each worker made its own
# before); the two modules that talk to a dstack server are one group and share its server
# (``dstack_home``). xdist's own `--dist loadgroup` cannot be used: it marks a test's group
# by rewriting the item's `_nodeid`, which pytest 9 no longer reads.
ONE_WORKER = {"tests/test_health.py": "dstack", "tests/test_gateway_sync.py": "dstack",
              "tests/test_skypilot.py": "skypilot",
              **{f"tests/test_{m}.py": "dstack-oracle" for m in (
                  "conformance", "export", "filesystems", "gpudirect_tcpx", "volumes")}}


@pytest.hookimpl(optionalhook=True)  # a run without xdist (`-p no:xdist`) has no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's `load` distribution (each test to the next idle worker), but the tests of a
    ONE_WORKER group go to one worker together. Other modes are xdist's own."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return ONE_WORKER.get(nodeid.split("::", 1)[0], nodeid)
    return Scheduling(config, log)


# The cyclic collector in a test process: after collection, the loaded SDKs, the test modules
# and pytest's own objects (some 2.5 million) are frozen out of its walks, and full
# collections are made rarer. A worker's collections cost 12.8 of 104 s over the six
# heaviest program-running modules with the interpreter's defaults (700, 10, 10), 9.4 s
# with these, at the same peak memory (820 MB). A program run sets its own while it runs
# (components/run/harness.py: RUN_GC_THRESHOLDS).
TEST_GC_THRESHOLDS = (50_000, 100, 1_000)


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(*TEST_GC_THRESHOLDS)


@pytest.fixture(scope="session")
def dstack_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One dstack server for the worker's modules that talk to one; each seeds its own
    projects (``dstackserver.seeded``)."""
    from dstackserver import started

    with started(tmp_path_factory.mktemp("dstack-home")) as home:
        yield home


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite golden/expected files from the current output")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


def compare_or_update(path: Path, actual: str, update: bool) -> None:
    """Assert ``actual`` equals the file's text, or rewrite the file with ``--update-golden``."""
    if update or not path.exists():
        if not update:
            pytest.fail(f"{path} is missing; run pytest --update-golden to create it")
        path.write_text(actual, encoding="utf-8")
        return
    assert actual == path.read_text(encoding="utf-8"), f"{path.name} differs"
