"""`gpufleet acceptance`: is the cluster healthy? The burn-in, NCCL and pairs tasks per fleet,
the checks of their logs, and the scaling report over node counts."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence
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
from gpufleet.fileio import check_file, check_file_in, check_folder, write_bytes, write_many


class _TaskByDefault(click.Group):
    """`gpufleet acceptance FLEET PATH...` is `gpufleet acceptance task FLEET PATH...`: a first
    argument that names no subcommand is the fleet of the task files."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["task", *args]
        return super().parse_args(ctx, args)


_EXPECT = click.option(
    "--expect-busbw", "expect", multiple=True, metavar="[N=]GBPS",
    help="The bus bandwidth the contract expects (GB/s), for every node count or, as N=GBPS, "
         "for N nodes; default the fabric's published figure. Repeatable.")
_TOPOLOGY = click.option(
    "--topology", "topology_file", type=click.Path(dir_okay=False),
    help="`gpufleet topology --format json` of the stack: the NCCL and pairs tasks take the "
         "nodes in topology order (ring neighbours are network neighbours); `check` names "
         "the layer a slow pair's link crosses.")
_RECORD = click.option(
    "--record", "ledger", type=click.Path(dir_okay=False), metavar="LEDGER",
    help="Append the verdict to this evidence ledger (JSON Lines, hash-chained; "
         "`gpufleet ledger verify` checks it): time, fleet, nodes, figures, threshold, "
         "verdict, the log's digest.")
_FLEET = click.option("--fleet", "fleet_name", required=True,
                      help="The fleet the logs belong to.")


def _plan_options(f: Any) -> Any:
    return catalog_option(lock_option(profile_option(f)))


@click.group(cls=_TaskByDefault)
def acceptance() -> None:
    """Is my cluster healthy? The acceptance tasks per fleet, the checks of their logs, and
    the scaling report over node counts.

    \b
    gpufleet acceptance FLEET [PATH...]      (or `acceptance task`): write the tasks
    gpufleet acceptance check LOG --fleet NAME PATH...: judge one log (exit 0, 1, 2)
    gpufleet acceptance report LOG... --fleet NAME PATH...: the scaling report
    """


@acceptance.command("task")
@click.argument("fleet_name", metavar="FLEET")
@click.argument("paths", nargs=-1)
@click.option("--out", "out_dir", default=".", show_default=True,
              type=click.Path(file_okay=False), help="Folder for the task files.")
@click.option("--force", is_flag=True,
              help="Replace a task file in --out that gpufleet did not write.")
@_EXPECT
@click.option("--diag", "--dcgm-level", "dcgm_level", type=click.IntRange(1, 4), default=3,
              show_default=True, help="The burn-in task's `dcgmi diag -r` level.")
@click.option("--duration", "soak", metavar="N[s|m|h]", default=None,
              help="Soak: the burn-in repeats its NCCL all-reduce for this long after the "
                   "checks and names a node whose bandwidth falls by more than the margin.")
@click.option("--node-counts", "counts", metavar="N,N,...",
              help="Also write the NCCL task at each of these node counts "
                   "(FLEET-nccl-N.dstack.yml), for the scaling report.")
