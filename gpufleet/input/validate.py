"""Load -> schema pass -> semantic pass for a set of paths: the front half of every command.

The only entry that touches files is :func:`gpufleet.input.files.load_paths`; everything after it
is pure.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from gpufleet.backends import is_backend, traits_of
from gpufleet.codes import B001, F012, F019, F021, F024, G008, K003, L014
from gpufleet.diagnostics import Diagnostic, display_path, sort_diagnostics
from gpufleet.input.bucketspec import BucketSpec
from gpufleet.input.checks import (
    check_backends,
    check_fleet,
    check_gateway,
    check_lock,
    check_profiles,
)
from gpufleet.input.checks.buckets import check_buckets
from gpufleet.input.checks.filesystems import check_filesystems
from gpufleet.input.checks.quotas import check_quotas
from gpufleet.input.checks.reservations import check_control_plane, check_reservations
from gpufleet.input.checks.volumes import check_volume
from gpufleet.input.files import load_paths
from gpufleet.input.loader import Document, LoadResult, load_text
from gpufleet.input.lockspec import Lock
from gpufleet.input.quotaspec import QuotaSettings
from gpufleet.input.schema import Checked, check_schema
from gpufleet.input.spec import (
    NO_ACCESS,
    AccessSpec,
    BackendConfig,
    ControlPlaneSpec,
    FilesystemSpec,
    FleetSpec,
    GatewaySpec,
    Inputs,
    NameSettings,
    ProfileSpec,
    ReservationSpec,
    SshFleetSpec,
    VolumeSpec,
)


@dataclass(slots=True)
class Validated:
    inputs: Inputs
    diagnostics: list[Diagnostic]
    sources: dict[str, list[str]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    locks: list[Lock] = field(default_factory=list)  # gpufleet.lock files among the paths
    skipped: list[str] = field(default_factory=list)  # YAML files left out as not ours

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)


def validate_paths(paths: Iterable[str | os.PathLike[str]], only_ours: bool = False
                   ) -> Validated:
    loaded = load_paths(paths, only_ours)
    return dataclasses.replace(validate_loaded(loaded), skipped=list(loaded.skipped))


def validate_texts(texts: Mapping[str, str]) -> Validated:
    """Validate YAML held in memory (name -> text), e.g. files about to be written."""
    result = LoadResult()
    for name, text in texts.items():
        result.files.append(name)
        result.sources[name] = text.splitlines()
        load_text(name, text, result)
    return validate_loaded(result)


@dataclass(slots=True)
class _Gathered:
    """What the documents declare, as they are checked one by one."""

    fleets: list[FleetSpec] = field(default_factory=list)
    gateways: list[GatewaySpec] = field(default_factory=list)
    profiles: list[ProfileSpec] = field(default_factory=list)
    backends: list[BackendConfig] = field(default_factory=list)
    locks: list[Lock] = field(default_factory=list)
    ssh_fleets: list[SshFleetSpec] = field(default_factory=list)
    access: AccessSpec = NO_ACCESS
    names: NameSettings = field(default_factory=NameSettings)
    warn_cost: float | None = None
    reservations: list[ReservationSpec] = field(default_factory=list)
    control_plane: ControlPlaneSpec | None = None
    volumes: list[VolumeSpec] = field(default_factory=list)
    filesystems: list[FilesystemSpec] = field(default_factory=list)
    quotas: QuotaSettings | None = None
    buckets: list[BucketSpec] = field(default_factory=list)


def validate_loaded(loaded: LoadResult) -> Validated:
    diags = list(loaded.diagnostics)
    g = _Gathered()
    kinds: dict[str, list[tuple[Document, str | None]]] = {}
    declared_groups = _declared_groups(loaded.documents)
    for doc in loaded.documents:
        c = check_schema(doc)
        kinds.setdefault(doc.file, []).append((doc, c.kind))
        diags.extend(c.diagnostics)
        diags.extend(_check_document(c, g, declared_groups))
    diags.extend(_one_configuration_per_file(kinds))
    fleets = [with_settings(f, g.names) for f in g.fleets]
    gateways = [with_gateway_settings(gw, g.names) for gw in g.gateways]
    diags.extend(_duplicates(fleets, gateways, g.backends, g.ssh_fleets))
    diags.extend(_output_keys(fleets, gateways, g.volumes))
    inputs = Inputs(tuple(fleets), tuple(gateways), tuple(g.profiles), tuple(g.backends),
                    tuple(g.ssh_fleets), g.access, g.warn_cost, tuple(g.reservations),
                    g.control_plane, tuple(g.volumes), tuple(g.filesystems), g.quotas,
                    tuple(g.buckets))
    return Validated(inputs, sort_diagnostics(diags), loaded.sources, loaded.files, g.locks)


def _check_document(c: Checked, g: _Gathered, declared_groups: frozenset[str]
                    ) -> list[Diagnostic]:
    """One schema-checked document's own checks; what it declares goes into ``g``."""
    more: list[Diagnostic] = []
    if c.kind == "fleet":
        spec, more = check_fleet(c, declared_groups)
        if isinstance(spec, SshFleetSpec):
            g.ssh_fleets.append(spec)
        elif spec is not None:
            g.fleets.append(spec)
    elif c.kind == "gateway":
        gw, more = check_gateway(c)
        g.gateways.extend([gw] if gw else [])
    elif c.kind == "volume":
        vol, more = check_volume(c)
        g.volumes.extend([vol] if vol else [])
    elif c.kind == "profiles":
        ps, more = check_profiles(c)
        g.profiles.extend(ps)
    elif c.kind == "backends":
        more = _backends_file(c, g)
    elif c.kind == "lock":
        lock, more = check_lock(c)
        g.locks.extend([lock] if lock else [])
    return more


