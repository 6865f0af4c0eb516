"""Frozen dataclasses for a resolved plan: what the components create, decided up front. Pure.
Components receive a finished ``FleetDesign`` and make no decisions of their own."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

from gpufleet.backends import access_way
from gpufleet.input import EMPTY_MAP


@dataclass(frozen=True, slots=True)
class ProviderDesign:
    """One explicit Pulumi provider: backend + account/project/subscription + region."""

    backend: str
    name: str
    region: str
    scope: str | None = None  # GCP project, Azure subscription; AWS uses ambient credentials


# Metadata of an optional field that a plan's JSON leaves out while it is None (so that
# plans, and the input digests made from them, stay the same when such a field is added).
OMIT_NONE: Mapping[str, bool] = MappingProxyType({"omit_none": True})
# the plan's JSON calls both the joined network's fleet and a filesystem's holder "host"
# (its key since round 3; plan_to_json reads "json" for a field named otherwise)
OMIT_NONE_AS_HOST: Mapping[str, object] = MappingProxyType({"omit_none": True, "json": "host"})


# SubnetDesign.existing of a Shared VPC subnet the backends file does not name: the network's
# subnet in the region (the first by name), looked up in the host project at `pulumi up`.
ANY_SUBNET = "*"


@dataclass(frozen=True, slots=True)
class SubnetDesign:
    name: str
    cidr: str
    region: str
    zone: str | None = None
    existing: str | None = None  # id/name of a subnet looked up instead of created
    public: bool = False
    zone_index: int | None = None  # no zone pinned: the N-th available zone (by name)
    # GCP: REGIONAL_MANAGED_PROXY for the proxy-only subnet of a regional load balancer.
    purpose: str | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, slots=True)
class FirewallRule:
    name: str
    description: str
    protocol: str  # "all", "tcp", "udp", "icmp"
    ports: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()  # CIDRs
    from_self: bool = False  # traffic from the fleet's own group/tag
    direction: str = "ingress"
    from_bastion: bool = False  # traffic from the fleet's bastion only
    from_load_balancer: bool = False  # traffic from the gateway's load balancer only


@dataclass(frozen=True, slots=True)
class NetworkDesign:
    role: str  # "main", "gpu-1".., "roce"
    name: str
    subnets: tuple[SubnetDesign, ...]
    cidr: str | None = None  # the range the network's subnets come from
    mtu: int | None = None
    profile: str | None = None  # GCP network profile (RoCE)
    existing: str | None = None  # name/id of an existing network, looked up not created
    firewall: tuple[FirewallRule, ...] = ()
    nat: bool = False  # egress through a NAT (private nodes)
    # GCP Shared VPC: the host project the (existing) network lives in; its firewall rules,
    # routes and NAT belong to that project, so the plan creates none.
    project: str | None = field(default=None, metadata=OMIT_NONE)
    # The fleet whose network this one's subnets join (the backends file's `network`): no
    # VPC, internet gateway or NAT of its own; its routes and NAT are that fleet's
    joins: str | None = field(default=None, metadata=OMIT_NONE_AS_HOST)


@dataclass(frozen=True, slots=True)
class NicDesign:
    network: str  # NetworkDesign.role
    subnet: str  # SubnetDesign.name
    nic_type: str  # GVNIC, MRDMA, ENA, efa, efa-only, interface, ETHERNET
    card: int = 0
    device: int = 0
    public_ip: bool = False


@dataclass(frozen=True, slots=True)
class PlacementOptions:
    """GCP: the resource policy's availability domains; Azure: one placement group."""

    availability_domain_count: int | None = field(default=None, metadata=OMIT_NONE)
    single_placement_group: bool | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, slots=True)
class PlacementDesign:
    name: str
    kind: str  # "COLLOCATED" (gcp), "cluster" (aws), "scale-set" (azure)
    options: PlacementOptions = PlacementOptions()
    # aws: the cluster placement group a declared Capacity Block sits in, joined by name
    # instead of creating one of our own
    existing: str | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, slots=True)
