"""The offline pipeline of `gpufleet plan` and `gpufleet diff`: load (done by the caller) ->
offers and compile -> run the stack program -> review. The core owns the sequence; the
Pulumi layer is handed in as the functions that run the program and the policy pack
(``gpufleet.compile.runs``), so it only runs what it is given and returns what was
registered."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from gpufleet.compile import Compiled, compile_inputs
from gpufleet.compile.runs import (
    PolicyRun,
    ProgramRun,
    Progress,
    RunInputs,
    RunRefused,
    SeededRun,
)
from gpufleet.diagnostics import Diagnostic
from gpufleet.input import Inputs, Validated
from gpufleet.review.changes import Report
from gpufleet.review.costs import cost_violations, fleet_costs
from gpufleet.review.diff import (
    GuardOptions,
    choose_skips,
    diff_report,
    running_nodes,
    seed_for,
)
from gpufleet.review.memory import available_mb, memory_refusal
from gpufleet.review.names import name_diagnostics
from gpufleet.review.owners import BUCKET_OWNER
from gpufleet.review.policy import Violation, policy_subjects, violations
from gpufleet.review.quotas import quota_warnings
from gpufleet.review.report import PlanReport, plan_report
from gpufleet.review.state import State, StateError


def compiled_for(validated: Validated, run: RunInputs) -> Compiled:
    if run.catalog is None:
        raise ValueError("a run that compiles needs its catalog")
    return compile_inputs(validated.inputs, run.catalog, run.profile, run.lock,
                          locked=run.locked, synced=run.synced)


def plan(validated: Validated, run: RunInputs, program: ProgramRun, policies: PolicyRun,
         levels: Mapping[str, str] | None = None, progress: Progress | None = None
         ) -> tuple[PlanReport | None, list[Diagnostic]]:
    """The plan report, or None and the compile errors; warnings come back in the list.
    ``progress`` is told what runs (for a line on a terminal)."""
    if progress is not None:
        progress(f"compiling {len(validated.inputs.fleets)} fleet(s), "
                 f"{len(validated.inputs.gateways)} gateway(s)")
    compiled = compiled_for(validated, run)
    if not compiled.ok:
        return None, list(compiled.diagnostics)
    too_big = memory_refusal(compiled.plans, validated.inputs, available_mb())
    if too_big:  # said before the run starts, not as a MemoryError or a kill
        return None, too_big
    registered = program(run, compiled, progress)
    if progress is not None:
        progress("checking the policy rules")
    resources = registered.resources
    refused = name_diagnostics(resources, validated.inputs)
    if refused:  # names the cloud would refuse: no plan that `pulumi up` cannot apply
        return None, [*refused, *(d for d in compiled.diagnostics if not d.is_error)]
    found = policy_violations(resources, validated.inputs, policies, levels)
    report = plan_report(validated, compiled, run.stack, resources,
                         list(registered.invokes), dict(registered.exports), run.lock, found,
                         run.catalog)
    return report, [*(d for d in compiled.diagnostics if not d.is_error),
                    *quota_warnings(resources, validated.inputs)]


def policy_violations(resources: Sequence[Mapping[str, Any]], inputs: Inputs,
                      policies: PolicyRun, levels: Mapping[str, str] | None = None
                      ) -> list[Violation]:
    """The policy pack (``policies``) over a run's resources, as the plan reports it."""
    subjects = policy_subjects(resources, inputs)
    return violations(subjects, policies(subjects, dict(levels or {})))


def diff(validated: Validated, run: RunInputs, state: State, guards: GuardOptions,
         seeded: SeededRun, full: bool = False) -> tuple[Report | None, list[Diagnostic]]:
    """The diff; fleets and gateways whose input digest equals the one the export recorded
    are not run again (``full`` runs everything) and their resources count as unchanged."""
    compiled = compiled_for(validated, run)
    if not compiled.ok:
        return None, list(compiled.diagnostics)
    skips = choose_skips(compiled, state, full)
    to_run = dataclasses.replace(
        compiled, plans=tuple(p for p in compiled.plans if p.name not in skips.names),
        gateways=tuple(g for g in compiled.gateways if g.name not in skips.names),
        buckets=tuple(b for b in compiled.buckets if BUCKET_OWNER + b.name not in skips.names))
    seed = seed_for(state, skips)
    where = dataclasses.replace(run, paths=tuple(os.path.abspath(p) for p in run.paths),
                                stack=state.stack or "dev")
    try:
        regs = seeded(where, to_run, seed, state.project or "gpufleet")
    except RunRefused as e:
        raise StateError(f"not a stack export gpufleet can compare with: the program could "
                         f"not use the values it records ({e}); export the stack again with "
                         "`pulumi stack export --file FILE`") from None
    warnings = [d for d in compiled.diagnostics if not d.is_error]
    report = diff_report(list(regs), state, compiled, state.stack, guards, skips)
    costs = fleet_costs(compiled.plans, run.lock, running_nodes(state),
                        gateways=compiled.gateways, volumes=compiled.volumes)
    extra = tuple(cost_violations(costs, guards.max_cost_per_hour, guards.max_cost_increase))
    return dataclasses.replace(report, cost_lines=tuple(costs.lines()),
                               violations=report.violations + extra), warnings
