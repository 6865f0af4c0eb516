"""The change report shared by `gpufleet diff` (offline) and `gpufleet drift` (live). Pure.

A change is one resource with an operation (create, update, replace, delete, unknown), the
property differences behind it, the fleet or gateway and YAML key that caused it, a class
(pending program change, out-of-band edit, ...) and a suggested action.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpufleet.backends import all_backends, node_types, resource_kinds
from gpufleet.input import stackconfig
from gpufleet.review.owners import BUCKET_OWNER
from gpufleet.review.state import STACK_TYPE, StateResource, is_secret

CHANGE_OPS = ("create", "update", "replace", "delete", "unknown")
UNKNOWN = "<computed>"
PLACEHOLDER = "mock"  # offline lookup answers and computed values say so (components.offline)

# Inputs whose change makes the provider replace the resource, per type (gpufleet.traits).
REPLACE_INPUTS: dict[str, frozenset[str]] = {
    t: k.replaces for t, k in resource_kinds().items() if k.replaces}

# Which YAML key a changed input traces back to (gpufleet's per-field update policy).
FIELD_KEYS: dict[str, str] = {
    "machineType": "resources (chosen offer)", "instanceType": "resources (chosen offer)",
    "hardwareProfile": "resources (chosen offer)", "sku": "resources (chosen offer) / nodes",
    "zone": "availability_zones (chosen offer)", "availabilityZone": "availability_zones",
    "location": "regions (chosen offer)", "region": "regions (chosen offer)",
    "labels": "tags", "tags": "tags", "volumeTags": "tags", "tagSpecifications": "tags",
    "ipCidrRange": "cidr (backends file)", "cidrBlock": "cidr (backends file)",
    "addressPrefix": "cidr (backends file)", "addressSpace": "cidr (backends file)",
    "scheduling": "spot_policy / max_price", "instanceMarketOptions": "spot_policy / max_price",
    "priority": "spot_policy", "billingProfile": "max_price", "evictionPolicy": "spot_policy",
    "bootDisk": "resources.disk / image", "blockDeviceMappings": "resources.disk",
    "storageProfile": "resources.disk / image", "sourceRanges": "ssh_cidrs (backends file)",
    "ingress": "ssh_cidrs (backends file)", "securityRules": "ssh_cidrs (backends file)",
    "reservationAffinity": "reservation", "capacityReservationSpecification": "reservation",
    "rrdatas": "domain / replicas", "records": "domain / replicas",
    "aRecords": "domain / replicas", "networkInterfaces": "resources (chosen offer)",
    "mtu": "resources (chosen offer)", "networkProfile": "availability_zones",
    "publicKey": "the SSH key (access.ssh_public_key or the stack config "
                 "gpufleet:sshPublicKey)",
    "metadata": "access (SSH key, OS Login)", "osProfile": "access (SSH key, user)",
    # buckets (the backends file's `buckets:`): what the file sets, and what gpufleet builds
    # closed whatever the file says
    "versioningConfiguration": "buckets[].versioning", "versioning": "buckets[].versioning",
    "isVersioningEnabled": "buckets[].versioning", "lifecycleRules": "buckets[].lifecycle",
    "storageClass": "buckets[].class",
    **dict.fromkeys(("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls",
                     "restrictPublicBuckets", "publicAccessPrevention",
                     "uniformBucketLevelAccess", "allowBlobPublicAccess", "publicAccess",
                     "forceDestroy"), "buckets (built private and kept: no key opens them)"),
}
INSTANCE_TYPES = node_types()
GATEWAY_ADDRESS_TYPES = frozenset(x for t in all_backends() for x in t.gateway_address_types)
NODE_NAME = re.compile(r"-node-\d+$")
CATEGORIES: dict[str, tuple[str, ...]] = {}
for _type, _kind in resource_kinds().items():
    if _kind.category is not None:
        CATEGORIES[_kind.category] = (*CATEGORIES.get(_kind.category, ()), _type)


@dataclass(frozen=True, slots=True)
class PropertyChange:
    path: str
    old: Any
    new: Any
    kind: str  # add, delete, update, add-replace, update-replace, delete-replace


@dataclass(frozen=True, slots=True)
class Change:
    urn: str
    type: str
    op: str
    klass: str
    owner: str | None = None  # fleet or gateway name
    file: str | None = None
    yaml_key: str | None = None
    properties: tuple[PropertyChange, ...] = ()
    action: str = ""
    protect: bool = False
    reasons: tuple[str, ...] = ()
    # Why a change the YAML does not touch directly happens, down to the YAML key:
    # "its subnet a-subnet is replaced <- cidr (backends file)".
    cause: str | None = None

    @property
    def name(self) -> str:
        return self.urn.rsplit("::", 1)[-1]

    @property
    def category(self) -> str | None:
        """What the guards protect: gateway, address, dns, network, storage or instance."""
        if self.type.endswith(":Gateway"):
            return "gateway"
        qualified = self.urn.split("::")[2] if self.urn.count("::") >= 3 else ""
        if self.type in GATEWAY_ADDRESS_TYPES and ":Gateway$" in qualified:
            return "address"  # a private gateway's fixed address
        return next((cat for cat, types in CATEGORIES.items() if self.type in types), None)

    def to_json(self) -> dict[str, Any]:
        return {"urn": self.urn, "type": self.type, "name": self.name, "op": self.op,
                "class": self.klass, "owner": self.owner, "file": self.file,
                "yaml_key": self.yaml_key, "category": self.category,
                "protect": self.protect, "reasons": list(self.reasons), "cause": self.cause,
                "action": self.action,
                "properties": [{"path": p.path, "old": p.old, "new": p.new, "kind": p.kind}
                               for p in self.properties]}


@dataclass(frozen=True, slots=True)
class Report:
    mode: str  # "offline-diff" or "live-drift"
    stack: str
    changes: tuple[Change, ...]
    same: int = 0
    notes: tuple[str, ...] = ()
    not_compared: tuple[str, ...] = ()
    violations: tuple[str, ...] = field(default=())
    cost_lines: tuple[str, ...] = ()  # before -> after per fleet (offline diff)

    def counts(self) -> dict[str, int]:
        c = Counter(ch.op for ch in self.changes)
        return {op: c.get(op, 0) for op in CHANGE_OPS} | {"same": self.same}

    @property
    def has_changes(self) -> bool:
        return bool(self.changes)


# --- comparing inputs -------------------------------------------------------------------

# Bookkeeping the engine keeps among the inputs: the bridged providers' defaults, and a
# dynamic provider's pickled self (`__provider`), which the dynamic provider's own diff drops
# (pulumi.dynamic: a new gpufleet version re-pickles it without changing the resource).
_BOOKKEEPING = frozenset({"__defaults", "__provider"})


def _strip_defaults(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip_defaults(v) for k, v in value.items() if k not in _BOOKKEEPING}
    if isinstance(value, list):
        return [_strip_defaults(v) for v in value]
    return value


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b))
    return bool(a == b)


def _contains(value: Any, needle: str) -> bool:
    if isinstance(value, str):
        return needle in value
    if isinstance(value, Mapping):
        return any(_contains(v, needle) for v in value.values())
    if isinstance(value, list):
        return any(_contains(v, needle) for v in value)
    return False


def diff_values(old: Any, new: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Paths where ``new`` differs from ``old``; keys only in ``old`` are provider-filled
    defaults and ignored, and so is the engine's bookkeeping (``_BOOKKEEPING``) at any
    depth; lists compare element-wise when their lengths agree. Values equal as they stand
    are not walked (most of a stack, in a diff); a value reported is shown without the
    bookkeeping."""
    if old == new:
        return []
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out = []
        for k in new:
            if k in _BOOKKEEPING:
                continue
            p = f"{path}.{k}" if path else str(k)
            if k not in old:
                added = _strip_defaults(new[k])
                if added not in (None, [], {}):
                    out.append((p, None, added))
            else:
                out += diff_values(old[k], new[k], p)
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        out = []
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            out += diff_values(a, b, f"{path}[{i}]")
        return out
    if is_secret(old) or is_secret(new):
        return [(path, "[secret]", "[secret]")] if old != new else []
    old, new = _strip_defaults(old), _strip_defaults(new)
    return [] if _equal(old, new) else [(path, old, new)]


