"""GCP recipes (cloud-recipes.md §2): networks, NIC layout, placement, scheduling. Pure.

| machine type            | fabric          | extra gVNIC VPCs | RoCE subnets | NICs |
|-------------------------|-----------------|------------------|--------------|------|
| a4-highgpu-8g, a3-ultra | RoCE            | 1 (MTU 8896)     | 8 (MRDMA)    | 10   |
| a3-megagpu-8g           | GPUDirect-TCPXO | 8 (MTU 8244)     | -            | 9    |
| a3-highgpu/edgegpu-8g   | GPUDirect-TCPX  | 4 (MTU 8244)     | -            | 5    |
| everything else         | none            | -                | -            | 1    |
"""

from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import IPv4Network

from gpufleet.backends.gcp import TRAITS, labels
from gpufleet.codes import C001, C002, C003, C017, C029
from gpufleet.compile import gateway, naming
from gpufleet.compile.cidr import pack, split, usable_hosts
from gpufleet.compile.design import (
    ANY_SUBNET,
    OMIT_NONE,
    FirewallRule,
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
from gpufleet.diagnostics import Diagnostic, Severity
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
class GcpOptions:
    project: str | None
    network_tag: str  # the tag that scopes the fleet's firewall rules to its nodes
    service_account: str | None = None
    on_host_maintenance: str | None = field(default=None, metadata=OMIT_NONE)

DEFAULT_IMAGE = ("projects/ubuntu-os-accelerator-images/global/images/family/"
                 "ubuntu-accelerator-2204-amd64-with-nvidia-570")
# CPU-only machines boot Canonical's plain image (no NVIDIA driver to carry).
DEFAULT_CPU_IMAGE = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"
HYPERDISK_FAMILIES = ("a4-", "a3-ultragpu-", "c4-", "m4-", "n4-", "h3-", "g4-", "ct6e-")
RESERVED_PER_SUBNET = 4  # GCP keeps 4 addresses of every primary range
ROCE_SUBNETS = 8
MTU_ROCE = 8896  # "the maximum supported MTU and a recommended choice" (Google Cloud docs)
MTU_TCPX = 8244  # dstack's and Cluster Toolkit's A3 High/Mega recipe
MAIN_PREFIX, EXTRA_PREFIX, ROCE_PREFIX = 19, 20, 18
PROXY_PURPOSE = "REGIONAL_MANAGED_PROXY"
# Where Google's load balancer health checks come from (cloud.google.com/load-balancing/docs/
# health-check-concepts, "Probe IP ranges and firewall rules").
HEALTH_CHECK_RANGES = ("35.191.0.0/16", "130.211.0.0/22")


# what the host setup fetches from gce-ai-infra per GPUDirect fabric (the C029 warning)
FABRIC_NAMES = {
    "gpudirect-tcpxo": "GPUDirect-TCPXO's kernel module, NCCL plugin and receive-data-path "
                       "manager",
    "gpudirect-tcpx": "GPUDirect-TCPX's NCCL plugin and receive-data-path manager",
}


def extra_vpc_count(offer: Offer) -> int:
    return {"roce": 1, "gpudirect-tcpxo": 8, "gpudirect-tcpx": 4}.get(offer.rdma, 0)


def roce_subnet_count(offer: Offer) -> int:
    return ROCE_SUBNETS if offer.rdma == "roce" else 0


class GcpBackend:
    name = "gcp"
    traits = TRAITS
    fleet_prefix = 16

    def design_fleet(self, fleet: FleetSpec, offer: Offer, block: IPv4Network,
                     config: BackendConfig | None, access: AccessSpec,
                     reservation: ReservationSpec | None = None) -> Planned:
        diags = self.check(fleet, offer, config)
        if any(d.is_error for d in diags):
            return Planned(None, tuple(diags))
        project = config.get("project_id") if config is not None else None
        zone = offer.zone or f"{offer.region}-a"
        public = public_ips(config)
        method = access_method("gcp", public, access)
        networks = self.networks(fleet, offer, block, config, zone, project, public, method)
        way_in, more = access_plan(fleet, "gcp", method, access, config,
                                   networks[0].subnets[0].name, offer.region)
        diags += more
        nics = self.nics(networks, public)
        placement = None
        if fleet.is_cluster and fleet.reservation is None:
            # With a reservation GCP uses the reservation's own placement (cloud-recipes 2.6).
            placement = PlacementDesign(naming.child(fleet.name, "placement"), "COLLOCATED",
                                        PlacementOptions(availability_domain_count=1))
        itype = offer.instance_type
        image = self.image(offer, config, fleet.is_cluster)
        plan = FleetDesign(
            **common_fields(fleet, offer, project), zone=zone, networks=networks, nics=nics,
            disk_type="hyperdisk-balanced" if itype.startswith(HYPERDISK_FAMILIES)
            else "pd-balanced",
            image=image or (DEFAULT_IMAGE if offer.gpu_count else DEFAULT_CPU_IMAGE),
            public_ip=public, placement=placement, reservation=fleet.reservation,
            labels=labels(merged_tags(fleet, config)),
            host_setup=host_setup_plan("gcp", config.settings if config is not None else {},
                                       bool(offer.gpu_count),
                                       not image, way_in.user),
            options=GcpOptions(
                project=project, network_tag=naming.network_tag(fleet.name),
                service_account=config.get("vm_service_account") if config is not None
                else None,
                # GPUs, Spot VMs and compact placement rule out live migration; a lone
                # on-demand CPU VM keeps running through host maintenance.
                on_host_maintenance=None if offer.gpu_count or offer.spot
                or placement is not None else "MIGRATE"),
            access=way_in,
        )
        return Planned(plan, tuple(diags))

    @staticmethod
    def image(offer: Offer, config: BackendConfig | None, cluster: bool) -> str | None:
        """The user's image for this offer: an A3 High cluster boots the TCPX image (the
        kernel its receive path needs), every other GPU node the backend's `image`."""
        if config is None:
            return None
        if cluster and offer.rdma == "gpudirect-tcpx" and config.get("tcpx_image"):
            return str(config.get("tcpx_image"))
        return config.get("image") or None

    def check(self, fleet: FleetSpec, offer: Offer, config: BackendConfig | None
              ) -> list[Diagnostic]:
        diags: list[Diagnostic] = []
        capacity = usable_hosts(IPv4Network(f"10.0.0.0/{MAIN_PREFIX}"), RESERVED_PER_SUBNET)
        wanted = fleet.nodes.max if fleet.nodes.max is not None else fleet.nodes.target
        if wanted > capacity:
            diags.append(fleet.origin.at("nodes", C001, f"fleet '{fleet.name}' wants up to "
                                 f"{wanted} nodes, but its /{MAIN_PREFIX} subnet holds "
                                 f"{capacity}", "split the fleet into several fleets"))
        if fleet.reservation is not None and offer.spot:
            diags.append(fleet.origin.at("reservation", C002, "a GCP reservation is consumed "
                                 "by on-demand VMs, but the chosen offer is spot",
                                 "set `spot_policy: on-demand` with `reservation`"))
        host_project = config.get("vpc_project_id") if config is not None else None
        if host_project:
            ssh = ", ".join(config.ssh_cidrs) if config is not None and config.ssh_cidrs \
                else "nowhere"
            diags.append(fleet.origin.at(
                "backends", C017, f"fleet '{fleet.name}' joins the Shared VPC "
                f"{config.get('vpc_name') if config else ''} of host project {host_project}: its "
                "firewall rules, routes and Cloud NAT belong to the host project, and gpufleet "
                "creates none there. The host project must allow all traffic between the "
                f"fleet's nodes (network tag {naming.network_tag(fleet.name)}), SSH from {ssh} "
                "(or from the bastion), and, for nodes without public IPs, egress through a "
                "Cloud NAT", "ask the host project's admins for these rules; `gpufleet plan` "
                "lists them again", Severity.WARNING))
        if offer.rdma.startswith("gpudirect-tcpx") and fleet.is_cluster and not (
                config is not None and config.get("vm_service_account")) and not (
                config is not None and config.settings.get("host_setup") == "none"):
            diags.append(fleet.origin.at(
                "backends", C029, f"fleet '{fleet.name}': the host setup installs "
                f"{FABRIC_NAMES[offer.rdma]} from gce-ai-infra's Artifact Registry "
                "(us-docker.pkg.dev, us-apt.pkg.dev), "
                "but the nodes get no service account (`vm_service_account`) to read them; "
                "the node's marker (`gpufleet acceptance`) says so if they are refused",
                "set `vm_service_account` for gcp in the backends file to an account with "
                "roles/artifactregistry.reader, as dstack's A3 guides ask", Severity.WARNING))
        extras = tuple(config.get("extra_vpcs") or ()) if config is not None else ()
        if extras and len(extras) < extra_vpc_count(offer):
            diags.append(fleet.origin.at("resources", C003, f"{offer.instance_type} needs "
                                 f"{extra_vpc_count(offer)} extra VPCs, but extra_vpcs in "
                                 f"the backends file lists {len(extras)}",
                                 "list enough VPCs, or remove extra_vpcs to let gpufleet "
                                 "create them"))
        return diags

    def networks(self, fleet: FleetSpec, offer: Offer, block: IPv4Network,
                 config: BackendConfig | None, zone: str, project: str | None,
                 public: bool, method: str) -> tuple[NetworkDesign, ...]:
        name = fleet.name
        n_extra = extra_vpc_count(offer)
        requests = [("main", MAIN_PREFIX)]
        requests += [(f"gpu-{i}", EXTRA_PREFIX) for i in range(1, n_extra + 1)]
        if roce_subnet_count(offer):
            requests.append(("roce", ROCE_PREFIX))
        ranges = pack(block, requests)
        cfg = config.settings if config is not None else {}
        mtu = MTU_ROCE if offer.rdma == "roce" else MTU_TCPX if n_extra else None
        subnet_existing = (cfg.get("subnetworks") or {}).get(offer.region)
        # a Shared VPC: the network, its rules and NAT are the host project's
        host_project = cfg.get("vpc_project_id")
        main_net = ranges["main"]
        rules = (FirewallRule(naming.child(name, "internal"),
                              "all traffic between the fleet's own nodes", "all",
                              sources=(str(main_net),), from_self=True),
                 *node_ssh_rules(name, config, method))
        nets = [NetworkDesign(
            "main", naming.child(name, "net"),
            (SubnetDesign(naming.child(name, "subnet"), str(main_net) if not host_project else "",
                          offer.region,
                          existing=subnet_existing or (ANY_SUBNET if host_project else None)),),
            cidr=str(main_net) if not host_project else None, mtu=mtu,
            existing=cfg.get("vpc_name"), firewall=() if host_project else rules,
            nat=not public and not host_project, project=host_project)]
        extra_names = list(cfg.get("extra_vpcs") or [])
        for i in range(1, n_extra + 1):
            r = ranges[f"gpu-{i}"]
            nets.append(NetworkDesign(
                f"gpu-{i}", naming.child(name, "gpu", i),
                (SubnetDesign(naming.child(name, "gpu-subnet", i), str(r), offer.region),),
                cidr=str(r), mtu=MTU_ROCE if offer.rdma == "roce" else MTU_TCPX,
                existing=extra_names[i - 1] if i <= len(extra_names) else None,
                firewall=(FirewallRule(naming.child(name, "gpu-internal", i),
                                       "GPU traffic within this VPC", "all",
                                       sources=(str(r),)),)))
        if roce_subnet_count(offer):
            r = ranges["roce"]
            roce_existing = (cfg.get("roce_vpcs") or [None])[0]
            profile = f"{zone}-vpc-roce"  # the component qualifies it with the project
            nets.append(NetworkDesign(
                "roce", naming.child(name, "roce"),
                tuple(SubnetDesign(naming.child(name, "roce", i), str(s), offer.region)
                      for i, s in enumerate(split(r, ROCE_SUBNETS))),
                cidr=str(r), mtu=MTU_ROCE, profile=profile, existing=roce_existing))
        return tuple(nets)

    @staticmethod
    def nics(networks: tuple[NetworkDesign, ...], public: bool) -> tuple[NicDesign, ...]:
        out = []
        for net in networks:
            if net.role == "roce":
                out += [NicDesign("roce", s.name, "MRDMA") for s in net.subnets]
            else:
                out.append(NicDesign(net.role, net.subnets[0].name, "GVNIC",
                                     public_ip=public and net.role == "main"))
        return tuple(out)


    def billed_addresses(self, plan: FleetDesign) -> bool:
        """Addresses come with the instance."""
        return False

    def design_gateway(self, gw: GatewaySpec, block: IPv4Network, config: BackendConfig | None,
                     joined: FleetDesign | None, synced: SyncedGateway | None
                     ) -> tuple[GatewayDesign | None, list[Diagnostic]]:
        """dstack puts a gateway's instances in the subnet its backend config names for the
        region (`subnetworks`, else any usable one of its VPC), opens the firewall for them
        itself, and fronts them with a regional load balancer whose proxies need the VPC's
        proxy-only subnet in the region (dstack 0.22.5: core/backends/gcp/compute.py,
        create_gateway_replica and create_gateway_load_balancer). So: a VPC and subnet of
        the gateway's own (with Cloud NAT for a private gateway), or the shared fleet's; and
        the proxy-only subnet where a load balancer needs one."""
        diags: list[Diagnostic] = []
        dns = gateway.record(gw, diags, synced)
        r = gateway.ranges(block)
        subnets: list[SubnetDesign] = []
        if joined is None:
            subnets.append(SubnetDesign(naming.child(gw.name, "subnet"), str(r["a"]), gw.region))
        elif not gw.public_ip and not joined.network("main").nat:
            diags.append(gateway.no_nat(gw, joined))
        if gw.behind_load_balancer:
            # one per network and region (cloud.google.com/load-balancing/docs/proxy-only-
            # subnets); /24 is within its /26../23
            subnets.append(SubnetDesign(naming.child(gw.name, "proxy"), str(r["c"]), gw.region,
                                        purpose=PROXY_PURPOSE))
        # gpufleet's own gateway VMs (or their load balancer) had static external addresses
        old = gateway.old_address_names(gw) if gw.public_ip else ()
        layout = gateway.GatewayLayout(tuple(subnets), not gw.public_ip and joined is None, old)
        return gateway.build(gw, block, config, layout, dns, joined, diags)


BACKEND = GcpBackend()
