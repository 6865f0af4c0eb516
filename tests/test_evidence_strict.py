"""Bad evidence never counts (issue 52): storage verdicts on the evidence model, a ledger that
records only finite JSON in a regular file under a lock on the file itself, and a contract
report that counts only what passed, reading only well-typed entries."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpufleet.cli import cli
from gpufleet.evidence import LedgerError, append_entry, judge_storage, read_entries, verify
from gpufleet.evidence.storage import PREFIX

from planutil import EXAMPLES, plan_files, write

# --- storage verdicts ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def lustre() -> Any:
    report = plan_files([*sorted((EXAMPLES / "fleets").glob("*.yml")), EXAMPLES / "backends.yml"])
    (fs,) = next(p for p in report.fleets if p.name == "h100-train").filesystems
    return dataclasses.replace(fs, expect_throughput=1000.0)


def fio(node: int, test: str, scope: str, bw: Any, rc: str = "0", job: str | None = None,
        raw_bw: str | None = None) -> str:
    moved = bw * 10 if isinstance(bw, int) and not isinstance(bw, bool) else 0
    doc = {"fio version": "fio-3.33", "timestamp_ms": 1_800_000_010_000,
           "jobs": [{"jobname": job or test, "error": 0,
                     test: {"bw_bytes": bw, "io_bytes": moved, "runtime": 10_000}}]}
    text = json.dumps(doc, separators=(",", ":"))
    if raw_bw is not None:
        text = text.replace('"bw_bytes":0', f'"bw_bytes":{raw_bw}')
    return (f"{PREFIX} fio node={node} fs=h100-data test={test} scope={scope} rc={rc} "
            f"json={text}")


def storage_log(nodes: int, per_node: float = 600e6, done: int | None = None,
                extra: tuple[str, ...] = ()) -> str:
    lines = [fio(0, t, "one", int(per_node)) for t in ("write", "read")]
    lines += [fio(i, t, "all", int(per_node)) for t in ("write", "read") for i in range(nodes)]
    lines += list(extra)
    lines.append(f"{PREFIX} meta node=0 fs=h100-data files=20000 create_s=3.1 stat_s=0.4 "
                 "read_s=1.2 unlink_s=2.0 import_s=0.9 rc=0")
    lines.append(f"{PREFIX} done fs=h100-data nodes={nodes if done is None else done}")
    return "\n".join(lines) + "\n"


def test_a_whole_run_passes_as_the_baseline(lustre: Any) -> None:
    code, lines, figures = judge_storage(storage_log(2), 2, lustre, 0.1)
    assert code == 0 and figures["write_mbps_all"] == 1200.0, lines


@pytest.mark.parametrize("text, why", [
    (storage_log(12, per_node=100e6), "the fleet has 2"),  # a 12-node run, a 2-node fleet
    (storage_log(2, extra=(fio(5, "write", "all", 10**9),)), "beyond the run's 2"),
    (storage_log(2, extra=(fio(2, "read", "all", 10**9),)), "beyond the run's 2"),
    (storage_log(2).replace("scope=one", "scope=one", 1).replace(
        "fio node=0 fs=h100-data test=write scope=one", "fio node=1 fs=h100-data test=write "
        "scope=one"), "other than 0"),
    (storage_log(2, extra=(fio(1, "write", "all", 0, raw_bw="Infinity"),)), ""),
    (storage_log(2).replace('"bw_bytes":600000000', '"bw_bytes":1e300', 1), "bandwidth"),
    (storage_log(2).replace('"bw_bytes":600000000', '"bw_bytes":-600000000', 1), "bandwidth"),
    (storage_log(2).replace('"bw_bytes":600000000', '"bw_bytes":NaN', 1), "corrupt"),
    (storage_log(2).replace('"bw_bytes":600000000', '"bw_bytes":"600000000"', 1), "bandwidth"),
    (storage_log(2).replace('"bw_bytes":600000000', '"bw_bytes":true', 1), "bandwidth"),
    (storage_log(2).replace('"bw_bytes":600000000', f'"bw_bytes":{10**15}', 1),
     "not a measurement"),
    (storage_log(2).replace("rc=0 json", "rc=0 node=1 json", 1), "unreadable"),
])
def test_results_the_run_cannot_have_are_unreadable(lustre: Any, text: str, why: str) -> None:
    code, lines, _ = judge_storage(text, 2, lustre, 0.1)
    assert code == 2, lines
    assert why in "\n".join(lines)


def test_fields_come_from_the_line_not_from_inside_fios_json(lustre: Any) -> None:
    """A job named ` rc=0 ` inside fio's JSON does not hide the real exit status."""
    text = storage_log(2).replace(
        fio(1, "read", "all", int(600e6)),
        fio(1, "read", "all", int(600e6), rc="5", job="x rc=0 node=0 scope=one y"))
    code, lines, _ = judge_storage(text, 2, lustre, 0.1)
    assert code == 1 and "FAIL node 1: read (all): fio reported an error (exit 5" in \
        "\n".join(lines)


