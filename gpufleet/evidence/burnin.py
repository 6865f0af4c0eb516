"""The burn-in task: every node checked on its own before it takes work, and its log judged.

Each node of the task (dstack runs one job per node; no MPI between them) prints one line per
fact, `gpufleet burn-in: node=R check=NAME key=value...`: its GPU count, each GPU's memory,
uncorrected ECC errors and pending retired pages, the NVLink/PCIe topology, DCGM's
diagnostics (`dcgmi diag -r LEVEL`: pass or fail from its exit code), the peak bus
bandwidth of a single-node NCCL all-reduce over its GPUs, and what background health checks
miss (``gpufleet.evidence.gpuhealth``: memory held while idle, row remapping, Xid events,
clock slowdowns under that load, and with a duration a soak). :func:`judge` names every node
whose diagnostics fail, whose GPUs or memory differ from the plan or from its own other GPUs,
that shows uncorrected ECC errors or pending retirements, or whose single-node bandwidth is
more than ``margin`` below the median of the nodes. A node that reported nothing, or a fact
that cannot be read, gives no verdict.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpufleet.compile import FleetDesign
from gpufleet.evidence import gpuhealth
from gpufleet.evidence.acceptance import (
    HOST_DIR,
    NCCL_BUILD,
    Expectation,
    gpu_count,
    render_task,
    strict_int,
    strict_number,
    tagged_lines,
    task_resources,
    task_volumes,
)
from gpufleet.evidence.nccllog import embedded_failures

PREFIX = "gpufleet burn-in:"
DEFAULT_LEVEL = 3
DEFAULT_MARGIN = 0.10


def burnin_task(plan: FleetDesign, image: str, level: int = DEFAULT_LEVEL,
                soak_seconds: int = 0) -> dict[str, Any]:
    """The dstack task (as data): one job per node, each checking its own GPUs;
    ``soak_seconds``: the NCCL all-reduce repeated for that long after the checks."""
    gpus = gpu_count(plan)
    host_dir, nccl_build = HOST_DIR, NCCL_BUILD
    say = f'echo "{PREFIX} node=${{DSTACK_NODE_RANK:-0}}'
    commands = []
    if plan.host_setup is not None:
        commands.append(f'if [ "$(sed -n \'s/^status=//p\' {host_dir}/host-ready 2>/dev/null)" '
                        f'!= ready ]; then {say} check=host verdict=fail"; exit 1; fi')
        if plan.host_setup.fabric != "none":  # what the host setup found for the fabric
            commands.append(f"{say} check=fabric want={plan.host_setup.fabric} software="
                            f"$(sed -n 's/^fabric_software=//p' {host_dir}/host-ready | "
                            "tr -d ' ')\"")
    before_load, sample, sampled = gpuhealth.commands(say)
    nccl = f"/opt/nccl-tests/build/all_reduce_perf -b 1G -e 8G -f 2 -g {max(gpus, 1)} -c 1 -n 20"
    commands += [
        *before_load,
        "command -v dcgmi > /dev/null || (apt-get update -qq && apt-get install -y -qq "
        "datacenter-gpu-manager-4-cuda12 > /dev/null) || true",
        "(nv-hostengine -n > /dev/null 2>&1 &) ; sleep 5",
        f'{say} check=gpus value=$(nvidia-smi -L | wc -l) want={gpus} host=$(hostname)"',
        "nvidia-smi --query-gpu=index,memory.total,ecc.errors.uncorrected.volatile.total,"
        "retired_pages.pending --format=csv,noheader,nounits | tr -d ' ' | "
        "while IFS=, read -r i mem ecc pending; do "
        f'{say} check=gpu gpu=$i memory_mib=$mem ecc_uncorrected=${{ecc/\\[N\\/A\\]/0}} '
        f'retired_pending=${{pending/\\[N\\/A\\]/No}}"; done',
        "nvidia-smi topo -m",
        f"if ! command -v dcgmi > /dev/null; then {say} check=dcgm level={level} "
        f"verdict=missing\"; elif dcgmi diag -r {level}; then {say} check=dcgm level={level} "
        f"verdict=pass\"; else {say} check=dcgm level={level} verdict=fail\"; fi",
        nccl_build,
        sample,
        f"{nccl} | tee gpufleet-nccl.log",
        sampled,
        "awk '/^ +[0-9]+ +[0-9]+ +float/ {if ($8 > m) m = $8} END {print m + 0}' gpufleet-nccl.log "
        f"| {{ read -r bw; {say} check=nccl busbw=$bw\"; }}",
        *([_marker_check(say, host_dir, "mounts")] if plan.filesystems else []),
        *([_marker_check(say, host_dir, "buckets")] if plan.buckets else []),
        *([gpuhealth.soak_command(say, soak_seconds, nccl)] if soak_seconds > 0 else []),
        f'{say} check=done"',
    ]
    task: dict[str, Any] = {
        "type": "task", "name": f"{plan.name[:27]}-burnin", "fleets": [plan.name],
        "nodes": max(plan.nodes, 1), "image": image,
        # bash: `${ecc/.../...}` is not in the image's /bin/sh (dash), dstack's default
        "shell": "bash", "privileged": True, "commands": commands,
    }
    if volumes := task_volumes(plan):
        task["volumes"] = volumes
    task["resources"] = task_resources(plan)
    return task


def _marker_check(say: str, host_dir: str, what: str) -> str:
    """The line a node prints for its boot-time mounts (`mounts`: shared filesystems,
    `buckets`: FUSE-mounted buckets): ready, or failed with the marker's reason."""
    return (f"if grep -qs '^status=ready' {host_dir}/{what}-ready; then {say} check={what} "
            f"verdict=ready\"; else {say} check={what} verdict=fail reason=$(tr ' \\n' '__' "
            f"< {host_dir}/{what}-failed 2>/dev/null | cut -c1-200)\"; fi")


