"""Live commands, through the Pulumi CLI: `up` (with capacity fallback) and `drift`."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from gpufleet.cli.common import (
    EXIT_INVALID,
    EXIT_USAGE,
    Finite,
    check_out,
    finish_report,
    format_option,
    guard_options,
    out_option,
    parse_forbid,
    write_or_print,
)
from gpufleet.cli.gateway import DSTACK_CONFIG

if TYPE_CHECKING:  # the live stage loads only when a live command runs
    from gpufleet.live import UpOptions, UpResult


@click.command()
@click.option("--stack", "stack_name", required=True, help="The stack to check.")
@click.option("--cwd", default="stacks", show_default=True, type=click.Path(file_okay=False),
              help="The Pulumi project folder.")
@guard_options
@format_option("text", "json", "markdown")
@out_option("report")
@click.option("--no-gateways", "skip_gateways", is_flag=True,
              help="Do not ask the dstack server whether the gateways' records still point "
                   "at its gateways.")
@click.option("--dstack-config", default=DSTACK_CONFIG, show_default=True,
              help="dstack's CLI config, for the server URL and token (or $DSTACK_SERVER_URL "
                   "and $DSTACK_TOKEN).")
def drift(stack_name: str, cwd: str, forbid: str, allow: Sequence[str],
          max_instances: int | None, fmt: str, out: str | None, skip_gateways: bool,
          dstack_config: str) -> None:
    """Live drift through the Pulumi CLI: `refresh --preview-only`, then `preview --refresh`;
    and each synced gateway's record against where the dstack server now runs it (a record
    dstack's gateway has moved away from is drift).

    Exit codes: 0 no drift, 7 drift or pending changes, 1 failed run, forbidden changes or
    gateway records that could not be checked, 2 usage or no Pulumi CLI.
    """
    from gpufleet.components.run.automation import AutomationStack
    from gpufleet.live import DRIFT_NOTE, LiveError, MissingCli, live_drift

    check_out(out)
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
    if not skip_gateways:
        report = _gateway_drift(report, stack_name, cwd, dstack_config)
    finish_report(report, DRIFT_NOTE, fmt, out)


def _gateway_drift(report: Any, stack: str, cwd: str, dstack_config: str) -> Any:
    """The drift report with each synced gateway's record checked against dstack; a check
    that cannot be made is a failure (exit 1), said in the report."""
    import dataclasses

    from gpufleet.cli.gateway import read_dstack, stack_gateways
    from gpufleet.live import ServerError, record_drift

    _, _, before, wanted = stack_gateways(stack, cwd)
    if not before:
        return report
    try:
        found = read_dstack(wanted, before, None, dstack_config)
    except ServerError as e:
        return dataclasses.replace(report, violations=(
            *report.violations, f"gateway records not checked against dstack: {e} (pass "
            "--no-gateways to skip them)"))
    blocked = [f"gateway {n}: {d}" for n, v, d in found.checks if v == "blocked"]
    return dataclasses.replace(report, changes=(*report.changes,
                                                *record_drift(found, stack)),
                               violations=(*report.violations, *blocked))


@click.command()
@click.option("--stack", "stack_name", required=True, help="The stack to deploy.")
@click.option("--cwd", default="stacks", show_default=True, type=click.Path(file_okay=False),
              help="The Pulumi project folder.")
@click.option("--fallback", type=click.IntRange(min=0), default=0, show_default=True,
              help="On a capacity error, move a fleet that runs no nodes yet to its next "
                   "offer and retry, at most N times.")
@click.option("--allow-move", "allow_move", multiple=True, metavar="FLEET",
              help="With --fallback: move this fleet even though it runs nodes (they are "
                   "all replaced). Repeatable.")
@click.option("--yes", "-y", is_flag=True,
              help="Do not ask before changing anything (required without a terminal).")
@click.option("--max-instances", type=click.IntRange(min=0),
              help="Stop before the update when it would replace or delete more than N "
                   "instances.")
@click.option("--max-cost-per-hour", type=Finite(min=0), metavar="USD",
              help="Stop before the update when the fleets would cost more than USD per hour.")
@click.option("--skip-preflight", is_flag=True,
              help="Do not run `gpufleet preflight` first (reservations, zones, quotas).")
@click.option("--allow-pending-quota", is_flag=True,
              help="Launch the nodes of fleets whose quota the plan finds short (`quotas: "
                   "{request: true}` files the increase either way).")
def up(stack_name: str, cwd: str, fallback: int, allow_move: Sequence[str], yes: bool,
       max_instances: int | None, max_cost_per_hour: float | None,
       skip_preflight: bool, allow_pending_quota: bool) -> None:
    """`pulumi up` through the Automation API (needs the Pulumi CLI): a preview first, with
    the changes, the nodes it replaces and the cost before -> after; then the question.

    \b
    Capacity errors (--fallback):
      aws    InsufficientInstanceCapacity, InsufficientCapacityOnHost,
             InsufficientReservedInstanceCapacity, Unsupported
      gcp    ZONE_RESOURCE_POOL_EXHAUSTED(_WITH_DETAILS), insufficientCapacity
      azure  SkuNotAvailable, AllocationFailed, ZonalAllocationFailed,
             OverconstrainedAllocationRequest, OverconstrainedZonalAllocationRequest
      and the providers' messages for them

    On one of them a fleet with no nodes yet moves to its next offer and the deploy
    starts over (preview and question included); a fleet that runs nodes is never moved
    without --allow-move. The lock file is updated for each move, so the PR of record
    shows where the fleet went. Exit codes:
    0 deployed (or nothing to change), 1 failed, refused by a guard, by the preflight or
    not confirmed, 2 usage, no terminal without --yes, no Pulumi CLI, or no cloud
    credentials for the preflight.
    """
    from gpufleet.live import UpOptions, default_probes

    options = UpOptions(fallback, frozenset(allow_move), max_instances, max_cost_per_hour,
                        None if skip_preflight else default_probes,
                        None if skip_preflight else _network_needs,
                        allow_pending_quota)
    result = _deploy(stack_name, cwd, options, yes)
    if result.unchanged:
        click.echo(f"gpufleet up: stack {stack_name} is up to date; nothing was changed")
        return
    moved = sum(1 for a in result.attempts if a.moves and a.outcome != "succeeded")
    click.echo(f"gpufleet up: deployed stack {stack_name} in {len(result.attempts)} "
               f"attempt(s)" + (f"; {result.lock_file} was updated: commit it" if moved
                                else ""))


def _deploy(stack_name: str, cwd: str, options: UpOptions, yes: bool) -> UpResult:
    """`gpufleet up`'s run through the Automation API; exits with the error's code."""
    from gpufleet.components.run.automation import AutomationStack
    from gpufleet.live import LiveError, MissingAccess, MissingCli, UpPreview, deploy

    def echo(line: str) -> None:
        click.echo(line.rstrip("\n"))

    def confirm(_preview: UpPreview) -> bool:
        return yes or click.confirm("gpufleet up: perform this update?", default=False)

    try:
        runner = AutomationStack.open(stack_name, cwd, echo, why="`gpufleet plan` and "
                                      "`gpufleet lock` work without it")
        if not yes and not interactive():
            raise click.UsageError("gpufleet up changes infrastructure and asks first: run "
                                   "it on a terminal, or pass --yes (after reviewing "
                                   "`gpufleet plan` / `gpufleet diff`)")
        return deploy(runner, cwd, options, echo, confirm)
    except MissingCli as e:
        click.echo(f"gpufleet up: {e}", err=True)
        sys.exit(EXIT_USAGE)
    except MissingAccess as e:
        click.echo(f"gpufleet up: the preflight cannot ask the cloud: {e} (or pass "
                   "--skip-preflight)", err=True)
        sys.exit(EXIT_USAGE)
    except LiveError as e:
        click.echo(str(e), err=True)
        sys.exit(EXIT_INVALID)


@click.command()
@click.option("--stack", "stack_name", required=True, help="The stack to check.")
@click.option("--cwd", default="stacks", show_default=True, type=click.Path(file_okay=False),
              help="The Pulumi project folder (its Pulumi.<stack>.yaml is read).")
@click.option("--state", "state_file", type=click.Path(dir_okay=False),
              help="The stack's `pulumi stack export`, for the nodes it runs already "
                   "(default: read through the Pulumi CLI when there is one).")
@format_option("text", "json")
@out_option("report")
def preflight(stack_name: str, cwd: str, state_file: str | None, fmt: str,
              out: str | None) -> None:
    """Ask the clouds whether the stack's nodes can start, before `pulumi up` (which `up`
    does first): each fleet's instance type is offered in its zone; the reservation it
    names exists, is active, is in that zone and has room for the nodes still to start;
    without one, the region's quota (vCPUs on AWS and Azure, GPUs on GCP) covers them.
    Fleets sharing a reservation or quota are counted together.

    Needs the clouds' SDKs (pip install 'gpufleet[live]') and credentials, not the Pulumi
    CLI. Exit codes: 0 every check passed, 1 a check failed, 2 usage, no SDK or no
    credentials (the message says which).
    """
    import json

    from gpufleet.live import LiveError, MissingAccess, check_stack, default_probes, stack_needs
    from gpufleet.review import running_nodes

    check_out(out)
    try:
        files, lock_path, profile, catalog = _stack_files(stack_name, cwd)
        state, known = _state(stack_name, cwd, state_file)
        needs = stack_needs(files, profile, catalog, lock_path,
                            running_nodes(state) if state is not None else {})
        network = _network_needs(stack_name, files, profile, catalog, lock_path, state)
        report = check_stack(stack_name, needs, default_probes, running_known=known,
                             network=network)
    except MissingAccess as e:
        click.echo(f"gpufleet preflight: {e}", err=True)
        sys.exit(EXIT_USAGE)
    except LiveError as e:  # ProbeError, StackFilesError included
        click.echo(f"gpufleet preflight: {e}", err=True)
        sys.exit(EXIT_INVALID)
    text = (json.dumps(report.to_json(), indent=2) if fmt == "json"
            else "\n".join(report.lines())) + "\n"
    write_or_print(text, out, "report")
    sys.exit(report.exit_code)


def _stack_files(stack: str, cwd: str) -> tuple[list[str], str, str | None, str | None]:
    from pathlib import Path

    from gpufleet.input import stackconfig
    from gpufleet.live import stack_files

    path = Path(cwd) / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise click.UsageError(f"no stack config {path}: run `pulumi stack init {stack}` in "
                               f"{cwd} and set gpufleet:files (see the README), or pass --cwd")
    try:
        config = stackconfig.read_stack_file(str(path))
    except stackconfig.StackConfigError as e:
        raise click.UsageError(str(e)) from None
    return stack_files({k: v for k, v in config.items() if v is not None}, cwd)


def _state(stack: str, cwd: str, state_file: str | None) -> tuple[Any, bool]:
    """The stack's state (what it runs and holds now), and whether it was read at all."""
    from gpufleet.input import uncollected
    from gpufleet.review import StateError, parse_export

    if state_file is not None:
        try:
            with open(state_file, encoding="utf-8") as f, uncollected(freeze=True):
                return parse_export(f.read(), state_file), True
        except OSError as e:
            raise click.UsageError(f"cannot read {state_file}: {e.strerror or e}") from None
        except StateError as e:
            raise click.UsageError(str(e)) from None
    from gpufleet.components.run.automation import AutomationStack
    from gpufleet.live import MissingCli

    try:
        runner = AutomationStack.open(stack, cwd, why="pass --state EXPORT.json instead")
        import json

        return parse_export(json.dumps(runner.export()), "the stack"), True
    except MissingCli:
        return None, False


