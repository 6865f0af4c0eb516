"""The burn-in's checks beyond DCGM's diagnostic (issue 56, point 4): memory held while idle,
row remapping, Xid events, clock slowdowns under load and a soak. The task's commands run in
bash against stand-ins (tests/burninutil.py); every new fact goes through the evidence model:
a node that misses one, says one twice or says one that cannot be read gives no verdict."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from burninutil import node_log

from gpufleet.cli import main
from gpufleet.evidence import judge

from acceptanceutil import A4
from planutil import write


def _task(tmp: Path, *extra: str) -> dict[str, object]:
    out = tmp / "tasks"
    assert main(["acceptance", "a4", *A4, "--out", str(out), *extra]) == 0
    data: dict[str, object] = yaml.safe_load((out / "a4-burnin.dstack.yml").read_text())
    return data


def _node(tmp: Path, task: dict[str, object], rank: int, **env: str) -> str:
    tmp.mkdir(parents=True, exist_ok=True)
    return node_log(tmp, task, rank, **env)


def _check(tmp: Path, text: str) -> tuple[int, str]:
    path = write(tmp, "burnin.log", text)
    code = main(["acceptance", "check", path, "--fleet", "a4", *A4])
    return code, path


@pytest.fixture
def task(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    data = _task(tmp_path)
    capsys.readouterr()
    return data


def test_healthy_nodes_report_every_new_fact_and_pass(
        tmp_path: Path, task: dict[str, object], capsys: pytest.CaptureFixture[str]) -> None:
    logs = [_node(tmp_path / str(r), task, r) for r in (0, 1)]
    for check in ("idle gpu=7 used_mib=0", "rows gpu=7 correctable=0 uncorrectable=0 "
                  "pending=No failure=No", "xid readable=yes count=0 codes=none",
                  "throttle gpu=7 hw_slowdown=NotActive hw_thermal_slowdown=NotActive"):
        assert f"check={check}" in logs[1], check
    code, _ = _check(tmp_path, "".join(logs))
    assert code == 0, capsys.readouterr().out


@pytest.mark.parametrize(("env", "reason"), [
    ({"FAKE_BUSY_GPU": "3"}, "GPU 3 holds 40960 MiB while idle"),
    ({"FAKE_ROW_PENDING": "2"}, "GPU 2: a row remapping is pending (reset the GPU)"),
    ({"FAKE_XID": "79"}, "Xid 79 in the kernel log since boot"),
    ({"FAKE_HOT_GPU": "5"}, "GPU 5: clocks held down under load (hw_thermal_slowdown)"),
])
def test_a_node_with_a_fault_is_named(tmp_path: Path, task: dict[str, object],
                                      capsys: pytest.CaptureFixture[str], env: dict[str, str],
                                      reason: str) -> None:
    good = _node(tmp_path / "a", task, 0)
    bad = _node(tmp_path / "b", task, 1, **env)
    code, _ = _check(tmp_path, good + bad)
    out = capsys.readouterr().out
    assert code == 1 and f"FAIL node 1 (a4-node-1): {reason}" in out, out
    assert "FAIL node 0" not in out


def test_an_application_xid_and_gpus_without_row_remapping_pass(
        tmp_path: Path, task: dict[str, object]) -> None:
    logs = [_node(tmp_path / str(r), task, r, FAKE_XID="13", FAKE_NO_ROWS="1")
            for r in (0, 1)]
    assert "check=rows gpu=all supported=no" in logs[0]
    assert "check=xid readable=yes count=1 codes=13" in logs[0]
    assert judge("".join(logs), 2, gpus_planned=8)[0] == 0


def test_an_unreadable_kernel_log_gives_no_verdict(tmp_path: Path,
                                                   task: dict[str, object]) -> None:
    logs = [_node(tmp_path / str(r), task, r, FAKE_DMESG_DENIED="1") for r in (0, 1)]
    code, lines = judge("".join(logs), 2, gpus_planned=8)
    assert code == 2 and any("kernel log could not be read" in line for line in lines)


@pytest.mark.parametrize(("edit", "why"), [
    (lambda t: t.replace("check=idle gpu=3 used_mib=0", "check=idle gpu=3 used_mib=zero"),
     "`idle` cannot be read"),
    (lambda t: t + "gpufleet burn-in: node=1 check=idle gpu=3 used_mib=0\n",
     "reports `idle` again"),
    (lambda t: "\n".join(line for line in t.splitlines()
                         if "node=1 check=throttle gpu=6" not in line) + "\n",
     "`throttle` lines for 7 of 8 GPU(s)"),
    (lambda t: t.replace("node=0 check=xid readable=yes count=0 codes=none",
                         "node=0 check=xid readable=yes count=0 codes=79"),
     "`xid` cannot be read"),
    (lambda t: "\n".join(line for line in t.splitlines()
                         if "node=0 check=rows" not in line) + "\n",
     "no `rows` line"),
    (lambda t: t.replace("node=1 check=rows gpu=0 ",
                         "node=1 check=rows gpu=all supported=no\n"
                         "gpufleet burn-in: node=1 check=rows gpu=0 "),
     "`rows` cannot be read"),
])
def test_hostile_or_missing_facts_give_no_verdict(tmp_path: Path, task: dict[str, object],
                                                  edit: object, why: str) -> None:
    text = "".join(_node(tmp_path / str(r), task, r) for r in (0, 1))
    code, lines = judge(edit(text), 2, gpus_planned=8,  # type: ignore[operator]
                        expect=("gpus", "idle", "rows", "xid", "dcgm", "nccl", "throttle",
                                "done"))
    assert code == 2 and any(why in line for line in lines), lines


def test_a_soak_repeats_the_load_and_names_a_drop(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    soak = _task(tmp_path, "--duration", "2s", "--diag", "1")
    commands = "\n".join(str(c) for c in soak["commands"])  # type: ignore[attr-defined]
    assert "dcgmi diag -r 1" in commands and "SECONDS + 2" in commands
    logs = [_node(tmp_path / str(r), soak, r) for r in (0, 1)]
    assert "check=soak rounds=" in logs[0] and "min_busbw=560 max_busbw=560" in logs[0]
    assert judge("".join(logs), 2, gpus_planned=8)[0] == 0
    dropped = logs[1].replace("min_busbw=560 max_busbw=560", "min_busbw=300 max_busbw=560")
    code, lines = judge(logs[0] + dropped, 2, gpus_planned=8)
    assert code == 1 and any("the soak's busbw fell to 300 GB/s from 560 GB/s" in line
                             for line in lines)
    # a soak line on one node only: the other's is missing, no verdict
    cut = "\n".join(line for line in logs[1].splitlines() if "check=soak" not in line) + "\n"
    assert judge(logs[0] + cut, 2, gpus_planned=8)[0] == 2
    capsys.readouterr()
    assert main(["acceptance", "a4", *A4, "--out", str(tmp_path / "t2"),
                 "--duration", "2 weeks"]) == 2
    assert "--duration" in capsys.readouterr().err