@dataclass
class NodeFacts:
    gpus: int | None = None
    want: int | None = None
    memory: dict[int, int] = field(default_factory=dict)  # gpu -> MiB
    ecc: dict[int, int] = field(default_factory=dict)
    pending: dict[int, str] = field(default_factory=dict)
    dcgm: str | None = None
    busbw: float | None = None
    host: str | None = None  # "fail": the host setup marker is not ready
    mounts: str | None = None  # "fail": a shared filesystem did not mount at boot
    buckets: str | None = None  # "fail": a bucket did not mount at boot
    fabric: str | None = None  # the fabric whose collective software the node must have
    fabric_software: str = ""  # what its host setup recorded ("", "none": missing)
    health: gpuhealth.GpuHealth = field(default_factory=gpuhealth.GpuHealth)
    hostname: str = ""
    done: bool = False

    def said(self, check: str) -> bool:
        """Whether the node printed its `check=NAME` line."""
        return {"gpus": self.gpus is not None, "dcgm": self.dcgm is not None,
                "nccl": self.busbw is not None, "done": self.done,
                "fabric": self.fabric is not None, "mounts": self.mounts is not None,
                "buckets": self.buckets is not None,
                "gpu": bool(self.memory)}.get(check, False) or self.health.said(check)


def is_burnin_log(text: str) -> bool:
    return PREFIX in text


def parse_burnin(text: str) -> tuple[dict[str, NodeFacts], list[str]]:
    nodes: dict[str, NodeFacts] = {}
    problems: list[str] = []
    said: set[tuple[str, str, str]] = set()  # (node, check, gpu): each is said once
    for number, body, kv in tagged_lines(text, PREFIX):
        node, check = kv.get("node"), kv.get("check")
        try:
            if str(strict_int(node or "")) != node:  # `00` is not how the task writes 0
                raise ValueError(node)
        except ValueError:
            node = None
        if node is None or check is None:
            problems.append(f"line {number}: not a burn-in line gpufleet writes ({body[:80]})")
            continue
        key = (node, check, kv.get("gpu", ""))
        if key in said:
            problems.append(f"line {number}: node {node} reports `{check}` again (two runs in "
                            "one log? judge each run's log on its own)")
            continue
        said.add(key)
        facts = nodes.setdefault(node, NodeFacts())
        try:
            _read(facts, check, kv)
        except (KeyError, ValueError):
            problems.append(f"line {number}: node {node}: `{check}` cannot be read "
                            f"({body[:80]})")
    return nodes, problems


