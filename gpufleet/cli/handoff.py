"""Hand-off command: `export dstack` (SSH fleet, volume and gateway files and a server config
from a deployed stack)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

from gpufleet.cli.common import (
    EXIT_USAGE,
)
from gpufleet.fileio import check_folder


@click.group()
def export() -> None:
    """Hand a deployed stack over to other tools."""


def stack_source(f: Callable[..., Any]) -> Callable[..., Any]:
    """--stack / --cwd / --outputs / --state: where a command reads the stack outputs."""
    for option in reversed((
            click.option("--stack", "stack_name", help="Read the outputs of this stack "
                         "(Automation API; needs the Pulumi CLI)."),
            click.option("--cwd", default="stacks", show_default=True,
                         type=click.Path(file_okay=False),
                         help="The Pulumi project folder (with --stack)."),
            click.option("--outputs", "outputs_file", type=click.Path(dir_okay=False),
                         help="A file from `pulumi stack output --json --show-secrets`."),
            click.option("--state", "state_file", type=click.Path(dir_okay=False),
                         help="A file from `pulumi stack export`."))):
        f = option(f)
    return f


def handoff_options(out: str, who: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options every hand-off shares: where the stack outputs come from, the folder the
    files go to (default ``out``), the key ``who`` reaches the nodes with, --force, and the
    Azure scale sets' addresses."""
    def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed((
                click.option("--out", "out_dir", default=out, show_default=True,
                             type=click.Path(file_okay=False),
                             help="Folder to write the files into."),
                click.option("--identity-file", default="~/.ssh/id_ed25519",
                             show_default=True,
                             help=f"The private key {who} uses for the nodes and bastions."),
                click.option("--force", is_flag=True,
                             help="Replace files in --out that gpufleet did not write."),
                click.option("--azure-nics", "azure_nics", multiple=True, metavar="FLEET=FILE",
                             help="An Azure scale-set fleet's instances: FILE from `az vmss "
                                  "nic list -g RG --vmss-name NAME -o json`. Repeatable."),
                click.option("--resolve-scale-sets", is_flag=True,
                             help="Read the Azure scale sets' instance addresses from Azure "
                                  "(credentials of `az login`; pip install "
                                  "'gpufleet[live]')."))):
            f = option(f)
        return stack_source(f)
    return wrap


@export.command("dstack")
@handoff_options("dstack", "dstack")
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
        outputs = stack_outputs(stack_name, cwd, outputs_file, state_file)
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
        from gpufleet.live import LiveError, MissingAccess, scale_set_nics

        try:
            wanted = {n: str(v["scale_set"].get("id")) for n, v in fleets.items()
                      if n not in out}
            nics: dict[str, Any] = {}
            for backend in sorted({str(fleets[n].get("backend")) for n in wanted}):
                ids = {wanted[n] for n in wanted if fleets[n].get("backend") == backend}
                nics |= scale_set_nics(backend, sorted(ids))
            for name, vmss_id in wanted.items():
                out[name] = scale_set_hosts(nics[vmss_id], bool(fleets[name].get("public_ips")),
                                            vmss_id)
        except MissingAccess as e:
            click.echo(f"gpufleet export: --resolve-scale-sets: {e}", err=True)
            sys.exit(EXIT_USAGE)
        except LiveError as e:
            raise ExportError(str(e)) from None
    return out


def stack_outputs(stack_name: str | None, cwd: str, outputs_file: str | None,
                  state_file: str | None, command: str = "export") -> dict[str, Any]:
    """The stack outputs from a file, or from the stack itself through the Automation API
    (``command`` names the command in its messages)."""
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
        click.echo(f"gpufleet {command}: {e}", err=True)
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
