"""`gpufleet health`: each node's GPU health as dstack's DCGM checks report it."""

from __future__ import annotations

import datetime
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from gpufleet.cli.common import EXIT_USAGE
from gpufleet.cli.gateway import DSTACK_CONFIG, dstack_cli_config
from gpufleet.cli.handoff import stack_outputs, stack_source

if TYPE_CHECKING:
    from gpufleet.live import HealthReport

MARK = {"healthy": "ok", "warning": "WARNING", "failure": "FAILURE", "unknown": "UNKNOWN"}


@click.command("health")
@click.argument("paths", nargs=-1)
@stack_source
@click.option("--fleet", "only", multiple=True, metavar="NAME",
              help="Only this fleet (repeatable).")
@click.option("--url", help="The dstack server's URL (default: $DSTACK_SERVER_URL, else "
                            "dstack's CLI config); its token is read from $DSTACK_TOKEN.")
@click.option("--dstack-config", default=DSTACK_CONFIG, show_default=True,
              help="dstack's CLI config: the server URL and token of each project.")
@click.option("--max-age", type=click.IntRange(1, 24 * 60), default=15, show_default=True,
              metavar="MINUTES", help="A node whose latest check is older is unknown.")
@click.option("--warnings-fail", is_flag=True, help="A warning exits 1 like a failure.")
@click.option("--record", "ledger", type=click.Path(dir_okay=False), metavar="LEDGER",
              help="Append each fleet's verdict to this evidence ledger.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]),
              default="text", show_default=True, help="Output format.")
@click.option("--apply", is_flag=True, help="Carry out each fleet's `health` policy (the "
              "backends file among PATH...): isolate or replace sick nodes.")
@click.option("--yes", "-y", is_flag=True, help="With --apply: do not ask first.")
def health(paths: Sequence[str], stack_name: str | None, cwd: str, outputs_file: str | None,
           state_file: str | None, only: Sequence[str], url: str | None, dstack_config: str,
           max_age: int, warnings_fail: bool, ledger: str | None, fmt: str, apply: bool,
           yes: bool) -> None:
    """Report every node of the stack's fleets healthy, warning, failure or unknown, as the
    DCGM health checks dstack's server keeps for it say (each fleet is read from its dstack
    project, as `gpufleet export dstack` wrote the server config), with the incidents of a
    sick node and since when.

    With the fleets' files (PATH...: the backends file's `fleets: {NAME: {health: ...}}`),
    it also says what each fleet's policy does about a failing or warning node (replace,
    isolate, report; within max_replacements_per_day and spares); `--apply` carries that
    out: isolation removes the instance from dstack's fleet, replacement runs `gpufleet
    replace` (needs --stack); every action is recorded with --record.

    Exit codes: 0 every node healthy, 1 a node failing (or warning, with --warnings-fail),
    or an action that failed, 2 no verdict: a node dstack does not hold, cannot reach, has
    no recent check for, or a server that cannot be asked (also usage errors).
    """
    from gpufleet.handoff import ExportError
    from gpufleet.live import HealthReport, ServerError, fleet_nodes

    if not (stack_name or outputs_file or state_file):
        raise click.UsageError("give --stack, --outputs or --state")
    try:
        fleets = fleet_nodes(stack_outputs(stack_name, cwd, outputs_file, state_file,
                                           "health"), only)
    except ExportError as e:
        click.echo(f"gpufleet health: {e}", err=True)
        sys.exit(EXIT_USAGE)
    unknown = sorted(set(only) - set(fleets))
    if unknown:
        raise click.UsageError(f"--fleet {unknown[0]}: the stack has no fleet of that name "
                               "with nodes")
    report = HealthReport()
    try:
        _read(report, fleets, url, dstack_config, max_age)
    except ServerError as e:
        click.echo(f"gpufleet health: {e}", err=True)
        sys.exit(2)
    code = report.exit_code(warnings_fail)
    if ledger:
        _record(ledger, report, fleets, warnings_fail)
    click.echo(_render(report, fmt, code))
    if paths or apply:
        from gpufleet.cli.healthapply import carry_out, decided

        actions = decided(report, paths, ledger)
        if any(a.node.status == "warning" and a.wants != "report" for a in actions):
            code = 1  # a warning its fleet's policy acts on counts as a failure
        for action in actions:
            click.echo(f"policy: {action.text()}", err=fmt == "json")
        if actions and not apply:
            click.echo("(a dry run: --apply carries these out)", err=fmt == "json")
        if apply and carry_out(actions, stack_name, cwd, url, dstack_config, ledger, yes):
            code = 1
    sys.exit(code)


def _read(report: HealthReport, fleets: dict[str, list[tuple[str, str]]], url: str | None,
          dstack_config: str, max_age: int) -> None:
    from gpufleet.live import find_server, http_post, read_fleet_health

    cli_text = dstack_cli_config(dstack_config)
    now = datetime.datetime.now(datetime.UTC)
    for fleet, nodes in fleets.items():
        server = find_server(fleet, url, os.environ, cli_text, dstack_config)
        report.nodes += read_fleet_health(http_post, server, fleet, nodes, now,
                                   datetime.timedelta(minutes=max_age))


def _record(ledger: str, report: HealthReport, fleets: dict[str, list[tuple[str, str]]],
            warnings_fail: bool) -> None:
    from gpufleet.cli.verdicts import Record, record_verdict
    from gpufleet.live import HealthReport as Report

    for fleet in fleets:
        mine = Report([n for n in report.nodes if n.fleet == fleet])
        record_verdict(Record(ledger, fleet), "health", {
            **mine.counts(fleet), "source": "dstack health checks (DCGM)",
            "nodes": {n.node: n.status for n in mine.nodes}},
            mine.exit_code(warnings_fail), len(mine.nodes))


def _render(report: HealthReport, fmt: str, code: int) -> str:
    if fmt == "json":
        return json.dumps({"exit_code": code, "nodes": [
            {"fleet": n.fleet, "node": n.node, "address": n.address, "status": n.status,
             "since": n.since, "incidents": list(n.incidents), "why": n.why}
            for n in report.nodes]}, indent=2)
    if fmt == "markdown":
        rows = ["| fleet | node | status | since | incidents |", "|---|---|---|---|---|"]
        rows += [f"| {n.fleet} | {n.node} | {n.status} | {n.since or '-'} | "
                 f"{'; '.join(n.incidents) or n.why or '-'} |" for n in report.nodes]
        return "\n".join(rows)
    lines = []
    for n in report.nodes:
        detail = "; ".join(n.incidents) if n.incidents else n.why
        since = f" since {n.since}" if n.since and n.status != "healthy" else ""
        lines.append(f"{MARK[n.status]:8} {n.fleet}/{n.node} ({n.address}){since}"
                     + (f": {detail}" if detail else ""))
    lines.append({0: "healthy: every node", 1: "FAIL: replace or isolate the failing nodes "
                  "(`gpufleet replace FLEET NODE...`)",
                  2: "no verdict: a node's health is not known"}[code])
    return "\n".join(lines)
