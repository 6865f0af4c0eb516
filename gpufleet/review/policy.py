"""Policy results, pure: the violation record, the rule levels, and the config each resource
is checked with (drawn from the backends file and its owner's tags).

The rules themselves live in the policy pack (``gpufleet.policy``) and run under
pulumi-policy; `gpufleet plan` runs them offline through ``gpufleet.components.run.policy``
over the subjects made here, and the findings come back here as violations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpufleet.backends import backend_of_type
from gpufleet.compile.runs import Finding, PolicySubject
from gpufleet.input import Inputs, JsonInputError, read_json_file
from gpufleet.review.owners import owner_map

POLICY_LEVELS = ("mandatory", "advisory", "disabled")  # per rule, as pulumi-policy has them


@dataclass(frozen=True, slots=True)
class Violation:
    rule: str
    level: str
    resource: str
    type: str
    message: str
    remediation: str
    owner: str | None
    where: str  # file:line of the fleet or gateway, or the backends file

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "level": self.level, "resource": self.resource,
                "type": self.type, "message": self.message, "remediation": self.remediation,
                "owner": self.owner, "where": self.where}


def policy_config(resource_type: str, owner: str | None, inputs: Inputs) -> dict[str, Any]:
    """The pack config one resource is checked with: `ssh_cidrs`, `public_ips`, whether a
    dedicated service account is set, and the tags its owner must carry."""
    backend = backend_of_type(resource_type)
    cfg = inputs.backend(backend) if backend is not None else None
    ssh = sorted({c for b in inputs.backends for c in b.ssh_cidrs})
    tags: dict[str, str] = {}
    for spec_tags in [f.tags for f in inputs.fleets if f.name == owner] + \
            [g.tags for g in inputs.gateways if g.name == owner]:
        tags = dict(spec_tags)
    if cfg is not None:
        tags.update(dict(cfg.get("tags") or {}))
    return {"ssh_cidrs": ssh, "public_ips": bool(cfg is not None and cfg.public_ips),
            "allow": bool(cfg is not None and cfg.get("vm_service_account")), "tags": tags}


def where_of(owner: str | None, inputs: Inputs) -> str:
    """file:line of the fleet or gateway behind a resource, else of the backends file."""
    origins = {f.name: f.origin for f in inputs.fleets}
    origins.update({g.name: g.origin for g in inputs.gateways})
    origin = origins.get(owner or "")
    if origin is None and inputs.backends:
        origin = inputs.backends[0].origin
    return f"{origin.file}:{origin.line}" if origin is not None else ""


def check_levels(data: Any, rules: Mapping[str, str]) -> bool:
    """Whether ``data`` is a {rule: level} map over known rules and levels."""
    return isinstance(data, dict) and all(k in rules and v in POLICY_LEVELS
                                          for k, v in data.items())


def policy_subjects(resources: Sequence[Mapping[str, Any]], inputs: Inputs
                    ) -> list[PolicySubject]:
    """The resources the pack checks (not Pulumi's own or gpufleet's components), each with
    its owner, where that is declared and its pack config."""
    owners = owner_map([(r["urn"], r["type"], r.get("parent") or "") for r in resources])
    out = []
    for r in resources:
        if str(r["type"]).startswith(("pulumi:", "gpufleet:")):
            continue
        owner = owners.get(r["urn"])
        out.append(PolicySubject(r, owner, where_of(owner, inputs),
                                 policy_config(str(r["type"]), owner, inputs)))
    return out


def violations(subjects: Sequence[PolicySubject], found: Sequence[Finding]) -> list[Violation]:
    """The findings as violations, mandatory first."""
    out = []
    for f in found:
        s = subjects[f.subject]
        out.append(Violation(f.rule, f.level, str(s.resource["name"]), str(s.resource["type"]),
                             f.message, f.remediation, s.owner, s.where))
    return sorted(out, key=lambda v: (v.level != "mandatory", v.rule, v.resource))


class PolicyConfigError(ValueError):
    """`--policy-config` cannot be used; the message says why."""


def load_levels(path: str | None, mode: str, rules: Mapping[str, str]) -> dict[str, str]:
    """Rule levels from a `{rule: level}` JSON file over ``rules`` (each rule's own level);
    mode ``off`` disables every rule."""
    levels: dict[str, str] = {}
    if path:
        try:  # bounded: a regular file, size, depth and digits capped
            data = read_json_file(path, "a policy config ({rule: level} JSON)")
        except JsonInputError as e:
            raise PolicyConfigError(f"--policy-config {e}") from None
        if not check_levels(data, rules):
            raise PolicyConfigError(f"--policy-config {path}: expected {{rule: mandatory|"
                                    "advisory|disabled}} with rules from `gpufleet policy list`")
        levels.update(data)
    if mode == "off":
        levels = dict.fromkeys(rules, "disabled")
    return levels
