"""Gateway recipe, the part every backend shares: the wildcard DNS record, dstack's project
and configuration, and the finished plan. Pure.

dstack 0.22.5 creates a gateway's instances (and its load balancer) itself at `dstack apply`,
in the network its backend config names, and cannot adopt one made by anyone else (its
`GatewayConfiguration` has no instance or address to reuse). So a gateway compiles to the
network dstack's gateway lands in (its own, or what it adds to the network of the fleet named
in the backends file's `gateways: {NAME: {fleet: F}}`), the DNS zone lookup or creation, and
the `*.<domain>` record, which points at what dstack reports (`gpufleet gateway sync`) and is
pending until then. Each backend lays out its network (``design_gateway`` on its planner,
returning a :class:`GatewayLayout`) and hands it to :func:`build`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from ipaddress import IPv4Network
from typing import Any

from gpufleet.backends import traits_of
from gpufleet.codes import G011, G012, G018, G019, G020, G021, G022
from gpufleet.compile import naming
from gpufleet.compile.cidr import pack
from gpufleet.compile.design import (
    DnsRecordDesign,
    FleetDesign,
    GatewayDesign,
    GatewayOptions,
    NetworkDesign,
    ProviderDesign,
    SubnetDesign,
)
from gpufleet.diagnostics import Diagnostic, Severity
from gpufleet.input import BackendConfig, GatewaySpec, SyncedGateway, is_ipv4

RECORD_TTL = 300
PROJECT_PREFIX = "gateway-"  # an own-network gateway's dstack project: gateway-<name>


@dataclass(frozen=True, slots=True)
class GatewayLayout:
    """What a backend decides of its gateway's network: the subnets it builds (in its own
    network, or in the shared fleet's) and whether they egress through a NAT of their own."""

    subnets: tuple[SubnetDesign, ...]
    nat: bool = False
    # the public static addresses gpufleet's own gateway VMs had (`old_address: keep` keeps
    # them through the migration): the backend knows which it made
    old_addresses: tuple[str, ...] = ()
    diagnostics: tuple[Diagnostic, ...] = field(default=())


def zone_of(gw: GatewaySpec) -> str | None:
    """The record's zone: `dns_zone`, else the domain's parent (gpu.example.com -> example.com)."""
    if not gw.domain:
        return None
    if gw.dns_zone:
        return gw.dns_zone.rstrip(".").lower()
    labels = gw.domain.rstrip(".").lower().split(".")
    return ".".join(labels[1:]) if len(labels) > 2 else ".".join(labels)


def record(gw: GatewaySpec, diags: list[Diagnostic],
           synced: SyncedGateway | None = None) -> DnsRecordDesign | None:
    """The `*.<domain>` record: A to dstack's replica addresses, CNAME (or an alias, where the
    backend's load balancers have them) to its load balancer's host name, pending while
    `gpufleet gateway sync` has not read them."""
    if not gw.domain:
        return None
    if "${{" in gw.domain:
        diags.append(gw.origin.at("domain", G011, "the domain holds a template; gpufleet cannot "
                         "create a DNS record for it", "create the `*.<domain>` records of "
                         "each project yourself", Severity.WARNING))
        return None
    zone = zone_of(gw)
    assert zone is not None
    domain = gw.domain.rstrip(".").lower()
    if not (domain == zone or domain.endswith("." + zone)):
        diags.append(gw.origin.at("domain", G012, f"the domain {domain} is not inside the zone "
                         f"{zone} (`dns_zone` of gateway '{gw.name}' in the backends file)",
                         f"set `gateways: {{{gw.name}: {{dns_zone: ...}}}}` in the backends "
                         "file to a parent of the domain"))
        return None
    targets = synced.targets if synced is not None else ()
    return DnsRecordDesign(naming.child(gw.name, "dns"), f"*.{domain}.", zone,
                           record_type(gw.backend, targets), RECORD_TTL,
                           private=not gw.public_ip, create_zone=gw.create_dns_zone,
                           zone_walk=not gw.dns_zone and not gw.create_dns_zone, targets=targets)


