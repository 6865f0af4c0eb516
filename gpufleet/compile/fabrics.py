"""What each cluster fabric needs from a run on its nodes, read from the bundled
``fabrics.json`` (each fact with its source): the NCCL environment, the commands that load
the collective software's own settings, and the host paths a container must mount to reach
that software (dstack mounts them itself on the instances it provisions, but not on an SSH
fleet's hosts). Acceptance tasks and `export dstack` read the same facts. Pure."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from gpufleet.fileio import package_data


@cache
def fabric_facts() -> dict[str, Any]:
    text = package_data("catalog", "fabrics.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def fabric(name: str) -> dict[str, Any]:
    """One fabric's facts ({} for a fabric without any, such as "none")."""
    found: dict[str, Any] = fabric_facts()["fabrics"].get(name, {})
    return found


def run_mounts(name: str) -> list[dict[str, str]]:
    """The host paths a run on this fabric's nodes mounts (instance volumes), in order."""
    return [{"instance_path": str(m["instance_path"]), "path": str(m["path"])}
            for m in fabric(name).get("instance_mounts", [])]


def run_env(name: str) -> dict[str, str]:
    """The NCCL environment a run on this fabric sets, beside what its setup loads."""
    return {str(k): str(v) for k, v in fabric(name).get("env", {}).items()}


def run_setup(name: str) -> list[str]:
    """The commands a run on this fabric runs first (loading the plugin's own settings)."""
    return [str(c) for c in fabric(name).get("setup", [])]
