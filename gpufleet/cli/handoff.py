"""Hand-off commands: `acceptance` (an NCCL task per fleet and the check of its log) and
`export dstack` (SSH fleet files and a server config from a deployed stack)."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from gpufleet.cli.common import (
    EXIT_USAGE,
    catalog_option,
    compile_errors_exit,
    load_catalog_or_fail,
    lock_option,
    lock_or_exit,
    profile_option,
    validated_or_exit,
)
from gpufleet.fileio import check_file_in, check_folder, write_many


@click.command(context_settings={"ignore_unknown_options": False})
@click.argument("args", nargs=-1, required=True)
@click.option("--out", "out_dir", default=".", show_default=True,
              type=click.Path(file_okay=False), help="Folder for the task file.")
@click.option("--fleet", "fleet_name",
              help="With `check` and `report`: the fleet the logs belong to.")
@click.option("--force", is_flag=True,
              help="Replace a task file in --out that gpufleet did not write.")
@click.option("--expect-busbw", "expect", multiple=True, metavar="[N=]GBPS",
              help="The bus bandwidth the contract expects (GB/s), for every node count or, "
                   "as N=GBPS, for N nodes; default the fabric's published figure. Repeatable.")
@click.option("--threshold", type=click.FloatRange(min=0, max=1, min_open=True),
              help="The pass mark as a fraction of the expected bandwidth (report: default "
                   "0.8; check: the fabric's).")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False),
              help="With `report`: draw busbw vs message size, one line per node count "
                   "(.png or .svg).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]),
              default="text", show_default=True,
              help="With `check` (text, json) and `report`: the verdict's format.")
@catalog_option
@lock_option
@profile_option
def acceptance(args: Sequence[str], out_dir: str, fleet_name: str | None, force: bool,
               expect: Sequence[str], threshold: float | None, plot_file: str | None,
               fmt: str, catalog_dir: str | None, lock_file: str | None,
               profile: str | None) -> None:
    """Is my cluster healthy? An NCCL all-reduce test per fleet, its check, and the scaling
    report over node counts.

    \b
    gpufleet acceptance FLEET [PATH...] [--out DIR]
        write FLEET-nccl.dstack.yml (a dstack task running all_reduce_perf across every GPU
        of every node with the fabric's NCCL settings) and print the expected threshold
    gpufleet acceptance check LOG --fleet NAME PATH... [--expect-busbw GBPS] [--format json]
        read the nccl-tests output: exit 0 pass, 1 fail, 2 unreadable log
    gpufleet acceptance report LOG... --fleet NAME PATH... [--plot FILE.png] [--threshold F]
        nccl-tests logs of one fleet at several node counts (read from each log's rank
        lines): busbw per node count and size, each count against the expected figure;
        exit 0 pass, 1 a count below the pass mark, 2 a log that cannot be read
    """
    from gpufleet.handoff import TASK_MARKER, render_task, task_for

    mode = args[0] if args[0] in ("check", "report") else "task"
    if mode != "task" and not fleet_name:
        raise click.UsageError(f"usage: gpufleet acceptance {mode} LOG"
                               f"{'...' if mode == 'report' else ''} --fleet NAME PATH...")
    if mode == "check":
        if len(args) < 2:
            raise click.UsageError("usage: gpufleet acceptance check LOG --fleet NAME PATH...")
        logs, paths = [args[1]], list(args[2:])
    elif mode == "report":
        logs = [a for a in args[1:] if not _is_input(a)]
        paths = [a for a in args[1:] if _is_input(a)]
        if not logs:
            raise click.UsageError("gpufleet acceptance report: give the nccl-tests logs (and "
                                   "the fleet's YAML files or folders)")
    else:
        fleet_name, paths, logs = args[0], list(args[1:]), []
    if plot_file is not None and mode != "report":
        raise click.UsageError("--plot goes with `acceptance report`")
    if plot_file is not None and not plot_file.lower().endswith((".png", ".svg")):
        raise click.UsageError(f"--plot {plot_file}: the file ends in .png or .svg")
    per_count, for_all = _expectations(expect)
    paths = paths or ["."]
    missing = [p for p in (paths + logs) if not os.path.exists(p)]
    if missing:
        raise click.UsageError(f"no such file or folder: {', '.join(missing)}")
    task_file = f"{fleet_name}-nccl.dstack.yml"
    if mode == "task":  # before any work: where the task goes
        check_folder(out_dir)
        check_file_in(os.path.join(out_dir, task_file), TASK_MARKER, force)
    plan = _fleet_plan(paths, str(fleet_name), catalog_dir, lock_file, profile)
    task, exp = task_for(plan)
    if mode == "report":
        _report(str(fleet_name), logs, exp, threshold, for_all, per_count, plot_file, fmt,
                force)
    if mode == "check":
        _check(logs[0], _overridden(exp, for_all, threshold), fmt)
    for out in write_many(out_dir, [(task_file, render_task(task, exp))], TASK_MARKER,
                          force):
        click.echo(f"wrote {out}")
    if task["nodes"] > plan.nodes:
        click.echo(f"the task runs on {task['nodes']} nodes: the fleet holds {plan.nodes} "
                   "now, and dstack provisions the others for the task (the fleet allows "
                   f"{plan.nodes_max or 'more'})")
    click.echo(exp.text())


def _is_input(path: str) -> bool:
    """A fleet input (a folder or a YAML file), as opposed to a log."""
    return os.path.isdir(path) or path.lower().endswith((".yml", ".yaml", ".lock"))


def _expectations(values: Sequence[str]) -> tuple[dict[int, float], float | None]:
    per: dict[int, float] = {}
    every: float | None = None
    for v in values:
        count, sep, gbps = v.rpartition("=")
        try:
            value = float(gbps)
            nodes = int(count) if sep else None
        except ValueError:
            raise click.UsageError(f"--expect-busbw {v}: write GBPS or N=GBPS") from None
        if not 0 < value < 1e6 or (nodes is not None and nodes < 1):
            raise click.UsageError(f"--expect-busbw {v}: out of range")
        if nodes is None:
            every = value
        else:
            per[nodes] = value
    return per, every


def _overridden(exp: Any, value: float | None, fraction: float | None) -> Any:
    """The expectation with the contract's figure and pass mark, where given."""
    from gpufleet.handoff import fabric_facts

    if value is None and fraction is None:
        return exp
    busbw = value if value is not None else exp.busbw_gbps
    if busbw is None:
        raise click.UsageError("--threshold needs a figure to take a fraction of: this fabric "
                               "has none published; give --expect-busbw GBPS")
    frac = fraction if fraction is not None else float(fabric_facts()["pass_fraction"])
    source = "--expect-busbw" if value is not None else exp.source
    return dataclasses.replace(exp, busbw_gbps=busbw, threshold_gbps=round(busbw * frac, 1),
                               source=source, multi_node=True)


def _read_log(path: str) -> tuple[str, bool]:
    from gpufleet.handoff import MAX_LOG_BYTES

    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_LOG_BYTES + 1)
    except OSError as e:
        click.echo(f"gpufleet acceptance: cannot read {path}: {e.strerror}", err=True)
        sys.exit(EXIT_USAGE)
    return raw[:MAX_LOG_BYTES].decode("utf-8", errors="replace"), len(raw) > MAX_LOG_BYTES


