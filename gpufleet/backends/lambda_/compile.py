"""Lambda Cloud: a fleet is its instances, one SSH key and one firewall ruleset. Pure.

Lambda's API (docs-api.lambda.ai/api/cloud, OpenAPI 1.10.0) launches each instance with a
public address of its own, in no network gpufleet builds: there is no VPC, subnet, NAT or
bastion to plan. What stands between a node and the internet is the fleet's regional
firewall ruleset: SSH from the backends file's `ssh_cidrs`, nothing else inbound. The nodes
boot gpufleet's host setup as cloud-init user data.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Network

from gpufleet.backends.lambda_ import TRAITS
from gpufleet.backends.lambda_.names import tag_problems
from gpufleet.codes import C027, C028
from gpufleet.compile import naming
from gpufleet.compile.design import FirewallRule, FleetDesign, GatewayDesign
from gpufleet.compile.hostsetup import host_setup_plan
from gpufleet.compile.seam import (
    Planned,
    access_method,
    access_plan,
    common_fields,
    merged_tags,
    node_ssh_rules,
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
from gpufleet.traits import Feature


@dataclass(frozen=True, slots=True)
class LambdaOptions:
    """Lambda: the key's and ruleset's names, its rules (the only way in), the image family."""

    ssh_key: str
    firewall: str
    firewall_rules: tuple[FirewallRule, ...] = ()
    image: str | None = None
    public_key: str | None = None

# Lambda's account-wide instance limit is set per account (docs.lambda.ai: quotas are raised
# through support); gpufleet launches at most this many per fleet, one by one (12 s apart)
MAX_NODES = 100


class LambdaBackend:
    name = "lambda"
    traits = TRAITS
    fleet_prefix = 32  # unused: a networkless backend gets no block (compile.addresses)

    def design_fleet(self, fleet: FleetSpec, offer: Offer, block: IPv4Network,  # NO_BLOCK
                     config: BackendConfig | None, access: AccessSpec,
                     reservation: ReservationSpec | None = None) -> Planned:
        diags = self.check(fleet)
        if any(d.is_error for d in diags):
            return Planned(None, tuple(diags))
        cfg = config.settings if config is not None else {}
        method = access_method("lambda", True, access)
        way_in, more = access_plan(fleet, "lambda", method, access, config, "", offer.region)
        diags += more
        firewall = naming.child(fleet.name, "firewall")
        image = cfg.get("image")
        labels = merged_tags(fleet, config)
        bad = tag_problems(labels)
        if bad:
            return Planned(None, (*diags, *(fleet.origin.at(
                "tags", C028, f"fleet '{fleet.name}': {p}", "rename the tag keys so that "
                "each is distinct and two characters or more") for p in bad)))
        plan = FleetDesign(
            **common_fields(fleet, offer, None), zone=None, networks=(), nics=(),
            disk_type="local", image=image or "lambda-stack", public_ip=True,
            labels=labels,
            host_setup=host_setup_plan("lambda", cfg, bool(offer.gpu_count), not image,
                                       way_in.user),
            options=LambdaOptions(ssh_key=naming.child(fleet.name, "key"), firewall=firewall,
                                  firewall_rules=node_ssh_rules(fleet.name, config, method),
                                  image=image, public_key=way_in.public_key),
            access=way_in,
        )
        return Planned(plan, tuple(diags))

    def check(self, fleet: FleetSpec) -> list[Diagnostic]:
        wanted = fleet.nodes.max if fleet.nodes.max is not None else fleet.nodes.target
        if wanted <= MAX_NODES:
            return []
        return [fleet.origin.at("nodes", C027, f"fleet '{fleet.name}' wants {wanted} Lambda "
                                f"instances; gpufleet launches at most {MAX_NODES} per fleet "
                                "(one launch per 12 seconds, Lambda's limit)",
                                "split the fleet")]

    def billed_addresses(self, plan: FleetDesign) -> bool:
        """An instance's public address comes with it, priced in the instance's price."""
        return False

    def design_gateway(self, gw: GatewaySpec, block: IPv4Network, config: BackendConfig | None,
                     joined: FleetDesign | None, synced: SyncedGateway | None
                     ) -> tuple[GatewayDesign | None, list[Diagnostic]]:
        """Never reached: validate refuses a gateway on a backend without gateways."""
        raise ValueError(f"gateway '{gw.name}': {TRAITS.why_not(Feature.GATEWAYS)}")


BACKEND = LambdaBackend()
