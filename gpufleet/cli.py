"""Command line: thin click commands that parse options, run a pipeline and return an exit code.

Exit codes: 0 ok, 1 invalid input (diagnostics printed), 2 usage error, 3 internal error.
Heavy modules (pulumi, gpuhunt) are imported inside the commands that need them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import click

from gpufleet import __version__
from gpufleet.diagnostics import render_json, render_text
from gpufleet.fileio import write_atomically

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
    from gpufleet.input import validate_paths

    result = validate_paths(paths or ["."])
    if not result.files:
        raise click.UsageError(f"no YAML files found in {', '.join(paths or ['.'])}")
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
            click.echo(f"{errors} error(s), {warnings} warning(s) in {len(result.files)} file(s)")
        else:
            click.echo(f"ok: {len(result.files)} file(s), {counts}"
                       + (f", {warnings} warning(s)" if warnings else ""))
    sys.exit(EXIT_INVALID if errors else EXIT_OK)


@cli.command()
@click.argument("kind", type=click.Choice(["fleet", "gateway", "profiles", "backends", "lock",
                                           "defs"]))
def schema(kind: str) -> None:
    """Print the JSON Schema of a file kind."""
    from gpufleet.input import schema_text

    click.echo(schema_text(kind), nl=False)


def _catalog_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--catalog", "catalog_dir", type=click.Path(file_okay=False),
                        envvar="GPUFLEET_CATALOG_DIR",
                        help="Catalog folder (gpuhunt CSV v2 files); default: the cache "
                             "from `gpufleet catalog update`, else the bundled one.")(f)


def load_catalog_or_fail(catalog_dir: str | None) -> Any:
    from gpufleet.offers import CatalogError, load_catalog

    try:
        return load_catalog(catalog_dir)
    except CatalogError as e:
        raise click.ClickException(f"cannot read the catalog: {e}") from None


def validated_or_exit(paths: Sequence[str], fmt: str) -> Any:
    """Validate inputs; on errors print them (stderr) and exit 1 before any later stage."""
    from gpufleet.input import validate_paths

    result = validate_paths(paths)
    if not result.files:
        raise click.UsageError(f"no YAML files found in {', '.join(paths)}")
    if not result.ok:
        emit_diagnostics(result, "json" if fmt == "json" else "text", err=True)
        sys.exit(EXIT_INVALID)
    return result


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--fleet", "fleet_names", multiple=True, help="Only this fleet (repeatable).")
@click.option("--max", "limit", type=click.IntRange(min=1), default=10, show_default=True,
              help="Offers shown per fleet.")
@click.option("--profile", help="Profile from profiles.yml (default: the `default: true` one).")
@_catalog_option
@_format_option("text", "json")
def offers(paths: Sequence[str], fleet_names: Sequence[str], limit: int, profile: str | None,
           catalog_dir: str | None, fmt: str) -> None:
    """Show the cheapest matching offers for each fleet, like `dstack apply` does."""
    from gpufleet.offers import select_all
    from gpufleet.views import render_offers_json, render_offers_text

    result = validated_or_exit(paths, fmt)
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
    try:
        selections = select_all(inputs, catalog, profile)
    except KeyError as e:
        raise click.UsageError(str(e.args[0])) from None
    errors = [s.error for s in selections if s.error]
    if fmt == "json":
        click.echo(render_offers_json(selections, catalog, limit))
    else:
        click.echo(render_offers_text(selections, catalog, limit))
        if errors:
            click.echo(render_text(errors, result.sources), err=True)
    sys.exit(EXIT_INVALID if errors else EXIT_OK)


@cli.group(invoke_without_command=True)
@click.option("--gpu", help="Only this GPU (e.g. H100).")
@click.option("--backend", type=click.Choice(["aws", "gcp", "azure"]), help="Only this backend.")
@_catalog_option
@_format_option("text", "json")
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
@click.option("--timeout", type=float, default=60.0, show_default=True)
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


def _cost_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--max-cost-increase", type=click.FloatRange(min=0), metavar="PCT",
                     help="Fail (exit 1) when the hourly cost rises by more than PCT percent."
                     )(f)
    return click.option("--max-cost-per-hour", type=click.FloatRange(min=0), metavar="USD",
                        help="Fail (exit 1) when the fleets cost more than USD per hour.")(f)


def _cost_failures(costs: Any, per_hour: float | None, increase: float | None) -> list[str]:
    from gpufleet.review import cost_violations

    return [f"cost: {c}" for c in cost_violations(costs, per_hour, increase)] \
        if costs is not None else []


def _policy_levels(path: str | None, mode: str) -> dict[str, str]:
    """Rule levels from --policy-config; --policy off disables every rule."""
    from gpufleet.policy.rules import RULES
    from gpufleet.review import POLICY_LEVELS

    levels: dict[str, str] = {}
    if path:
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError) as e:
            raise click.UsageError(f"--policy-config {path}: {e}") from None
        known = {r.name for r in RULES}
        if not isinstance(data, dict) or any(
                k not in known or v not in POLICY_LEVELS
                for k, v in data.items()):
            raise click.UsageError(f"--policy-config {path}: expected {{rule: mandatory|"
                                   f"advisory|disabled}} with rules from `gpufleet policy "
                                   f"list`")
        levels.update(data)
    if mode == "off":
        levels = {r.name: "disabled" for r in RULES}
    return levels


def _lock_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--lock", "lock_file", type=click.Path(dir_okay=False),
                        help="The offers lock (default: gpufleet.lock beside the first PATH, "
                             "inside it when it is a folder).")(f)


def _locked_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--locked", is_flag=True,
                        help="Fail (exit 1) when the lock is missing or does not cover every "
                             "fleet and gateway as written, instead of picking offers.")(f)


def lock_or_exit(paths: Sequence[str], lock_file: str | None, fmt: str) -> Any:
    """The offers lock for these paths; a broken lock file is reported and exits 1."""
    from gpufleet.input import load_lock
    from gpufleet.offers import default_lock_path

    lock, result = load_lock(lock_file or default_lock_path(paths))
    if lock is None:
        emit_diagnostics(result, "json" if fmt == "json" else "text", err=True)
        sys.exit(EXIT_INVALID)
    return lock


def compile_errors_exit(diags: Sequence[Any], sources: Any, fmt: str) -> None:
    click.echo(render_text(diags, sources) if fmt != "json" else render_json(diags), err=True)
    sys.exit(EXIT_INVALID)


@cli.command("lock")
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option("--upgrade", is_flag=True,
              help="Pick offers again from the catalog even where the lock is current.")
@click.option("--fleet", "names", multiple=True, metavar="NAME",
              help="With --upgrade: only this fleet or gateway (repeatable).")
@click.option("--prune", is_flag=True,
              help="Drop entries of fleets and gateways that are not in the given files.")
@click.option("--profile", help="Profile from profiles.yml (default: the `default: true` one).")
@_catalog_option
@_lock_option
@click.option("--check", is_flag=True,
              help="Write nothing; exit 1 when the lock would change (for CI).")
def lock_command(paths: Sequence[str], upgrade: bool, names: Sequence[str], prune: bool,
                 profile: str | None, catalog_dir: str | None, lock_file: str | None,
                 check: bool) -> None:
    """Write or update gpufleet.lock: the offer of every fleet and gateway (PATHs default to
    the current folder).

    Entries whose requirements are unchanged stay as they are; new fleets and fleets whose
    requirements changed get the cheapest offer. The file is written atomically, and only
    when its content changes.
    """
    from gpufleet.compile import compile_inputs
    from gpufleet.offers import default_lock_path, render_lock, write_lock
    from gpufleet.review import relock, total_delta, unknown_names

    if names and not upgrade:
        raise click.UsageError("--fleet goes with --upgrade (without it, `gpufleet lock` "
                               "re-picks only what changed)")
    paths = list(paths) or ["."]
    result = validated_or_exit(paths, "text")
    path = lock_file or default_lock_path(paths)
    lock = lock_or_exit(paths, path, "text")
    unknown = unknown_names(names, result.inputs)
    if unknown:
        raise click.UsageError(f"no fleet or gateway named {', '.join(unknown)} in the "
                               "given files")
    catalog = load_catalog_or_fail(catalog_dir)
    wanted: frozenset[str] | bool = frozenset(names) if names else upgrade
    try:
        compiled = compile_inputs(result.inputs, catalog, profile, lock, wanted)
    except KeyError as e:
        raise click.UsageError(str(e.args[0])) from None
    if not compiled.ok:
        compile_errors_exit([d for d in compiled.diagnostics if d.is_error], result.sources,
                            "text")
    new = relock(result.inputs, compiled, lock, catalog, prune)
    for m in new.moves:
        click.echo(m.text())
    if upgrade and new.moves:
        delta = total_delta(new.moves)
        replaced = sum(m.replaces for m in new.moves)
        click.echo(f"upgrade: {'+' if delta >= 0 else '-'}${abs(delta):,.2f}/h in total, "
                   f"replaces {replaced} node(s)")
    if new.kept:
        click.echo(f"kept {len(new.kept)} entr{'y' if len(new.kept) == 1 else 'ies'} not in "
                   f"these files ({', '.join(new.kept)}); --prune drops them")
    current = lock.exists and render_lock(new.fleets, new.gateways) == render_lock(
        lock.fleets, lock.gateways)
    if check:
        if current:
            click.echo(f"{path} is up to date")
            return
        click.echo(f"{path} is out of date: run `gpufleet lock` and commit it", err=True)
        sys.exit(EXIT_INVALID)
    if write_lock(path, new.fleets, new.gateways):
        click.echo(f"wrote {path}: {len(new.fleets)} fleet(s), {len(new.gateways)} "
                   "gateway(s)")
    else:
        click.echo(f"{path} is up to date")


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--stack", default="dev", show_default=True, help="Stack name used in URNs.")
@click.option("--profile", help="Profile from profiles.yml (default: the `default: true` one).")
@_catalog_option
@_format_option("text", "json", "markdown")
@click.option("--out", type=click.Path(dir_okay=False, writable=True),
              help="Write the plan to FILE (atomically) instead of standard output.")
@_lock_option
@_locked_option
@click.option("--policy", "policy_mode", type=click.Choice(["mandatory", "advisory", "off"]),
              default="mandatory", show_default=True,
              help="mandatory: exit 1 on mandatory policy violations; advisory: report only; "
                   "off: do not run the rules.")
@click.option("--policy-config", type=click.Path(dir_okay=False, exists=True),
              help="JSON {rule: mandatory|advisory|disabled} overriding rule levels.")
@_cost_options
def plan(paths: Sequence[str], stack: str, profile: str | None, catalog_dir: str | None,
         fmt: str, out: str | None, lock_file: str | None, locked: bool, policy_mode: str,
         policy_config: str | None, max_cost_per_hour: float | None,
         max_cost_increase: float | None) -> None:
    """Preview, offline, every resource `pulumi up` would create for these files.

    Offers come from the lock where the requirements are unchanged; new or changed fleets
    get the cheapest offer and are marked NEW OFFER.
    """
    from gpufleet.review import build_report, render

    result = validated_or_exit(paths, fmt)
    lock = lock_or_exit(paths, lock_file, fmt)
    catalog = load_catalog_or_fail(catalog_dir)
    levels = _policy_levels(policy_config, policy_mode)
    try:
        report, diags = build_report(result, catalog, paths, stack, profile, catalog_dir,
                                     lock, locked, levels)
    except KeyError as e:
        raise click.UsageError(str(e.args[0])) from None
    if report is None:
        compile_errors_exit(diags, result.sources, fmt)
        return
    if diags:  # warnings: on standard error, whatever the format of the report
        click.echo(render_text(diags, result.sources), err=True)
    text = render(report, fmt)
    if out:
        write_atomically(out, text)
        click.echo(f"plan written to {out}", err=True)
    else:
        click.echo(text)
    failures = [f"policy: {v.where}: {v.rule}: {v.message}" for v in report.violations
                if v.level == "mandatory" and policy_mode == "mandatory"]
    failures += _cost_failures(report.costs, max_cost_per_hour, max_cost_increase)
    if failures:
        for line in failures:
            click.echo(f"gpufleet plan: {line}", err=True)
        sys.exit(EXIT_INVALID)


EXIT_CHANGES = 7  # mirrors `pulumi preview --expect-no-changes`


def _guard_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--max-instances", type=click.IntRange(min=0),
                     help="Fail when more than N instances would be replaced or deleted.")(f)
    f = click.option("--allow", "allow", multiple=True, metavar="GLOB",
                     help="URN or resource-name glob exempt from the guards (repeatable).")(f)
    return click.option("--forbid", default="", metavar="OPS",
                        help="Comma list of ops (replace,delete) that must not touch gateways, "
                             "addresses, DNS records or networks.")(f)


def _parse_forbid(text: str) -> tuple[str, ...]:
    ops = tuple(o.strip() for o in text.split(",") if o.strip())
    bad = [o for o in ops if o not in ("create", "update", "replace", "delete")]
    if bad:
        raise click.UsageError(f"--forbid takes create, update, replace, delete; got "
                               f"{', '.join(bad)}")
    return ops


def finish_report(report: Any, note: str, fmt: str, out: str | None) -> None:
    """Print or write a change report and exit 0 (no changes), 7 (changes) or 1 (guard)."""
    from gpufleet.review import changes as ch

    code = EXIT_INVALID if report.violations else (EXIT_CHANGES if report.has_changes
                                                   else EXIT_OK)
    text = {"json": lambda: ch.render_json(report, note, code),
            "markdown": lambda: ch.render_markdown(report, note),
            "text": lambda: ch.render_text(report, note)}[fmt]()
    if out:
        write_atomically(out, text)
        click.echo(f"report written to {out}", err=True)
    else:
        click.echo(text)
    if report.violations:
        click.echo(f"gpufleet: {len(report.violations)} forbidden change(s)", err=True)
    sys.exit(code)


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--state", "state_file", required=True, type=click.Path(dir_okay=False),
              help="A `pulumi stack export` file of the stack the YAML deploys to.")
@click.option("--profile", help="Profile from profiles.yml (default: the `default: true` one).")
@_catalog_option
@_guard_options
@_format_option("text", "json", "markdown")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the report to FILE.")
@_lock_option
@_locked_option
@click.option("--full", is_flag=True,
              help="Run every fleet and gateway, also those whose inputs the export shows "
                   "unchanged.")
@_cost_options
def diff(paths: Sequence[str], state_file: str, profile: str | None, catalog_dir: str | None,
         forbid: str, allow: Sequence[str], max_instances: int | None, fmt: str,
         out: str | None, lock_file: str | None, locked: bool, full: bool,
         max_cost_per_hour: float | None, max_cost_increase: float | None) -> None:
    """What the YAML would create, update, replace and delete, offline, against an export.

    Only fleets and gateways whose inputs changed since the export are run again (their
    components record an input digest); `--full` runs them all.

    Exit codes: 0 no changes, 7 changes, 1 invalid input or forbidden changes, 2 usage.
    """
    from gpufleet.review import DIFF_NOTE, GuardOptions, StateError, offline_diff, parse_export

    guards = GuardOptions(_parse_forbid(forbid), tuple(allow), max_instances,
                          max_cost_per_hour, max_cost_increase)
    try:
        with open(state_file, encoding="utf-8") as fh:
            state = parse_export(fh.read(), state_file)
    except OSError as e:
        raise click.UsageError(f"cannot read --state {state_file}: {e.strerror}") from None
    except StateError as e:
        raise click.ClickException(str(e)) from None
    result = validated_or_exit(paths, fmt)
    lock = lock_or_exit(paths, lock_file, fmt)
    catalog = load_catalog_or_fail(catalog_dir)
    try:
        report, diags = offline_diff(result, catalog, paths, state, profile, catalog_dir,
                                     guards, lock, locked, full)
    except KeyError as e:
        raise click.UsageError(str(e.args[0])) from None
    if report is None:
        compile_errors_exit(diags, result.sources, fmt)
        return
    if diags:  # warnings: on standard error, whatever the format of the report
        click.echo(render_text(diags, result.sources), err=True)
    finish_report(report, DIFF_NOTE, fmt, out)


@cli.command()
@click.option("--stack", "stack_name", required=True, help="The stack to check.")
@click.option("--cwd", default="stacks", show_default=True, type=click.Path(file_okay=False),
              help="The Pulumi project folder.")
@_guard_options
@_format_option("text", "json", "markdown")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the report to FILE.")
def drift(stack_name: str, cwd: str, forbid: str, allow: Sequence[str],
          max_instances: int | None, fmt: str, out: str | None) -> None:
    """Live drift through the Pulumi CLI: `refresh --preview-only`, then `preview --refresh`.

    Exit codes: 0 no drift, 7 drift or pending changes, 1 failed run or forbidden changes,
    2 usage or no Pulumi CLI.
    """
    from gpufleet.review import DRIFT_NOTE, DriftError, MissingTool, live_drift

    try:
        report = live_drift(stack_name, cwd, _parse_forbid(forbid), tuple(allow),
                            max_instances)
    except MissingTool as e:
        click.echo(f"gpufleet drift: {e}", err=True)
        sys.exit(EXIT_USAGE)
    except DriftError as e:
        raise click.ClickException(str(e)) from None
    finish_report(report, DRIFT_NOTE, fmt, out)


@cli.command()
@click.option("--stack", "stack_name", required=True, help="The stack to deploy.")
@click.option("--cwd", default="stacks", show_default=True, type=click.Path(file_okay=False),
              help="The Pulumi project folder.")
@click.option("--fallback", type=click.IntRange(min=0), default=0, show_default=True,
              help="On a capacity error, move the failed fleet to its next offer and retry, "
                   "at most N times.")
def up(stack_name: str, cwd: str, fallback: int) -> None:
    """`pulumi up` through the Automation API, with capacity fallback (needs the Pulumi CLI).

    Only capacity errors (see `gpufleet up --help` in the README) move a fleet; the lock
    file is updated for each move, so the PR of record shows where the fleet went.
    Exit codes: 0 deployed, 1 failed (every attempt listed), 2 usage or no Pulumi CLI.
    """
    from gpufleet.review import AutomationStack, MissingCli, UpError, deploy

    def echo(line: str) -> None:
        click.echo(line.rstrip("\n"))

    try:
        runner = AutomationStack.select(stack_name, cwd, echo)
        result = deploy(runner, cwd, fallback, echo)
    except MissingCli as e:
        click.echo(f"gpufleet up: {e}", err=True)
        sys.exit(EXIT_USAGE)
    except UpError as e:
        click.echo(str(e), err=True)
        sys.exit(EXIT_INVALID)
    moved = sum(1 for a in result.attempts if a.moves)
    click.echo(f"gpufleet up: deployed stack {stack_name} in {len(result.attempts)} "
               f"attempt(s)" + (f"; {result.lock_file} was updated: commit it" if moved
                                else ""))


@cli.command(context_settings={"ignore_unknown_options": False})
@click.argument("args", nargs=-1, required=True)
@click.option("--out", "out_dir", default=".", show_default=True,
              type=click.Path(file_okay=False), help="Folder for the task file.")
@click.option("--fleet", "fleet_name", help="With `check`: the fleet the log belongs to.")
@_catalog_option
@_lock_option
@click.option("--profile", help="Profile from profiles.yml (default: the `default: true` one).")
def acceptance(args: Sequence[str], out_dir: str, fleet_name: str | None,
               catalog_dir: str | None, lock_file: str | None, profile: str | None) -> None:
    """Is my cluster healthy? An NCCL all-reduce test per fleet, and its check.

    \b
    gpufleet acceptance FLEET [PATH...] [--out DIR]
        write FLEET-nccl.dstack.yml (a dstack task running all_reduce_perf across every GPU
        of every node with the fabric's NCCL settings) and print the expected threshold
    gpufleet acceptance check LOG --fleet NAME PATH...
        read the nccl-tests output: exit 0 pass, 1 fail, 2 unreadable log
    """
    from gpufleet.review import parse_log, render_task, task_for, verdict

    checking = args[0] == "check"
    if checking:
        if len(args) < 2 or not fleet_name:
            raise click.UsageError("usage: gpufleet acceptance check LOG --fleet NAME PATH...")
        log_file, paths = args[1], list(args[2:])
    else:
        fleet_name, paths = args[0], list(args[1:])
    paths = paths or ["."]
    missing = [p for p in (paths + ([log_file] if checking else [])) if not os.path.exists(p)]
    if missing:
        raise click.UsageError(f"no such file or folder: {', '.join(missing)}")
    plan = _fleet_plan(paths, str(fleet_name), catalog_dir, lock_file, profile)
    task, exp = task_for(plan)
    if not checking:
        out = os.path.join(out_dir, f"{plan.name}-nccl.dstack.yml")
        os.makedirs(out_dir, exist_ok=True)
        write_atomically(out, render_task(task, exp))
        click.echo(f"wrote {out}")
        click.echo(exp.text())
        return
    try:
        with open(log_file, "rb") as fh:
            raw = fh.read(50 * 1024 * 1024 + 1)
    except OSError as e:
        click.echo(f"gpufleet acceptance: cannot read {log_file}: {e.strerror}", err=True)
        sys.exit(EXIT_USAGE)
    result = verdict(parse_log(raw.decode("utf-8", errors="replace")), exp)
    for line in result.lines:
        click.echo(line)
    sys.exit(result.code)


def _fleet_plan(paths: Sequence[str], name: str, catalog_dir: str | None,
                lock_file: str | None, profile: str | None) -> Any:
    from gpufleet.compile import compile_inputs
    from gpufleet.diagnostics import did_you_mean

    result = validated_or_exit(paths, "text")
    names = [f.name for f in result.inputs.fleets]
    if name not in names:
        hint = did_you_mean(name, names) or f"fleets: {', '.join(names) or 'none'}"
        raise click.UsageError(f"no cloud fleet named '{name}' in the given files; {hint}")
    lock = lock_or_exit(paths, lock_file, "text")
    catalog = load_catalog_or_fail(catalog_dir)
    only = dataclasses.replace(result.inputs, fleets=tuple(
        f for f in result.inputs.fleets if f.name == name), gateways=())
    try:
        compiled = compile_inputs(only, catalog, profile, lock)
    except KeyError as e:
        raise click.UsageError(str(e.args[0])) from None
    if not compiled.ok or not compiled.plans:
        compile_errors_exit([d for d in compiled.diagnostics if d.is_error], result.sources,
                            "text")
    return compiled.plans[0]


@cli.group()
def policy() -> None:
    """The guardrail rules `plan` runs offline and `pulumi preview --policy-pack policy/` runs."""


@policy.command("list")
@_format_option("text", "markdown", "json")
def policy_list(fmt: str) -> None:
    """Print every rule with its level, what it checks and how to turn it off."""
    from gpufleet.policy.rules import RULES

    if fmt == "json":
        click.echo(json.dumps([{"name": r.name, "level": r.level, "description": r.description,
                                "remediation": r.remediation, "off": r.off} for r in RULES],
                              indent=2))
        return
    if fmt == "markdown":
        click.echo(rules_table())
        return
    for r in RULES:
        click.echo(f"{r.name:<30} {r.level:<10} {r.description}")
        click.echo(f"{'':<41} fix: {r.remediation}; off: {r.off}")


def rules_table() -> str:
    from gpufleet.policy.rules import RULES

    rows = ["| rule | level | checks | remediation | to turn it off |",
            "|---|---|---|---|---|"]
    rows += [f"| `{r.name}` | {r.level} | {r.description} | {r.remediation} | {r.off} |"
             for r in RULES]
    return "\n".join(rows)


@cli.group()
def export() -> None:
    """Hand a deployed stack over to other tools."""


@export.command("dstack")
@click.option("--stack", "stack_name", help="Read the outputs of this stack (Automation API; "
              "needs the Pulumi CLI).")
@click.option("--cwd", default="stacks", show_default=True, type=click.Path(file_okay=False),
              help="The Pulumi project folder (with --stack).")
@click.option("--outputs", "outputs_file", type=click.Path(dir_okay=False),
              help="A file from `pulumi stack output --json --show-secrets`.")
@click.option("--state", "state_file", type=click.Path(dir_okay=False),
              help="A file from `pulumi stack export`.")
@click.option("--out", "out_dir", default="dstack", show_default=True,
              type=click.Path(file_okay=False), help="Folder to write the files into.")
@click.option("--identity-file", default="~/.ssh/id_ed25519", show_default=True,
              help="The private key dstack uses for the nodes and the bastion.")
@click.option("--force", is_flag=True,
              help="Replace files in --out that gpufleet did not write.")
def export_dstack_command(stack_name: str | None, cwd: str, outputs_file: str | None,
                          state_file: str | None, out_dir: str, identity_file: str,
                          force: bool) -> None:
    """Write SSH fleet files and a dstack server config for the fleets of a stack.

    Each fleet becomes an SSH fleet file (the nodes' addresses, the bastion as proxy_jump)
    for `dstack apply -f`, and a project in dstack-server-config.yml that names the networks
    gpufleet created. Files are written atomically; a file gpufleet did not write is never
    replaced without --force.
    """
    from gpufleet.review import (
        ExportError,
        export_dstack,
        outputs_from_stack_output,
        outputs_from_state,
        write_files,
    )

    given = [x for x in (stack_name, outputs_file, state_file) if x]
    if len(given) != 1:
        raise click.UsageError("give exactly one of --stack, --outputs and --state")
    try:
        if outputs_file or state_file:
            path = str(outputs_file or state_file)
            try:
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
            except OSError as e:
                raise click.UsageError(f"cannot read {path}: {e.strerror}") from None
            outputs = outputs_from_stack_output(text, path) if outputs_file else \
                outputs_from_state(text, path)
        else:
            outputs = _live_outputs(str(stack_name), cwd)
        exported = export_dstack(outputs, identity_file)
        written = write_files(exported, out_dir, force)
    except ExportError as e:
        raise click.ClickException(str(e)) from None
    for note in exported.notes:
        click.echo(f"note: {note}", err=True)
    for w in written:
        click.echo(f"wrote {w}")


def _live_outputs(stack_name: str, cwd: str) -> dict[str, Any]:
    import shutil

    from gpufleet.review import ExportError

    if shutil.which("pulumi") is None:
        click.echo("gpufleet export: the Pulumi CLI is not installed; use --outputs FILE "
                   "(from `pulumi stack output --json --show-secrets`) or --state FILE",
                   err=True)
        sys.exit(EXIT_USAGE)
    from pulumi import automation as auto

    try:
        stack = auto.select_stack(stack_name=stack_name, work_dir=cwd)
        return {k: v.value for k, v in stack.outputs().items()}
    except auto.errors.CommandError as e:
        raise ExportError(f"pulumi failed: {str(e).strip()[-2000:]}") from None


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
