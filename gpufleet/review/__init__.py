"""Review: plans, offline runs and stack exports -> plan reports, diffs, costs and locks."""

from gpufleet.review import changes, pipeline
from gpufleet.review.bill import PARTS, Bill, Item, billed_as, bills, fleet_bill, gateway_bill
from gpufleet.review.changes import CHANGE_OPS, Change, PropertyChange, Report, guard
from gpufleet.review.costs import Costs, FleetCost, cost_violations, fleet_costs
from gpufleet.review.diff import (
    DIFF_NOTE,
    GuardOptions,
    Skips,
    choose_skips,
    diff_report,
    running_nodes,
    state_digests,
)
from gpufleet.review.lock import (
    Move,
    Relocked,
    lock_report,
    relock,
    total_delta,
    unknown_names,
)
from gpufleet.review.memory import available_mb, memory_refusal, needed_mb
from gpufleet.review.names import name_diagnostics, name_problems, physical_name
from gpufleet.review.owners import is_top, owner_map, owner_of
from gpufleet.review.policy import (
    POLICY_LEVELS,
    PolicyConfigError,
    Violation,
    check_levels,
    load_levels,
    policy_config,
    where_of,
)
from gpufleet.review.quotaneeds import network_rows
from gpufleet.review.quotas import NetworkCount, network_counts, quota_counts, quota_warnings
from gpufleet.review.report import PlanReport, plan_report
from gpufleet.review.state import (
    STACK_TYPE,
    State,
    StateError,
    StateResource,
    is_secret,
    parse_export,
)

__all__ = [
    "CHANGE_OPS",
    "DIFF_NOTE",
    "PARTS",
    "POLICY_LEVELS",
    "STACK_TYPE",
    "Bill",
    "Change",
    "Costs",
    "FleetCost",
    "GuardOptions",
    "Item",
    "Move",
    "NetworkCount",
    "PlanReport",
    "PolicyConfigError",
    "PropertyChange",
    "Relocked",
    "Report",
    "Skips",
    "State",
    "StateError",
    "StateResource",
    "Violation",
    "available_mb",
    "billed_as",
    "bills",
    "changes",
    "check_levels",
    "choose_skips",
    "cost_violations",
    "diff_report",
    "fleet_bill",
    "fleet_costs",
    "gateway_bill",
    "guard",
    "is_secret",
    "is_top",
    "load_levels",
    "lock_report",
    "memory_refusal",
    "name_diagnostics",
    "name_problems",
    "needed_mb",
    "network_counts",
    "network_rows",
    "owner_map",
    "owner_of",
    "parse_export",
    "physical_name",
    "pipeline",
    "plan_report",
    "policy_config",
    "quota_counts",
    "quota_warnings",
    "relock",
    "running_nodes",
    "state_digests",
    "total_delta",
    "unknown_names",
    "where_of",
]
