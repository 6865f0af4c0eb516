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
from gpufleet.handoff.contract import MONTH, ContractError, TermResult, contract_report, month_of
from gpufleet.handoff.contract import report_lines as contract_lines
from gpufleet.handoff.export import (
    Exported,
    export_dstack,
    scale_set_hosts,
    write_files,
)
from gpufleet.handoff.gateways import check_gateway_dns
from gpufleet.handoff.ledger import LedgerError, file_digest, read_entries, verify
from gpufleet.handoff.ledger import append as append_entry
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
from gpufleet.handoff.storage import (
    expected_mbps,
    fleet_volumes,
    is_storage_log,
    judge_storage,
    render_storage,
    storage_tasks,
    volume_storage,
)

__all__ = [
    "DEFAULT_FRACTION",
    "MAX_LOG_BYTES",
    "MONTH",
    "PLOT_MARKER",
    "TASK_MARKER",
    "ContractError",
    "Expectation",
    "ExportError",
    "Exported",
    "LedgerError",
    "Marks",
    "NcclLog",
    "Run",
    "ScalingReport",
    "TermResult",
    "Verdict",
    "append_entry",
    "burnin_task",
    "check_gateway_dns",
    "contract_lines",
    "contract_report",
    "crossing",
    "expected_checks",
    "expected_mbps",
    "export_dstack",
    "fabric_facts",
    "file_digest",
    "fleet_volumes",
    "in_topology_order",
    "is_burnin_log",
    "is_pairs_log",
    "is_storage_log",
    "judge",
    "judge_pairs",
    "judge_storage",
    "month_of",
    "nodes_in",
    "ordered",
    "outputs_from_stack_output",
    "outputs_from_state",
    "pairs_task",
    "parse_log",
    "plot",
    "read_entries",
    "render_burnin",
    "render_storage",
    "render_task",
    "report_json",
    "report_lines",
    "report_markdown",
    "scale_set_hosts",
    "scaling_report",
    "storage_tasks",
    "task_for",
    "topology_positions",
    "verdict",
    "verify",
    "volume_storage",
    "write_files",
]
