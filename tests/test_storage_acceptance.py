"""Storage acceptance and the evidence ledger: the storage task's own commands in bash with a
stand-in for fio; its check on good, slow, failed, cut-off and incomplete logs; `--record`
and `gpufleet ledger verify` against edits, removals, reordering and concurrent appends."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gpufleet.cli import cli, main
from gpufleet.evidence import append_entry, judge_storage, storage, storage_tasks, verify
from gpufleet.evidence.storage import PREFIX

from planutil import EXAMPLES, plan_files

FIO_STAND_IN = r"""#!/bin/bash
# fio, as far as the storage task uses it: the JSON it writes with --output-format=json
for a in "$@"; do case "$a" in --output=*) out="${a#--output=}";; --rw=*) rw="${a#--rw=}";;
esac; done
bw=${FAKE_BW:-700000000}
cat > "$out" <<EOF
{"fio version": "fio-3.33", "timestamp_ms": ${FAKE_END_MS:-1800000006000},
 "jobs": [{"jobname": "$rw", "error": ${FAKE_ERROR:-0},
 "$rw": {"bw_bytes": $bw, "io_bytes": $((bw * 6)), "runtime": 6000}}]}
EOF
exit ${FAKE_ERROR:-0}
"""


@pytest.fixture(scope="module")
def fleet() -> Any:
    report = plan_files([*sorted((EXAMPLES / "fleets").glob("*.yml")), EXAMPLES / "backends.yml"])
    return next(p for p in report.fleets if p.name == "h100-train")


def fio_line(node: int, test: str, scope: str, mbps: float, error: int = 0) -> str:
    # every node's run over the same 10 s (fio's report time less its runtime)
    doc = {"fio version": "fio-3.33", "timestamp_ms": 1_800_000_010_000,
           "jobs": [{"jobname": test, "error": error,
                     test: {"bw_bytes": int(mbps * 1e6), "io_bytes": int(mbps * 1e7),
                            "runtime": 10_000}}]}
    return (f"{PREFIX} fio node={node} fs=h100-data test={test} scope={scope} rc={error} "
            f"json={json.dumps(doc, separators=(',', ':'))}")


def log(nodes: int, mbps: float, error_at: int | None = None, meta: bool = True) -> str:
    lines = [fio_line(0, t, "one", mbps) for t in ("write", "read")]
    lines += [fio_line(i, t, "all", mbps / nodes, 5 if i == error_at else 0)
              for t in ("write", "read") for i in range(nodes)]
    if meta:
        lines.append(f"{PREFIX} meta node=0 fs=h100-data files=20000 create_s=3.1 "
                     "stat_s=0.4 read_s=1.2 unlink_s=2.0 import_s=0.9 rc=0")
    lines.append(f"{PREFIX} done fs=h100-data nodes={nodes}")
    return "\n".join(lines) + "\n"


def test_the_tier_figure_and_the_verdicts(fleet: Any) -> None:
    # FSx for Lustre: 4,800 GiB at 250 MB/s per TiB, and FSx counts 1,200 GiB as 1.2 TiB:
    # 1,200 MB/s (docs.aws.amazon.com/fsx/latest/LustreGuide/managing-throughput-capacity)
    (fs,) = fleet.filesystems
    n = fleet.nodes
    code, lines, figures = judge_storage(log(n, 1200), n, fs, 0.1)
    assert code == 0 and figures["expected_mbps"] == pytest.approx(1200.0), lines
    assert lines[-1].startswith("PASS: h100-data at least 1,080 MB/s")
    code, lines, _ = judge_storage(log(n, 1171.875 * 0.2), n, fs, 0.1)  # 20% of the tier
    assert code == 1 and any(line.startswith("FAIL: write 234 MB/s is under") for line in lines)
    code, lines, _ = judge_storage(log(n, 1200, error_at=1), n, fs, 0.1)
    assert code == 1 and "FAIL node 1: write (all): fio reported an error" in "\n".join(lines)
    # the backends file's figure wins over the tier's
    own = dataclasses.replace(fs, expect_throughput=5000.0)
    assert judge_storage(log(n, 1200), n, own, 0.1)[0] == 1


@pytest.mark.parametrize("mutate", [
    lambda t: t[: len(t) // 2],  # cut off in the middle of a JSON line
    lambda t: t.replace(f"{PREFIX} done fs=h100-data nodes=2\n", ""),  # no done line
    lambda t: "\n".join(x for x in t.splitlines() if "node=1 " not in x
                        or "scope=all" not in x or "test=read" not in x) + "\n",  # a node
    lambda t: t + t.splitlines()[3] + "\n",  # a result twice
    lambda t: t.replace('"jobs":[{', '"jobs":[], "x":[{'),  # no jobs
    lambda t: "\n".join(x for x in t.splitlines() if " meta " not in x) + "\n",
    lambda t: t.replace('"bw_bytes":', '"bw_byte":'),  # no bandwidth
])
def test_an_incomplete_or_unreadable_log_gives_no_verdict(fleet: Any, mutate: Any) -> None:
    (fs,) = fleet.filesystems
    text = log(2, 1200)
    fs2 = dataclasses.replace(fs)
    code, lines, _ = judge_storage(mutate(text), 2, fs2, 0.1)
    assert code == 2, lines
    assert lines[-1] == "no verdict: the storage log is incomplete"


def test_the_tasks_commands_run_in_bash_against_a_stand_in(
        fleet: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the task scaled down as its fio size is: 500 small files, not 20,000 (14 s of bash and
    # Python on the 2-core machine, twice); the judged line reads the same figure
    monkeypatch.setattr(storage, "META_FILES", 500)
    (fs,) = fleet.filesystems
    mount = tmp_path / "mnt"
    mount.mkdir()
    plan = dataclasses.replace(fleet, nodes=1, filesystems=(dataclasses.replace(
        fs, mount=str(mount)),))
    ((target, task),) = storage_tasks(plan, size="1M")
    assert target.name == "h100-data" and task["volumes"] == [{"instance_path": str(mount),
                                                        "path": str(mount)}]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "fio").write_text(FIO_STAND_IN)
    (bin_dir / "fio").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "DSTACK_NODE_RANK": "0",
           "DSTACK_NODES_NUM": "1", "DSTACK_RUN_NAME": "t1", "FAKE_BW": "1300000000"}
    out = subprocess.run(["bash", "-c", task["commands"][-1]], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    code, lines, figures = judge_storage(out.stdout, 1, plan.filesystems[0], 0.1)
    assert code == 0, (lines, out.stdout[-2000:])
    assert figures["metadata_s"]["import_s"] > 0 and figures["write_mbps_all"] == 1300.0
    assert f"{PREFIX} meta node=0 fs={fs.name} files=500 " in out.stdout
    assert not any(mount.joinpath(".gpufleet-storage", "t1").glob("0/*"))  # cleaned up
    env["FAKE_ERROR"] = "5"
    out = subprocess.run(["bash", "-c", task["commands"][-1]], env=env, capture_output=True,
                         text=True, timeout=300)
    assert judge_storage(out.stdout, 1, plan.filesystems[0], 0.1)[0] == 1


def test_acceptance_writes_a_storage_task_and_checks_and_records_its_log(
        fleet: Any, tmp_path: Path) -> None:
    paths = [str(EXAMPLES)]
    out = tmp_path / "tasks"
    assert main(["acceptance", "h100-train", *paths, "--out", str(out)]) == 0
    task = yaml.safe_load((out / "h100-train-storage-perf-h100-data.dstack.yml").read_text())
    assert task["nodes"] == fleet.nodes and "fio" in task["commands"][-1]
    ledger = str(tmp_path / "ledger.jsonl")
    for mbps, want in ((1200, 0), (1171.875 * 0.2, 1)):
        path = tmp_path / f"storage-{want}.log"
        path.write_text(log(fleet.nodes, mbps))
        r = CliRunner().invoke(cli, ["acceptance", "check", str(path), "--fleet", "h100-train",
                                     *paths, "--record", ledger])
        assert r.exit_code == want, r.output
    cut = tmp_path / "cut.log"
    cut.write_text(log(fleet.nodes, 1200)[:300])
    r = CliRunner().invoke(cli, ["acceptance", "check", str(cut), "--fleet", "h100-train",
                                 *paths, "--record", ledger])
    assert r.exit_code == 2
    entries = [json.loads(x) for x in Path(ledger).read_text().splitlines()]
    assert [(e["kind"], e["verdict"]) for e in entries] == [
        ("storage", "pass"), ("storage", "fail"), ("storage", "no verdict")]
    assert entries[1]["figures"]["write_mbps_all"] == pytest.approx(234.4, abs=0.1)
    assert entries[0]["evidence"]["digest"].startswith("sha256:")
    assert CliRunner().invoke(cli, ["ledger", "verify", ledger]).exit_code == 0


def _ledger(tmp_path: Path, n: int = 4) -> str:
    path = str(tmp_path / "l.jsonl")
    for i in range(n):
        append_entry(path, {"kind": "nccl", "fleet": "a4", "nodes": 2, "verdict": "pass",
                            "figures": {"busbw": 600 + i}})
    return path


@pytest.mark.parametrize("tamper", ["edit", "remove", "reorder", "cut", "insert"])
def test_the_chain_catches_tampering(tmp_path: Path, tamper: str) -> None:
    path = _ledger(tmp_path)
    code, lines = verify(path)
    assert code == 0 and "4 entries" in lines[0]
    rows = Path(path).read_text().splitlines()
    if tamper == "edit":
        rows[1] = rows[1].replace('"busbw": 601', '"busbw": 699')
    elif tamper == "remove":
        del rows[1]
    elif tamper == "reorder":
        rows[1], rows[2] = rows[2], rows[1]
    elif tamper == "insert":
        rows.insert(2, rows[2])
    Path(path).write_text("\n".join(rows) + ("\n" if tamper != "cut" else ""))
    code, lines = verify(path)
    assert code == 1 and lines[-1].endswith("is not intact"), lines


def test_a_removed_last_entry_is_caught_with_the_head_kept(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    head = json.loads(Path(path).read_text().splitlines()[-1])["digest"]
    rows = Path(path).read_text().splitlines()[:-1]
    Path(path).write_text("\n".join(rows) + "\n")
    assert verify(path)[0] == 0  # the chain alone cannot tell
    code, lines = verify(path, head)
    assert code == 1 and "is not in the ledger" in lines[0]
    r = CliRunner().invoke(cli, ["ledger", "verify", path, "--head", head])
    assert r.exit_code == 1


def test_concurrent_appends_keep_the_chain(tmp_path: Path) -> None:
    path = str(tmp_path / "c.jsonl")

    def writer(w: int) -> None:
        for i in range(10):
            append_entry(path, {"kind": "pairs", "fleet": "f", "verdict": "pass",
                                "figures": {"writer": w, "i": i}})
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    code, lines = verify(path)
    assert code == 0 and "40 entries" in lines[0], lines
    # an append to a broken ledger is refused, not chained onto the damage
    rows = Path(path).read_text().splitlines()
    Path(path).write_text("\n".join(rows[:5] + rows[6:]) + "\n")
    with pytest.raises(ValueError, match="nothing was appended"):
        append_entry(path, {"kind": "x"})


CONTRACT_BACKENDS = """backends:
  - type: gcp
    project_id: p1
    ssh_cidrs: [203.0.113.0/24]