@_TOPOLOGY
@_plan_options
def task(fleet_name: str, paths: Sequence[str], out_dir: str, force: bool,
         expect: Sequence[str], dcgm_level: int, soak: str | None, counts: str | None,
         topology_file: str | None, catalog_dir: str | None, lock_file: str | None,
         profile: str | None) -> None:
    """Write FLEET-nccl.dstack.yml (a dstack task running all_reduce_perf across every GPU
    of every node with the fabric's NCCL settings), FLEET-burnin.dstack.yml (each node on
    its own: GPU count and memory, idle memory, ECC, retired pages, row remapping, Xids,
    topology, DCGM diagnostics at --diag, a single-node NCCL run and the clock slowdowns
    under it, a --duration soak), for an RDMA fleet FLEET-pairs.dstack.yml (NCCL over each
    pair of neighbouring nodes, to find a slow one), and FLEET-storage-perf-NAME.dstack.yml
    per shared filesystem and dstack volume (fio, small-file metadata); print the
    expected threshold."""
    from gpufleet.evidence import TASK_MARKER, soak_duration, storage_tasks, task_for

    paths = _existing(paths)
    series = _counts(counts)
    try:
        soak_seconds = soak_duration(soak) if soak is not None else 0
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--duration") from None
    names = _task_files(fleet_name, series)
    check_folder(out_dir)  # before any work: where the tasks go
    for name in names.values():
        check_file_in(os.path.join(out_dir, name), TASK_MARKER, force)
    plan, contract, _, volumes = _fleet_plan(paths, fleet_name, catalog_dir, lock_file,
                                             profile)
    stores = storage_tasks(plan, volumes=volumes)  # per shared filesystem and volume
    for fs, _task in stores:
        names[f"storage-{fs.name}"] = f"{fleet_name}-storage-perf-{fs.name}.dstack.yml"
        check_file_in(os.path.join(out_dir, names[f"storage-{fs.name}"]), TASK_MARKER, force)
    task_doc, exp = task_for(plan)
    marks = _marks(exp, expect, contract)
    order = _topology(topology_file, fleet_name) if topology_file else None
    files = _tasks(plan, task_doc, exp, names, dcgm_level, series, order, stores,
                   soak_seconds)
    for out in write_many(out_dir, files, TASK_MARKER, force):
        click.echo(f"wrote {out}")
    if task_doc["nodes"] > plan.nodes:
        click.echo(f"the task runs on {task_doc['nodes']} nodes: the fleet holds {plan.nodes} "
                   "now, and dstack provisions the others for the task (the fleet allows "
                   f"{plan.nodes_max or 'more'})")
    click.echo(_judged(exp, marks, task_doc["nodes"], None).text() if exp.multi_node
               else exp.text())


@acceptance.command("check")
@click.argument("log_file", metavar="LOG")
@click.argument("paths", nargs=-1)
@_FLEET
@_EXPECT
@click.option("--threshold", type=click.FloatRange(min=0, max=1, min_open=True),
              help="The pass mark as a fraction of the expected bandwidth (default the "
                   "fabric's).")
@click.option("--margin", type=click.FloatRange(min=0, max=1), default=0.1, show_default=True,
              help="With a burn-in log: a node whose single-node bandwidth is this fraction "
                   "under the nodes' median fails.")
@click.option("--nodes", "narrowed", type=click.IntRange(min=1), metavar="N",
              help="Judge an NCCL run on N of the fleet's nodes on purpose: it passes as "
                   "what it is (\"N of M nodes\"), never as the fleet's acceptance.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="The verdict's format.")
@_TOPOLOGY
@_RECORD
@_plan_options
def check(log_file: str, paths: Sequence[str], fleet_name: str, expect: Sequence[str],
          threshold: float | None, margin: float, narrowed: int | None, fmt: str,
          topology_file: str | None, ledger: str | None, catalog_dir: str | None,
          lock_file: str | None, profile: str | None) -> None:
    """Read the nccl-tests output, the burn-in log or the pairs log (naming the bad nodes):
    exit 0 pass, 1 fail, 2 unreadable log. An NCCL run must span every node of the fleet's
    acceptance task unless --nodes narrows it."""
    from gpufleet.cli.verdicts import Record, check_log
    from gpufleet.evidence import expected_checks, storage_targets, task_for

    paths = _existing(paths, [log_file])
    plan, contract, gpu_gib, volumes = _fleet_plan(paths, fleet_name, catalog_dir, lock_file,
                                                   profile)
    task_doc, exp = task_for(plan)
    marks = _marks(exp, expect, contract)
    check_log(log_file, exp, lambda e, n: _judged(e, marks, n, threshold), fmt,
              (plan.nodes, task_doc["nodes"]), margin, gpu_gib, expected_checks(plan),
              narrowed, _topology(topology_file, fleet_name) if topology_file else None,
              Record(ledger, fleet_name, log_file) if ledger else None,
              storage_targets(plan, volumes))


@acceptance.command("report")
@click.argument("args", nargs=-1, required=True, metavar="LOG... PATH...")
@_FLEET
@_EXPECT
@click.option("--threshold", type=click.FloatRange(min=0, max=1, min_open=True),
              help="The pass mark as a fraction of the expected bandwidth (default 0.9, "
                   "as `acceptance check`).")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False),
              help="Draw busbw vs message size, one line per node count (.png or .svg).")