# --- the ledger ----------------------------------------------------------------------------

def test_a_number_json_cannot_carry_is_never_written(tmp_path: Path) -> None:
    path = str(tmp_path / "l.jsonl")
    append_entry(path, {"kind": "nccl", "figures": {"peak_busbw_gbps": 1.0}})
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(LedgerError, match="not finite"):
            append_entry(path, {"kind": "nccl", "figures": {"peak_busbw_gbps": bad}})
    assert len(Path(path).read_text().splitlines()) == 1 and verify(path)[0] == 0


def test_a_bare_nan_in_the_file_is_not_an_entry(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    append_entry(str(path), {"kind": "nccl", "figures": {"peak_busbw_gbps": 1.0}})
    path.write_text(path.read_text().replace("1.0", "NaN"))
    code, lines = verify(str(path))
    assert code == 1 and "not a JSON entry" in lines[0]


@pytest.mark.parametrize("target", ["fifo", "/dev/null", "/dev/zero", "folder"])
def test_a_ledger_must_be_a_regular_file(tmp_path: Path, target: str) -> None:
    if target == "fifo":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)
    elif target == "folder":
        path = str(tmp_path)
    else:
        path = target
    before = sorted(os.listdir(os.path.dirname(path)))
    r = CliRunner().invoke(cli, ["ledger", "verify", path])
    assert r.exit_code == 2 and ("not a regular file" in r.output or "cannot open" in
                                 r.output), r.output
    with pytest.raises(LedgerError):
        append_entry(path, {"kind": "x"})
    with pytest.raises(LedgerError):
        read_entries(path)
    assert sorted(os.listdir(os.path.dirname(path))) == before  # no LEDGER.lock beside it


def _append_many(path: str, writer: int, count: int) -> None:
    for i in range(count):
        append_entry(path, {"kind": "pairs", "fleet": "f", "verdict": "pass",
                            "figures": {"writer": writer, "i": i}})


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_appends_through_a_link_and_its_target_exclude_each_other(
        tmp_path: Path, link: str) -> None:
    target = tmp_path / "ledger.jsonl"
    target.write_text("")
    other = tmp_path / "via-link.jsonl"
    (os.symlink if link == "symlink" else os.link)(target, other)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(str(p), w, 25))
             for w, p in enumerate([target, other, target, other])]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    code, lines = verify(str(target))
    assert code == 0 and "100 entries" in lines[0], lines


# --- the contract report -------------------------------------------------------------------

BACKENDS = """backends:
  - type: gcp
    project_id: p1
fleets:
  a4:
    contract:
      busbw: {2: 680}
      storage_mbps: 1000
      max_replacements_per_month: 1
      replace_within_hours: 24
      max_failed_nodes_per_month: 1
"""
A4 = ("type: fleet\nname: a4\nnodes: 2\nplacement: cluster\nbackends: [gcp]\n"
      "availability_zones: [us-west2-c]\nspot_policy: auto\nresources:\n  gpu: B200:8\n")


def _report(tmp_path: Path, entries: list[dict[str, Any]], *extra: str) -> tuple[int, Any]:
    files = [write(tmp_path, "backends.yml", BACKENDS), write(tmp_path, "a4.yml", A4)]
    ledger = str(tmp_path / "ledger.jsonl")
    for e in entries:
        when = e.pop("at", "2026-10-10T00:00:00+00:00")
        append_entry(ledger, {"fleet": "a4", **e}, now=dt.datetime.fromisoformat(when))
    r = CliRunner().invoke(cli, ["contract", "report", ledger, *files, "--format", "json",
                                 *extra])
    try:
        return r.exit_code, json.loads(r.output)
    except ValueError:
        return r.exit_code, r.output


