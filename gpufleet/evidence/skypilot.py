"""The NCCL all-reduce as a SkyPilot task on a fleet's SSH Node Pool (`infra: ssh/<pool>`):
proof that SkyPilot took the nodes, every GPU of every node in one communicator, the result
correct. SkyPilot 0.14.1 runs the job in k3s pods on the pool's hosts; it sets SKYPILOT_NODE_RANK,
SKYPILOT_NODE_IPS (one per line, the head first), SKYPILOT_NUM_NODES and
SKYPILOT_NUM_GPUS_PER_NODE, and the nodes of a multi-node task reach each other over SSH
(docs.skypilot.co, "Distributed multi-node jobs"). The pods see neither the host's fabric
plugins nor its RDMA devices, so NCCL runs over the pods' network: the run proves the pool,
and gpufleet's dstack task measures the fabric. Pure."""

from __future__ import annotations

from typing import Any

import yaml

from gpufleet.compile import SKY_MARKER, FleetDesign
from gpufleet.evidence.acceptance import IMAGE, NCCL_BUILD, gpu_count, test_nodes

_RUN = "\n".join((
    'if [ "$SKYPILOT_NODE_RANK" = 0 ]; then',
    '  hosts=$(echo "$SKYPILOT_NODE_IPS" | awk -v g="$SKYPILOT_NUM_GPUS_PER_NODE" '
    """'NF {printf "%s%s:%s", (n++ ? "," : ""), $1, g}')""",
    '  mpirun --allow-run-as-root -H "$hosts" '
    "-np $((SKYPILOT_NUM_NODES * SKYPILOT_NUM_GPUS_PER_NODE)) --bind-to none -x NCCL_DEBUG "
    "/opt/nccl-tests/build/all_reduce_perf -b 8 -e 8G -f 2 -g 1 -c 1 -n 50",
    "fi", ""))


def pool_nccl_task(plan: FleetDesign) -> dict[str, Any]:
    """The task (as data) for the fleet's pool: all its nodes, all their GPUs."""
    gpus = gpu_count(plan)
    name = plan.gpu.split("x", 1)[1] if "x" in plan.gpu else ""
    resources: dict[str, Any] = {"infra": f"ssh/{plan.name}",
                                 "image_id": f"docker:{IMAGE}"}
    if gpus and name:
        resources["accelerators"] = f"{name}:{gpus}"
    return {"name": f"{plan.name[:30]}-nccl", "num_nodes": test_nodes(plan),
            "resources": resources, "envs": {"NCCL_DEBUG": "INFO"},
            "setup": NCCL_BUILD, "run": _RUN}


def pool_nccl_text(plan: FleetDesign) -> str:
    return (f"{SKY_MARKER}: the NCCL all-reduce on the SSH Node Pool of fleet\n"
            f"# {plan.name} (`sky launch` this file after `sky ssh up`). It runs in SkyPilot's "
            "k3s pods, over\n# their network, not the fabric: it proves the pool (every GPU, "
            "#wrong 0); `gpufleet acceptance`\n# measures the fabric through dstack.\n"
            + yaml.dump(pool_nccl_task(plan), Dumper=_Blocks, sort_keys=False, width=4096))


class _Blocks(yaml.SafeDumper):
    """Multi-line strings (the task's `run`) as YAML literal blocks, readable in review."""


_Blocks.add_representer(str, lambda d, v: d.represent_scalar(
    "tag:yaml.org,2002:str", v, style="|" if "\n" in v else None))