def _network_needs(stack: str, files: Sequence[str], profile: str | None,
                   catalog: str | None, lock_path: str, state: Any) -> list[Any]:
    """What the stack would hold of each network quota (the offline run of its program)
    against what its state holds now."""
    from gpufleet.compile.runs import RunInputs
    from gpufleet.components.run.plan import run_offline
    from gpufleet.live import compile_stack, network_needs, state_records

    _, compiled, _ = compile_stack(files, profile, catalog, lock_path)
    run = run_offline(RunInputs(tuple(files), None, profile, catalog, stack), compiled)
    return network_needs([r.to_json() for r in run.sorted()], state_records(state))


@click.command()
@click.argument("fleet")
@click.argument("nodes", nargs=-1, required=True)
@click.option("--stack", "stack_name", required=True, help="The stack the fleet is in.")
@click.option("--cwd", default="stacks", show_default=True, type=click.Path(file_okay=False),
              help="The Pulumi project folder.")
@click.option("--dry-run", is_flag=True,
              help="Print the URNs and the preview; change nothing.")
@click.option("--yes", "-y", is_flag=True,
              help="Do not ask before replacing (required without a terminal).")
@click.option("--record", "ledger", type=click.Path(dir_okay=False), metavar="LEDGER",
              help="Append the replacement (its nodes, start, end and hours, and whether it "
                   "succeeded) to this evidence ledger, for `gpufleet contract report`.")
