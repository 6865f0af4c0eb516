"""The policy pack offline: its rule functions over the resources of an offline run, each
resource handed over as pulumi-policy's own ``ResourceValidationArgs`` (type, inputs, URN,
name, options) with the config `pulumi preview --policy-pack policy/` would give it (made by
``gpufleet.review.policy``, which also turns the findings into violations)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pulumi_policy import PolicyCustomTimeouts, PolicyResourceOptions, ResourceValidationArgs

from gpufleet.compile.runs import Finding, PolicySubject
from gpufleet.policy.rules import RULES


def _args(subject: PolicySubject) -> ResourceValidationArgs:
    r = subject.resource
    opts = PolicyResourceOptions(bool(r.get("protect")), list(r.get("ignore_changes") or []),
                                 bool(r.get("delete_before_replace")), [],
                                 PolicyCustomTimeouts(0, 0, 0), [], r.get("parent") or None)
    return ResourceValidationArgs(str(r["type"]), dict(r.get("inputs") or {}), r["urn"],
                                  str(r["name"]), opts, None, dict(subject.config))


def run_rules(subjects: Sequence[PolicySubject], levels: Mapping[str, str]) -> list[Finding]:
    """The pipeline's ``PolicyRun``: every rule of the pack over every subject."""
    out: list[Finding] = []
    for i, subject in enumerate(subjects):
        args = _args(subject)
        for rule in RULES:
            level = levels.get(rule.name, rule.level)
            if level == "disabled":
                continue
            found: list[str] = []

            def report(message: str, _urn: str | None = None, into: list[str] = found) -> None:
                into.append(message)
            rule.validate(args, report)
            out += [Finding(i, rule.name, level, m, rule.remediation) for m in found]
    return out
