"""Live commands, through the Pulumi CLI: `up` (with capacity fallback) and `drift`."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from gpufleet.cli.common import (
    EXIT_INVALID,
    EXIT_USAGE,
    finish_report,
    format_option,
    guard_options,
    parse_forbid,
)


@click.command()
@click.option("--stack", "stack_name", required=True, help="The stack to check.")
@click.option("--cwd", default="stacks", show_default=True, type=click.Path(file_okay=False),
              help="The Pulumi project folder.")
@guard_options
@format_option("text", "json", "markdown")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the report to FILE.")
def drift(stack_name: str, cwd: str, forbid: str, allow: Sequence[str],
          max_instances: int | None, fmt: str, out: str | None) -> None:
    """Live drift through the Pulumi CLI: `refresh --preview-only`, then `preview --refresh`.

    Exit codes: 0 no drift, 7 drift or pending changes, 1 failed run or forbidden changes,
    2 usage or no Pulumi CLI.
    """
    from gpufleet.components.run.automation import AutomationStack
    from gpufleet.live import DRIFT_NOTE, LiveError, MissingCli, live_drift

    try:
        runner = AutomationStack.open(stack_name, cwd, why="`gpufleet diff --state "
                                      "EXPORT.json` works without it")
        report = live_drift(runner, stack_name, parse_forbid(forbid), tuple(allow),
                            max_instances)
    except MissingCli as e:
        click.echo(f"gpufleet drift: {e}", err=True)
        sys.exit(EXIT_USAGE)
    except LiveError as e:
        raise click.ClickException(str(e)) from None
    finish_report(report, DRIFT_NOTE, fmt, out)


@click.command()
@click.option("--stack", "stack_name", required=True, help="The stack to deploy.")
@click.option("--cwd", default="stacks", show_default=True, type=click.Path(file_okay=False),
              help="The Pulumi project folder.")
@click.option("--fallback", type=click.IntRange(min=0), default=0, show_default=True,
              help="On a capacity error, move the failed fleet to its next offer and retry, "
                   "at most N times.")
def up(stack_name: str, cwd: str, fallback: int) -> None:
    """`pulumi up` through the Automation API, with capacity fallback (needs the Pulumi CLI).

    Only the clouds' capacity errors (the table in the README's "Locking offers" section)
    move a fleet; the lock file is updated for each move, so the PR of record shows where
    the fleet went. Exit codes: 0 deployed, 1 failed (every attempt listed), 2 usage or no
    Pulumi CLI.
    """
    from gpufleet.components.run.automation import AutomationStack
    from gpufleet.live import LiveError, MissingCli, deploy

    def echo(line: str) -> None:
        click.echo(line.rstrip("\n"))

    try:
        runner = AutomationStack.open(stack_name, cwd, echo, why="`gpufleet plan` and "
                                      "`gpufleet lock` work without it")
        result = deploy(runner, cwd, fallback, echo)
    except MissingCli as e:
        click.echo(f"gpufleet up: {e}", err=True)
        sys.exit(EXIT_USAGE)
    except LiveError as e:
        click.echo(str(e), err=True)
        sys.exit(EXIT_INVALID)
    moved = sum(1 for a in result.attempts if a.moves)
    click.echo(f"gpufleet up: deployed stack {stack_name} in {len(result.attempts)} "
               f"attempt(s)" + (f"; {result.lock_file} was updated: commit it" if moved
                                else ""))
