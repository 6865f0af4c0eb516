"""The shape of what a backend declares: capabilities with the reason a missing one is
missing, region shapes, login defaults and the per-cloud tables shared code reads. Pure data,
shared by every stage. Each backend fills one :class:`BackendTraits` in its own folder
(``gpufleet/backends/<cloud>/__init__.py``); ``gpufleet.backends`` lists them.

Modelled on dstack's compute mixins (``ComputeWithMultinodeSupport``,
``ComputeWithReservationSupport``, ``ComputeWithPrivateGatewaySupport``, ...): checks, offer
filters and messages ask ``supports(backend, Feature.X)`` instead of keeping their own lists
of backend names, so a new backend is one folder (see README, "Adding a backend").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any

from gpufleet.traitparts import BucketService as BucketService
from gpufleet.traitparts import CapacityCode as CapacityCode
from gpufleet.traitparts import FabricUnlock as FabricUnlock
from gpufleet.traitparts import NameBudget as NameBudget
from gpufleet.traitparts import NameRule as NameRule
from gpufleet.traitparts import NetworkQuota as NetworkQuota
from gpufleet.traitparts import QuotaAsk as QuotaAsk
from gpufleet.traitparts import QuotaId as QuotaId
from gpufleet.traitparts import SecretStore as SecretStore

# The layers of a network topology, outermost first (`gpufleet topology`): a spine network
# node, a block under it, a subblock, a host; each cloud fills in what it exposes.
TOPOLOGY_LAYERS: tuple[str, ...] = ("spine", "block", "subblock", "host")


class Feature(StrEnum):
    """A capability a backend has or lacks (the value is how messages name it)."""

    CLUSTER = "cluster placement"
    SPOT = "spot instances"
    RESERVATIONS = "reservations"
    CAPACITY_BLOCKS = "capacity blocks"
    GATEWAYS = "gateways"
    PRIVATE_GATEWAYS = "private gateways"
    GATEWAY_INSTANCE_TYPE = "a gateway instance_type"
    GATEWAY_LOAD_BALANCER = "a gateway load balancer (`load_balancer: {type: alb}`)"
    SHARED_FILESYSTEMS = "a filesystem mounted by several fleets"
    SHARED_NETWORKS = "fleets sharing one network (`fleets: {NAME: {network: FLEET}}`)"


@dataclass(frozen=True, slots=True)
class AccessWay:
    """A way into private nodes that a cloud's own service gives (its `access` option set to
    true picks it); the fleet's access method is the option's name."""

    shown: str  # how the plan names it
    how: str  # how the nodes are reached (C011's words)
    key_text: str  # how the nodes authenticate, for the plan
    ssh_from: tuple[str, ...] = ()  # the only sources port 22 opens to; (): no port 22
    ssh_rule: tuple[str, str] = ("", "")  # that rule's name under the fleet, its description
    ssh_key: bool = False  # the nodes take an SSH key
    os_login: bool = False  # the cloud's IAM login instead of a key in the metadata
    # an OpenSSH ProxyCommand that reaches a node this way ({scope}: the project or account,
    # {zone}; %h the host alias's HostName), for tools that take an ssh_config (SkyPilot)
    ssh_proxy: str = ""


@dataclass(frozen=True, slots=True)
class OwnFeature:
    """A capability only the cloud declaring it has, because it is that cloud's own service
    (ACM certificates, Identity-Aware Proxy, EC2 key pairs): the owner declares it, the other
    backends need not name it. ``key`` is the setting asking for it: an option of the
    backends file's `access` block (``where="access"``) or a gateway's certificate type
    (``where="certificate"``)."""

    key: str
    where: str
    title: str  # how the capability table names it
    elsewhere: str  # why another backend lacks it (the refusal, and the table's reason)
    way: AccessWay | None = None  # the way into private nodes it gives


@dataclass(frozen=True, slots=True)
class ImageFamily:
    """What an image family is known to carry; the host setup script checks it either way."""

    name: str
    gpu: bool  # the NVIDIA driver is expected (and required)
    ships: str  # what the image carries, for the plan and the README


UBUNTU = ImageFamily("ubuntu", False, "plain Ubuntu: no Docker")


@dataclass(frozen=True, slots=True)
class ResourceKind:
    """What change reports need to know of one Pulumi resource type gpufleet creates."""

    # Inputs whose change makes the provider replace the resource (curated from the
    # providers' ForceNew / replace-on-change properties).
    replaces: frozenset[str] = frozenset()
    # what the guards protect: address, dns, network, instance, storage (data lives there)
    category: str | None = None
    # Inputs that replace the resource when the resource feeding them is replaced (an Azure
    # NIC, VM or scale set cannot move to a subnet that is deleted and created again).
    replaced_with: frozenset[str] = frozenset()
    # An update gives it a new version that its dependents read (an EC2 launch template's
    # latest version), so they change with it.
    versioned: bool = False
    # what the bill lists it as (instance, filesystem, ...; gpufleet.review.bill.BILLED_AS)
    billed_as: str | None = None


@dataclass(frozen=True)
class LustreTier:
    """A throughput tier's sizes: multiples of `step` from `step` (and `smallest`, one size
    below it); above `switch`, multiples of `big_step`; `largest` the service's maximum
    (None: a quota, not a size rule)."""

    step: int
    largest: int | None = None
    switch: int | None = None
    big_step: int | None = None
    hard_max: bool = True  # False: the maximum is a default a support request raises
    smallest: int | None = None

    def valid(self, gib: int) -> bool:
        """A size the service offers; above a soft maximum counts (it warns, V009)."""
        if gib == self.smallest:
            return True
        if gib < self.step or (self.hard_max and self.largest is not None
                               and gib > self.largest):
            return False
        if self.switch is not None and self.big_step is not None and gib > self.switch:
            return gib % self.big_step == 0
        return gib % self.step == 0

    def first(self) -> list[int]:
        """The first valid sizes (for the hint)."""
        sizes = [self.step * i for i in range(1, 5)]
        return [self.smallest, *sizes][:4] if self.smallest else sizes



def _any_size(gib: int) -> int:
    return 1


@dataclass(frozen=True, slots=True)
class NfsSizes:
    """A managed NFS service's sizes: from ``smallest`` to ``largest`` GiB, in ``step(gib)``
    GiB steps around a size."""

    service: str
    smallest: int
    largest: int
    step: Callable[[int], int] = _any_size


@dataclass(frozen=True, slots=True)
class FilesystemService:
    """The managed service a backend builds for one filesystem kind (lustre, nfs)."""

    key: str  # how plans name it: fsx-lustre, managed-lustre, ...
    title: str  # how the plan prints it
    zonal: bool
    # the zone it gets when neither the filesystem nor its fleet names one (the API needs one)
    default_zone: str | None = None
    needs_zone: bool = False  # refused (V004) when the fleet has no zone to give it
    # a range of the fleet's block of its own (a subnet, or a private services access range)
    own_range: bool = False
    range_prefix: int | None = None  # its size; None: by capacity (a /24 up to 196 TiB, ...)
    # built after the fleets sharing it (its account lists their subnets), not before them
    built_after_peers: bool = False
    one_per_fleet: bool = False  # one per fleet network (one private services connection)
    # the cloud mounts it when an instance launches (Lambda's `file_system_mounts`): the
    # boot script mounts nothing
    mounted_at_launch: bool = False
    # GiB in the TiB its throughput tier is per (FSx for Lustre counts 1,200 GiB as 1.2 TiB)
    gib_per_tib: int = 1024
    # where it is mounted when the file gives no `mount` ({name}: the filesystem's name)
    default_mount: str = "/mnt/{name}"
    # the mount paths the cloud's API takes (a regular expression), where it restricts them
    mount_pattern: str | None = None
    mount_rule: str = ""  # the rule in words, with where it is documented
    mount_options: str = "defaults,_netdev"  # fstab options, from the service's mounting guide


class ZoneModel(Enum):
    """How a backend's offers and reservations name zones."""

    PER_ZONE = "per-zone"  # an offer row per zone (GCP)
    PER_REGION = "per-region"  # rows per region; a requested zone is pinned (AWS)
    NONE = "none"  # no zones in dstack's offers; a reservation's `zone` is its region (Azure)


