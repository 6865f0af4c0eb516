"""Storage acceptance: what a shared filesystem delivers, measured from the fleet's nodes.

For each filesystem a fleet mounts, a dstack task (one job per node) runs fio's sequential
write and read (1 MiB blocks, direct I/O, JSON output) first from node 0 alone, then from
every node at once (the nodes wait for each other through files on the filesystem itself),
then a metadata test on node 0: create, stat, read and unlink tens of thousands of small
files, and the time to import a large Python package copied onto the filesystem. Each result
is one line, `gpufleet storage: fio node=R fs=NAME test=write scope=all json={...}` (fio's
JSON compacted) or `gpufleet storage: meta ...`, and the run ends with a `done` line.

:func:`judge_storage` holds the log to the NCCL checker's strictness: every node's result
for every test once, fio's JSON parsed and validated (jobs present, no job error, bandwidth
above 0), the whole run (its `done` line); the all-node throughput is judged against the
figure the plan computes (a Lustre filesystem's capacity x its throughput tier, or
`expect_throughput` in the backends file) less a margin. Exit 0 pass, 1 below the figure
or a job in error, 2 unreadable or incomplete.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpufleet.backends import traits_of
from gpufleet.compile import FilesystemDesign, FleetDesign, VolumeDesign
from gpufleet.evidence.acceptance import (
    KEY_VALUE,
    MAX_NODE_BYTES_S,
    STORAGE_PREFIX,
    is_count,
    render_task,
    strict_int,
    strict_number,
    tagged_lines,
    window_mbps,
)
from gpufleet.evidence.bucketcheck import NO_FIGURE, bucket_storage, bucket_task, judge_bucket
from gpufleet.outbound import loads_strict

PREFIX = STORAGE_PREFIX
TESTS = ("write", "read")
META_FILES = 20000
IMAGE = "python:3.12-slim"  # fio from Debian's packages; Python for the metadata test

_SCRIPT = r"""set -u
d="@MOUNT@/.gpufleet-storage/${DSTACK_RUN_NAME:-run}"; r=$DSTACK_NODE_RANK; n=$DSTACK_NODES_NUM
mkdir -p "$d/$r"
barrier() { touch "$d/$1.$r"; for _ in $(seq 1 1800); do
  [ "$(ls "$d" | grep -c "^$1\.")" -ge "$n" ] && return 0; sleep 1; done; return 1; }
fio_run() {
  out=$(mktemp)
  # one job name for both: the read job reads the files the write job laid out
  fio --name=gpufleet --directory="$d/$r" --rw="$1" --bs=1M --size=@SIZE@ --numjobs=@JOBS@ \
    --direct=1 --ioengine=libaio --group_reporting --output-format=json --output="$out"
  rc=$?
  python3 - "@PREFIX@ fio node=$r fs=@FS@ test=$1 scope=$2 rc=$rc" "$out" <<'PY' \
    || echo "@PREFIX@ fio node=$r fs=@FS@ test=$1 scope=$2 rc=$rc json=none"
import json, sys
print(sys.argv[1] + " json=" + json.dumps(json.load(open(sys.argv[2])), separators=(",", ":")))
PY
}
if [ "$r" -eq 0 ]; then fio_run write one; fio_run read one; fi
barrier alone
fio_run write all; barrier written
fio_run read all; barrier read
if [ "$r" -eq 0 ]; then python3 - "$d/meta" <<'PY'
import os, shutil, sys, time, importlib, json
root = sys.argv[1]; os.makedirs(root, exist_ok=True); n = @FILES@; t = {}
names = [os.path.join(root, f"f{i}") for i in range(n)]
s = time.monotonic()
for p in names:
    with open(p, "wb") as f: f.write(b"x" * 4096)
t["create_s"] = time.monotonic() - s; s = time.monotonic()
for p in names: os.stat(p)
t["stat_s"] = time.monotonic() - s; s = time.monotonic()
for p in names:
    with open(p, "rb") as f: f.read()