fleets:
  a4:
    contract:
      busbw: {2: 680, 16: 600}
      storage_mbps: 1000
      max_replacements_per_month: 1
      max_bad_batch_share: 0.05
      replace_within_hours: 24
"""
A4 = ("type: fleet\nname: a4\nnodes: 2\nplacement: cluster\nbackends: [gcp]\n"
      "availability_zones: [us-west2-c]\nspot_policy: auto\nresources:\n  gpu: B200:8\n")


def _at(path: str, when: str, **record: Any) -> None:
    import datetime as dt

    append_entry(path, {"fleet": "a4", **record}, now=dt.datetime.fromisoformat(when))


def month_ledger(path: str) -> None:
    """October 2026 with one breach of each kind, and a November entry that is not counted."""
    nccl = {"kind": "nccl", "verdict": "pass"}
    _at(path, "2026-10-01T00:00:00+00:00", **nccl, nodes=2, figures={"peak_busbw_gbps": 700})
    _at(path, "2026-10-05T00:00:00+00:00", **nccl, nodes=2, figures={"peak_busbw_gbps": 500})
    _at(path, "2026-10-05T12:00:00+00:00", **nccl, nodes=2, figures={"peak_busbw_gbps": 690})
    _at(path, "2026-10-31T00:00:00+00:00", kind="storage", verdict="fail", nodes=2,
        figures={"write_mbps_all": 900.0, "read_mbps_all": 1100.0})
    _at(path, "2026-10-12T00:00:00+00:00", kind="replace", verdict="pass", nodes=1,
        figures={"nodes": ["a4-node-1"], "hours": 30.0})
    _at(path, "2026-10-20T00:00:00+00:00", kind="replace", verdict="pass", nodes=2,
        figures={"nodes": ["a4-node-2", "a4-node-3"], "hours": 2.0})
    _at(path, "2026-10-21T00:00:00+00:00", kind="burn-in", verdict="fail", nodes=16,
        figures={"failed_nodes": 2})
    _at(path, "2026-10-06T00:00:00+00:00", kind="nccl", verdict="no verdict", exit_code=2,
        nodes=2, figures={"peak_busbw_gbps": 1})  # a cut-off run: not a measurement
    _at(path, "2026-11-01T00:00:00+00:00", **nccl, nodes=2, figures={"peak_busbw_gbps": 100})


def test_the_contract_report_names_each_breach(tmp_path: Path, update_golden: bool) -> None:
    from conftest import compare_or_update
    from planutil import write

    files = [write(tmp_path, "backends.yml", CONTRACT_BACKENDS), write(tmp_path, "a4.yml", A4)]
    ledger = str(tmp_path / "ledger.jsonl")
    month_ledger(ledger)
    r = CliRunner().invoke(cli, ["contract", "report", ledger, *files, "--month", "2026-10"])
    assert r.exit_code == 1, r.output
    assert "contract report 2026-10: 5 term(s), 5 breached" in r.output
    for term in ("busbw", "storage_mbps", "max_replacements_per_month",
                 "replace_within_hours", "max_bad_batch_share"):
        assert f"BREACHED    a4 {term}:" in r.output
    assert "12.0 h below" in r.output  # 500 GB/s from the 5th, 00:00 until 12:00
    assert "24.0 h below" in r.output  # storage under its figure until the month's end
    md = CliRunner().invoke(cli, ["contract", "report", ledger, *files, "--month", "2026-10",
                                  "--format", "markdown"])
    compare_or_update(Path(__file__).parent / "golden" / "contract-2026-10.md", md.output,
                      update_golden)
    doc = json.loads(CliRunner().invoke(cli, ["contract", "report", ledger, *files, "--month",
                                              "2026-10", "--format", "json"]).output)
    assert doc["breached"] and all(t["entries"] for t in doc["terms"])
    # a month whose only check meets nothing else: terms without evidence say so, exit 1 on
    # the November NCCL breach only
    r = CliRunner().invoke(cli, ["contract", "report", ledger, *files])
    assert r.exit_code == 1 and "2026-11" in r.output and "no evidence" in r.output
    # a tampered ledger gets no report
    rows = Path(ledger).read_text().splitlines()
    Path(ledger).write_text("\n".join(rows[:2] + rows[3:]) + "\n")
    r = CliRunner().invoke(cli, ["contract", "report", ledger, *files, "--month", "2026-10"])
    assert r.exit_code == 1 and "not intact" in r.output


def test_the_scaling_report_records_each_node_count_for_the_busbw_term(tmp_path: Path) -> None:
    import shutil

    work = tmp_path / "ex"
    shutil.copytree(EXAMPLES, work)
    with (work / "backends.yml").open("a") as f:
        f.write("  a4:\n    contract:\n      busbw: {2: 100000}\n")  # under `fleets:`
    logs = [str(work / "logs" / f"a4-nccl-{n}nodes.log") for n in (2, 4, 8)]
    ledger = str(tmp_path / "ledger.jsonl")
    main(["acceptance", "report", *logs, "--fleet", "a4", str(work), "--record", ledger])
    entries = [json.loads(x) for x in Path(ledger).read_text().splitlines()]
    assert [(e["kind"], e["nodes"]) for e in entries] == [("nccl", 2), ("nccl", 4), ("nccl", 8)]
    assert all(e["figures"]["peak_busbw_gbps"] > 0 for e in entries)
    r = CliRunner().invoke(cli, ["contract", "report", ledger, str(work)])
    assert r.exit_code == 1 and "BREACHED    a4 busbw: 3 of 3 check(s)" in r.output, r.output


def test_a_whole_fio_json_document_is_read_as_fio_writes_it(fleet: Any) -> None:
    """fio's full JSON (tests/cases/storage), compacted onto the task's line as it prints it."""
    doc = json.loads((Path(__file__).parent / "cases" / "storage" /
                      "fio-3.33-write-group.json").read_text())
    compact = json.dumps(doc, separators=(",", ":"))
    text = log(1, 1200).replace(
        fio_line(0, "write", "all", 1200).split(" json=", 1)[1], compact)
    (fs,) = fleet.filesystems
    code, _, figures = judge_storage(text, 1, fs, 0.1)
    assert figures["write_mbps_all"] == 701.0 and code == 1  # 701 MB/s < 1,055 MB/s


def test_a_dstack_volume_gets_a_one_node_storage_task(tmp_path: Path) -> None:
    """The a4 fleet's runs can attach the a4-checkpoints volume (its zone): one node, the
    volume by name; pd-balanced has no flat figure, gp3 its 125 MiB/s baseline."""
    from gpufleet.compile import VolumeDesign
    from gpufleet.evidence import volume_storage

    out = tmp_path / "tasks"
    assert main(["acceptance", "a4", str(EXAMPLES), "--out", str(out)]) == 0
    task = yaml.safe_load((out / "a4-storage-perf-a4-checkpoints.dstack.yml").read_text())
    assert task["nodes"] == 1 and task["volumes"] == [{"name": "a4-checkpoints",
                                                       "path": "/gpufleet-volume"}]
    text = log(1, 300).replace("fs=h100-data", "fs=a4-checkpoints")
    path = tmp_path / "vol.log"
    path.write_text(text)
    r = CliRunner().invoke(cli, ["acceptance", "check", str(path), "--fleet", "a4",
                                 str(EXAMPLES)])
    assert r.exit_code == 0 and "no documented flat figure for pd-balanced" in r.output
    gp3 = volume_storage(VolumeDesign("ckpt", "v.yml", "aws", None, "us-east-1",  # type: ignore
                                      "us-east-1a", 500, "gp3"))
    assert judge_storage(text.replace("a4-checkpoints", "ckpt"), 1, gp3, 0.1)[0] == 0
    slow = log(1, 60).replace("fs=h100-data", "fs=ckpt")
    code, _, figures = judge_storage(slow, 1, gp3, 0.1)
    assert code == 1 and figures["expected_mbps"] == 131.1 and "125 MiB/s" in figures["source"]


def _timed(node: int, test: str, mbps: float, start_s: float, seconds: float) -> str:
    """A node's fio result for a run from ``start_s`` lasting ``seconds``."""
    end_ms = int(1_800_000_000_000 + (start_s + seconds) * 1000)
    doc = {"fio version": "fio-3.33", "timestamp_ms": end_ms, "jobs": [{
        "jobname": "gpufleet", "error": 0, test: {
            "bw_bytes": int(mbps * 1e6), "io_bytes": int(mbps * 1e6 * seconds),
            "runtime": int(seconds * 1000)}}]}
    return (f"{PREFIX} fio node={node} fs=h100-data test={test} scope=all rc=0 "
            f"json={json.dumps(doc, separators=(',', ':'))}")


