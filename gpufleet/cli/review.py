"""Offline review commands: `plan` (every resource `pulumi up` would create, with policy and
cost) and `diff` (the YAML against a `pulumi stack export`)."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import click

from gpufleet.cli.common import (
    EXIT_INVALID,
    Finite,
    catalog_option,
    check_out,
    compile_errors_exit,
    cost_options,
    finish_report,
    format_option,
    guard_options,
    load_catalog_or_fail,
    lock_option,
    lock_or_exit,
    locked_option,
    out_option,
    parse_forbid,
    profile_option,
    validated_or_exit,
    write_or_print,
)
from gpufleet.cli.progress import cost_warning, progress_line
from gpufleet.diagnostics import render_folded

if TYPE_CHECKING:
    from gpufleet.input import SyncedGateway


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--stack", default="dev", show_default=True, help="Stack name used in URNs.")
@profile_option
@catalog_option
@format_option("text", "json", "markdown")
@out_option("plan")
@lock_option
@locked_option
@click.option("--policy", "policy_mode", type=click.Choice(["mandatory", "advisory", "off"]),
              default="mandatory", show_default=True,
              help="mandatory: exit 1 on mandatory policy violations; advisory: report only; "
                   "off: do not run the rules.")
@click.option("--policy-config", type=click.Path(dir_okay=False, exists=True),
              help="JSON {rule: mandatory|advisory|disabled} overriding rule levels.")
@cost_options
@click.option("--warn-cost-per-month", type=Finite(min=0, min_open=True),
              metavar="USD", help="Warn (C018) when the whole bill goes over USD per month "
                                  "(default: `cost: {warn_per_month}` in the backends file).")
@click.option("--expand", is_flag=True,
              help="Add the resource tree (every resource, each node listed) and the "
                   "look-ups answered offline (the JSON format always has them).")
@click.option("--stack-config", type=click.Path(dir_okay=False, exists=True),
              help="The stack's `Pulumi.<stack>.yaml`, for the gateways' addresses "
                   "`gpufleet gateway sync` stored there (without it the records are "
                   "pending).")
def plan(paths: Sequence[str], stack: str, profile: str | None, catalog_dir: str | None,
         fmt: str, out: str | None, lock_file: str | None, locked: bool, policy_mode: str,
         policy_config: str | None, max_cost_per_hour: float | None,
         max_cost_increase: float | None, warn_cost_per_month: float | None,
         expand: bool, stack_config: str | None) -> None:
    """Preview, offline, every resource `pulumi up` would create for these files.

    Offers come from the lock where the requirements are unchanged; new or changed fleets
    get the cheapest offer and are marked NEW OFFER.
    """
    from gpufleet.cli.runs import build_report, program_runner

    # the program and the policy pack load in another process meanwhile (ended with the
    # command)
    click.get_current_context().with_resource(program_runner())
    from gpufleet.policy.rules import rule_levels
    from gpufleet.review import PolicyConfigError, cost_violations, load_levels
    from gpufleet.views import plan_chunks

    check_out(out)
    result = validated_or_exit(paths, fmt, profile)
    lock = lock_or_exit(paths, lock_file, fmt)
    catalog = load_catalog_or_fail(catalog_dir)
    try:
        levels = load_levels(policy_config, policy_mode, rule_levels())
    except PolicyConfigError as e:
        raise click.UsageError(str(e)) from None
    _, synced = _stack_settings(stack_config) if stack_config else (None, {})
    with progress_line() as progress:
        report, diags = build_report(result, catalog, paths, stack, profile, catalog_dir, lock,
                                     locked, levels, progress, synced)
    if report is None:
        compile_errors_exit(diags, result.sources, fmt)
        return
    # the input's own warnings (validate's) first, then the compiler's
    diags = [*(d for d in result.diagnostics if not d.is_error), *diags]
    diags += cost_warning(report, result.inputs, paths,
                          warn_cost_per_month or result.inputs.warn_cost_per_month)
    if diags:  # warnings: said once on standard error, and in the report in every format
        click.echo(render_folded(diags, result.sources), err=True)
        report = dataclasses.replace(report, diagnostics=tuple(diags))
    write_or_print(plan_chunks(report, fmt, expand), out, "plan")
    failures = [f"policy: {v.where}: {v.rule}: {v.message}" for v in report.violations
                if v.level == "mandatory" and policy_mode == "mandatory"]
    if report.costs is not None:
        failures += [f"cost: {c}" for c in cost_violations(report.costs, max_cost_per_hour,
                                                            max_cost_increase)]
    if failures:
        for line in failures:
            click.echo(f"gpufleet plan: {line}", err=True)
        sys.exit(EXIT_INVALID)


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--state", "state_file", required=True, type=click.Path(dir_okay=False),
              help="A `pulumi stack export` file of the stack the YAML deploys to.")
@profile_option
@catalog_option
@guard_options
@format_option("text", "json", "markdown")
@out_option("report")
@lock_option
@locked_option
@click.option("--full", is_flag=True,
              help="Run every fleet and gateway, also those whose inputs the export shows "
                   "unchanged.")
@click.option("--stack-config", type=click.Path(dir_okay=False, exists=True),
              help="The stack's `Pulumi.<stack>.yaml` (default: the one in --cwd), for the "
                   "values `pulumi up` reads from it (the SSH key, the gateways' addresses).")
@click.option("--cwd", default="stacks", show_default=True, type=click.Path(file_okay=False),
              help="The Pulumi project folder, where `Pulumi.<stack>.yaml` is looked for.")
@cost_options
def diff(paths: Sequence[str], state_file: str, profile: str | None, catalog_dir: str | None,
         forbid: str, allow: Sequence[str], max_instances: int | None, fmt: str,
         out: str | None, lock_file: str | None, locked: bool, full: bool,
         stack_config: str | None, cwd: str, max_cost_per_hour: float | None,
         max_cost_increase: float | None) -> None:
    """What the YAML would create, update, replace and delete, offline, against an export.

    Only fleets and gateways whose inputs changed since the export are run again (their
    components record an input digest); `--full` runs them all.

    Exit codes: 0 no changes, 7 changes, 1 invalid input or forbidden changes, 2 usage.
    """
    from gpufleet.cli.runs import diff_runner, offline_diff
    from gpufleet.input import JsonInputError, read_bounded, uncollected
    from gpufleet.review import DIFF_NOTE, GuardOptions, StateError, parse_export

    check_out(out)
    # the SDKs load in another process meanwhile (ended with the command)
    click.get_current_context().with_resource(diff_runner(paths, profile, catalog_dir))
    guards = GuardOptions(parse_forbid(forbid), tuple(allow), max_instances,
                          max_cost_per_hour, max_cost_increase)
    try:
        # the export lives as long as the command: out of the collector's sight (for a 100 MB
        # export, its millions of objects would be walked again by every full collection)
        with uncollected(freeze=True):
            state = parse_export(read_bounded(state_file, "a stack export"), state_file)
    except JsonInputError as e:  # not a readable regular file
        raise click.UsageError(f"--state: {e}") from None
    except StateError as e:
        raise click.ClickException(str(e)) from None
    result = validated_or_exit(paths, fmt, profile)
    lock = lock_or_exit(paths, lock_file, fmt)
    catalog = load_catalog_or_fail(catalog_dir)
    key, synced = _stack_settings(stack_config or os.path.join(
        cwd, f"Pulumi.{state.stack or 'dev'}.yaml"))
    try:
        report, diags = offline_diff(result, catalog, paths, state, profile, catalog_dir,
                                     guards, lock, locked, full, key, synced)
    except StateError as e:
        raise click.ClickException(str(e)) from None
    if report is None:
        compile_errors_exit(diags, result.sources, fmt)
        return
    if diags:  # warnings: said once, on standard error, whatever the format of the report
        click.echo(render_folded(diags, result.sources), err=True)
    finish_report(report, DIFF_NOTE, fmt, out)


def _stack_settings(path: str) -> tuple[str | None, Mapping[str, SyncedGateway]]:
    """What `pulumi up` reads from the stack config, when that file is there: the SSH key,
    and the gateways' addresses `gpufleet gateway sync` stored."""
    from gpufleet.input import SyncedError, parse_gateways, stackconfig

    if not os.path.isfile(path):
        return None, {}
    try:
        config = stackconfig.read_stack_file(path)
        return config.get(stackconfig.SSH_PUBLIC_KEY), parse_gateways(
            config.get(stackconfig.GATEWAYS))
    except (stackconfig.StackConfigError, SyncedError) as e:
        raise click.UsageError(f"{path}: {e}") from None