t["read_s"] = time.monotonic() - s; s = time.monotonic()
for p in names: os.unlink(p)
t["unlink_s"] = time.monotonic() - s
stdlib, mods = os.path.dirname(os.path.dirname(json.__file__)), ("email", "http", "xml",
                                                                 "unittest", "asyncio")
for m in mods:  # packages of many small modules, copied onto the filesystem and imported
    shutil.copytree(os.path.join(stdlib, m), os.path.join(root, "lib", m), dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "test*"))
s = time.monotonic(); sys.path.insert(0, os.path.join(root, "lib"))
for m in mods: importlib.import_module(m)
t["import_s"] = time.monotonic() - s
print("@PREFIX@ meta node=0 fs=@FS@ files=%d " % n
      + " ".join("%s=%.3f" % kv for kv in t.items()) + " rc=0")
PY
fi
barrier meta
[ "$r" -eq 0 ] && echo "@PREFIX@ done fs=@FS@ nodes=$n"
rm -rf "$d/$r"; exit 0"""


def expected_mbps(fs: FilesystemDesign) -> tuple[float | None, str]:
    """The throughput (MB/s) the filesystem should deliver, and where the figure comes
    from; None without one (the check then verifies the run, not its speed)."""
    if fs.kind == "volume":  # the disk type's documented flat figure, where there is one
        flat = traits_of(fs.backend).volume_throughput.get(fs.service)
        if flat is not None:
            return flat[0], flat[1]
        return None, (f"no documented flat figure for {fs.service} volumes: the run is "
                      "checked, not its speed")
    if fs.expect_throughput is not None:
        return float(fs.expect_throughput), "the backends file's expect_throughput"
    if fs.kind == "lustre" and fs.throughput and fs.capacity_gib:
        service = traits_of(fs.backend).filesystems.get(fs.kind)
        per_tib = service.gib_per_tib if service is not None else 1024
        figure = fs.capacity_gib / per_tib * fs.throughput
        return figure, (f"{fs.capacity_gib:,} GiB x {fs.throughput} MB/s per TiB of "
                        f"{per_tib:,} GiB (its throughput tier)")
    return None, "no figure (set `expect_throughput` on the filesystem)"


VOLUME_PATH = "/gpufleet-volume"  # where the storage task mounts a dstack volume


def volume_storage(vol: VolumeDesign) -> FilesystemDesign:
    """A dstack volume as the storage check sees it: one node (a network disk attaches to
    one instance), the disk type's flat figure where its cloud documents one."""
    return FilesystemDesign(
        name=vol.name, backend=vol.backend, kind="volume", service=vol.disk_type,
        region=vol.region, zone=vol.zone, capacity_gib=vol.size_gib, throughput=None,
        mount=VOLUME_PATH, port=0, admit=())


def fleet_volumes(plan: FleetDesign, volumes: Sequence[VolumeDesign]) -> list[VolumeDesign]:
    """The dstack volumes the fleet's runs can attach: its backend, and its zone (or
    region)."""
    return [v for v in volumes if v.backend == plan.backend and v.region == plan.region
            and (v.zone is None or plan.zone is None or v.zone == plan.zone)]


def storage_targets(plan: FleetDesign, volumes: Sequence[VolumeDesign] = ()
                    ) -> list[FilesystemDesign]:
    """What the fleet's storage acceptance measures: its shared filesystems, the dstack
    volumes its runs can attach and the buckets its nodes mount."""
    return [*plan.filesystems, *map(volume_storage, fleet_volumes(plan, volumes)),
            *map(bucket_storage, plan.buckets)]