class ServerDesign:
    """The dstack server on a fleet's bastion (the backends file's `control_plane`)."""

    port: int
    firewall: FirewallRule  # the server's port, from `allow` (default ssh_cidrs)
    dstack_version: str
    user: str  # the service's user (the bastion's login user)


@dataclass(frozen=True, slots=True)
class BastionDesign:
    """One small jump host per fleet network: a static public address, SSH from `ssh_cidrs`."""

    name: str
    instance_type: str
    image: str
    address_name: str
    firewall: FirewallRule  # SSH to the bastion, from ssh_cidrs
    subnet: str  # SubnetDesign.name it lives in
    private_ip: str | None = None  # azure: a fixed address the node NSG admits
    server: ServerDesign | None = field(default=None, metadata=OMIT_NONE)  # control_plane


@dataclass(frozen=True, slots=True)
class AccessDesign:
    """How people and dstack reach a fleet's nodes."""

    user: str
    method: str  # "public", "bastion", "none" or a cloud's own way in (iap, ssm)
    public_key: str | None = None  # None: stack config gpufleet:sshPublicKey at `pulumi up`
    key_name: str | None = None  # an existing key pair (a cloud owning `key_name`)
    key_pair: str | None = None  # the per-region key pair resource gpufleet creates there
    os_login: bool = False  # the cloud's IAM login instead of a key in the metadata
    bastion: BastionDesign | None = None

    @property
    def needs_key(self) -> bool:
        """Whether the nodes get an SSH key (a way in such as SSM, and OS Login,
        authenticate otherwise)."""
        way = access_way(self.method)
        return (way is None or way.ssh_key) and not self.os_login and self.key_name is None


OptionsT = TypeVar("OptionsT")


@dataclass(frozen=True, slots=True)
class HostSetupDesign:
    """The boot script that readies a fleet's nodes for dstack (compile/hostsetup.py)."""

    family: str  # the image family it is rendered for
    user: str  # the login user given passwordless sudo and the docker group
    digest: str  # of the rendered script: a new script shows as a change
    fabric: str = "none"  # the cluster fabric whose collective software it installs or checks
    # it also checks what SkyPilot's SSH Node Pools need (the fleet is handed to SkyPilot)
    skypilot: bool | None = field(default=None, metadata=OMIT_NONE)  # None: not handed over


@dataclass(frozen=True, slots=True)
class BucketMountDesign:
    """A bucket this fleet's nodes mount with its store's FUSE client, reached with the
    nodes' own identity (instance profile, service account, managed identity)."""

    bucket: str
    cloud: str
    client: str  # "mountpoint-s3", "gcsfuse", "blobfuse2"
    path: str
    read_only: bool
    region: str
    zonal: bool = False  # an S3 Express One Zone directory bucket
    # Azure: the bucket's storage account; R2: the Cloudflare account
    account: str | None = field(default=None, metadata=OMIT_NONE)
    # R2: the secret holding the nodes' S3 credentials in their own cloud's store, and the
    # store's location for them (region, project or vault)
    secret: str | None = field(default=None, metadata=OMIT_NONE)
    secret_where: str | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, slots=True)
