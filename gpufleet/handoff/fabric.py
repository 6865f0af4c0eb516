"""What dstack needs to run NCCL over a cluster fabric on an SSH fleet's hosts. dstack mounts
the fabric's host paths itself into runs on the instances it provisions (dstack 0.22.5:
server/services/backends/provisioning.py, get_instance_specific_mounts), but an SSH fleet's
hosts are `remote` to it and get none; `export dstack` writes them as a task per fleet (the
fabric's environment, instance volumes and the command loading its plugin's settings, from
fabrics.json) that checks them on every node and that runs copy from. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from gpufleet.compile import fabric, run_env, run_mounts, run_setup
from gpufleet.handoff.outputs import MARKER

IMAGE = "nvcr.io/nvidia/pytorch:24.12-py3"
_FABRIC_NAME = re.compile(r"[a-z][a-z0-9-]{0,40}")


def fabric_of(out: Mapping[str, Any]) -> str:
    """The fabric a fleet's host setup installed, from its stack outputs ("none" for a stack
    deployed before the output existed, or one of another shape)."""
    value = out.get("fabric")
    return value if isinstance(value, str) and _FABRIC_NAME.fullmatch(value) else "none"


def fabric_task(name: str, out: Mapping[str, Any]) -> str | None:
    """The task file of a fleet whose fabric needs host paths in its runs; None otherwise."""
    kind = fabric_of(out)
    mounts = run_mounts(kind)
    nodes = len(out.get("nodes") or [])
    if not mounts or not nodes:  # a networks-only fleet: dstack's own instances get them
        return None
    facts = fabric(kind)
    checks = [f'[ -e {m["path"]} ] || {{ echo "gpufleet fabric: node $DSTACK_NODE_RANK: '
              f'{m["path"]} is not mounted"; exit 1; }}' for m in mounts]
    report = ('echo "gpufleet fabric: node $DSTACK_NODE_RANK: ' + kind
              + ' ready: $(env | grep -c ^NCCL_) NCCL variables"')
    doc: dict[str, Any] = {
        "type": "task", "name": f"{name[:24]}-fabric", "fleets": [name], "nodes": nodes,
        "image": facts.get("image", IMAGE),
        **({"shell": facts["shell"]} if facts.get("shell") else {}),
        "privileged": True, "env": run_env(kind), "volumes": mounts,
        "commands": [*checks, *run_setup(kind), report],
        "resources": {"shm_size": "16GB"}}
    header = (f"{MARKER} from the stack outputs of fleet {name}.\n"
              f"# {facts.get('description', kind)}.\n"
              "# dstack mounts these host paths into runs on instances it provisions, not on "
              "an SSH\n# fleet's hosts: copy `env`, `volumes`"
              + (", `shell`" if facts.get("shell") else "")
              + " and the commands before the last into your\n# runs. This task checks them "
              "on every node.\n")
    return header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=4096)
