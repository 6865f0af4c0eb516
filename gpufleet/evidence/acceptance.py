"""Cluster acceptance: an NCCL all-reduce task per fleet, and a checker for its log.

`task_for` turns a compiled fleet into a dstack task that runs nccl-tests' `all_reduce_perf`
across every GPU of every node with the fabric's NCCL settings (fabrics.json in the bundled
catalog, each fact with its source), and the expectation its log is judged against; the log's
reading and verdict are in `nccllog`. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

import yaml

from gpufleet.compile import HOST_MARKER_DIR as MARKER_DIR
from gpufleet.compile import FleetDesign, fabric, fabric_facts, run_env, run_mounts, run_setup

IMAGE = "nvcr.io/nvidia/pytorch:24.12-py3"  # CUDA, NCCL and Open MPI; nccl-tests is built
NCCL_TESTS = "https://github.com/NVIDIA/nccl-tests"
TASK_MARKER = "written by `gpufleet acceptance`"  # in the header of every task file it writes


@dataclass(frozen=True, slots=True)
class Expectation:
    fabric: str  # the rdma kind, or "none"
    description: str
    busbw_gbps: float | None  # the expected peak bus bandwidth; None: unknown
    threshold_gbps: float | None  # what passes (expected x pass_fraction)
    source: str
    multi_node: bool
    measured_nodes: int | None = None  # the node count the published figure was measured on
    nodes: int = 1  # the nodes the run must span (every one of the task's)
    gpu: str | None = None  # the plan's GPU model (B200): the log's rank lines must name it
    gpus: int | None = None  # GPUs per node of the plan's type

    def text(self) -> str:
        if self.threshold_gbps is None:
            why = ("a single-node run (no RDMA fabric between nodes)" if not self.multi_node
                   else f"no published figure for this fabric ({self.fabric})")
            return f"no bandwidth threshold: {why}; the check verifies correctness only"
        return (f"expected about {self.busbw_gbps:g} GB/s bus bandwidth at large messages; "
                f"passes at >= {self.threshold_gbps:g} GB/s (source: {self.source})")


def test_nodes(plan: FleetDesign) -> int:
    """How many nodes the acceptance run spans: the fleet's target, and at least two where
    the fleet may grow to two (a `nodes: 0..2` cluster fleet is tested across its nodes,
    which dstack provisions for the task)."""
    if plan.nodes_max is None or plan.nodes_max >= 2:
        return max(plan.nodes, 2)
    return max(plan.nodes, 1)


def expectation(plan: FleetDesign) -> Expectation:
    facts = fabric_facts()
    multi = test_nodes(plan) >= 2 and plan.rdma not in ("none", "")
    fabric = facts["fabrics"].get(plan.rdma) if multi else None
    expected = facts["expected"].get(f"{plan.backend}/{plan.instance_type}") if multi else None
    nodes = test_nodes(plan) if multi else 1
    gpu = plan.gpu.split("x", 1)[1] if "x" in plan.gpu and gpu_count(plan) else None
    if fabric is None or expected is None:
        return Expectation(plan.rdma if multi else "none",
                           fabric["description"] if fabric else "intra-node (NVLink/PCIe)",
                           None, None, fabric["source"] if fabric else "", multi,
                           nodes=nodes, gpu=gpu, gpus=gpu_count(plan))
    value = float(expected["busbw_gbps"])
    threshold = round(value * float(facts["pass_fraction"]), 1)
    return Expectation(plan.rdma, fabric["description"], value, threshold, expected["source"],
                       True, expected.get("nodes"), nodes=nodes, gpu=gpu,
                       gpus=gpu_count(plan))


def gpu_count(plan: FleetDesign) -> int:
    """GPUs per node (0 for a CPU fleet)."""
    head = plan.gpu.split("x", 1)[0]
    return int(head) if head.isdigit() else 0


def task_resources(plan: FleetDesign) -> dict[str, Any]:
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
            yield number, body, dict(KEY_VALUE.findall(body))


def strict_int(text: str, digits: int = 12) -> int:
    """A plain ASCII count of at most ``digits`` digits (ValueError otherwise)."""
    if not (0 < len(text) <= digits and text.isascii() and text.isdigit()):
        raise ValueError(text)
    return int(text)


def is_count(value: object) -> TypeGuard[int]:
    """A whole number >= 0 as JSON gives it: an int, not a bool or a float."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def strict_number(text: str) -> float:
    """A plain ASCII number as nccl-tests prints it (ValueError otherwise)."""
    if not _NUMBER.fullmatch(text):
        raise ValueError(text)
    return float(text)


_NUMBER = re.compile(r"[0-9]{1,12}(\.[0-9]{1,9})?")
KEY_VALUE = re.compile(r"([a-z_]+)=(\S+)")  # key=value in the lines gpufleet's tasks print
STORAGE_PREFIX = "gpufleet storage:"  # the storage tasks' lines (filesystems and buckets)
MAX_NODE_BYTES_S = 10 ** 12  # 1 TB/s from one node: past any NIC or disk array


class TimedRun(Protocol):
    """One node's measured transfer: what it moved, from when to when (ms)."""

    @property
    def io_bytes(self) -> int: ...
    @property
    def start_ms(self) -> int: ...
    @property
    def end_ms(self) -> int: ...


def window_mbps(runs: Sequence[TimedRun]) -> float:
    """MB/s the nodes moved together: every byte over the window from the first run's start
    to the last one's end (runs that do not overlap are not summed as if they had)."""
    if not runs:
        return 0.0
    window_ms = max(r.end_ms for r in runs) - min(r.start_ms for r in runs)
    return sum(r.io_bytes for r in runs) / (window_ms / 1000) / 1e6 if window_ms > 0 else 0.0