def record_type(backend: str, targets: tuple[str, ...]) -> str:
    """A for addresses (and while pending), ALIAS for a host name the backend aliases (an AWS
    load balancer's), else CNAME."""
    if not targets or all(is_ipv4(t) for t in targets):
        return "A"
    suffix = traits_of(backend).dns_alias_suffix
    return "ALIAS" if suffix and targets[0].endswith(suffix) else "CNAME"


def synced_for(gw: GatewaySpec, synced: Mapping[str, SyncedGateway],
               diags: list[Diagnostic]) -> SyncedGateway | None:
    """What `gateway sync` stored for this gateway, if it is for the gateway the file says."""
    found = synced.get(gw.name)
    if found is None:
        return None
    if (found.backend, found.region) != (gw.backend, gw.region) or \
            found.project != project_of(gw):
        diags.append(gw.origin.at("backend", G022, f"the stack config's `gpufleet:gateways` "
                     f"entry for '{gw.name}' was read from dstack's gateway in project "
                     f"{found.project} on {found.backend} {found.region}; the file asks for "
                     f"project {project_of(gw)} on {gw.backend} {gw.region}: the record stays "
                     "pending", "apply the gateway file `gpufleet export dstack` writes, then "
                     "run `gpufleet gateway sync` again", Severity.WARNING))
        return None
    return found


def project_of(gw: GatewaySpec) -> str:
    """The dstack project the gateway is applied in: its fleet's (a fleet is a project of the
    server config `export dstack` writes), else one of its own."""
    return gw.fleet or PROJECT_PREFIX + gw.name


def joined_fleet(gw: GatewaySpec, plans: Mapping[str, FleetDesign],
               diags: list[Diagnostic]) -> FleetDesign | None:
    """The fleet whose network a gateway shares, checked: planned, on the gateway's backend
    and region, in a network gpufleet builds. None (with an error) otherwise."""
    if gw.fleet is None:
        return None
    origin = gw.settings_origin or gw.origin
    joined = plans.get(gw.fleet)
    if joined is None:
        diags.append(origin.at("fleet", G018, f"gateway '{gw.name}' shares the network of "
                               f"fleet '{gw.fleet}', which the files do not plan",
                               "name a fleet of the files, or drop `fleet` to give the gateway "
                               "a network of its own"))
        return None
    if (joined.backend, joined.region) != (gw.backend, gw.region):
        diags.append(origin.at("fleet", G019, f"gateway '{gw.name}' is on {gw.backend} "
                               f"{gw.region} but fleet '{joined.name}' is planned on "
                               f"{joined.backend} {joined.region}: dstack names one network per "
                               "backend and region in a project",
                               "share a fleet of the gateway's backend and region, or drop "
                               "`fleet`"))
        return None
    main = joined.network("main")
    if main.existing:
        diags.append(origin.at("fleet", G020, f"fleet '{joined.name}' uses the existing network "
                               f"{main.existing}, which gpufleet does not build: the gateway's "
                               "subnets cannot be added to it",
                               "drop `fleet` (the gateway gets a network of its own), or give "
                               "the gateway's subnets to that network yourself"))
        return None
    return joined


def no_nat(gw: GatewaySpec, joined: FleetDesign) -> Diagnostic:
    """A private gateway's instances reach the internet (dstack installs its software on
    them) through a NAT; a fleet with public nodes has none to share."""
    origin = gw.settings_origin or gw.origin
    return origin.at("fleet", G021, f"private gateway '{gw.name}' shares the network of fleet "
                     f"'{joined.name}', whose nodes are public: it has no NAT for the gateway's "
                     "private subnets", "share a fleet with private nodes, or drop `fleet` "
                     "(the gateway gets a network with a NAT of its own)")


