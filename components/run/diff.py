"""`gpufleet diff`: the stack program under mocks seeded from a `pulumi stack export` (real
ids and outputs for what exists, preview semantics for what is new), compared by
``gpufleet.review.diff``. Fleets whose input digest the export already records are not run.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gpufleet.compile import Compiled, compile_inputs
from gpufleet.diagnostics import Diagnostic
from gpufleet.input import Lock, SyncedGateway, Validated
from gpufleet.offers import Catalog
from gpufleet.review import (
    STACK_TYPE,
    GuardOptions,
    Report,
    State,
    StateError,
    choose_skips,
    cost_violations,
    diff_report,
    fleet_costs,
    running_nodes,
)

from ..sampling import sampling

if TYPE_CHECKING:
    from .harness import RunResult


def run_seeded(paths: Sequence[str], compiled: Compiled, state: State, profile: str | None,
               catalog_dir: str | None, ssh_public_key: str | None = None,
               sample: bool = True) -> list[dict[str, Any]]:
    """The program seeded from the state; with ``sample``, each fleet's nodes the state holds
    and its new ones are sampled apart and the rest derived (``derive``)."""
    if not compiled.plans and not compiled.gateways:
        return []  # nothing to run: every fleet was skipped
    # the Pulumi SDK only where something runs: an unchanged stack is compared without it
    from .. import program
    from . import harness, offline
    from .derive import NotDerivable, derive
    from .plan import offline_config

    seed = {r.urn: (r.id, dict(r.outputs)) for r in state.resources if r.type != STACK_TYPE}
    names = [urn.rsplit("::", 1)[-1] for urn in seed]

    def once(sampled: bool) -> RunResult:
        mocks = harness.StrictMocks(offline.invokes_for(compiled.dns_zones), offline.outputs,
                                    seed=seed)

        def go() -> RunResult:
            return harness.run_program(lambda: program.main(compiled=compiled),
                                       offline_config(paths, profile, catalog_dir, compiled,
                                                      ssh_public_key), mocks,
                                       stack=state.stack or "dev",
                                       project=state.project or "gpufleet", preview=True)
        if not sampled:
            return go()
        with sampling(names):  # nodes the state holds, and new ones, sampled apart
            return derive(go(), compiled.plans, mocks)
    try:
        try:
            run = once(sample)
        except NotDerivable:
            run = once(False)
    except Exception as e:  # the SDK refused a value the export recorded
        raise StateError(f"not a stack export gpufleet can compare with: the program could "
                         f"not use the values it records ({type(e).__name__}: "
                         f"{str(e).strip()[-300:]}); export the stack again with `pulumi "
                         "stack export --file FILE`") from None
    return [r.to_json() for r in run.sorted()]


def offline_diff(validated: Validated, catalog: Catalog, paths: Sequence[str], state: State,
                 profile: str | None, catalog_dir: str | None, guards: GuardOptions,
                 lock: Lock | None = None, locked: bool = False, full: bool = False,
                 ssh_public_key: str | None = None,
                 synced: Mapping[str, SyncedGateway] | None = None
                 ) -> tuple[Report | None, list[Diagnostic]]:
    """The diff; fleets and gateways whose input digest equals the one the export recorded
    are not run again (``full`` runs everything) and their resources count as unchanged.
    ``ssh_public_key``, ``synced``: the stack config's key and gateways' addresses, where
    the stack's config was found."""
    compiled = compile_inputs(validated.inputs, catalog, profile, lock, locked=locked,
                              synced=synced)
    if not compiled.ok:
        return None, list(compiled.diagnostics)
    skips = choose_skips(compiled, state, full)
    run = dataclasses.replace(
        compiled, plans=tuple(p for p in compiled.plans if p.name not in skips.names),
        gateways=tuple(g for g in compiled.gateways if g.name not in skips.names))
    regs = run_seeded([os.path.abspath(p) for p in paths], run, state, profile, catalog_dir,
                      ssh_public_key)
    warnings = [d for d in compiled.diagnostics if not d.is_error]
    report = diff_report(regs, state, compiled, state.stack, guards, skips)
    costs = fleet_costs(compiled.plans, lock, running_nodes(state), gateways=compiled.gateways,
                        volumes=compiled.volumes)
    extra = tuple(cost_violations(costs, guards.max_cost_per_hour, guards.max_cost_increase))
    return dataclasses.replace(report, cost_lines=tuple(costs.lines()),
                               violations=report.violations + extra), warnings
