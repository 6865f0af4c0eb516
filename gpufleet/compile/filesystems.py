"""The backends file's `filesystems:` -> a FilesystemDesign on each fleet that mounts it. Pure.

A filesystem is built in its first fleet's network with the cloud's managed service: lustre
is FSx for Lustre (aws), Managed Lustre (gcp) or Azure Managed Lustre; nfs is EFS (aws),
Filestore zonal (gcp) or Azure Files premium NFS. Only the mounting fleets' node subnets may
reach it (Lustre 988, NFS 2049). A fleet on another cloud or in another region is refused
(V004); another zone warns (V005).

Several fleets: on AWS the filesystem gets a subnet of its own in the first fleet's network,
and each other fleet a VPC peering to that network with a route to that subnet only (and the
subnet's route table one back to the fleet), so no fleet's existing routes change but the
mounting fleet's own. On Azure, Azure Managed Lustre (already in a subnet of its own) is
reached through a VNet peering each other fleet builds both ways; Azure Files needs none:
its storage account admits each fleet's node subnet (their Microsoft.Storage service
endpoint). GCP's Filestore and Managed Lustre are reached through a peering of one network
that a second, peered network cannot use: there a filesystem has one fleet (V006).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from ipaddress import IPv4Network
from types import MappingProxyType

from gpufleet.backends import all_backends, supports, traits_of
from gpufleet.codes import V004, V005, V006, V008, V018, V019, V020, V021
from gpufleet.compile.design import FilesystemDesign, FirewallRule, FleetDesign, NetworkDesign
from gpufleet.diagnostics import Diagnostic, Severity, did_you_mean
from gpufleet.input import FilesystemSpec
from gpufleet.traits import Feature, FilesystemService


@functools.cache
def services() -> Mapping[str, FilesystemService]:
    """Every filesystem service of every backend, by its key (fsx-lustre, managed-lustre,
    ...)."""
    return MappingProxyType({s.key: s for t in all_backends() for s in t.filesystems.values()})
PORT = {"lustre": 988, "nfs": 2049}


def service_of(fs: FilesystemSpec) -> FilesystemService:
    return traits_of(fs.backend).filesystems[fs.kind]


def waits(service: str, holder: str, peers: Sequence[str]) -> list[tuple[str, str]]:
    """(fleet, the fleet it is built after) for one shared filesystem: the others wait for
    the first fleet (they peer with its network), or the first waits for the others (its
    storage account lists their subnets)."""
    if services()[service].built_after_peers:
        return [(holder, p) for p in peers]
    return [(p, holder) for p in peers]


def attach_filesystems(plans: Sequence[FleetDesign], specs: Sequence[FilesystemSpec],
                       blocks: Mapping[str, IPv4Network]
                       ) -> tuple[list[FleetDesign], list[Diagnostic]]:
    """The fleets with the filesystems they mount, and what cannot be built."""
    by_name = {p.name: p for p in plans}
    mounts: dict[str, list[FilesystemDesign]] = {}
    taken: dict[str, list[str]] = {}  # a holding fleet's ranges given to its filesystems
    after: dict[str, set[str]] = {}  # fleet -> the fleets it is built after
    diags: list[Diagnostic] = []
    # by name, so the order of the entries in the file never moves a filesystem's range
    for fs in sorted(specs, key=lambda f: f.name):
        names = list(dict.fromkeys(fs.fleets))
        absent = _absent(fs, names, by_name)
        if absent is not None:  # a subset of the files (or a typo: the hint names them)
            diags.append(absent)
            if names[0] not in by_name:
                continue
        fleet = by_name[names[0]]
        peers = [by_name[n] for n in names[1:] if n in by_name]
        problem = _shared_problem(fs, fleet, peers, after) if peers else None
        if problem is not None:
            diags.append(problem)
            continue
        mine = mounts.setdefault(fleet.name, [])
        if service_of(fs).one_per_fleet and any(m.service == service_of(fs).key
                                                for m in mine):
            diags.append(fs.origin.at("fleets", V020, f"fleet '{fleet.name}' already mounts "
                                      "a Managed Lustre filesystem: its network has one "
                                      "private services access connection, gpufleet builds one "
                                      "Managed Lustre per fleet", "grow the first one instead"))
            continue
        plan, problem = _plan(fs, fleet, blocks.get(fleet.name),
                              taken.setdefault(fleet.name, []), peers)
        if problem is not None:
            diags.append(problem)
        if plan is None:
            continue
        mine.append(plan)
        if plan.subnet:
            taken[fleet.name].append(plan.subnet)
        for waiter, waited in waits(plan.service, fleet.name, [p.name for p in peers]):
            after.setdefault(waiter, set()).add(waited)
        for peer in peers:
            mounts.setdefault(peer.name, []).append(
                dataclasses.replace(plan, peers=(), held_by=fleet.name))
        diags += _cross_zone(fs, plan, fleet, peers)
    out = []
    for p in plans:
        fleet_mounts = tuple(sorted(mounts.get(p.name, ()), key=lambda f: f.name))
        out.append(_with(p, fleet_mounts) if fleet_mounts else p)
    return out, diags


def _absent(fs: FilesystemSpec, names: Sequence[str], by_name: Mapping[str, FleetDesign]
            ) -> Diagnostic | None:
    """A warning for the fleets the filesystem names that these files do not plan."""
    absent = [n for n in names if n not in by_name]
    if not absent:
        return None
    known = sorted(by_name)
    first = names[0] in absent
    return fs.origin.at(
        "fleets", V008, f"filesystem '{fs.name}' "
        + ("is not built" if first else f"is not mounted by {', '.join(absent)}")
        + f": no fleet named '{absent[0]}' is planned from these files",
        did_you_mean(absent[0], known) or f"fleets: {', '.join(known) or 'none'}",
        severity=Severity.WARNING)


def _cross_zone(fs: FilesystemSpec, plan: FilesystemDesign, fleet: FleetDesign,
                peers: Sequence[FleetDesign]) -> list[Diagnostic]:
    """A warning for each fleet sharing a zonal filesystem from another zone."""
    where = plan.zone or fleet.zone
    if not services()[plan.service].zonal or not where:
        return []
    return [fs.origin.at("fleets", V005, f"filesystem '{fs.name}' is in {where}, fleet "
                         f"'{peer.name}' in {peer.zone}: cross-zone traffic is slower and "
                         "billed", "put the fleets sharing it in one zone",
                         severity=Severity.WARNING)
            for peer in peers if peer.zone and peer.zone != where]


def emission_order(plans: Sequence[FleetDesign]) -> list[FleetDesign]:
    """The fleets in the order the stack program builds them: a fleet holding a filesystem
    other fleets mount before them (they peer with its network; Azure Files the other way
    round: its storage account lists their subnets), a fleet whose network others join
    before them, else as given.
    `attach_filesystems` refuses the filesystems that would make a circle."""
    after: dict[str, set[str]] = {p.name: set() for p in plans}
    for p in plans:  # the holding fleet's plan lists the others (`peers`)
        for fs in p.filesystems:
            for waiter, waited in waits(fs.service, p.name, fs.peers):
                after.setdefault(waiter, set()).add(waited)
        # a fleet joining another's network after that fleet (`network`)
        hosts = {n.joins for n in p.networks if n.joins and n.joins in after}
        after[p.name] |= hosts
    done: set[str] = set()
    order: list[FleetDesign] = []
    while len(order) < len(plans):
        ready = [p for p in plans if p.name not in done and after[p.name] <= done]
        if not ready:  # a circle (refused when compiling): the rest as given
            ready = [p for p in plans if p.name not in done]
        for p in ready:
            order.append(p)
            done.add(p.name)
    return order


def _placement_problem(fs: FilesystemSpec, fleet: FleetDesign) -> Diagnostic | None:
    if fleet.backend != fs.backend:
        return fs.origin.at("fleets", V004, f"filesystem '{fs.name}' is on "
                            f"{fs.backend}, fleet '{fleet.name}' on {fleet.backend}: "
                            "a node cannot mount storage on another cloud",
                            f"declare the filesystem on {fleet.backend}")
    if fleet.region != fs.region:
        return fs.origin.at("region", V004, f"filesystem '{fs.name}' is in "
                            f"{fs.region}, fleet '{fleet.name}' in {fleet.region}: "
                            "storage must sit in its accelerators' region",
                            f"set region: {fleet.region}")
    return None


def _shared_problem(fs: FilesystemSpec, fleet: FleetDesign, peers: Sequence[FleetDesign],
                    after: Mapping[str, set[str]]) -> Diagnostic | None:
    """Why a filesystem cannot be mounted by these several fleets, or None."""
    if not supports(fs.backend, Feature.SHARED_FILESYSTEMS):
        return fs.origin.at("fleets", V006, f"filesystem '{fs.name}' is mounted by "
                            f"{len(peers) + 1} fleets: "
                            f"{traits_of(fs.backend).why_not(Feature.SHARED_FILESYSTEMS)}",
                            "give the filesystem one fleet, or declare one per fleet")
    for f in (fleet, *peers):
        problem = _placement_problem(fs, f)
        if problem is not None:
            return problem
        if f.network("main").existing:
            return fs.origin.at("fleets", V006, f"filesystem '{fs.name}' is shared by "
                                f"several fleets, and fleet '{f.name}' uses an existing network: "
                                "gpufleet adds no subnet, peering or route to a network it "
                                "does not own", "mount it from fleets whose networks gpufleet "
                                "creates, or give it this one fleet")

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return start == goal or any(reaches(h, goal, seen | {start})
                                    for h in after.get(start, ()) if h not in seen)
    service = service_of(fs).key
    for waiter, waited in waits(service, fleet.name, [p.name for p in peers]):
        if reaches(waited, waiter, set()):  # the fleets would wait on each other
            other = waiter if waiter != fleet.name else waited
            return fs.origin.at("fleets", V019, f"filesystem '{fs.name}': fleets "
                                f"'{fleet.name}' and '{other}' already share a filesystem "
                                "the other way round, and each would be built before the "
                                "other", "keep the shared filesystems in one fleet's network "
                                "(list the same fleet first)")
    return None


def _plan(fs: FilesystemSpec, fleet: FleetDesign, block: IPv4Network | None,
          taken: Sequence[str], peers: Sequence[FleetDesign] = ()
          ) -> tuple[FilesystemDesign | None, Diagnostic | None]:
    problem = _placement_problem(fs, fleet)
    if problem is not None:
        return None, problem
    kind = service_of(fs)
    service = kind.key
    # Azure Managed Lustre takes one availability zone (the API's `zones`, which azurerm
    # requires); a fleet without one (a regional scale set) gets zone 1 unless `zone` says
    zone = fs.zone or fleet.zone or kind.default_zone
    if zone is None and kind.needs_zone:
        return None, fs.origin.at("region", V018, f"filesystem '{fs.name}': {service} is "
                                  f"zonal and fleet '{fleet.name}' has no zone",
                                  "set `zone` on the filesystem")
    warning = None
    if fs.zone is not None and fleet.zone is not None and fs.zone != fleet.zone:
        warning = fs.origin.at("zone", V005, f"filesystem '{fs.name}' is in {fs.zone}, "
                               f"fleet '{fleet.name}' in {fleet.zone}: cross-zone traffic "
                               "is slower and billed", f"set zone: {fleet.zone}",
                               severity=Severity.WARNING)
    # a backend without networks (Lambda) mounts its filesystem by id at launch: no
    # subnet to admit, no range to carve
    networkless = traits_of(fs.backend).networkless
    admit = () if networkless else tuple(c for f in (fleet, *peers) for c in _node_cidrs(f))
    subnet = None
    if not networkless and (kind.own_range or (
            peers and traits_of(fs.backend).shared_filesystem_subnet)):
        subnet = _own_range(fleet, fleet.network("main"), block, kind, fs.capacity_gib or 0,
                            taken)
        if subnet is None:
            return None, fs.origin.at("fleets", V021, f"filesystem '{fs.name}': fleet "
                                      f"'{fleet.name}' has no free range left in its address "
                                      "block for the filesystem's own subnet",
                                      "give the backend a larger `cidr`")
    labels = {**dict(fleet.labels), "gpufleet-filesystem": fs.name}
    return FilesystemDesign(
        name=fs.name, backend=fs.backend, kind=fs.kind, service=service, region=fs.region,
        zone=zone if kind.zonal else None, capacity_gib=fs.capacity_gib,
        throughput=fs.throughput, mount=fs.mount, port=PORT[fs.kind], admit=admit,
        subnet=subnet, labels=traits_of(fs.backend).labels(labels),
        price=fs.price, peers=tuple(p.name for p in peers),
        expect_throughput=fs.expect_throughput,
    ), warning


def _node_cidrs(fleet: FleetDesign) -> tuple[str, ...]:
    return tuple(s.cidr for s in fleet.network("main").subnets
                 if not s.public and s.purpose is None)


def _own_range(fleet: FleetDesign, main: NetworkDesign, block: IPv4Network | None,
               service: FilesystemService, capacity_gib: int, taken: Sequence[str]
               ) -> str | None:
    """A range of the fleet's own address block no subnet of it uses, so no other fleet's
    block is touched: Azure Managed Lustre's subnet, a /24 up to 196 TiB and a /23 above
    (Microsoft's "Network size requirements": /24 or larger for 96-196 TiB, /23 for
    200-400 TiB; a /22 above), Managed Lustre's private services access range (a /20), or a
    shared AWS filesystem's own subnet (FSx sized like Azure's, one IP per file server; an
    EFS mount target takes one address: a /28)."""
    space = IPv4Network(main.cidr) if traits_of(fleet.backend).filesystem_range_in_network \
        and main.cidr else block
    if space is None:
        return None
    tib = capacity_gib / 1024
    prefix = service.range_prefix or (24 if tib <= 196 else 23 if tib <= 400 else 22)
    if space.prefixlen > prefix:
        return None
    used = [IPv4Network(s.cidr) for n in fleet.networks for s in n.subnets]
    used += [IPv4Network(t) for t in taken]  # the fleet's other filesystems' ranges
    for candidate in reversed(list(space.subnets(new_prefix=prefix))):
        if not any(candidate.overlaps(u) for u in used):
            return str(candidate)
    return None


def _with(plan: FleetDesign, mounts: tuple[FilesystemDesign, ...]) -> FleetDesign:
    """The fleet mounting its filesystems. Lustre servers call their clients back (LNet), so
    the node firewall admits them: on 988 from the range of their own where the service has
    one (Managed Lustre, Azure Managed Lustre), on 988 and 1018-1023 from the node subnets
    where FSx puts its interfaces (FSx for Lustre, "File system access control with Amazon
    VPC")."""
    extra = []
    for fs in mounts:
        if fs.kind != "lustre":
            continue
        ports = ("988", *map(str, range(1018, 1024))) if fs.service == "fsx-lustre" \
            else ("988",)
        # from the servers' own range where they have one, else (FSx of one fleet) from the
        # node subnets where FSx puts its interfaces
        extra.append(FirewallRule(f"{plan.name}-fs-{fs.name}", "gpufleet: Lustre servers "
                                  f"of filesystem {fs.name}", "tcp", ports,
                                  (fs.subnet,) if fs.subnet is not None else fs.admit))
    if not extra:
        return dataclasses.replace(plan, filesystems=mounts)
    networks = tuple(dataclasses.replace(n, firewall=(*n.firewall, *extra))
                     if n.role == "main" else n for n in plan.networks)
    return dataclasses.replace(plan, filesystems=mounts, networks=networks)