def _check(log_file: str, exp: Any, fmt: str) -> None:
    import json

    from gpufleet.handoff import parse_log, verdict

    text, too_big = _read_log(log_file)
    log = parse_log(text, too_big=too_big)
    result = verdict(log, exp)
    if fmt == "json":
        peak = max((r.busbw for r in log.rows), default=None)
        click.echo(json.dumps({
            "log": log_file, "fabric": exp.fabric, "expected_busbw_gbps": exp.busbw_gbps,
            "threshold_gbps": exp.threshold_gbps, "source": exp.source,
            "peak_busbw_gbps": peak, "lines": result.lines,
            "verdict": {0: "pass", 1: "fail", 2: "no verdict"}[result.code],
            "exit_code": result.code}, indent=2))
    else:
        for line in result.lines:
            click.echo(line)
    sys.exit(result.code)


def _report(fleet: str, logs: Sequence[str], exp: Any, fraction: float | None,
            for_all: float | None, per_count: dict[int, float], plot_file: str | None,
            fmt: str, force: bool) -> None:
    import json

    from gpufleet.handoff import (
        DEFAULT_FRACTION,
        plot,
        report_json,
        report_lines,
        report_markdown,
        scaling_report,
    )

    read = [(path, *_read_log(path)) for path in logs]
    report = scaling_report(fleet, [(p, t) for p, t, _ in read],
                            fraction if fraction is not None else DEFAULT_FRACTION,
                            exp.busbw_gbps, exp.source, for_all, per_count,
                            [p for p, _, big in read if big])
    if plot_file is not None and report.points:
        if os.path.exists(plot_file) and not force:
            click.echo(f"gpufleet acceptance report: {plot_file} exists; nothing was written "
                       "(--force replaces it)", err=True)
            sys.exit(EXIT_USAGE)
        try:
            plot(report, plot_file)
        except ImportError:
            click.echo("gpufleet acceptance report: --plot needs matplotlib: "
                       "pip install 'gpufleet[report]'", err=True)
            sys.exit(EXIT_USAGE)
    if fmt == "json":
        click.echo(json.dumps(report_json(report), indent=2))
    elif fmt == "markdown":
        click.echo(report_markdown(report), nl=False)
    else:
        if plot_file is not None and report.points:
            click.echo(f"wrote {plot_file}")
        for line in report_lines(report):
            click.echo(line)
    sys.exit(report.exit_code)


