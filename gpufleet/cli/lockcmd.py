"""`gpufleet lock`: write or check the offers lock."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from gpufleet.cli.common import (
    EXIT_INVALID,
    catalog_option,
    compile_errors_exit,
    load_catalog_or_fail,
    lock_option,
    lock_or_exit,
    profile_option,
    validated_or_exit,
)


@click.command("lock")
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option("--upgrade", is_flag=True,
              help="Pick offers again from the catalog even where the lock is current.")
@click.option("--fleet", "names", multiple=True, metavar="NAME",
              help="With --upgrade: only this fleet or gateway (repeatable).")
@click.option("--prune", is_flag=True,
              help="Drop entries of fleets and gateways that are not in the given files.")
@profile_option
@catalog_option
@lock_option
@click.option("--check", is_flag=True,
              help="Write nothing; exit 1 when the lock would change (for CI).")
@click.option("--force", is_flag=True,
              help="Replace a lock file that `gpufleet lock` did not write.")
def lock_command(paths: Sequence[str], upgrade: bool, names: Sequence[str], prune: bool,
                 profile: str | None, catalog_dir: str | None, lock_file: str | None,
                 check: bool, force: bool) -> None:
    """Write or update gpufleet.lock: the offer of every fleet and gateway (PATHs default to
    the current folder).

    Entries whose requirements are unchanged stay as they are; new fleets and fleets whose
    requirements changed get the cheapest offer. The file is written atomically, and only
    when its content changes.
    """
    from gpufleet.fileio import check_file, folder_lock
    from gpufleet.input import stackconfig
    from gpufleet.offers import LOCK_MARKER

    if names and not upgrade:
        raise click.UsageError("--fleet goes with --upgrade (without it, `gpufleet lock` "
                               "re-picks only what changed)")
    paths = list(paths) or ["."]
    path = lock_file or stackconfig.default_lock_path(paths)
    if not check:
        check_file(path, LOCK_MARKER, force)  # before any work
    with folder_lock(path):  # concurrent runs take turns: no entry is lost
        _relock(paths, path, upgrade, names, prune, profile, catalog_dir, check, force)


def _relock(paths: list[str], path: str, upgrade: bool, names: Sequence[str], prune: bool,
            profile: str | None, catalog_dir: str | None, check: bool, force: bool) -> None:
    """Read the lock, pick what changed, write the lock: one read-modify-write."""
    from gpufleet.compile import compile_inputs
    from gpufleet.offers import render_lock, write_lock
    from gpufleet.review import lock_report, relock, unknown_names

    result = validated_or_exit(paths, "text", profile)
    lock = lock_or_exit(paths, path, "text")
    unknown = unknown_names(names, result.inputs)
    if unknown:
        raise click.UsageError(f"no fleet or gateway named {', '.join(unknown)} in the "
                               "given files")
    catalog = load_catalog_or_fail(catalog_dir)
    wanted: frozenset[str] | bool = frozenset(names) if names else upgrade
    compiled = compile_inputs(result.inputs, catalog, profile, lock, wanted)
    if not compiled.ok:
        compile_errors_exit([d for d in compiled.diagnostics if d.is_error], result.sources,
                            "text")
    new = relock(result.inputs, compiled, lock, catalog, prune)
    for line in lock_report(new, upgrade):
        click.echo(line)
    text = render_lock(new.fleets, new.gateways)
    current = lock.exists and text == render_lock(lock.fleets, lock.gateways)
    if check:
        if current:
            click.echo(f"{path} is up to date")
            return
        click.echo(f"{path} is out of date: run `gpufleet lock` and commit it", err=True)
        sys.exit(EXIT_INVALID)
    if write_lock(path, new.fleets, new.gateways, force, text):
        click.echo(f"wrote {path}: {len(new.fleets)} fleet(s), {len(new.gateways)} "
                   "gateway(s)")
    else:
        click.echo(f"{path} is up to date")
