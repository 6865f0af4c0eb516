"""The stack program offline, for `gpufleet plan` (and the exports the tests write): run under
the mock monitor on the compiled plans, each fleet's first nodes registered and the others
derived. Only runs the program and returns what it registered; the pipeline that compiles
before and reviews after is the core's (``gpufleet.review.pipeline``)."""

from __future__ import annotations

from gpufleet.compile import Compiled
from gpufleet.compile.runs import Progress, Registered, RunInputs
from gpufleet.input import stackconfig

from .. import program
from ..sampling import sampling
from . import harness, offline, parallel
from .derive import NotDerivable, derive

# What the offline run puts where `pulumi up` reads the stack config `gpufleet:sshPublicKey`
# (only when the backends file gives no key; the plan warns about it, C011). The diff never
# counts it as a change (gpufleet.review.changes).
KEY_PLACEHOLDER = stackconfig.placeholder(stackconfig.SSH_PUBLIC_KEY)


def offline_config(run: RunInputs, compiled: Compiled | None) -> dict[str, str]:
    """The stack config of an offline run over files named on the command line; the key
    set at `pulumi up` is the run's ``ssh_public_key`` when the stack's config is known."""
    key = run.ssh_public_key or KEY_PLACEHOLDER \
        if compiled is not None and compiled.needs_stack_key else None
    return stackconfig.offline_settings(list(run.paths), run.profile, run.catalog_dir,
                                        ssh_public_key=key).to_config()


def run_offline(run: RunInputs, compiled: Compiled | None = None,
                record_outputs: bool = False, progress: Progress | None = None,
                sample: bool = True, config: dict[str, str] | None = None
                ) -> harness.RunResult:
    """The stack program under mocks (``compiled``: the plans it would compute). With
    ``compiled`` and ``sample``, each fleet's first nodes are registered and the others
    derived from them (``derive``); a fleet whose nodes differ in more than their names
    makes the run start again registering every node. ``config``: the stack config, where
    ``compiled`` is a part of the plans the config was made for."""
    def once(sampled: bool) -> harness.RunResult:
        mocks = harness.StrictMocks(
            offline.invokes_for(compiled.dns_zones if compiled else ()), offline.outputs)
        mocks.progress = progress
        settings = config if config is not None else offline_config(run, compiled)
        if not sampled or compiled is None:
            return harness.run_program(lambda: program.main(compiled=compiled), settings,
                                       mocks, stack=run.stack, record_outputs=record_outputs)
        with sampling():
            result = harness.run_program(lambda: program.main(compiled=compiled), settings,
                                         mocks, stack=run.stack, record_outputs=record_outputs)
            return derive(result, compiled.plans, mocks, record_outputs)
    try:
        return once(sample)
    except NotDerivable:
        return once(False)


def registered(run: RunInputs, compiled: Compiled, progress: Progress | None = None,
               sample: bool = True, jobs: int = 1) -> Registered:
    """The pipeline's ``ProgramRun``: what the program registers for the compiled plans
    (``sample=False``: every node registered, as `pulumi up` runs the program). ``jobs``:
    the processors it may use; above 1, the clouds' parts may run in forked processes."""
    result = None
    if jobs > 1:  # the clouds' parts in processes of their own (``parallel``)
        config = offline_config(run, compiled)
        result = parallel.run_parts(compiled, lambda part: run_offline(
            run, part, progress=progress, sample=sample, config=config), jobs)
    if result is None:
        result = run_offline(run, compiled, progress=progress, sample=sample)
    return Registered(tuple(r.to_json() for r in result.sorted()), tuple(result.invokes),
                      result.exports)
