"""`gpufleet acceptance check`: one log judged (burn-in, pairs or nccl-tests), its verdict
said in text or JSON, with the exit code that goes with it."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import click

from gpufleet.cli.common import EXIT_USAGE


def read_log(path: str) -> tuple[str, bool]:
    from gpufleet.evidence import MAX_LOG_BYTES

    try:
        # a FIFO or device would block or never end: only a regular file is read, and it is
        # opened without blocking (a FIFO swapped in after the check returns at once)
        if not stat.S_ISREG(os.stat(path).st_mode):
            click.echo(f"gpufleet acceptance: {path} is not a regular file (a FIFO, device "
                       "or folder); give the log file itself", err=True)
            sys.exit(EXIT_USAGE)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read(MAX_LOG_BYTES + 1)
    except OSError as e:
        click.echo(f"gpufleet acceptance: cannot read {path}: {e.strerror}", err=True)
        sys.exit(EXIT_USAGE)
    return raw[:MAX_LOG_BYTES].decode("utf-8", errors="replace"), len(raw) > MAX_LOG_BYTES


Judged = Callable[[Any, int], Any]  # (expectation, node count) -> with its figure and mark


def check_log(log_file: str, exp: Any, judged: Judged, fmt: str, nodes: tuple[int, int],
              margin: float, gpu_gib: float | None, checks: Sequence[str] = (),
              narrowed: int | None = None,
              positions: dict[str, tuple[str, ...]] | None = None,
              rec: Record | None = None, filesystems: Sequence[Any] = ()) -> None:
    """Judge a log and exit with its verdict. ``nodes``: the fleet's nodes and the NCCL
    task's; ``checks``: what the burn-in task makes every node print; ``narrowed``: `--nodes
    N`, an NCCL run judged on N nodes on purpose (it passes as what it is, "N of M")."""
    from gpufleet.evidence import (
        is_burnin_log,
        is_pairs_log,
        is_storage_log,
        judge,
        judge_pairs,
        nodes_in,
        parse_log,
        verdict,
    )

    planned, task_nodes = nodes
    text, too_big = read_log(log_file)
    if is_storage_log(text):
        _storage(log_file, text, too_big, planned, margin, filesystems, fmt, rec)
    kind = "burn-in" if is_burnin_log(text) else "pairs" if is_pairs_log(text) else None
    if kind is not None and narrowed is not None:
        raise click.UsageError(f"--nodes narrows an NCCL run; a {kind} log is judged on "
                               "every node the task ran on")
    if kind is not None:
        if kind == "burn-in":
            code, lines = judge(text, planned, margin, gpu_gib, exp.gpus, checks)
        else:
            code, lines = judge_pairs(text, task_nodes, judged(exp, 2), margin, positions)
        if too_big:
            code, lines = 2, [*lines, "no verdict: the log is larger than gpufleet reads"]
        failed = sum(line.startswith("FAIL node") for line in lines)
        say({"log": log_file, "kind": kind, "margin": margin, "nodes": planned,
             **({"failed_nodes": failed} if kind == "burn-in" and code < 2 else {}),
             "lines": lines}, lines, code, fmt, rec)
    if narrowed is not None:
        exp = narrow(exp, narrowed)
    log = parse_log(text, too_big=too_big)
    count = nodes_in(text) or exp.nodes
    exp = judged(exp, count)
    result = verdict(log, exp)
    lines = list(result.lines)
    scope = f"{exp.nodes} of {task_nodes} nodes" if exp.nodes < task_nodes else None
    if scope and result.code == 0:
        lines[-1] = (f"PASS for {scope} (--nodes {exp.nodes}): not the fleet's acceptance, "
                     f"which needs a run on all {task_nodes}")
    peak = max((r.busbw for r in log.rows), default=None)
    say({"log": log_file, "kind": "nccl", "nodes": count, "fleet_nodes": task_nodes,
         "scope": scope or f"all {task_nodes} nodes", "fabric": exp.fabric,
         "expected_busbw_gbps": exp.busbw_gbps, "threshold_gbps": exp.threshold_gbps,
         "source": exp.source, "peak_busbw_gbps": peak, "lines": lines}, lines, result.code,
        fmt, rec)


def _storage(log_file: str, text: str, too_big: bool, planned: int, margin: float,
             filesystems: Sequence[Any], fmt: str, rec: Record | None) -> None:
    """A storage task's log, judged against its filesystem's figure."""
    from gpufleet.evidence import judge_storage

    fs, name = storage_target(text, filesystems)
    if fs is None:
        raise click.UsageError(
            f"{log_file}: a storage log of filesystem {name or '(none named)'}, which the "
            f"fleet does not mount; it mounts {', '.join(f.name for f in filesystems) or 'none'}")
    code, lines, figures = judge_storage(text, planned, fs, margin)
    if too_big:
        code, lines = 2, [*lines, "no verdict: the log is larger than gpufleet reads"]
    kind = "bucket" if fs.kind == "bucket" else "storage"  # no contract term counts a bucket
    say({"log": log_file, "kind": kind, "nodes": planned, **figures, "lines": lines},
        lines, code, fmt, rec)


def storage_target(text: str, filesystems: Sequence[Any]) -> tuple[Any | None, str | None]:
    """The filesystem, volume or bucket a storage log names (its first `fs=` field), and the
    name (bucket names may hold dots and underscores)."""
    import re

    named = re.search(r"gpufleet storage: \S+ .*?\bfs=([A-Za-z0-9._-]+)", text)
    name = named.group(1) if named else None
    return next((f for f in filesystems if f.name == name), None), name


def narrow(exp: Any, nodes: int) -> Any:
    """The expectation of a run on ``nodes`` of the fleet's nodes (`--nodes`)."""
    import dataclasses

    if nodes > exp.nodes:
        raise click.UsageError(f"--nodes {nodes}: the fleet's acceptance run spans "
                               f"{exp.nodes} node(s); --nodes only narrows it")
    if exp.multi_node and nodes < 2:
        raise click.UsageError("--nodes 1: a single node never uses the fabric between "
                               "nodes; judge 2 or more")
    return dataclasses.replace(exp, nodes=nodes)


@dataclass(frozen=True, slots=True)
class Record:
    """Where a verdict is recorded (`--record LEDGER`), and what it is about."""

    ledger: str
    fleet: str
    evidence_file: str | None = None


def record_verdict(rec: Record | None, kind: str, figures: dict[str, Any], code: int,
                   nodes: Any = None) -> None:
    """Append the verdict to the ledger (before it is printed: a verdict that cannot be
    recorded is an error, not a silent loss)."""
    if rec is None:
        return
    from gpufleet.evidence import LedgerError, append_entry, file_digest

    evidence = {"file": rec.evidence_file, "digest": file_digest(rec.evidence_file)} \
        if rec.evidence_file else None
    try:
        entry = append_entry(rec.ledger, {
            "kind": kind, "fleet": rec.fleet, "nodes": nodes, "figures": figures,
            "verdict": VERDICTS[code], "exit_code": code, "evidence": evidence})
    except (LedgerError, OSError) as e:
        click.echo(f"gpufleet: --record {rec.ledger}: {e}", err=True)
        sys.exit(EXIT_USAGE)
    click.echo(f"recorded as entry {entry['seq']} of {rec.ledger} ({entry['digest'][:19]}…)",
               err=True)


VERDICTS = {0: "pass", 1: "fail", 2: "no verdict"}


def say(evidence: dict[str, Any], lines: Sequence[str], code: int, fmt: str,
        rec: Record | None = None) -> None:
    """Print the verdict (text lines, or JSON evidence), record it with ``rec``, and exit
    with its code."""
    import json

    record_verdict(rec, str(evidence.get("kind")), {k: v for k, v in evidence.items()
                                                    if k not in ("lines", "log")},
                   code, evidence.get("nodes"))
    if fmt == "json":
        click.echo(json.dumps({**evidence, "verdict": VERDICTS[code],
                               "exit_code": code}, indent=2))
    else:
        for line in lines:
            click.echo(line)
    sys.exit(code)


def record_runs(ledger: str, fleet: str, doc: dict[str, Any]) -> None:
    """The scaling report's runs into the ledger: one NCCL entry per node count."""
    for run in doc["runs"]:
        record_verdict(Record(ledger, fleet, run["log"]), "nccl", {
            "peak_busbw_gbps": run["peak_busbw_gbps"], "reference_gbps": run["reference_gbps"],
            "threshold_fraction": doc["threshold_fraction"], "source": "acceptance report"},
            0 if run["verdict"] == "pass" and doc["exit_code"] != 2 else
            2 if doc["exit_code"] == 2 else 1, run["nodes"])
