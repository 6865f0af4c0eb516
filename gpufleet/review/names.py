"""The physical names the clouds will see, checked against their rules before `pulumi up`. Pure.

A resource with an explicit name input (a GCP filestore instance, an Azure storage account) is
called that; the others are auto-named by the provider: the logical name and a random suffix
(`autoname_suffix` characters on that backend). Each backend's rules live in its traits
(``backends/<cloud>/names.py``), each with the documentation page it comes from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpufleet.backends import backend_of_type, traits_of
from gpufleet.codes import C019, C021
from gpufleet.diagnostics import Diagnostic
from gpufleet.input import Inputs, Origin
from gpufleet.review.owners import resource_owners, spec_origins
from gpufleet.traits import NameRule


@dataclass(frozen=True, slots=True)
class NameProblem:
    resource: Mapping[str, Any]
    physical: str  # as the cloud would see it (a stand-in for the random part)
    rule: NameRule
    why: str


def physical_name(resource: Mapping[str, Any], rule: NameRule, suffix: int) -> str:
    """The name the cloud sees; the random part of an auto-name stood in by `x`s."""
    explicit = (resource.get("inputs") or {}).get(rule.name_input) if rule.name_input else None
    if isinstance(explicit, str):
        return explicit
    return f"{resource['name']}-{'x' * (suffix - 1)}" if suffix else str(resource["name"])


def name_problems(resources: Sequence[Mapping[str, Any]]) -> list[NameProblem]:
    out = []
    for r in resources:
        backend = backend_of_type(str(r["type"]))
        if backend is None:
            continue
        t = traits_of(backend)
        rule = t.name_rules.get(str(r["type"]))
        if rule is None:
            continue
        name = physical_name(r, rule, t.autoname_suffix)
        if len(name) > rule.max_len:
            out.append(NameProblem(r, name, rule, f"{len(name)} characters, over the "
                                                  f"{rule.max_len} {backend} allows"))
        elif rule.pattern is not None and not rule.pattern.fullmatch(name):
            out.append(NameProblem(r, name, rule, f"not of the shape {backend} takes "
                                                  f"({rule.pattern.pattern})"))
    return out


def twice(resources: Sequence[Mapping[str, Any]], owners: Mapping[str, str],
          origins: Mapping[str, Origin]) -> list[Diagnostic]:
    """Two resources with one URN (fleets `tt` and `tt-bastion` both make `tt-bastion-sg`):
    the engine refuses the second; said at the first owner that makes one."""
    seen: dict[str, list[str]] = {}
    for r in resources:  # the URN collapses the two in ``owners``: their parents do not
        parent = str(r.get("parent") or "")
        seen.setdefault(str(r["urn"]), []).append(
            owners.get(parent) or parent.rsplit("::", 1)[-1])
    out = []
    for urn, makers in sorted(seen.items()):
        named = sorted({o for o in makers if o in origins})
        if len(makers) > 1 and named:
            out.append(origins[named[0]].at(
                "name", C021, f"{' and '.join(named)} both make {urn.rsplit('::', 1)[-1]} "
                f"({urn.split('::')[2]}): two resources cannot share a URN", "rename one of "
                "them so that neither name is the other's followed by one of its roles "
                "(`-bastion`, `-net`, ...)"))
    return out


def name_diagnostics(resources: Sequence[Mapping[str, Any]], inputs: Inputs
                     ) -> list[Diagnostic]:
    """One error per fleet or gateway (at its name) for the longest name it would get
    refused; the other problems are counted in the message."""
    owners, origins = resource_owners(resources), spec_origins(inputs)
    problems = name_problems(resources)
    grouped: dict[str, list[NameProblem]] = {}
    for p in problems:
        grouped.setdefault(owners.get(str(p.resource["urn"]), ""), []).append(p)
    out = []
    for owner, found in grouped.items():
        worst = max(found, key=lambda p: len(p.physical))
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        message = (f"{worst.resource['type']} '{worst.resource['name']}' would be named "
                   f"'{worst.physical}' in the cloud: {worst.why}{more} (source: "
                   f"{worst.rule.source})")
        origin = origins.get(owner) or next(iter(origins.values()), None)
        long = len(worst.physical) > worst.rule.max_len
        if origin is not None:
            out.append(origin.at("name", C019, message, (
                "shorten" if long else "rename so that the cloud takes its shape:") + " the "
                "name the resource's name starts with (the fleet, gateway or filesystem "
                "name)"))
    return [*out, *twice(resources, owners, origins)]
