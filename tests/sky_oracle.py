"""Run inside .venv-skypilot (SkyPilot 0.14.1): load what `gpufleet export skypilot` wrote with
SkyPilot's own code and say what SkyPilot made of it.

stdin: {"pools": PATH or null, "tasks": [PATH, ...], "catalog": {cloud: CSV text}}. HOME must
point at a scratch folder (SkyPilot reads ~/.sky); PATH's `ssh` is a shim that reads the
exported ssh_config as the user's ~/.ssh/config would include it.
stdout: {"pools": {pool: [host info]} or {"error": ...}, "tasks": {path: {...} or error}}.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def _pools(path: str) -> dict[str, Any]:
    from sky.ssh_node_pools import utils

    try:
        targets = utils.load_ssh_targets(path)
        out: dict[str, Any] = {}
        for pool, config in utils.get_cluster_config(targets, None, path).items():
            out[pool] = utils.prepare_hosts_info(pool, config)
        return out
    except BaseException as e:  # SkyPilot raises ValueError, and exits through click
        return {"error": f"{type(e).__name__}: {e}"}


def _task(path: str) -> dict[str, Any]:
    from sky import task as task_lib

    try:
        task = task_lib.Task.from_yaml(path)
    except BaseException as e:
        return {"error": f"{type(e).__name__}: {e}"}
    resources = []
    for r in (task.resources if isinstance(task.resources, list) else
              sorted(task.resources, key=str)):
        resources.append({"cloud": str(r.cloud).lower() if r.cloud else None,
                          "region": r.region, "zone": r.zone,
                          "instance_type": r.instance_type, "use_spot": r.use_spot,
                          "accelerators": r.accelerators})
    return {"name": task.name, "num_nodes": task.num_nodes, "ordered":
            isinstance(task.resources, list), "resources": resources,
            "run": task.run if isinstance(task.run, str) else None}


def main() -> None:
    request = json.load(sys.stdin)
    home = os.path.expanduser("~")
    for cloud, text in (request.get("catalog") or {}).items():
        folder = os.path.join(home, ".sky", "catalogs", "v8", cloud)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "vms.csv"), "w", encoding="utf-8") as f:
            f.write(text)
    result: dict[str, Any] = {"tasks": {p: _task(p) for p in request.get("tasks") or []}}
    if request.get("pools"):
        result["pools"] = _pools(request["pools"])
    json.dump(result, sys.stdout, default=str)


if __name__ == "__main__":
    main()
