"""gpufleet's guardrails: one function per rule, each a pulumi-policy resource validation.

The same functions run inside `pulumi preview --policy-pack policy/` (``__main__.py`` wraps
them in a PolicyPack) and offline on the resources of `gpufleet plan`. A rule reads the
resource's inputs as the engine sends them (camelCase), and its configuration (the pack's
config, or the backends file offline) from ``args.config``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpufleet.policy.exposure import K3S_PORTS, broad_access, bucket_public, public_source
from gpufleet.policy.reading import (
    LAMBDA_INSTANCE,
    LAMBDA_RULESET,
    WORLD,
    _cfg,
    _ingress,
    _is_bastion,
    _is_gateway,
    _labels,
)
from gpufleet.policy.tokens import (
    ADDRESS_TYPES,
    GATEWAY_MACHINES,
    RECORD_TYPES,
    SSH_SOURCES,
    STORED_DATA_TYPES,
    ZONE_TYPES,
)

Report = Callable[[str, str | None], None]
Validate = Callable[[Any, Report], None]

@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    description: str
    level: str  # "mandatory" or "advisory"
    remediation: str
    off: str  # what a user sets to turn it off ("" : the policy config alone)
    validate: Validate

    @property
    def how_off(self) -> str:
        """How to turn the rule down, naming the flag that does it."""
        config = (f"`--policy-config FILE` with {{\"{self.name}\": \"disabled\"}}" if
                  self.level == "advisory" else
                  f"`--policy-config FILE` with {{\"{self.name}\": \"advisory\"}} (or "
                  "\"disabled\")")
        if self.level == "advisory":
            config = f"it only reports (advisory); to silence it, {config}"
        return f"{self.off}, or {config}" if self.off else config


# --- rules ------------------------------------------------------------------------------

def no_world_ingress(args: Any, report: Report) -> None:
    """Nothing gpufleet builds admits the world: dstack opens its gateways' web ports on the
    firewall objects it makes itself."""
    for ports, _proto, sources in _ingress(args):
        open_to_world = [s for s in sources if s in WORLD]
        if not open_to_world:
            continue
        report(f"{args.name} admits {'all ports' if '*' in ports else ', '.join(sorted(ports))}"
               f" from {', '.join(open_to_world)}", args.urn)


def ssh_only_from_allowed(args: Any, report: Report) -> None:
    allowed = set(_cfg(args).get("ssh_cidrs") or []) | set(SSH_SOURCES)
    for ports, _proto, sources in _ingress(args):
        if "22" not in ports and "*" not in ports:
            continue
        if "*" in ports and not any(s in WORLD for s in sources):
            continue  # internal all-traffic rules (own subnets) are the cluster fabric
        bad = [s for s in sources if s not in allowed]
        if "22" in ports and bad:
            report(f"{args.name} admits SSH from {', '.join(bad)}, which is not in ssh_cidrs",
                   args.urn)


def k3s_ports_private(args: Any, report: Report) -> None:
    """k3s's ports (SkyPilot's SSH Node Pools) admit private addresses only: the fleet's own
    nodes; `sky ssh up` reaches the API server through an SSH tunnel."""
    for ports, _proto, sources in _ingress(args):
        hit = sorted(K3S_PORTS & ports, key=int)
        public = [s for s in sources if public_source(str(s))]
        if hit and public:
            report(f"{args.name} admits k3s's port(s) {', '.join(hit)} from "
                   f"{', '.join(public)}", args.urn)


def no_public_ip_on_nodes(args: Any, report: Report) -> None:
    if _cfg(args).get("public_ips") or _is_gateway(args) or _is_bastion(args):
        return
    p, t = args.props, args.resource_type
    public = False
    if t == "aws:ec2/launchTemplate:LaunchTemplate":
        public = any(str(n.get("associatePublicIpAddress")).lower() == "true"
                     for n in p.get("networkInterfaces") or [])
    elif t == "aws:ec2/instance:Instance":
        public = bool(p.get("associatePublicIpAddress"))
    elif t == "gcp:compute/instance:Instance":
        public = any(n.get("accessConfigs") for n in p.get("networkInterfaces") or [])
    elif t == "azure-native:network:NetworkInterface":
        public = any(c.get("publicIPAddress") or c.get("publicIpAddress")
                     for c in p.get("ipConfigurations") or [])
    if public:
        report(f"{args.name} gives a cluster node a public IP", args.urn)


def aws_imdsv2(args: Any, report: Report) -> None:
    if args.resource_type not in ("aws:ec2/launchTemplate:LaunchTemplate",
                                  "aws:ec2/instance:Instance"):
        return
    if "launchTemplate" in args.props:
        return  # the launch template carries the metadata options (checked on its own)
    md = args.props.get("metadataOptions") or {}
    if md.get("httpTokens") != "required":
        report(f"{args.name} does not require IMDSv2 tokens", args.urn)
    hops = md.get("httpPutResponseHopLimit")
    if hops is not None and int(hops) > 2:
        report(f"{args.name} lets metadata responses travel {int(hops)} hops (at most 2)",
               args.urn)


def aws_ebs_encrypted(args: Any, report: Report) -> None:
    p, t = args.props, args.resource_type
    if t == "aws:ec2/launchTemplate:LaunchTemplate":
        for m in p.get("blockDeviceMappings") or []:
            if str((m.get("ebs") or {}).get("encrypted")).lower() != "true":
                report(f"{args.name}: volume {m.get('deviceName')} is not encrypted", args.urn)
    elif t == "aws:ec2/instance:Instance" and "launchTemplate" not in p and \
            not (p.get("rootBlockDevice") or {}).get("encrypted"):
        report(f"{args.name}: the root volume is not encrypted", args.urn)


def aws_cluster_sg_self_only(args: Any, report: Report) -> None:
    if args.resource_type != "aws:ec2/securityGroup:SecurityGroup" or _is_gateway(args):
        return
    for r in args.props.get("ingress") or []:
        if str(r.get("protocol")) == "-1" and (r.get("cidrBlocks") or r.get("securityGroups")):
            report(f"{args.name} admits all traffic from "
                   f"{', '.join([*(r.get('cidrBlocks') or []), *(r.get('securityGroups') or [])])}"
                   "; only the group itself may send everything", args.urn)


def gcp_os_login_or_keys(args: Any, report: Report) -> None:
    if args.resource_type != "gcp:compute/instance:Instance":
        return
    md = args.props.get("metadata") or {}
    if str(md.get("enable-oslogin", "")).upper() != "TRUE" and not md.get("ssh-keys"):
        report(f"{args.name} has neither OS Login nor explicit ssh-keys: project-wide keys "
               "would apply", args.urn)


def gcp_no_default_sa_full_scope(args: Any, report: Report) -> None:
    if args.resource_type != "gcp:compute/instance:Instance" or _cfg(args).get("allow"):
        return
    sa = args.props.get("serviceAccount") or {}
    email = str(sa.get("email") or "")
    if sa and (not email or email.endswith("-compute@developer.gserviceaccount.com")) and \
            any("cloud-platform" in s for s in sa.get("scopes") or []):
        report(f"{args.name} runs as the default compute service account with the "
               "cloud-platform scope", args.urn)


def gcp_serial_port_off(args: Any, report: Report) -> None:
    if args.resource_type != "gcp:compute/instance:Instance":
        return
    md = args.props.get("metadata") or {}
    if str(md.get("serial-port-enable", "")).upper() in ("TRUE", "1"):
        report(f"{args.name} enables the interactive serial console", args.urn)


def azure_password_auth_off(args: Any, report: Report) -> None:
    p, t = args.props, args.resource_type
    if t == "azure-native:compute:VirtualMachine":
        osp = p.get("osProfile") or {}
    elif t == "azure-native:compute:VirtualMachineScaleSet":
        osp = (p.get("virtualMachineProfile") or {}).get("osProfile") or {}
    else:
        return
    if not (osp.get("linuxConfiguration") or {}).get("disablePasswordAuthentication"):
        report(f"{args.name} allows password logins", args.urn)


def azure_nsg_no_allow_any(args: Any, report: Report) -> None:
    if args.resource_type != "azure-native:network:NetworkSecurityGroup":
        return
    for ports, _proto, sources in _ingress(args):
        if "*" in ports and (not sources or any(s in WORLD for s in sources)):
            report(f"{args.name} has an allow-any inbound rule", args.urn)


def lambda_ssh_only(args: Any, report: Report) -> None:
    """A Lambda instance has a public address and no network around it: its ruleset is all
    that stands in front of it, so it opens TCP 22 and nothing else, and every instance
    launches with one (without, Lambda's account-wide global ruleset applies)."""
    if args.resource_type == LAMBDA_RULESET:
        for ports, proto, _sources in _ingress(args):
            if ports != {"22"} or proto != "tcp":
                report(f"{args.name} opens {proto} {', '.join(sorted(ports))}; a Lambda "
                       "ruleset of gpufleet's opens TCP 22 only", args.urn)
    elif args.resource_type == LAMBDA_INSTANCE and not args.props.get("firewall_rulesets"):
        report(f"{args.name} launches without its fleet's firewall ruleset", args.urn)




def gateway_no_instances(args: Any, report: Report) -> None:
    """dstack 0.22.5 creates a gateway's instances and load balancer itself and cannot adopt
    others: one built under a gateway would run nothing and be billed."""
    if args.resource_type in GATEWAY_MACHINES and _is_gateway(args):
        report(f"{args.name}: a gateway builds no instance or load balancer (dstack creates "
               "its own at `dstack apply`)", args.urn)




def _is_gateway_address(args: Any) -> bool:
    """The address a gateway's DNS record points at: an address resource whose parent is
    the gateway component itself. A NAT's address sits in the gateway's network component
    (a private or load-balanced gateway's egress) and no record points at it."""
    chain = str(args.urn).split("::")[2].split("$") if str(args.urn).count("::") >= 3 else []
    return (args.resource_type in ADDRESS_TYPES and len(chain) >= 2
            and chain[-2].startswith("gpufleet:") and chain[-2].endswith(":Gateway"))


def gateway_addresses_protected(args: Any, report: Report) -> None:
    protected = bool(getattr(args.opts, "protect", False))
    if _is_gateway_address(args) and not protected:
        report(f"{args.name}: an address kept from gpufleet's old gateway VM without "
               "`protect`: it would be released at the next update", args.urn)
    if args.resource_type in ZONE_TYPES and not protected:
        report(f"{args.name}: a DNS zone without `protect`", args.urn)




def bucket_access_scoped(args: Any, report: Report) -> None:
    for problem in broad_access(args.resource_type, args.props):
        report(f"{args.name}: {problem}", args.urn)


def storage_private_encrypted_protected(args: Any, report: Report) -> None:
    """Shared filesystems, volumes and buckets: protected from deletion, encrypted at rest
    where the service lets it be turned off, and closed to the internet."""
    t, p = args.resource_type, args.props
    for problem in bucket_public(t, p):
        report(f"{args.name}: {problem}", args.urn)
    if t not in STORED_DATA_TYPES or (t == "gcp:compute/disk:Disk" and "Fleet" in str(args.urn)):
        return
    if not bool(getattr(args.opts, "protect", False)):
        report(f"{args.name}: stored data without `protect`: `pulumi destroy` would delete it",
               args.urn)
    if t in ("aws:efs/fileSystem:FileSystem", "aws:ebs/volume:Volume") and \
            str(p.get("encrypted")).lower() != "true":
        report(f"{args.name} is not encrypted at rest", args.urn)
    if t == "azure-native:storage:StorageAccount":
        rules = p.get("networkRuleSet") or {}
        if rules.get("defaultAction") != "Deny" or p.get("allowBlobPublicAccess") is not False:
            report(f"{args.name}: the storage account is open to public networks (set "
                   "networkRuleSet.defaultAction Deny, allowBlobPublicAccess false)", args.urn)


def dns_ttl(args: Any, report: Report) -> None:
    if args.resource_type not in RECORD_TYPES:
        return
    ttl = args.props.get("ttl")
    if ttl is not None and int(ttl) > 3600:
        report(f"{args.name}: TTL {int(ttl)} s; at most 3600 so a moved address propagates",
               args.urn)


TAGGED_PREFIXES = ("aws:ec2/instance", "aws:ec2/launchTemplate", "aws:ec2/vpc:",
                   "aws:ec2/securityGroup:", "gcp:compute/instance:",
                   "azure-native:compute:VirtualMachine", "azure-native:network:VirtualNetwork")


def ownership_tags(args: Any, report: Report) -> None:
    if not args.resource_type.startswith(TAGGED_PREFIXES):
        return
    labels = {k.replace("_", "-"): v for k, v in _labels(args.props).items()}
    owner = labels.get("gpufleet-fleet") or labels.get("gpufleet-gateway")
    missing = [k for k, v in dict(_cfg(args).get("tags") or {}).items()
               if labels.get(k.lower().replace("_", "-"), labels.get(k)) is None]
    if labels.get("managed-by") != "gpufleet" or not owner:
        report(f"{args.name} lacks the managed-by / gpufleet-fleet (or gpufleet-gateway) "
               "tags", args.urn)
    elif missing:
        report(f"{args.name} lacks the user's tags {', '.join(missing)}", args.urn)


RULES: tuple[Rule, ...] = (
    Rule("no-world-ingress", "No inbound traffic from 0.0.0.0/0 or ::/0 (dstack opens its "
         "gateways' web ports itself)", "mandatory", "remove the rule, or narrow its sources "
         "to known ranges", "", no_world_ingress),
    Rule("ssh-only-from-allowed", "Port 22 only from ssh_cidrs (and Google's IAP range)",
         "mandatory", "list the source in `ssh_cidrs` of the backends file, or remove it",
         "add the range to `ssh_cidrs`", ssh_only_from_allowed),
    Rule("no-public-ip-on-nodes", "Cluster nodes get no public IP unless the backends file "
         "asks for it", "mandatory", "drop the public IP; reach nodes through the bastion, "
         "IAP or SSM", "`public_ips: true` for the backend", no_public_ip_on_nodes),
    Rule("k3s-ports-private", "k3s's ports (a fleet handed to SkyPilot) admit only the "
         "fleet's own private addresses", "mandatory", "open 6443, 10250, 2379-2380 and 8472 "
         "among the fleet's nodes only; SkyPilot tunnels to the API server over SSH", "",
         k3s_ports_private),
    Rule("aws-imdsv2", "AWS instances require IMDSv2 tokens, hop limit at most 2",
         "mandatory", "set metadata_options http_tokens=required, hop limit <= 2",
         "", aws_imdsv2),
    Rule("aws-ebs-encrypted", "AWS volumes are encrypted", "mandatory",
         "set `encrypted: true` on every EBS volume", "",
         aws_ebs_encrypted),
    Rule("aws-cluster-sg-self-only", "A fleet's security group admits all traffic only from "
         "itself", "mandatory", "keep the all-traffic rule `self: true`; open single ports "
         "to other groups", "", aws_cluster_sg_self_only),
    Rule("gcp-os-login-or-keys", "GCP instances use OS Login or set their SSH keys "
         "explicitly", "mandatory", "set `enable-oslogin: TRUE` or `ssh-keys` metadata",
         "", gcp_os_login_or_keys),
    Rule("gcp-no-default-sa-full-scope", "No default compute service account with the "
         "cloud-platform scope", "advisory", "set `vm_service_account` to a dedicated "
         "account", "`vm_service_account` in the backends file, or config allow: true",
         gcp_no_default_sa_full_scope),
    Rule("gcp-serial-port-off", "The interactive serial console stays off", "mandatory",
         "remove `serial-port-enable` from the metadata", "",
         gcp_serial_port_off),
    Rule("azure-password-auth-off", "Azure VMs and scale sets disable password logins",
         "mandatory", "set disable_password_authentication: true and an SSH key",
         "", azure_password_auth_off),
    Rule("azure-nsg-no-allow-any", "Azure NSGs have no allow-any inbound rule", "mandatory",
         "name the ports and sources of every inbound rule", "",
         azure_nsg_no_allow_any),
    Rule("lambda-ssh-only", "Lambda instances launch with their fleet's firewall ruleset, "
         "which opens TCP 22 only", "mandatory", "keep the ruleset gpufleet makes; open "
         "nothing else on a public instance", "", lambda_ssh_only),
    Rule("gateway-addresses-protected", "Addresses kept from gpufleet's old gateway VMs "
         "(`old_address: keep`), and created DNS zones, are protected", "mandatory",
         "remove `protect_address: false` from the gateway's entry in the backends file "
         "(`gateways: {<name>: {protect_address: ...}}`); protected is the default",
         "`protect_address: false` for the gateway in the backends file, and this rule "
         "turned down",
         gateway_addresses_protected),
    Rule("gateway-no-instances", "A gateway builds no instance or load balancer: dstack "
         "creates its own at `dstack apply` and cannot adopt one", "mandatory",
         "build the gateway's network only; dstack makes the instances", "",
         gateway_no_instances),
    Rule("storage-private-encrypted-protected", "Shared filesystems, volumes and buckets are "
         "protected from deletion, encrypted at rest and closed to public access",
         "mandatory", "keep `protect`, `encrypted: true` and the storage account's deny-by-"
         "default network rules gpufleet sets", "", storage_private_encrypted_protected),
    Rule("bucket-access-scoped", "Bucket grants read, or read and write, the mounted "
         "buckets only: no wildcard, no admin role, no public member, R2 tokens scoped to "
         "their bucket", "mandatory", "keep the grants gpufleet makes for each mount", "",
         bucket_access_scoped),
    Rule("dns-ttl", "Wildcard DNS records have a TTL of at most 3600 s", "advisory",
         "lower the record's TTL", "", dns_ttl),
    Rule("ownership-tags", "Every taggable resource carries managed-by, the fleet or gateway "
         "tag and the user's tags", "advisory", "keep the tags gpufleet sets; add missing "
         "ones in `tags:`", "", ownership_tags),
)


def rule_levels() -> dict[str, str]:
    """Each rule of the pack and its own level (no pulumi-policy needed to read them)."""
    return {r.name: r.level for r in RULES}


def resource_policies(levels: Mapping[str, str] | None = None) -> list[Any]:
    """The rules as pulumi-policy ResourceValidationPolicy objects (for the pack)."""
    from pulumi_policy import EnforcementLevel, ResourceValidationPolicy

    levels = levels or {}
    return [ResourceValidationPolicy(
        name=r.name, description=r.description, validate=r.validate,
        enforcement_level=EnforcementLevel(levels.get(r.name, r.level)),
        remediation_steps=r.remediation) for r in RULES]
