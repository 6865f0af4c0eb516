"""Finding the slow node: the pairs task's master command runs for real in bash, with mpirun
stood in for by a script whose bandwidth depends on the hosts it is given, and the log it
prints is what `acceptance check` judges."""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from gpufleet.cli import main
from gpufleet.evidence import Expectation, judge_pairs
from gpufleet.input.schema_files import validator

from acceptanceutil import A4
from planutil import write

# mpirun -H "ipA:g,ipB:g" ...: the pair's bandwidth is the slower of its two nodes' (a
# "slow" node drags every collective it is in), a "bad link" slows that pair only.
MPIRUN = r"""
hosts=""; while [ $# -gt 0 ]; do [ "$1" = -H ] && hosts="$2"; shift; done
a="${hosts%%:*}"; rest="${hosts#*,}"; b="${rest%%:*}"
bw=660.00
case " $FAKE_SLOW " in *" $a "*|*" $b "*) bw=210.00 ;; esac
[ "$FAKE_LINK" = "$a,$b" ] && bw=300.00
case " $FAKE_BROKEN " in *" $a "*|*" $b "*) echo "NCCL WARN net failure"; exit 1 ;; esac
for exp in 30 31 32; do
  printf '%12d %13d     float     sum      -1   100.00  300.00  %s      0' \
    $((1 << exp)) $((1 << (exp - 2))) "$bw"
  printf '   99.00  300.00  %s      0\n' "$bw"
done
"""


