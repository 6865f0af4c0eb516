"""The guardrails offline: the policy pack's own rule functions over a plan's resources.

Each resource is handed to every rule as pulumi-policy's ``ResourceValidationArgs`` (type,
inputs, URN, name, options) with a config drawn from the backends file (ssh_cidrs,
public_ips, the owner's tags), exactly as `pulumi preview --policy-pack policy/` would hand
it; each violation is traced to the fleet or gateway (file:line) whose resources broke it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpufleet.input import Inputs
from gpufleet.review.diff import owner_map

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


def _config(r: Mapping[str, Any], owner: str | None, inputs: Inputs) -> dict[str, Any]:
    backend = str(r["type"]).split(":", 1)[0].replace("azure-native", "azure")
    cfg = inputs.backend(backend)
    ssh = sorted({c for b in inputs.backends for c in b.ssh_cidrs})
    tags: dict[str, str] = {}
    for spec_tags in [f.tags for f in inputs.fleets if f.name == owner] + \
            [g.tags for g in inputs.gateways if g.name == owner]:
        tags = dict(spec_tags)
    if cfg is not None:
        tags.update(dict(cfg.get("tags") or {}))
    return {"ssh_cidrs": ssh, "public_ips": bool(cfg is not None and cfg.public_ips),
            "allow": bool(cfg is not None and cfg.get("vm_service_account")), "tags": tags}


def run_policies(resources: Sequence[Mapping[str, Any]], inputs: Inputs,
                 levels: Mapping[str, str] | None = None) -> list[Violation]:
    from pulumi_policy import PolicyCustomTimeouts, PolicyResourceOptions, ResourceValidationArgs

    from gpufleet.policy.rules import RULES

    levels = dict(levels or {})
    owners = owner_map([(r["urn"], r["type"], r.get("parent") or "") for r in resources])
    origins = {f.name: f"{f.origin.file}:{f.origin.line}" for f in inputs.fleets}
    origins.update({g.name: f"{g.origin.file}:{g.origin.line}" for g in inputs.gateways})
    out: list[Violation] = []
    for r in resources:
        if str(r["type"]).startswith(("pulumi:", "gpufleet:")):
            continue
        owner = owners.get(r["urn"])
        opts = PolicyResourceOptions(bool(r.get("protect")), list(r.get("ignore_changes") or []),
                                     bool(r.get("delete_before_replace")), [],
                                     PolicyCustomTimeouts(0, 0, 0), [], r.get("parent") or None)
        args = ResourceValidationArgs(str(r["type"]), dict(r.get("inputs") or {}), r["urn"],
                                      str(r["name"]), opts, None,
                                      _config(r, owner, inputs))
        for rule in RULES:
            level = levels.get(rule.name, rule.level)
            if level == "disabled":
                continue
            found: list[str] = []

            def report(message: str, _urn: str | None = None, into: list[str] = found) -> None:
                into.append(message)
            rule.validate(args, report)
            where = origins.get(owner or "", "")
            if not where and inputs.backends:
                b = inputs.backends[0].origin
                where = f"{b.file}:{b.line}"
            out += [Violation(rule.name, level, str(r["name"]), str(r["type"]), m,
                              rule.remediation, owner, where) for m in found]
    return sorted(out, key=lambda v: (v.level != "mandatory", v.rule, v.resource))

