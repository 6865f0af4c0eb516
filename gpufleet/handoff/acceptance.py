"""Cluster acceptance: an NCCL all-reduce task per fleet, and a checker for its log.

`task_for` turns a compiled fleet into a dstack task that runs nccl-tests' `all_reduce_perf`
across every GPU of every node with the fabric's NCCL settings (fabrics.json in the bundled
catalog, each fact with its source); `parse_log` reads the standard nccl-tests table and
`verdict` compares the peak bus bandwidth with what the fabric should give. Pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import yaml

from gpufleet.compile import HOST_MARKER_DIR as MARKER_DIR
from gpufleet.compile import FleetPlan

IMAGE = "nvcr.io/nvidia/pytorch:24.12-py3"  # CUDA, NCCL and Open MPI; nccl-tests is built
NCCL_TESTS = "https://github.com/NVIDIA/nccl-tests"
TASK_MARKER = "written by `gpufleet acceptance`"  # in the header of every task file it writes


@cache
def fabric_facts() -> dict[str, Any]:
    text = (resources.files("gpufleet") / "data" / "catalog" / "fabrics.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


@dataclass(frozen=True, slots=True)
class Expectation:
    fabric: str  # the rdma kind, or "none"
    description: str
    busbw_gbps: float | None  # the expected peak bus bandwidth; None: unknown
    threshold_gbps: float | None  # what passes (expected x pass_fraction)
    source: str
    multi_node: bool
    measured_nodes: int | None = None  # the node count the published figure was measured on

    def text(self) -> str:
        if self.threshold_gbps is None:
            why = ("a single-node run (no RDMA fabric between nodes)" if not self.multi_node
                   else f"no published figure for this fabric ({self.fabric})")
            return f"no bandwidth threshold: {why}; the check verifies correctness only"
        return (f"expected about {self.busbw_gbps:g} GB/s bus bandwidth at large messages; "
                f"passes at >= {self.threshold_gbps:g} GB/s (source: {self.source})")


def test_nodes(plan: FleetPlan) -> int:
    """How many nodes the acceptance run spans: the fleet's target, and at least two where
    the fleet may grow to two (a `nodes: 0..2` cluster fleet is tested across its nodes,
    which dstack provisions for the task)."""
    if plan.nodes_max is None or plan.nodes_max >= 2:
        return max(plan.nodes, 2)
    return max(plan.nodes, 1)


def expectation(plan: FleetPlan) -> Expectation:
    facts = fabric_facts()
    multi = test_nodes(plan) >= 2 and plan.rdma not in ("none", "")
    fabric = facts["fabrics"].get(plan.rdma) if multi else None
    expected = facts["expected"].get(f"{plan.backend}/{plan.instance_type}") if multi else None
    if fabric is None or expected is None:
        return Expectation(plan.rdma if multi else "none",
                           fabric["description"] if fabric else "intra-node (NVLink/PCIe)",
                           None, None, fabric["source"] if fabric else "", multi)
    value = float(expected["busbw_gbps"])
    threshold = round(value * float(facts["pass_fraction"]), 1)
    return Expectation(plan.rdma, fabric["description"], value, threshold, expected["source"],
                       True, expected.get("nodes"))


def gpu_count(plan: FleetPlan) -> int:
    """GPUs per node (0 for a CPU fleet)."""
    head = plan.gpu.split("x", 1)[0]
    return int(head) if head.isdigit() else 0


def task_resources(plan: FleetPlan) -> dict[str, Any]:
    """A task's `resources`: every GPU of a node, by name, and room for NCCL's buffers."""
    gpus = gpu_count(plan)
    return {"gpu": f"{plan.gpu.split('x', 1)[1]}:{gpus}" if gpus else 0, "shm_size": "16GB"}


def tagged_lines(text: str, prefix: str) -> Iterator[tuple[int, str, dict[str, str]]]:
    """The lines a gpufleet task printed after ``prefix`` (burn-in, pairs): line number,
    the text after the prefix, and its key=value pairs."""
    for number, line in enumerate(text.splitlines(), 1):
        at = line.find(prefix)
        if at >= 0:
            body = line[at + len(prefix):].strip()
            yield number, body, dict(_KV.findall(body))


def strict_int(text: str, digits: int = 12) -> int:
    """A plain ASCII count of at most ``digits`` digits (ValueError otherwise)."""
    if not (0 < len(text) <= digits and text.isascii() and text.isdigit()):
        raise ValueError(text)
    return int(text)


def strict_number(text: str) -> float:
    """A plain ASCII number as nccl-tests prints it (ValueError otherwise)."""
    if not _NUMBER.fullmatch(text):
        raise ValueError(text)
    return float(text)


NCCL_BUILD = (f"[ -x /opt/nccl-tests/build/all_reduce_perf ] || (git clone --depth 1 "
              f"{NCCL_TESTS} /opt/nccl-tests && make -C /opt/nccl-tests MPI=1 "
              "MPI_HOME=/usr/local/mpi -j)")


def task_for(plan: FleetPlan) -> tuple[dict[str, Any], Expectation]:
    """The dstack task (as data) and what its result should show."""
    exp = expectation(plan)
    gpus = gpu_count(plan)
    facts = fabric_facts()["fabrics"].get(plan.rdma, {}) if exp.multi_node else {}
    env = dict(facts.get("env", {}))
    topo = facts.get("topo_files", {}).get(plan.instance_type)
    if topo:
        env["NCCL_TOPO_FILE"] = topo
    env["NCCL_DEBUG"] = "INFO"
    build = NCCL_BUILD
    setup = list(facts.get("setup", []))
    sizes = "-b 8 -e 8G -f 2"
    if exp.multi_node:
        run = ("if [ \"$DSTACK_NODE_RANK\" -eq 0 ]; then\n"
               "  mpirun --allow-run-as-root --hostfile \"$DSTACK_MPI_HOSTFILE\" "
               "-n \"$DSTACK_GPUS_NUM\" -N \"$DSTACK_GPUS_PER_NODE\" --bind-to none "
               + " ".join(f"-x {k}" for k in sorted(env)) +
               f" /opt/nccl-tests/build/all_reduce_perf {sizes} -g 1 -c 1 -n 50\n"
               "else\n  sleep infinity\nfi")
    else:
        run = f"/opt/nccl-tests/build/all_reduce_perf {sizes} -g {max(gpus, 1)} -c 1 -n 50"
    task: dict[str, Any] = {
        "type": "task", "name": f"{plan.name[:30]}-nccl", "fleets": [plan.name],
        "nodes": test_nodes(plan) if exp.multi_node else 1,
        "image": facts.get("image", IMAGE),
        "privileged": True, "env": env, "commands": [*_host_check(plan), *setup, build, run],
    }
    if volumes := task_volumes(plan):
        task["volumes"] = volumes
    if exp.multi_node:
        task["startup_order"] = "workers-first"
        task["stop_criteria"] = "master-done"
    task["resources"] = task_resources(plan)
    return task, exp


def task_volumes(plan: FleetPlan) -> list[dict[str, str]]:
    """The instance volumes of a fleet's tasks: the nodes' marker files (read in the task)
    and the fleet's shared filesystems, at the path they have on the host."""
    volumes = []
    if plan.host_setup is not None or plan.filesystems:
        volumes.append({"instance_path": MARKER_DIR, "path": HOST_DIR})
    volumes += [{"instance_path": fs.mount, "path": fs.mount} for fs in plan.filesystems]
    return volumes