def _read(facts: NodeFacts, check: str, kv: Mapping[str, str]) -> None:
    if check == "gpus":
        facts.gpus, facts.want = strict_int(kv["value"]), strict_int(kv["want"])
        facts.hostname = kv.get("host", "")
    elif check == "gpu":
        gpu = strict_int(kv["gpu"])
        facts.memory[gpu] = strict_int(kv["memory_mib"])
        facts.ecc[gpu] = strict_int(kv["ecc_uncorrected"])
        facts.pending[gpu] = kv["retired_pending"]
    elif check == "dcgm":
        if kv["verdict"] not in ("pass", "fail", "missing"):
            raise ValueError(kv["verdict"])
        facts.dcgm = kv["verdict"]
    elif check == "nccl":
        facts.busbw = strict_number(kv["busbw"])
    elif check == "host":
        facts.host = kv["verdict"]
    elif check in ("mounts", "buckets"):
        if kv["verdict"] not in ("ready", "fail"):  # only "ready" is a mount that held
            raise ValueError(kv["verdict"])
        setattr(facts, check, kv["verdict"])
    elif check == "fabric":
        facts.fabric, facts.fabric_software = kv["want"], kv.get("software", "")
    elif check == "done":
        facts.done = True
    else:
        gpuhealth.read(facts.health, check, kv)


def _label(rank: str, f: NodeFacts) -> str:
    return f"{rank} ({f.hostname})" if f.hostname else rank


def _node_problems(f: NodeFacts, gpu_gib: float | None, gpus_planned: int | None = None,
                   margin: float = DEFAULT_MARGIN) -> list[str]:
    """What is wrong with one node by its own lines (not yet its bandwidth); its GPU count
    is held against the plan's type where known, else against what the task asked."""
    why = []
    if f.host == "fail":
        why.append("host setup not ready (see /var/log/gpufleet-host-setup.log)")
    want = gpus_planned if gpus_planned is not None else f.want
    if f.gpus is not None and want is not None and f.gpus != want:
        why.append(f"{f.gpus} GPU(s), the plan has {want}")
    short = [g for g, mib in sorted(f.memory.items())
             if gpu_gib is not None and mib < 0.9 * gpu_gib * 1024]
    if short:
        why.append(f"GPU {short[0]} has {f.memory[short[0]]} MiB, the plan's GPU "
                   f"{gpu_gib:g} GB" + (f" ({len(short)} GPUs short)" if len(short) > 1
                                        else ""))
    elif f.memory and len(set(f.memory.values())) > 1:
        low = min(f.memory, key=lambda g: f.memory[g])
        why.append(f"GPU {low} has {f.memory[low]} MiB, the others "
                   f"{max(f.memory.values())} MiB")
    why += [f"GPU {g}: {n} uncorrected ECC error(s)" for g, n in sorted(f.ecc.items()) if n]
    why += [f"GPU {g}: retired pages pending" for g, p in sorted(f.pending.items())
            if p.lower() not in ("no", "0")]
    if f.fabric is not None and f.fabric_software in ("", "none"):
        why.append(f"no {f.fabric} collective software on the host (NCCL would fall back to "
                   "TCP; see /var/log/gpufleet-host-setup.log)")
    if f.mounts == "fail":
        why.append("the shared filesystems did not mount (see "
                   "/var/log/gpufleet-mount.log on the node)")
    if f.buckets == "fail":
        why.append("the buckets did not mount (see /var/log/gpufleet-buckets.log on the "
                   "node)")
    if f.dcgm == "fail":
        why.append("DCGM diagnostics failed (its output is in the log above this line)")
    return why + gpuhealth.problems(f.health, gpu_gib, margin)


