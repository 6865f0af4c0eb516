"""Gateway recipe (cloud-recipes.md §4) for every backend: address, instance, firewall and the
wildcard DNS record, decided up front. Pure.

Each replica gets its own static address resource, so replacing an instance never changes
the address the `*.<domain>` record points at (dstackai/dstack#3924).
"""

from __future__ import annotations

from ipaddress import IPv4Network

from gpufleet.compile import naming
from gpufleet.compile.backends.base import KEY_CONFIG, gcp_labels, ssh_rule
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
from gpufleet.diagnostics import Diagnostic, Severity
from gpufleet.input import NO_ACCESS, AccessSpec, BackendConfig, GatewaySpec

DEFAULTS = {
    "aws": ("t3.micro", "099720109477/ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-*"),
    "gcp": ("e2-medium", "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"),
    "azure": ("Standard_B1ms", "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest"),
}
RECORD_TTL = 300
GCP_PROXY_PURPOSE = "REGIONAL_MANAGED_PROXY"
# Where Google's load balancer health checks come from (cloud.google.com/load-balancing/docs/
# health-check-concepts, "Probe IP ranges and firewall rules").
GCP_HEALTH_CHECK_RANGES = ("35.191.0.0/16", "130.211.0.0/22")


def zone_of(gw: GatewaySpec) -> str | None:
    """The record's zone: `dns_zone`, else the domain's parent (gpu.example.com -> example.com)."""
    if not gw.domain:
        return None
    if gw.dns_zone:
        return gw.dns_zone.rstrip(".").lower()
    labels = gw.domain.rstrip(".").lower().split(".")
    return ".".join(labels[1:]) if len(labels) > 2 else ".".join(labels)


def _record(gw: GatewaySpec, diags: list[Diagnostic]) -> DnsRecordPlan | None:
    if not gw.domain:
        return None
    if "${{" in gw.domain:
        diags.append(gw.origin.at("domain", "G011", "the domain holds a template; gpufleet cannot "
                         "create a DNS record for it", "create the `*.<domain>` records of "
                         "each project yourself", Severity.WARNING))
        return None
    zone = zone_of(gw)
    assert zone is not None
    domain = gw.domain.rstrip(".").lower()
    if not (domain == zone or domain.endswith("." + zone)):
        diags.append(gw.origin.at("domain", "G012", f"the domain {domain} is not inside the zone "
                         f"{zone} (`dns_zone` of gateway '{gw.name}' in the backends file)",
                         f"set `gateways: {{{gw.name}: {{dns_zone: ...}}}}` in the backends "
                         "file to a parent of the domain"))
        return None
    alias = gw.behind_load_balancer and gw.backend == "aws"  # to the ALB's DNS name
    return DnsRecordPlan(naming.child(gw.name, "dns"), f"*.{domain}.", zone,
                         "ALIAS" if alias else "A", RECORD_TTL, private=not gw.public_ip,
                         create_zone=gw.create_dns_zone,
                         zone_walk=not gw.dns_zone and not gw.create_dns_zone)


def _subnets(gw: GatewaySpec, block: IPv4Network, public: bool,
             alb: bool) -> tuple[SubnetPlan, ...]:
    name, region = gw.name, gw.region
    r = pack(block, [("a", 24), ("b", 24), ("nat", 24), ("c", 24), ("d", 24)])
    if gw.backend == "gcp" and alb:
        # A regional load balancer's proxies take their addresses from a proxy-only subnet of
        # the region (GCP asks for one per network and region; /24 is within its /26../23).
        return (SubnetPlan(naming.child(name, "subnet"), str(r["a"]), region),
                SubnetPlan(naming.child(name, "proxy"), str(r["c"]), region,
                           purpose=GCP_PROXY_PURPOSE))
    if gw.backend != "aws":
        return (SubnetPlan(naming.child(name, "subnet"), str(r["a"]), region),)
    # AWS: two subnets in two AZs (an ALB needs them; replicas spread over both).
    subnets = [SubnetPlan(naming.child(name, "subnet", i), str(r[k]), region, public=public,
                          zone_index=i) for i, k in enumerate(("a", "b"))]
    if public and alb:
        # TLS ends at the ALB: the instances sit in private subnets behind it, no address.
        subnets += [SubnetPlan(naming.child(name, "private", i), str(r[k]), region,
                               zone_index=i) for i, k in enumerate(("c", "d"))]
    elif not public:
        subnets.append(SubnetPlan(naming.child(name, "public"), str(r["nat"]), region,
                                  public=True, zone_index=0))
    return tuple(subnets)


