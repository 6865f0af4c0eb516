"""Storage acceptance of mounted buckets (issue 59): the task reads a bucket's mount from every
node (a read-write mount: files node 0 writes; read-only: the bucket's own largest files),
and the verdict asks for every node's whole read, with no figure to judge speed by (no store
publishes one for its FUSE client)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from test_buckets import MOUNTS, _files

from gpufleet.cli import cli
from gpufleet.compile.compiler import compile_inputs
from gpufleet.evidence import bucket_storage, judge_storage, storage_tasks
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog


def _plan(tmp: Path) -> Any:
    [plan] = compile_inputs(validate_paths(_files(tmp, MOUNTS)).inputs, load_catalog()).plans
    return plan


def _run(task: dict[str, Any], mount: Path, nodes: int, **env: str) -> str:
    """The task's command on ``nodes`` local "nodes" at once, the bucket's mount a folder."""
    script = task["commands"][-1].replace(task["volumes"][0]["path"], str(mount))
    runs = [subprocess.Popen(["bash", "-c", script], text=True, stdout=subprocess.PIPE,
                             env={**os.environ, "DSTACK_NODE_RANK": str(r),
                                  "DSTACK_NODES_NUM": str(nodes), "DSTACK_RUN_NAME": "t",
                                  "GPUFLEET_POLL_SECONDS": "0.1", **env})
            for r in range(nodes)]
    return "".join(p.communicate(timeout=120)[0] for p in runs)


def _tasks(plan: Any, size: str = "2M") -> dict[str, tuple[Any, dict[str, Any]]]:
    return {fs.name: (fs, t) for fs, t in storage_tasks(plan, size) if fs.kind == "bucket"}


def test_every_node_reads_a_read_write_mount_and_node_0_cleans_up(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    fs, task = _tasks(plan)["acme-ckpt--use1-az4--x-s3"]
    assert task["nodes"] == plan.nodes and task["volumes"] == [
        {"instance_path": "/mnt/ckpt", "path": "/mnt/ckpt"}]
    mount = tmp_path / "ckpt"
    mount.mkdir()
    log = _run(task, mount, 2)
    code, lines, figures = judge_storage(log, 2, fs, 0.1)
    assert code == 0, lines
    assert figures["read_mbps_all"] > 0 and figures["write_mbps_one"] > 0
    assert "every node read its 4 file(s)" in lines[-1] and "not its speed" in lines[-1]
    assert "cleaned=yes" in log and not any((mount / ".gpufleet-storage").iterdir())
    # hostile logs: a node missing, a node twice, an I/O error, a short read, nothing read,
    # a forged rate
    reads = [x for x in log.splitlines() if "test=read" in x]
    assert judge_storage(log.replace(reads[1], ""), 2, fs, 0.1)[0] == 2
    assert judge_storage(log + reads[0] + "\n", 2, fs, 0.1)[0] == 2
    want = int(re.search(r"want=(\d+)", reads[0]).group(1))  # type: ignore[union-attr]
    for changed, code in (({"rc": "1"}, 1), ({"bytes": str(want - 1)}, 1),
                          ({"bytes": "0", "want": "0"}, 1), ({"rc": "x"}, 2),
                          ({"bytes": "9" * 15, "start_ms": "1", "end_ms": "2"}, 2),
                          ({"start_ms": "9" * 14}, 2)):
        assert judge_storage(log.replace(reads[0], _set(reads[0], **changed)), 2, fs,
                             0.1)[0] == code, changed
    assert judge_storage(log, 3, fs, 0.1)[0] == 2  # the run spans fewer nodes than the fleet


def _set(line: str, **values: str) -> str:
    for key, value in values.items():
        line = re.sub(rf"\b{key}=\S+", f"{key}={value}", line)
    return line


def test_a_read_only_mount_is_read_from_its_own_files_and_an_empty_one_is_no_verdict(
        tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    fs, task = _tasks(plan)["acme-use1"]
    assert fs.service.endswith("read-only")
    mount = tmp_path / "use1"
    mount.mkdir()
    code, lines, _ = judge_storage(_run(task, mount, 2), 2, fs, 0.1)
    assert code == 2 and "holds no file to read" in " ".join(lines)
    (mount / "shard-0").write_bytes(b"x" * (3 << 20))
    (mount / "sub").mkdir()
    (mount / "sub" / "shard-1").write_bytes(b"y" * (1 << 20))
    log = _run(task, mount, 2)
    code, lines, figures = judge_storage(log, 2, fs, 0.1)
    assert code == 0, lines
    assert all("bytes=4194304 want=4194304" in x for x in log.splitlines() if "read" in x)
    assert "write_mbps_one" not in figures and not (mount / ".gpufleet-storage").exists()


def test_acceptance_writes_the_bucket_task_and_records_its_verdict_apart(
        tmp_path: Path) -> None:
    paths = _files(tmp_path / "in", MOUNTS)
    out = tmp_path / "tasks"
    r = CliRunner().invoke(cli, ["acceptance", "p5", *paths, "--out", str(out)])
    assert r.exit_code == 0, r.output
    task = yaml.safe_load((out / "p5-storage-perf-acme-use1.dstack.yml").read_text())
    text = (out / "p5-storage-perf-acme-use1.dstack.yml").read_text()
    assert "no published per-node figure" in text and task["nodes"] == 2
    plan = _plan(tmp_path / "p")
    mount = tmp_path / "m"
    mount.mkdir()
    (mount / "a").write_bytes(b"z" * (1 << 20))
    log = tmp_path / "bucket.log"
    log.write_text(_run(_tasks(plan)["acme-use1"][1], mount, 2))
    ledger = str(tmp_path / "l.jsonl")
    r = CliRunner().invoke(cli, ["acceptance", "check", str(log), "--fleet", "p5", *paths,
                                 "--record", ledger])
    assert r.exit_code == 0, r.output
    [entry] = [json.loads(x) for x in Path(ledger).read_text().splitlines()]
    # a bucket's run is its own kind: a contract's storage term never counts it
    assert entry["kind"] == "bucket" and entry["figures"]["filesystem"] == "acme-use1"


@pytest.mark.parametrize("name", ["acme.data.v2", "acme_data"])
def test_a_bucket_name_with_dots_or_underscores_is_found_in_its_log(name: str) -> None:
    from gpufleet.cli.verdicts import storage_target
    from gpufleet.compile import BucketMountDesign

    fs = bucket_storage(BucketMountDesign(bucket=name, cloud="gcp", client="gcsfuse",
                                          path="/d", read_only=True, region="us-central1"))
    line = (f"gpufleet storage: bucket node=0 fs={name} test=read nodes=1 files=1 bytes=5 "
            "want=5 start_ms=1000 end_ms=2000 rc=0")
    other = bucket_storage(BucketMountDesign(bucket=name + "x", cloud="gcp", client="gcsfuse",
                                             path="/e", read_only=True, region="us-central1"))
    assert storage_target(line, [other, fs]) == (fs, name)
    assert judge_storage(line, 1, fs, 0.1)[0] == 0


def test_the_burn_in_asks_every_node_whether_its_buckets_mounted(tmp_path: Path) -> None:
    from burninutil import node_log

    from gpufleet.evidence import burnin_task, expected_checks
    from gpufleet.evidence.burnin import judge

    plan = _plan(tmp_path)
    assert "buckets" in expected_checks(plan)
    task = burnin_task(plan, "nvcr.io/nvidia/pytorch:24.12-py3")

    runs = iter(range(100))

    def node(rank: int, marker: str | None) -> str:
        where = tmp_path / f"n{next(runs)}"
        (where / "host").mkdir(parents=True)
        if marker is not None:
            (where / "host" / f"buckets-{marker}").write_text(
                "status=ready\nacme-use1=/mnt/data\n" if marker == "ready" else
                "status=failed\nreason=cannot mount bucket acme-use1 at /mnt/data\n")
        return node_log(where, task, rank, FAKE_GPUS="8")

    good = node(0, "ready")
    assert "check=buckets verdict=ready" in good
    assert judge(good + node(1, "ready"), 2, gpus_planned=8,
                 expect=expected_checks(plan))[0] == 0
    code, lines = judge(good + node(1, "failed"), 2, gpus_planned=8,
                        expect=expected_checks(plan))
    assert code == 1 and any("the buckets did not mount" in x for x in lines), lines
    assert judge(good + node(1, None), 2, gpus_planned=8,  # no marker at all: not mounted
                 expect=expected_checks(plan))[0] == 1
    # a verdict gpufleet never prints is no evidence; a node that never said is incomplete
    forged = node(1, "ready").replace("check=buckets verdict=ready",
                                      "check=buckets verdict=probably")
    assert judge(good + forged, 2, gpus_planned=8, expect=expected_checks(plan))[0] == 2
    silent = "\n".join(x for x in node(1, "ready").splitlines() if "check=buckets" not in x)
    assert judge(good + silent, 2, gpus_planned=8, expect=expected_checks(plan))[0] == 2
