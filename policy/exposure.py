"""What makes stored data or a port public, for the pack's rules: each bucket store's public
access switches, and the private address ranges k3s's ports may admit. Pure."""

from __future__ import annotations

import ipaddress
import json
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


# --- bucket access: what a mounting fleet's grants may be (read, or read and write, on the
# buckets it mounts, and the secret holding an R2 mount's credentials) -------------------
_WIDE_ACTIONS = frozenset({"*", "s3:*", "s3express:*", "secretsmanager:*"})
_WIDE_RESOURCES = frozenset({"*", "arn:aws:s3:::*", "arn:aws:s3:::*/*"})
# Google's predefined roles that administer a bucket or secret rather than use it
# (cloud.google.com/storage/docs/access-control/iam-roles, .../secret-manager/docs/
# access-control)
_GCP_ADMIN = frozenset({"roles/owner", "roles/editor", "roles/storage.admin",
                        "roles/storage.objectAdmin", "roles/secretmanager.admin"})
_PUBLIC_MEMBERS = frozenset({"allUsers", "allAuthenticatedUsers"})
# Azure's built-in roles above a mount's data roles (learn.microsoft.com/azure/
# role-based-access-control/built-in-roles)
_AZURE_ADMIN = {"8e3af657-a8ff-443c-a75c-2fe8c4bcb635": "Owner",
                "b24988ac-6180-42a0-ab88-20f7382dd24c": "Contributor",
                "b7e6dc6d-f1e8-4753-8033-0f276bb0955b": "Storage Blob Data Owner",
                "00482a5a-887f-4fb3-b363-3b7fe8e74483": "Key Vault Administrator",
                "b86a8fe4-44ce-4948-aee5-eccb2c155cd7": "Key Vault Secrets Officer"}
_R2_BUCKET = "com.cloudflare.edge.r2.bucket."


def _listed(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _aws_policy(doc: Any) -> list[str]:
    try:
        statements = _listed(json.loads(doc).get("Statement")) if isinstance(doc, str) else []
    except (ValueError, AttributeError):
        return ["the role policy is not readable JSON"]
    out = []
    for s in statements:
        if not isinstance(s, dict) or s.get("Effect") != "Allow":
            continue
        actions = {str(a) for a in _listed(s.get("Action"))}
        resources = {str(r) for r in _listed(s.get("Resource"))}
        wide = sorted(actions & _WIDE_ACTIONS) + sorted(resources & _WIDE_RESOURCES) + sorted(
            r for r in resources if r.startswith("arn:aws:secretsmanager:")
            and r.rsplit(":secret:", 1)[-1].startswith("*"))
        if wide:
            out.append(f"the role policy allows {', '.join(wide)}: not scoped to the "
                       "mounted buckets")
    return out


def _r2_token(policies: Any) -> list[str]:
    from gpufleet.objectstores import R2_READ_GROUP, R2_WRITE_GROUP

    out = []
    for policy in _listed(policies):
        if not isinstance(policy, dict):
            continue
        try:
            resources = json.loads(policy.get("resources") or "{}")
        except ValueError:
            resources = {"?": "?"}
        keys = list(resources) if isinstance(resources, dict) else ["?"]
        if not keys or any(not k.startswith(_R2_BUCKET) or "*" in k for k in keys):
            out.append("the token is not scoped to named R2 buckets")
        groups = {str(g.get("id")) for g in _listed(policy.get("permissionGroups"))
                  if isinstance(g, dict)}
        if groups - {R2_READ_GROUP, R2_WRITE_GROUP}:
            out.append("the token carries permissions beyond reading and writing objects")
    return out


def broad_access(t: str, p: Any) -> list[str]:
    """What makes a grant wider than a bucket mount needs: a wildcard, an admin role, a
    public member, or a token not scoped to its bucket."""
    if t == "aws:iam/rolePolicy:RolePolicy":
        return _aws_policy(p.get("policy"))
    if t in ("gcp:storage/bucketIAMMember:BucketIAMMember",
             "gcp:secretmanager/secretIamMember:SecretIamMember"):
        member, role = str(p.get("member") or ""), str(p.get("role") or "")
        return [f"the grant names {x}" for x in (member, role)
                if x in _PUBLIC_MEMBERS or x in _GCP_ADMIN]
    if t == "azure-native:authorization:RoleAssignment":
        role = str(p.get("roleDefinitionId") or "").rsplit("/", 1)[-1]
        return [f"the grant gives {_AZURE_ADMIN[role]}"] if role in _AZURE_ADMIN else []
    if t == "cloudflare:index/accountToken:AccountToken":
        return _r2_token(p.get("policies"))
    return []
