"""The burn-in task (`gpufleet acceptance FLEET` writes it beside the NCCL task) and the check
of its log: the task's commands run for real in bash against stand-ins for nvidia-smi, dcgmi
and all_reduce_perf, and the lines they print are what the checker judges."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from burninutil import node_log

from gpufleet.cli import main
from gpufleet.evidence import judge
from gpufleet.input.schema_files import validator

from acceptanceutil import A4
from planutil import write


@pytest.fixture
def task(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["acceptance", "a4", *A4, "--out", str(tmp_path / "tasks")]) == 0
    out = capsys.readouterr().out
    assert "a4-burnin.dstack.yml" in out
    data: dict[str, object] = yaml.safe_load((tmp_path / "tasks" / "a4-burnin.dstack.yml")
                                             .read_text())
    return data


def test_the_burnin_task_checks_every_node_on_its_own(task: dict[str, object]) -> None:
    assert list(validator("task").iter_errors(task)) == []
    assert task["nodes"] == 2 and task["fleets"] == ["a4"]
    text = "\n".join(str(c) for c in task["commands"])  # type: ignore[attr-defined]
    assert "dcgmi diag -r 3" in text and "nvidia-smi topo -m" in text
    assert "ecc.errors.uncorrected.volatile.total" in text and "retired_pages.pending" in text
    assert "mpirun" not in text  # each node alone
    assert task["volumes"] == [{"instance_path": "/var/lib/gpufleet", "path": "/gpufleet-host"},
                               {"instance_path": "/mnt/data", "path": "/mnt/data"},
                               {"instance_path": "/usr/local/gib", "path": "/usr/local/gib"}]
    assert "check=fabric want=roce software=" in text


def test_healthy_nodes_pass_and_the_bad_ones_are_named(
        task: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = node_log(tmp_path / "a", task, 0) if (tmp_path / "a").mkdir() is None else ""
    assert "gpufleet burn-in: node=0 check=gpus value=8 want=8 host=a4-node-0" in good
    assert "gpufleet burn-in: node=0 check=nccl busbw=560\n" in good
    (tmp_path / "b").mkdir()
    other = node_log(tmp_path / "b", task, 1)
    assert judge(good + other, 2)[0] == 0
    path = write(tmp_path, "ok.log", good + other)
    assert main(["acceptance", "check", path, "--fleet", "a4", *A4]) == 0
    assert "PASS: 2 node(s) burned in" in capsys.readouterr().out
    cases = {
        "dcgm": ({"FAKE_DCGM_RC": "1"}, "DCGM diagnostics failed"),
        "ecc": ({"FAKE_ECC_GPU": "3"}, "GPU 3: 4 uncorrected ECC error(s)"),
        "gpus": ({"FAKE_GPUS": "7"}, "7 GPU(s), the plan has 8"),
        "memory": ({"FAKE_SMALL_GPU": "5"}, "GPU 5 has 81559 MiB, the others 183359 MiB"),
        "slow": ({"FAKE_BUSBW": "400.00"}, "single-node busbw 400 GB/s, 29% under"),
        "fabric": ({"FAKE_FABRIC_SOFTWARE": ""}, "no roce collective software on the host"),
    }
    for name, (env, message) in cases.items():
        (tmp_path / name).mkdir()
        bad = node_log(tmp_path / name, task, 1, **env)
        third = node_log(tmp_path / f"{name}-2", task, 2) \
            if (tmp_path / f"{name}-2").mkdir() is None else ""
        code, lines = judge(good + bad + third, 3)
        assert code == 1, (name, lines)
        assert any(line.startswith("FAIL node 1 (a4-node-1): ") and message in line
                   for line in lines), (name, lines)
        assert lines[-1] == "FAIL: replace a4-node-1 (`gpufleet replace FLEET NODE...`)"


def test_an_incomplete_burnin_log_gives_no_verdict(
        task: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a").mkdir()
    good = node_log(tmp_path / "a", task, 0)
    code, lines = judge(good, 2)
    assert code == 2 and "1 node(s) reported, the task ran on 2" in " ".join(lines)
    cut = good.split("check=dcgm")[0]
    assert judge(cut, 1)[0] == 2
    forged = re.sub(r"busbw=\S+", "busbw=5e9", good)
    assert forged != good
    code, lines = judge(forged, 1)
    assert code == 2 and any("`nccl` cannot be read" in line for line in lines)
    path = write(tmp_path, "cut.log", cut)
    assert main(["acceptance", "check", path, "--fleet", "a4", *A4, "--format", "json"]) == 2
    assert '"kind": "burn-in"' in capsys.readouterr().out


def test_gpu_memory_is_held_against_the_plan(
        task: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A4's GPU is the catalog's B200 (180 GB): a node whose GPUs all show 80 GB is named,
    though its GPUs agree with each other."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    good = node_log(tmp_path / "a", task, 0)
    small = node_log(tmp_path / "b", task, 1, FAKE_SMALL_GPU="0").replace(" 183359", " 81559")
    small = re.sub(r"memory_mib=183359", "memory_mib=81559", small)
    assert "memory_mib=183359" not in small
    assert judge(good + small, 2)[0] == 0  # without the plan, a uniform node looks fine
    path = write(tmp_path, "small.log", good + small)
    assert main(["acceptance", "check", path, "--fleet", "a4", *A4]) == 1
    out = capsys.readouterr().out
    assert "FAIL node 1 (a4-node-1): GPU 0 has 81559 MiB, the plan's GPU 180 GB (8 GPUs short)" \
        in out
