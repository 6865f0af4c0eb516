"""A gateway in the plan's words: the network dstack's gateway lands in, dstack's project,
the record and where it points (or the steps until it can), addresses kept from gpufleet's
own gateway VMs. Pure."""

from __future__ import annotations

from typing import Any

from gpufleet.backends import traits_of
from gpufleet.compile import GatewayDesign, SubnetDesign


def next_steps(g: GatewayDesign, stack: str) -> str:
    """What makes a pending record point at dstack's gateway, in order."""
    return (f"after `pulumi up`: `gpufleet export dstack --stack {stack}` (the server config "
            f"names this network for project {g.project}), `dstack apply --project "
            f"{g.project} -f gateway-{g.name}.dstack.yml`, `gpufleet gateway sync --stack "
            f"{stack}`, then `pulumi up` again")


def _subnet(s: SubnetDesign) -> dict[str, Any]:
    kind = "proxy-only" if s.purpose else "public" if s.public else None
    return {"name": s.name, "cidr": s.cidr, "kind": kind}


def gateway_summary(g: GatewayDesign, stack: str = "dev") -> dict[str, Any]:
    rec = g.record
    return {
        "name": g.name, "file": g.file, "backend": g.backend, "region": g.region,
        "project": g.project, "fleet": g.fleet, "instance_type": g.instance_type,
        "replicas": g.replicas, "public": g.public, "domain": g.domain,
        "certificate": g.certificate, "load_balancer": g.load_balancer,
        "network": {"name": None if g.shared else g.network.name, "cidr": g.network.cidr,
                    "shared_with": g.fleet, "nat": g.network.nat,
                    "subnets": [_subnet(s) for s in g.network.subnets]},
        "old_addresses": list(g.old_addresses),
        "protected": g.protect_address and bool(g.old_addresses),
        "record": None if rec is None else {
            "fqdn": rec.fqdn, "type": rec.record_type, "zone": rec.zone, "ttl": rec.ttl,
            "private": rec.private, "targets": list(rec.targets), "pending": rec.pending,
            "next_step": next_steps(g, stack) if rec.pending else None},
    }


def tls_text(g: GatewayDesign) -> str:
    if not g.load_balancer:
        return g.certificate or "none at the gateway"
    where = "dstack's " + traits_of(g.backend).load_balancer_title.format(
        name="load balancer", scope="external" if g.public else "internal")
    if g.certificate == "gcp-cm":
        return f"gcp-cm {g.certificate_name} on {where}"
    return f"{g.certificate} on {where}" if g.certificate else f"none: plain HTTP on {where}"


def _network_text(g: GatewayDesign) -> str:
    subnets = ", ".join(f"{s.name} {s.cidr}" + (f" ({kind})" if (kind := _subnet(s)["kind"])
                                                 else "") for s in g.network.subnets)
    if g.shared:
        added = f": adds {subnets}" if subnets else ": adds nothing, the fleet's subnet serves"
        return (f"fleet {g.fleet}'s network (project {g.project}){added}; block "
                f"{g.network.cidr}")
    nat = ", NAT for egress" if g.network.nat else ""
    return f"{g.network.name} {g.network.cidr} (its own, project {g.project}): {subnets}{nat}"


def gateway_lines(g: GatewayDesign, lock: str | None, cost: str | None,
                  stack: str = "dev") -> list[str]:
    s = gateway_summary(g, stack)
    lines = [f"gateway {g.name} ({g.file})",
             f"  dstack:   creates the gateway at `dstack apply`: {g.backend} {g.region}  "
             f"{g.instance_type} x{g.replicas}, {'public' if g.public else 'private'}"
             + (", behind a load balancer" if g.load_balancer else ""),
             f"  network:  {_network_text(g)}"]
    if lock:
        lines.insert(2, f"  lock:     {lock}")
    lines.append(f"  tls:      {tls_text(g)}")
    if cost is not None:
        lines.append(f"  cost:     {cost}")
    rec = s["record"]
    if rec:
        where = f"(zone {rec['zone']}{', private' if rec['private'] else ''}, TTL {rec['ttl']})"
        target = f"pending: dstack has not created the gateway yet; {rec['next_step']}" \
            if rec["pending"] else ", ".join(rec["targets"]) + " (dstack's gateway, synced)"
        lines.append(f"  dns:      {rec['type']} {rec['fqdn']} -> {target} {where}")
        if g.record is not None and g.record.zone_walk:
            lines.append("  zone:     " + _zone_text(g, rec["zone"]))
    if g.old_addresses:
        kind = traits_of(g.backend).address_kinds.get(True, "address")
        lines.append(f"  kept:     {', '.join(g.old_addresses)} ({kind} of gpufleet's old "
                     f"gateway VM{', protected' if s['protected'] else ''}): release with "
                     "`pulumi state unprotect`, then drop `old_address: keep`")
    return lines


def _zone_text(g: GatewayDesign, zone: str) -> str:
    walk = traits_of(g.backend).zone_walk_text
    if walk:
        return walk.format(zone=zone)
    if zone == (g.domain or "").rstrip(".").lower():
        where = f"{zone}, the domain itself (it has no parent below the top-level domain)"
    else:
        where = f"{zone}, the domain's parent"
    return (f"{where}; if your zone sits elsewhere, set `gateways: {{{g.name}: {{dns_zone: "
            "...}}` in the backends file")
