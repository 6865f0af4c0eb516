"""Plans as JSON (plan_to_json) and the digest of what a plan builds (input_digest), which the
stack's state carries so drift checks see a changed plan."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gpufleet import __version__
from gpufleet.compile.design import FleetDesign, GatewayDesign

if TYPE_CHECKING:
    from gpufleet.compile.buckets import BucketDesign


def plan_to_json(obj: Any) -> Any:
    """Plan dataclasses -> JSON-ready dicts (mappings and tuples become dicts and lists)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.metadata.get("json", f.name): plan_to_json(getattr(obj, f.name))
                for f in dataclasses.fields(obj)
                if not (f.metadata.get("omit_none") and getattr(obj, f.name) in (None, ()))}
    if isinstance(obj, Mapping):
        return {str(k): plan_to_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [plan_to_json(v) for v in obj]
    if isinstance(obj, set | frozenset):  # in a stable order: a set's varies per process
        return sorted((plan_to_json(v) for v in obj), key=str)
    return obj


# The component output that carries input_digest() into the stack's state.
DIGEST_OUTPUT = "gpufleet_digest"


# Plan fields that do not reach any resource: where the YAML lives, and what it costs.
_NOT_BUILT = ("file", "price_per_hour", "reservation_declared")


def input_digest(plan: FleetDesign | GatewayDesign | BucketDesign) -> str:
    """Digest of everything a fleet's, gateway's or bucket's resources are built from: the
    finished plan (itself made of the spec, the backend settings and the locked offer) and
    the gpufleet version. Components record it as an output; `gpufleet diff` re-runs only
    the fleets (gateways, buckets) whose digest differs from the export's."""
    data = {k: v for k, v in plan_to_json(plan).items() if k not in _NOT_BUILT}
    text = json.dumps({"plan": data, "gpufleet": __version__}, sort_keys=True,
                      separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