def test_the_aggregate_is_judged_over_the_window_the_runs_share(fleet: Any) -> None:
    """Two nodes at 700 MB/s each: 1,400 MB/s when their runs overlap; when one ran after the
    other the filesystem never delivered more than 700 (issue 53, item 13)."""
    (fs,) = fleet.filesystems
    own = dataclasses.replace(fs, expect_throughput=1300.0)

    def text(second_start: float) -> str:
        lines = [fio_line(0, t, "one", 700) for t in ("write", "read")]
        lines += [_timed(0, t, 700, 0, 10) for t in ("write", "read")]
        lines += [_timed(1, t, 700, second_start, 10) for t in ("write", "read")]
        return log(2, 1).split("\n", 0)[0].replace(log(2, 1), "") + "\n".join(lines) + \
            "\n" + "\n".join(x for x in log(2, 1).splitlines() if " meta " in x
                              or " done " in x) + "\n"
    code, lines, figures = judge_storage(text(0), 2, own, 0.05)
    assert code == 0 and figures["write_mbps_all"] == 1400.0, lines
    code, lines, figures = judge_storage(text(10), 2, own, 0.05)  # one after the other
    assert code == 1 and figures["write_mbps_all"] == 700.0, lines


def test_the_read_job_reads_the_files_the_write_job_wrote(fleet: Any) -> None:
    """One fio job name for both passes: fio names its files <job>.<n>.0, so the read pass
    finds the written files instead of laying out its own (double the space)."""
    (_, task), *_ = storage_tasks(fleet)
    script = task["commands"][-1]
    assert "--name=gpufleet " in script and '--name="$1"' not in script


def test_the_files_fio_writes_fit_the_volume(fleet: Any) -> None:
    """Every node's jobs together write at most half the capacity: a 20 GiB volume gets
    2560M a job (4 jobs), where 4G each would fill it; a large Lustre keeps the 4G asked."""
    from gpufleet.compile import VolumeDesign
    from gpufleet.evidence import volume_storage
    from gpufleet.evidence.storage import sized

    small = volume_storage(VolumeDesign("ckpt", "v.yml", "aws", None, "us-east-1",  # type: ignore
                                        "us-east-1a", 20, "gp3"))
    assert sized("4G", small, 1) == "2560M"
    (fs,) = fleet.filesystems
    assert sized("4G", fs, fleet.nodes) == "4G"
    assert sized("512M", small, 1) == "512M"
