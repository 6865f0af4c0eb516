"""The `gpufleet` command group and its entry point, which maps every outcome to an exit code:
0 ok, 1 invalid input (diagnostics printed), 2 usage error, 3 internal error (traceback with
-v). Commands live in the sibling modules, one per command group."""

from __future__ import annotations

import gc
import sys
import traceback
from collections.abc import Callable, Sequence
from types import ModuleType

import click

from gpufleet import __version__
from gpufleet.cli import processors
from gpufleet.cli.common import EXIT_INTERNAL, EXIT_INVALID, EXIT_OK, EXIT_USAGE
from gpufleet.exiting import freeze_at_exit
from gpufleet.fileio import WriteError
from gpufleet.outbound import HttpError, scrub


# Each command and the loader of the module that defines it, imported when the command runs
# (or `--help` lists them all): `gpufleet validate` loads its own module, not the whole CLI's.
def _inputs() -> ModuleType:
    from gpufleet.cli import inputs
    return inputs


def _lock() -> ModuleType:
    from gpufleet.cli import lockcmd
    return lockcmd


def _review() -> ModuleType:
    from gpufleet.cli import review
    return review


def _live() -> ModuleType:
    from gpufleet.cli import live
    return live


def _topology() -> ModuleType:
    from gpufleet.cli import topology
    return topology


def _acceptance() -> ModuleType:
    from gpufleet.cli import acceptance
    return acceptance


def _contract() -> ModuleType:
    from gpufleet.cli import contract
    return contract


def _policy() -> ModuleType:
    from gpufleet.cli import policy
    return policy


def _export() -> ModuleType:
    from gpufleet.cli import handoff, skyexport  # noqa: F401 (skyexport adds `export skypilot`)
    return handoff


def _gateway() -> ModuleType:
    from gpufleet.cli import gateway
    return gateway


def _health() -> ModuleType:
    from gpufleet.cli import health
    return health


def _quota() -> ModuleType:
    from gpufleet.cli import quota
    return quota


COMMANDS: dict[str, tuple[Callable[[], ModuleType], str]] = {
    "validate": (_inputs, "validate"), "schema": (_inputs, "schema"),
    "offers": (_inputs, "offers"), "catalog": (_inputs, "catalog"),
    "lock": (_lock, "lock_command"), "plan": (_review, "plan"), "diff": (_review, "diff"),
    "drift": (_live, "drift"), "preflight": (_live, "preflight"), "up": (_live, "up"),
    "replace": (_live, "replace"), "topology": (_topology, "topology"),
    "acceptance": (_acceptance, "acceptance"), "ledger": (_contract, "ledger"),
    "contract": (_contract, "contract"), "policy": (_policy, "policy"),
    "export": (_export, "export"), "gateway": (_gateway, "gateway"),
    "health": (_health, "health"), "quota": (_quota, "quota"),
}


class LazyGroup(click.Group):
    """A group whose commands are imported by name, on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is not None or cmd_name not in COMMANDS:
            return found
        load, attr = COMMANDS[cmd_name]
        command = getattr(load(), attr)
        if not isinstance(command, click.Command):
            return None
        self.add_command(command, cmd_name)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpufleet")
@click.option("-v", "--verbose", is_flag=True, help="Show tracebacks of internal errors.")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """Validate, price and compile dstack-format GPU fleets and gateways."""
    ctx.obj = {"verbose": verbose}


# Commands whose work is bounded by their input and done offline in a few seconds: run as
# the process's own command line, they run without the cyclic collector. Its collections walk
# every object made since the last (the Pulumi SDK's and the provider SDKs' classes, each
# Output of a run): 0.13 s of a 1.3 s cold `plan examples/`, for about 60,000 objects of
# garbage in cycles (under 2 MB) the process's exit takes back. Commands that wait on the
# Pulumi CLI or on servers (up, drift, replace, health, ...) keep it.
ONE_SHOT = frozenset({"catalog", "diff", "export", "lock", "offers", "plan", "policy", "quota",
                      "schema", "validate"})


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run the CLI and map every outcome to an exit code, never a traceback.
    ``argv`` None: the process's own command line (``gpufleet``, ``python -m gpufleet``),
    which exits when this returns."""
    freeze_at_exit()  # gpufleet.exiting: the last collections skipped
    args = list(argv) if argv is not None else sys.argv[1:]
    one_shot = argv is None and next((a for a in args if not a.startswith("-")), None) \
        in ONE_SHOT
    if one_shot:
        gc.disable()
    verbose = "-v" in args or "--verbose" in args
    try:
        if one_shot:  # and may fork a process per cloud's part of a program run
            processors.grant()
        cli.main(args=args, prog_name="gpufleet", standalone_mode=False)
    except click.exceptions.Exit as e:
        return int(e.exit_code)
    except click.UsageError as e:
        e.show()
        return EXIT_USAGE
    except WriteError as e:  # a target gpufleet will not write: nothing was written
        click.echo(f"gpufleet: {e}", err=True)
        return EXIT_USAGE
    except HttpError as e:  # a server that gave no usable answer (it names the server)
        click.echo(f"gpufleet: {e}", err=True)
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
        from gpufleet.backends.plugin import PluginError

        if isinstance(e, PluginError):  # an installed plugin gpufleet cannot use (named)
            click.echo(f"gpufleet: {e}", err=True)
            return EXIT_USAGE
        if verbose:
            click.echo(scrub(traceback.format_exc()), err=True, nl=False)
        click.echo(f"gpufleet: internal error: {type(e).__name__}: {scrub(str(e))}"
                   + ("" if verbose else " (run with -v for the traceback)"), err=True)
        return EXIT_INTERNAL
    return EXIT_OK