def _term(doc: Any, term: str) -> dict[str, Any]:
    return next(t for t in doc["terms"] if t["term"] == term)


def test_a_failed_nccl_check_never_meets_the_busbw_term(tmp_path: Path) -> None:
    code, doc = _report(tmp_path, [
        {"kind": "nccl", "verdict": "fail", "exit_code": 1, "nodes": 2,
         "figures": {"peak_busbw_gbps": 900.0}}], "--month", "2026-10")
    assert code == 1 and _term(doc, "busbw")["status"] == "breached"
    assert "1 failed" in _term(doc, "busbw")["detail"]


def test_a_storage_check_with_a_job_in_error_never_meets_its_term(tmp_path: Path) -> None:
    code, doc = _report(tmp_path, [
        {"kind": "storage", "verdict": "fail", "exit_code": 1, "nodes": 2,
         "figures": {"write_mbps_all": 5000.0, "read_mbps_all": 5000.0}},
        {"kind": "storage", "verdict": "no verdict", "exit_code": 2, "nodes": 2,
         "figures": {"write_mbps_all": 5000.0, "read_mbps_all": 5000.0}}],
        "--month", "2026-10")
    term = _term(doc, "storage_mbps")
    assert code == 1 and term["status"] == "breached" and [e["seq"] for e in
                                                           term["entries"]] == [1]


def test_only_replacements_that_happened_count(tmp_path: Path) -> None:
    refused = {"kind": "replace", "verdict": "fail", "exit_code": 1, "nodes": 1,
               "figures": {"nodes": ["a4-node-1"], "hours": 0.01, "replaced": False,
                           "outcome": "not confirmed; nothing was changed"}}
    done = {"kind": "replace", "verdict": "pass", "exit_code": 0, "nodes": 1,
            "figures": {"nodes": ["a4-node-2"], "hours": 1.0, "replaced": True}}
    code, doc = _report(tmp_path, [dict(refused), dict(refused), dict(done)], "--month",
                        "2026-10")
    term = _term(doc, "max_replacements_per_month")
    assert code == 0 and term["status"] == "met" and term["detail"].startswith("1 node(s)")
    # a replacement that happened but left the fleet beyond max_spread counts
    beyond = {**done, "verdict": "fail", "exit_code": 1}
    code, doc = _report(tmp_path / "b" if (tmp_path / "b").mkdir() is None else tmp_path,
                        [dict(done), dict(beyond)], "--month", "2026-10")
    assert code == 1 and _term(doc, "max_replacements_per_month")["status"] == "breached"


def _health(nodes: dict[str, str], code: int) -> dict[str, Any]:
    return {"kind": "health", "verdict": {0: "pass", 1: "fail", 2: "no verdict"}[code],
            "exit_code": code, "nodes": len(nodes),
            "figures": {"failure_nodes": list(nodes.values()).count("failure"),
                        "nodes": nodes}}


def test_the_month_counts_the_distinct_nodes_health_found_failing(tmp_path: Path) -> None:
    code, doc = _report(tmp_path, [
        _health({"a4-node-0": "healthy", "a4-node-1": "failure"}, 1),
        _health({"a4-node-0": "healthy", "a4-node-1": "failure"}, 1),  # the same node again
        _health({"a4-node-0": "healthy", "a4-node-1": "healthy"}, 0)], "--month", "2026-10")
    term = _term(doc, "max_failed_nodes_per_month")
    assert term["status"] == "met" and term["detail"].startswith(
        "1 node(s) failed in 3 health run(s) (a4-node-1), at most 1")
    assert [e["seq"] for e in term["entries"]] == [1, 2]
    code, doc = _report(tmp_path / "b" if (tmp_path / "b").mkdir() is None else tmp_path, [
        _health({"a4-node-0": "failure", "a4-node-1": "failure"}, 1)], "--month", "2026-10")
    assert code == 1 and _term(doc, "max_failed_nodes_per_month")["status"] == "breached"
    code, doc = _report(tmp_path / "c" if (tmp_path / "c").mkdir() is None else tmp_path, [],
                        "--month", "2026-10")
    assert _term(doc, "max_failed_nodes_per_month")["status"] == "no evidence"


