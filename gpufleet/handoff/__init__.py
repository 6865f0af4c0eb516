"""Hand-off: a deployed stack and its plans -> dstack files (SSH fleets, server config) and
cluster acceptance tasks with the check of their logs."""

from gpufleet.handoff.acceptance import (
    MAX_LOG_BYTES,
    TASK_MARKER,
    Expectation,
    NcclLog,
    Run,
    Verdict,
    fabric_facts,
    parse_log,
    render_task,
    task_for,
    verdict,
)
from gpufleet.handoff.export import (
    Exported,
    ExportError,
    check_gateway_dns,
    export_dstack,
    outputs_from_stack_output,
    outputs_from_state,
    scale_set_hosts,
    write_files,
)

__all__ = [
    "MAX_LOG_BYTES",
    "TASK_MARKER",
    "Expectation",
    "ExportError",
    "Exported",
    "NcclLog",
    "Run",
    "Verdict",
    "check_gateway_dns",
    "export_dstack",
    "fabric_facts",
    "outputs_from_stack_output",
    "outputs_from_state",
    "parse_log",
    "render_task",
    "scale_set_hosts",
    "task_for",
    "verdict",
    "write_files",
]
