"""Cluster acceptance: the NCCL task per fleet and the checker of nccl-tests logs (written here
in nccl-tests' documented output format: the size/count/type/redop/root table with time,
algbw, busbw and #wrong for out-of-place and in-place, and the "Avg bus bandwidth" line)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpufleet.cli import main
from gpufleet.evidence import fabric_facts, parse_log
from gpufleet.input.schema_files import validator

from acceptanceutil import A4, HEADER, log, row
from planutil import EXAMPLES, TEST_KEY, write


def check(tmp: Path, text: str, fleet: str = "a4", files: list[str] = A4,
          capsys: pytest.CaptureFixture[str] | None = None) -> tuple[int, str]:
    path = write(tmp, "nccl.log", text)
    code = main(["acceptance", "check", path, "--fleet", fleet, *files])
    out = capsys.readouterr().out if capsys else ""
    return code, out


def test_a4_task_validates_and_spans_every_gpu_of_every_node(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["acceptance", "a4", *A4, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "passes at >= 612 GB/s" in out and "680" in out
    task = yaml.safe_load((tmp_path / "a4-nccl.dstack.yml").read_text())
    assert list(validator("task").iter_errors(task)) == []
    assert task["type"] == "task" and task["nodes"] == 2 and task["fleets"] == ["a4"]
    assert task["resources"]["gpu"] == "B200:8"
    assert task["env"]["NCCL_NET"] == "gIB"
    run = task["commands"][-1]
    assert '-n "$DSTACK_GPUS_NUM" -N "$DSTACK_GPUS_PER_NODE"' in run
    assert "all_reduce_perf -b 8 -e 8G" in run and "-x NCCL_NET" in run
    assert task["startup_order"] == "workers-first" and task["stop_criteria"] == "master-done"
    # the fabric's software is required, not sourced when present: a node without it stops
    # the run with a line the checker fails on, and the plugin the host installed is mounted
    text = "\n".join(task["commands"])
    assert "no roce collective software on the host" in text
    assert "else echo \"gpufleet acceptance: node ${DSTACK_NODE_RANK:-0}: host setup not " \
           "ready: no /usr/local/gib/scripts/set_nccl_env.sh" in text
    assert {"instance_path": "/usr/local/gib", "path": "/usr/local/gib"} in task["volumes"]
    log = write(tmp_path, "gib.log", "gpufleet acceptance: node 1: host setup not ready: no "
                "roce collective software on the host (re-run the host setup)\n")
    assert main(["acceptance", "check", log, "--fleet", "a4", *A4]) == 1


@pytest.mark.parametrize(("fleet", "env", "value"), [
    ("h100-train", "FI_PROVIDER", "efa"),
    ("nd-h100", "NCCL_TOPO_FILE", "/opt/microsoft/ndv5-topo.xml"),
])
def test_each_fabric_gets_its_settings_and_says_when_there_is_no_threshold(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], fleet: str, env: str,
        value: str) -> None:
    assert main(["acceptance", fleet, str(EXAMPLES), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "no bandwidth threshold: no published figure for this fabric" in out
    task = yaml.safe_load((tmp_path / f"{fleet}-nccl.dstack.yml").read_text())
    assert list(validator("task").iter_errors(task)) == []
    assert task["env"][env] == value and f"-x {env}" in task["commands"][-1]


def test_a_fleet_without_rdma_gets_a_single_node_run(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, "f.yml", "type: fleet\nname: l4s\nnodes: 3\nbackends: [gcp]\n"
              "spot_policy: auto\nresources:\n  gpu: L4:4\n")
    b = write(tmp_path, "b.yml", f"access:\n  ssh_public_key: {TEST_KEY}\nbackends:\n"
              "  - type: gcp\n    project_id: p1\n")
    assert main(["acceptance", "l4s", f, b, "--out", str(tmp_path)]) == 0
    assert "a single-node run" in capsys.readouterr().out
    task = yaml.safe_load((tmp_path / "l4s-nccl.dstack.yml").read_text())
    assert task["nodes"] == 1 and "startup_order" not in task
    assert task["commands"][-1].endswith("all_reduce_perf -b 8 -e 8G -f 2 -g 4 -c 1 -n 50")


def test_every_fabric_fact_has_a_source() -> None:
    facts = fabric_facts()
    assert all(f["source"] for f in facts["fabrics"].values())
    assert all(e["source"] and e["busbw_gbps"] > 0 for e in facts["expected"].values())


def test_a_healthy_log_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = check(tmp_path, log(676.5), capsys=capsys)
    assert code == 0 and out.rstrip().endswith("PASS")
    assert "peak bus bandwidth: 676.5 GB/s at 256 MiB" in out
    assert "bandwidth plateaus from 256 MiB" in out
    assert "average bus bandwidth (nccl-tests): 225.5 GB/s" in out


def test_low_bandwidth_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = check(tmp_path, log(4.2), capsys=capsys)  # NCCL fell back to TCP
    assert code == 1 and "FAIL: peak 4.2 GB/s is below 612 GB/s" in out


def test_wrong_results_fail_even_without_a_threshold(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = check(tmp_path, log(380.0, wrong_at=20, nodes=4, gpu="NVIDIA H100 80GB HBM3"), "h100-train", [str(EXAMPLES)],
                      capsys)
    assert code == 1 and "FAIL: wrong results (#wrong > 0) at 1 MiB" in out
    code, out = check(tmp_path, log(380.0, nodes=4, gpu="NVIDIA H100 80GB HBM3"), "h100-train", [str(EXAMPLES)], capsys)
    assert code == 0 and "no bandwidth threshold" in out


def test_a_cut_off_log_is_unreadable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = log(700.0, last=31, avg=False)
    cut = text[: text.rindex("#")]  # cut off mid-run: no summary
    code, out = check(tmp_path, cut, capsys=capsys)
    assert code == 2 and "no 'Avg bus bandwidth' line: the run was cut off" in out
    code, out = check(tmp_path, cut[: len(cut) - 40], capsys=capsys)  # half of the last row
    assert code == 2 and "is not a number nccl-tests writes" in out


# Each hostile log: what the checker says and how it exits. None of them passes.
HOSTILE = {
    "out of bounds FAILED": (log(700.0).replace("# Out of bounds values : 0 OK",
                                                "# Out of bounds values : 12 FAILED"), 1,
                             "nccl-tests found 12 out-of-bounds value(s)"),
    "#wrong 'lots'": (log(700.0).replace("      0      99.00", "   lots      99.00", 1), 2,
                      "'lots' is not a number"),
    "#wrong 5,000 digits": (log(700.0).replace("      0      99.00",
                                               " " + "9" * 5000 + "      99.00", 1), 2,
                            "is not a number nccl-tests writes"),
    "#wrong -5": (log(700.0).replace("      0      99.00", "     -5      99.00", 1), 2,
                  "'-5' is not a number"),
    "busbw 1e308": (log(700.0).replace("700.00", "1e308", 1), 2, "'1e308' is not a number"),
    "busbw above any interconnect": (log(9000.0), 2, "more than any GPU interconnect carries"),
    "busbw nan": (log(700.0).replace("700.00", "nan", 1), 2, "'nan' is not a number"),
    "non-ASCII digits": (log(700.0).replace("700.00", "\u0667\u0660\u0660.00", 1), 2,
                         "is not a number"),
    "digit separator": (log(700.0).replace("700.00", "7_00.00", 1), 2, "'7_00.00'"),
    "time garbage": (log(700.0).replace("    100.00  ", "    1x0.0?  ", 1), 2, "1x0.0?"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_logs_never_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 case: str) -> None:
    text, want, says = HOSTILE[case]
    code, out = check(tmp_path, text, capsys=capsys)
    assert code == want and says in out, out


def test_two_runs_are_judged_one_by_one(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    failing_then_passing = log(4.2) + log(700.0)
    code, out = check(tmp_path, failing_then_passing, capsys=capsys)
    assert code == 1 and "2 runs in this log, judged one by one" in out
    assert "run 1 (line 22): FAIL: peak 4.2 GB/s is below 612 GB/s" in out
    no_header = log(700.0) + "\n".join(log(4.2).splitlines()[7:]) + "\n"  # table only
    code, out = check(tmp_path, no_header, capsys=capsys)
    assert code == 1 and "2 runs in this log" in out


def test_interleaved_runs_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = log(700.0).splitlines(), log(4.2).splitlines()
    mixed = [a[0], *a[1:7]] + [x for pair in zip(a[7:-2], b[7:-2], strict=True) for x in pair]
    code, out = check(tmp_path, "\n".join([*mixed, *a[-2:]]) + "\n", capsys=capsys)
    assert code == 2 and "repeats: two runs are mixed in this log" in out


def test_a_log_over_the_read_bound_says_so(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from gpufleet.evidence import MAX_LOG_BYTES

    noise = "[node-0] NCCL INFO " + "x" * 200 + "\n"
    text = noise * (MAX_LOG_BYTES // len(noise) + 1) + log(4.2)  # a failing table past 50 MB
    code, out = check(tmp_path, text, capsys=capsys)
    assert code == 2 and "larger than 50 MB" in out


@pytest.mark.parametrize("text", ["", "mpirun: command not found\n", HEADER,
                                  "\x00\x01\x02" * 100, "# Avg bus bandwidth : 12\n"])
def test_unreadable_logs_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                text: str) -> None:
    code, out = check(tmp_path, text, capsys=capsys)
    assert code == 2 and "unreadable log" in out


def test_parse_keeps_both_sides_and_na_wrong() -> None:
    text = HEADER + row(1 << 30, 500.0, "N/A") + "\n"
    parsed = parse_log(text)
    assert len(parsed.rows) == 1 and parsed.rows[0].wrong_out is None
    assert parsed.rows[0].busbw == 500.0


def test_usage_errors(tmp_path: Path) -> None:
    assert main(["acceptance", "check", str(tmp_path / "none.log"), "--fleet", "a4", *A4]) == 2
    assert main(["acceptance", "check", "x.log", *A4]) == 2  # no --fleet
    assert main(["acceptance", "nosuch", *A4]) == 2


def test_a_cluster_fleet_that_may_grow_to_two_nodes_is_tested_across_two(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`nodes: 0..2`: the fleet holds no node yet, but the task must test the link between
    nodes, so it asks for two (dstack provisions them in the fleet for the task)."""
    f = write(tmp_path, "f.yml", "type: fleet\nname: a4\nnodes: 0..2\nplacement: cluster\n"
              "backends: [gcp]\nspot_policy: auto\nresources:\n  gpu: B200:8\n")
    b = write(tmp_path, "b.yml", f"access:\n  ssh_public_key: {TEST_KEY}\nbackends:\n"
              "  - type: gcp\n    project_id: p1\n")
    assert main(["acceptance", "a4", f, b, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "the task runs on 2 nodes: the fleet holds 0 now" in out
    assert "passes at >=" in out  # a multi-node expectation, not "a single-node run"
    task = yaml.safe_load((tmp_path / "a4-nccl.dstack.yml").read_text())
    assert task["nodes"] == 2 and task["startup_order"] == "workers-first"
    # A fleet capped at one node stays a single-node run.
    f = write(tmp_path, "f.yml", "type: fleet\nname: a4\nnodes: 0..1\nplacement: cluster\n"
              "backends: [gcp]\nspot_policy: auto\nresources:\n  gpu: B200:8\n")
    assert main(["acceptance", "a4", f, b, "--out", str(tmp_path), "--force"]) == 0
    assert yaml.safe_load((tmp_path / "a4-nccl.dstack.yml").read_text())["nodes"] == 1
