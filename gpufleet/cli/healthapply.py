"""`gpufleet health PATH... [--apply]`: each fleet's `health` policy (backends file) applied
to the report: decided by ``gpufleet.live.healthpolicy``, carried out here - isolation
through dstack's API, replacement through `gpufleet replace` - and recorded."""

from __future__ import annotations

import datetime as dt
import os
import sys
import urllib.parse
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from gpufleet.cli.common import EXIT_INVALID, EXIT_USAGE

if TYPE_CHECKING:
    from gpufleet.live import Action, HealthReport


def decided(report: HealthReport, paths: Sequence[str], ledger: str | None) -> list[Action]:
    """The policy's actions for the report's sick nodes (the fleets' `health` settings from
    the files at ``paths``; replacements of the last 24 hours from ``ledger``)."""
    from gpufleet.diagnostics import render_text
    from gpufleet.evidence import read_entries
    from gpufleet.input import validate_paths
    from gpufleet.live import HealthPolicy, decide, replaced_since

    validated = validate_paths(list(paths))
    if not validated.ok:
        click.echo(render_text([d for d in validated.diagnostics if d.is_error],
                               validated.sources), err=True)
        sys.exit(EXIT_INVALID)
    policies = {f.name: HealthPolicy.of(f.health) for f in validated.inputs.fleets}
    entries = read_entries(ledger)[0] if ledger and os.path.exists(ledger) else []
    day_ago = dt.datetime.now(dt.UTC) - dt.timedelta(hours=24)
    fleets = {n.fleet for n in report.nodes}
    return decide(report, policies, {f: replaced_since(entries, f, day_ago) for f in fleets})


def carry_out(actions: Sequence[Action], stack_name: str | None, cwd: str, url: str | None,
              dstack_config: str, ledger: str | None, yes: bool) -> int:
    """Isolate and replace as decided (after asking, unless ``yes``); 0 all done, 1 one
    failed or was refused."""
    from gpufleet.cli.gateway import dstack_cli_config
    from gpufleet.cli.live import interactive, replace
    from gpufleet.live import ServerError, find_server, http_post

    work = [a for a in actions if a.do in ("isolate", "replace")]
    if not work:
        return 0
    if any(a.do == "replace" for a in work) and not stack_name:
        raise click.UsageError("a replacement runs `gpufleet replace` on the stack: give "
                               "--stack (and --cwd)")
    if not yes:
        if not interactive():
            raise click.UsageError("gpufleet health --apply isolates and replaces nodes and "
                                   "asks first: run it on a terminal, or pass --yes")
        if not click.confirm("gpufleet health: carry out these actions?", default=False):
            click.echo("gpufleet health: not confirmed; nothing was changed", err=True)
            return 1
    failed = 0
    cli_text = dstack_cli_config(dstack_config)
    ctx = click.get_current_context()
    for a in work:
        n = a.node
        if a.do == "isolate":
            try:
                server = find_server(n.fleet, url, os.environ, cli_text, dstack_config)
                path = f"/api/project/{urllib.parse.quote(n.fleet, safe='')}/fleets/" \
                       "delete_instances"
                status, _ = http_post(server.url + path, {"name": n.fleet,
                                                          "instance_nums": [n.instance_num]},
                                      server.token)
            except ServerError as e:
                status, why = 0, str(e)
            else:
                why = f"HTTP {status}"
            done = status == 200
            click.echo(f"gpufleet health: {'isolated' if done else 'could not isolate'} "
                       f"{n.fleet}/{n.node} (dstack instance {n.instance_num})"
                       + ("" if done else f": {why}"))
            _record(ledger, n.fleet, n.node, "isolate", 0 if done else 1)
            failed += not done
            continue
        try:
            ctx.invoke(replace, fleet=n.fleet, nodes=[n.node], stack_name=stack_name,
                       cwd=cwd, dry_run=False, yes=True, ledger=ledger)
            code = 0
        except SystemExit as e:
            code = int(e.code or 0) if isinstance(e.code, int) else EXIT_USAGE
        failed += code != 0
    return 1 if failed else 0


def _record(ledger: str | None, fleet: str, node: str, action: str, code: int) -> None:
    from gpufleet.cli.verdicts import Record, record_verdict

    if ledger:
        record_verdict(Record(ledger, fleet), "health-action",
                       {"action": action, "nodes": [node]}, code, 1)
