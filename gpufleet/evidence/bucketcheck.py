"""Storage acceptance of a mounted bucket: what its FUSE mount delivers to every node.

A bucket mounted read-write gets a file set written by node 0 (sequential writes of new
objects, the only writes every client takes), which every node then reads back at once; a
read-only mount is read from its own largest files. Each node prints one line,
`gpufleet storage: bucket node=R fs=NAME test=read nodes=N files=K bytes=B want=W
start_ms=S end_ms=E rc=C` (node 0 also a `test=write` line for a read-write mount), and on a
read-write mount node 0 removes the files once every node has read them (`done` line).

:func:`judge_bucket` asks of every node its read, whole (the bytes it was meant to read),
without an error; no store publishes a per-node figure for its FUSE client, so the verdict
is about the run, not its speed, and the figures (all nodes together, the slowest node) are
recorded for comparison. Exit 0 every node read everything, 1 a node failed or read short,
2 an incomplete or unreadable log (or a read-only bucket with nothing to read).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpufleet.compile import BucketMountDesign, FilesystemDesign, FleetDesign
from gpufleet.evidence.acceptance import (
    MAX_NODE_BYTES_S,
    STORAGE_PREFIX,
    strict_int,
    tagged_lines,
    window_mbps,
)

PREFIX = STORAGE_PREFIX
IMAGE = "python:3.12-slim"
FILES = 4  # files node 0 writes on a read-write mount (or the most a read-only one reads)
READ_WRITE, READ_ONLY = "read-write", "read-only"
NO_FIGURE = ("no published per-node figure for a bucket's FUSE mount: the run is checked "
             "(every node reads every byte), not its speed")
RC_EMPTY, RC_UNSEEN = 3, 4  # nothing to read; node 0's files never became visible

_PROGRAM = r"""
import os, shutil, sys, time
mount, fs, mode, r, n, size, files, prefix = sys.argv[1:9]
r, n, size, files = int(r), int(n), int(size), int(files)
d = os.path.join(mount, ".gpufleet-storage", os.environ.get("DSTACK_RUN_NAME", "run"))
ms = lambda: int(time.time() * 1000)
def line(test, count, moved, want, start, rc, extra=""):
    print(f"{prefix} bucket node={r} fs={fs} test={test} nodes={n} files={count} "
          f"bytes={moved} want={want} start_ms={start} end_ms={ms()} rc={rc}{extra}",
          flush=True)
poll = float(os.environ.get("GPUFLEET_POLL_SECONDS", "5"))
def wait(paths, size_of, limit=1800):
    for _ in range(int(limit / poll)):
        try:
            if all(os.stat(p).st_size == size_of for p in paths):
                return True
        except OSError:
            pass
        time.sleep(poll)
    return False
def pick():
    found = []
    for top, dirs, names in os.walk(mount):
        dirs[:] = sorted(x for x in dirs if x != ".gpufleet-storage")
        for x in names:
            try:
                found.append((-os.stat(os.path.join(top, x)).st_size, os.path.join(top, x)))
            except OSError:
                pass
        if len(found) >= 100000:
            break
    chosen, total = [], 0
    for neg, p in sorted(found):
        if total >= size * files or -neg == 0:
            break
        chosen.append(p); total -= neg
    return chosen, total
if mode == "read-write":
    names = [os.path.join(d, f"f{i}") for i in range(files)]
    if r == 0:
        os.makedirs(d, exist_ok=True); start, rc = ms(), 0
        block = os.urandom(8 << 20)
        try:
            for p in names:
                with open(p, "wb") as f:
                    left = size
                    while left > 0:
                        left -= f.write(block[:min(left, len(block))])
        except OSError as e:
            rc = 1
        line("write", files, size * files if rc == 0 else 0, size * files, start, rc)
    if not wait(names, size):
        line("read", 0, 0, size * files, ms(), 4); sys.exit(0)
    chosen, want = names, size * files
else:
    chosen, want = pick()
    if not chosen:
        line("read", 0, 0, 0, ms(), 3); sys.exit(0)
start, moved, rc = ms(), 0, 0
try:
    for p in chosen:
        with open(p, "rb", buffering=0) as f:
            while True:
                got = f.read(8 << 20)
                if not got:
                    break
                moved += len(got)
except OSError:
    rc = 1
line("read", len(chosen), moved, want, start, rc)
if mode == "read-write":
    open(os.path.join(d, f"read.{r}"), "w").close()
    if r == 0:
        seen = wait([os.path.join(d, f"read.{i}") for i in range(n)], 0)
        shutil.rmtree(d, ignore_errors=True)
        print(f"{prefix} done fs={fs} nodes={n} cleaned={'yes' if seen else 'no'}", flush=True)
