"""`gpufleet quota`: every quota the stack needs, offline, per cloud, scope, region and quota,
on-demand and spot apart; with --live beside the current limits (exit 1 on a shortfall)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from gpufleet.cli.common import (
    EXIT_USAGE,
    catalog_option,
    compile_errors_exit,
    format_option,
    load_catalog_or_fail,
    lock_option,
    lock_or_exit,
    profile_option,
    validated_or_exit,
)

if TYPE_CHECKING:
    from gpufleet.compile import FleetDesign, QuotaRow
    from gpufleet.input import Inputs, Lock


@click.command("quota")
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option("--stack", default="dev", show_default=True, help="The stack's name.")
@format_option("text", "json", "markdown")
@click.option("--live", is_flag=True,
              help="Read each quota's limit and use from the clouds (their SDKs' default "
                   "credentials, as `gpufleet preflight`); exit 1 when one falls short.")
@click.option("--save", "save_file", metavar="FILE",
              help="With --live: write the limits read to FILE (JSON, atomically), for the "
                   "backends file's `quotas: {limits: FILE}`.")
@profile_option
@catalog_option
@lock_option
def quota(paths: Sequence[str], stack: str, fmt: str, live: bool, save_file: str | None,
          profile: str | None, catalog_dir: str | None, lock_file: str | None) -> None:
    """Every quota the stack's fleets need at their peak, with the cloud's identifier.

    Compute quotas in the unit each cloud counts (AWS vCPUs per instance family group, GCP
    GPUs per GPU family, Azure vCPUs per VM family and region), on-demand and spot apart,
    and the network quotas the stack's own resources count against; each with its source
    and the cloud's approval lag.
    """
    from gpufleet.backends import traits_of
    from gpufleet.cli.runs import build_report, program_runner
    from gpufleet.compile import compute_rows
    from gpufleet.fileio import WriteError, check_file
    from gpufleet.review import network_rows
    from gpufleet.views import LIMITS_MARKER, quota_json, quota_markdown, quota_text

    if save_file and not live:
        raise click.UsageError("--save writes the limits --live reads: add --live")
    try:
        if save_file:
            check_file(save_file, LIMITS_MARKER)
    except WriteError as e:
        raise click.UsageError(str(e)) from None
    paths = paths or (".",)
    # the program loads in another process meanwhile (ended with the command)
    click.get_current_context().with_resource(program_runner())
    result = validated_or_exit(paths, fmt, profile)
    lock = lock_or_exit(paths, lock_file, fmt)
    catalog = load_catalog_or_fail(catalog_dir)
    # the report's policy violations are not part of a quota answer: the pack does not run
    report, diags = build_report(result, catalog, paths, stack, profile, catalog_dir, lock,
                                 policies=False)
    if report is None:
        compile_errors_exit(diags, result.sources, fmt)
        return
    health = {f.name: f.health for f in result.inputs.fleets}
    rows = compute_rows(report.fleets, catalog, health) + network_rows(report.resources)
    if live:
        _read_live(rows, report.fleets, lock, result.inputs)
    render = {"json": quota_json, "markdown": quota_markdown}.get(fmt, quota_text)
    reserved = [p.name for p in report.fleets if p.reservation and p.nodes > 0]
    reserved += [f"{p.name} ({p.backend}: {traits_of(p.backend).quota_note})"
                 for p in report.fleets if p.nodes > 0 and traits_of(p.backend).quota_note]
    click.echo(render(stack, rows, live, reserved), nl=False)
    if save_file:
        _save(save_file, rows)
    if live and any((r.shortfall or 0) > 0 for r in rows):
        sys.exit(1)


def _read_live(rows: list[QuotaRow], plans: Sequence[FleetDesign], lock: Lock,
               inputs: Inputs) -> None:
    from gpufleet.live import LiveError, MissingAccess, default_probes, needs_from, read_limits

    groups = {b.type: b.settings.get("resource_group") for b in inputs.backends}
    needs = needs_from(plans, lock, inputs.reservations, {}, groups)
    try:
        probes = default_probes({r.backend for r in rows})
        read_limits(rows, needs, probes)
    except MissingAccess as e:
        click.echo(f"gpufleet quota --live: {e}", err=True)
        sys.exit(EXIT_USAGE)
    except LiveError as e:
        raise click.ClickException(str(e)) from None


def _save(path: str, rows: Sequence[QuotaRow]) -> None:
    from datetime import UTC, datetime

    from gpufleet.fileio import WriteError, write_text
    from gpufleet.views import LIMITS_MARKER, limits_json

    try:
        write_text(path, limits_json(rows, datetime.now(UTC).isoformat(timespec="seconds")),
                   LIMITS_MARKER)
    except WriteError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"wrote {path}", err=True)
