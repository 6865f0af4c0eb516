"""toycloud's Pulumi components: a fleet is a ComponentResource holding a firewall and one
machine per node (resources of the `toycloud` package; under gpufleet's mocks no provider
plugin is needed)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pulumi

from gpufleet.compile import DIGEST_OUTPUT, input_digest
from gpufleet.components.sampling import registered_nodes
from toycloud import FIREWALL, MACHINE


class Fleet(pulumi.ComponentResource):
    def __init__(self, plan: Any, shared: dict[str, Any]) -> None:
        super().__init__("toycloud:index:Fleet", plan.name, None, None)
        child = pulumi.ResourceOptions(parent=self)
        fw = pulumi.CustomResource(FIREWALL, plan.options.firewall, {
            "region": plan.region, "ssh_cidrs": list(plan.options.ssh_cidrs)}, child)
        nodes = [pulumi.CustomResource(MACHINE, name, {
            "region": plan.region, "machine_type": plan.instance_type, "firewall": fw.id,
            "private_ip": None, "public_ip": None},
            pulumi.ResourceOptions(parent=self)) for name in registered_nodes(plan)]
        self.internal_ips: list[Any] = [n.private_ip for n in nodes]
        self.public_ips: list[Any] = [n.public_ip for n in nodes]
        self.bastion_address: Any = None
        self.network_ids: dict[str, Any] = {}
        self.network_names: dict[str, Any] = {}
        self.subnet_ids: dict[str, Any] = {}
        self.register_outputs({"public_ips": self.public_ips,
                               DIGEST_OUTPUT: input_digest(plan)})


def provider(p: Any) -> None:
    return None


def emit(plan: Any, prov: Any, shared: dict[str, Any]) -> Fleet:
    return Fleet(plan, shared)


def emit_gateway(plan: Any, prov: Any, fleets: Mapping[str, Any] | None = None) -> Any:
    raise ValueError("toycloud runs no gateway")


def emit_volume(plan: Any, opts: Any) -> Any:
    raise ValueError("toycloud has no volumes")


class _Offline:
    """The machines' addresses, as placeholders that say so."""

    @staticmethod
    def invokes(dns_zones: Iterable[str]) -> dict[str, Any]:
        return {}

    @staticmethod
    def outputs(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
        if typ == MACHINE:
            return {"private_ip": f"mock-private-ip-of-{name}",
                    "public_ip": f"mock-public-ip-of-{name}"}
        return {}


offline = _Offline()
