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
    scripts = {p.name for p in BENCH.glob("*.py")} - {"run_all.py", "measured.py",
                                                      "pertest.py"}
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


def test_the_per_file_account_counts_each_process_once(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """xdist's controller ran no test: its children are the workers, whose own lines count
    them; what a worker reaped outside any test (a module's server) is told apart."""
    import json

    import suite

    def lines(path: Path, records: list[tuple[str | None, float, float, float]]) -> None:
        path.write_text("".join(json.dumps({"test": t, "own": o, "children": c, "wall": w})
                                + "\n" for t, o, c, w in records))
    lines(tmp_path / "1.jsonl", [(None, 1.0, 100.0, 0.0)])  # the controller
    lines(tmp_path / "2.jsonl", [("tests/test_a.py::x", 2.0, 3.0, 6.0),
                                 ("tests/test_b.py::y", 4.0, 0.0, 4.5),
                                 (None, 10.0, 5.0, 0.0)])
    lines(tmp_path / "3.jsonl", [("tests/test_a.py::z", 1.0, 0.0, 1.0),
                                 (None, 8.0, 0.0, 0.0)])
    suite.per_file(tmp_path)
    out = capsys.readouterr().out
    assert "processor time: 23 s (18 s the test workers' own, 5 s their child processes', " \
           "2 s of it reaped outside any test); 2 s of the workers' time waiting" in out
    rows = [line.split() for line in out.splitlines()[2:]]
    assert rows == [["tests/test_a.py", "3.0", "3.0", "1.0", "2"],
                    ["tests/test_b.py", "4.0", "0.0", "0.5", "1"]]


def test_the_suite_collects_without_xdist() -> None:
    """`pytest -p no:xdist` (one process, no plugin): conftest's scheduler hook is xdist's,
    and pytest refuses a hook nobody declared unless it is marked optional."""
    import subprocess

    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p",
                           "no:cacheprovider", "--collect-only", "-q", "tests/test_hints.py"],
                          cwd=BENCH.parent, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "8 tests collected" in done.stdout
