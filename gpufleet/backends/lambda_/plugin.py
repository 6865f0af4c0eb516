"""lambda as a gpufleet plugin: its traits and where each role's code is, loaded on first use
(registered in pyproject.toml's ``gpufleet.backends`` entry points)."""

from __future__ import annotations

from gpufleet.backends.lambda_ import TRAITS
from gpufleet.backends.plugin import Plugin, Unsupported


def _input() -> object:
    from gpufleet.backends.lambda_ import input as role
    return role


def _compile() -> object:
    from gpufleet.backends.lambda_.compile import BACKEND
    return BACKEND


def _live() -> object:
    from gpufleet.backends.lambda_ import live
    return live


def _handoff() -> object:
    from gpufleet.backends.lambda_ import handoff
    return handoff


PLUGIN = Plugin(TRAITS, {
    "input": _input, "compile": _compile, "probe": _live,
    "topology": Unsupported("Lambda's API exposes no network topology (single instances, "
                            "no interconnect between them)"),
    "scale_sets": Unsupported("Lambda has no scale sets: each node is an instance launched "
                              "on its own"),
    "gateway_check": Unsupported("Lambda runs no dstack gateway (gpufleet builds none there)"),
    "handoff": _handoff})