def storage_tasks(plan: FleetDesign, size: str = "4G", volumes: Sequence[VolumeDesign] = ()
                  ) -> list[tuple[FilesystemDesign, dict[str, Any]]]:
    """One task per filesystem the fleet mounts (on every node), per dstack volume its
    runs can attach (on one node) and per bucket its nodes mount (on every node): (what it
    measures, the task as data)."""
    out = []
    targets = [(fs, {"instance_path": fs.mount, "path": fs.mount}, max(plan.nodes, 1))
               for fs in plan.filesystems]
    targets += [(volume_storage(v), {"name": v.name, "path": VOLUME_PATH}, 1)
                for v in fleet_volumes(plan, volumes)]
    for fs, mount, nodes in targets:
        script = (_SCRIPT.replace("@MOUNT@", fs.mount).replace("@FS@", fs.name)
                  .replace("@PREFIX@", PREFIX).replace("@SIZE@", sized(size, fs, nodes))
                  .replace("@JOBS@", str(JOBS))
                  .replace("@FILES@", str(META_FILES)))
        out.append((fs, {
            "type": "task", "name": f"{plan.name[:20]}-stor-{fs.name[:10]}",
            "fleets": [plan.name], "nodes": nodes, "image": IMAGE, "volumes": [mount],
            "commands": ["apt-get update -qq && apt-get install -y -qq fio > /dev/null",
                         script]}))
    return out + [(fs, bucket_task(plan, fs, _mib(size)))
                  for fs in map(bucket_storage, plan.buckets)]


JOBS = 4  # fio jobs per node, each writing (then reading) one file of the size
FILL = 0.5  # at most this share of a filesystem's capacity is written by the test


def _mib(size: str) -> int:
    """ "4G" or "512M" in MiB."""
    return int(size[:-1]) * {"G": 1024, "M": 1}[size[-1].upper()]


def sized(size: str, fs: FilesystemDesign, nodes: int) -> str:
    """fio's per-job file size: ``size`` ("4G", "512M"), cut so that every node's jobs
    together write at most half of the filesystem's capacity (a 20 GiB volume gets 2560M a
    job, where 4G each would fill it and fail as a job in error)."""
    wanted = _mib(size)
    if not fs.capacity_gib:
        return size
    room = int(fs.capacity_gib * 1024 * FILL / (JOBS * max(nodes, 1)))
    return size if wanted <= room else f"{max(room, 1)}M"


def render_storage(task: dict[str, Any], fs: FilesystemDesign) -> str:
    if fs.kind == "bucket":
        return render_task(task, None, "Storage acceptance", (
            f"# Bucket {fs.name} ({fs.service}) at {fs.mount}: every node reads it at "
            "once (a read-write mount: files node 0 writes; read-only: its largest files).\n"
            f"# The pass mark: every node reads every byte; {NO_FIGURE}.\n"))
    figure, source = expected_mbps(fs)
    what = "Volume" if fs.kind == "volume" else "Filesystem"
    about = (f"# {what} {fs.name} ({fs.kind}, {fs.service}) at {fs.mount}: fio sequential "
             "write and read from one node, then from all; small-file metadata.\n# The pass "
             "mark: " + (f"{figure:,.0f} MB/s from {source}, less --margin.\n"
                         if figure is not None else f"{source}.\n"))
    return render_task(task, None, "Storage acceptance", about)


@dataclass(frozen=True, slots=True)
class FioResult:
    node: int
    test: str
    scope: str
    mbps: float | None  # None: the JSON does not hold a usable result (see ``problem``)
    problem: str | None
    io_bytes: int = 0  # what its jobs moved
    start_ms: int = 0  # when its run began and ended (fio's timestamp_ms less the runtime)
    end_ms: int = 0



