"""`gpufleet gateway sync`: point the stack's `*.<domain>` records at the gateways dstack
runs (read from the dstack server), by writing them into the stack config."""

from __future__ import annotations

import datetime
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpufleet.cli.common import EXIT_CHANGES, EXIT_INVALID, EXIT_OK, EXIT_USAGE, format_option

if TYPE_CHECKING:
    from gpufleet.input import SyncedGateway
    from gpufleet.live import SyncReport, Wanted

DSTACK_CONFIG = os.path.join("~", ".dstack", "config.yml")


@click.group()
def gateway() -> None:
    """dstack's gateways and the wildcard records that follow them."""


@gateway.command("sync")
@click.option("--stack", "stack_name", required=True, help="The stack whose records to set.")
@click.option("--cwd", default="stacks", show_default=True, type=click.Path(file_okay=False),
              help="The Pulumi project folder (where `Pulumi.<stack>.yaml` is).")
@click.option("--url", help="The dstack server's URL (default: $DSTACK_SERVER_URL, else "
                            "dstack's CLI config); its token is read from $DSTACK_TOKEN.")
@click.option("--dstack-config", default=DSTACK_CONFIG, show_default=True,
              help="dstack's CLI config (`dstack project add` writes it): the server URL "
                   "and token of each project.")
@click.option("--gateway", "only", multiple=True, metavar="NAME",
              help="Only this gateway (repeatable); the others keep their entries.")
@click.option("--check", is_flag=True,
              help="Write nothing; exit 7 when the stack config no longer matches dstack's "
                   "gateways (a record that would move).")
@format_option("text", "json")
def sync_command(stack_name: str, cwd: str, url: str | None, dstack_config: str,
                 only: Sequence[str], check: bool, fmt: str) -> None:
    """Read where dstack runs each gateway of the stack's files and store it in the stack
    config (`gpufleet:gateways` in Pulumi.<stack>.yaml); the next `pulumi up` points each
    `*.<domain>` record there: A records for the replicas' addresses, an alias or CNAME for
    a load balancer's host name.

    Each gateway is asked for in its dstack project (the fleet's it shares, else
    gateway-NAME), as `gpufleet export dstack` wrote the server config. The token is never
    printed. A gateway dstack has not created, is still creating, failed, or runs on
    another backend or region than the file keeps its previous entry.

    Exit codes: 0 every gateway synced, 1 a gateway not synced (the others are written),
    2 usage, or the server cannot be reached or refuses the token (nothing written),
    7 with --check: the records would move.
    """
    from gpufleet.fileio import folder_lock, write_text
    from gpufleet.input import MAX_FILE_BYTES, read_small_text, set_gateways, stackconfig
    from gpufleet.live import ServerError

    path, text, before, wanted = stack_gateways(stack_name, cwd)
    wanted = [w for w in wanted if not only or w.name in only]
    unknown = sorted(set(only) - {w.name for w in wanted})
    if unknown:
        raise click.UsageError(f"--gateway {unknown[0]}: the stack's files declare no such "
                               "gateway")
    keep = {n: g for n, g in before.items() if only and n not in only}
    try:
        report = read_dstack(wanted, {n: g for n, g in before.items() if n not in keep}, url,
                             dstack_config)
    except ServerError as e:
        click.echo(f"gpufleet gateway sync: {e}; nothing was written", err=True)
        sys.exit(EXIT_USAGE)
    after = {**keep, **report.after}
    if fmt == "json":
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        for line in report.lines() or ["the stack's files declare no gateway"]:
            click.echo(line)
    if check:
        sys.exit(EXIT_CHANGES if report.changed else
                 EXIT_INVALID if report.problems or report.blocked else EXIT_OK)
    if report.changed:
        try:
            new_text = set_gateways(text, after)
            with folder_lock(path):
                if read_small_text(path, MAX_FILE_BYTES) != text:
                    raise stackconfig.StackConfigError(f"{path} changed while gpufleet read "
                                                       "dstack; run the sync again")
                write_text(path, new_text)
        except stackconfig.StackConfigError as e:
            click.echo(f"gpufleet gateway sync: {e}; nothing was written", err=True)
            sys.exit(EXIT_USAGE)
        click.echo(f"wrote {stackconfig.GATEWAYS} to {path}: the records move at the next "
                   f"`pulumi up` (review with `gpufleet diff --state ... --stack-config "
                   f"{path}`)", err=fmt == "json")
    sys.exit(EXIT_INVALID if report.problems or report.blocked else EXIT_OK)


def stack_gateways(stack: str, cwd: str) -> tuple[str, str, Mapping[str, SyncedGateway],
                                                  list[Wanted]]:
    """(path, text, `gpufleet:gateways`, the gateways of its files) of a stack's config;
    usage errors and invalid files exit as their commands do."""
    from gpufleet.input import MAX_FILE_BYTES, read_small_text, stackconfig, validate_paths
    from gpufleet.live import wanted_gateways

    path = os.path.join(cwd, f"Pulumi.{stack}.yaml")
    try:
        text = read_small_text(path, MAX_FILE_BYTES)
        settings = stackconfig.settings_from_config(stackconfig.read_stack_file(path))
    except OSError as e:
        raise click.UsageError(f"cannot read the stack config {path}: {e.strerror or e}; run "
                               f"`pulumi stack init {stack}` in {cwd}, or pass --cwd") from None
    except stackconfig.StackConfigError as e:
        raise click.UsageError(str(e)) from None
    validated = validate_paths(stackconfig.resolve_files(settings.files, Path(cwd)))
    if not validated.ok:
        from gpufleet.diagnostics import render_text

        click.echo(render_text([d for d in validated.diagnostics if d.is_error],
                               validated.sources), err=True)
        sys.exit(EXIT_INVALID)
    return path, text, settings.gateways, wanted_gateways(validated.inputs)


def dstack_cli_config(dstack_config: str) -> str | None:
    """dstack's CLI config (where `dstack project add` keeps each project's server and
    token), or None where there is none; a usage error when it cannot be read."""
    from gpufleet.input import MAX_FILE_BYTES, read_small_text

    path = os.path.expanduser(dstack_config)
    try:
        return read_small_text(path, MAX_FILE_BYTES) if os.path.exists(path) else None
    except OSError as e:
        raise click.UsageError(f"cannot read {path}: {e.strerror or e}") from None


def read_dstack(wanted: list[Wanted], before: Mapping[str, SyncedGateway], url: str | None,
                dstack_config: str) -> SyncReport:
    """Every gateway as the dstack server reports it (ServerError when it cannot be asked)."""
    from gpufleet.live import check_gateways, find_server, gateway_check, http_post, sync

    cli_text = dstack_cli_config(dstack_config)

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    report = sync(wanted, before, lambda project: find_server(project, url, os.environ,
                                                              cli_text, dstack_config),
                  http_post, now)
    return check_gateways(report, gateway_check)
