"""Resolve and plan: validated inputs + catalog -> FleetPlans (or located diagnostics). Pure.

A pipeline of named steps: pick each fleet's offer (``pick_offers``), divide each backend's
address pool among the fleets that landed on it (``allocate_addresses``), let the backend's
planner turn each fleet + offer into a finished FleetDesign (``design_fleets``), plan the
gateways (``design_gateways``) and check who creates each DNS zone (``check_zone_owners``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Network

from gpufleet.codes import G013
from gpufleet.compile import gateway
from gpufleet.compile.addresses import NO_BLOCK, allocate_addresses, gateway_key
from gpufleet.compile.buckets import BucketDesign, attach_bucket_mounts, design_buckets
from gpufleet.compile.controlplane import attach_control_plane
from gpufleet.compile.design import FleetDesign, GatewayDesign, VolumeDesign
from gpufleet.compile.filesystems import attach_filesystems
from gpufleet.compile.handoff import takes, with_handoff
from gpufleet.compile.hostsetup import with_fabric
from gpufleet.compile.networks import attach_networks
from gpufleet.compile.planners import PLANNERS
from gpufleet.compile.quotaneeds import QuotaRequestDesign, compute_rows, quota_requests
from gpufleet.compile.volumes import design_volumes
from gpufleet.diagnostics import Diagnostic, sort_diagnostics
from gpufleet.input import (
    FleetSpec,
    Inputs,
    Lock,
    ProfileSpec,
    ReservationSpec,
    SyncedGateway,
    Validated,
    access_for,
    load_lock,
    stackconfig,
    validate_paths,
)
from gpufleet.offers import (
    LOCKED,
    Catalog,
    LockStatus,
    Selection,
    check_reserved,
    gateway_status,
    load_catalog,
    pick_profile,
    select_locked,
    stale_diagnostic,
)


@dataclass(frozen=True, slots=True)
class Compiled:
    plans: tuple[FleetDesign, ...]
    selections: tuple[Selection, ...]
    diagnostics: tuple[Diagnostic, ...] = field(default=())
    catalog: str = ""
    gateways: tuple[GatewayDesign, ...] = ()
    # How each fleet's / gateway's offer relates to the lock (empty without a lock).
    fleet_locks: Mapping[str, LockStatus] = field(default_factory=dict)
    gateway_locks: Mapping[str, LockStatus] = field(default_factory=dict)
    # The address block of each fleet (by name) and gateway (by `gateway:<name>`), and the
    # ones that moved off the block the lock records (name -> old block).
    blocks: Mapping[str, str] = field(default_factory=dict)
    block_moves: Mapping[str, str] = field(default_factory=dict)
    volumes: tuple[VolumeDesign, ...] = ()
    # the increases the stack files for short quotas (`quotas: {request: true}`)
    quota_requests: tuple[QuotaRequestDesign, ...] = ()
    buckets: tuple[BucketDesign, ...] = ()  # the backends file's `buckets:`

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)

    @property
    def dns_zones(self) -> list[str]:
        """The DNS zones the gateways look up (rather than create) at `pulumi up`."""
        return sorted({g.record.zone for g in self.gateways
                       if g.record is not None and not g.record.create_zone})

    @property
    def needs_stack_key(self) -> bool:
        """Whether some node or gateway takes its SSH key from the stack config at
        `pulumi up` (the backends file gives none)."""
        return needs_stack_key(self.plans, self.gateways)


def needs_stack_key(plans: Sequence[FleetDesign], gateways: Sequence[GatewayDesign] = ()) -> bool:
    """Whether some node of these plans takes its SSH key from the stack config at `pulumi
    up` (the backends file gives none). Gateways need none: dstack makes their instances."""
    return any(p.access is not None and p.access.needs_key and not p.access.public_key
               for p in plans)


def compile_files(paths: Sequence[str], profile: str | None = None,
                  catalog_dir: str | None = None, lock_path: str | None = None,
                  synced: Mapping[str, SyncedGateway] | None = None
                  ) -> tuple[Validated, Compiled | None]:
    """Files -> validated inputs -> plans, the way `pulumi up` runs: with ``lock_path``
    (default: gpufleet.lock beside the first file) strictly, so that every fleet and gateway
    must be locked as written. ``None`` for the plans when the input or the lock is invalid.
    ``synced``: what `gpufleet gateway sync` stored in the stack config (the records)."""
    validated = validate_paths(paths)
    if not validated.ok:
        return validated, None
    lock, lock_result = load_lock(lock_path or stackconfig.default_lock_path(paths))
    if lock is None:
        validated.diagnostics.extend(lock_result.diagnostics)
        validated.sources.update(lock_result.sources)
        return validated, None
    return validated, compile_inputs(validated.inputs, load_catalog(catalog_dir), profile,
                                     lock, locked=True, synced=synced)


@dataclass(frozen=True, slots=True)
class _Picked:
    """Step 1: each fleet's offer (from the lock where current) and each gateway's status."""

    selections: tuple[Selection, ...]
    fleet_locks: Mapping[str, LockStatus]
    gateway_locks: Mapping[str, LockStatus]
    diagnostics: tuple[Diagnostic, ...]

    @property
    def chosen(self) -> list[Selection]:
        return [s for s in self.selections if s.best is not None]


def compile_inputs(inputs: Inputs, catalog: Catalog, profile: str | None = None,
                   lock: Lock | None = None, upgrade: Collection[str] | bool = (),
                   locked: bool = False,
                   synced: Mapping[str, SyncedGateway] | None = None) -> Compiled:
    """``lock``: use its offers where the requirements are unchanged; ``upgrade``: fleet and
    gateway names (or True for all) to pick again regardless; ``locked``: an error for every
    fleet or gateway the lock does not cover (`plan --locked`, the stack program);
    ``synced``: each gateway's address as `gpufleet gateway sync` read it from dstack (no
    entry: the gateway's record is pending)."""
    picked = pick_offers(inputs, catalog, pick_profile(inputs.profiles, profile), lock,
                         upgrade, locked)
    addresses = allocate_addresses(inputs, picked.chosen, lock, picked.fleet_locks,
                                   picked.gateway_locks)
    plans, plan_diags = design_fleets(inputs, picked.chosen, addresses.blocks)
    plans, server_diags = attach_control_plane(plans, inputs.control_plane, inputs.backends)
    plans, fs_diags = attach_filesystems(plans, inputs.filesystems, addresses.blocks)
    plans, net_diags = attach_networks(plans, inputs.fleets, inputs.gateways)
    plan_diags = [*plan_diags, *server_diags, *fs_diags, *net_diags]
    gateways, gateway_diags = design_gateways(inputs, addresses.blocks, plans, synced or {})
    volumes, volume_diags = design_volumes(inputs.volumes, inputs.backends, plans, catalog)
    buckets, bucket_diags = design_buckets(inputs, plans)
    plans, mount_diags = attach_bucket_mounts(plans, buckets, inputs)
    bucket_diags += mount_diags
    diags = [*picked.diagnostics, *addresses.diagnostics, *plan_diags, *gateway_diags,
             *volume_diags, *bucket_diags, *check_zone_owners(inputs, gateways)]
    return Compiled(tuple(plans), picked.selections, tuple(sort_diagnostics(diags)),
                    catalog.describe(), tuple(gateways),
                    picked.fleet_locks if lock else {}, picked.gateway_locks if lock else {},
                    {name: str(net) for name, net in addresses.blocks.items()},
                    dict(addresses.moved), tuple(volumes), _requests(inputs, plans, catalog),
                    tuple(buckets))