def pairs_log(tmp: Path, task: dict[str, object], nodes: int, **env: str) -> str:
    """What the task's first node prints for a fleet of `nodes` nodes at 10.0.0.1.."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / "mpirun"
    path.write_text(f"#!/bin/bash\n{MPIRUN}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    run = str(task["commands"][-1])  # type: ignore[index]
    system = ":".join(str(Path(shutil.which(t) or "/bin/x").parent) for t in ("awk", "seq"))
    ips = "\n".join(f"10.0.0.{i + 1}" for i in range(nodes))
    result = subprocess.run(["/bin/bash", "-c", run], capture_output=True, text=True,
                            timeout=60, check=False, cwd=tmp, env={
                                "PATH": f"{bin_dir}:{system}:/usr/bin:/bin",
                                "DSTACK_NODE_RANK": "0", "DSTACK_NODES_IPS": ips,
                                "DSTACK_GPUS_PER_NODE": "8", "TMPDIR": str(tmp), **env})
    assert result.returncode == 0, result.stderr
    assert (tmp / "gpufleet-pair.log").exists()  # the per-pair log, in the job's folder
    return result.stdout


@pytest.fixture
def task(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["acceptance", "a4", *A4, "--out", str(tmp_path / "tasks")]) == 0
    assert "a4-pairs.dstack.yml" in capsys.readouterr().out
    data: dict[str, object] = yaml.safe_load(
        (tmp_path / "tasks" / "a4-pairs.dstack.yml").read_text())
    return data


EXP = Expectation("roce", "RoCE", 680.0, 612.0, "test", True, 2)
NO_MARK = Expectation("efa", "EFA", None, None, "", True)


def test_the_pairs_task_walks_a_ring_of_neighbours(task: dict[str, object],
                                                   tmp_path: Path) -> None:
    assert list(validator("task").iter_errors(task)) == []
    assert task["name"] == "a4-pairs" and task["stop_criteria"] == "master-done"
    out = pairs_log(tmp_path, task, 4)
    pairs = [line.split("pairs: ")[1].split(" host_a")[0] for line in out.splitlines()
             if "gpufleet pairs: a=" in line]
    assert pairs == ["a=0 b=1", "a=1 b=2", "a=2 b=3", "a=3 b=0"]
    assert "gpufleet pairs: done nodes=4" in out
    two = pairs_log(tmp_path, task, 2)
    assert two.count("gpufleet pairs: a=") == 1  # 0-1 and 1-0 are the same pair


@pytest.mark.parametrize("nodes", [3, 4, 8])
def test_the_slow_node_is_named_and_its_neighbours_are_not(
        task: dict[str, object], tmp_path: Path, nodes: int) -> None:
    out = pairs_log(tmp_path, task, nodes, FAKE_SLOW="10.0.0.2")
    code, lines = judge_pairs(out, nodes, NO_MARK, 0.1)
    assert code == 1, lines
    named = [line for line in lines if line.startswith("FAIL node")]
    assert named == ["FAIL node 1 (10.0.0.2): every pair it is in is slow"]
    assert lines[-1].startswith("FAIL: replace 10.0.0.2 ")
    assert not any(line.startswith("FAIL link") for line in lines)


def test_a_slow_link_is_told_apart_from_a_slow_node(task: dict[str, object],
                                                    tmp_path: Path) -> None:
    out = pairs_log(tmp_path, task, 4, FAKE_LINK="10.0.0.2,10.0.0.3")
    code, lines = judge_pairs(out, 4, NO_MARK, 0.1)
    assert code == 1
    assert not any(line.startswith("FAIL node") for line in lines)
    assert any(line.startswith("FAIL link 1-2 (10.0.0.2, 10.0.0.3)") for line in lines)
    # with the topology (`gpufleet topology --format json`): the layer the link crosses
    where = {"10.0.0.1": ("s1", "b1", "sb1"), "10.0.0.2": ("s1", "b1", "sb1"),
             "10.0.0.3": ("s1", "b2", "sb7"), "10.0.0.4": ("s1", "b2", "sb7")}
    _, lines = judge_pairs(out, 4, NO_MARK, 0.1, where)
    assert any(line.startswith("FAIL link 1-2") and
               line.endswith("it crosses the block layer (b1 / b2)") for line in lines)
    _, lines = judge_pairs(out, 4, NO_MARK, 0.1, {})
    assert any("its layer is unknown" in line for line in lines)


def test_healthy_pairs_pass_and_a_failed_run_is_slow(
        task: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = pairs_log(tmp_path, task, 4)
    assert judge_pairs(out, 4, EXP, 0.1)[0] == 0
    path = write(tmp_path, "pairs.log", out)
    assert main(["acceptance", "check", path, "--fleet", "a4", *A4]) == 0
    assert "PASS: 4 pair(s) of 4 nodes" in capsys.readouterr().out
    broken = pairs_log(tmp_path, task, 4, FAKE_BROKEN="10.0.0.4")
    code, lines = judge_pairs(broken, 4, EXP, 0.1)
    assert code == 1 and "FAIL node 3 (10.0.0.4): every pair it is in is slow" in lines
    assert any("the run failed (exit 1)" in line for line in lines)


def test_two_nodes_are_judged_against_the_pass_mark(
        task: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    slow = pairs_log(tmp_path, task, 2, FAKE_SLOW="10.0.0.1")
    path = write(tmp_path, "slow.log", slow)
    assert main(["acceptance", "check", path, "--fleet", "a4", *A4]) == 1
    out = capsys.readouterr().out
    assert "under the pass mark 612 GB/s" in out and "the only pair is slow" in out
    # the contract's figure replaces the published one
    assert main(["acceptance", "check", path, "--fleet", "a4", *A4,
                 "--expect-busbw", "220"]) == 0
    capsys.readouterr()
    # without a pass mark, one pair has nothing to be compared with
    assert judge_pairs(slow, 2, NO_MARK, 0.1)[0] == 0


def test_an_incomplete_pairs_log_gives_no_verdict(task: dict[str, object],
                                                  tmp_path: Path) -> None:
    out = pairs_log(tmp_path, task, 4)
    cut = out.split("gpufleet pairs: a=3")[0]
    code, lines = judge_pairs(cut, 4, EXP, 0.1)
    assert code == 2 and "no verdict: the pairs log is incomplete" in lines
    missing = "\n".join(line for line in out.splitlines() if "a=2 b=3" not in line)
    code, lines = judge_pairs(missing, 4, EXP, 0.1)
    assert code == 2 and any("3 pair run(s) for 4 nodes" in line for line in lines)
    forged = out.replace("busbw=660", "busbw=6.6e2", 1)
    assert judge_pairs(forged, 4, EXP, 0.1)[0] == 2
    assert judge_pairs(out, 8, EXP, 0.1)[0] == 2  # the fleet has more nodes than ran