def replace(fleet: str, nodes: Sequence[str], stack_name: str, cwd: str, dry_run: bool,
            yes: bool, ledger: str | None) -> None:
    """Replace exactly these nodes of FLEET (names like a4-node-1, or indexes like 1):
    `pulumi up --replace` on their URNs, through the Automation API (needs the Pulumi CLI).

    The program is unchanged, so each node comes back with the same name, in the same
    placement group / COLLOCATED policy, reservation and network. A preview runs first and
    must show these replacements and nothing else; otherwise nothing is changed. An Azure
    scale set's instances (by instance id, name or computer name) are redeployed by Azure
    onto new hosts - the same instance, name, addresses and placement group - with your
    Azure credentials (`az login`; `pip install 'gpufleet[live]'`).

    The replaced nodes' positions in the network the cloud exposes (`gpufleet topology`)
    are shown before (with --dry-run too) and read again after: a node that came back
    further away than the fleet's max_spread (backends file) is named with its old and new
    position, exit 1.

    Exit codes: 0 replaced (or --dry-run), 1 refused, not confirmed or failed, or a
    replacement beyond max_spread, 2 usage, no terminal without --yes, or no Pulumi CLI.
    """
    from gpufleet.components.run.automation import AutomationStack
    from gpufleet.live import (
        LiveError,
        MissingAccess,
        MissingCli,
        ScaleSetRedeploy,
        replace_nodes,
        scale_set_api,
        topology_reader,
    )

    def confirm(_plan: object) -> bool:
        return yes or click.confirm("gpufleet replace: replace these nodes?", default=False)


    recorded = _replace_recorder(ledger if not dry_run else None, fleet, nodes)
    try:
        runner = AutomationStack.open(stack_name, cwd, why="`gpufleet diff` shows changes "
                                      "offline")
        if not dry_run and not yes and not interactive():
            raise click.UsageError("gpufleet replace deletes and recreates nodes and asks "
                                   "first: run it on a terminal, or pass --yes (after "
                                   "--dry-run)")
        shown = replace_nodes(runner, cwd, fleet, nodes, click.echo, confirm, dry_run,
                              scale_set_api, topology_reader)
    except (MissingCli, MissingAccess) as e:
        click.echo(f"gpufleet replace: {e}", err=True)
        sys.exit(EXIT_USAGE)
    except LiveError as e:
        # a replacement that happened but left the fleet beyond max_spread is recorded as
        # done (and failed); one refused, not confirmed or failed replaced nothing
        recorded(1, str(e)[:500], bool(getattr(e, "replaced", False)))
        click.echo(f"gpufleet replace: {e}", err=True)
        sys.exit(EXIT_INVALID)
    if not dry_run:
        recorded(0, "replaced", True)
        names = ", ".join(shown.nodes)
        done = f"redeployed {names} onto new hosts" if isinstance(shown, ScaleSetRedeploy) \
            else f"replaced {names}"
        click.echo(f"gpufleet replace: {done} in stack {stack_name}")


def _replace_recorder(ledger: str | None, fleet: str, nodes: Sequence[str]
                      ) -> Callable[[int, str, bool], None]:
    """What records a replacement's outcome in the ledger (`--record`): its nodes, start,
    end and hours; nothing without a ledger."""
    import datetime as dt

    from gpufleet.cli.verdicts import Record, record_verdict

    start = dt.datetime.now(dt.UTC)

    def recorded(code: int, outcome: str, replaced: bool) -> None:
        if ledger is None:
            return
        end = dt.datetime.now(dt.UTC)
        record_verdict(Record(ledger, fleet), "replace", {
            "nodes": list(nodes), "start": start.isoformat(timespec="seconds"),
            "end": end.isoformat(timespec="seconds"),
            "hours": round((end - start).total_seconds() / 3600, 3), "outcome": outcome,
            "replaced": replaced}, code, len(nodes))
    return recorded


def interactive() -> bool:
    """Whether someone can answer the question (standard input is a terminal)."""
    return sys.stdin.isatty()