def _fio(fields: dict[str, str], raw: str) -> FioResult:
    """One node's fio result: its fields from gpufleet's line (never from inside fio's
    JSON), its figures from fio's JSON structure only. ValueError: not a result at all."""
    node, test, scope = strict_int(fields["node"], 6), fields["test"], fields["scope"]
    if test not in TESTS or scope not in ("one", "all"):
        raise ValueError(f"test={test} scope={scope}")
    try:
        doc = loads_strict(raw)
    except (ValueError, RecursionError):
        return FioResult(node, test, scope, None, "fio's JSON is cut off or corrupt")
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list) or not jobs or not all(isinstance(j, dict) for j in jobs):
        return FioResult(node, test, scope, None, "fio's JSON has no jobs")
    rc = fields.get("rc", "")
    if not (rc.isascii() and rc.isdigit() and len(rc) <= 3):
        return FioResult(node, test, scope, None, f"fio's exit status is unreadable ({rc!r})")
    errors = [j.get("error") for j in jobs]
    if any(not is_count(e) for e in errors):
        return FioResult(node, test, scope, None, "a job's error field is not a count")
    if rc != "0" or any(errors):
        return FioResult(node, test, scope, 0.0, "fio reported an error "
                         f"(exit {rc}, job errors {errors})")
    bws = [(j.get(test) or {}).get("bw_bytes") if isinstance(j.get(test), dict) else None
           for j in jobs]
    if not all(is_count(b) for b in bws):
        return FioResult(node, test, scope, None, f"fio's JSON has no whole, finite, "
                         f"non-negative {test} bandwidth (bw_bytes) for every job")
    bw = sum(int(b) for b in bws if b is not None)
    if bw > MAX_NODE_BYTES_S:
        return FioResult(node, test, scope, None, f"{bw / 1e6:,.0f} MB/s from one node is "
                         "not a measurement")
    window = _window(doc, jobs, test)
    if window is None:
        return FioResult(node, test, scope, None, "fio's JSON has no whole io_bytes, "
                         "runtime and timestamp_ms: the run's window cannot be told")
    moved, start, end = window
    return FioResult(node, test, scope, bw / 1e6, None if bw > 0 else "no bandwidth",
                     moved, start, end)


def _window(doc: dict[str, Any], jobs: list[dict[str, Any]], test: str
            ) -> tuple[int, int, int] | None:
    """(bytes moved, start ms, end ms) of one node's run: fio's `timestamp_ms` (when it
    wrote its report) less the longest job's `runtime`."""
    moved = [j[test].get("io_bytes") for j in jobs]
    runtimes = [j[test].get("runtime") for j in jobs]
    end = doc.get("timestamp_ms")
    if not (all(is_count(x) for x in (*moved, *runtimes)) and is_count(end)):
        return None
    return sum(moved), end - max(runtimes), end


def _line_fields(body: str) -> tuple[dict[str, str], str]:
    """A fio line's own key=value fields (before ` json=`) and fio's JSON text. ValueError
    when a field is given twice."""
    head, _, raw = body.partition(" json=")
    pairs = KEY_VALUE.findall(head)
    fields = dict(pairs)
    if len(fields) != len(pairs):
        raise ValueError("a field given twice")
    return fields, raw


def parse_storage(text: str) -> tuple[list[FioResult], dict[str, float] | None, int | None,
                                      list[str]]:
    """(fio results, the metadata test's times, the `done` node count, problems)."""
    results: list[FioResult] = []
    meta: dict[str, float] | None = None
    done: int | None = None
    problems: list[str] = []
    for number, body, fields in tagged_lines(text, PREFIX):
        try:
            if body.startswith("fio "):
                results.append(_fio(*_line_fields(body)))
            elif body.startswith("meta "):
                if meta is not None or fields.get("rc") != "0":
                    problems.append(f"line {number}: a second or failed metadata test")
                meta = {k: strict_number(v) for k, v in fields.items() if k.endswith("_s")}
                if len(meta) < 5:
                    problems.append(f"line {number}: the metadata test misses a timing")
            elif body.startswith("done "):
                if done is not None:
                    problems.append(f"line {number}: a second `done` line (two runs in one "
                                    "log)")
                done = strict_int(fields.get("nodes", ""), 6)
        except (KeyError, ValueError, IndexError):
            problems.append(f"line {number}: unreadable: {body[:80]}")
    return results, meta, done, problems


