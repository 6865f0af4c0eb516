"""The policy pack offline: its rule functions over the resources of an offline run, each
resource handed over as pulumi-policy's own ``ResourceValidationArgs`` (type, inputs, URN,
name, options) with the config `pulumi preview --policy-pack policy/` would give it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy import PolicyCustomTimeouts, PolicyResourceOptions, ResourceValidationArgs

from gpufleet.input import Inputs, JsonInputError, read_json_file
from gpufleet.policy.rules import RULES
from gpufleet.review import Violation, check_levels, owner_map, policy_config, where_of


class PolicyConfigError(ValueError):
    """`--policy-config` cannot be used; the message says why."""


def load_levels(path: str | None, mode: str) -> dict[str, str]:
    """Rule levels from a `{rule: level}` JSON file; mode ``off`` disables every rule."""
    levels: dict[str, str] = {}
    if path:
        try:  # bounded: a regular file, size, depth and digits capped
            data = read_json_file(path, "a policy config ({rule: level} JSON)")
        except JsonInputError as e:
            raise PolicyConfigError(f"--policy-config {e}") from None
        if not check_levels(data, {r.name: r.level for r in RULES}):
            raise PolicyConfigError(f"--policy-config {path}: expected {{rule: mandatory|"
                                    "advisory|disabled}} with rules from `gpufleet policy list`")
        levels.update(data)
    if mode == "off":
        levels = {r.name: "disabled" for r in RULES}
    return levels


def _args(r: Mapping[str, Any], owner: str | None, inputs: Inputs) -> ResourceValidationArgs:
    opts = PolicyResourceOptions(bool(r.get("protect")), list(r.get("ignore_changes") or []),
                                 bool(r.get("delete_before_replace")), [],
                                 PolicyCustomTimeouts(0, 0, 0), [], r.get("parent") or None)
    return ResourceValidationArgs(str(r["type"]), dict(r.get("inputs") or {}), r["urn"],
                                  str(r["name"]), opts, None,
                                  policy_config(str(r["type"]), owner, inputs))


def run_policies(resources: Sequence[Mapping[str, Any]], inputs: Inputs,
                 levels: Mapping[str, str] | None = None) -> list[Violation]:
    """Every rule over every resource of a run; violations sorted mandatory first."""
    levels = dict(levels or {})
    owners = owner_map([(r["urn"], r["type"], r.get("parent") or "") for r in resources])
    out: list[Violation] = []
    for r in resources:
        if str(r["type"]).startswith(("pulumi:", "gpufleet:")):
            continue
        owner = owners.get(r["urn"])
        args = _args(r, owner, inputs)
        where = where_of(owner, inputs)
        for rule in RULES:
            level = levels.get(rule.name, rule.level)
            if level == "disabled":
                continue
            found: list[str] = []

            def report(message: str, _urn: str | None = None, into: list[str] = found) -> None:
                into.append(message)
            rule.validate(args, report)
            out += [Violation(rule.name, level, str(r["name"]), str(r["type"]), m,
                              rule.remediation, owner, where) for m in found]
    return sorted(out, key=lambda v: (v.level != "mandatory", v.rule, v.resource))