"""


def bucket_storage(m: BucketMountDesign) -> FilesystemDesign:
    """A mounted bucket as the storage check sees it: on every node, no figure."""
    return FilesystemDesign(
        name=m.bucket, backend=m.cloud, kind="bucket",
        service=f"{m.client}, {READ_ONLY if m.read_only else READ_WRITE}",
        region=m.region, zone=None, capacity_gib=None, throughput=None, mount=m.path,
        port=0, admit=())


def _mode(fs: FilesystemDesign) -> str:
    return READ_ONLY if fs.service.endswith(READ_ONLY) else READ_WRITE


def bucket_task(plan: FleetDesign, fs: FilesystemDesign, size_mib: int) -> dict[str, Any]:
    """The dstack task reading a mounted bucket from every node of the fleet."""
    args = [fs.mount, fs.name, _mode(fs), "$DSTACK_NODE_RANK", "$DSTACK_NODES_NUM",
            str(size_mib << 20), str(FILES), PREFIX]
    quoted = " ".join(a if a.startswith("$") else "'" + a + "'" for a in args)
    return {"type": "task", "name": f"{plan.name[:20]}-stor-{fs.name[:10]}",
            "fleets": [plan.name], "nodes": max(plan.nodes, 1), "image": IMAGE,
            "volumes": [{"instance_path": fs.mount, "path": fs.mount}],
            "commands": [f"python3 - {quoted} <<'PY'{_PROGRAM}PY"]}


@dataclass(frozen=True, slots=True)
class BucketRead:
    node: int
    test: str
    nodes: int
    files: int
    io_bytes: int
    want: int
    start_ms: int
    end_ms: int
    rc: int


def _read(fields: dict[str, str]) -> BucketRead:
    """One node's line; ValueError when it is not one."""
    nums = {k: strict_int(fields[k], 15) for k in ("node", "nodes", "files", "bytes", "want",
                                                    "start_ms", "end_ms", "rc")}
    if fields["test"] not in ("read", "write") or nums["end_ms"] < nums["start_ms"]:
        raise ValueError(fields["test"])
    return BucketRead(nums["node"], fields["test"], nums["nodes"], nums["files"],
                      nums["bytes"], nums["want"], nums["start_ms"], nums["end_ms"],
                      nums["rc"])


def parse_bucket(text: str) -> tuple[list[BucketRead], list[str]]:
    reads: list[BucketRead] = []
    problems: list[str] = []
    for number, body, fields in tagged_lines(text, PREFIX):
        if not body.startswith("bucket "):
            continue
        try:
            got = _read(fields)
        except (KeyError, ValueError):
            problems.append(f"line {number}: unreadable: {body[:80]}")
            continue
        seconds = max(got.end_ms - got.start_ms, 1) / 1000
        if got.io_bytes / seconds > MAX_NODE_BYTES_S:
            problems.append(f"line {number}: {got.io_bytes / seconds / 1e6:,.0f} MB/s from one "
                            "node is not a measurement")
        else:
            reads.append(got)
    return reads, problems


def _complete(reads: Sequence[BucketRead], planned: int, writes: bool) -> list[str]:
    """What keeps the log from being the whole run."""
    counts = {r.nodes for r in reads}
    problems = [f"the lines disagree on the run's node count ({sorted(counts)})"
                ] if len(counts) > 1 else []
    n = min(counts) if counts else 0
    if n != planned:
        problems.append(f"the task ran on {n} node(s), the fleet has {planned}")
    keys = [(r.node, r.test) for r in reads]
    want = {(i, "read") for i in range(planned)} | ({(0, "write")} if writes else set())
    problems += [f"node {i}: {t} reported twice" for i, t in sorted(set(keys))
                 if keys.count((i, t)) > 1]
    problems += [f"node {i}: no {t} result" for i, t in sorted(want - set(keys))]
    problems += [f"node {i}: a {t} result from beyond the plan" for i, t in
                 sorted(set(keys) - want)]
    problems += [f"node {r.node}: the bucket holds no file to read (put data in it, or "
                 "mount it read-write)" for r in reads if r.rc == RC_EMPTY]
    return problems


def _failures(reads: Sequence[BucketRead]) -> list[str]:
    out = []
    for r in reads:
        if r.rc == RC_UNSEEN:
            out.append(f"node {r.node}: node 0's files never became whole on its mount "
                       "(30 min)")
        elif r.rc != 0:
            out.append(f"node {r.node}: {r.test} failed with an I/O error")
        elif r.io_bytes < r.want or r.io_bytes == 0:
            out.append(f"node {r.node}: {r.test} moved {r.io_bytes:,} of {r.want:,} bytes")
    return out


def judge_bucket(text: str, planned: int, fs: FilesystemDesign
                 ) -> tuple[int, list[str], dict[str, Any]]:
    """(exit code, lines, figures) for one mounted bucket's storage log."""
    writes = _mode(fs) == READ_WRITE
    reads, problems = parse_bucket(text)
    problems += _complete(reads, planned, writes)
    figures: dict[str, Any] = {"filesystem": fs.name, "mount": "bucket",
                               "expected_mbps": None, "source": NO_FIGURE}
    if problems:
        return 2, [*(f"unreadable: {p}" for p in problems[:6]),
                   "no verdict: the bucket's storage log is incomplete"], figures
    got = [r for r in reads if r.test == "read"]
    ok = [r for r in got if r.rc == 0 and r.io_bytes >= r.want]
    slowest = min((window_mbps([r]) for r in ok), default=0.0)
    figures.update({"read_mbps_all": round(window_mbps(got), 1),
                    "read_mbps_slowest_node": round(slowest, 1)})
    lines = [f"{fs.name}: read {window_mbps(got):,.0f} MB/s from {planned} node(s) together, "
             f"{slowest:,.0f} MB/s from the slowest"]
    if writes:
        write = next(r for r in reads if r.test == "write")
        figures["write_mbps_one"] = round(window_mbps([write]), 1)
        lines.append(f"{fs.name}: write {window_mbps([write]):,.0f} MB/s from node 0")
    failed = _failures(reads)
    if failed:
        return 1, [*lines, *(f"FAIL {f}" for f in failed)], figures
    total = sum(r.io_bytes for r in got)
    return 0, [*lines, f"PASS: {fs.name}: every node read its {got[0].files} file(s), "
               f"{total / 1e9:,.1f} GB in all; {NO_FIGURE}"], figures