class FilesystemDesign:
    """A shared filesystem (the backends file's `filesystems:`), built with the cloud's managed
    service in its fleet's network and mounted by every node of the fleet at boot."""

    name: str
    backend: str
    kind: str  # "lustre" or "nfs"
    service: str  # fsx-lustre, efs, managed-lustre, filestore, amlfs, azure-files-nfs
    region: str
    zone: str | None  # None: the zone of the fleet's node subnet (aws), or regional
    capacity_gib: int | None
    throughput: int | None  # lustre: MB/s per TiB
    mount: str
    port: int  # 988 (Lustre) or 2049 (NFS)
    admit: tuple[str, ...]  # the CIDRs that may reach it: the fleet's node subnets
    # azure managed lustre: the filesystem's own subnet in the fleet's network; gcp managed
    # lustre: the private services access range the service's servers get
    subnet: str | None = field(default=None, metadata=OMIT_NONE)
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    # the backends file's own price (USD per GB-month, its source), over the bundled table
    price: tuple[float, str] | None = field(default=None, metadata=OMIT_NONE)
    # shared by several fleets (aws): on the fleet whose network holds it, the other fleets
    # that mount it through a peering (`peers`); on each of those, the holding fleet
    peers: tuple[str, ...] = field(default=(), metadata=OMIT_NONE)
    held_by: str | None = field(default=None, metadata=OMIT_NONE_AS_HOST)
    expect_throughput: float | None = field(default=None, metadata=OMIT_NONE)  # MB/s

    @property
    def throughput_mbps(self) -> int | None:
        """The aggregate throughput (MB/s) of a Lustre filesystem."""
        if self.throughput is None or self.capacity_gib is None:
            return None
        return int(self.capacity_gib / 1024 * self.throughput)


@dataclass(frozen=True, slots=True)
class FleetDesign:
    name: str
    file: str
    backend: str
    provider: ProviderDesign
    region: str
    zone: str | None
    instance_type: str
    gpu: str
    nodes: int  # target: how many nodes `pulumi up` creates
    nodes_min: int
    nodes_max: int | None
    spot: bool
    price_per_hour: float  # per node
    max_price: float | None
    networks: tuple[NetworkDesign, ...]
    nics: tuple[NicDesign, ...]  # per-node NIC layout, the same on every node
    node_names: tuple[str, ...]
    disk_gib: int
    disk_type: str
    image: str
    public_ip: bool
    placement: PlacementDesign | None = None
    reservation: str | None = None
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    previous_names: tuple[str, ...] = ()
    rdma: str = "none"
    rdma_interfaces: int = 0  # EFA devices, GPU NICs or InfiniBand HCAs per node
    # what only its backend's components read (a frozen dataclass of the backend's planner:
    # AwsOptions, ...; options_of checks the kind)
    options: object | None = None
    access: AccessDesign | None = None
    # the declared reservation the nodes use ("capacity-block cr-0ab.., 4 in us-east-1a, ...")
    reservation_declared: str | None = field(default=None, metadata=OMIT_NONE)
    # the backends file's dstack `creds`, by reference: no secret value (export writes it)
    dstack_creds: Mapping[str, str] | None = field(default=None, metadata=OMIT_NONE)
    host_setup: HostSetupDesign | None = field(default=None, metadata=OMIT_NONE)  # None: none
    # who takes the nodes beside dstack: "skypilot" or "both" (None: dstack only)
    handoff: str | None = field(default=None, metadata=OMIT_NONE)
    # the shared filesystems this fleet's nodes mount (built in its network)
    filesystems: tuple[FilesystemDesign, ...] = field(default=(), metadata=OMIT_NONE)
    buckets: tuple[BucketMountDesign, ...] = field(default=(), metadata=OMIT_NONE)  # mounted

    @property
    def price_known(self) -> bool:
        """False for nodes on a reservation whose price the catalog does not know."""
        return not math.isnan(self.price_per_hour)

    @property
    def total_per_hour(self) -> float:
        """The nodes' cost per hour; 0 when the price is not known (the bill says so)."""
        return self.nodes * self.price_per_hour if self.price_known else 0.0

    def network(self, role: str) -> NetworkDesign:
        return next(n for n in self.networks if n.role == role)


@dataclass(frozen=True, slots=True)
class VolumeDesign:
    """A dstack volume: a disk the stack creates (``volume_id`` None), or an existing one."""

    name: str
    file: str
    backend: str
    provider: ProviderDesign
    region: str
    zone: str | None
    size_gib: int | None
    disk_type: str
    volume_id: str | None = None
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    zone_note: str | None = None  # how gpufleet chose the zone the file does not name

    @property
    def created(self) -> bool:
        return self.volume_id is None


