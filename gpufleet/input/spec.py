"""Frozen dataclasses for validated, normalized input (FleetSpec, GatewaySpec, ...). Pure."""

from __future__ import annotations

import contextlib
import ipaddress
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from gpufleet.diagnostics import Diagnostic, Severity
from gpufleet.input.bucketspec import BucketSpec
from gpufleet.input.quotaspec import QuotaSettings

# dstack's BackendType enum (yaml-reference.md §2.2); gpufleet builds SUPPORTED_BACKENDS
DSTACK_BACKENDS: tuple[str, ...] = (
    "amddevcloud", "aws", "azure", "cloudrift", "crusoe", "cudo", "datacrunch", "digitalocean",
    "dstack", "gcp", "hotaisle", "jarvislabs", "kubernetes", "lambda", "remote", "nebius", "oci",
    "runpod", "tensordock", "vastai", "verda", "vultr", "slurm",
)

EMPTY_MAP: Mapping[str, str] = MappingProxyType({})
EMPTY_POSITIONS: Mapping[str, tuple[int, int]] = MappingProxyType({})


def frozen_map(d: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True, slots=True)
class Range:
    """An inclusive numeric range; ``None`` means unbounded on that side."""

    min: float | None = None
    max: float | None = None

    def contains(self, value: float) -> bool:
        lo = -math.inf if self.min is None else self.min
        hi = math.inf if self.max is None else self.max
        return lo <= value <= hi

    def __str__(self) -> str:
        lo = "" if self.min is None else _num(self.min)
        hi = "" if self.max is None else _num(self.max)
        return lo if lo == hi else f"{lo}..{hi}"

    def to_json(self) -> dict[str, float | None]:
        return {"min": self.min, "max": self.max}


def _num(v: float) -> str:
    return f"{v:g}"


@dataclass(frozen=True, slots=True)
class Nodes:
    min: int
    target: int
    max: int | None

    def __str__(self) -> str:
        if self.min == self.target == self.max:
            return str(self.min)
        return f"{self.min}..{'' if self.max is None else self.max} (target {self.target})"


@dataclass(frozen=True, slots=True)
class CPUSpec:
    count: Range = Range(2, None)
    arch: str | None = None


@dataclass(frozen=True, slots=True)
class GPUSpec:
    count: Range = Range(0, None)
    vendor: str | None = None
    names: tuple[str, ...] = ()
    memory: Range | None = None
    total_memory: Range | None = None
    compute_capability: tuple[int, int] | None = None

    def __str__(self) -> str:
        parts = [",".join(self.names), f"{self.memory}GB" if self.memory else "", str(self.count)]
        return ":".join(p for p in parts if p)


@dataclass(frozen=True, slots=True)
class ResourcesSpec:
    cpu: CPUSpec = CPUSpec()
    memory: Range = Range(8, None)
    gpu: GPUSpec = GPUSpec()
    disk: Range | None = Range(100, None)
    shm_size: float | None = None


# A fleet without `resources` gets dstack's defaults (dstack: core/models/fleets.py,
# InstanceGroupParams.resources = ResourcesSpec(): cpu 2.., memory 8GB.., disk 100GB.., and no
# GPU requirement, so the cheapest matching machine may be a CPU one).
DEFAULT_RESOURCES = ResourcesSpec()


