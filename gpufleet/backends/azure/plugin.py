"""azure as a gpufleet plugin: its traits and where each role's code is, loaded on first use
(registered in pyproject.toml's ``gpufleet.backends`` entry points)."""

from __future__ import annotations

from gpufleet.backends.azure import TRAITS
from gpufleet.backends.plugin import Plugin, Unsupported


def _input() -> object:
    from gpufleet.backends.azure import input as role
    return role


def _compile() -> object:
    from gpufleet.backends.azure.compile import BACKEND
    return BACKEND


def _live() -> object:
    from gpufleet.backends.azure import live
    return live


def _handoff() -> object:
    from gpufleet.backends.azure import handoff
    return handoff


PLUGIN = Plugin(TRAITS, {
    "input": _input, "compile": _compile, "probe": _live,
    "topology": Unsupported(
        "Azure exposes no network topology for VMs or scale sets through a public API (no "
        "equivalent of DescribeInstanceTopology or physicalHostTopology): gpufleet reports "
        "none rather than guess"),
    "scale_sets": _live, "gateway_check": _live, "handoff": _handoff})
