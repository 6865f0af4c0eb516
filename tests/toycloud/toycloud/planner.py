"""toycloud's planner: a fleet is its machines and one firewall (SSH from ssh_cidrs)."""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Network
from typing import Any

from gpufleet.compile import naming
from gpufleet.compile.design import FleetDesign
from gpufleet.compile.seam import Planned, access_method, access_plan, common_fields
from toycloud import TRAITS


@dataclass(frozen=True, slots=True)
class ToyOptions:
    firewall: str
    ssh_cidrs: tuple[str, ...]


class ToyPlanner:
    name = "toycloud"
    traits = TRAITS
    fleet_prefix = 32

    def design_fleet(self, fleet: Any, offer: Any, block: IPv4Network, config: Any, access: Any,
                     reservation: Any = None) -> Planned:
        method = access_method(self.name, True, access)
        way_in, diags = access_plan(fleet, self.name, method, access, config, "", offer.region)
        cidrs = tuple(config.ssh_cidrs) if config is not None else ()
        plan = FleetDesign(**common_fields(fleet, offer, None), zone=None, networks=(), nics=(),
                           disk_type="local", image="toy-os", public_ip=True, labels={},
                           host_setup=None, access=way_in,
                           options=ToyOptions(naming.child(fleet.name, "firewall"), cidrs))
        return Planned(plan, tuple(diags))

    def billed_addresses(self, plan: FleetDesign) -> bool:
        return False

    def design_gateway(self, gw: Any, block: Any, config: Any, joined: Any, synced: Any) -> Any:
        raise ValueError("toycloud runs no gateway")


PLANNER = ToyPlanner()
