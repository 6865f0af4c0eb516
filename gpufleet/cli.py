"""Command line: thin click commands that parse options, run a pipeline and return an exit code.

Exit codes: 0 ok, 1 invalid input (diagnostics printed), 2 usage error, 3 internal error.
Heavy modules (pulumi, gpuhunt) are imported inside the commands that need them.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import click

from gpufleet import __version__
from gpufleet.diagnostics import render_json, render_text

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


def _format_option(*choices: str) -> Callable[[Any], Any]:
    return click.option("--format", "fmt", type=click.Choice(choices), default=choices[0],
                        show_default=True, help="Output format.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpufleet")
@click.option("-v", "--verbose", is_flag=True, help="Show tracebacks of internal errors.")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """Validate, price and compile dstack-format GPU fleets and gateways."""
    ctx.obj = {"verbose": verbose}


def emit_diagnostics(validated: Any, fmt: str, *, err: bool) -> None:
    """Print diagnostics in the chosen format (text to stderr/stdout, JSON as a list)."""
    if fmt == "json":
        click.echo(render_json(validated.diagnostics), err=err)
    elif validated.diagnostics:
        click.echo(render_text(validated.diagnostics, validated.sources), err=err)


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@_format_option("text", "json")
def validate(paths: Sequence[str], fmt: str) -> None:
    """Check fleet, gateway, profiles and backends files (default: the current folder)."""
    from gpufleet.inputs import validate_paths

    result = validate_paths(paths or ["."])
    if not result.files:
        raise click.UsageError(f"no YAML files found in {', '.join(paths or ['.'])}")
    emit_diagnostics(result, fmt, err=False)
    errors = sum(d.is_error for d in result.diagnostics)
    warnings = len(result.diagnostics) - errors
    if fmt == "text":
        i = result.inputs
        counts = (f"{len(i.fleets)} fleet(s), {len(i.gateways)} gateway(s), "
                  f"{len(i.profiles)} profile(s), {len(i.backends)} backend config(s)")
        if errors:
            click.echo(f"{errors} error(s), {warnings} warning(s) in {len(result.files)} file(s)")
        else:
            click.echo(f"ok: {len(result.files)} file(s), {counts}"
                       + (f", {warnings} warning(s)" if warnings else ""))
    sys.exit(EXIT_INVALID if errors else EXIT_OK)


@cli.command()
@click.argument("kind", type=click.Choice(["fleet", "gateway", "profiles", "backends", "defs"]))
def schema(kind: str) -> None:
    """Print the JSON Schema of a file kind."""
    from gpufleet.schema_files import schema_text

    click.echo(schema_text(kind), nl=False)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run the CLI and map every outcome to an exit code, never a traceback."""
    verbose = "-v" in (argv or sys.argv[1:]) or "--verbose" in (argv or sys.argv[1:])
    try:
        cli.main(args=argv, prog_name="gpufleet", standalone_mode=False)
    except click.exceptions.Exit as e:
        return int(e.exit_code)
    except click.UsageError as e:
        e.show()
        return EXIT_USAGE
    except click.ClickException as e:
        e.show()
        return EXIT_INVALID
    except click.Abort:
        click.echo("aborted", err=True)
        return EXIT_INVALID
    except SystemExit as e:
        return int(e.code or 0) if not isinstance(e.code, str) else EXIT_INVALID
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        if verbose:
            traceback.print_exc()
        click.echo(f"gpufleet: internal error: {type(e).__name__}: {e}"
                   + ("" if verbose else " (run with -v for the traceback)"), err=True)
        return EXIT_INTERNAL
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
