"""What makes stored data or a port public, for the pack's rules: each bucket store's public
access switches, and the private address ranges k3s's ports may admit. Pure."""

from __future__ import annotations

import ipaddress
from typing import Any

# k3s's inbound ports (docs.k3s.io, "Inbound Rules for K3s Nodes"): what a fleet handed to
# SkyPilot's SSH Node Pools opens among its own nodes, and never to anything public
K3S_PORTS = frozenset({"6443", "10250", "2379", "2380", "8472"})


# the private ranges (RFC 1918, RFC 6598's shared space, RFC 4193's unique local): a fleet's
# own subnets come from them; anything else reaches the node from outside its networks
_PRIVATE = tuple(ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"))


def public_source(source: str) -> bool:
    try:
        net = ipaddress.ip_network(source, strict=False)
    except ValueError:  # a service tag: only the Internet ones are public
        return source.lower() in ("*", "internet", "any")
    return not any(net.version == p.version and net.subnet_of(p)  # type: ignore[arg-type]
                   for p in _PRIVATE)


# a bucket's own settings that would make it public (each store's public access switches)
_PUBLIC_ACCESS_BLOCK = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls",
                        "restrictPublicBuckets")


def bucket_public(t: str, p: Any) -> list[str]:
    if t == "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock":
        off = [k for k in _PUBLIC_ACCESS_BLOCK if p.get(k) is not True]
        return [f"the bucket's public access is not blocked ({', '.join(off)} off)"] if off \
            else []
    if t == "aws:s3/bucket:Bucket" and str(p.get("acl") or "private") != "private":
        return [f"the bucket's ACL is {p.get('acl')}"]
    if t == "gcp:storage/bucket:Bucket" and (p.get("publicAccessPrevention") != "enforced" or
                                            p.get("uniformBucketLevelAccess") is not True):
        return ["the bucket does not enforce public access prevention with uniform access"]
    if t == "azure-native:storage:BlobContainer" and \
            str(p.get("publicAccess") or "None") != "None":
        return [f"the container admits anonymous reads ({p.get('publicAccess')})"]
    return []