@dataclass(frozen=True, slots=True)
class RetrySpec:
    on_events: tuple[str, ...]
    duration: int


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a spec came from, for located diagnostics in later stages."""

    file: str
    line: int
    column: int
    document: int = 0
    # the positions of the document's top-level keys (diagnostics of later stages)
    positions: Mapping[str, tuple[int, int]] = field(
        default_factory=lambda: EMPTY_POSITIONS, compare=False)

    def at(self, key: str, code: str, message: str, hint: str | None = None,
           severity: Severity = Severity.ERROR) -> Diagnostic:
        """A diagnostic at the document's top-level ``key``, else at the spec's name."""
        line, col = self.positions.get(key, (self.line, self.column))
        return Diagnostic(self.file, line, col, code, message, path=(key,), severity=severity,
                          hint=hint)


@dataclass(frozen=True, slots=True)
class FleetSpec:
    name: str
    nodes: Nodes
    origin: Origin = field(compare=False)
    placement: str = "any"
    blocks: int | str = 1
    reservation: str | None = None
    resources: ResourcesSpec = DEFAULT_RESOURCES
    backends: tuple[str, ...] | None = None
    regions: tuple[str, ...] | None = None
    availability_zones: tuple[str, ...] | None = None
    instance_types: tuple[str, ...] | None = None
    spot_policy: str | None = None
    retry: RetrySpec | None = None
    max_price: float | None = None
    idle_duration: int | None = None
    tags: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    previous_names: tuple[str, ...] = ()
    # backends file `expect_busbw`: acceptance GB/s by node count, from that count up (0: all)
    expect_busbw: Mapping[int, float] = field(default_factory=lambda: MappingProxyType({}))
    # The backends file's `network`: the fleet whose network this fleet's subnets join
    network_of: str | None = None
    max_spread: str = "any"  # backends file: the widest topology layer its nodes may span
    contract: Mapping[str, Any] = field(default_factory=lambda: EMPTY_MAP)  # its `contract`
    health: Mapping[str, Any] = field(default_factory=lambda: EMPTY_MAP)  # its `health` policy
    handoff: str = "dstack"  # backends file: who takes the nodes (dstack, skypilot, both)
    # where the backends file's `fleets: {NAME: ...}` entry is (errors about its settings)
    settings_origin: Origin | None = field(default=None, compare=False)
    explicit: frozenset[str] = frozenset()  # fields the user set (profiles fill the others)

    @property
    def is_cluster(self) -> bool:
        return self.placement == "cluster"


@dataclass(frozen=True, slots=True)
class SshHost:
    hostname: str
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    internal_ip: str | None = None

    @property
    def address(self) -> tuple[str, int]:
        """What tells two hosts apart: one jump host on two ports is two hosts, and one host
        written two ways (case, a trailing dot, IPv6's long and short forms, brackets) is
        one."""
        name = self.hostname.strip().strip("[]").rstrip(".").lower()
        with contextlib.suppress(ValueError):
            name = ipaddress.ip_address(name).compressed
        return name, self.port if isinstance(self.port, int) else 22

    @property
    def address_text(self) -> str:
        return self.hostname if self.address[1] == 22 else f"{self.hostname}:{self.address[1]}"


@dataclass(frozen=True, slots=True)
class SshFleetSpec:
    """An SSH fleet (`ssh_config`): hosts that already exist. Validated, never provisioned."""

    name: str | None
    origin: Origin = field(compare=False)
    hosts: tuple[SshHost, ...] = ()
    placement: str = "any"
    network: str | None = None


@dataclass(frozen=True, slots=True)
class CertificateSpec:
    type: str  # "lets-encrypt", "acm" or "gcp-cm"
    arn: str | None = None  # acm
    name: str | None = None  # gcp-cm: projects/<p>/locations/<region>/certificates/<name>


@dataclass(frozen=True, slots=True)
class GatewaySpec:
    name: str
    backend: str
    region: str
    origin: Origin = field(compare=False)
    instance_type: str | None = None
    domain: str | None = None
    public_ip: bool = True
    certificate: CertificateSpec | None = CertificateSpec("lets-encrypt")
    replicas: int = 1
    default: bool = False
    tags: Mapping[str, str] = field(default_factory=lambda: EMPTY_MAP)
    load_balancer: str | None = None  # "alb" (`load_balancer: {type: alb}`)
    dns_zone: str | None = None
    protect_address: bool = True
    create_dns_zone: bool = False
    # the backends file's `gateways: {name: ...}`: the fleet whose network and project it
    # shares, and the old gateway VM's address kept (migration)
    fleet: str | None = None
    keep_old_address: bool = False
    # where the backends file's `gateways: {NAME: ...}` entry is (errors about its settings)
    settings_origin: Origin | None = field(default=None, compare=False)

    @property
    def behind_load_balancer(self) -> bool:
        """The instances sit behind a load balancer: `load_balancer: {type: alb}`, or an ACM
        certificate (which implies one, dstack's docs say)."""
        return self.load_balancer == "alb" or (self.certificate is not None
                                               and self.certificate.type == "acm")


@dataclass(frozen=True, slots=True)
class ProfileSpec:
    name: str
    origin: Origin = field(compare=False)
    default: bool = False
    # Normalized fleet-level fields this profile sets (keys are FleetSpec field names).
    values: Mapping[str, Any] = field(default_factory=lambda: EMPTY_MAP)


@dataclass(frozen=True, slots=True)
class AccessSpec:
    """How nodes are reached (the backends file's `access`, top level merged with the
    backend's own). ``key_file`` says where the key came from, for messages."""

    ssh_public_key: str | None = None
    key_file: str | None = None
    ssh_user: str | None = None
    bastion: str = "auto"
    iap: bool = False
    ssm: bool = False
    key_name: str | None = None


NO_ACCESS = AccessSpec()


# Top-level keys of a backends file that holds gpufleet's settings only (no `backends:`).
SETTINGS_KEYS = frozenset({"fleets", "gateways", "access", "cost", "reservations",
                           "control_plane"})


@dataclass(frozen=True, slots=True)
class FilesystemSpec:
    """A shared filesystem declared in the backends file (`filesystems:`)."""

    name: str
    backend: str
    region: str
    kind: str  # "lustre" or "nfs"
    fleets: tuple[str, ...]
    mount: str
    origin: Origin = field(compare=False)
    zone: str | None = None
    capacity_gib: int | None = None
    throughput: int | None = None  # lustre: MB/s per TiB
    expected_usage_gib: int | None = None
    price: tuple[float, str] | None = None  # (USD per GB-month, its source) the file declares
    expect_throughput: float | None = None  # MB/s the storage acceptance check holds it to


@dataclass(frozen=True, slots=True)
class ReservationSpec:
    """Reserved capacity declared in the backends file (`reservations:`)."""

    name: str
    backend: str
    zone: str
    instance_type: str
    count: int
    kind: str
    origin: Origin = field(compare=False)
    id: str | None = None  # aws cr-..., azure group id; default the name
    ends: str | None = None  # ISO 8601, Capacity Blocks and calendar reservations
    price: float | None = None  # USD per node-hour paid
    placement_group: str | None = None

    @property
    def target(self) -> str:
        """What the instances name: the id where the cloud wants one, else the name."""
        return self.id or self.name


@dataclass(frozen=True, slots=True)
class VolumeSpec:
    """A dstack volume file: a new disk (`size` in `zone`) or an existing one (`volume_id`)."""

    name: str
    backend: str
    region: str
    zone: str | None
    size_gib: int | None  # None for an existing volume
    volume_id: str | None
    tags: Mapping[str, str]
    origin: Origin = field(compare=False)


@dataclass(frozen=True, slots=True)
class ControlPlaneSpec:
    """The backends file's `control_plane`: where the dstack server runs."""

    origin: Origin = field(compare=False)
    fleet: str | None = None  # the fleet whose bastion becomes the server VM
    port: int = 3000
    allow: tuple[str, ...] | None = None  # None: the backend's ssh_cidrs
    instance_type: str | None = None
    dstack_version: str = "0.22.5"
    url: str | None = None  # an existing server: nothing is built


@dataclass(frozen=True, slots=True)
class BackendConfig:
    """One backend entry of a gpufleet backends file (dstack server config fields + our own)."""

    type: str
    origin: Origin = field(compare=False)
    regions: tuple[str, ...] | None = None
    cidr: str | None = None
    ssh_cidrs: tuple[str, ...] = ()
    public_ips: bool | None = None
    settings: Mapping[str, Any] = field(default_factory=lambda: EMPTY_MAP)
    access: AccessSpec = NO_ACCESS

    def get(self, key: str, default: Any = None) -> Any:
        return self.settings.get(key, default)


@dataclass(frozen=True, slots=True)
class NameSettings:
    """gpufleet's own settings of fleets and gateways, by name, from the backends file: what
    dstack's fleet and gateway files cannot carry (dstack refuses unknown keys)."""

    fleets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    gateways: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # where each gateway's entry is, with the positions of its keys
    gateway_origins: Mapping[str, Origin] = field(default_factory=dict)
    fleet_origins: Mapping[str, Origin] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Inputs:
    """Everything a set of input files declared, after validation."""

    fleets: tuple[FleetSpec, ...] = ()
    gateways: tuple[GatewaySpec, ...] = ()
    profiles: tuple[ProfileSpec, ...] = ()
    backends: tuple[BackendConfig, ...] = ()
    ssh_fleets: tuple[SshFleetSpec, ...] = ()
    access: AccessSpec = NO_ACCESS  # the backends file's top-level `access`
    warn_cost_per_month: float | None = None  # the backends file's `cost.warn_per_month`
    reservations: tuple[ReservationSpec, ...] = ()
    control_plane: ControlPlaneSpec | None = None
    volumes: tuple[VolumeSpec, ...] = ()
    filesystems: tuple[FilesystemSpec, ...] = ()
    quotas: QuotaSettings | None = None  # the backends file's `quotas:`
    buckets: tuple[BucketSpec, ...] = ()  # the backends file's `buckets:`

    def reservation(self, name: str | None) -> ReservationSpec | None:
        """The declared reservation a fleet's `reservation` names (by name or id)."""
        return next((r for r in self.reservations if name in (r.name, r.id)), None) \
            if name else None

    def backend(self, name: str) -> BackendConfig | None:
        for b in self.backends:
            if b.type == name:
                return b
        return None


def access_for(inputs: Inputs, backend: str) -> AccessSpec:
    """The access settings in force for a backend (its own, else the top-level ones)."""
    cfg = inputs.backend(backend)
    return cfg.access if cfg is not None else inputs.access
