"""`gpufleet plan`: compile, then run the real stack program offline and build the report.

The program and the mock harness live in ``gpufleet.components`` (Pulumi code); this module
imports them only when a plan is actually built, so the rest of the CLI stays light.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from gpufleet.compile import KEY_CONFIG, Compiled, compile_inputs
from gpufleet.diagnostics import Diagnostic
from gpufleet.input import Lock, Validated
from gpufleet.offers import Catalog
from gpufleet.review.costs import fleet_costs
from gpufleet.review.policy import run_policies
from gpufleet.views import PlanReport, render_plan_json, render_plan_markdown, render_plan_text


def stack_config(paths: Sequence[str], profile: str | None, catalog_dir: str | None,
                 lock_file: str | None = None) -> dict[str, str]:
    config = {"gpufleet:files": json.dumps([os.path.abspath(p) for p in paths])}
    if lock_file:
        config["gpufleet:lock"] = os.path.abspath(lock_file)
    if profile:
        config["gpufleet:profile"] = profile
    if catalog_dir:
        config["gpufleet:catalog"] = os.path.abspath(catalog_dir)
    return config


# What the offline run puts where `pulumi up` reads the stack config `gpufleet:sshPublicKey`
# (only when the backends file gives no key; the plan warns about it, C011).
KEY_PLACEHOLDER = "<the stack config gpufleet:sshPublicKey, read at `pulumi up`>"


def offline_config(paths: Sequence[str], profile: str | None, catalog_dir: str | None,
                   compiled: Compiled | None) -> dict[str, str]:
    config = stack_config(paths, profile, catalog_dir)
    if compiled is not None and needs_key_from_config(compiled):
        config[KEY_CONFIG] = KEY_PLACEHOLDER
    return config


def dns_zones(compiled: Compiled | None) -> list[str]:
    """The DNS zones the gateways of a run look up (for the offline answers)."""
    if compiled is None:
        return []
    return sorted({g.record.zone for g in compiled.gateways
                   if g.record is not None and not g.record.create_zone})


def needs_key_from_config(compiled: Compiled) -> bool:
    fleets = any(p.access is not None and p.access.needs_key and not p.access.public_key
                 for p in compiled.plans)
    gateways = any(g.backend == "azure" and not g.options.get("ssh_public_key")
                   for g in compiled.gateways)
    return fleets or gateways


def run_offline(paths: Sequence[str], stack: str, profile: str | None,
                catalog_dir: str | None, compiled: Compiled | None = None,
                record_outputs: bool = False) -> Any:
    from gpufleet.components import harness, offline, program

    mocks = harness.StrictMocks(offline.invokes_for(dns_zones(compiled)), offline.outputs)
    return harness.run_program(lambda: program.main(compiled=compiled),
                               offline_config(paths, profile, catalog_dir, compiled), mocks,
                               stack=stack, record_outputs=record_outputs)


def build_report(validated: Validated, catalog: Catalog, paths: Sequence[str], stack: str,
                 profile: str | None, catalog_dir: str | None, lock: Lock | None = None,
                 locked: bool = False, policy_levels: Mapping[str, str] | None = None
                 ) -> tuple[PlanReport | None, list[Diagnostic]]:
    compiled = compile_inputs(validated.inputs, catalog, profile, lock, locked=locked)
    if not compiled.ok:
        return None, list(compiled.diagnostics)
    run = run_offline(paths, stack, profile, catalog_dir, compiled)
    resources = tuple(r.to_json() for r in run.sorted())
    lookups = tuple(sorted(((t, a) for t, a in run.invokes),
                           key=lambda x: (x[0], json.dumps(x[1], sort_keys=True))))
    report = PlanReport(stack, compiled.catalog, compiled.plans, resources, lookups,
                        run.exports, compiled.gateways, compiled.fleet_locks,
                        compiled.gateway_locks,
                        "" if lock is None else lock.file if lock.exists
                        else f"{lock.file} (not written yet: `gpufleet lock`)",
                        validated.inputs.ssh_fleets,
                        tuple(run_policies(resources, validated.inputs, policy_levels)),
                        fleet_costs(compiled.plans, lock))
    return report, [d for d in compiled.diagnostics if not d.is_error]


def render(report: PlanReport, fmt: str) -> str:
    if fmt == "json":
        return render_plan_json(report)
    if fmt == "markdown":
        return render_plan_markdown(report)
    return render_plan_text(report)
