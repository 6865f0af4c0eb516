"""gcp as a gpufleet plugin: its traits and where each role's code is, loaded on first use
(registered in pyproject.toml's ``gpufleet.backends`` entry points)."""

from __future__ import annotations

from gpufleet.backends.gcp import TRAITS
from gpufleet.backends.plugin import Plugin, Unsupported


def _input() -> object:
    from gpufleet.backends.gcp import input as role
    return role


def _compile() -> object:
    from gpufleet.backends.gcp.compile import BACKEND
    return BACKEND


def _live() -> object:
    from gpufleet.backends.gcp import live
    return live


def _handoff() -> object:
    from gpufleet.backends.gcp import handoff
    return handoff


PLUGIN = Plugin(TRAITS, {
    "input": _input, "compile": _compile, "probe": _live, "topology": _live,
    "scale_sets": Unsupported("a gcp fleet is Compute Engine instances, each its own "
                              "Pulumi resource: `gpufleet replace` replaces them through "
                              "`pulumi up`"),
    "gateway_check": Unsupported("dstack's gcp gateway gets firewall rules of its own "
                                 "that admit 80 and 443"),
    "handoff": _handoff})