def _backends_file(c: Checked, g: _Gathered) -> list[Diagnostic]:
    bs, more, top, by_name = check_backends(c)
    g.backends.extend(bs)
    g.access = top if top != NO_ACCESS else g.access
    g.names = NameSettings({**g.names.fleets, **by_name.fleets},
                           {**g.names.gateways, **by_name.gateways},
                           {**g.names.gateway_origins, **by_name.gateway_origins},
                           {**g.names.fleet_origins, **by_name.fleet_origins})
    rs, more_rs = check_reservations(c)
    g.reservations.extend(rs)
    cp, more_cp = check_control_plane(c)
    g.control_plane = cp or g.control_plane
    fss, more_fs = check_filesystems(c)
    g.filesystems.extend(fss)
    quotas, more_q = check_quotas(c)
    g.quotas = quotas or g.quotas
    buckets, more_b = check_buckets(c)
    g.buckets.extend(buckets)
    cost = c.doc.data.get("cost") if isinstance(c.doc.data, dict) else None
    if isinstance(cost, dict) and c.ok(("cost",)) and "warn_per_month" in cost:
        g.warn_cost = float(cost["warn_per_month"])
    return [*more, *more_rs, *more_cp, *more_fs, *more_q, *more_b]


def _declared_groups(documents: Sequence[Document]) -> frozenset[str]:
    """The names and ids of the reservations the backends files declare on backends that take
    declared ones only (Azure's capacity reservation groups): the fleet checks need them
    before the backends file's turn comes."""
    out: set[str] = set()
    for doc in documents:
        data = doc.data
        if not isinstance(data, dict) or not isinstance(data.get("reservations"), list):
            continue
        for r in data["reservations"]:
            backend = r.get("backend") if isinstance(r, dict) else None
            if isinstance(r, dict) and isinstance(backend, str) and \
                    is_backend(backend) and traits_of(backend).declared_reservations_only:
                out.update(str(r[k]) for k in ("name", "id") if r.get(k))
    return frozenset(out)


DSTACK_KINDS = ("fleet", "gateway", "volume")


def _one_configuration_per_file(kinds: Mapping[str, list[tuple[Document, str | None]]]
                                ) -> list[Diagnostic]:
    """dstack reads one configuration per file (`yaml.safe_load`): a fleet or gateway file
    with a second document is refused there, so it is here."""
    out = []
    for docs in kinds.values():
        if len(docs) > 1 and any(kind in DSTACK_KINDS for _, kind in docs):
            second = docs[1][0]
            out.append(second.at_key((), L014, f"this file holds {len(docs)} YAML documents; "
                                     "dstack reads one configuration per file and refuses it",
                                     hint="put each fleet and gateway in a file of its own"))
    return out


def with_settings(fleet: FleetSpec, names: NameSettings) -> FleetSpec:
    """A fleet with its settings from the backends file (`fleets: {name: ...}`)."""
    own = names.fleets.get(fleet.name) or {}
    previous = tuple(str(n) for n in own.get("previous_names") or ())
    if previous:
        fleet = dataclasses.replace(fleet, previous_names=previous)
    if own.get("network"):
        fleet = dataclasses.replace(fleet, network_of=str(own["network"]),
                                    settings_origin=names.fleet_origins.get(fleet.name))
    if isinstance(own.get("max_spread"), str):
        fleet = dataclasses.replace(fleet, max_spread=own["max_spread"])
    if isinstance(own.get("contract"), dict):
        fleet = dataclasses.replace(fleet, contract=MappingProxyType(dict(own["contract"])))
    if isinstance(own.get("health"), dict):
        fleet = dataclasses.replace(fleet, health=MappingProxyType(dict(own["health"])))
    if own.get("handoff") in ("skypilot", "both"):
        fleet = dataclasses.replace(fleet, handoff=str(own["handoff"]))
    expect = own.get("expect_busbw")
    figures = expect if isinstance(expect, dict) else {0: expect}
    try:  # a value the schema refused (reported there) is left out
        by_count = {int(k): float(v) for k, v in figures.items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool)}
    except (TypeError, ValueError):
        return fleet
    if expect is None or not by_count or min(by_count.values()) <= 0:
        return fleet
    return dataclasses.replace(fleet, expect_busbw=MappingProxyType(by_count))


