"""toycloud: a cloud that exists only in gpufleet's tests, registered as a plugin from outside
the package (its own `toycloud-0.1.dist-info/entry_points.txt`). No shared module of gpufleet
names it: its traits, its catalog, its planner and its components are all here."""

from __future__ import annotations

import re
from pathlib import Path
from types import MappingProxyType

from gpufleet.backends.plugin import Plugin, Unsupported
from gpufleet.traits import BackendTraits, Feature, ResourceKind, ZoneModel

MACHINE = "toycloud:index:Machine"
FIREWALL = "toycloud:index:Firewall"

TRAITS = BackendTraits(
    "toycloud", frozenset(),
    MappingProxyType({Feature.GATEWAYS: "toycloud runs no gateway",
                      Feature.CLUSTER: "toycloud has no interconnect"}),
    re.compile(r"toy-[a-z]+-\d"), "toy-north-1", "ubuntu", zones=ZoneModel.NONE,
    networkless=True, pulumi_package="toycloud", node_types=(MACHINE,),
    resources=MappingProxyType({
        MACHINE: ResourceKind(frozenset({"machine_type", "region"}), "instance",
                              billed_as="instance"),
        FIREWALL: ResourceKind(frozenset({"region"}), "network")}),
    settings_schema=MappingProxyType({
        "type": "object", "additionalProperties": False, "required": ["type"],
        "properties": {"type": {"const": "toycloud"},
                       "regions": {"type": "array", "items": {"type": "string"}},
                       "ssh_cidrs": {"type": "array", "items": {"type": "string"}},
                       "host_setup": {"enum": ["none", "default"]}}}),
    catalog_csv=str(Path(__file__).with_name("catalog.csv")))


def _rules() -> object:
    from toycloud import roles
    return roles


def _planner() -> object:
    from toycloud.planner import PLANNER
    return PLANNER


_NONE = "toycloud has no API to read"
PLUGIN = Plugin(TRAITS, {
    "input": _rules, "compile": _planner, "handoff": _rules,
    "probe": Unsupported(_NONE), "topology": Unsupported(_NONE),
    "scale_sets": Unsupported("toycloud has no scale sets"),
    "gateway_check": Unsupported("toycloud runs no gateway")})
