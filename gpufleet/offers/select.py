"""Offer selection: FleetSpec + Catalog -> ordered offers, or a located explanation. Pure.

Resources are matched with gpuhunt's own ``matches`` on a ``QueryFilter`` built the way
dstack builds it; then dstack's filters run in dstack's order (backends, regions, zones,
instance types, spot policy, max price, reservation, cluster placement). Each stage is
recorded so that an empty result names the filter that removed the last candidates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from gpufleet.backends import (
    BACKENDS,
    backend_names,
    backends_with,
    is_backend,
    supports,
    traits_of,
)
from gpufleet.codes import C015, O001
from gpufleet.diagnostics import did_you_mean
from gpufleet.input import (
    FleetSpec,
    Inputs,
    ProfileSpec,
    region_of_zone,
)
from gpufleet.offers.catalog import Catalog
from gpufleet.offers.explain import _hint, _lower, _no_match, describe_resources
from gpufleet.offers.matching import matching, query_filter
from gpufleet.offers.offer import Offer, Selection
from gpufleet.offers.reserved import in_reservation, reserved_offers
from gpufleet.traits import Feature, ZoneModel

# Families that cannot join a cluster placement: AWS burstable types (dstackai/dstack#2872);
# GCP E2, which compact placement policies do not support (they take C2, C2D, C3, C3D, H3,
# N2, N2D and the accelerator series; GKE's compact-placement page lists the same).
# instance-type prefixes that take no cluster placement, on every backend
NO_CLUSTER_FAMILIES = tuple(p for t in BACKENDS for p in t.no_cluster_families)


# --- profiles ----------------------------------------------------------------------------

class UnknownProfile(LookupError):
    """`--profile NAME` (or `gpufleet:profile`) names no profile of the input files."""


def pick_profile(profiles: Sequence[ProfileSpec], name: str | None) -> ProfileSpec | None:
    """The named profile, else the one marked ``default: true``; UnknownProfile for unknown
    names."""
    if name is not None:
        for p in profiles:
            if p.name == name:
                return p
        hint = did_you_mean(name, [p.name for p in profiles])
        raise UnknownProfile(f"no profile named '{name}'" + (f"; {hint}" if hint else ""))
    return next((p for p in profiles if p.default), None)


def apply_profile(fleet: FleetSpec, profile: ProfileSpec | None) -> FleetSpec:
    """Fill the fields the fleet leaves unset from the profile (the fleet always wins)."""
    if profile is None:
        return fleet
    values = {k: v for k, v in profile.values.items() if k not in fleet.explicit}
    return dataclasses.replace(fleet, **values) if values else fleet


# --- filter stages -----------------------------------------------------------------------

Stage = tuple[str, str, Callable[[list[Offer]], list[Offer]]]


def _zones(zones: Sequence[str]) -> Callable[[list[Offer]], list[Offer]]:
    wanted = _lower(zones)

    def run(offers: list[Offer]) -> list[Offer]:
        out = []
        for o in offers:
            if traits_of(o.backend).zonal_offers:
                if o.zone and o.zone.lower() in wanted:
                    out.append(o)
            elif traits_of(o.backend).zones is ZoneModel.PER_REGION:
                # rows per region (AWS: the source has AZ ids, not names): pin the first
                # requested AZ of that region. Azure offers no zones in dstack.
                azs = sorted(z for z in wanted if region_of_zone(z) == o.region)
                if azs:
                    out.append(dataclasses.replace(o, zone=azs[0]))
        return out
    return run


def stages(fleet: FleetSpec, backends: Sequence[str],
           allowed_regions: dict[str, set[str] | None],
           declared: Stage | None = None, declared_backend: str | None = None
           ) -> list[Stage]:
    """(yaml key, phrase for 'but none ...', filter) in dstack's order."""
    on = (f"is on backends {', '.join(backends)}" if backends else
          "is on a backend: `backends: []` lists none, so dstack finds no offer either")
    out: list[Stage] = [("backends", on, lambda os: [o for o in os if o.backend in backends])]
    if any(v is not None for v in allowed_regions.values()):
        out.append(("backends", "is in the regions the backends file allows",
                    lambda os: [o for o in os if (allowed_regions.get(o.backend) is None
                                                  or o.region.lower()
                                                  in (allowed_regions[o.backend] or set()))]))
    if fleet.regions is not None:
        regions = _lower(fleet.regions)
        out.append(("regions", f"is in regions {', '.join(fleet.regions)}",
                    lambda os: [o for o in os if o.region.lower() in regions]))
    if fleet.availability_zones is not None:
        out.append(("availability_zones",
                    f"is in availability_zones {', '.join(fleet.availability_zones)}",
                    _zones(fleet.availability_zones)))
    if fleet.instance_types is not None:
        types = _lower(fleet.instance_types)
        out.append(("instance_types", f"is one of instance_types "
                    f"{', '.join(fleet.instance_types)}",
                    lambda os: [o for o in os if o.instance_type.lower() in types]))
    policy = fleet.spot_policy or "on-demand"
    if fleet.reservation is not None and policy == "auto":
        # dstack drops spot offers under a reservation: the reservation is on-demand capacity
        out.append(("spot_policy", "is on-demand (a reservation is consumed on-demand)",
                    lambda os: [o for o in os if not o.spot]))
    elif policy != "auto":
        want_spot = policy == "spot"
        out.append(("spot_policy", f"is {policy} (spot_policy: {policy})",
                    lambda os: [o for o in os if o.spot == want_spot]))
    if fleet.max_price is not None:
        cap = fleet.max_price
        out.append(("max_price", f"is under max_price {cap:g}",
                    lambda os: [o for o in os if o.price <= cap]))
    if fleet.reservation is not None:
        able = ", ".join(backends_with(Feature.RESERVATIONS))
        out.append(("reservation", f"is on a backend with reservations ({able}, or one "
                    "declared in the backends file)",
                    lambda os: [o for o in os if supports(o.backend, Feature.RESERVATIONS)
                                or o.backend == declared_backend]))
    if declared is not None:
        out.append(declared)
    if fleet.is_cluster:
        # dstack drops the offers of backends without multinode support first
        out.append(("placement", "is on a backend that builds clusters ("
                    + "; ".join(f"not {b}: {traits_of(b).why_not(Feature.CLUSTER)}"
                                for b in backends if is_backend(b)
                                and not supports(b, Feature.CLUSTER)) + ")",
                    lambda os: [o for o in os if supports(o.backend, Feature.CLUSTER)]))
        out.append(("placement", "can join a cluster placement group (not t2/t3/t3a or GCP e2)",
                    lambda os: [o for o in os
                                if not o.instance_type.startswith(
                                    traits_of(o.backend).no_cluster_families)]))
    return out