def with_gateway_settings(gw: GatewaySpec, names: NameSettings) -> GatewaySpec:
    """A gateway with its settings from the backends file (`gateways: {name: ...}`)."""
    own = names.gateways.get(gw.name) or {}
    if not own:
        return gw
    return dataclasses.replace(gw, dns_zone=own.get("dns_zone"),
                               protect_address=bool(own.get("protect_address", True)),
                               create_dns_zone=bool(own.get("create_dns_zone", False)),
                               fleet=str(own["fleet"]) if own.get("fleet") else None,
                               keep_old_address=own.get("old_address") == "keep",
                               settings_origin=names.gateway_origins.get(gw.name))


def _output_keys(fleets: list[FleetSpec], gateways: list[GatewaySpec],
                 volumes: list[VolumeSpec]) -> list[Diagnostic]:
    """A fleet's stack output is its name, a gateway's `gateway-NAME`, a volume's
    `volume-NAME`: a fleet named like another's output key would overwrite it."""
    taken = {f"gateway-{g.name}": ("gateway", g.origin) for g in gateways}
    taken.update({f"volume-{v.name}": ("volume", v.origin) for v in volumes})
    out = []
    for f in fleets:
        if f.name in taken:
            kind, other = taken[f.name]
            out.append(f.origin.at("name", F024, f"fleet '{f.name}' would have the stack output "
                                   f"key of {kind} '{f.name.split('-', 1)[1]}' ({other.file}:"
                                   f"{other.line}); one would overwrite the other",
                                   f"rename the fleet (a fleet name may not start with "
                                   f"`{kind}-` followed by a {kind}'s name)"))
    return out


def _duplicates(fleets: list[FleetSpec], gateways: list[GatewaySpec],
                backends: list[BackendConfig], ssh_fleets: list[SshFleetSpec]
                ) -> list[Diagnostic]:
    out = []
    seen: dict[tuple[str, str], tuple[str, int]] = {}
    named = [("fleet", f.name, f.origin) for f in fleets]
    named += [("fleet", f.name, f.origin) for f in ssh_fleets if f.name]
    named += [("gateway", g.name, g.origin) for g in gateways]
    named += [("backend", b.type, b.origin) for b in backends]
    for kind, name, origin in named:
        first = seen.setdefault((kind, name), (origin.file, origin.line))
        if first != (origin.file, origin.line):
            code = {"fleet": F012, "gateway": G008, "backend": B001}[kind]
            out.append(Diagnostic(origin.file, origin.line, origin.column, code,
                                  f"{kind} '{name}' is defined twice (first at "
                                  f"{first[0]}:{first[1]})",
                                  hint=f"{kind} names must be unique across all input files"))
    live = {f.name: f for f in fleets}
    for fleet in fleets:
        for old in fleet.previous_names:
            other = live.get(old)
            if other is not None and other is not fleet:
                out.append(Diagnostic(
                    fleet.origin.file, fleet.origin.line, fleet.origin.column, F019,
                    f"fleet '{fleet.name}' lists '{old}' in previous_names, but fleet '{old}' "
                    f"is still defined ({other.origin.file}:{other.origin.line})",
                    hint="a fleet keeps the resources of a name it no longer has; rename the "
                         "other fleet or drop the name from previous_names"))
    hosts: dict[tuple[str, int], str] = {}
    for f in ssh_fleets:
        for h in f.hosts:
            owner = hosts.setdefault(h.address, f.name or f"{f.origin.file}:{f.origin.line}")
            if owner != (f.name or f"{f.origin.file}:{f.origin.line}"):
                out.append(Diagnostic(f.origin.file, f.origin.line, f.origin.column, F021,
                                      f"Instances [{h.address_text}] are already "
                                      f"assigned to a fleet ('{owner}')",
                                      hint="a host belongs to one SSH fleet only"))
    return out


def load_lock(path: str | os.PathLike[str]) -> tuple[Lock | None, Validated]:
    """Read a ``gpufleet.lock``. A missing file is an empty lock (``exists`` False); an
    unreadable, invalid or foreign file gives ``None`` and located diagnostics."""
    if not os.path.lexists(path):
        return Lock(file=display_path(str(path)), exists=False), Validated(Inputs(), [])
    result = validate_paths([path])
    if result.ok and len(result.locks) != 1:
        name = result.files[0] if result.files else str(path)
        result.diagnostics.append(Diagnostic(
            name, 1, 1, K003, "this is not a gpufleet lock file (no `lock_version`)",
            hint="point `--lock` / `gpufleet:lock` at the file `gpufleet lock` writes"))
    if not result.ok:
        return None, result
    return result.locks[0], result
