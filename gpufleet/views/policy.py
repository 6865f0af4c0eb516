"""Views of the policy pack's rules (`gpufleet policy list`): text, Markdown and JSON. Pure.

The rules are handed in (name, level, description, remediation, off), so views need not
import the pack."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol


class RuleInfo(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def level(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def remediation(self) -> str: ...
    @property
    def how_off(self) -> str: ...


def _record(r: RuleInfo) -> dict[str, Any]:
    return {"name": r.name, "level": r.level, "description": r.description,
            "remediation": r.remediation, "off": r.how_off}


def rules_table(rules: Sequence[RuleInfo]) -> str:
    rows = ["| rule | level | checks | remediation | to turn it off |",
            "|---|---|---|---|---|"]
    rows += [f"| `{r.name}` | {r.level} | {r.description} | {r.remediation} | {r.how_off} |"
             for r in rules]
    return "\n".join(rows)


def render_rules(rules: Sequence[RuleInfo], fmt: str) -> str:
    if fmt == "json":
        return json.dumps([_record(r) for r in rules], indent=2)
    if fmt == "markdown":
        return rules_table(rules)
    lines: list[str] = []
    for r in rules:
        lines.append(f"{r.name:<30} {r.level:<10} {r.description}")
        lines.append(f"{'':<41} fix: {r.remediation}; off: {r.how_off}")
    return "\n".join(lines)