def root_of(path: str) -> str:
    return re.split(r"[.\[]", path, maxsplit=1)[0]


def compare(reg: Mapping[str, Any], old: StateResource) -> tuple[str, list[PropertyChange],
                                                                   list[str], list[str]]:
    """(op, property changes, replace reasons, paths not comparable offline)."""
    if not reg.get("custom", True):
        return "same", [], [], []
    ignored = set(reg.get("ignore_changes") or ()) | set(old.ignore_changes)
    force = REPLACE_INPUTS.get(str(reg["type"]), frozenset()) | set(
        reg.get("replace_on_changes") or ())
    changes: list[PropertyChange] = []
    reasons: list[str] = []
    skipped: list[str] = []
    unknown = False
    for path, a, b in diff_values(old.inputs, reg["inputs"]):
        if root_of(path) in ignored or path in ignored:
            continue
        key = stackconfig.placeholder_key(b)
        if key is not None:  # read at `pulumi up`: unknown offline, never a change
            skipped.append(f"{path} (the stack config {key}, read at `pulumi up`; "
                           "--stack-config FILE compares it)")
            continue
        if _contains(b, PLACEHOLDER):
            skipped.append(path)  # an offline placeholder (a cloud lookup): cannot compare
            continue
        if _contains(b, UNKNOWN):
            unknown = True
        replace = root_of(path) in force or path in force
        kind = ("add" if a is None else "update") + ("-replace" if replace else "")
        changes.append(PropertyChange(path, a, b, kind))
        if replace:
            reasons.append(root_of(path))
    old_prov = old.provider.rsplit("::", 1)[0]
    new_prov = str(reg.get("provider") or "").rsplit("::", 1)[0]
    if reg.get("custom") and old_prov and new_prov and old_prov != new_prov:
        reasons.append("provider")
        changes.append(PropertyChange("provider", old_prov, new_prov, "update-replace"))
    if not changes:
        return "same", [], [], skipped
    if reasons:
        return "replace", changes, sorted(set(reasons)), skipped
    return ("unknown" if unknown else "update"), changes, [], skipped


