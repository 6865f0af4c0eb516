"""Policy results, pure: the violation record, the rule levels, and the config each resource
is checked with (drawn from the backends file and its owner's tags).

The rules themselves live in the policy pack (``gpufleet.policy``) and run under
pulumi-policy; `gpufleet plan` runs them offline through ``gpufleet.components.run.policy``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpufleet.backends import backend_of_type
from gpufleet.input import Inputs

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
