"""The backends file's `filesystems:` -> a FilesystemPlan on the fleet that mounts it. Pure.

A filesystem is built in its fleet's network with the cloud's managed service: lustre is FSx
for Lustre (aws), Managed Lustre (gcp) or Azure Managed Lustre; nfs is EFS (aws), Filestore
zonal (gcp) or Azure Files premium NFS. Only the fleet's node subnets may reach it (Lustre
988, NFS 2049). Fleets have networks of their own and gpufleet builds no peering between
them, so a filesystem mounted by two fleets is refused (V006), as are a fleet on another cloud
or in another region (V004); another zone than the fleet's warns (V005).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from ipaddress import IPv4Network

from gpufleet.compile.backends.base import gcp_labels
from gpufleet.compile.plan import FilesystemPlan, FirewallRule, FleetPlan, NetworkPlan
from gpufleet.diagnostics import Diagnostic, Severity, did_you_mean
from gpufleet.input import FilesystemSpec

SERVICE = {("aws", "lustre"): "fsx-lustre", ("aws", "nfs"): "efs",
           ("gcp", "lustre"): "managed-lustre", ("gcp", "nfs"): "filestore",
           ("azure", "lustre"): "amlfs", ("azure", "nfs"): "azure-files-nfs"}
SERVICE_NAME = {"fsx-lustre": "FSx for Lustre (PERSISTENT_2 SSD)", "efs": "EFS (elastic)",
                "managed-lustre": "Managed Lustre", "filestore": "Filestore (zonal)",
                "amlfs": "Azure Managed Lustre", "azure-files-nfs": "Azure Files (premium NFS)"}
ZONAL = {"fsx-lustre", "managed-lustre", "filestore", "amlfs"}
PORT = {"lustre": 988, "nfs": 2049}


def attach_filesystems(plans: Sequence[FleetPlan], specs: Sequence[FilesystemSpec],
                       blocks: Mapping[str, IPv4Network]
                       ) -> tuple[list[FleetPlan], list[Diagnostic]]:
    """The fleets with the filesystems they mount, and what cannot be built."""
    by_name = {p.name: p for p in plans}
    mounts: dict[str, list[FilesystemPlan]] = {}
    diags: list[Diagnostic] = []
    # by name, so the order of the entries in the file never moves a filesystem's range
    for fs in sorted(specs, key=lambda f: f.name):
        if len(fs.fleets) > 1:
            diags.append(fs.origin.at("fleets", "V006", f"filesystem '{fs.name}' is mounted by "
                                      f"{len(fs.fleets)} fleets; each fleet has a network of "
                                      "its own and gpufleet builds no peering between them",
                                      "give the filesystem one fleet, or declare one per fleet"))
            continue
        fleet = by_name.get(fs.fleets[0])
        if fleet is None:  # a subset of the files (or a typo: the hint names the fleets)
            names = sorted(by_name)
            diags.append(fs.origin.at(
                "fleets", "V008", f"filesystem '{fs.name}' is not built: no fleet named "
                f"'{fs.fleets[0]}' is planned from these files",
                did_you_mean(fs.fleets[0], names) or f"fleets: {', '.join(names) or 'none'}",
                severity=Severity.WARNING))
            continue
        mine = mounts.setdefault(fleet.name, [])
        if fs.backend == "gcp" and fs.kind == "lustre" and any(
                m.service == "managed-lustre" for m in mine):
            diags.append(fs.origin.at("fleets", "V006", f"fleet '{fleet.name}' already mounts "
                                      "a Managed Lustre filesystem: its network has one "
                                      "private services access connection, gpufleet builds one "
                                      "Managed Lustre per fleet", "grow the first one instead"))
            continue
        plan, problem = _plan(fs, fleet, blocks.get(fleet.name),
                              [m.subnet for m in mine if m.subnet])
        if problem is not None:
            diags.append(problem)
        if plan is not None:
            mine.append(plan)
    out = []
    for p in plans:
        fleet_mounts = tuple(sorted(mounts.get(p.name, ()), key=lambda f: f.name))
        out.append(_with(p, fleet_mounts) if fleet_mounts else p)
    return out, diags


def _plan(fs: FilesystemSpec, fleet: FleetPlan, block: IPv4Network | None,
          taken: Sequence[str]) -> tuple[FilesystemPlan | None, Diagnostic | None]:
    if fleet.backend != fs.backend:
        return None, fs.origin.at("fleets", "V004", f"filesystem '{fs.name}' is on "
                                  f"{fs.backend}, fleet '{fleet.name}' on {fleet.backend}: "
                                  "a node cannot mount storage on another cloud",
                                  f"declare the filesystem on {fleet.backend}")
    if fleet.region != fs.region:
        return None, fs.origin.at("region", "V004", f"filesystem '{fs.name}' is in "
                                  f"{fs.region}, fleet '{fleet.name}' in {fleet.region}: "
                                  "storage must sit in its accelerators' region",
                                  f"set region: {fleet.region}")
    service = SERVICE[(fs.backend, fs.kind)]
    # Azure Managed Lustre takes one availability zone (the API's `zones`, which azurerm
    # requires); a fleet without one (a regional scale set) gets zone 1 unless `zone` says
    zone = fs.zone or fleet.zone or ("1" if service == "amlfs" else None)
    if zone is None and fs.backend == "gcp" and service in ZONAL:
        return None, fs.origin.at("region", "V004", f"filesystem '{fs.name}': {service} is "
                                  f"zonal and fleet '{fleet.name}' has no zone",
                                  "set `zone` on the filesystem")
    warning = None
    if fs.zone is not None and fleet.zone is not None and fs.zone != fleet.zone:
        warning = fs.origin.at("zone", "V005", f"filesystem '{fs.name}' is in {fs.zone}, "
                               f"fleet '{fleet.name}' in {fleet.zone}: cross-zone traffic "
                               "is slower and billed", f"set zone: {fleet.zone}",
                               severity=Severity.WARNING)
    main = fleet.network("main")
    admit = tuple(s.cidr for s in main.subnets if not s.public and s.purpose is None)
    subnet = None
    if service in ("amlfs", "managed-lustre"):
        subnet = _own_range(fleet, main, block, service, fs.capacity_gib or 0, taken)
        if subnet is None:
            return None, fs.origin.at("fleets", "V006", f"filesystem '{fs.name}': fleet "
                                      f"'{fleet.name}' has no free /24 left in its address "
                                      "block for the filesystem's servers",
                                      "give the backend a larger `cidr`")
    labels = {**dict(fleet.labels), "gpufleet-filesystem": fs.name}
    return FilesystemPlan(
        name=fs.name, backend=fs.backend, kind=fs.kind, service=service, region=fs.region,
        zone=zone if service in ZONAL else None, capacity_gib=fs.capacity_gib,
        throughput=fs.throughput, mount=fs.mount, port=PORT[fs.kind], admit=admit,
        subnet=subnet, labels=gcp_labels(labels) if fs.backend == "gcp" else labels,
        price=fs.price,
    ), warning


def _own_range(fleet: FleetPlan, main: NetworkPlan, block: IPv4Network | None,
               service: str, capacity_gib: int, taken: Sequence[str]) -> str | None:
    """A range of the fleet's own address block no subnet of it uses, so no other fleet's
    block is touched: Azure Managed Lustre's subnet, a /24 up to 196 TiB and a /23 above
    (Microsoft's "Network size requirements": /24 or larger for 96-196 TiB, /23 for
    200-400 TiB; a /22 above), or Managed Lustre's private services access range (a /20)."""
    space = IPv4Network(main.cidr) if fleet.backend == "azure" and main.cidr else block
    if space is None:
        return None
    tib = capacity_gib / 1024
    prefix = 20 if service != "amlfs" else 24 if tib <= 196 else 23 if tib <= 400 else 22
    if space.prefixlen > prefix:
        return None
    used = [IPv4Network(s.cidr) for n in fleet.networks for s in n.subnets]
    used += [IPv4Network(t) for t in taken]  # the fleet's other filesystems' ranges
    for candidate in reversed(list(space.subnets(new_prefix=prefix))):
        if not any(candidate.overlaps(u) for u in used):
            return str(candidate)
    return None