def _who_may_report(results: Sequence[FioResult], done: int | None, planned: int
                    ) -> list[str]:
    """The nodes that may report are the run's own (its `done` count) and the fleet's; a
    result from any other, or an "alone" result from another node than 0, is no
    evidence."""
    problems = []
    if done is not None and done > planned:
        problems.append(f"the task says it ran on {done} node(s), the fleet has {planned}")
    limit = min(done if done is not None else planned, planned)
    problems += [f"node {r.node}: a {r.test} ({r.scope}) result from beyond the run's "
                 f"{limit} node(s)" for r in results if r.node >= limit]
    problems += [f"node {r.node}: an alone result ({r.test}) from a node other than 0"
                 for r in results if r.scope == "one" and r.node != 0]
    return problems


def judge_storage(text: str, nodes_planned: int, fs: FilesystemDesign,
                  margin: float) -> tuple[int, list[str], dict[str, Any]]:
    """(exit code, lines, figures) for one filesystem's (or volume's) storage log."""
    if fs.kind == "bucket":
        return judge_bucket(text, nodes_planned, fs)
    if fs.kind == "volume":  # a network disk attaches to one node: its task runs on one
        nodes_planned = 1
    results, meta, done, problems = parse_storage(text)
    problems += _who_may_report(results, done, nodes_planned)
    if done is None:
        problems.append("no `done` line: the task did not finish (or the log is cut off)")
    n = done or 0
    if done is not None and n < nodes_planned:
        problems.append(f"the task ran on {n} node(s), the fleet has {nodes_planned}")
    want = {(0, t, "one") for t in TESTS} | {(i, t, "all") for i in range(n) for t in TESTS}
    got = [(r.node, r.test, r.scope) for r in results]
    problems += [f"node {i}: {t} ({s}) reported twice" for i, t, s in sorted(set(got))
                 if got.count((i, t, s)) > 1]
    problems += [f"node {i}: no {t} result ({'alone' if s == 'one' else 'all nodes'})"
                 for i, t, s in sorted(want - set(got))]
    problems += [f"node {r.node}: {r.test} ({r.scope}): {r.problem}" for r in results
                 if r.mbps is None]
    if meta is None:
        problems.append("no metadata test result")
    figure, source = expected_mbps(fs)
    figures: dict[str, Any] = {"filesystem": fs.name, "expected_mbps": figure,
                               "source": source, "margin": margin}
    if problems:
        return 2, [*(f"unreadable: {p}" for p in problems[:6]),
                   "no verdict: the storage log is incomplete"], figures
    failed = [r for r in results if r.problem]
    totals = {t: window_mbps([r for r in results if r.test == t and r.scope == "all"])
              for t in TESTS}
    alone = {t: next(r.mbps or 0 for r in results if r.test == t and r.scope == "one")
             for t in TESTS}
    figures.update({f"{t}_mbps_all": round(totals[t], 1) for t in TESTS})
    figures.update({f"{t}_mbps_one": round(alone[t], 1) for t in TESTS})
    figures["metadata_s"] = meta
    lines = [f"{fs.name}: {t} {totals[t]:,.0f} MB/s from {n} node(s), {alone[t]:,.0f} MB/s "
             "from one" for t in TESTS]
    lines.append(f"{fs.name}: {META_FILES:,} small files: " + ", ".join(
        f"{k[:-2]} {v:.2f} s" for k, v in (meta or {}).items()))
    lines += [f"FAIL node {r.node}: {r.test} ({r.scope}): {r.problem}" for r in failed]
    mark = figure * (1 - margin) if figure is not None else None
    slow = [t for t in TESTS if mark is not None and totals[t] < mark]
    lines += [f"FAIL: {t} {totals[t]:,.0f} MB/s is under {mark:,.0f} MB/s ({figure:,.0f} "
              f"MB/s from {source}, less {100 * margin:.0f}%)" for t in slow
              if mark is not None and figure is not None]
    if failed or slow:
        return 1, lines, figures
    against = (f"at least {mark:,.0f} MB/s ({source})" if mark is not None else source)
    return 0, [*lines, f"PASS: {fs.name} {against}"], figures


def is_storage_log(text: str) -> bool:
    return PREFIX in text