@pytest.mark.parametrize("entry, why", [
    ({"kind": "nccl", "verdict": "pass", "nodes": 2, "figures": {"peak_busbw_gbps": 700.0},
      "time": "2026-10-10T00:00:00"}, "has no offset"),
    ({"kind": "nccl", "verdict": "pass", "nodes": 2, "figures": {"peak_busbw_gbps": 700.0},
      "time": "last tuesday"}, "not an ISO 8601 time"),
    ({"kind": "replace", "verdict": "pass", "nodes": 1,
      "figures": {"nodes": ["a4-node-1"], "hours": None, "replaced": True}}, "hours"),
    ({"kind": "nccl", "verdict": "pass", "nodes": "12", "figures": {"peak_busbw_gbps": 700}},
     "not a whole number"),
    ({"kind": "nccl", "verdict": "pass", "nodes": True, "figures": {"peak_busbw_gbps": 700}},
     "not a whole number"),
    ({"kind": "nccl", "verdict": "pass", "nodes": 2, "figures": {"peak_busbw_gbps": "700"}},
     "peak_busbw_gbps"),
    ({"kind": "nccl", "verdict": "maybe", "nodes": 2, "figures": {}}, "verdict"),
    ({"kind": "nccl", "verdict": "pass", "exit_code": 1, "nodes": 2, "figures": {}},
     "does not go with"),
    ({"kind": "burn-in", "verdict": "pass", "nodes": 2, "figures": {"failed_nodes": 0.5}},
     "failed_nodes"),
    ({"kind": "health", "verdict": "fail", "exit_code": 1, "nodes": 2,
      "figures": {"failure_nodes": -1}}, "failure_nodes"),
    ({"kind": "health", "verdict": "fail", "exit_code": 1, "nodes": 2,
      "figures": {"nodes": ["a4-node-1"]}}, "health figure nodes"),
    ({"kind": "health", "verdict": "fail", "exit_code": 1, "nodes": 2,
      "figures": {"nodes": {"a4-node-1": "broken"}}}, "health figure nodes"),
])
def test_a_malformed_entry_is_refused_naming_its_line(
        tmp_path: Path, entry: dict[str, Any], why: str) -> None:
    good = {"kind": "nccl", "verdict": "pass", "nodes": 2,
            "figures": {"peak_busbw_gbps": 700.0}}
    code, out = _report(tmp_path, [dict(good), dict(entry)], "--month", "2026-10")
    assert code == 2 and "line 2" in out and why in out, out


def test_months_are_utc_and_durations_never_negative(tmp_path: Path) -> None:
    """22:00 at -05:00 on 31 October is 03:00 UTC on 1 November."""
    code, doc = _report(tmp_path, [
        {"kind": "nccl", "verdict": "pass", "nodes": 2, "figures": {"peak_busbw_gbps": 700.0},
         "at": "2026-10-20T00:00:00+00:00"},
        {"kind": "nccl", "verdict": "pass", "nodes": 2, "figures": {"peak_busbw_gbps": 100.0},
         "at": "2026-10-31T22:00:00-05:00"}], "--month", "2026-10")
    busbw = _term(doc, "busbw")
    assert code == 0 and busbw["status"] == "met" and busbw["hours_below"] == 0.0
    code, doc = _report(tmp_path / "n" if (tmp_path / "n").mkdir() is None else tmp_path,
                        [{"kind": "nccl", "verdict": "pass", "nodes": 2,
                          "figures": {"peak_busbw_gbps": 100.0},
                          "at": "2026-10-31T22:00:00-05:00"}])
    assert doc["month"] == "2026-11" and _term(doc, "busbw")["hours_below"] >= 0


@pytest.mark.parametrize("month", ["\uff12\uff10\uff12\uff16-10", "2026-1", "2026-13",
                                   "\u0662\u0660\u0662\u0666-10"])
def test_the_month_is_ascii_yyyy_mm(tmp_path: Path, month: str) -> None:
    code, out = _report(tmp_path, [], "--month", month)
    assert code == 2 and "YYYY-MM" in out
