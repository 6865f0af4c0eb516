"""Fleets sharing one network (the backends file's `fleets: {NAME: {network: FLEET}}`): the
joining fleet's subnets go into the joined fleet's network (VPC) instead of a network of its
own, so a region's fleets stay under its VPC, internet gateway, NAT gateway and address
quotas. Only the main network is shared (a RoCE or gVNIC network stays the fleet's own), the
joined fleet builds the network (not an existing one), is on the same backend and region, joins no
network itself, and has a NAT when the joining fleet's nodes are private. Pure."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence

from gpufleet.backends import supports, traits_of
from gpufleet.codes import C023, C024, C025, C026
from gpufleet.compile.design import FleetDesign
from gpufleet.diagnostics import Diagnostic
from gpufleet.input import FleetSpec, GatewaySpec
from gpufleet.traits import Feature


def attach_networks(plans: list[FleetDesign], fleets: Sequence[FleetSpec],
                    gateways: Sequence[GatewaySpec] = ()
                    ) -> tuple[list[FleetDesign], list[Diagnostic]]:
    """The plans with each joining fleet's main network pointing at the joined fleet's; an error
    (and the fleet left out) for each join that cannot be built. A gateway that shares a
    fleet's network adds an address block to that network too: it counts against the
    network's blocks before the joining fleets do."""
    by_name = {p.name: p for p in plans}
    joins = {f.name: f for f in fleets if f.network_of and f.name in by_name}
    diags: list[Diagnostic] = []
    refused: set[str] = set()
    for name, spec in joins.items():
        problem = _problem(by_name[name], spec, by_name, joins)
        if problem is not None:
            diags.append(problem)
            refused.add(name)
    counts = Counter(str(s.network_of) for n, s in joins.items() if n not in refused)
    joined_of = {n: str(s.network_of) for n, s in joins.items() if n not in refused}
    gateway_blocks = Counter(joined_of.get(g.fleet, g.fleet) for g in gateways
                             if g.fleet is not None and g.fleet in by_name)
    for joined, n in counts.items():
        limit = traits_of(by_name[joined].backend).shared_network_limit
        room = None if limit is None else max(limit - gateway_blocks[joined], 0)
        if room is not None and n > room:
            joiners = sorted(k for k, s in joins.items() if s.network_of == joined
                             and k not in refused)
            for i, name in enumerate(joiners[room:], room + 1):
                gw = gateway_blocks[joined]
                diags.append(_at(joins[name], C025, f"fleet '{name}' would be fleet "
                                 f"'{joined}''s network's {i}th joining fleet"
                                 + (f", after {gw} gateway(s) that share it" if gw else "")
                                 + f"; its VPC takes {limit} address blocks besides its own "
                                 "by default", "give this fleet a network of its own (drop "
                                 "`network`)"))
                refused.add(name)
    out = []
    for p in plans:
        if p.name in refused:
            continue
        joining = joins.get(p.name)
        if joining is not None:
            networks = tuple(dataclasses.replace(n, joins=joining.network_of)
                             if n.role == "main" else n for n in p.networks)
            p = dataclasses.replace(p, networks=networks)
        out.append(p)
    return out, diags


def _at(spec: FleetSpec, code: str, message: str, hint: str) -> Diagnostic:
    origin = spec.settings_origin or spec.origin
    return origin.at("network", code, message, hint)


def _problem(plan: FleetDesign, spec: FleetSpec, by_name: dict[str, FleetDesign],
             joins: dict[str, FleetSpec]) -> Diagnostic | None:
    joined = by_name.get(str(spec.network_of))
    if joined is not None and joined.name == plan.name:
        return _at(spec, C023, f"fleet '{plan.name}' joins its own network: `network` names "
                   "another fleet, whose network this one joins",
                   "drop `network` (a fleet has its own network without it)")
    if joined is None:
        return _at(spec, C023, f"fleet '{plan.name}' joins the network of fleet "
                   f"'{spec.network_of}', which the files do not plan",
                   "name another fleet of the files, or drop `network`")
    if (joined.backend, joined.region) != (plan.backend, plan.region) or \
            not supports(plan.backend, Feature.SHARED_NETWORKS):
        why = traits_of(plan.backend).why_not(Feature.SHARED_NETWORKS) \
            if not supports(plan.backend, Feature.SHARED_NETWORKS) else \
            f"'{joined.name}' is on {joined.backend} {joined.region}"
        return _at(spec, C024, f"fleet '{plan.name}' ({plan.backend} {plan.region}) cannot "
                   f"join the network of fleet '{joined.name}': {why}",
                   "join a fleet of the same backend and region, or drop `network`")
    main = joined.network("main")
    own = plan.network("main")
    unfit = ("it uses the existing network " + str(main.existing) if main.existing else
             "it joins another fleet's network itself" if joined.name in joins else
             "this fleet's network is an existing one" if own.existing else
             "it has no NAT for this fleet's private nodes" if own.nat and not main.nat
             else None)
    if unfit is not None:
        return _at(spec, C025, f"fleet '{plan.name}' cannot join the network of fleet "
                   f"'{joined.name}': {unfit}", "join a fleet whose network gpufleet builds (with "
                   "a NAT for private nodes), or drop `network`")
    fs = next((f for f in (*plan.filesystems, *joined.filesystems) if f.peers or f.held_by),
              None)
    if fs is None and not traits_of(plan.backend).filesystem_range_in_network:
        # its filesystems reach the network through a peering of the network itself (gcp's
        # private services access), which is the joined fleet's
        fs = next(iter(plan.filesystems), None)
    if fs is not None:
        return _at(spec, C026, f"fleet '{plan.name}' cannot join the network of fleet "
                   f"'{joined.name}' while filesystem '{fs.name}' is reached through a peering "
                   "of one of them (a network cannot peer with itself)",
                   "keep the fleets' networks apart, or mount the filesystem from one fleet")
    return None
