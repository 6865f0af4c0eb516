"""Mutation tests for every day-2 checker (issue 41): a good log made from the plan passes;
every mutation of its evidence (a line dropped, duplicated, moved, re-spelt, zeroed, cut off,
a table cell corrupted) never passes - it fails (1) or gives no verdict (2), never crashes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_burnin import node_log
from test_pairs import EXP, pairs_log

from gpufleet.cli import main
from gpufleet.evidence import judge, judge_pairs, parse_log, verdict
from gpufleet.evidence.acceptance import Expectation
from gpufleet.evidence.burnin import PREFIX as BURNIN

from acceptanceutil import A4, log

A4_NCCL = Expectation("roce", "RoCE", 680.0, 612.0, "test", True, 2, nodes=2, gpu="B200",
                      gpus=8)
SETTINGS = settings(max_examples=800, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def _evidence(lines: list[str], keep: Any) -> list[int]:
    return [i for i, x in enumerate(lines) if keep(x)]


def mutate(text: str, data: st.DataObject, evidence: Any, number: str,
           ordered: Any = None) -> str:
    """One mutation of the evidence lines (``evidence`` picks them); ``number`` is a value of
    the log that a re-spelling or zeroing replaces; ``ordered`` picks the lines whose order
    is evidence (a table's rows; the order of rank, node or pair lines is not)."""
    lines = text.splitlines()
    picks = _evidence(lines, evidence)
    kind = data.draw(st.sampled_from(["drop", "duplicate", "move", "respell", "zero",
                                      "truncate", "corrupt"]))
    i = data.draw(st.sampled_from(picks))
    if kind == "drop":
        del lines[i]
    elif kind == "duplicate":
        if lines[i].startswith("# nThread"):
            return text  # the same header twice says nothing new
        lines.insert(i, lines[i])
    elif kind == "move":
        rows = _evidence(lines, ordered) if ordered is not None else []
        if len(rows) < 2:
            return text  # order is no evidence here
        i, j = data.draw(st.lists(st.sampled_from(rows), min_size=2, max_size=2,
                                  unique=True))
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == "respell":
        if number not in lines[i]:
            return text
        spelling = data.draw(st.sampled_from(["7e2", "0x2bc", "700,0", "\uff17\uff10\uff10",
                                              "NaN", "1e308"]))
        lines[i] = lines[i].replace(number, spelling, 1)
    elif kind == "zero":
        lines = [x.replace(number, "0" if "." not in number else "0.00") for x in lines]
    elif kind == "truncate":
        lines = lines[:i]
    else:  # corrupt one cell of the line
        cells = lines[i].split()
        keys = {"# nThread": ("minBytes", "maxBytes"),  # the sizes it announces
                "#  Rank": ("Rank", "on", "device")}  # which rank ran on which GPU
        key = next((k for k in keys if lines[i].startswith(k)), None)
        if key is not None:
            c = data.draw(st.sampled_from([k + 1 for k, x in enumerate(cells)
                                           if x in keys[key]]))
        else:  # a label (a node's host name, the DCGM level's name) is no evidence
            c = data.draw(st.sampled_from([k for k, x in enumerate(cells)
                                           if not x.startswith(("host=", "level="))]))
        cells[c] = data.draw(st.sampled_from(["", "-", "lots", "-5", "9" * 40]))
        lines[i] = " ".join(cells)
    return "\n".join(lines) + "\n"


# --- NCCL ---------------------------------------------------------------------------------

def _nccl_evidence(line: str) -> bool:
    s = line.strip()
    return s.startswith(("#  Rank", "# Rank", "# nThread", "# Out of bounds", "# Avg bus")) or \
        (bool(s) and s[0].isdigit())


def test_the_good_nccl_log_passes() -> None:
    assert verdict(parse_log(log(700.0)), A4_NCCL).code == 0


@SETTINGS
@given(st.data())
def test_no_mutation_of_an_nccl_log_passes(data: st.DataObject) -> None:
    good = log(700.0)
    bad = mutate(good, data, _nccl_evidence, "700.00",
                 lambda x: bool(x.strip()) and x.strip()[0].isdigit())
    if bad == good:
        return
    result = verdict(parse_log(bad), A4_NCCL)
    assert result.code in (1, 2), (bad, result.lines)


# --- pairs --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pairs_good(tmp_path_factory: pytest.TempPathFactory) -> str:
    tmp = tmp_path_factory.mktemp("pairs")
    assert main(["acceptance", "a4", *A4, "--out", str(tmp / "tasks")]) == 0
    task = yaml.safe_load((tmp / "tasks" / "a4-pairs.dstack.yml").read_text())
    return pairs_log(tmp, task, 4)


def test_the_good_pairs_log_passes(pairs_good: str) -> None:
    assert judge_pairs(pairs_good, 4, EXP, 0.1)[0] == 0


@SETTINGS
@given(data=st.data())
def test_no_mutation_of_a_pairs_log_passes(pairs_good: str, data: st.DataObject) -> None:
    bad = mutate(pairs_good, data, lambda x: x.startswith("gpufleet pairs:"), "660")
    if bad == pairs_good:
        return
    code, lines = judge_pairs(bad, 4, EXP, 0.1)
    assert code in (1, 2), (bad, lines)


# --- burn-in ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def burnin_good(tmp_path_factory: pytest.TempPathFactory) -> str:
    tmp = tmp_path_factory.mktemp("burnin")
    assert main(["acceptance", "a4", *A4, "--out", str(tmp / "tasks")]) == 0
    task = yaml.safe_load((tmp / "tasks" / "a4-burnin.dstack.yml").read_text())
    out = []
    for rank in range(2):
        (tmp / f"n{rank}").mkdir()
        out.append(node_log(tmp / f"n{rank}", task, rank))
    return "".join(out)


CHECKS = ("gpus", "idle", "rows", "xid", "dcgm", "nccl", "throttle", "done", "fabric", "mounts")


def test_the_good_burnin_log_passes(burnin_good: str) -> None:
    assert judge(burnin_good, 2, 0.1, 180.0, 8, CHECKS)[0] == 0


@SETTINGS
@given(data=st.data())
def test_no_mutation_of_a_burnin_log_passes(burnin_good: str, data: st.DataObject) -> None:
    bad = mutate(burnin_good, data, lambda x: x.startswith(BURNIN), "560")
    if bad == burnin_good:
        return
    code, lines = judge(bad, 2, 0.1, 180.0, 8, CHECKS)
    assert code in (1, 2), (bad, lines)


def test_the_cli_refuses_a_mutated_log_the_same_way(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "nccl.log"
    path.write_text(log(700.0).replace("#  Rank  9", "#  Rank  7", 1))
    assert main(["acceptance", "check", str(path), "--fleet", "a4", *A4]) == 2
    assert "rank" in capsys.readouterr().out


# --- the scaling report -------------------------------------------------------------------

def _scaling(logs: list[tuple[str, str]]) -> int:
    from gpufleet.evidence import DEFAULT_FRACTION, Marks, scaling_report

    marks = Marks(published=680.0, published_source="test", published_nodes=2)
    return scaling_report("a4", logs, DEFAULT_FRACTION, marks, expected=A4_NCCL).exit_code


def _series() -> list[tuple[str, str]]:
    return [(f"nccl-{n}.log", log(700.0, nodes=n)) for n in (2, 4, 8)]


def test_the_good_scaling_series_passes() -> None:
    assert _scaling(_series()) == 0


@SETTINGS
@given(data=st.data())
def test_no_mutation_of_a_scaling_series_passes(data: st.DataObject) -> None:
    """One log of the series mutated, or the series itself (a log given twice, or a log of
    one node count under another's name): the report never passes."""
    series = _series()
    where = data.draw(st.sampled_from(["log", "twice", "relabel"]))
    if where == "twice":
        i = data.draw(st.sampled_from(range(3)))
        series.insert(i, (f"again-{i}.log", series[i][1]))
    elif where == "relabel":  # a 2-node log renamed as the 8-node one: the ranks tell
        series[2] = (series[2][0], series[0][1])
    else:
        i = data.draw(st.sampled_from(range(3)))
        name, good = series[i]
        bad = mutate(good, data, _nccl_evidence, "700.00",
                     lambda x: bool(x.strip()) and x.strip()[0].isdigit())
        if bad == good:
            return
        series[i] = (name, bad)
    assert _scaling(series) in (1, 2), series
