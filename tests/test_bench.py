"""Every benchmark runs, in its smoke mode, and prints the figures bench/run_all.py reads:
a script that breaks (an import moved, an API renamed) or stops printing a figure fails
here, not months later when someone wants the numbers. No timing is asserted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every benchmark runs in a process of its own

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import run_all  # noqa: E402  (bench/ is a folder of scripts, not a package)


def test_every_script_of_bench_is_in_the_table() -> None:
    scripts = {p.name for p in BENCH.glob("*.py")} - {"run_all.py", "measured.py"}
    assert scripts == {b.script for b in run_all.BENCHES}


@pytest.mark.parametrize("bench", run_all.BENCHES, ids=lambda b: b.script)
def test_each_benchmark_runs_in_its_smoke_mode(bench: run_all.Bench) -> None:
    output, _ = run_all.run(bench, smoke=True)
    for figure in bench.figures:
        value = run_all.read(figure, output)
        assert value >= 0, (figure.label, output)


def test_a_missing_figure_stops_the_table() -> None:
    figure = run_all.BENCHES[0].figures[0]
    with pytest.raises(SystemExit, match="no figure"):
        run_all.read(figure, "the output of a script that printed something else\n")