def _fleet_plan(paths: Sequence[str], name: str, catalog_dir: str | None,
                lock_file: str | None, profile: str | None) -> Any:
    from gpufleet.compile import compile_inputs
    from gpufleet.diagnostics import did_you_mean

    result = validated_or_exit(paths, "text", profile)
    names = [f.name for f in result.inputs.fleets]
    if name not in names:
        hint = did_you_mean(name, names) or f"fleets: {', '.join(names) or 'none'}"
        raise click.UsageError(f"no cloud fleet named '{name}' in the given files; {hint}")
    lock = lock_or_exit(paths, lock_file, "text")
    catalog = load_catalog_or_fail(catalog_dir)
    only = dataclasses.replace(result.inputs, fleets=tuple(
        f for f in result.inputs.fleets if f.name == name), gateways=())
    compiled = compile_inputs(only, catalog, profile, lock)
    if not compiled.ok or not compiled.plans:
        compile_errors_exit([d for d in compiled.diagnostics if d.is_error], result.sources,
                            "text")
    return compiled.plans[0]


@click.group()
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
@click.option("--azure-nics", "azure_nics", multiple=True, metavar="FLEET=FILE",
              help="An Azure scale-set fleet's instances: FILE from `az vmss nic list -g RG "
                   "--vmss-name NAME -o json`. Repeatable.")
@click.option("--resolve-scale-sets", is_flag=True,
              help="Read the Azure scale sets' instance addresses from Azure (credentials "
                   "of `az login`; pip install 'gpufleet[live]').")
@click.option("--check-dns", is_flag=True,
              help="Check that each gateway's wildcard record resolves to its address "
                   "(exit 1 when one does not).")
def export_dstack_command(stack_name: str | None, cwd: str, outputs_file: str | None,
                          state_file: str | None, out_dir: str, identity_file: str,
                          force: bool, azure_nics: Sequence[str], resolve_scale_sets: bool,
                          check_dns: bool) -> None:
    """Write SSH fleet files, gateway files and a dstack server config for a stack.

    Each fleet becomes an SSH fleet file (the nodes' addresses, the bastion as proxy_jump)
    for `dstack apply -f`, and a project in dstack-server-config.yml that names the networks
    gpufleet created; an Azure scale set's instances come from --azure-nics or
    --resolve-scale-sets. Each gateway becomes a dstack gateway file with its domain and
    the steps to move the record to dstack's gateway. A fleet or gateway that cannot be
    exported is named with the reason. Files are written atomically; a file gpufleet did
    not write is never replaced without --force.
    """
    from gpufleet.handoff import ExportError, check_gateway_dns, export_dstack, write_files

    given = [x for x in (stack_name, outputs_file, state_file) if x]
    if len(given) != 1:
        raise click.UsageError("give exactly one of --stack, --outputs and --state")
    check_folder(out_dir)
    try:
        outputs = _outputs(stack_name, cwd, outputs_file, state_file)
        listed = _scale_sets(outputs, azure_nics, resolve_scale_sets)
        exported = export_dstack(outputs, identity_file, listed)
        written = write_files(exported, out_dir, force)
    except ExportError as e:
        raise click.ClickException(str(e)) from None
    for note in exported.notes:
        click.echo(f"note: {note}", err=True)
    for w in written:
        click.echo(f"wrote {w}")
    if check_dns:
        results = check_gateway_dns(outputs, _resolve)
        for name, ok, detail in results:
            click.echo(f"dns: gateway {name}: {'ok' if ok else 'FAIL'}: {detail}")
        if not results:
            click.echo("dns: the stack has no gateway")
        if any(not ok for _, ok, _ in results):
            sys.exit(1)