def _requests(inputs: Inputs, plans: Sequence[FleetDesign], catalog: Catalog
              ) -> tuple[QuotaRequestDesign, ...]:
    """The quota increases the backends file asks the stack to file, for short quotas."""
    settings = inputs.quotas
    if settings is None or not settings.request or not settings.limits:
        return ()
    rows = compute_rows(plans, catalog, {f.name: f.health for f in inputs.fleets})
    return tuple(quota_requests(rows, plans, settings))


def pick_offers(inputs: Inputs, catalog: Catalog, prof: ProfileSpec | None, lock: Lock | None,
                upgrade: Collection[str] | bool, locked: bool) -> _Picked:
    def again(name: str) -> bool:
        return upgrade is True or (upgrade is not False and name in upgrade)

    diags: list[Diagnostic] = []
    selections: list[Selection] = []
    fleet_locks: dict[str, LockStatus] = {}
    for f in inputs.fleets:
        sel, st, more = select_locked(f, catalog, inputs, prof, lock, again(f.name),
                                      alternatives=False)  # a plan builds the first
        selections.append(sel)
        fleet_locks[f.name] = st
        diags += more
        diags += check_reserved(f, inputs.reservation(f.reservation))
        if locked and st.status != LOCKED:
            diags.append(stale_diagnostic("fleet", f.name, f.origin, st, lock))
        elif sel.error:
            diags.append(sel.error)
    gateway_locks: dict[str, LockStatus] = {}
    for g in inputs.gateways:
        st = gateway_status(g, lock, again(g.name))
        gateway_locks[g.name] = st
        if locked and st.status != LOCKED:
            diags.append(stale_diagnostic("gateway", g.name, g.origin, st, lock))
    return _Picked(tuple(selections), fleet_locks, gateway_locks, tuple(diags))