def _with(plan: FleetPlan, mounts: tuple[FilesystemPlan, ...]) -> FleetPlan:
    """The fleet mounting its filesystems. Lustre servers call their clients back (LNet), so
    the node firewall admits them: on 988 from the range of their own where the service has
    one (Managed Lustre, Azure Managed Lustre), on 988 and 1018-1023 from the node subnets
    where FSx puts its interfaces (FSx for Lustre, "File system access control with Amazon
    VPC")."""
    extra = []
    for fs in mounts:
        if fs.subnet is not None:
            extra.append(FirewallRule(f"{plan.name}-fs-{fs.name}", "gpufleet: Lustre servers "
                                      f"of filesystem {fs.name}", "tcp", ("988",), (fs.subnet,)))
        elif fs.service == "fsx-lustre":
            extra.append(FirewallRule(f"{plan.name}-fs-{fs.name}", "gpufleet: Lustre servers "
                                      f"of filesystem {fs.name}", "tcp",
                                      ("988", *map(str, range(1018, 1024))), fs.admit))
    if not extra:
        return dataclasses.replace(plan, filesystems=mounts)
    networks = tuple(dataclasses.replace(n, firewall=(*n.firewall, *extra))
                     if n.role == "main" else n for n in plan.networks)
    return dataclasses.replace(plan, filesystems=mounts, networks=networks)
