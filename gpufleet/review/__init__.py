"""Review: plans -> the stack program run offline or live -> plan, diff and drift reports."""

from gpufleet.review import changes
from gpufleet.review.acceptance import parse_log, render_task, task_for, verdict
from gpufleet.review.costs import Costs, cost_violations, fleet_costs
from gpufleet.review.diff import DIFF_NOTE, GuardOptions, offline_diff
from gpufleet.review.drift import DRIFT_NOTE, DriftError, MissingTool, live_drift
from gpufleet.review.export import (
    ExportError,
    export_dstack,
    outputs_from_stack_output,
    outputs_from_state,
    write_files,
)
from gpufleet.review.lock import Move, Relocked, relock, total_delta, unknown_names
from gpufleet.review.plan import build_report, render
from gpufleet.review.policy import POLICY_LEVELS, Violation, run_policies
from gpufleet.review.state import StateError, parse_export
from gpufleet.review.up import CAPACITY_ERRORS, AutomationStack, MissingCli, UpError, deploy

__all__ = [
    "CAPACITY_ERRORS",
    "DIFF_NOTE",
    "DRIFT_NOTE",
    "POLICY_LEVELS",
    "AutomationStack",
    "Costs",
    "DriftError",
    "ExportError",
    "GuardOptions",
    "MissingCli",
    "MissingTool",
    "Move",
    "Relocked",
    "StateError",
    "UpError",
    "Violation",
    "build_report",
    "changes",
    "cost_violations",
    "deploy",
    "export_dstack",
    "fleet_costs",
    "live_drift",
    "offline_diff",
    "outputs_from_stack_output",
    "outputs_from_state",
    "parse_export",
    "parse_log",
    "relock",
    "render",
    "render_task",
    "run_policies",
    "task_for",
    "total_delta",
    "unknown_names",
    "verdict",
    "write_files",
]
