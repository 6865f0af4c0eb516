"""Shared pytest options: ``--update-golden`` rewrites expected files instead of comparing."""

from __future__ import annotations

import os
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


# Modules whose module-scoped fixture costs seconds: a dstack server (tests/dstackserver.py,
# about 4 s), the examples exported for SkyPilot and loaded by its own code (5 s). Under
# `pytest -n`, all of each one's tests go to one worker, which makes it once (each worker
# made its own before). xdist's own `--dist loadgroup` cannot be used: it marks a test's
# group by rewriting the item's `_nodeid`, which pytest 9 no longer reads.
ONE_WORKER = frozenset({"tests/test_health.py", "tests/test_gateway_sync.py",
                        "tests/test_skypilot.py"})


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's `load` distribution (each test to the next idle worker), but the tests of a
    ONE_WORKER module go to one worker together. Other modes are xdist's own."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in ONE_WORKER else nodeid
    return Scheduling(config, log)


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
