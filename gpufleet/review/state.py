"""Read a `pulumi stack export` file (deployment v3 or v4, or a raw checkpoint). Pure parsing.

Only the fields the offline diff needs are kept; secrets stay opaque.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

STACK_TYPE = "pulumi:pulumi:Stack"
SECRET_SIG = "4dabf18193072939515e22adb298388d"


class StateError(ValueError):
    """The export cannot be used; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class StateResource:
    urn: str
    type: str
    custom: bool
    id: str
    parent: str
    provider: str
    inputs: Mapping[str, Any] = field(default_factory=dict)
    outputs: Mapping[str, Any] = field(default_factory=dict)
    protect: bool = False
    retain_on_delete: bool = False
    ignore_changes: tuple[str, ...] = ()
    pending_replacement: bool = False
    taint: bool = False
    dependencies: tuple[str, ...] = ()
    property_dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.urn.rsplit("::", 1)[-1]


@dataclass(frozen=True, slots=True)
class State:
    resources: tuple[StateResource, ...]
    version: int
    stack: str
    project: str
    pending_operations: int = 0

    def by_urn(self) -> dict[str, StateResource]:
        return {r.urn: r for r in self.resources}


def parse_export(text: str, source: str = "export") -> State:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise StateError(f"{source}:{e.lineno}:{e.colno}: not valid JSON ({e.msg}); "
                         "write it with `pulumi stack export --file FILE`") from None
    if not isinstance(data, dict):
        raise StateError(f"{source}: not a stack export (expected a JSON object)")
    if "checkpoint" in data and isinstance(data["checkpoint"], dict):
        data = {"version": data.get("version", 3), "deployment": data["checkpoint"].get("latest")}
    version = data.get("version")
    if version not in (3, 4):
        raise StateError(f"{source}: unsupported export version {version!r}; gpufleet reads "
                         "deployment versions 3 and 4")
    deployment = data.get("deployment")
    if not isinstance(deployment, dict):
        raise StateError(f"{source}: the export has no `deployment` object")
    raw = deployment.get("resources") or []
    if not isinstance(raw, list):
        raise StateError(f"{source}: `deployment.resources` is not a list")
    resources = []
    for i, r in enumerate(raw):
        if not isinstance(r, dict) or "urn" not in r or "type" not in r:
            raise StateError(f"{source}: resource #{i} has no urn or type")
        wrong = [k for k, kind in (("inputs", dict), ("outputs", dict), ("dependencies", list),
                                   ("ignoreChanges", list), ("propertyDependencies", dict))
                 if r.get(k) is not None and not isinstance(r[k], kind)]
        prop_deps = r.get("propertyDependencies") or {}
        if any(not isinstance(v, list) for v in prop_deps.values()):
            wrong.append("propertyDependencies")
        if wrong or str(r["urn"]).count("::") < 3:
            raise StateError(f"{source}: resource #{i} is malformed "
                             f"({', '.join(wrong) or 'urn'}); export the stack again with "
                             "`pulumi stack export`")
        resources.append(StateResource(
            urn=str(r["urn"]), type=str(r["type"]), custom=bool(r.get("custom")),
            id=str(r.get("id") or ""), parent=str(r.get("parent") or ""),
            provider=str(r.get("provider") or ""), inputs=dict(r.get("inputs") or {}),
            outputs=dict(r.get("outputs") or {}), protect=bool(r.get("protect")),
            retain_on_delete=bool(r.get("retainOnDelete")),
            ignore_changes=tuple(r.get("ignoreChanges") or ()),
            pending_replacement=bool(r.get("pendingReplacement")), taint=bool(r.get("taint")),
            dependencies=tuple(str(d) for d in r.get("dependencies") or ()),
            property_dependencies={str(k): tuple(str(u) for u in v)
                                   for k, v in prop_deps.items()}))
    stack, project = "", ""
    root = next((r for r in resources if r.type == STACK_TYPE), None)
    if root is not None:
        parts = root.urn.split("::")
        stack, project = parts[0].removeprefix("urn:pulumi:"), parts[1]
    elif resources:
        parts = resources[0].urn.split("::")
        stack, project = parts[0].removeprefix("urn:pulumi:"), parts[1]
    return State(tuple(resources), int(version), stack, project,
                 len(deployment.get("pending_operations") or []))


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and SECRET_SIG in value
