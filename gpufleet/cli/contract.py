"""`gpufleet ledger verify` and `gpufleet contract report`: the evidence ledger and the
monthly delivery report against the terms in the backends file."""

from __future__ import annotations

import sys

import click

from gpufleet.cli.common import EXIT_USAGE


@click.group()
def ledger() -> None:
    """The evidence ledger that `--record LEDGER` appends verdicts to."""


@ledger.command("verify")
@click.argument("ledger_file", metavar="LEDGER")
@click.option("--head", metavar="DIGEST",
              help="A head digest `verify` printed earlier: it must still be in the ledger "
                   "(a removed last entry breaks no chain; this catches it).")
def verify_command(ledger_file: str, head: str | None) -> None:
    """Check the ledger's hash chain: every entry's digest matches its content, names the
    entry before it, and sits at its sequence number. Exit 0 intact, 1 an entry edited,
    removed, reordered or cut off (each named by line), 2 unreadable."""
    from gpufleet.evidence import LedgerError, verify

    try:
        code, lines = verify(ledger_file, head)
    except LedgerError as e:
        click.echo(f"gpufleet ledger: {e}", err=True)
        sys.exit(EXIT_USAGE)
    for line in lines:
        click.echo(line)
    sys.exit(code)


@click.group()
def contract() -> None:
    """What the provider contracted to deliver, against the recorded evidence."""


@contract.command("report")
@click.argument("ledger_file", metavar="LEDGER")
@click.argument("paths", nargs=-1, required=True)
@click.option("--month", metavar="YYYY-MM", help="The month (default: the ledger's latest).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]),
              default="text", show_default=True,
              help="markdown: ready to paste into a provider ticket, with the digests.")
def report_command(ledger_file: str, paths: tuple[str, ...], month: str | None,
                   fmt: str) -> None:
    """Judge each fleet's contract terms (backends file: `fleets: {NAME: {contract:
    {busbw: {2: 680}, storage_mbps: ..., max_replacements_per_month: ...,
    max_bad_batch_share: 0.05, replace_within_hours: 24}}}`) on the month's verdicts in
    LEDGER: met, breached (with the entries and their evidence digests) or no evidence; the
    hours a figure stayed below. The ledger is verified first.

    Exit codes: 0 every term met or without evidence, 1 a term breached or the ledger is
    not intact, 2 usage or unreadable input.
    """
    import json

    from gpufleet.cli.common import validated_or_exit
    from gpufleet.evidence import (
        MONTH,
        ContractError,
        LedgerError,
        contract_lines,
        contract_report,
        month_of,
        read_entries,
    )

    if month is not None and not MONTH.fullmatch(month):
        raise click.UsageError(f"--month {month}: expected YYYY-MM (ASCII digits)")
    try:
        entries, problems = read_entries(ledger_file)
    except LedgerError as e:
        click.echo(f"gpufleet contract: {e}", err=True)
        sys.exit(EXIT_USAGE)
    if problems:
        click.echo(f"gpufleet contract: {ledger_file} is not intact ({problems[0]}): no "
                   "report on tampered evidence (`gpufleet ledger verify`)", err=True)
        sys.exit(1)
    validated = validated_or_exit(list(paths), "text")
    terms = {f.name: f.contract for f in validated.inputs.fleets if f.contract}
    if not terms:
        raise click.UsageError("no fleet of these files declares `contract` terms in the "
                               "backends file (`fleets: {NAME: {contract: ...}}`)")
    try:
        when = month_of(entries, month)
        results = contract_report(entries, terms, when)
    except ContractError as e:
        click.echo(f"gpufleet contract: {ledger_file}: {e}; no report on an entry that "
                   "cannot be read", err=True)
        sys.exit(EXIT_USAGE)
    breached = any(r.status == "breached" for r in results)
    if fmt == "json":
        click.echo(json.dumps({"month": when, "ledger": ledger_file, "breached": breached,
                               "terms": [r.to_json() for r in results]}, indent=2))
    else:
        click.echo("\n".join(contract_lines(results, when, fmt == "markdown")))
    sys.exit(1 if breached else 0)