def ranges(block: IPv4Network) -> dict[str, IPv4Network]:
    """The gateway block's /24s: two zones' subnets (a, b), the NAT's, and one more (c)."""
    return pack(block, [("a", 24), ("b", 24), ("nat", 24), ("c", 24)])


def configuration(gw: GatewaySpec) -> dict[str, Any]:
    """dstack's gateway configuration as the file wrote it (what `export dstack` hands on)."""
    conf: dict[str, Any] = {"type": "gateway", "name": gw.name, "backend": gw.backend,
                            "region": gw.region}
    if gw.domain:
        conf["domain"] = gw.domain
    if gw.default:
        conf["default"] = True
    if gw.instance_type:
        conf["instance_type"] = gw.instance_type
    if not gw.public_ip:
        conf["public_ip"] = False
    if gw.load_balancer:
        conf["load_balancer"] = {"type": gw.load_balancer}
    cert = gw.certificate
    if cert is None:
        conf["certificate"] = None
    elif cert.type != "lets-encrypt":
        conf["certificate"] = {"type": cert.type, **({"arn": cert.arn} if cert.arn else {}),
                               **({"name": cert.name} if cert.name else {})}
    if gw.replicas > 1:
        conf["replicas"] = gw.replicas
    if gw.tags:
        conf["tags"] = dict(gw.tags)
    return conf


def build(gw: GatewaySpec, block: IPv4Network, config: BackendConfig | None,
          layout: GatewayLayout, dns: DnsRecordDesign | None, joined: FleetDesign | None,
          diags: list[Diagnostic]) -> tuple[GatewayDesign | None, list[Diagnostic]]:
    """The gateway's plan from the backend's layout; None when a diagnostic is an error."""
    diags = [*diags, *layout.diagnostics]
    if any(d.is_error for d in diags):
        return None, diags
    t = traits_of(gw.backend)
    cfg = config.settings if config is not None else {}
    network = NetworkDesign("main", naming.child(gw.name, "net"), layout.subnets,
                            cidr=str(block), nat=layout.nat)
    scope = cfg.get(t.scope_key) if t.scope_key else None
    tags = {**dict(gw.tags), **(cfg.get("tags") or {}), "managed-by": "gpufleet",
            "gpufleet-gateway": gw.name}
    machine = t.gateway
    assert machine is not None, f"{t.name} declares no gateway machine"
    old = layout.old_addresses if gw.keep_old_address else ()
    plan = GatewayDesign(
        name=gw.name, file=gw.origin.file, backend=gw.backend,
        provider=ProviderDesign(gw.backend, naming.provider(gw.backend, scope, gw.region),
                                gw.region, scope),
        region=gw.region, instance_type=gw.instance_type or machine.instance_type,
        replicas=gw.replicas, public=gw.public_ip, domain=gw.domain, project=project_of(gw),
        network=network, certificate=gw.certificate.type if gw.certificate else None,
        certificate_arn=gw.certificate.arn if gw.certificate else None,
        certificate_name=gw.certificate.name if gw.certificate else None,
        load_balancer=gw.behind_load_balancer, record=dns,
        fleet=joined.name if joined is not None else None, configuration=configuration(gw),
        old_addresses=old, protect_address=gw.protect_address, labels=t.labels(tags),
        options=GatewayOptions(project=cfg.get("project_id"),
                               dns_resource_group=cfg.get("dns_resource_group"),
                               resource_group=cfg.get("resource_group"),
                               tenant_id=cfg.get("tenant_id")),
    )
    return plan, diags


def old_address_names(gw: GatewaySpec) -> tuple[str, ...]:
    """The names gpufleet's own gateway VMs gave their static addresses (one per replica, or
    the load balancer's one), so that a kept address keeps its URN."""
    if gw.replicas == 1 or gw.behind_load_balancer:
        return (naming.child(gw.name, "ip"),)
    return tuple(naming.child(gw.name, "ip", i) for i in range(gw.replicas))
