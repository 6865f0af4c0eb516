"""AWS gateways: a GatewayDesign -> the network dstack's gateway lands in (a VPC of its own, or
subnets in the shared fleet's VPC), the `*.<domain>` record in Route 53 and, in a migration,
the Elastic IPs gpufleet's own gateway VMs had. dstack creates the instances, their security
group and the load balancer itself at `dstack apply`."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from gpufleet.compile import DIGEST_OUTPUT, DnsRecordDesign, GatewayDesign, input_digest, naming

from .network import Network, tags


class Gateway(pulumi.ComponentResource):
    """Where dstack's gateway lands and the record that follows its address."""

    def __init__(self, plan: GatewayDesign, opts: pulumi.ResourceOptions,
                 joins: Network | None = None) -> None:
        super().__init__("gpufleet:aws:Gateway", plan.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # its own VPC, or its subnets in the shared fleet's (an address block of its own
        # associated with that VPC, on the fleet's route tables)
        self.network = Network(plan.network, plan, child, joins=joins)
        self.network_id: pulumi.Output[str] = self.network.vpc_id
        self.network_name: str | None = None if joins else plan.network.name  # its Name tag
        self.subnet_ids = dict(self.network.subnet_ids)
        keep = pulumi.ResourceOptions(parent=self, protect=plan.protect_address)
        # gpufleet's own gateway VMs' addresses, as they were made: kept, never re-created
        self.old_addresses = [aws.ec2.Eip(name, domain="vpc", tags=tags(plan, name), opts=keep)
                              .public_ip for name in plan.old_addresses]
        if plan.record is not None:
            self._record(plan, plan.record)
        self.register_outputs({"vpc": self.network_id, "subnets": self.subnet_ids,
                               "record": plan.record.fqdn if plan.record else None,
                               DIGEST_OUTPUT: input_digest(plan)})

    def _record(self, plan: GatewayDesign, rec: DnsRecordDesign) -> None:
        """The zone (created, protected, or looked up) and, once dstack's gateway is synced,
        the record: A to its replicas' addresses, an alias of its load balancer, or CNAME."""
        opts = pulumi.ResourceOptions(parent=self, delete_before_replace=True)
        zone_id: pulumi.Output[str]
        if rec.create_zone:
            vpcs = [aws.route53.ZoneVpcArgs(vpc_id=self.network_id)] if rec.private else None
            zone = aws.route53.Zone(naming.child(plan.name, "zone"), name=rec.zone, vpcs=vpcs,
                                    tags=tags(plan, rec.zone),
                                    opts=pulumi.ResourceOptions(parent=self, protect=True))
            zone_id = zone.zone_id
            opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(deleted_with=zone))
        elif rec.pending:
            return  # nothing to look the zone up for yet
        else:
            zone_id = aws.route53.get_zone_output(name=rec.zone, private_zone=rec.private,
                                                  opts=pulumi.InvokeOptions(parent=self)).zone_id
        if rec.pending:
            return
        if rec.record_type == "ALIAS":
            # an Application Load Balancer's canonical shared zone in the region
            # (docs.aws.amazon.com/general/latest/gr/elb.html)
            lb_zone = aws.lb.get_hosted_zone_id_output(
                region=plan.region, load_balancer_type="application",
                opts=pulumi.InvokeOptions(parent=self))
            aws.route53.Record(rec.name, zone_id=zone_id, name=rec.fqdn, type="A",
                               aliases=[aws.route53.RecordAliasArgs(
                                   name=rec.targets[0], zone_id=lb_zone.id,
                                   evaluate_target_health=True)], opts=opts)
            return
        aws.route53.Record(rec.name, zone_id=zone_id, name=rec.fqdn, type=rec.record_type,
                           ttl=rec.ttl, records=list(rec.targets), opts=opts)