def judge(text: str, nodes_planned: int, margin: float = DEFAULT_MARGIN,
          gpu_gib: float | None = None, gpus_planned: int | None = None,
          expect: Sequence[str] = ()) -> tuple[int, list[str]]:
    """(exit code, lines): 0 every node passes, 1 a node named as bad, 2 no verdict.
    ``gpu_gib``: the planned GPU's memory (the catalog's); a GPU showing less than 90% of it
    (nvidia-smi reports a little under the nominal size) is named. ``gpus_planned``: the
    type's GPU count (the plan's, never the log's). ``expect``: the checks every node's task
    prints (``expected_checks``), each of which must be there."""
    nodes, problems = parse_burnin(text)
    problems += _against_plan(nodes, nodes_planned, gpus_planned, expect)
    lines: list[str] = [f"FAIL: {e}" for e in embedded_failures(text)]
    bad: list[str] = []
    for name, f in sorted(nodes.items(), key=lambda kv: int(kv[0])):
        why = _node_problems(f, gpu_gib, gpus_planned, margin)
        if why:
            bad.append(name)
            lines.append(f"FAIL node {_label(name, f)}: " + "; ".join(why))
        elif f.dcgm == "missing":
            problems.append(f"node {name}: DCGM (dcgmi) is not in the image and could not be "
                            "installed; its diagnostics did not run")
        elif f.host != "fail" and not (f.done and f.dcgm is not None and f.busbw is not None):
            problems.append(f"node {name} did not finish (no dcgm, nccl or done line)")
    seen = len(nodes)
    if seen < nodes_planned:
        problems.append(f"{seen} node(s) reported, the task ran on {nodes_planned}")
    measured = {n: f.busbw for n, f in nodes.items() if f.busbw is not None and n not in bad}
    if len(measured) >= 2:
        median = statistics.median(measured.values())
        for name, bw in sorted(measured.items(), key=lambda kv: int(kv[0])):
            if bw <= 0:
                bad.append(name)
                lines.append(f"FAIL node {_label(name, nodes[name])}: single-node busbw 0: "
                             "NCCL moved nothing between its GPUs")
            elif bw < median * (1 - margin):
                bad.append(name)
                lines.append(f"FAIL node {_label(name, nodes[name])}: single-node busbw "
                             f"{bw:g} GB/s, {100 * (1 - bw / median):.0f}% under the nodes' median "
                             f"{median:g} GB/s (margin {100 * margin:.0f}%)")
        lines.append(f"single-node busbw: median {median:g} GB/s over {len(measured)} node(s)")
    if bad:
        hosts = [nodes[n].hostname or f"rank {n}" for n in sorted(set(bad), key=int)]
        return 1, [*lines, f"FAIL: replace {', '.join(hosts)} (`gpufleet replace FLEET "
                           "NODE...`)"]
    if any(line.startswith("FAIL: ") for line in lines):  # an embedded table's wrong results
        return 1, [*lines, "FAIL"]
    if problems:
        return 2, [*lines, *(f"unreadable: {p}" for p in problems[:5]),
                   "no verdict: the burn-in log is incomplete"]
    return 0, [*lines, f"PASS: {seen} node(s) burned in"]


def expected_checks(plan: FleetDesign) -> tuple[str, ...]:
    """The checks the burn-in task of ``plan`` makes every node print (`check=NAME`)."""
    out = ["gpus", "idle", "rows", "xid", "dcgm", "nccl", "throttle", "done"]
    if plan.host_setup is not None and plan.host_setup.fabric != "none":
        out.append("fabric")
    if plan.filesystems:
        out.append("mounts")
    if plan.buckets:
        out.append("buckets")
    return tuple(out)


def _against_plan(nodes: dict[str, NodeFacts], planned: int, gpus: int | None,
                  expect: Sequence[str] = ()) -> list[str]:
    """What the plan says should be there and the log does not prove: nodes outside the
    fleet, a check the task prints missing, per-GPU lines missing or incomplete, a GPU
    count the log states for itself."""
    out = [f"node {n} is outside the fleet's {planned} node(s) (0..{planned - 1})"
           for n in sorted(nodes, key=int) if int(n) >= max(planned, 1)]
    soaked = any(f.health.soak is not None for f in nodes.values())
    for n, f in sorted(nodes.items(), key=lambda kv: int(kv[0])):
        if f.host == "fail":
            continue
        absent = [c for c in (*expect, *(["soak"] if soaked else [])) if not f.said(c)]
        out += [f"node {n}: {p}" for p in gpuhealth.incomplete(f.health, gpus)]
        if absent:
            out.append(f"node {n}: no `{'`, `'.join(absent)}` line(s)")
        if gpus and f.memory and sorted(f.memory) != list(range(gpus)):
            out.append(f"node {n}: per-GPU lines for {len(f.memory)} of {gpus} GPU(s)")
        if gpus is not None and f.want is not None and f.want != gpus:
            out.append(f"node {n}: the log wants {f.want} GPU(s), the plan's type has {gpus}")
        if f.host != "fail" and f.done and (gpus or f.gpus) and not f.memory:
            out.append(f"node {n}: no per-GPU lines (memory, ECC): its GPUs were not checked")
    return out


def render_burnin(task: Mapping[str, Any]) -> str:
    """The burn-in task file, with its header saying how to run and judge it."""
    exp = Expectation("none", "each node on its own", None, None, "", False)
    return render_task(task, exp, "Burn-in (DCGM diagnostics, GPU health, single-node NCCL)")
