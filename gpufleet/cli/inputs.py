"""Commands that read inputs and the catalog: `validate`, `schema`, `offers`, `catalog`."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Sequence

import click

from gpufleet.backends import SUPPORTED_BACKENDS
from gpufleet.cli.common import (
    EXIT_INVALID,
    EXIT_OK,
    catalog_option,
    emit_diagnostics,
    format_option,
    load_catalog_or_fail,
    profile_option,
    validated_or_exit,
)
from gpufleet.diagnostics import render_text


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@format_option("text", "json")
def validate(paths: Sequence[str], fmt: str) -> None:
    """Check fleet, gateway, profiles and backends files (default: the current folder, where
    only files that look like dstack's or gpufleet's are read; a PATH is read whole)."""
    from gpufleet.input import validate_paths

    result = validate_paths(paths or ["."], only_ours=not paths)
    skipped = (f"; skipped {len(result.skipped)} YAML file(s) that are not fleet, gateway, "
               "profiles or backends files (name them to check them anyway)"
               if result.skipped else "")
    if not result.files:
        raise click.UsageError(f"no fleet, gateway, profiles or backends files found in "
                               f"{', '.join(paths or ['.'])}{skipped}")
    emit_diagnostics(result, fmt, err=False)
    errors = sum(d.is_error for d in result.diagnostics)
    warnings = len(result.diagnostics) - errors
    if fmt == "text":
        i = result.inputs
        ssh = f" (+{len(i.ssh_fleets)} ssh fleet(s))" if i.ssh_fleets else ""
        counts = (f"{len(i.fleets)} fleet(s){ssh}, {len(i.gateways)} gateway(s), "
                  f"{len(i.profiles)} profile(s), {len(i.backends)} backend config(s)"
                  + (f", {len(result.locks)} lock file(s)" if result.locks else ""))
        if errors:
            click.echo(f"{errors} error(s), {warnings} warning(s) in {len(result.files)} file(s)"
                       + skipped)
        else:
            click.echo(f"ok: {len(result.files)} file(s), {counts}"
                       + (f", {warnings} warning(s)" if warnings else "") + skipped)
    sys.exit(EXIT_INVALID if errors else EXIT_OK)


@click.command()
@click.argument("kind", type=click.Choice(["fleet", "gateway", "volume", "profiles",
                                           "backends", "lock", "defs"]))
def schema(kind: str) -> None:
    """Print the JSON Schema of a file kind."""
    from gpufleet.input import schema_text

    click.echo(schema_text(kind), nl=False)


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--fleet", "fleet_names", multiple=True, help="Only this fleet (repeatable).")
@click.option("--max", "limit", type=click.IntRange(min=1), default=10, show_default=True,
              help="Offers shown per fleet.")
@profile_option
@catalog_option
@format_option("text", "json")
def offers(paths: Sequence[str], fleet_names: Sequence[str], limit: int, profile: str | None,
           catalog_dir: str | None, fmt: str) -> None:
    """Show the cheapest matching offers for each fleet, like `dstack apply` does."""
    from gpufleet.offers import select_all
    from gpufleet.views import render_offers_json, render_offers_text

    result = validated_or_exit(paths, fmt, profile)
    inputs = result.inputs
    if fleet_names:
        unknown = sorted(set(fleet_names) - {f.name for f in inputs.fleets})
        if unknown:
            raise click.UsageError(f"no fleet named {', '.join(unknown)} in the given files")
        inputs = dataclasses.replace(
            inputs, fleets=tuple(f for f in inputs.fleets if f.name in fleet_names))
    if not inputs.fleets:
        raise click.UsageError("no fleets in the given files")
    catalog = load_catalog_or_fail(catalog_dir)
    selections = select_all(inputs, catalog, profile)
    errors = [s.error for s in selections if s.error]
    if fmt == "json":
        click.echo(render_offers_json(selections, catalog, limit))
    else:
        click.echo(render_offers_text(selections, catalog, limit))
        if errors:
            click.echo(render_text(errors, result.sources), err=True)
    sys.exit(EXIT_INVALID if errors else EXIT_OK)


@click.group(invoke_without_command=True)
@click.option("--gpu", help="Only this GPU (e.g. H100).")
@click.option("--backend", type=click.Choice(list(SUPPORTED_BACKENDS)),
              help="Only this backend.")
@catalog_option
@format_option("text", "json")
@click.pass_context
def catalog(ctx: click.Context, gpu: str | None, backend: str | None, catalog_dir: str | None,
            fmt: str) -> None:
    """List GPUs with their count options and price ranges per backend, then the CPU-only
    families (offered to fleets that allow `gpu: 0`)."""
    if ctx.invoked_subcommand is not None:
        return
    from gpufleet.views import catalog_summary, render_catalog_text

    cat = load_catalog_or_fail(catalog_dir)
    summary = catalog_summary(cat, gpu, backend)
    if gpu and not summary:
        from gpufleet.diagnostics import did_you_mean

        known = sorted({r.gpu_name for r in cat.rows if r.gpu_name})
        hint = did_you_mean(gpu, known) or f"known GPUs: {', '.join(known)}"
        raise click.ClickException(f"no GPU named '{gpu}' in the {cat.describe()}; {hint}")
    if fmt == "json":
        click.echo(json.dumps({"catalog": {"source": cat.source, "version": cat.version,
                                           "date": cat.date}, "gpus": summary}, indent=2))
    else:
        click.echo(render_catalog_text(cat, summary))


@catalog.command("update")
@click.option("--url", help="Catalog base URL (default: $GPUHUNT_CATALOG_URL or gpuhunt's).")
@click.option("--dest", type=click.Path(file_okay=False),
              help="Cache location (default: ~/.cache/gpufleet/catalog).")
@click.option("--timeout", type=float, default=300.0, show_default=True,
              help="Seconds for each download, whole (not per read).")
def catalog_update(url: str | None, dest: str | None, timeout: float) -> None:
    """Download the newest catalogs through gpuhunt's published layout into the cache."""
    from pathlib import Path

    from gpufleet.offers import UpdateError, update_catalog

    try:
        res = update_catalog(url, Path(dest) if dest else None, timeout=timeout)
    except UpdateError as e:
        raise click.ClickException(f"catalog update failed, previous catalog kept: {e}") \
            from None
    for b, v in res.versions.items():
        skipped = f", {res.skipped[b]} malformed row(s) skipped" if res.skipped[b] else ""
        click.echo(f"{b}: version {v}, {res.rows[b]} rows{skipped}")
    click.echo(f"catalog updated: {res.path}")