def effective_backends(fleet: FleetSpec, inputs: Inputs) -> list[str]:
    configured = [b.type for b in inputs.backends]
    if fleet.backends is not None:
        return list(fleet.backends)
    return configured or list(backend_names())


def select(fleet: FleetSpec, catalog: Catalog, inputs: Inputs | None = None,
           profile: ProfileSpec | None = None) -> Selection:
    """All offers for ``fleet`` in a fixed order (price, backend, region, zone, type)."""
    inputs = inputs or Inputs()
    fleet = apply_profile(fleet, profile)
    q = query_filter(fleet.resources)
    backends = effective_backends(fleet, inputs)
    # the first stage keeps the fleet's backends only: their rows are matched first, every
    # row only when none of theirs matches (for the count that stage's refusal gives)
    candidates = matching(catalog, False, q, backends) or matching(catalog, False, q, None)
    if fleet.reservation is not None and (fleet.spot_policy or "on-demand") != "spot":
        candidates += reserved_offers(candidates)
    what = describe_resources(fleet.resources)
    pname = profile.name if profile else None
    allowed = {b.type: (_lower(b.regions) if b.regions is not None else None)
               for b in inputs.backends}
    declared = inputs.reservation(fleet.reservation)
    steps = stages(fleet, backends, allowed, None if declared is None else (
        "reservation", f"is {declared.instance_type} in {declared.zone} (reservation "
        f"{declared.name}, declared at {declared.origin.file}:{declared.origin.line})",
        in_reservation(declared)), None if declared is None else declared.backend)
    unpriced = matching(catalog, True, q, backends)
    for key, _, run in steps:
        if key in ("backends", "regions", "instance_types", "availability_zones"):
            unpriced = run(unpriced)
    extra = tuple(sorted(unpriced, key=lambda o: (o.backend, o.region, o.instance_type)))
    if not candidates:
        return Selection(fleet, (), _no_match(fleet, catalog, what), pname, extra)
    for i, (key, phrase, run) in enumerate(steps):
        survivors = run(candidates)
        if not survivors:
            # The near miss: the cheapest offer that fails this step only (an on-demand
            # fleet is never shown a spot price).
            near_misses = candidates
            for _, _, later in steps[i + 1:]:
                near_misses = later(near_misses)
            cheapest = sorted(near_misses, key=Offer.sort_key)[:1]
            near = f" (cheapest: {cheapest[0].short()})" if cheapest \
                else ""
            msg = (f"no offer for fleet '{fleet.name}': {len(candidates)} offer(s) match "
                   f"{what} but none {phrase}{near}")
            hint = _hint(key, fleet.spot_policy)
            if profile is not None and key in profile.values and key not in fleet.explicit:
                hint = f"`{key}` comes from profile '{profile.name}'; {hint}"
            return Selection(fleet, (), fleet.origin.at(key, O001, msg, hint), pname, extra)
        candidates = survivors
    return buildable(fleet, sorted(candidates, key=Offer.sort_key), pname, extra, inputs)


