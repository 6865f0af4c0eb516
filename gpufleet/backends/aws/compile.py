"""AWS recipes (cloud-recipes.md §1): VPC, subnets, security group, EFA layout, placement. Pure.

EFA follows dstack's rules: only `placement: cluster` fleets get it; a node gets as many EFA
interfaces as its type allows (catalog network facts) when it has no public IP, and one
otherwise. The layout, for a private cluster:

| instance type             | EFA | NICs | layout                                       |
|---------------------------|-----|------|----------------------------------------------|
| p5.48xlarge, p5e.48xlarge | 32  | 32   | `efa` on cards 0, 4, ..., 28; `efa-only` rest |
| p5en.48xlarge             | 16  | 16   | 1 `efa` + 15 `efa-only`                       |
| p6-b200.48xlarge          | 8   | 8    | 1 `efa` + 7 `efa-only`                        |
| p6-b300.48xlarge          | 16  | 17   | ENA primary + 16 `efa-only` on cards 1-16     |
| p4d/p4de.24xlarge         | 4   | 4    | 1 `efa` + 3 `efa-only`                        |
| g6e.48xlarge / 24xlarge   | 4/2 | 4/2  | 1 `efa` + 3/1 `efa-only`                      |
| g5/g6 8xlarge+, g6e 8-16x, p3dn | 1 | 1 | one `efa` interface                       |
| everything else           | 0   | 1    | one ENA interface                             |

A type whose network card 0 takes no EFA (p6-b300) has more NICs than EFA interfaces in the
catalog's network facts; its primary stays ENA-only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from ipaddress import IPv4Network
from typing import Any

from gpufleet.backends.aws import TRAITS
from gpufleet.codes import C001, C002, C005
from gpufleet.compile import gateway, naming
from gpufleet.compile.cidr import pack, usable_hosts
from gpufleet.compile.design import (
    BucketMountDesign,
    FirewallRule,
    FleetDesign,
    GatewayDesign,
    NetworkDesign,
    NicDesign,
    PlacementDesign,
    SubnetDesign,
    options_of,
)
from gpufleet.compile.hostsetup import host_setup_plan
from gpufleet.compile.seam import (
    Planned,
    access_method,
    access_plan,
    common_fields,
    merged_tags,
    node_ssh_rules,
    public_ips,
)
from gpufleet.diagnostics import Diagnostic
from gpufleet.input import (
    AccessSpec,
    BackendConfig,
    FleetSpec,
    GatewaySpec,
    ReservationSpec,
    SyncedGateway,
)
from gpufleet.offers import Offer


@dataclass(frozen=True, slots=True)
class AwsOptions:
    """What only AWS fleets carry: the AMI lookup, purchase market and resource names."""

    ami_name: str
    ami_owner: str
    security_group: str
    launch_template: str
    market: str | None = None  # "spot", "capacity-block" or None (on-demand)
    eip_per_node: bool = False  # public multi-NIC nodes: an Elastic IP each (dstack#3865)
    iam_instance_profile: str | None = None

RESERVED_PER_SUBNET = 5  # AWS keeps 5 addresses of every subnet
NODE_PREFIX, PUBLIC_PREFIX = 18, 24
# AWS Deep Learning Base AMI with the NVIDIA driver and the EFA installer (dstack's choice
# of family); `os_images` in the backends file overrides it, as in dstack.
DEFAULT_AMI = {"name": "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) *",
               "owner": "amazon"}
DEFAULT_CPU_AMI = {"name": "ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-*",
                   "owner": "099720109477"}
EVERY_FOURTH = ("p5.48xlarge", "p5e.48xlarge")  # AWS: "EFA configuration for P5 and P5e"


def efa_count(offer: Offer, cluster: bool) -> int:
    """EFA only in a cluster (dstack's rule), and then the type's maximum, public or not.

    EC2 gives no public IPv4 address at launch to an instance with several network
    interfaces, which is why dstack cuts public nodes to one EFA; here a public node keeps
    every card and gets an Elastic IP on its primary interface instead (dstack#3865; EC2
    User Guide, "Amazon EC2 instance IP addressing": "You can't auto-assign a public IPv4
    address if you specify more than one network interface")."""
    if offer.rdma != "efa" or offer.rdma_interfaces <= 0 or not cluster:
        return 0
    return offer.rdma_interfaces


def efa_layout(instance_type: str, efa_interfaces: int,
               card0_efa: bool = True) -> list[tuple[int, int, str]]:
    """(network card, device index, interface type) for every interface of one node: the
    primary on card 0 (device 0), EFA-only interfaces on cards 1..N-1 at device index 1."""
    if efa_interfaces <= 0:
        return [(0, 0, "interface")]
    if not card0_efa:
        return [(0, 0, "interface")] + [(i, 1, "efa-only") for i in range(1, efa_interfaces + 1)]
    if instance_type in EVERY_FOURTH:
        return [(i, 0 if i == 0 else 1, "efa" if i % 4 == 0 else "efa-only")
                for i in range(efa_interfaces)]
    return [(0, 0, "efa")] + [(i, 1, "efa-only") for i in range(1, efa_interfaces)]


def is_capacity_block(fleet: FleetSpec, config: BackendConfig | None,
                      reservation: ReservationSpec | None) -> bool:
    """The fleet's reservation is a Capacity Block: declared so, or listed in the backend's
    `capacity_blocks`."""
    if reservation is not None and reservation.kind == "capacity-block":
        return True
    blocks = (config.get("capacity_blocks") or ()) if config is not None else ()
    return bool(fleet.reservation) and fleet.reservation in blocks


class AwsBackend:
    name = "aws"
    traits = TRAITS
    fleet_prefix = 16

    def design_fleet(self, fleet: FleetSpec, offer: Offer, block: IPv4Network,
                     config: BackendConfig | None, access: AccessSpec,
                     reservation: ReservationSpec | None = None) -> Planned:
        public = public_ips(config)
        efa = efa_count(offer, fleet.is_cluster)
        layout = efa_layout(offer.instance_type, efa,
                            card0_efa=offer.nics <= offer.rdma_interfaces)
        block_kind = is_capacity_block(fleet, config, reservation)
        diags = self.check(fleet, offer, config, len(layout), block_kind)
        if any(d.is_error for d in diags):
            return Planned(None, tuple(diags))
        method = access_method("aws", public, access)
        network = self.network(fleet, offer, block, config, public, method)
        node_subnet = network.subnets[0].name
        bastion_subnet = next((s.name for s in network.subnets if s.public), node_subnet)
        way_in, more = access_plan(fleet, "aws", method, access, config, bastion_subnet,
                                   offer.region)
        diags += more
        nics = tuple(NicDesign("main", node_subnet, kind, card, device,
                               public_ip=public and card == 0 and device == 0)
                     for card, device, kind in layout)
        cfg = config.settings if config is not None else {}
        images = cfg.get("os_images") or {}
        ami = images.get("nvidia" if offer.gpu_count else "cpu") or (
            DEFAULT_AMI if offer.gpu_count else DEFAULT_CPU_AMI)
        market = "capacity-block" if block_kind else "spot" if offer.spot else None
        tags = merged_tags(fleet, config)
        plan = FleetDesign(
            **common_fields(fleet, offer, None) | {"rdma": "efa" if efa else "none",
                                                    "rdma_interfaces": efa},
            zone=offer.zone, networks=(network,),
            nics=nics, disk_type="gp3",
            image=f"{ami.get('owner', 'amazon')}/{ami.get('name', '')}", public_ip=public,
            placement=PlacementDesign(naming.child(fleet.name, "placement"), "cluster",
                                      existing=reservation.placement_group
                                      if reservation is not None else None)
            if fleet.is_cluster else None,
            reservation=fleet.reservation, labels=tags,
            host_setup=host_setup_plan("aws", cfg, bool(offer.gpu_count), not images.get(
                "nvidia" if offer.gpu_count else "cpu"), way_in.user),
            options=AwsOptions(
                ami_name=str(ami["name"]), ami_owner=str(ami.get("owner", "amazon")),
                security_group=naming.child(fleet.name, "sg"),
                launch_template=naming.child(fleet.name, "lt"), market=market,
                eip_per_node=public and len(nics) > 1,
                iam_instance_profile=cfg.get("iam_instance_profile")),
            access=way_in,
        )
        return Planned(plan, tuple(diags))

    def check(self, fleet: FleetSpec, offer: Offer, config: BackendConfig | None,
              interfaces: int, block_kind: bool = False) -> list[Diagnostic]:
        diags: list[Diagnostic] = []
        capacity = usable_hosts(IPv4Network(f"10.0.0.0/{NODE_PREFIX}"), RESERVED_PER_SUBNET)
        wanted = fleet.nodes.max if fleet.nodes.max is not None else fleet.nodes.target
        if wanted * interfaces > capacity:
            diags.append(fleet.origin.at("nodes", C001, f"fleet '{fleet.name}' wants up to "
                                 f"{wanted} nodes x {interfaces} interfaces, but its "
                                 f"/{NODE_PREFIX} subnet holds {capacity} addresses",
                                 "split the fleet into several fleets"))
        if block_kind:
            if fleet.nodes.max is None or fleet.nodes.min != fleet.nodes.max:
                diags.append(fleet.origin.at("nodes", C005, "a Capacity Block has a fixed "
                                     "size: `nodes` must be a single number",
                                     "set `nodes: N` to the size of the block"))
            if offer.spot:
                diags.append(fleet.origin.at("reservation", C002, "a Capacity Block is not "
                                     "spot capacity", "set `spot_policy: on-demand`"))
        elif fleet.reservation and offer.spot:
            diags.append(fleet.origin.at("reservation", C002, "a Capacity Reservation is "
                                 "used by on-demand instances, but the chosen offer is spot",
                                 "set `spot_policy: on-demand` with `reservation`"))
        return diags

    def network(self, fleet: FleetSpec, offer: Offer, block: IPv4Network,
                config: BackendConfig | None, public: bool, method: str) -> NetworkDesign:
        name = fleet.name
        cfg = config.settings if config is not None else {}
        existing = (cfg.get("vpc_ids") or {}).get(offer.region) or cfg.get("vpc_name")
        if existing is None and cfg.get("default_vpcs") is True:
            existing = "default"
        ranges = pack(block, [("nodes", NODE_PREFIX), ("public", PUBLIC_PREFIX)])
        subnets = [SubnetDesign(naming.child(name, "subnet"), str(ranges["nodes"]), offer.region,
                                offer.zone, public=public,
                                existing="lookup" if existing else None)]
        if not public and not existing:
            # The NAT gateway lives in a small public subnet of the same AZ.
            subnets.append(SubnetDesign(naming.child(name, "public"), str(ranges["public"]),
                                        offer.region, offer.zone, public=True))
        rules = (FirewallRule(naming.child(name, "self"), "all traffic within the fleet's "
                              "security group (EFA needs it both ways)", "all", from_self=True),
                 *node_ssh_rules(name, config, method))
        return NetworkDesign("main", naming.child(name, "vpc"), tuple(subnets),
                             cidr=None if existing else str(block), existing=existing,
                             firewall=rules, nat=not public and not existing)


    def billed_addresses(self, plan: FleetDesign) -> bool:
        """Multi-NIC nodes get an Elastic IP each."""
        return options_of(plan, AwsOptions).eip_per_node

    def design_gateway(self, gw: GatewaySpec, block: IPv4Network, config: BackendConfig | None,
                     joined: FleetDesign | None, synced: SyncedGateway | None
                     ) -> tuple[GatewayDesign | None, list[Diagnostic]]:
        """dstack puts a gateway's instances in a public subnet of the VPC its backend config
        names (a private gateway: a subnet whose default route goes to a NAT gateway), and
        its load balancer in one such subnet per AZ, refusing fewer than two AZs (dstack
        0.22.5: core/backends/aws/compute.py, create_gateway_replica and
        create_gateway_load_balancer). So: two such subnets in two AZs, in a VPC of the
        gateway's own, or in the shared fleet's VPC (a CIDR block of the gateway's own
        associated with it, routed through the fleet's internet gateway or NAT)."""
        diags: list[Diagnostic] = []
        dns = gateway.record(gw, diags, synced)
        r = gateway.ranges(block)
        subnets = [SubnetDesign(naming.child(gw.name, "subnet", i), str(r[k]), gw.region,
                                public=gw.public_ip, zone_index=i)
                   for i, k in enumerate(("a", "b"))]
        nat = False
        if not gw.public_ip and joined is None:  # a NAT gateway of its own, in a public subnet
            subnets.append(SubnetDesign(naming.child(gw.name, "public"), str(r["nat"]),
                                        gw.region, public=True, zone_index=0))
            nat = True
        elif not gw.public_ip and joined is not None and not joined.network("main").nat:
            diags.append(gateway.no_nat(gw, joined))
        # gpufleet's own gateway VMs had an Elastic IP each (none behind an ALB)
        old = gateway.old_address_names(gw) if gw.public_ip and not gw.behind_load_balancer \
            else ()
        layout = gateway.GatewayLayout(tuple(subnets), nat, old)
        return gateway.build(gw, block, config, layout, dns, joined, diags)


BACKEND = AwsBackend()


def bucket_policy(mounts: Sequence[BucketMountDesign]) -> str:
    """The nodes' IAM policy for the buckets they mount, each read-only or read-write as the
    mount says: what Mountpoint for Amazon S3 needs (docs.aws.amazon.com/AmazonS3/latest/
    userguide/mountpoint-installation.html, "Configure ... permissions": s3:ListBucket on the
    bucket, s3:GetObject - and to write s3:PutObject, s3:DeleteObject,
    s3:AbortMultipartUpload - on its objects); a directory bucket takes
    s3express:CreateSession instead, ReadOnly sessions for a read-only mount
    (docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-security-iam.html)."""
    statements: list[dict[str, Any]] = []
    for m in mounts:
        if m.secret is not None:  # R2: its credentials in Secrets Manager, read, nothing else
            # (a secret's ARN ends in six random characters: docs.aws.amazon.com/
            # secretsmanager/latest/userguide/auth-and-access_iam-policies.html)
            statements.append({"Effect": "Allow", "Action": "secretsmanager:GetSecretValue",
                               "Resource": f"arn:aws:secretsmanager:{m.secret_where}:*:"
                                           f"secret:{m.secret}-??????"})
            continue
        if m.zonal:
            statement: dict[str, Any] = {
                "Effect": "Allow", "Action": "s3express:CreateSession",
                "Resource": f"arn:aws:s3express:{m.region}:*:bucket/{m.bucket}"}
            if m.read_only:
                statement["Condition"] = {"StringEquals": {"s3express:SessionMode": "ReadOnly"}}
            statements.append(statement)
            continue
        statements.append({"Effect": "Allow", "Action": "s3:ListBucket",
                           "Resource": f"arn:aws:s3:::{m.bucket}"})
        actions = ["s3:GetObject"] if m.read_only else [
            "s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]
        statements.append({"Effect": "Allow", "Action": actions,
                           "Resource": f"arn:aws:s3:::{m.bucket}/*"})
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, sort_keys=True)
