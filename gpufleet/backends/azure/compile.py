"""Azure recipes (cloud-recipes.md §3): resource group, VNet, NSG, InfiniBand scale sets. Pure.

InfiniBand connects only VMs of one scale set limited to a single placement group (100 VMs
by default, 300 with a raised limit), so a `placement: cluster` fleet on an IB size becomes
one VM scale set; other fleets become plain VMs. The VNet stays out of 172.16.0.0/16, which
Azure's RDMA network reserves.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Network

from gpufleet.backends.azure import TRAITS
from gpufleet.codes import C006, C008, C014, G010
from gpufleet.compile import gateway, naming
from gpufleet.compile.cidr import pack
from gpufleet.compile.design import (
    FleetDesign,
    GatewayDesign,
    NetworkDesign,
    NicDesign,
    PlacementDesign,
    PlacementOptions,
    SubnetDesign,
)
from gpufleet.compile.hostsetup import host_setup_plan
from gpufleet.compile.seam import (
    Planned,
    access_method,
    access_plan,
    common_fields,
    merged_tags,
    node_ssh_rules,
    public_ips,
)
from gpufleet.diagnostics import Diagnostic
from gpufleet.input import (
    AccessSpec,
    BackendConfig,
    FleetSpec,
    GatewaySpec,
    ReservationSpec,
    SyncedGateway,
)
from gpufleet.offers import Offer


@dataclass(frozen=True, slots=True)
class AzureOptions:
    resource_group: str | None  # an existing group, else one per stack and region
    tenant_id: str | None
    ssh_public_key: str | None
    admin_user: str
    nsg: str
    accelerated_networking: bool = True

# Ubuntu-HPC 22.04 carries the InfiniBand (MOFED) and NVIDIA drivers (azhpc-images).
DEFAULT_IMAGE = "microsoft-dsvm:ubuntu-hpc:2204:latest"
# CPU-only sizes boot Canonical's plain Ubuntu 22.04 (Gen2: Dsv5, Esv5 and Fsv2 all take it).
DEFAULT_CPU_IMAGE = "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest"
RDMA_RESERVED = IPv4Network("172.16.0.0/16")
DEFAULT_SCALE_SET_LIMIT, MAX_SCALE_SET = 100, 300
MAX_PLAIN_VMS = 100  # one VM, NIC and disk each: beyond this a fleet wants a scale set
NODE_PREFIX = 18


class AzureBackend:
    name = "azure"
    traits = TRAITS
    fleet_prefix = 16

    def design_fleet(self, fleet: FleetSpec, offer: Offer, block: IPv4Network,
                     config: BackendConfig | None, access: AccessSpec,
                     reservation: ReservationSpec | None = None) -> Planned:
        diags = self.check(fleet, offer, block, config)
        if any(d.is_error for d in diags):
            return Planned(None, tuple(diags))
        cfg = config.settings if config is not None else {}
        subscription = cfg.get("subscription_id")
        public = public_ips(config)
        method = access_method("azure", public, access)
        network = self.network(fleet, offer, block, config, method)
        way_in, more = access_plan(fleet, "azure", method, access, config,
                                   network.subnets[0].name, offer.region)
        diags += more
        scale_set = fleet.is_cluster and offer.rdma == "infiniband"
        plan = FleetDesign(
            **common_fields(fleet, offer, subscription), zone=None, networks=(network,),
            nics=(NicDesign("main", network.subnets[0].name, "ETHERNET", public_ip=public),),
            disk_type="Premium_LRS",
            image=cfg.get("image") or (DEFAULT_IMAGE if offer.gpu_count else DEFAULT_CPU_IMAGE),
            public_ip=public,
            placement=PlacementDesign(naming.child(fleet.name, "vmss"), "scale-set",
                                      PlacementOptions(single_placement_group=True))
            if scale_set else None,
            # a capacity reservation group's id, declared in the backends file (F011 refuses
            # an undeclared one: dstack's azure backend takes none)
            reservation=fleet.reservation, labels=merged_tags(fleet, config),
            host_setup=host_setup_plan("azure", cfg, bool(offer.gpu_count),
                                       not cfg.get("image"), way_in.user),
            options=AzureOptions(
                resource_group=cfg.get("resource_group"), tenant_id=cfg.get("tenant_id"),
                ssh_public_key=way_in.public_key, admin_user=way_in.user,
                nsg=naming.child(fleet.name, "nsg")),
            access=way_in,
        )
        return Planned(plan, tuple(diags))

    def check(self, fleet: FleetSpec, offer: Offer, block: IPv4Network,
              config: BackendConfig | None) -> list[Diagnostic]:
        diags: list[Diagnostic] = []
        cfg = config.settings if config is not None else {}
        wanted = fleet.nodes.max if fleet.nodes.max is not None else fleet.nodes.target
        if fleet.is_cluster and offer.rdma == "infiniband":
            limit = int(cfg.get("max_scale_set_nodes") or DEFAULT_SCALE_SET_LIMIT)
            if wanted > MAX_SCALE_SET:
                diags.append(fleet.origin.at("nodes", C008, f"an InfiniBand cluster is one "
                                     f"scale set with a single placement group, which holds at "
                                     f"most {MAX_SCALE_SET} VMs; fleet '{fleet.name}' wants "
                                     f"{wanted}", "split the fleet into several clusters"))
            elif wanted > limit:
                diags.append(fleet.origin.at("nodes", C008, f"fleet '{fleet.name}' wants "
                                     f"{wanted} nodes, but a single-placement-group scale set "
                                     f"holds {limit} unless Azure support raised the limit",
                                     "after Azure support raises the limit, set "
                                     "`max_scale_set_nodes` (<= 300) for azure in the "
                                     "backends file"))
            if block.overlaps(RDMA_RESERVED):
                diags.append(fleet.origin.at("backends", C006, f"the VNet range {block} "
                                     f"overlaps {RDMA_RESERVED}, which Azure's RDMA network "
                                     "reserves", "give azure a `cidr` outside 172.16.0.0/16"))
        if not (fleet.is_cluster and offer.rdma == "infiniband") and wanted > MAX_PLAIN_VMS:
            diags.append(fleet.origin.at("nodes", C014, f"fleet '{fleet.name}' wants {wanted} "
                                 f"Azure VMs; gpufleet creates at most {MAX_PLAIN_VMS} plain VMs "
                                 "per fleet", "split the fleet, or use `placement: cluster` on "
                                 "an InfiniBand size (a scale set)"))
        return diags

    def network(self, fleet: FleetSpec, offer: Offer, block: IPv4Network,
                config: BackendConfig | None, method: str) -> NetworkDesign:
        name = fleet.name
        cfg = config.settings if config is not None else {}
        existing_subnet = (cfg.get("subnet_ids") or {}).get(offer.region)
        existing_vnet = (cfg.get("vpc_ids") or {}).get(offer.region)
        nodes = pack(block, [("nodes", NODE_PREFIX)])["nodes"]
        subnet = SubnetDesign(naming.child(name, "subnet"), str(nodes), offer.region,
                              existing=existing_subnet or ("lookup" if existing_vnet else None))
        created = not (existing_vnet or existing_subnet)
        return NetworkDesign("main", naming.child(name, "vnet"), (subnet,),
                             cidr=str(block) if created else None,
                             existing=existing_subnet or existing_vnet,
                             firewall=node_ssh_rules(name, config, method),
                             nat=created and not public_ips(config))


    def billed_addresses(self, plan: FleetDesign) -> bool:
        """Plain VMs get a public IP resource each; a scale set's come with its instances."""
        return plan.placement is None or plan.placement.kind != "scale-set"

    def design_gateway(self, gw: GatewaySpec, block: IPv4Network, config: BackendConfig | None,
                     joined: FleetDesign | None, synced: SyncedGateway | None
                     ) -> tuple[GatewayDesign | None, list[Diagnostic]]:
        """dstack puts a gateway's VM, always with a public IP and its own network security
        group, in the subnet its backend config names for the region (`subnet_ids`, or the
        network of `vpc_ids`) (dstack 0.22.5: core/backends/azure/compute.py,
        create_gateway_replica). So: a VNet and subnet of the gateway's own, or the shared
        fleet's node subnet (gpufleet's NSGs sit on the nodes' NICs, not on the subnet).
        Azure DNS needs the zone's resource group."""
        diags: list[Diagnostic] = []
        dns = gateway.record(gw, diags, synced)
        cfg = config.settings if config is not None else {}
        if dns is not None and not cfg.get("dns_resource_group"):
            diags.append(gw.origin.at("domain", G010, "Azure DNS needs the resource group of "
                                      f"the zone {dns.zone}", "set `dns_resource_group` for "
                                      "azure in the backends file"))
        subnets = () if joined is not None else (
            SubnetDesign(naming.child(gw.name, "subnet"), str(gateway.ranges(block)["a"]),
                         gw.region),)
        # gpufleet's own gateway VMs had a static public IP each
        layout = gateway.GatewayLayout(subnets, old_addresses=gateway.old_address_names(gw))
        return gateway.build(gw, block, config, layout, dns, joined, diags)


BACKEND = AzureBackend()
