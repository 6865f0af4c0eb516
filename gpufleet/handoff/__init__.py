"""Hand-off: a deployed stack and its plans -> dstack files (SSH fleets, server config) and
cluster acceptance tasks with the check of their logs."""

from gpufleet.handoff.acceptance import (
    TASK_MARKER,
    Expectation,
    fabric_facts,
    render_task,
    task_for,
)
from gpufleet.handoff.burnin import (
    burnin_task,
    expected_checks,
    is_burnin_log,
    judge,
    render_burnin,
)
from gpufleet.handoff.export import (
    Exported,
    export_dstack,
    scale_set_hosts,
    write_files,
)
from gpufleet.handoff.gateways import check_gateway_dns
from gpufleet.handoff.nccllog import MAX_LOG_BYTES, NcclLog, Run, Verdict, parse_log, verdict
from gpufleet.handoff.order import crossing, in_topology_order, ordered, topology_positions
from gpufleet.handoff.outputs import ExportError, outputs_from_stack_output, outputs_from_state
from gpufleet.handoff.pairs import is_pairs_log, judge_pairs, pairs_task
from gpufleet.handoff.scaling import (
    DEFAULT_FRACTION,
    PLOT_MARKER,
    Marks,
    ScalingReport,
    nodes_in,
    plot,
    report_json,
    report_lines,
    report_markdown,
    scaling_report,
)

__all__ = [
    "DEFAULT_FRACTION",
    "MAX_LOG_BYTES",
    "PLOT_MARKER",
    "TASK_MARKER",
    "Expectation",
    "ExportError",
    "Exported",
    "Marks",
    "NcclLog",
    "Run",
    "ScalingReport",
    "Verdict",
    "burnin_task",
    "check_gateway_dns",
    "crossing",
    "expected_checks",
    "export_dstack",
    "fabric_facts",
    "in_topology_order",
    "is_burnin_log",
    "is_pairs_log",
    "judge",
    "judge_pairs",
    "nodes_in",
    "ordered",
    "outputs_from_stack_output",
    "outputs_from_state",
    "pairs_task",
    "parse_log",
    "plot",
    "render_burnin",
    "render_task",
    "report_json",
    "report_lines",
    "report_markdown",
    "scale_set_hosts",
    "scaling_report",
    "task_for",
    "topology_positions",
    "verdict",
    "write_files",
]
