"""Hand-off: a deployed stack and its plans -> dstack files (SSH fleets, server config,
gateways, volumes)."""

from gpufleet.handoff.export import (
    Exported,
    export_dstack,
    write_files,
)
from gpufleet.handoff.gateways import check_gateway_dns
from gpufleet.handoff.hosts import scale_set_hosts
from gpufleet.handoff.outputs import ExportError, outputs_from_stack_output, outputs_from_state
from gpufleet.handoff.skypilot import MARKER as SKY_MARKER
from gpufleet.handoff.skypilot import POOLS_FILE, SSH_CONFIG, export_skypilot, launch_task

__all__ = [
    "POOLS_FILE",
    "SKY_MARKER",
    "SSH_CONFIG",
    "ExportError",
    "Exported",
    "check_gateway_dns",
    "export_dstack",
    "export_skypilot",
    "launch_task",
    "outputs_from_stack_output",
    "outputs_from_state",
    "scale_set_hosts",
    "write_files",
]