def cluster_refusal(fleet: FleetSpec, offer: Offer, inputs: Inputs | None = None
                    ) -> str | None:
    """What a cluster of ``offer`` would need that gpufleet does not set up, or None (also
    when the backends file names what unlocks the fabric on this type)."""
    if not fleet.is_cluster or fleet.nodes.target <= 0 or not is_backend(offer.backend):
        return None
    t = traits_of(offer.backend)
    why = t.unbuildable_cluster_fabrics.get(offer.rdma)
    unlock = t.cluster_fabric_unlocks.get(offer.rdma)
    if why is None or unlock is None or offer.instance_type not in unlock.instance_types:
        return why
    config = next((b for b in (inputs.backends if inputs else ()) if b.type == offer.backend),
                  None)
    return None if config is not None and config.get(unlock.key) else why


def _unlock_hint(offer: Offer) -> str:
    unlock = traits_of(offer.backend).cluster_fabric_unlocks.get(offer.rdma)
    if unlock is None or offer.instance_type not in unlock.instance_types:
        return ""
    return f"; or set `{unlock.key}` for {offer.backend} in the backends file: {unlock.hint}"


def buildable(fleet: FleetSpec, ranked: list[Offer], pname: str | None,
              extra: tuple[Offer, ...], inputs: Inputs | None = None) -> Selection:
    """The offers gpufleet can build as the fleet asks, cheapest first; the others set apart
    (`offers` lists them with the code), or the refusal when none is left."""
    # reasons by position: an offer hashes its 14 fields each time (a CPU-only GCP fleet
    # ranks 7,000 offers)
    why = [cluster_refusal(fleet, o, inputs) for o in ranked]
    refused = tuple(o for o, w in zip(ranked, why, strict=True) if w)
    if not refused:
        return Selection(fleet, tuple(ranked), None, pname, extra)
    kept = tuple(o for o, w in zip(ranked, why, strict=True) if not w)
    if kept:
        return Selection(fleet, kept, None, pname, extra, refused, C015)
    first, reason = refused[0], next(w for w in why if w)
    t = traits_of(first.backend)
    loss = t.cluster_fabric_loss.get(first.instance_type, "far below the GPU NICs' bandwidth")
    return Selection(fleet, (), fleet.origin.at(
        "placement", C015, f"{first.instance_type} clusters need {reason}"
        f", which gpufleet does not set up; without them NCCL falls back to TCP ({loss})",
        "create the networks only (`nodes: 0` or `0..N`) and let dstack provision the "
        f"instances (`gpufleet export dstack`){t.cluster_fabric_alternative}"
        f"{_unlock_hint(first)}"), pname, extra,
        refused, C015)




def select_all(inputs: Inputs, catalog: Catalog, profile_name: str | None = None
               ) -> list[Selection]:
    profile = pick_profile(inputs.profiles, profile_name)
    return [select(f, catalog, inputs, profile) for f in inputs.fleets]
