"""`gpufleet policy list`: the guardrail rules `plan` runs."""

from __future__ import annotations

import click

from gpufleet.cli.common import format_option


@click.group()
def policy() -> None:
    """The guardrail rules `plan` runs offline and `pulumi preview --policy-pack policy/` runs."""


@policy.command("list")
@format_option("text", "markdown", "json")
def policy_list(fmt: str) -> None:
    """Print every rule with its level, what it checks and how to turn it off."""
    from gpufleet.policy.rules import RULES
    from gpufleet.views import render_rules

    click.echo(render_rules(RULES, fmt))