@click.option("--force", is_flag=True, help="Replace a plot gpufleet did not write.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]),
              default="text", show_default=True, help="The report's format.")
@_RECORD
@_plan_options
def report(args: Sequence[str], fleet_name: str, expect: Sequence[str],
           threshold: float | None, plot_file: str | None, force: bool, fmt: str,
           ledger: str | None, catalog_dir: str | None, lock_file: str | None,
           profile: str | None) -> None:
    """nccl-tests logs of one fleet at several node counts (read from each log's rank lines):
    busbw per node count and size, each count against the expected figure; exit 0 pass, 1 a
    count below the pass mark, 2 a log that cannot be read."""
    from gpufleet.evidence import task_for

    logs = [a for a in args if not _is_input(a)]
    paths = [a for a in args if _is_input(a)]
    if not logs:
        raise click.UsageError("gpufleet acceptance report: give the nccl-tests logs (and "
                               "the fleet's YAML files or folders)")
    if plot_file is not None and not plot_file.lower().endswith((".png", ".svg")):
        raise click.UsageError(f"--plot {plot_file}: the file ends in .png or .svg")
    paths = _existing(paths, logs)
    plan, contract, _, _ = _fleet_plan(paths, fleet_name, catalog_dir, lock_file, profile)
    _, exp = task_for(plan)
    _report(fleet_name, logs, _marks(exp, expect, contract), threshold, plot_file, fmt, force,
            exp, ledger)


def _existing(paths: Sequence[str], logs: Sequence[str] = ()) -> list[str]:
    """The YAML paths (default: this folder), once every path and log exists."""
    paths = list(paths) or ["."]
    missing = [p for p in (*paths, *logs) if not os.path.exists(p)]
    if missing:
        raise click.UsageError(f"no such file or folder: {', '.join(missing)}")
    return paths


def _counts(text: str | None) -> list[int]:
    if text is None:
        return []
    try:
        counts = sorted({int(c) for c in text.split(",") if c.strip()})
    except ValueError:
        raise click.UsageError(f"--node-counts {text}: write node counts as 2,4,8") from None
    if not counts or counts[0] < 2:
        raise click.UsageError(f"--node-counts {text}: the scaling runs span 2 or more nodes")
    return counts


def _task_files(fleet: str, counts: Sequence[int]) -> dict[str, str]:
    """The files task mode writes, by role ("nccl", "burnin", "pairs", "nccl-N")."""
    names = {kind: f"{fleet}-{kind}.dstack.yml" for kind in ("nccl", "burnin", "pairs")}
    names |= {f"nccl-{n}": f"{fleet}-nccl-{n}.dstack.yml" for n in counts}
    return names


def _topology(path: str, fleet: str) -> dict[str, tuple[str, ...]]:
    """The fleet's node positions by address from `gpufleet topology --format json`."""
    from gpufleet.evidence import topology_positions
    from gpufleet.input import JsonInputError, read_json_file

    try:
        return topology_positions(read_json_file(path, "a topology report"), fleet)
    except (JsonInputError, ValueError) as e:
        raise click.UsageError(f"--topology {path}: {e}") from None