# --- tracing and advice -----------------------------------------------------------------

def yaml_key(change_type: str, name: str, op: str, props: Sequence[PropertyChange],
             owner: str | None = None) -> str | None:
    """The YAML key a change moves with (a bucket's place is its own `region`, not a fleet's
    chosen offer)."""
    if change_type in INSTANCE_TYPES and NODE_NAME.search(name) and op in ("create", "delete"):
        return "nodes"
    if op == "create":
        return None
    if op == "delete":
        return None
    keys = []
    for p in props:
        root = root_of(p.path)
        k = "buckets[].region" if (owner or "").startswith(BUCKET_OWNER) and root in (
            "location", "region") else FIELD_KEYS.get(root)
        if k and k not in keys:
            keys.append(k)
    return ", ".join(keys) or None


ACTIONS = {
    "create": "pulumi up creates it",
    "update": "pulumi up updates it in place",
    "replace": "pulumi up deletes and recreates it: plan for the downtime, or revert the "
               "YAML change that forces it",
    "delete": "pulumi up deletes it; if that is not intended restore the YAML (a renamed "
              "fleet needs `previous_names`)",
    "unknown": "the provider decides at preview time: run `pulumi preview` to see whether "
               "it is updated or replaced",
}


def advise(op: str, klass: str, protect: bool) -> str:
    if klass == "out-of-band edit":
        return ("the cloud no longer matches the stack: `pulumi refresh` to accept the edit, or "
                "`pulumi up` to restore what the YAML says")
    if klass == "deleted out of band":
        return "it was deleted outside Pulumi: `pulumi refresh`, then `pulumi up` recreates it"
    text = ACTIONS.get(op, "")
    if protect and op in ("delete", "replace"):
        text += "; it is protected, so the update will stop until you unprotect it"
    return text


# --- guards -----------------------------------------------------------------------------

def guard(changes: Iterable[Change], forbid: Sequence[str], allow: Sequence[str],
          max_instances: int | None) -> list[str]:
    """Violations of `--forbid OPS` for gateways, addresses, DNS records, networks and storage
    (filesystems, volumes), and of
    `--max-instances N` for instances, unless a change matches an `--allow` glob."""
    violations = []
    instance_ops = 0
    for ch in changes:
        if any(fnmatch.fnmatchcase(ch.urn, g) or fnmatch.fnmatchcase(ch.name, g) for g in allow):
            continue
        cat = ch.category
        if ch.op in forbid and cat in ("gateway", "address", "dns", "network", "storage"):
            violations.append(f"{ch.op} of {cat} {ch.name} ({ch.type}) is forbidden")
        if cat == "instance" and ch.op in (*forbid, "replace", "delete"):
            instance_ops += 1
    if max_instances is not None and instance_ops > max_instances:
        violations.append(f"{instance_ops} instance(s) would be replaced or deleted; the "
                          f"limit is {max_instances}")
    return violations


def is_bookkeeping(r: StateResource) -> bool:
    """The root stack and default providers are never reported as deleted."""
    return r.type == STACK_TYPE or (r.type.startswith("pulumi:providers:")
                                    and r.name.startswith("default"))