@dataclass(frozen=True, slots=True)
class DnsRecordDesign:
    name: str  # logical name of the record resource
    fqdn: str  # "*.gpu.example.com." (trailing dot)
    zone: str  # DNS name of the zone, "example.com"
    # "A" (addresses), "CNAME" (a host name) or "ALIAS" (a load balancer's host name, as an
    # alias record where the cloud has them); "A" while pending
    record_type: str
    ttl: int = 300
    private: bool = False
    create_zone: bool = False
    # The zone was derived from the domain (no `dns_zone`): where the cloud can list zones
    # (GCP), the closest zone that contains the domain is used at `pulumi up`.
    zone_walk: bool = False
    # What the record points at: dstack's gateway as `gpufleet gateway sync` last read it
    # (one address per replica, or the load balancer's host name). Empty: pending, dstack has
    # not created the gateway yet (or it was never synced), and no record is made.
    targets: tuple[str, ...] = field(default=(), metadata=OMIT_NONE)

    @property
    def pending(self) -> bool:
        return not self.targets


@dataclass(frozen=True, slots=True)
class GatewayOptions:
    """Gateway settings from the backends file."""

    project: str | None  # gcp: the project
    dns_resource_group: str | None = None  # azure: the DNS zone's resource group
    resource_group: str | None = None  # azure: an existing group for the network
    tenant_id: str | None = field(default=None, metadata=OMIT_NONE)  # azure: for dstack


@dataclass(frozen=True, slots=True)
class GatewayDesign:
    """A gateway as dstack runs it. dstack 0.22.5 creates the gateway's instances (one per
    replica, each with its own address) and its load balancer at `dstack apply`, in the
    network its backend config names, and cannot adopt an instance made by anyone else; so
    gpufleet builds that network and the `*.<domain>` record, and the record follows the
    address dstack reports (`gpufleet gateway sync`)."""

    name: str
    file: str
    backend: str
    provider: ProviderDesign
    region: str
    instance_type: str  # dstack's gateway instance: created and billed at `dstack apply`
    replicas: int
    public: bool
    domain: str | None
    project: str  # the dstack project the gateway is applied in
    # The network dstack's gateway lands in: the gateway's own, or, with `fleet` (the backends
    # file's `gateways: {NAME: {fleet: F}}`), what the gateway adds to fleet F's network
    network: NetworkDesign
    certificate: str | None  # "lets-encrypt", "acm", "gcp-cm" or None
    certificate_arn: str | None = None
    certificate_name: str | None = field(default=None, metadata=OMIT_NONE)  # gcp-cm
    load_balancer: bool = False  # dstack fronts the replicas with one (ALB / regional ALB)
    record: DnsRecordDesign | None = None
    fleet: str | None = field(default=None, metadata=OMIT_NONE)
    # dstack's gateway configuration as the file says it (what `export dstack` writes)
    configuration: Mapping[str, object] = field(default_factory=lambda: EMPTY_MAP)
    # Migration (`old_address: keep`): the static addresses gpufleet's own gateway VMs had,
    # kept as they were, protected (``protect_address``), until the user releases them
    old_addresses: tuple[str, ...] = field(default=(), metadata=OMIT_NONE)
    protect_address: bool = True
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    options: GatewayOptions | None = None

    @property
    def shared(self) -> bool:
        """The gateway lands in a fleet's network (and dstack project)."""
        return self.fleet is not None


def options_of(plan: FleetDesign | GatewayDesign, kind: type[OptionsT]) -> OptionsT:
    """A plan's typed options, checked: a component never reads another backend's fields."""
    if not isinstance(plan.options, kind):
        raise TypeError(f"{plan.name}: the plan carries {type(plan.options).__name__}, not "
                        f"{kind.__name__}")
    return plan.options