def _host_check(plan: FleetPlan) -> list[str]:
    """The task's first command: stop on a node whose host setup did not finish."""
    if plan.host_setup is None:
        return []
    return [f'if [ "$(sed -n \'s/^status=//p\' {HOST_DIR}/host-ready 2>/dev/null)" != ready ]; '
            f'then echo "gpufleet acceptance: node ${{DSTACK_NODE_RANK:-0}}: {HOST_NOT_READY}: '
            f'$(tr \'\\n\' \' \' < {HOST_DIR}/host-failed 2>/dev/null || echo no marker)"; '
            "exit 1; fi"]


class _Dumper(yaml.SafeDumper):
    """Multi-line commands as literal blocks, the way people write dstack files."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def render_task(task: Mapping[str, Any], exp: Expectation,
                title: str = "NCCL all-reduce acceptance run") -> str:
    header = (f"# {title} for fleet {task['fleets'][0]}, written by "
              "`gpufleet acceptance`.\n# Run: dstack apply -f <this file>; save the log and "
              "check it with `gpufleet acceptance check LOG --fleet NAME PATH...`.\n"
              f"# Fabric: {exp.description}.\n# {exp.text()}\n")
    return header + yaml.dump(dict(task), Dumper=_Dumper, sort_keys=False,
                              default_flow_style=False, width=4096)


# --- the log ------------------------------------------------------------------------------

MAX_LOG_BYTES = 50 * 1024 * 1024
# nccl-tests prints plain ASCII numbers; anything else (exponents, `_`, other scripts' digits,
# nan, 5,000 digits) is not evidence it wrote. Python's float() would take them all.
_NUMBER = re.compile(r"[0-9]{1,12}(\.[0-9]{1,9})?")
_COUNT = re.compile(r"[0-9]{1,12}")
_ROW = re.compile(r"^\s*([0-9]{1,15})\s+([0-9]{1,15})\s+(\S+)\s+(\S+)\s+(-?[0-9]{1,12})\s+(.*)$")
_KV = re.compile(r"([a-z_]+)=(\S+)")  # key=value in the lines gpufleet's tasks print
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\S+)\s+(\S+)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S*)")
# What the task's first command prints on a node whose host setup is not ready.
HOST_NOT_READY = "host setup not ready"
_HOST = re.compile(rf"gpufleet acceptance: node (\S+): {HOST_NOT_READY}: (.*)")
HOST_DIR = "/gpufleet-host"  # where the task mounts the nodes' /var/lib/gpufleet


class Unreadable(ValueError):
    """A value nccl-tests would not have written."""


def _num(text: str) -> float:
    if not _NUMBER.fullmatch(text):
        raise Unreadable(text)
    return float(text)


def _wrong(text: str) -> int | None:
    if text.upper() == "N/A":
        return None
    if not _COUNT.fullmatch(text):
        raise Unreadable(text)
    return int(text)


@dataclass
class Row:
    size: int
    busbw_out: float
    busbw_in: float
    wrong_out: int | None
    wrong_in: int | None

    @property
    def busbw(self) -> float:
        return max(self.busbw_out, self.busbw_in)


@dataclass
class Run:
    """One all_reduce_perf table: its rows, and the lines nccl-tests ends a run with."""

    line: int  # where the table starts
    rows: list[Row] = field(default_factory=list)
    avg_busbw: float | None = None
    out_of_bounds: tuple[int, str] | None = None  # (count, "OK" or "FAILED")

    @property
    def peak(self) -> Row | None:
        return max(self.rows, key=lambda r: r.busbw) if self.rows else None

    def plateau(self, fraction: float = 0.95) -> int | None:
        """The smallest size from which bus bandwidth stays within ``fraction`` of the peak."""
        peak = self.peak
        if peak is None:
            return None
        start = None
        for r in self.rows:
            if r.busbw >= fraction * peak.busbw:
                start = r.size if start is None else start
            else:
                start = None
        return start

    def wrong(self) -> list[Row]:
        return [r for r in self.rows if (r.wrong_out or 0) > 0 or (r.wrong_in or 0) > 0]


@dataclass
class NcclLog:
    runs: list[Run] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # lines that cannot be read strictly
    too_big: bool = False  # larger than the read bound: the rest was not read
    hosts_not_ready: list[str] = field(default_factory=list)  # "node 1: reason"

    @property
    def rows(self) -> list[Row]:
        return [r for run in self.runs for r in run.rows]


def parse_log(text: str, too_big: bool = False) -> NcclLog:
    """nccl-tests output: each table (size, count, type, redop, root, then time, algbw,
    busbw and #wrong out-of-place and in-place), ended by "# Out of bounds values : N OK"
    and "# Avg bus bandwidth : X". Lines of dstack and mpirun around it are ignored; a row or
    summary line that cannot be read strictly is a problem, never skipped; a table whose
    sizes go back down starts a new run, and a size that repeats means two runs are mixed."""
    log = NcclLog(too_big=too_big)
    run: Run | None = None
    for number, line in enumerate(text.splitlines(), 1):
        host = _HOST.search(line)
        if host is not None:
            log.hosts_not_ready.append(f"node {host.group(1)}: {host.group(2).strip()}")
            continue
        if "#wrong" in line and "busbw" in line:
            run = Run(number)
            log.runs.append(run)
            continue
        if run is None:
            continue
        if _read_summary(line, number, run, log):
            continue
        m = _ROW.match(line)
        if m is None:
            continue
        try:
            row = _row(m)
        except Unreadable as e:
            log.problems.append(f"line {number}: {str(e)[:40]!r} is not a number nccl-tests "
                                f"writes ({line.strip()[:100]})")
            continue
        if run.rows and row.size <= run.rows[-1].size:
            if row.size == run.rows[-1].size:
                log.problems.append(f"line {number}: size {row.size} repeats: two runs are "
                                    "mixed in this log")
                continue
            run = Run(number)  # a second table without its header
            log.runs.append(run)
        run.rows.append(row)
    return log


def _row(m: re.Match[str]) -> Row:
    rest = m.group(6).split()
    if len(rest) != 8:
        raise Unreadable(f"{len(rest)} of 8 columns")
    for i in (0, 1, 4, 5):  # time and algbw of both sides must be numbers too
        _num(rest[i])
    if int(m.group(5)) < -1:
        raise Unreadable(m.group(5))
    return Row(int(m.group(1)), _num(rest[2]), _num(rest[6]), _wrong(rest[3]),
               _wrong(rest[7]))


def _read_summary(line: str, number: int, run: Run, log: NcclLog) -> bool:
    oob, avg = _OOB.match(line.strip()), _AVG.match(line.strip())
    if oob is not None:
        if _COUNT.fullmatch(oob.group(1)) and oob.group(2) in ("OK", "FAILED"):
            run.out_of_bounds = (int(oob.group(1)), oob.group(2))
        else:
            log.problems.append(f"line {number}: the out-of-bounds line cannot be read "
                                f"({line.strip()[:100]})")
        return True
    if avg is not None:
        try:
            run.avg_busbw = _num(avg.group(1))
        except Unreadable:
            log.problems.append(f"line {number}: the average bus bandwidth cannot be read "
                                f"({line.strip()[:100]})")
        return True
    return False


@dataclass
class Verdict:
    code: int  # 0 pass, 1 fail, 2 unreadable
    lines: list[str]


def _size(n: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor} {unit}"
    return f"{n} B"


def _judge_run(run: Run, exp: Expectation, label: str) -> tuple[list[str], bool, list[str]]:
    """(lines, failed, why unreadable) for one run."""
    peak = run.peak
    assert peak is not None
    lines = [f"{label}peak bus bandwidth: {peak.busbw:g} GB/s at {_size(peak.size)}"]
    plateau = run.plateau()
    if plateau is not None:
        lines.append(f"{label}bandwidth plateaus from {_size(plateau)} (within 5% of the peak)")
    unreadable: list[str] = []
    ceiling = float(fabric_facts()["max_busbw_gbps"])
    if peak.busbw > ceiling:
        unreadable.append(f"{label}a bus bandwidth of {peak.busbw:g} GB/s is more than any GPU "
                          f"interconnect carries ({ceiling:g} GB/s)")
    if run.avg_busbw is None:
        unreadable.append(f"{label}no 'Avg bus bandwidth' line: the run was cut off")
    else:
        lines.append(f"{label}average bus bandwidth (nccl-tests): {run.avg_busbw:g} GB/s")
    failed = False
    if run.out_of_bounds is not None and run.out_of_bounds[1] == "FAILED":
        failed = True
        lines.append(f"{label}FAIL: nccl-tests found {run.out_of_bounds[0]} out-of-bounds "
                     "value(s) (`# Out of bounds values : ... FAILED`)")
    wrong = run.wrong()
    if wrong:
        failed = True
        lines.append(f"{label}FAIL: wrong results (#wrong > 0) at " +
                     ", ".join(_size(r.size) for r in wrong[:5]))
    if exp.threshold_gbps is not None:
        if max(r.size for r in run.rows) < (1 << 30):
            lines.append(f"{label}note: the run stops below 1 GiB, where bus bandwidth has "
                         "not peaked yet")
        if peak.busbw < exp.threshold_gbps:
            failed = True
            lines.append(f"{label}FAIL: peak {peak.busbw:g} GB/s is below "
                         f"{exp.threshold_gbps:g} GB/s: check the RDMA NICs, their subnets, "
                         "the MTU and the NCCL plugin")
    return lines, failed, unreadable


def verdict(log: NcclLog, exp: Expectation) -> Verdict:
    """PASS only on complete, strictly readable evidence; certain failures (out-of-bounds,
    wrong results, low bandwidth) FAIL; anything that cannot be read is exit 2."""
    runs = [r for r in log.runs if r.rows]
    if log.hosts_not_ready:  # certain: the task stopped before NCCL on these nodes
        return Verdict(1, [f"FAIL: {h} (see /var/log/gpufleet-host-setup.log on the node)"
                           for h in log.hosts_not_ready] + ["FAIL"])
    if log.too_big:
        return Verdict(2, [f"unreadable log: larger than {MAX_LOG_BYTES // (1 << 20)} MB, and "
                           "gpufleet reads no more than that; keep the nccl-tests output only "
                           "(`dstack logs RUN > run.log`, then cut it to the table)"])
    if not runs:
        why = "no nccl-tests result table" if not log.runs else "the table has no rows"
        return Verdict(2, [f"unreadable log: {why} (was the run cut off before the first "
                           "size, or is this the wrong file?)", *log.problems[:3]])
    lines: list[str] = []
    failed = False
    unreadable: list[str] = list(log.problems)
    if len(runs) > 1:
        lines.append(f"{len(runs)} runs in this log, judged one by one")
    for i, run in enumerate(runs, 1):
        label = f"run {i} (line {run.line}): " if len(runs) > 1 else ""
        more, bad, reasons = _judge_run(run, exp, label)
        lines += more
        failed = failed or bad
        unreadable += reasons
    lines.append(exp.text())
    if failed:
        return Verdict(1, [*lines, *unreadable[:3], "FAIL"])
    if unreadable:
        return Verdict(2, [*lines, *(f"unreadable: {u}" for u in unreadable[:5]),
                           f"unreadable log: {len(unreadable)} problem(s); no verdict"])
    return Verdict(0, [*lines, "PASS"])