def _tasks(plan: Any, task: dict[str, Any], exp: Any, names: dict[str, str],
           dcgm_level: int, series: Sequence[int],
           positions: dict[str, tuple[str, ...]] | None = None,
           stores: Sequence[tuple[Any, dict[str, Any]]] = (),
           soak_seconds: int = 0) -> list[tuple[str, str]]:
    from gpufleet.evidence import (
        burnin_task,
        in_topology_order,
        ordered,
        pairs_task,
        render_burnin,
        render_storage,
        render_task,
    )

    def placed(t: dict[str, Any]) -> dict[str, Any]:
        return in_topology_order(t, ordered(positions)) if positions and exp.multi_node else t

    burnin = burnin_task(plan, task["image"], dcgm_level, soak_seconds)
    task = placed(task)
    files = [(names["nccl"], render_task(task, exp)), (names["burnin"], render_burnin(burnin))]
    pairs = placed(p) if (p := pairs_task(plan)) is not None else None
    if pairs is not None:
        files.append((names["pairs"], render_task(
            pairs, exp, "NCCL over each pair of neighbouring nodes (to find a slow one)")))
    if series and not exp.multi_node:
        raise click.UsageError(f"--node-counts: fleet {plan.name} has no RDMA fabric between "
                               "its nodes; its NCCL run is single-node")
    if series and plan.nodes_max is not None and series[-1] > plan.nodes_max:
        raise click.UsageError(f"--node-counts: fleet {plan.name} allows at most "
                               f"{plan.nodes_max} nodes")
    files += [(names[f"storage-{fs.name}"], render_storage(t, fs)) for fs, t in stores]
    for n in series:
        files.append((names[f"nccl-{n}"], render_task(
            {**task, "name": f"{plan.name[:25]}-nccl-{n}", "nodes": n}, exp)))
    return files


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


def _marks(exp: Any, expect: Sequence[str], contract: Mapping[int, float]) -> Any:
    from gpufleet.evidence import Marks

    per, every = _expectations(expect)
    return Marks(per, every, contract, exp.busbw_gbps, exp.source, exp.measured_nodes)


def _judged(exp: Any, marks: Any, nodes: int, fraction: float | None) -> Any:
    """The expectation at this node count, with the contract's figure and pass mark."""
    from gpufleet.evidence import fabric_facts

    ref = marks.reference(nodes)
    if ref is None:
        if fraction is not None:
            raise click.UsageError("--threshold needs a figure to take a fraction of: this "
                                   "fabric has none published; give --expect-busbw GBPS")
        return exp
    frac = fraction if fraction is not None else float(fabric_facts()["pass_fraction"])
    return dataclasses.replace(exp, busbw_gbps=ref[0], threshold_gbps=round(ref[0] * frac, 1),
                               source=ref[1], multi_node=True)


def _report(fleet: str, logs: Sequence[str], marks: Any, fraction: float | None,
            plot_file: str | None, fmt: str, force: bool, exp: Any,
            ledger: str | None = None) -> None:
    import json

    from gpufleet.cli.verdicts import read_log, record_runs
    from gpufleet.evidence import (
        DEFAULT_FRACTION,
        PLOT_MARKER,
        plot,
        report_json,
        report_lines,
        report_markdown,
        scaling_report,
    )

    read = [(path, *read_log(path)) for path in logs]
    report = scaling_report(fleet, [(p, t) for p, t, _ in read],
                            fraction if fraction is not None else DEFAULT_FRACTION, marks,
                            [p for p, _, big in read if big], exp)
    if ledger is not None:  # one NCCL entry per node count, the report's verdict on it
        record_runs(ledger, fleet, report_json(report))
    if plot_file is not None and report.points:
        check_file(plot_file, PLOT_MARKER, force)  # before drawing: a foreign file stays
        try:
            write_bytes(plot_file, plot(report, plot_file), PLOT_MARKER, force)
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
        f for f in result.inputs.fleets if f.name == name), gateways=(),
        filesystems=tuple(fs for fs in result.inputs.filesystems if name in fs.fleets))
    compiled = compile_inputs(only, catalog, profile, lock)
    if not compiled.ok or not compiled.plans:
        compile_errors_exit([d for d in compiled.diagnostics if d.is_error], result.sources,
                            "text")
    spec = next(f for f in only.fleets if f.name == name)
    plan = compiled.plans[0]
    memory = next((r.gpu_memory_gib for r in catalog.rows if r.backend == plan.backend
                   and r.instance_type == plan.instance_type and r.gpu_memory_gib), None)
    return plan, spec.expect_busbw, memory, compiled.volumes
