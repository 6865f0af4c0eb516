"""How the rules read a resource as the policy engine hands it over (camelCase inputs): its
owner (gateway, bastion), labels, the rule's config, and the inbound rules of every
firewall-like resource gpufleet makes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

WORLD = ("0.0.0.0/0", "::/0", "*", "Internet", "Any", "any")
# Lambda Cloud's resources, made by gpufleet's dynamic providers (components/lambda_/)
LAMBDA_RULESET = "pulumi-python:dynamic/lambda:FirewallRuleset"
LAMBDA_INSTANCE = "pulumi-python:dynamic/lambda:Instance"


def _is_gateway(args: Any) -> bool:
    """A gateway's resource: by its tags, or by a gateway component in its URN's type chain."""
    labels = _labels(args.props)
    chain = str(args.urn).split("::")[2] if str(args.urn).count("::") >= 3 else ""
    return "gpufleet-gateway" in labels or "gpufleet_gateway" in labels or any(
        t.startswith("gpufleet:") and t.endswith(":Gateway") for t in chain.split("$"))


def _is_bastion(args: Any) -> bool:
    return "-bastion" in str(args.name)


def _labels(props: Mapping[str, Any]) -> dict[str, Any]:
    for key in ("tags", "labels"):
        value = props.get(key)
        if isinstance(value, Mapping):
            return dict(value)
    return {}


def _cfg(args: Any) -> Mapping[str, Any]:
    """The rule's configuration (pulumi-policy: the pack config of this policy)."""
    get = getattr(args, "get_config", None)
    config = get() if callable(get) else None
    return config if isinstance(config, Mapping) else {}


def _ports(spec: Any) -> set[str]:
    out: set[str] = set()
    for p in spec if isinstance(spec, list) else [spec]:
        text = str(p)
        if "-" in text:
            lo, _, hi = text.partition("-")
            if lo.isdigit() and hi.isdigit() and int(hi) - int(lo) < 1024:
                out.update(str(i) for i in range(int(lo), int(hi) + 1))
            else:
                out.add("*")
        else:
            out.add(text)
    return out


def _ingress(args: Any) -> Iterable[tuple[set[str], str, list[str]]]:
    """(ports, protocol, sources) of every inbound allow rule of a firewall-like resource."""
    p, t = args.props, args.resource_type
    if t == "aws:ec2/securityGroup:SecurityGroup":
        for r in p.get("ingress") or []:
            lo, hi = int(r.get("fromPort") or 0), int(r.get("toPort") or 0)
            proto = str(r.get("protocol", ""))
            ports = {"*"} if proto == "-1" or hi - lo > 1024 else \
                {str(i) for i in range(lo, hi + 1)}
            yield ports, proto, [*(r.get("cidrBlocks") or []), *(r.get("ipv6CidrBlocks") or [])]
    elif t == "aws:ec2/securityGroupRule:SecurityGroupRule" and p.get("type") == "ingress":
        lo, hi = int(p.get("fromPort") or 0), int(p.get("toPort") or 0)
        yield ({str(i) for i in range(lo, hi + 1)} if hi - lo <= 1024 else {"*"},
               str(p.get("protocol")), [*(p.get("cidrBlocks") or [])])
    elif t == "gcp:compute/firewall:Firewall" and p.get("direction", "INGRESS") == "INGRESS":
        for a in p.get("allows") or []:
            ports = _ports(a["ports"]) if a.get("ports") else {"*"}
            yield ports, str(a.get("protocol")), list(p.get("sourceRanges") or [])
    elif t == LAMBDA_RULESET:  # every rule of a Lambda ruleset is an inbound allow
        for r in p.get("rules") or []:
            lo, hi = [*(r.get("port_range") or []), 0, 65535][:2]
            proto = str(r.get("protocol", ""))
            ports = {"*"} if proto == "all" or int(hi) - int(lo) > 1024 else \
                {str(i) for i in range(int(lo), int(hi) + 1)}
            yield ports, proto, [str(r.get("source_network", ""))]
    elif t == "azure-native:network:NetworkSecurityGroup":
        for r in p.get("securityRules") or []:
            if r.get("direction") != "Inbound" or r.get("access") != "Allow":
                continue
            ports = _ports(r.get("destinationPortRanges") or r.get("destinationPortRange")
                           or "*")
            sources = list(r.get("sourceAddressPrefixes") or [])
            if r.get("sourceAddressPrefix"):
                sources.append(r["sourceAddressPrefix"])
            yield ports, str(r.get("protocol")), sources
