"""Read a `pulumi stack export` file (deployment v3 or v4, or a raw checkpoint). Pure parsing.

Only the fields the offline diff needs are kept; secrets stay opaque.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpufleet.input import JsonInputError, parse_json_marked

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


NOT_EXPORT = "not a stack export"
_SHAPES: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("urn", str), ("type", str), ("inputs", dict), ("outputs", dict), ("dependencies", list),
    ("ignoreChanges", list), ("propertyDependencies", dict), ("id", str), ("parent", str),
    ("provider", str), ("custom", bool), ("protect", bool), ("retainOnDelete", bool))


def parse_export(text: str | bytes, source: str = "export") -> State:
    """A `pulumi stack export` (JSON text, read within bounds) -> State; anything else is a
    StateError saying "not a stack export" and why."""
    raw = text.encode("utf-8") if isinstance(text, str) else text
    try:
        data, marked = parse_json_marked(raw, source, "a stack export", SECRET_SIG)
    except JsonInputError as e:
        raise StateError(f"{NOT_EXPORT}: {e}; write it with `pulumi stack export --file "
                         "FILE`") from None
    return export_from_data(data, source, marked)


def export_from_data(data: Any, source: str,
                     marked: list[dict[str, Any]] | None = None) -> State:
    """``data``: a parsed export (parse_json's plain dicts and lists); ``marked``: every
    object in it holding the secret signature, where the parse found them. When each is
    a secret as Pulumi writes it, no resource's values are walked for one (the walk finds
    a subset of them); else they are, and the one at fault is named."""
    walk = marked is None or not all(_secret_ok(m) for m in marked)
    def bad(why: str) -> StateError:
        return StateError(f"{source}: {NOT_EXPORT}: {why}; export the stack again with "
                          "`pulumi stack export --file FILE`")

    if not isinstance(data, dict):
        raise bad("expected a JSON object")
    if "checkpoint" in data:
        checkpoint = data["checkpoint"]
        if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("latest"), dict):
            raise bad("`checkpoint.latest` is not an object")
        data = {"version": data.get("version", 3), "deployment": checkpoint["latest"]}
    version = data.get("version")
    if isinstance(version, bool) or version not in (3, 4):
        shown = repr(version) if len(repr(version)) <= 20 else repr(version)[:20] + "..."
        raise bad(f"unsupported version {shown} (gpufleet reads deployment versions 3 and 4)")
    deployment = data.get("deployment")
    if not isinstance(deployment, dict):
        raise bad("no `deployment` object")
    entries = deployment.get("resources") or []
    pending = deployment.get("pending_operations") or []
    if not isinstance(entries, list):
        raise bad("`deployment.resources` is not a list")
    if not isinstance(pending, list):
        raise bad("`deployment.pending_operations` is not a list")
    resources = tuple(_resource(i, r, bad, walk) for i, r in enumerate(entries))
    stack, project = "", ""
    root = next((r for r in resources if r.type == STACK_TYPE), None) or \
        (resources[0] if resources else None)
    if root is not None:
        parts = root.urn.split("::")
        stack, project = parts[0].removeprefix("urn:pulumi:"), parts[1]
    return State(resources, int(version), stack, project, len(pending))


def _resource(i: int, r: Any, bad: Callable[[str], StateError], walk: bool = True
              ) -> StateResource:
    if not isinstance(r, dict) or not isinstance(r.get("urn"), str) \
            or not isinstance(r.get("type"), str):
        raise bad(f"resource #{i} has no urn or type")
    wrong = [k for k, kind in _SHAPES if r.get(k) is not None and not isinstance(r[k], kind)]
    prop_deps = r.get("propertyDependencies") or {}
    if isinstance(prop_deps, dict) and any(
            not isinstance(v, list) or not all(isinstance(u, str) for u in v)
            for v in prop_deps.values()):
        wrong.append("propertyDependencies")
    for key in ("dependencies", "ignoreChanges"):
        if isinstance(r.get(key), list) and not all(isinstance(u, str) for u in r[key]):
            wrong.append(key)
    for key in ("inputs", "outputs") if walk else ():
        if isinstance(r.get(key), dict) and not _secrets_ok(r[key]):
            wrong.append(f"a secret in {key}")
    if wrong or str(r["urn"]).count("::") < 3:
        raise bad(f"resource #{i} is malformed ({', '.join(wrong) or 'urn'})")
    return StateResource(
        urn=r["urn"], type=r["type"], custom=bool(r.get("custom")),
        id=r.get("id") or "", parent=r.get("parent") or "",
        provider=r.get("provider") or "", inputs=dict(r.get("inputs") or {}),
        outputs=dict(r.get("outputs") or {}), protect=bool(r.get("protect")),
        retain_on_delete=bool(r.get("retainOnDelete")),
        ignore_changes=tuple(r.get("ignoreChanges") or ()),
        pending_replacement=bool(r.get("pendingReplacement")), taint=bool(r.get("taint")),
        dependencies=tuple(r.get("dependencies") or ()),
        property_dependencies={str(k): tuple(v) for k, v in prop_deps.items()})


SECRET_VALUE = "1b47061264138c4ac30d75fd1eb44270"


def _secret_ok(value: dict[str, Any]) -> bool:
    """A secret as Pulumi writes it: the signature, and a string ciphertext or plaintext
    (plaintext is JSON-encoded text with --show-secrets)."""
    return value[SECRET_SIG] == SECRET_VALUE and any(
        isinstance(value.get(k), str) for k in ("ciphertext", "plaintext"))


def _secrets_ok(value: dict[str, Any]) -> bool:
    """Every secret in ``value`` as Pulumi writes it. A JSON escape in a key is decoded by
    then (`\\u0034dabf...` is the signature too)."""
    if SECRET_SIG in value:
        return _secret_ok(value)
    return _all_ok(value.values())


def _all_ok(values: Iterable[Any]) -> bool:
    """Only containers are looked into, by their exact type (parsed JSON has no subclasses):
    the walk over a 125 MB export's values takes 0.06 s, where looking at every value took
    0.15 s and the byte search that spared it when no key could be the signature 0.19 s."""
    for v in values:
        kind = v.__class__
        if kind is dict:
            if not _secrets_ok(v):
                return False
        elif kind is list and not _all_ok(v):
            return False
    return True


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and SECRET_SIG in value
