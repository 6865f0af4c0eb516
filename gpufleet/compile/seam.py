"""The backend seam: what every backend provides to the pure planner. Pure.

A backend's planner (``gpufleet/backends/<cloud>/compile.py``) is one object with a name, its
traits (what it can do and its tables, ``gpufleet.backends``), the size of the address block
each fleet gets, a ``design_fleet`` that turns a fleet and its chosen offer into a finished
:class:`FleetDesign` and a ``design_gateway`` for its gateways (with located diagnostics). Its
Pulumi components are ``gpufleet.components.<cloud>``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from ipaddress import IPv4Network
from typing import Any, Protocol, runtime_checkable

from gpufleet.backends import access_way, traits_of
from gpufleet.codes import C011, C012, C013
from gpufleet.compile import naming
from gpufleet.compile.design import (
    AccessDesign,
    BastionDesign,
    FirewallRule,
    FleetDesign,
    GatewayDesign,
    ProviderDesign,
)
from gpufleet.diagnostics import Diagnostic, Severity
from gpufleet.input import (
    AccessSpec,
    BackendConfig,
    FleetSpec,
    GatewaySpec,
    ReservationSpec,
    SyncedGateway,
    stackconfig,
)
from gpufleet.offers import Offer
from gpufleet.traits import BackendTraits

DEFAULT_DISK_GIB = 100


@dataclass(frozen=True, slots=True)
class Planned:
    plan: FleetDesign | None
    diagnostics: tuple[Diagnostic, ...] = ()


@runtime_checkable
class Backend(Protocol):
    name: str
    traits: BackendTraits
    fleet_prefix: int  # size of the address block each fleet gets from the pool

    def design_fleet(self, fleet: FleetSpec, offer: Offer, block: IPv4Network,
                     config: BackendConfig | None, access: AccessSpec,
                     reservation: ReservationSpec | None = None) -> Planned:
        """``reservation``: the declared reservation the fleet names, if any."""
        ...

    def billed_addresses(self, plan: FleetDesign) -> bool:
        """Whether the nodes' public addresses are resources of their own (billed as such),
        rather than assigned with the instance."""
        ...

    def design_gateway(self, gw: GatewaySpec, block: IPv4Network, config: BackendConfig | None,
                     joined: FleetDesign | None, synced: SyncedGateway | None
                     ) -> tuple[GatewayDesign | None, list[Diagnostic]]:
        """The network dstack's gateway lands in: its own in ``block``, or what it adds to
        the network of ``joined`` (the fleet it shares), laid out by the backend and built by
        ``gpufleet.compile.gateway.build``; ``synced``: dstack's gateway as `gpufleet
        gateway sync` read it (None: the record is pending)."""
        ...


def common_fields(fleet: FleetSpec, offer: Offer, scope: str | None) -> dict[str, Any]:
    """The FleetDesign fields every backend fills the same way from the fleet and its offer."""
    return {
        "name": fleet.name, "file": fleet.origin.file, "backend": offer.backend,
        "provider": ProviderDesign(offer.backend, naming.provider(offer.backend, scope,
                                                                offer.region),
                                 offer.region, scope),
        "region": offer.region, "instance_type": offer.instance_type,
        "gpu": f"{offer.gpu_count}x{offer.gpu_name}" if offer.gpu_count else "none",
        "nodes": fleet.nodes.target, "nodes_min": fleet.nodes.min,
        "nodes_max": fleet.nodes.max, "spot": offer.spot, "price_per_hour": offer.price,
        "max_price": fleet.max_price,
        "node_names": tuple(naming.node(fleet.name, i) for i in range(fleet.nodes.target)),
        "disk_gib": disk_gib(fleet), "previous_names": fleet.previous_names,
        "rdma": offer.rdma, "rdma_interfaces": offer.rdma_interfaces,
    }


def disk_gib(fleet: FleetSpec) -> int:
    """The smallest size the fleet accepts (dstack takes the low end of the range)."""
    disk = fleet.resources.disk
    return int(disk.min) if disk is not None and disk.min else DEFAULT_DISK_GIB


def merged_tags(fleet: FleetSpec, config: BackendConfig | None) -> dict[str, str]:
    """Fleet tags, then backend tags (the backend wins, as in dstack), then gpufleet's own."""
    tags = dict(fleet.tags)
    if config is not None:
        tags.update(config.get("tags") or {})
    tags.update({"managed-by": "gpufleet", "gpufleet-fleet": fleet.name})
    return tags


def ssh_rule(fleet: str, config: BackendConfig | None) -> tuple[FirewallRule, ...]:
    cidrs = tuple(config.ssh_cidrs) if config is not None else ()
    if not cidrs:
        return ()
    return (FirewallRule(f"{fleet}-ssh", "SSH from the ranges in ssh_cidrs", "tcp", ("22",),
                         cidrs),)


def public_ips(config: BackendConfig | None) -> bool:
    """gpufleet's default is private nodes; `public_ips: true` in the backends file opts in."""
    return bool(config is not None and config.public_ips)


# --- access: one model for every cloud --------------------------------------------------

KEY_CONFIG = stackconfig.SSH_PUBLIC_KEY


def access_method(backend: str, public: bool, access: AccessSpec) -> str:
    """public (22 from ssh_cidrs), or for private nodes: the first way in of the cloud's own
    the backends file asks for (ssm, iap), bastion or none."""
    if public:
        return "public"
    asked = {"ssm": access.ssm, "iap": access.iap}
    for own in traits_of(backend).own_features:
        if own.way is not None and asked.get(own.key):
            return own.key
    return "none" if access.bastion == "none" else "bastion"


def node_ssh_rules(fleet: str, config: BackendConfig | None, method: str
                   ) -> tuple[FirewallRule, ...]:
    """The only port-22 rules a fleet's nodes get: exactly one way in."""
    if method == "public":
        return ssh_rule(fleet, config)
    if method == "bastion":
        return (FirewallRule(naming.child(fleet, "ssh-from-bastion"), "SSH from the fleet's "
                             "bastion only", "tcp", ("22",), from_bastion=True),)
    way = access_way(method)
    if way is not None and way.ssh_from:
        name, title = way.ssh_rule
        return (FirewallRule(naming.child(fleet, name), title, "tcp", ("22",), way.ssh_from),)
    return ()


def access_plan(fleet: FleetSpec, backend: str, method: str, access: AccessSpec,
                config: BackendConfig | None, subnet: str, region: str
                ) -> tuple[AccessDesign, list[Diagnostic]]:
    diags: list[Diagnostic] = []
    bastion = None
    if method == "bastion":
        machine = traits_of(backend).bastion
        assert machine is not None, f"{backend} declares no bastion machine"
        name = naming.child(fleet.name, "bastion")
        cidrs = tuple(config.ssh_cidrs) if config is not None else ()
        ssh = FirewallRule(naming.child(name, "ssh"), "SSH to the bastion from the ranges in "
                           "ssh_cidrs", "tcp", ("22",), cidrs)
        bastion = BastionDesign(name, machine.instance_type, machine.image,
                                naming.child(name, "ip"), ssh, subnet)
    way = access_way(method)
    os_login = way is not None and way.os_login
    key_pairs = traits_of(backend).owns("key_name")
    key_name = access.key_name if key_pairs else None
    plan = AccessDesign(access.ssh_user or traits_of(backend).default_user, method,
                        access.ssh_public_key, key_name, None, os_login, bastion)
    if key_pairs and plan.needs_key:
        plan = dataclasses.replace(plan, key_pair=naming.child("key", region))
    how = way.how if way is not None else {
        "public": "directly (public IPs), SSH from `ssh_cidrs`",
        "bastion": f"through the bastion {bastion.name if bastion else ''}",
        "none": "not at all from outside their network (private, `bastion: none`)"}[method]
    if plan.needs_key and plan.public_key is None:
        diags.append(fleet.origin.at(
            "name", C011, f"fleet '{fleet.name}': no SSH public key in the backends file; "
            f"`pulumi up` reads it from the stack config `{KEY_CONFIG}` and fails without it. "
            f"Nodes are reached {how}", "set `access: {ssh_public_key: file:~/.ssh/"
            f"id_ed25519.pub}}` in the backends file, or run `pulumi config set {KEY_CONFIG} "
            "\"$(cat ~/.ssh/id_ed25519.pub)\"`", Severity.WARNING))
    if method == "none":
        diags.append(fleet.origin.at(
            "name", C012, f"fleet '{fleet.name}': nodes have no public IP and `bastion: "
            "none`: nobody outside their network can reach them over SSH",
            "use `bastion: auto`, or `iap: true` (gcp) / `ssm: true` (aws)", Severity.WARNING))
    cidrs = tuple(config.ssh_cidrs) if config is not None else ()
    if method in ("public", "bastion") and not cidrs:
        where = "the bastion accepts" if method == "bastion" else "the nodes accept"
        diags.append(fleet.origin.at(
            "name", C013, f"fleet '{fleet.name}': `ssh_cidrs` is empty, so {where} "
            "SSH from nowhere", f"add your office or VPN range to `ssh_cidrs` for {backend} in "
            "the backends file", Severity.WARNING))
    return plan, diags
