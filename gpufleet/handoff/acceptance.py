"""Cluster acceptance: an NCCL all-reduce task per fleet, and a checker for its log.

`task_for` turns a compiled fleet into a dstack task that runs nccl-tests' `all_reduce_perf`
across every GPU of every node with the fabric's NCCL settings (fabrics.json in the bundled
catalog, each fact with its source); `parse_log` reads the standard nccl-tests table and
`verdict` compares the peak bus bandwidth with what the fabric should give. Pure.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import yaml

from gpufleet.compile import FleetPlan

IMAGE = "nvcr.io/nvidia/pytorch:24.12-py3"  # CUDA, NCCL and Open MPI; nccl-tests is built
NCCL_TESTS = "https://github.com/NVIDIA/nccl-tests"
MAX_LOG_BYTES = 50 * 1024 * 1024


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

    def text(self) -> str:
        if self.threshold_gbps is None:
            why = ("a single-node run (no RDMA fabric between nodes)" if not self.multi_node
                   else f"no published figure for this fabric ({self.fabric})")
            return f"no bandwidth threshold: {why}; the check verifies correctness only"
        return (f"expected about {self.busbw_gbps:g} GB/s bus bandwidth at large messages; "
                f"passes at >= {self.threshold_gbps:g} GB/s (source: {self.source})")


def expectation(plan: FleetPlan) -> Expectation:
    facts = fabric_facts()
    multi = plan.nodes >= 2 and plan.rdma not in ("none", "")
    fabric = facts["fabrics"].get(plan.rdma) if multi else None
    expected = facts["expected"].get(f"{plan.backend}/{plan.instance_type}") if multi else None
    if fabric is None or expected is None:
        return Expectation(plan.rdma if multi else "none",
                           fabric["description"] if fabric else "intra-node (NVLink/PCIe)",
                           None, None, fabric["source"] if fabric else "", multi)
    value = float(expected["busbw_gbps"])
    threshold = round(value * float(facts["pass_fraction"]), 1)
    return Expectation(plan.rdma, fabric["description"], value, threshold, expected["source"],
                       True)


def _gpus(plan: FleetPlan) -> int:
    try:
        return int(plan.gpu.split("x", 1)[0])
    except ValueError:
        return 0


def task_for(plan: FleetPlan) -> tuple[dict[str, Any], Expectation]:
    """The dstack task (as data) and what its result should show."""
    exp = expectation(plan)
    gpus = _gpus(plan)
    facts = fabric_facts()["fabrics"].get(plan.rdma, {}) if exp.multi_node else {}
    env = dict(facts.get("env", {}))
    topo = facts.get("topo_files", {}).get(plan.instance_type)
    if topo:
        env["NCCL_TOPO_FILE"] = topo
    env["NCCL_DEBUG"] = "INFO"
    build = (f"[ -x /opt/nccl-tests/build/all_reduce_perf ] || (git clone --depth 1 "
             f"{NCCL_TESTS} /opt/nccl-tests && make -C /opt/nccl-tests MPI=1 "
             "MPI_HOME=/usr/local/mpi -j)")
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
        "nodes": max(plan.nodes, 1) if exp.multi_node else 1,
        "image": facts.get("image", IMAGE),
        "privileged": True, "env": env, "commands": [*setup, build, run],
    }
    if exp.multi_node:
        task["startup_order"] = "workers-first"
        task["stop_criteria"] = "master-done"
    task["resources"] = {"gpu": f"{plan.gpu.split('x', 1)[1]}:{gpus}" if gpus else 0,
                         "shm_size": "16GB"}
    return task, exp


class _Dumper(yaml.SafeDumper):
    """Multi-line commands as literal blocks, the way people write dstack files."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def render_task(task: Mapping[str, Any], exp: Expectation) -> str:
    header = (f"# NCCL all-reduce acceptance run for fleet {task['fleets'][0]}, written by "
              "`gpufleet acceptance`.\n# Run: dstack apply -f <this file>; save the log and "
              "check it with `gpufleet acceptance check LOG --fleet NAME PATH...`.\n"
              f"# Fabric: {exp.description}.\n# {exp.text()}\n")
    return header + yaml.dump(dict(task), Dumper=_Dumper, sort_keys=False,
                              default_flow_style=False, width=4096)


# --- the log ------------------------------------------------------------------------------