HOST_NOT_READY = "host setup not ready"
# the NCCL variables a fabric's setup script exported (gIB's set_nccl_env.sh, TCPXO's
# nccl-env-profile.sh), passed to every rank as dstack's own A3 Mega example passes them
FROM_SETUP = " $(env | awk -F= '/^NCCL_/ {print \"-x\", $1}' | xargs)"


NCCL_BUILD = (f"[ -x /opt/nccl-tests/build/all_reduce_perf ] || (git clone --depth 1 "
              f"{NCCL_TESTS} /opt/nccl-tests && make -C /opt/nccl-tests MPI=1 "
              "MPI_HOME=/usr/local/mpi -j)")


def task_for(plan: FleetDesign) -> tuple[dict[str, Any], Expectation]:
    """The dstack task (as data) and what its result should show."""
    exp = expectation(plan)
    gpus = gpu_count(plan)
    facts = fabric(plan.rdma) if exp.multi_node else {}
    env = run_env(plan.rdma) if exp.multi_node else {}
    topo = facts.get("topo_files", {}).get(plan.instance_type)
    if topo:
        env["NCCL_TOPO_FILE"] = topo
    env["NCCL_DEBUG"] = "INFO"
    build = NCCL_BUILD
    setup = run_setup(plan.rdma) if exp.multi_node else []
    sizes = "-b 8 -e 8G -f 2"
    if exp.multi_node:
        run = ("if [ \"$DSTACK_NODE_RANK\" -eq 0 ]; then\n"
               "  mpirun --allow-run-as-root --hostfile \"$DSTACK_MPI_HOSTFILE\" "
               "-n \"$DSTACK_GPUS_NUM\" -N \"$DSTACK_GPUS_PER_NODE\" --bind-to none "
               + " ".join(f"-x {k}" for k in sorted(env)) + (FROM_SETUP if setup else "") +
               f" /opt/nccl-tests/build/all_reduce_perf {sizes} -g 1 -c 1 -n 50\n"
               "else\n  sleep infinity\nfi")
    else:
        run = f"/opt/nccl-tests/build/all_reduce_perf {sizes} -g {max(gpus, 1)} -c 1 -n 50"
    task: dict[str, Any] = {
        "type": "task", "name": f"{plan.name[:30]}-nccl", "fleets": [plan.name],
        "nodes": test_nodes(plan) if exp.multi_node else 1,
        "image": facts.get("image", IMAGE),
        **({"shell": facts["shell"]} if facts.get("shell") else {}),
        "privileged": True, "env": env, "commands": [*_host_check(plan), *setup, build, run],
    }
    if volumes := task_volumes(plan):
        task["volumes"] = volumes
    if exp.multi_node:
        task["startup_order"] = "workers-first"
        task["stop_criteria"] = "master-done"
    task["resources"] = task_resources(plan)
    return task, exp


def task_volumes(plan: FleetDesign) -> list[dict[str, str]]:
    """The instance volumes of a fleet's tasks: the nodes' marker files (read in the task)
    and the fleet's shared filesystems, at the path they have on the host."""
    volumes = []
    if plan.host_setup is not None or plan.filesystems:
        volumes.append({"instance_path": MARKER_DIR, "path": HOST_DIR})
    volumes += [{"instance_path": fs.mount, "path": fs.mount} for fs in plan.filesystems]
    if plan.host_setup is not None:
        # where the fabric's collective software lives on the host (fabrics.json)
        volumes += run_mounts(plan.host_setup.fabric)
    return volumes


def _host_check(plan: FleetDesign) -> list[str]:
    """The task's first commands: stop on a node whose host setup did not finish, or that
    lacks the collective software its fabric needs (a node set up before gpufleet checked
    it has no `fabric_software` line: it is not taken on trust)."""
    if plan.host_setup is None:
        return []
    say = f'echo "gpufleet acceptance: node ${{DSTACK_NODE_RANK:-0}}: {HOST_NOT_READY}: '
    out = [f'if [ "$(sed -n \'s/^status=//p\' {HOST_DIR}/host-ready 2>/dev/null)" != ready ]; '
           f'then {say}$(tr \'\\n\' \' \' < {HOST_DIR}/host-failed 2>/dev/null || echo no '
           'marker)"; exit 1; fi']
    fabric = plan.host_setup.fabric
    if fabric != "none":
        out.append(f'case "$(sed -n \'s/^fabric_software=//p\' {HOST_DIR}/host-ready)" in '
                   f'""|none) {say}no {fabric} collective software on the host (re-run the '
                   'host setup)"; exit 1 ;; esac')
    return out


class _Dumper(yaml.SafeDumper):
    """Multi-line commands as literal blocks, the way people write dstack files."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def render_task(task: Mapping[str, Any], exp: Expectation | None,
                title: str = "NCCL all-reduce acceptance run", about: str = "") -> str:
    """The task file with its header (``about``: the header's last lines, instead of the
    fabric and its expectation)."""
    header = (f"# {title} for fleet {task['fleets'][0]}, written by "
              "`gpufleet acceptance`.\n# Run: dstack apply -f <this file>; save the log and "
              "check it with `gpufleet acceptance check LOG --fleet NAME PATH...`.\n"
              + (f"# Fabric: {exp.description}.\n# {exp.text()}\n" if exp is not None
                 else about))
    return header + yaml.dump(dict(task), Dumper=_Dumper, sort_keys=False,
                              default_flow_style=False, width=4096)


# --- the log ------------------------------------------------------------------------------

HOST_DIR = "/gpufleet-host"  # where the task mounts the nodes' /var/lib/gpufleet


