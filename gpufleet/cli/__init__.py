"""Command line: thin click commands, one module per command group, that parse options, call
one pipeline and map the outcome to an exit code (0 ok, 1 invalid input, 2 usage error,
3 internal error). Heavy modules (pulumi, gpuhunt) are imported inside the commands that
need them, so `gpufleet validate` starts fast."""

from gpufleet.cli.acceptance import acceptance
from gpufleet.cli.app import cli, main
from gpufleet.cli.contract import contract, ledger
from gpufleet.cli.gateway import gateway
from gpufleet.cli.handoff import export
from gpufleet.cli.health import health
from gpufleet.cli.inputs import catalog, offers, schema, validate
from gpufleet.cli.live import drift, preflight, replace, up
from gpufleet.cli.lockcmd import lock_command
from gpufleet.cli.policy import policy
from gpufleet.cli.quota import quota
from gpufleet.cli.review import diff, plan
from gpufleet.cli.skyexport import export_skypilot_command  # noqa: F401 (registers)
from gpufleet.cli.topology import topology

for _command in (validate, schema, offers, catalog, lock_command, plan, diff, drift,
                 preflight, up, replace, topology, acceptance, ledger, contract, policy,
                 export, gateway, health, quota):
    cli.add_command(_command)

__all__ = ["cli", "main"]
