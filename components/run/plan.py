"""`gpufleet plan`: compile, run the real stack program under the mock monitor, run the
policy pack over what it registered, and build the report (``gpufleet.review``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from gpufleet.compile import Compiled, compile_inputs
from gpufleet.diagnostics import Diagnostic
from gpufleet.input import Lock, SyncedGateway, Validated, stackconfig
from gpufleet.offers import Catalog
from gpufleet.review import (
    PlanReport,
    available_mb,
    memory_refusal,
    name_diagnostics,
    plan_report,
    quota_warnings,
)

from .. import program
from ..sampling import sampling
from . import harness, offline
from .derive import NotDerivable, derive
from .policy import run_policies

# What the offline run puts where `pulumi up` reads the stack config `gpufleet:sshPublicKey`
# (only when the backends file gives no key; the plan warns about it, C011). The diff never
# counts it as a change (gpufleet.review.changes).
KEY_PLACEHOLDER = stackconfig.placeholder(stackconfig.SSH_PUBLIC_KEY)


def offline_config(paths: Sequence[str], profile: str | None, catalog_dir: str | None,
                   compiled: Compiled | None, ssh_public_key: str | None = None
                   ) -> dict[str, str]:
    """The stack config of an offline run over files named on the command line; the key
    set at `pulumi up` is ``ssh_public_key`` when the stack's config is known."""
    key = ssh_public_key or KEY_PLACEHOLDER \
        if compiled is not None and compiled.needs_stack_key else None
    return stackconfig.offline_settings(paths, profile, catalog_dir,
                                        ssh_public_key=key).to_config()


def run_offline(paths: Sequence[str], stack: str, profile: str | None,
                catalog_dir: str | None, compiled: Compiled | None = None,
                record_outputs: bool = False,
                progress: Callable[[str], None] | None = None,
                sample: bool = True) -> harness.RunResult:
    """The stack program under mocks (``compiled``: the plans it would compute). With
    ``compiled`` and ``sample``, each fleet's first nodes are registered and the others
    derived from them (``derive``); a fleet whose nodes differ in more than their names
    makes the run start again registering every node."""
    def once(sampled: bool) -> harness.RunResult:
        mocks = harness.StrictMocks(
            offline.invokes_for(compiled.dns_zones if compiled else ()), offline.outputs)
        mocks.progress = progress
        config = offline_config(paths, profile, catalog_dir, compiled)
        if not sampled or compiled is None:
            return harness.run_program(lambda: program.main(compiled=compiled), config,
                                       mocks, stack=stack, record_outputs=record_outputs)
        with sampling():
            run = harness.run_program(lambda: program.main(compiled=compiled), config,
                                      mocks, stack=stack, record_outputs=record_outputs)
            return derive(run, compiled.plans, mocks, record_outputs)
    try:
        return once(sample)
    except NotDerivable:
        return once(False)


def build_report(validated: Validated, catalog: Catalog, paths: Sequence[str], stack: str,
                 profile: str | None, catalog_dir: str | None, lock: Lock | None = None,
                 locked: bool = False, policy_levels: Mapping[str, str] | None = None,
                 progress: Callable[[str], None] | None = None,
                 synced: Mapping[str, SyncedGateway] | None = None
                 ) -> tuple[PlanReport | None, list[Diagnostic]]:
    """The plan report, or None and the compile errors; warnings come back in the list.
    ``progress`` is told what runs (for a line on a terminal); ``synced``: the gateways'
    addresses from the stack config (no entry: the record is pending)."""
    if progress is not None:
        progress(f"compiling {len(validated.inputs.fleets)} fleet(s), "
                 f"{len(validated.inputs.gateways)} gateway(s)")
    compiled = compile_inputs(validated.inputs, catalog, profile, lock, locked=locked,
                              synced=synced)
    if not compiled.ok:
        return None, list(compiled.diagnostics)
    too_big = memory_refusal(compiled.plans, validated.inputs, available_mb())
    if too_big:  # said before the run starts, not as a MemoryError or a kill
        return None, too_big
    run = run_offline(paths, stack, profile, catalog_dir, compiled, progress=progress)
    if progress is not None:
        progress("checking the policy rules")
    resources = tuple(r.to_json() for r in run.sorted())
    refused = name_diagnostics(resources, validated.inputs)
    if refused:  # names the cloud would refuse: no plan that `pulumi up` cannot apply
        return None, [*refused, *(d for d in compiled.diagnostics if not d.is_error)]
    violations = run_policies(resources, validated.inputs, policy_levels)
    report = plan_report(validated, compiled, stack, resources, run.invokes, run.exports,
                         lock, violations, catalog)
    return report, [*(d for d in compiled.diagnostics if not d.is_error),
                    *quota_warnings(resources, validated.inputs)]