_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(-?\d+)\s+(.*)$")


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
class NcclLog:
    rows: list[Row] = field(default_factory=list)
    avg_busbw: float | None = None
    skipped: list[str] = field(default_factory=list)  # lines that looked like rows but broke
    header: bool = False

    @property
    def peak(self) -> Row | None:
        return max(self.rows, key=lambda r: r.busbw) if self.rows else None

    def plateau(self, fraction: float = 0.95) -> int | None:
        """The smallest size from which bus bandwidth stays within ``fraction`` of the peak."""
        peak = self.peak
        if peak is None:
            return None
        start = None
        for r in sorted(self.rows, key=lambda r: r.size):
            if r.busbw >= fraction * peak.busbw:
                start = r.size if start is None else start
            else:
                start = None
        return start

    def wrong(self) -> list[Row]:
        return [r for r in self.rows if (r.wrong_out or 0) > 0 or (r.wrong_in or 0) > 0]


def _num(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(text)
    return value


def _wrong(text: str) -> int | None:
    return None if text.upper() == "N/A" else int(text)


def parse_log(text: str) -> NcclLog:
    """nccl-tests output: rows of size, count, type, redop, root, then time/algbw/busbw/#wrong
    for out-of-place and in-place; "# Avg bus bandwidth : X". Anything else is ignored (dstack
    and mpirun print around it); rows that break off or hold garbage are listed as skipped."""
    log = NcclLog()
    for line in text.splitlines():
        if "#wrong" in line and "busbw" in line:
            log.header = True
            continue
        if line.lstrip().startswith("# Avg bus bandwidth"):
            try:
                log.avg_busbw = _num(line.split(":", 1)[1].split()[0])
            except (IndexError, ValueError):
                log.skipped.append(line.strip()[:120])
            continue
        m = _ROW.match(line)
        if not m or not log.header:
            continue
        rest = m.group(6).split()
        try:
            if len(rest) != 8:
                raise ValueError("columns")
            for i in (0, 1, 4, 5):  # time and algbw of both sides must be numbers too
                _num(rest[i])
            log.rows.append(Row(int(m.group(1)), _num(rest[2]), _num(rest[6]),
                                _wrong(rest[3]), _wrong(rest[7])))
        except ValueError:
            log.skipped.append(line.strip()[:120])
    return log


@dataclass
class Verdict:
    code: int  # 0 pass, 1 fail, 2 unreadable
    lines: list[str]


def _size(n: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor} {unit}"
    return f"{n} B"


def verdict(log: NcclLog, exp: Expectation) -> Verdict:
    if not log.rows:
        why = "no nccl-tests result table" if not log.header else "the table has no rows"
        return Verdict(2, [f"unreadable log: {why} (was the run cut off before the first "
                           "size, or is this the wrong file?)"])
    peak = log.peak
    assert peak is not None
    lines = [f"peak bus bandwidth: {peak.busbw:g} GB/s at {_size(peak.size)}"]
    plateau = log.plateau()
    if plateau is not None:
        lines.append(f"bandwidth plateaus from {_size(plateau)} (within 5% of the peak)")
    if log.avg_busbw is not None:
        lines.append(f"average bus bandwidth (nccl-tests): {log.avg_busbw:g} GB/s")
    else:
        lines.append("no 'Avg bus bandwidth' line: the run may have been cut off")
    if log.skipped:
        lines.append(f"{len(log.skipped)} broken row(s) ignored, first: {log.skipped[0]}")
    failed = False
    wrong = log.wrong()
    if wrong:
        failed = True
        lines.append("FAIL: wrong results (#wrong > 0) at " +
                     ", ".join(_size(r.size) for r in wrong[:5]))
    lines.append(exp.text())
    if exp.threshold_gbps is not None:
        if max(r.size for r in log.rows) < (1 << 30):
            lines.append("note: the log stops below 1 GiB, where bus bandwidth has not "
                         "peaked yet")
        if peak.busbw < exp.threshold_gbps:
            failed = True
            lines.append(f"FAIL: peak {peak.busbw:g} GB/s is below {exp.threshold_gbps:g} "
                         "GB/s: check the RDMA NICs, their subnets, the MTU and the NCCL "
                         "plugin")
    lines.append("FAIL" if failed else "PASS")
    return Verdict(1 if failed else 0, lines)
