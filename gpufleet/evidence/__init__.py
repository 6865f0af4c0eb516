"""Evidence: a cluster's acceptance, burn-in, scaling and storage runs and their logs ->
verdicts, the ledger that keeps them and the contract's report on them."""

from gpufleet.compile import fabric_facts
from gpufleet.evidence.acceptance import (
    TASK_MARKER,
    Expectation,
    render_task,
    task_for,
)
from gpufleet.evidence.bucketcheck import bucket_storage
from gpufleet.evidence.burnin import (
    burnin_task,
    expected_checks,
    is_burnin_log,
    judge,
    render_burnin,
)
from gpufleet.evidence.contract import MONTH, ContractError, TermResult, contract_report, month_of
from gpufleet.evidence.contract import report_lines as contract_lines
from gpufleet.evidence.gpuhealth import soak_duration
from gpufleet.evidence.ledger import LedgerError, file_digest, read_entries, verify
from gpufleet.evidence.ledger import append as append_entry
from gpufleet.evidence.nccllog import MAX_LOG_BYTES, NcclLog, Run, Verdict, parse_log, verdict
from gpufleet.evidence.order import crossing, in_topology_order, ordered, topology_positions
from gpufleet.evidence.pairs import is_pairs_log, judge_pairs, pairs_task
from gpufleet.evidence.scaling import (
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
from gpufleet.evidence.skypilot import pool_nccl_task, pool_nccl_text
from gpufleet.evidence.storage import (
    expected_mbps,
    fleet_volumes,
    is_storage_log,
    judge_storage,
    render_storage,
    storage_targets,
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
    "LedgerError",
    "Marks",
    "NcclLog",
    "Run",
    "ScalingReport",
    "TermResult",
    "Verdict",
    "append_entry",
    "bucket_storage",
    "burnin_task",
    "contract_lines",
    "contract_report",
    "crossing",
    "expected_checks",
    "expected_mbps",
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
    "pairs_task",
    "parse_log",
    "plot",
    "pool_nccl_task",
    "pool_nccl_text",
    "read_entries",
    "render_burnin",
    "render_storage",
    "render_task",
    "report_json",
    "report_lines",
    "report_markdown",
    "scaling_report",
    "soak_duration",
    "storage_targets",
    "storage_tasks",
    "task_for",
    "topology_positions",
    "verdict",
    "verify",
    "volume_storage",
]
