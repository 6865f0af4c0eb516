"""Gateway recipe (cloud-recipes.md §4), the part every backend shares: the wildcard DNS
record, the network around the backend's subnets and the finished plan. Pure.

Each backend plans its own gateway (``plan_gateway`` on its planner): it lays out the subnets,
the web rules and the addresses (:class:`GatewayLayout`) and hands them to :func:`build`.
Each replica gets its own static address resource, so replacing an instance never changes
the address the `*.<domain>` record points at (dstackai/dstack#3924).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import IPv4Network

from gpufleet.backends import traits_of
from gpufleet.codes import G011, G012
from gpufleet.compile import naming
from gpufleet.compile.cidr import pack
from gpufleet.compile.plan import (
    DnsRecordPlan,
    FirewallRule,
    GatewayOptions,
    GatewayPlan,
    NetworkPlan,
    ProviderPlan,
    SubnetPlan,
)
from gpufleet.compile.seam import ssh_rule
from gpufleet.diagnostics import Diagnostic, Severity
from gpufleet.input import AccessSpec, BackendConfig, GatewaySpec

RECORD_TTL = 300


@dataclass(frozen=True, slots=True)
class GatewayLayout:
    """What a backend decides of its gateway."""

    subnets: tuple[SubnetPlan, ...]
    web: FirewallRule  # who reaches the instances on the service ports
    alb_firewall: FirewallRule | None = None  # who reaches the load balancer, where it has one
    addresses: tuple[str, ...] = ()
    record_type: str = "A"  # or ALIAS: the record names the load balancer's DNS name
    diagnostics: tuple[Diagnostic, ...] = field(default=())


def zone_of(gw: GatewaySpec) -> str | None:
    """The record's zone: `dns_zone`, else the domain's parent (gpu.example.com -> example.com)."""
    if not gw.domain:
        return None
    if gw.dns_zone:
        return gw.dns_zone.rstrip(".").lower()
    labels = gw.domain.rstrip(".").lower().split(".")
    return ".".join(labels[1:]) if len(labels) > 2 else ".".join(labels)


def record(gw: GatewaySpec, diags: list[Diagnostic], record_type: str = "A"
           ) -> DnsRecordPlan | None:
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
    return DnsRecordPlan(naming.child(gw.name, "dns"), f"*.{domain}.", zone,
                         record_type, RECORD_TTL, private=not gw.public_ip,
                         create_zone=gw.create_dns_zone,
                         zone_walk=not gw.dns_zone and not gw.create_dns_zone)


def ranges(block: IPv4Network) -> dict[str, IPv4Network]:
    """The gateway block's /24s: two zones' subnets (a, b), the NAT's, and two more (c, d)."""
    return pack(block, [("a", 24), ("b", 24), ("nat", 24), ("c", 24), ("d", 24)])


def one_subnet(gw: GatewaySpec, block: IPv4Network) -> SubnetPlan:
    return SubnetPlan(naming.child(gw.name, "subnet"), str(ranges(block)["a"]), gw.region)


def replica_addresses(gw: GatewaySpec) -> tuple[str, ...]:
    """One static address per instance."""
    if gw.replicas == 1:
        return (naming.child(gw.name, "ip"),)
    return tuple(naming.child(gw.name, "ip", i) for i in range(gw.replicas))


def clients(gw: GatewaySpec, block: IPv4Network) -> tuple[str, ...]:
    """Who may call the services: anyone for a public gateway, its own block otherwise."""
    return ("0.0.0.0/0",) if gw.public_ip else (str(block),)


def direct_web_rule(gw: GatewaySpec, block: IPv4Network) -> FirewallRule:
    """HTTP and HTTPS straight to the instances (no load balancer)."""
    return FirewallRule(naming.child(gw.name, "web"), "HTTP and HTTPS for services", "tcp",
                        ("80", "443"), clients(gw, block))


def build(gw: GatewaySpec, block: IPv4Network, config: BackendConfig | None,
          access: AccessSpec, layout: GatewayLayout, dns: DnsRecordPlan | None,
          diags: list[Diagnostic]) -> tuple[GatewayPlan | None, list[Diagnostic]]:
    """The gateway's plan from the backend's layout; None when a diagnostic is an error."""
    diags = [*diags, *layout.diagnostics]
    if any(d.is_error for d in diags):
        return None, diags
    t = traits_of(gw.backend)
    cfg = config.settings if config is not None else {}
    alb = gw.behind_load_balancer
    rules = (layout.web, *ssh_rule(gw.name, config))
    network = NetworkPlan("main", naming.child(gw.name, "net"), layout.subnets, cidr=str(block),
                          firewall=rules, nat=not gw.public_ip or alb)
    many = gw.replicas > 1
    scope = cfg.get(t.scope_key) if t.scope_key else None
    tags = {**dict(gw.tags), **(cfg.get("tags") or {}), "managed-by": "gpufleet",
            "gpufleet-gateway": gw.name}
    machine = t.gateway
    assert machine is not None, f"{t.name} declares no gateway machine"
    plan = GatewayPlan(
        name=gw.name, file=gw.origin.file, backend=gw.backend,
        provider=ProviderPlan(gw.backend, naming.provider(gw.backend, scope, gw.region),
                              gw.region, scope),
        region=gw.region, zone=None, instance_type=gw.instance_type or machine.instance_type,
        replicas=gw.replicas, public=gw.public_ip, domain=gw.domain, network=network,
        address_names=layout.addresses,
        instance_names=tuple(naming.child(gw.name, "vm", i) if many else
                             naming.child(gw.name, "vm") for i in range(gw.replicas)),
        image=machine.image, certificate=gw.certificate.type if gw.certificate else None,
        certificate_arn=gw.certificate.arn if gw.certificate else None,
        certificate_name=gw.certificate.name if gw.certificate else None,
        load_balancer=naming.child(gw.name, "alb") if alb else None, record=dns,
        protect_address=gw.protect_address, labels=t.labels(tags),
        options=GatewayOptions(
            project=cfg.get("project_id"), network_tag=naming.network_tag(gw.name),
            security_group=naming.child(gw.name, "sg"), nsg=naming.child(gw.name, "nsg"),
            admin_user=access.ssh_user or "azureuser", alb_firewall=layout.alb_firewall,
            dns_resource_group=cfg.get("dns_resource_group"),
            resource_group=cfg.get("resource_group"), ssh_public_key=access.ssh_public_key),
    )
    return plan, diags
