"""aws as a gpufleet plugin: its traits and where each role's code is, loaded on first use
(registered in pyproject.toml's ``gpufleet.backends`` entry points)."""

from __future__ import annotations

from gpufleet.backends.aws import TRAITS
from gpufleet.backends.plugin import Plugin, Unsupported


def _input() -> object:
    from gpufleet.backends.aws import input as role
    return role


def _compile() -> object:
    from gpufleet.backends.aws.compile import BACKEND
    return BACKEND


def _live() -> object:
    from gpufleet.backends.aws import live
    return live


def _handoff() -> object:
    from gpufleet.backends.aws import handoff
    return handoff


PLUGIN = Plugin(TRAITS, {
    "input": _input, "compile": _compile, "probe": _live, "topology": _live,
    "scale_sets": Unsupported("an aws fleet is EC2 instances, each its own Pulumi resource: "
                              "`gpufleet replace` replaces them through `pulumi up`"),
    "gateway_check": Unsupported("dstack's aws gateway gets a security group of its own "
                                 "that admits 80 and 443"),
    "handoff": _handoff})
