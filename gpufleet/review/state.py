"""Read a `pulumi stack export` file (deployment v3 or v4, or a raw checkpoint). Pure parsing.

Only the fields the offline diff needs are kept; secrets stay opaque.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpufleet.input import JsonInputError, parse_json

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
        data = parse_json(raw, source, "a stack export")
    except JsonInputError as e:
        raise StateError(f"{NOT_EXPORT}: {e}; write it with `pulumi stack export --file "
                         "FILE`") from None
    return export_from_data(data, source, secrets=may_hold_secrets(raw))


# A JSON escape of a character of the secret signature (digits and a-f): with none in the
# text, no key can decode to the signature unless the text holds it as it is.
_SIG_ESCAPE = re.compile(rb"\\u00(?:3[0-9]|6[1-6])")


def may_hold_secrets(raw: bytes) -> bool:
    """False when no object of this JSON text can have the secret signature as a key: it
    appears nowhere, not even spelt with escapes (a C-speed search; the walk that checks
    each secret's shape then has nothing to find, a tenth of a second on 100 MB)."""
    if SECRET_SIG.encode("ascii") in raw:
        return True
    # each `\u00` (a C-speed find; Go's encoder writes them for `<`, `>` and `&`), then the
    # escape it starts: the expression over the whole text took a tenth of a second on 100 MB
    at, looked = raw.find(b"\\u00"), 0
    while at != -1:
        if _SIG_ESCAPE.match(raw, at) is not None:
            return True
        looked += 1
        if looked > _ESCAPES_ONE_BY_ONE:  # a text of many escapes: the expression, once
            return _SIG_ESCAPE.search(raw, at) is not None
        at = raw.find(b"\\u00", at + 4)
    return False


_ESCAPES_ONE_BY_ONE = 10_000


def export_from_data(data: Any, source: str, secrets: bool = True) -> State:
    """``secrets``: False where the text is known to hold no secret (``may_hold_secrets``),
    which spares the walk over every value."""
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
    resources = tuple(_resource(i, r, bad, secrets) for i, r in enumerate(entries))
    stack, project = "", ""
    root = next((r for r in resources if r.type == STACK_TYPE), None) or \
        (resources[0] if resources else None)
    if root is not None:
        parts = root.urn.split("::")
        stack, project = parts[0].removeprefix("urn:pulumi:"), parts[1]
    return State(resources, int(version), stack, project, len(pending))


def _resource(i: int, r: Any, bad: Callable[[str], StateError], secrets: bool = True
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
    for key in ("inputs", "outputs") if secrets else ():
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


def _secrets_ok(value: Any) -> bool:
    """Every secret as Pulumi writes it: the signature, and a string ciphertext or plaintext
    (plaintext is JSON-encoded text with --show-secrets)."""
    if isinstance(value, dict):
        if SECRET_SIG in value:
            return value[SECRET_SIG] == SECRET_VALUE and any(
                isinstance(value.get(k), str) for k in ("ciphertext", "plaintext"))
        return all(_secrets_ok(v) for v in value.values())
    if isinstance(value, list):
        return all(_secrets_ok(v) for v in value)
    return True


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and SECRET_SIG in value