def _resolve(host: str) -> list[str]:
    import socket

    return [str(info[4][0]) for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)]


def _scale_sets(outputs: dict[str, Any], files: Sequence[str], resolve: bool
                ) -> dict[str, list[str]]:
    """Fleet -> its Azure scale set's instance addresses, from files or from Azure."""
    from gpufleet.handoff import ExportError, scale_set_hosts
    from gpufleet.input import JsonInputError, parse_json

    fleets = {n: v for n, v in outputs.items() if isinstance(v, dict) and v.get("scale_set")}
    out: dict[str, list[str]] = {}
    for item in files:
        name, sep, path = item.partition("=")
        if not sep or not path:
            raise click.UsageError(f"--azure-nics {item}: write FLEET=FILE")
        if name not in fleets:
            have = ", ".join(sorted(fleets)) or "none"
            raise click.UsageError(f"--azure-nics {item}: the stack has no Azure scale-set "
                                   f"fleet '{name}' (it has: {have})")
        try:
            data = parse_json(_read(path, "a NIC list"), path, "a NIC list")
        except JsonInputError as e:
            raise click.UsageError(str(e)) from None
        out[name] = scale_set_hosts(data, bool(fleets[name].get("public_ips")), path)
    if resolve:
        from gpufleet.live import LiveError, MissingAccess, azure_scale_set_nics

        try:
            wanted = {n: str(v["scale_set"].get("id")) for n, v in fleets.items()
                      if n not in out}
            nics = azure_scale_set_nics(sorted(set(wanted.values())))
            for name, vmss_id in wanted.items():
                out[name] = scale_set_hosts(nics[vmss_id], bool(fleets[name].get("public_ips")),
                                            vmss_id)
        except MissingAccess as e:
            click.echo(f"gpufleet export: --resolve-scale-sets: {e}", err=True)
            sys.exit(EXIT_USAGE)
        except LiveError as e:
            raise ExportError(str(e)) from None
    return out


def _outputs(stack_name: str | None, cwd: str, outputs_file: str | None,
             state_file: str | None) -> dict[str, Any]:
    """The stack outputs from a file, or from the stack itself through the Automation API."""
    from gpufleet.handoff import ExportError, outputs_from_stack_output, outputs_from_state

    if outputs_file or state_file:
        path = str(outputs_file or state_file)
        raw = _read(path, "stack outputs" if outputs_file else "a stack export")
        return outputs_from_stack_output(raw, path) if outputs_file else \
            outputs_from_state(raw, path)
    from gpufleet.components.run.automation import AutomationStack
    from gpufleet.live import LiveError, MissingCli

    try:
        outputs: dict[str, Any] = AutomationStack.open(
            str(stack_name), cwd, why="use --outputs FILE (from `pulumi stack output --json "
            "--show-secrets`) or --state FILE").outputs()
    except MissingCli as e:
        click.echo(f"gpufleet export: {e}", err=True)
        sys.exit(EXIT_USAGE)
    except LiveError as e:
        raise ExportError(str(e)) from None
    return outputs


def _read(path: str, what: str) -> bytes:
    """A JSON input's bytes (a regular file, within the size bound), else a usage error."""
    from gpufleet.input import JsonInputError, read_bounded

    try:
        return read_bounded(path, what)
    except JsonInputError as e:
        raise click.UsageError(str(e)) from None
