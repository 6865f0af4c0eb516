"""AWS gateways: a GatewayPlan -> network, one Elastic IP (or fixed private ENI) per replica
as its own protected resource, the instances, an ALB (`load_balancer: {type: alb}` or ACM)
and the `*.<domain>` record."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from gpufleet.backends.aws import GATEWAY
from gpufleet.compile import (
    DIGEST_OUTPUT,
    DnsRecordPlan,
    GatewayPlan,
    input_digest,
    naming,
)

from .network import Network, tags


class Gateway(pulumi.ComponentResource):
    """A gateway: network, one Elastic IP (or fixed private ENI) per replica as its own
    protected resource, the instances, an ALB for ACM, and the `*.<domain>` record."""

    def __init__(self, plan: GatewayPlan, opts: pulumi.ResourceOptions) -> None:
        super().__init__("gpufleet:aws:Gateway", plan.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        keep = pulumi.ResourceOptions(parent=self, protect=plan.protect_address)
        self.network = Network(plan.network, plan, child)
        subnets = [self.network.subnet_ids[s.name] for s in plan.network.subnets
                   if s.public == plan.public][:2]
        user, image = plan.image.split("/", 1)
        ami = aws.ec2.get_ami_output(most_recent=True, owners=[user],
                                     filters=[aws.ec2.GetAmiFilterArgs(name="name",
                                                                       values=[image])],
                                     opts=pulumi.InvokeOptions(parent=self))
        sg = self.network.sg.id
        self.addresses: list[pulumi.Output[str]] = []
        self.instances = []
        if plan.load_balancer:
            self._behind_load_balancer(plan, ami.id, sg, child)
        addressed = [] if plan.load_balancer else list(zip(plan.address_names,
                                                            plan.instance_names, strict=True))
        for i, (addr, vm) in enumerate(addressed):
            subnet = subnets[i % len(subnets)]
            if plan.public:
                eip = aws.ec2.Eip(addr, domain="vpc", tags=tags(plan, addr), opts=keep)
                inst = _gateway_vm(vm, plan, ami.id, child, subnet_id=subnet,
                                   vpc_security_group_ids=[sg])
                aws.ec2.EipAssociation(naming.child(addr, "assoc"),
                                       allocation_id=eip.allocation_id, instance_id=inst.id,
                                       opts=child)
                self.addresses.append(eip.public_ip)
            else:
                eni = aws.ec2.NetworkInterface(addr, subnet_id=subnet, security_groups=[sg],
                                               tags=tags(plan, addr), opts=keep)
                inst = _gateway_vm(vm, plan, ami.id, child, network_interfaces=[
                    aws.ec2.InstanceNetworkInterfaceArgs(network_interface_id=eni.id,
                                                         device_index=0)])
                self.addresses.append(eni.private_ip)
            self.instances.append(inst)
        self.alb = None
        if plan.load_balancer:
            assert self.network.alb_sg is not None
            self.alb = self._load_balancer(plan, subnets, self.network.alb_sg.id, child)
        if plan.record is not None:
            self._record(plan, plan.record)
        self.register_outputs({"addresses": self.addresses,
                               "record": plan.record.fqdn if plan.record else None,
                               DIGEST_OUTPUT: input_digest(plan)})

    def _behind_load_balancer(self, plan: GatewayPlan, ami: pulumi.Output[str],
                              sg: pulumi.Output[str], child: pulumi.ResourceOptions) -> None:
        """Behind an ALB (TLS, if any, ends there): the instances get no address of their own
        and sit in private subnets (egress through the NAT), reachable on port 80 from the
        ALB only."""
        private = [self.network.subnet_ids[s.name] for s in plan.network.subnets
                   if not s.public][:2]
        for i, vm in enumerate(plan.instance_names):
            self.instances.append(_gateway_vm(vm, plan, ami, child,
                                              subnet_id=private[i % len(private)],
                                              vpc_security_group_ids=[sg]))

    def _load_balancer(self, plan: GatewayPlan, subnets: list[pulumi.Output[str]],
                       sg: pulumi.Output[str],
                       child: pulumi.ResourceOptions) -> aws.lb.LoadBalancer:
        assert plan.load_balancer is not None
        alb = aws.lb.LoadBalancer(plan.load_balancer, load_balancer_type="application",
                                  internal=not plan.public, subnets=subnets,
                                  security_groups=[sg], tags=tags(plan, plan.load_balancer),
                                  opts=child)
        tg = aws.lb.TargetGroup(naming.child(plan.name, "tg"), port=80, protocol="HTTP",
                                target_type="instance", vpc_id=self.network.vpc_id,
                                tags=tags(plan, naming.child(plan.name, "tg")), opts=child)
        for vm, inst in zip(plan.instance_names, self.instances, strict=True):
            aws.lb.TargetGroupAttachment(naming.child(vm, "tg"), target_group_arn=tg.arn,
                                         target_id=inst.id, port=80, opts=child)
        forward = aws.lb.ListenerDefaultActionArgs(type="forward", target_group_arn=tg.arn)
        if plan.certificate_arn is None:  # `certificate: null`: plain HTTP on the ALB
            aws.lb.Listener(naming.child(plan.name, "http"), load_balancer_arn=alb.arn, port=80,
                            protocol="HTTP", default_actions=[forward], opts=child)
            return alb
        aws.lb.Listener(naming.child(plan.name, "https"), load_balancer_arn=alb.arn, port=443,
                        protocol="HTTPS", certificate_arn=plan.certificate_arn,
                        ssl_policy="ELBSecurityPolicy-TLS13-1-2-2021-06",
                        default_actions=[forward], opts=child)
        aws.lb.Listener(naming.child(plan.name, "http"), load_balancer_arn=alb.arn, port=80,
                        protocol="HTTP", default_actions=[aws.lb.ListenerDefaultActionArgs(
                            type="redirect", redirect=aws.lb.ListenerDefaultActionRedirectArgs(
                                port="443", protocol="HTTPS", status_code="HTTP_301"))],
                        opts=child)
        return alb

    def _record(self, plan: GatewayPlan, rec: DnsRecordPlan) -> None:
        opts = pulumi.ResourceOptions(parent=self, delete_before_replace=True)
        zone_id: pulumi.Output[str]
        if rec.create_zone:
            vpcs = [aws.route53.ZoneVpcArgs(vpc_id=self.network.vpc_id)] if rec.private \
                else None
            zone = aws.route53.Zone(naming.child(plan.name, "zone"), name=rec.zone, vpcs=vpcs,
                                    tags=tags(plan, rec.zone),
                                    opts=pulumi.ResourceOptions(parent=self, protect=True))
            zone_id = zone.zone_id
            opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(deleted_with=zone))
        else:
            zone_id = aws.route53.get_zone_output(name=rec.zone, private_zone=rec.private,
                                                  opts=pulumi.InvokeOptions(parent=self)).zone_id
        if rec.record_type == "ALIAS" and self.alb is not None:
            aws.route53.Record(rec.name, zone_id=zone_id, name=rec.fqdn, type="A",
                               aliases=[aws.route53.RecordAliasArgs(
                                   name=self.alb.dns_name, zone_id=self.alb.zone_id,
                                   evaluate_target_health=True)], opts=opts)
            return
        aws.route53.Record(rec.name, zone_id=zone_id, name=rec.fqdn, type=rec.record_type,
                           ttl=rec.ttl, records=self.addresses, opts=opts)


def _gateway_vm(name: str, plan: GatewayPlan, ami: pulumi.Input[str],
                child: pulumi.ResourceOptions, *, subnet_id: pulumi.Input[str] | None = None,
                vpc_security_group_ids: list[pulumi.Output[str]] | None = None,
                network_interfaces: list[aws.ec2.InstanceNetworkInterfaceArgs] | None = None,
                ) -> aws.ec2.Instance:
    """A gateway instance: IMDSv2 only, an encrypted 20 GB gp3 root volume."""
    return aws.ec2.Instance(
        name, ami=ami, instance_type=plan.instance_type, subnet_id=subnet_id,
        vpc_security_group_ids=vpc_security_group_ids, network_interfaces=network_interfaces,
        metadata_options=aws.ec2.InstanceMetadataOptionsArgs(http_tokens="required"),
        root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
            volume_size=GATEWAY.disk_gib, volume_type=GATEWAY.disk_type,
            encrypted=True),
        tags=tags(plan, name), opts=child)
