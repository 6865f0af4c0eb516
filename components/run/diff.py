"""The stack program as a preview over a stack's state, for `gpufleet diff`: mocks seeded
from a `pulumi stack export` (real ids and outputs for what exists, preview semantics for
what is new). Only runs the program; the pipeline compiles, chooses what to run and compares
(``gpufleet.review.pipeline``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gpufleet.compile import Compiled
from gpufleet.compile.runs import RunInputs, RunRefused

from ..sampling import sampling

if TYPE_CHECKING:
    from .harness import RunResult


def run_seeded(run: RunInputs, compiled: Compiled,
               seed: Mapping[str, tuple[str, Mapping[str, Any]]], project: str,
               sample: bool = True, jobs: int = 1) -> tuple[dict[str, Any], ...]:
    """The pipeline's ``SeededRun``; with ``sample``, each fleet's nodes the state holds and
    its new ones are sampled apart and the rest derived (``derive``). ``jobs`` above 1: the
    clouds' parts may run in forked processes (``parallel``)."""
    if not compiled.plans and not compiled.gateways and not compiled.buckets:
        return ()  # nothing to run: every fleet, gateway and bucket was skipped
    # the Pulumi SDK only where something runs: an unchanged stack is compared without it
    from . import parallel
    from .plan import offline_config

    seeded = {urn: (i, dict(outputs)) for urn, (i, outputs) in seed.items()}
    config = offline_config(run, compiled)
    result = None
    if jobs > 1:
        result = parallel.run_parts(compiled, lambda part: _preview(
            run, part, seeded, project, sample, config), jobs)
    if result is None:
        try:
            result = _preview(run, compiled, seeded, project, sample, config)
        except Exception as e:  # the SDK refused a value the export recorded
            raise RunRefused(f"{type(e).__name__}: {str(e).strip()[-300:]}") from None
    return tuple(r.to_json() for r in result.sorted())


def _preview(run: RunInputs, compiled: Compiled,
             seeded: dict[str, tuple[str, dict[str, Any]]], project: str, sample: bool,
             config: dict[str, str]) -> RunResult:
    """One preview run of ``compiled`` (the whole stack's or a part) over the seed."""
    from .. import program
    from . import harness, offline
    from .derive import NotDerivable, derive

    names = [urn.rsplit("::", 1)[-1] for urn in seeded]

    def once(sampled: bool) -> RunResult:
        mocks = harness.StrictMocks(offline.invokes_for(compiled.dns_zones), offline.outputs,
                                    seed=seeded)

        def go() -> RunResult:
            return harness.run_program(lambda: program.main(compiled=compiled), config,
                                       mocks, stack=run.stack, project=project, preview=True)
        if not sampled:
            return go()
        with sampling(names):  # nodes the state holds, and new ones, sampled apart
            return derive(go(), compiled.plans, mocks)
    try:
        return once(sample)
    except NotDerivable:
        return once(False)