def reserved_fleet(fleet: FleetSpec, inputs: Inputs
                   ) -> tuple[FleetSpec, ReservationSpec | None]:
    """A fleet on a declared reservation names what the cloud wants (the cr-... id on AWS,
    the group's id on Azure), and the declaration goes to its backend."""
    res = inputs.reservation(fleet.reservation)
    if res is None:
        return fleet, None
    return dataclasses.replace(fleet, reservation=res.target), res


def design_fleets(inputs: Inputs, chosen: Sequence[Selection],
                blocks: Mapping[str, IPv4Network]) -> tuple[list[FleetDesign], list[Diagnostic]]:
    """Each fleet with an offer and an address block -> its backend's finished plan."""
    plans: list[FleetDesign] = []
    diags: list[Diagnostic] = []
    for s in chosen:
        assert s.best is not None
        impl = PLANNERS.get(s.best.backend)
        networkless = impl is not None and impl.traits.networkless
        if impl is None or (s.fleet.name not in blocks and not networkless):
            continue
        fleet, declared = reserved_fleet(s.fleet, inputs)
        planned = impl.design_fleet(
            fleet, s.best, blocks.get(s.fleet.name, NO_BLOCK), inputs.backend(s.best.backend),
            access_for(inputs, s.best.backend), declared)
        diags += planned.diagnostics
        if planned.plan is not None:
            res = inputs.reservation(s.fleet.reservation)
            done = with_handoff(with_fabric(planned.plan, takes(fleet.handoff, "skypilot")),
                                fleet.handoff)
            config = inputs.backend(s.best.backend)
            creds = creds_reference(config.settings.get("creds") if config else None)
            done = dataclasses.replace(done, dstack_creds=creds) if creds else done
            plans.append(done if res is None else dataclasses.replace(
                done, reservation_declared=(
                    f"{res.kind} {res.target}, {s.fleet.nodes.target} of {res.count} "
                    f"{res.instance_type} in {res.zone}"
                    + (f", ends {res.ends}" if res.ends else "")
                    + (f", ${res.price:g}/h per node declared" if res.price else ""))))
    return plans, diags


# the keys of a dstack `creds` block that say where a secret is, never a secret itself
_REFERENCE_KEYS = ("type", "filename")


def creds_reference(creds: object) -> dict[str, str] | None:
    """The backends file's dstack `creds` as export may write it: by reference (the type, a
    key file's path) and the names of the keys it holds inline (`withheld`: gpufleet writes
    no secret into a file); None for the default credentials."""
    if not isinstance(creds, dict) or creds.get("type") in (None, "default"):
        return None
    out = {k: str(creds[k]) for k in _REFERENCE_KEYS if k in creds}
    withheld = sorted(str(k) for k in creds if k not in _REFERENCE_KEYS)
    return {**out, "withheld": ", ".join(withheld)} if withheld else out


def design_gateways(inputs: Inputs, blocks: Mapping[str, IPv4Network],
                  plans: Sequence[FleetDesign], synced: Mapping[str, SyncedGateway]
                  ) -> tuple[list[GatewayDesign], list[Diagnostic]]:
    """Each gateway's network (its own, or added to the fleet it shares), its dstack
    project and its record (pointing at what ``synced`` says dstack runs, else pending)."""
    gateways: list[GatewayDesign] = []
    diags: list[Diagnostic] = []
    by_name = {p.name: p for p in plans}
    for g in inputs.gateways:
        impl = PLANNERS.get(g.backend)
        if impl is None or gateway_key(g.name) not in blocks:
            continue
        joined = gateway.joined_fleet(g, by_name, diags)
        if g.fleet is not None and joined is None:
            continue
        found = gateway.synced_for(g, synced, diags)
        gplan, gdiags = impl.design_gateway(g, blocks[gateway_key(g.name)],
                                          inputs.backend(g.backend), joined, found)
        diags += gdiags
        if gplan is not None:
            gateways.append(gplan)
    return gateways, diags


def check_zone_owners(inputs: Inputs, gateways: Sequence[GatewayDesign]) -> list[Diagnostic]:
    """At most one gateway creates each DNS zone; the others look it up."""
    diags: list[Diagnostic] = []
    owners: dict[tuple[str, str], str] = {}
    for g, gp in ((g, gp) for g in inputs.gateways for gp in gateways if gp.name == g.name):
        if gp.record is None or not gp.record.create_zone:
            continue
        key = (gp.backend, gp.record.zone)
        if key in owners:
            diags.append(g.origin.at("create_dns_zone", G013, f"gateway '{g.name}' and "
                                    f"'{owners[key]}' both create the zone {key[1]}",
                                    "let one gateway create it; the other looks it up"))
        owners.setdefault(key, g.name)
    return diags
