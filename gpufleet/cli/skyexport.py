"""`gpufleet export skypilot`: SkyPilot's SSH Node Pools (and its ssh_config) from a deployed
stack's outputs, and, with --task, SkyPilot tasks from the fleets' YAML and lock: a launch task
whose `resources.ordered` lists the offers gpufleet would use, and the NCCL all-reduce on each
fleet's pool."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from gpufleet.cli.common import (
    catalog_option,
    load_catalog_or_fail,
    lock_option,
    lock_or_exit,
    validated_or_exit,
)
from gpufleet.cli.handoff import _scale_sets, export, handoff_options, stack_outputs


@export.command("skypilot")
@handoff_options("skypilot", "SkyPilot's API server")
@click.option("--task", "task_paths", multiple=True, type=click.Path(exists=True),
              metavar="PATH", help="Also write SkyPilot tasks for the fleets in these YAML "
                                   "files or folders (their lock beside them). Repeatable.")
@click.option("--fallbacks", default=3, show_default=True, type=click.IntRange(0, 20),
              help="How many offers after the locked one a launch task lists.")
@click.option("--os-login-user", metavar="NAME",
              help="Your OS Login POSIX user, for fleets reached through Identity-Aware "
                   "Proxy (`gcloud compute os-login describe-profile`).")
@catalog_option
@lock_option
def export_skypilot_command(stack_name: str | None, cwd: str, outputs_file: str | None,
                            state_file: str | None, out_dir: str, identity_file: str,
                            force: bool, azure_nics: Sequence[str], resolve_scale_sets: bool,
                            task_paths: Sequence[str], fallbacks: int,
                            os_login_user: str | None, catalog_dir: str | None,
                            lock_file: str | None) -> None:
    """Write SkyPilot's SSH Node Pools for a stack: one pool per fleet.

    ssh_node_pools.yaml lists each fleet's nodes (public addresses, or, for private nodes,
    host aliases that the ssh_config beside it resolves through the fleet's bastion); copy it
    to ~/.sky/ssh_node_pools.yaml, include the ssh_config from ~/.ssh/config and run `sky ssh
    up`. With --task, <fleet>-launch.sky.yaml lets SkyPilot launch on the locked offer and its
    fallbacks in gpufleet's order, and <fleet>-nccl.sky.yaml runs the NCCL all-reduce on the
    pool. Files are written atomically; a file gpufleet did not write is never replaced
    without --force.
    """
    from gpufleet.fileio import WriteError, check_folder, write_many
    from gpufleet.handoff import SKY_MARKER, ExportError, export_skypilot

    given = [x for x in (stack_name, outputs_file, state_file) if x]
    if len(given) != 1:
        raise click.UsageError("give exactly one of --stack, --outputs and --state")
    check_folder(out_dir)
    files: dict[str, str] = {}
    if task_paths:
        files |= _task_files(task_paths, fallbacks, catalog_dir, lock_file)
    try:
        outputs = stack_outputs(stack_name, cwd, outputs_file, state_file)
        listed = _scale_sets(outputs, azure_nics, resolve_scale_sets)
        pools, notes = export_skypilot(outputs, identity_file, listed, os_login_user)
        written = write_many(out_dir, {**pools, **files}.items(), SKY_MARKER, force)
    except (ExportError, WriteError) as e:
        raise click.ClickException(str(e)) from None
    for note in notes:
        click.echo(f"note: {note}", err=True)
    for w in written:
        click.echo(f"wrote {w}")


def _task_files(paths: Sequence[str], fallbacks: int, catalog_dir: str | None,
                lock_file: str | None) -> dict[str, str]:
    """Each fleet's launch task and pool NCCL task, from its YAML, lock and catalog."""
    from gpufleet.compile import compile_inputs
    from gpufleet.evidence import pool_nccl_text
    from gpufleet.handoff import launch_task
    from gpufleet.offers import select_all

    result = validated_or_exit(paths, "text")
    lock = lock_or_exit(paths, lock_file, "text")
    catalog = load_catalog_or_fail(catalog_dir)
    compiled = compile_inputs(result.inputs, catalog, None, lock)
    if not compiled.ok:
        from gpufleet.cli.common import compile_errors_exit

        compile_errors_exit([d for d in compiled.diagnostics if d.is_error], result.sources,
                            "text")
    # the order `gpufleet up --fallback` moves in: the fleet's offers as the YAML ranks them
    selections = {s.fleet.name: s for s in select_all(result.inputs, catalog)}
    files: dict[str, str] = {}
    for plan in compiled.plans:
        chosen = _offer(plan.backend, plan.region, plan.zone, plan.instance_type, plan.spot)
        ranked = [_offer(o.backend, o.region, o.zone, o.instance_type, o.spot)
                  for o in (selections[plan.name].offers if plan.name in selections else ())]
        ordered = [chosen, *[o for i, o in enumerate(ranked)
                             if o != chosen and o not in ranked[:i]]][:fallbacks + 1]
        files[f"{plan.name}-launch.sky.yaml"] = launch_task(plan.name, plan.nodes, ordered)
        files[f"{plan.name}-nccl.sky.yaml"] = pool_nccl_text(plan)
    return files


def _offer(backend: str, region: str, zone: str | None, instance_type: str,
           spot: bool) -> dict[str, Any]:
    return {"backend": backend, "region": region, "zone": zone,
            "instance_type": instance_type, "spot": spot}