def plan_gateway(gw: GatewaySpec, block: IPv4Network, config: BackendConfig | None,
                 access: AccessSpec = NO_ACCESS) -> tuple[GatewayPlan | None, list[Diagnostic]]:
    diags: list[Diagnostic] = []
    cfg = config.settings if config is not None else {}
    record = _record(gw, diags)
    if gw.backend == "azure":
        if record is not None and not cfg.get("dns_resource_group"):
            diags.append(gw.origin.at("domain", "G010", "Azure DNS needs the resource group of the "
                             f"zone {record.zone}", "set `dns_resource_group` for azure in "
                             "the backends file"))
        if not access.ssh_public_key:
            diags.append(gw.origin.at("backend", "C011", f"gateway '{gw.name}': Azure needs an "
                             "SSH public key for the admin account and the backends file has "
                             f"none; `pulumi up` reads it from the stack config `{KEY_CONFIG}`",
                             "set `access: {ssh_public_key: file:~/.ssh/id_ed25519.pub}` in "
                             "the backends file", Severity.WARNING))
    if any(d.is_error for d in diags):
        return None, diags
    public = gw.public_ip
    itype, image = DEFAULTS[gw.backend]
    alb = gw.behind_load_balancer
    subnets = _subnets(gw, block, public, alb)
    web, alb_rule = _web_rules(gw, block, subnets)
    rules = (web, *ssh_rule(gw.name, config))
    network = NetworkPlan("main", naming.child(gw.name, "net"), subnets, cidr=str(block),
                          firewall=rules, nat=not public or alb)
    many = gw.replicas > 1
    if alb and gw.backend == "gcp":  # one static address, the load balancer's
        addresses: tuple[str, ...] = (naming.child(gw.name, "ip"),)
    elif alb:  # an ALB has a DNS name, no address of its own
        addresses = ()
    else:  # one per instance
        addresses = tuple(naming.child(gw.name, "ip", i) if many else naming.child(gw.name, "ip")
                          for i in range(gw.replicas))
    scope = cfg.get("project_id") or cfg.get("subscription_id")
    tags = {**dict(gw.tags), **(cfg.get("tags") or {}), "managed-by": "gpufleet",
            "gpufleet-gateway": gw.name}
    plan = GatewayPlan(
        name=gw.name, file=gw.origin.file, backend=gw.backend,
        provider=ProviderPlan(gw.backend, naming.provider(gw.backend, scope if gw.backend !=
                                                          "aws" else None, gw.region),
                              gw.region, scope if gw.backend != "aws" else None),
        region=gw.region, zone=None, instance_type=gw.instance_type or itype,
        replicas=gw.replicas, public=public, domain=gw.domain, network=network,
        address_names=addresses,
        instance_names=tuple(naming.child(gw.name, "vm", i) if many else
                             naming.child(gw.name, "vm") for i in range(gw.replicas)),
        image=image, certificate=gw.certificate.type if gw.certificate else None,
        certificate_arn=gw.certificate.arn if gw.certificate else None,
        certificate_name=gw.certificate.name if gw.certificate else None,
        load_balancer=naming.child(gw.name, "alb") if alb else None, record=record,
        protect_address=gw.protect_address,
        labels=gcp_labels(tags) if gw.backend == "gcp" else tags,
        options=GatewayOptions(
            project=cfg.get("project_id"), network_tag=naming.network_tag(gw.name),
            security_group=naming.child(gw.name, "sg"), nsg=naming.child(gw.name, "nsg"),
            admin_user=access.ssh_user or "azureuser", alb_firewall=alb_rule,
            dns_resource_group=cfg.get("dns_resource_group"),
            resource_group=cfg.get("resource_group"), ssh_public_key=access.ssh_public_key),
    )
    return plan, diags


def _web_rules(gw: GatewaySpec, block: IPv4Network, subnets: tuple[SubnetPlan, ...]
               ) -> tuple[FirewallRule, FirewallRule | None]:
    """Who reaches the instances on the service ports, and who reaches the load balancer
    (AWS: the ALB's own security group rule; GCP's managed load balancer has none)."""
    name = naming.child(gw.name, "web")
    clients = ("0.0.0.0/0",) if gw.public_ip else (str(block),)
    if not gw.behind_load_balancer:
        return FirewallRule(name, "HTTP and HTTPS for services", "tcp", ("80", "443"),
                            clients), None
    if gw.backend == "gcp":
        # The load balancer's proxies (from the proxy-only subnet) and Google's health checks
        # reach the instances on HTTP; TLS, if any, ends at the load balancer.
        proxy = next(s.cidr for s in subnets if s.purpose == GCP_PROXY_PURPOSE)
        return FirewallRule(name, "HTTP from the load balancer's proxies and health checks",
                            "tcp", ("80",), (proxy, *GCP_HEALTH_CHECK_RANGES)), None
    ports = ("80",) if gw.certificate is None else ("80", "443")
    return (FirewallRule(name, "HTTP from the load balancer only", "tcp", ("80",),
                         from_load_balancer=True),
            FirewallRule(naming.child(gw.name, "alb-web"),
                         "HTTP and HTTPS to the load balancer" if len(ports) == 2 else
                         "HTTP to the load balancer", "tcp", ports, clients))
