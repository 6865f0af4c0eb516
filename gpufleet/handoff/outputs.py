"""A deployed stack's outputs, read and checked: from `pulumi stack output --json` or a state
export, per fleet, volume and gateway, each refused when it does not look like what gpufleet's
program writes (ExportError)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gpufleet.backends import is_backend
from gpufleet.input import JsonInputError, parse_json
from gpufleet.review import STACK_TYPE, StateError, is_secret, parse_export

MARKER = "# Written by `gpufleet export dstack`"


_SAFE_MOUNT = re.compile(r"(/[A-Za-z0-9._-]+)+")  # the schema's `mount` pattern


_SAFE_NAME = re.compile(r"[a-z][a-z0-9-]{0,38}[a-z0-9]")  # the schema's filesystem name


class ExportError(Exception):
    """The outputs cannot be exported; the message says why and what to do."""


def outputs_from_stack_output(raw: bytes | str, source: str) -> dict[str, Any]:
    """`pulumi stack output --json` -> the stack's outputs."""
    data = raw.encode("utf-8") if isinstance(raw, str) else raw
    try:
        outputs = parse_json(data, source, "stack outputs")
    except JsonInputError as e:
        raise ExportError(f"not stack outputs: {e}; write them with `pulumi stack output "
                          "--json --show-secrets > FILE`") from None
    if not isinstance(outputs, dict):
        raise ExportError(f"{source}: not stack outputs: expected a JSON object")
    return outputs


def outputs_from_state(raw: bytes | str, source: str) -> dict[str, Any]:
    """A `pulumi stack export` -> the outputs of its root Stack resource."""
    try:
        state = parse_export(raw, source)
    except StateError as e:
        raise ExportError(str(e)) from None
    root = next((r for r in state.resources if r.type == STACK_TYPE), None)
    if root is None or not root.outputs:
        raise ExportError(f"{source}: the export has no stack outputs; run `pulumi up` first")
    return dict(root.outputs)


def fleets_in(outputs: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The fleet outputs gpufleet's program exports (gateways and others are skipped)."""
    return {name: v for name, v in sorted(outputs.items())
            if isinstance(v, dict) and {"backend", "nodes", "networks"} <= set(v)
            and not name.startswith("gateway-")}


def _secret(value: Any) -> Any:
    if is_secret(value):
        return value.get("plaintext", value.get("value"))
    return value


def volumes_in(outputs: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {name.removeprefix("volume-"): v for name, v in sorted(outputs.items())
            if name.startswith("volume-") and isinstance(v, dict)}


def gateways_in(outputs: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {name.removeprefix("gateway-"): v for name, v in sorted(outputs.items())
            if name.startswith("gateway-") and isinstance(v, dict)}


_SHAPE: dict[str, tuple[type, ...]] = {
    "backend": (str,), "region": (str,), "nodes": (list,), "networks": (dict,),
    "access": (dict, type(None)), "bastion": (dict, type(None)), "extra_vpcs": (list,),
    "roce_vpcs": (list,), "subnets": (dict,), "public_ips": (bool,),
}


def check_shape(name: str, out: Mapping[str, Any]) -> None:
    """Stack outputs are data from a file: refuse what gpufleet's program did not write."""
    wrong = [k for k, types in _SHAPE.items() if k in out and not isinstance(out[k], types)]
    raw_nodes, raw_networks = out.get("nodes"), out.get("networks")
    nodes: list[Any] = raw_nodes if isinstance(raw_nodes, list) else []
    networks: dict[str, Any] = raw_networks if isinstance(raw_networks, dict) else {}
    wrong += [f"nodes[{i}]" for i, n in enumerate(nodes) if not isinstance(n, dict)]
    wrong += [f"networks.{k}" for k, v in networks.items() if not isinstance(v, dict)]
    if not is_backend(out.get("backend")) or "region" not in out:
        wrong.append("backend/region")
    if wrong:
        raise ExportError(f"stack output '{name}' does not look like a gpufleet fleet output "
                          f"({', '.join(wrong[:5])}); was the stack deployed by gpufleet's "
                          "program?")
