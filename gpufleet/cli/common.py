"""What every command shares: exit codes, options, and the steps that end a command early
with a located diagnostic or a usage error."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import click

from gpufleet.diagnostics import Diagnostic, render_folded, render_json, render_text
from gpufleet.fileio import STDOUT, check_file, write_chunks

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_CHANGES = 7  # mirrors `pulumi preview --expect-no-changes`

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def format_option(*choices: str) -> Decorator:
    return click.option("--format", "fmt", type=click.Choice(choices), default=choices[0],
                        show_default=True, help="Output format.")


def catalog_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--catalog", "catalog_dir", type=click.Path(file_okay=False),
                        envvar="GPUFLEET_CATALOG_DIR",
                        help="Catalog folder (gpuhunt CSV v2 files); default: the cache "
                             "from `gpufleet catalog update`, else the bundled one.")(f)


def profile_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--profile",
                        help="Profile from profiles.yml (default: the `default: true` one).")(f)


def lock_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--lock", "lock_file", type=click.Path(dir_okay=False),
                        help="The offers lock (default: gpufleet.lock beside the first PATH, "
                             "inside it when it is a folder).")(f)


def locked_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--locked", is_flag=True,
                        help="Fail (exit 1) when the lock is missing or does not cover every "
                             "fleet and gateway as written, instead of picking offers.")(f)


class Finite(click.FloatRange):
    """A float range that refuses nan and infinities (a guard that can never trip)."""

    name = "finite number"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def cost_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--max-cost-increase", type=Finite(min=0), metavar="PCT",
                     help="Fail (exit 1) when the hourly cost rises by more than PCT percent."
                     )(f)
    return click.option("--max-cost-per-hour", type=Finite(min=0), metavar="USD",
                        help="Fail (exit 1) when the fleets cost more than USD per hour.")(f)


def guard_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--max-instances", type=click.IntRange(min=0),
                     help="Fail when more than N instances would be replaced or deleted.")(f)
    f = click.option("--allow", "allow", multiple=True, metavar="GLOB",
                     help="URN or resource-name glob exempt from the guards (repeatable).")(f)
    return click.option("--forbid", default="", metavar="OPS",
                        help="Comma list of ops (replace,delete) that must not touch gateways, "
                             "addresses, DNS records, networks or storage.")(f)


def parse_forbid(text: str) -> tuple[str, ...]:
    ops = tuple(o.strip() for o in text.split(",") if o.strip())
    bad = [o for o in ops if o not in ("create", "update", "replace", "delete")]
    if bad:
        raise click.UsageError(f"--forbid takes create, update, replace, delete; got "
                               f"{', '.join(bad)}")
    return ops


def emit_diagnostics(validated: Any, fmt: str, *, err: bool) -> None:
    """Print diagnostics in the chosen format (text to stderr/stdout, JSON as a list)."""
    if fmt == "json":
        click.echo(render_json(validated.diagnostics), err=err)
    elif validated.diagnostics:  # errors one by one; warnings about many fleets said once
        errors = [d for d in validated.diagnostics if d.is_error]
        warnings = [d for d in validated.diagnostics if not d.is_error]
        text = "\n".join(t for t in (render_text(errors, validated.sources),
                                      render_folded(warnings, validated.sources)) if t)
        click.echo(text, err=err)


def validated_or_exit(paths: Sequence[str], fmt: str, profile: str | None = None) -> Any:
    """Validate inputs; on errors print them (stderr) and exit 1 before any later stage.
    A ``profile`` the files do not define is a usage error."""
    from gpufleet.input import validate_paths
    from gpufleet.offers import UnknownProfile, pick_profile

    result = validate_paths(paths)
    if not result.files:
        raise click.UsageError(f"no YAML files found in {', '.join(paths)}")
    if not result.ok:
        emit_diagnostics(result, "json" if fmt == "json" else "text", err=True)
        sys.exit(EXIT_INVALID)
    try:
        pick_profile(result.inputs.profiles, profile)
    except UnknownProfile as e:
        raise click.UsageError(str(e)) from None
    return result


def load_catalog_or_fail(catalog_dir: str | None) -> Any:
    from gpufleet.offers import CatalogError, load_catalog

    try:
        return load_catalog(catalog_dir)
    except CatalogError as e:
        raise click.ClickException(f"cannot read the catalog: {e}") from None


def lock_or_exit(paths: Sequence[str], lock_file: str | None, fmt: str) -> Any:
    """The offers lock for these paths; a broken lock file is reported and exits 1."""
    from gpufleet.input import load_lock, stackconfig

    lock, result = load_lock(lock_file or stackconfig.default_lock_path(paths))
    if lock is None:
        emit_diagnostics(result, "json" if fmt == "json" else "text", err=True)
        sys.exit(EXIT_INVALID)
    return lock


def compile_errors_exit(diags: Sequence[Diagnostic], sources: Any, fmt: str) -> None:
    click.echo(render_text(diags, sources) if fmt != "json" else render_json(diags), err=True)
    sys.exit(EXIT_INVALID)


def out_option(what: str) -> Decorator:
    return click.option("--out", metavar="FILE",
                        help=f"Write the {what} to FILE (atomically; `-` for standard output) "
                             "instead of standard output.")


def check_out(out: str | None) -> None:
    """Before any work: the --out target can be written (else exit 2, nothing done)."""
    if out:
        check_file(out)


def write_or_print(text: str | Iterable[str], out: str | None, what: str) -> None:
    """``text`` (or its pieces, written as they come) to ``out`` (atomically) or to
    standard output."""
    chunks = (text,) if isinstance(text, str) else text
    write_chunks(out if out else STDOUT, chunks)
    if out and out != STDOUT:
        click.echo(f"{what} written to {out}", err=True)


def finish_report(report: Any, note: str, fmt: str, out: str | None) -> None:
    """Print or write a change report and exit 0 (no changes), 7 (changes) or 1 (guard)."""
    from gpufleet.views import render_change_json, render_change_markdown, render_change_text

    code = EXIT_INVALID if report.violations else (EXIT_CHANGES if report.has_changes
                                                   else EXIT_OK)
    text = {"json": lambda: render_change_json(report, note, code),
            "markdown": lambda: render_change_markdown(report, note),
            "text": lambda: render_change_text(report, note)}[fmt]()
    write_or_print(text, out, "report")
    if report.violations:
        click.echo(f"gpufleet: {len(report.violations)} forbidden change(s)", err=True)
    sys.exit(code)