@dataclass(frozen=True, slots=True)
class Machine:
    """A small utility machine gpufleet adds (bastion, gateway, control plane server)."""

    instance_type: str
    image: str
    disk_gib: int
    disk_type: str


def _as_is(tags: Mapping[str, str]) -> dict[str, str]:
    return dict(tags)


def _whole_name(instance_type: str) -> str:
    return instance_type


def _no_quotas(ask: QuotaAsk) -> tuple[QuotaId, ...]:
    return ()


@dataclass(frozen=True, slots=True)
class BackendTraits:
    """One backend's capabilities. ``unsupported`` gives the reason for each missing one
    (SkyPilot's idea: the reason travels with the refusal)."""

    name: str
    features: frozenset[Feature]
    unsupported: Mapping[Feature, str]
    region_pattern: re.Pattern[str]
    region_example: str
    default_user: str
    zones: ZoneModel = ZoneModel.PER_REGION
    # the folder of its code under gpufleet/backends/ and components/, where the name cannot
    # be a Python package (`lambda` is a keyword): the name itself unless set
    package: str = ""
    # gpuhunt's name for its catalog (`gpufleet catalog update`): the name itself unless set
    gpuhunt_provider: str = ""
    # the cloud gives every node a public address and has no private network to build (no
    # VPC, subnet, NAT or bastion): SSH reaches the nodes through its firewall, from ssh_cidrs
    networkless: bool = False
    # a zone's name, its region as group 1 (us-west2-c, us-east-1a); None: no zone names
    zone_pattern: re.Pattern[str] | None = None
    # the Pulumi package of its resources and invokes (the prefix of their type tokens, up to
    # a colon: `aws`, or `pulumi-python:dynamic/lambda` for a dynamic provider's resources)
    pulumi_package: str = ""
    # its scale-set resource type, where a fleet can be one (nodes redeployed in place)
    scale_set_type: str | None = None
    # how many instances a scale set's inputs ask for (None: not said)
    scale_set_size: Callable[[Mapping[str, Any]], int | None] | None = None
    # resource types that hold a private gateway's fixed address when a gateway owns them
    gateway_address_types: tuple[str, ...] = ()
    # what the bill lists the other resource types its components create as (instance,
    # address, nat, load_balancer, dns_zone, volume, filesystem; beside `resources`'
    # billed_as); a type in neither is free (gpufleet.review.bill)
    billed: Mapping[str, str] = field(default_factory=dict)
    # a plugin's backends-file entry schema (`$defs/<name>` of backends.schema.json);
    # gpufleet's own backends keep theirs in the shipped file
    settings_schema: Mapping[str, Any] | None = None
    # a plugin's own catalog (a gpuhunt v2 CSV file), read when the catalog folder holds none
    # for it (gpufleet's own backends ship theirs in gpufleet/data/catalog/)
    catalog_csv: str | None = None
    # what a diagnostic code means on this cloud, by code (docs/diagnostics.md prints them
    # beside the code's cloud-neutral title)
    code_notes: Mapping[str, str] = field(default_factory=dict)
    # what only this cloud has (its own services), in the order its checks prefer them
    own_features: tuple[OwnFeature, ...] = ()
    # Pulumi resource types of this backend's nodes (what a fleet's instances are).
    node_types: tuple[str, ...] = field(default=())
    resources: Mapping[str, ResourceKind] = field(default_factory=dict)
    # --- tables shared code reads (each cloud's folder cites its sources) ---
    bastion: Machine | None = None
    gateway: Machine | None = None
    server_size: str = ""  # the control plane's dstack server
    address_pool: str = "10.0.0.0/8"  # where fleets' blocks come from unless `cidr` says
    # the backends-file key naming the provider's scope (project, subscription), if any
    scope_key: str | None = None
    # the host-setup image family of gpufleet's default GPU image
    gpu_image: ImageFamily = UBUNTU
    volume_disk_type: str | None = None  # None: no dstack volumes on this backend
    # the sequential throughput (MB/s) a volume of that disk type gives with no provisioning,
    # and its source; absent: no documented flat figure (storage acceptance reports, and
    # judges the run only)
    volume_throughput: Mapping[str, tuple[float, str]] = field(default_factory=dict)
    lustre_tiers: Mapping[int, LustreTier] = field(default_factory=dict)
    default_lustre_throughput: int = 0
    nfs_sizes: NfsSizes | None = None  # None: elastic (no size to give)
    filesystems: Mapping[str, FilesystemService] = field(default_factory=dict)  # by kind
    # a filesystem's own range comes from the fleet's network (else from its address block)
    filesystem_range_in_network: bool = False
    # a filesystem several fleets mount gets a subnet of its own in the holder's network
    shared_filesystem_subnet: bool = False
    shared_filesystem_way: str = ""  # how the other fleets reach it (the plan says)
    # --- gateways ---
    lb_certificate: str | None = None  # the certificate type its load balancer holds
    lb_certificate_hint: str = ""  # the HTTPS a multi-replica gateway can have instead
    load_balancer_title: str = "{name}"  # {name}; {scope}: external or internal
    address_kinds: Mapping[bool, str] = field(default_factory=dict)  # by public or not
    # a host name dstack reports for a gateway's load balancer that the cloud's DNS aliases
    # (a Route 53 alias record) rather than a CNAME: its suffix
    dns_alias_suffix: str | None = None
    # the DNS zone found at `pulumi up` ({zone}: the offline guess), else None
    zone_walk_text: str | None = None
    # --- reservations, zones, billing ---
    # only reservations declared in the backends file (not dstack's `reservation` alone)
    declared_reservations_only: bool = False
    # how the nodes consume a reservation, by market (None: any other)
    reservation_use: Mapping[str | None, str] = field(default_factory=dict)
    reservation_zone_hint: str = "use a regional reservation, or one the plan's zone matches"
    zone_at_deploy: str | None = None  # {region}, {instance_type}: when no zone is planned
    nat_priced_per_vm: bool = False  # the NAT is billed per VM it serves (Cloud NAT)
    spot_addresses_priced: bool = False  # spot VMs' addresses have a price of their own
    # what `export dstack` needs in the backends entry, beside the stack outputs
    export_requires: tuple[str, ...] = ()
    reservation_kinds: tuple[str, ...] = ()
    capacity_errors: tuple[CapacityCode, ...] = ()
    # instance-type prefixes that take no cluster placement
    no_cluster_families: tuple[str, ...] = ()
    # physical names: the rule per resource type, the length the provider's auto-naming adds
    # to a logical name, and the fleet / gateway / load-balanced gateway name budgets
    name_rules: Mapping[str, NameRule] = field(default_factory=dict)
    autoname_suffix: int = 8
    name_budgets: Mapping[str, NameBudget] = field(default_factory=dict)
    network_quotas: tuple[NetworkQuota, ...] = ()
    # the compute quotas a node counts against (`gpufleet quota`), where they apply ("account",
    # "project", "subscription"), and how long an increase takes and what to do meanwhile
    compute_quotas: Callable[[QuotaAsk], tuple[QuotaId, ...]] = _no_quotas
    quota_scope: str = "account"
    quota_lag: str = ""
    quota_note: str = ""  # why a cloud without compute quotas lists none (`gpufleet quota`)
    buckets: BucketService | None = None  # its object store (the backends file's `buckets:`)
    # the backend entry's key that gives the nodes an identity a bucket grant can name
    # (gcp: vm_service_account); "" when the stack makes one itself
    bucket_identity_key: str = ""
    # where the nodes read a bucket's credentials with their identity (R2 mounts); None: the
    # nodes have no such store, and no R2 bucket mounts on them
    secret_store: SecretStore | None = None
    # fleets that may join one fleet's network at most (aws: CIDR blocks per VPC); None: any
    shared_network_limit: int | None = None
    # fabrics whose clusters need software gpufleet does not set up: fabric -> what it needs
    unbuildable_cluster_fabrics: Mapping[str, str] = field(default_factory=dict)
    # fabric -> the backends-file key that makes it buildable on some types
    cluster_fabric_unlocks: Mapping[str, FabricUnlock] = field(default_factory=dict)
    # what such a cluster loses without it, per instance type; and what to pick instead
    cluster_fabric_loss: Mapping[str, str] = field(default_factory=dict)
    cluster_fabric_alternative: str = ""
    # the instance family as the cloud names it (m7i, e2-standard, Dsv5)
    family: Callable[[str], str] = _whole_name
    # tags as the cloud accepts them as labels
    labels: Callable[[Mapping[str, str]], dict[str, str]] = _as_is
    # what the cloud's part of an offline run costs, in hundredths of a second (its SDK
    # modules loaded, their classes made): how `plan` spreads a run over processes
    offline_run_cost: int = 35

    @property
    def folder(self) -> str:
        """The package of its code: ``gpufleet.backends.<folder>``, ``components/<folder>``."""
        return self.package or self.name

    @property
    def catalog_provider(self) -> str:
        return self.gpuhunt_provider or self.name

    @property
    def zonal_offers(self) -> bool:
        """Offer rows are per zone (GCP) rather than per region (AWS, Azure)."""
        return self.zones is ZoneModel.PER_ZONE

    def supports(self, feature: Feature) -> bool:
        return feature in self.features

    def owns(self, key: str, where: str = "access") -> bool:
        return any(f.key == key and f.where == where for f in self.own_features)

    def why_not(self, feature: Feature) -> str:
        return self.unsupported.get(feature, f"{self.name} does not support {feature}")


ALL_FEATURES = frozenset(Feature)


def kinds(**by_category: tuple[str, ...]) -> dict[str, ResourceKind]:
    return {t: ResourceKind(category=c) for c, types in by_category.items() for t in types}
