"""`gpufleet topology`: the network topology of a stack's fleets, read from the clouds."""

from __future__ import annotations

import sys
from typing import Any

import click

from gpufleet.cli.common import EXIT_USAGE, check_out, format_option, out_option, write_or_print


@click.command()
@click.option("--stack", "stack_name", required=True, help="The stack to read.")
@click.option("--cwd", default="stacks", show_default=True, type=click.Path(file_okay=False),
              help="The Pulumi project folder (its Pulumi.<stack>.yaml is read).")
@click.option("--state", "state_file", type=click.Path(dir_okay=False),
              help="The stack's `pulumi stack export` (default: read through the Pulumi CLI).")
@click.option("--fleet", "only", multiple=True, help="Only this fleet (repeatable).")
@click.option("--record", "ledger", type=click.Path(dir_okay=False), metavar="LEDGER",
              help="Append each fleet's verdict (spread, max_spread, each node's layer ids) to "
                   "this evidence ledger.")
@format_option("text", "json")
@out_option("report")
def topology(stack_name: str, cwd: str, state_file: str | None, only: tuple[str, ...],
             ledger: str | None, fmt: str, out: str | None) -> None:
    """Where each fleet's nodes sit in the network the cloud exposes, layer by layer
    (spine > block > subblock > host), how far they spread, and the verdict against the
    fleet's `max_spread` (backends file, `fleets: {NAME: {max_spread: ...}}`; default `any`).

    AWS: DescribeInstanceTopology (ec2:DescribeInstanceTopology, the GPU families that
    support it). GCP: instances.get's physicalHostTopology (dense deployments: A4, A3 Ultra).
    Azure and Lambda expose none: the report says so. `--format json` carries each node's
    layer ids, its address and the topology order, for `gpufleet acceptance --topology`.

    Exit codes: 0 every fleet within its max_spread, 1 a fleet beyond it (the nodes named),
    2 the cloud does not say (no permission, an unsupported type, no API, a node missing
    from its answer), or a usage error.
    """
    import json

    from gpufleet.cli.live import _stack_files, _state
    from gpufleet.live import (
        LiveError,
        compile_stack,
        deployed_fleets,
        read_topology,
        topology_reader,
    )

    check_out(out)
    try:
        files, lock_path, profile, catalog = _stack_files(stack_name, cwd)
        validated, compiled, _ = compile_stack(files, profile, catalog, lock_path)
        state, known = _state(stack_name, cwd, state_file)
    except LiveError as e:
        click.echo(f"gpufleet topology: {e}", err=True)
        sys.exit(EXIT_USAGE)
    if state is None or not known:
        click.echo("gpufleet topology: the stack's state was not read (no Pulumi CLI): pass "
                   "--state EXPORT.json", err=True)
        sys.exit(EXIT_USAGE)
    spread = {f.name: f.max_spread for f in validated.inputs.fleets}
    unknown = [f for f in only if f not in spread]
    if unknown:
        raise click.UsageError(f"no fleet {', '.join(unknown)} in the stack's files; its "
                               f"fleets: {', '.join(sorted(spread)) or 'none'}")
    fleets = [f for f in deployed_fleets(state, compiled.plans, spread)
              if not only or f.fleet in only]
    report = read_topology(stack_name, fleets, topology_reader)
    if ledger:
        _record(report, ledger)
    text = (json.dumps(report.to_json(), indent=2) if fmt == "json"
            else "\n".join(report.lines())) + "\n"
    write_or_print(text, out, "report")
    sys.exit(report.exit_code)


def _record(report: Any, ledger: str) -> None:
    """Each fleet's verdict into the evidence ledger (`--record`)."""
    from gpufleet.cli.verdicts import Record, record_verdict

    for f in report.fleets:
        doc = f.to_json()
        code = {"within": 0, "beyond": 1, "unknown": 2}[doc["verdict"]]
        record_verdict(Record(ledger, f.fleet.fleet), "topology", {
            "spread": doc["spread"], "max_spread": doc["max_spread"],
            "reasons": doc["reasons"], "nodes": {n["node"]: n["layers"]
                                                 for n in doc["nodes"]}},
            code, len(f.fleet.ids))
