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

__all__ = [
    "ExportError",
    "Exported",
    "check_gateway_dns",
    "export_dstack",
    "outputs_from_stack_output",
    "outputs_from_state",
    "scale_set_hosts",
    "write_files",
]
