"""The Pulumi program behind ``stacks/``: config -> load -> validate -> compile -> emit.

``stacks/__main__.py`` calls :func:`main`; ``gpufleet plan`` runs the same function under
the SDK's mock monitor. Invalid input aborts the program with the rendered diagnostics.
"""

from __future__ import annotations

import glob
import importlib
import os
from pathlib import Path
from typing import Any

import pulumi

from gpufleet.compile import BACKENDS_BY_NAME, Compiled, FleetPlan, ProviderPlan, compile_files
from gpufleet.diagnostics import render_text


def resolve_files(patterns: list[str], base: Path) -> list[str]:
    """Paths or globs relative to the stack folder -> existing paths, in a stable order."""
    out: list[str] = []
    for pattern in patterns:
        full = pattern if os.path.isabs(pattern) else str(base / pattern)
        matches = sorted(glob.glob(full, recursive=True)) or [full]
        out.extend(m for m in matches if m not in out)
    return out


def compile_config(files: list[str], base: Path, profile: str | None = None,
                   catalog_dir: str | None = None, lock: str | None = None) -> Compiled:
    """The stack's files -> plans. Offers come only from the lock (`gpufleet:lock`, default
    gpufleet.lock beside the first file): a missing or stale entry stops `pulumi up` with the
    same message as `gpufleet plan --locked`, so a catalog change never moves a cluster."""
    lock_path = None if not lock else lock if os.path.isabs(lock) else str(base / lock)
    validated, compiled = compile_files(resolve_files(files, base), profile, catalog_dir,
                                        lock_path)
    if compiled is None:
        raise pulumi.RunError("invalid gpufleet input:\n" + render_text(
            [d for d in validated.diagnostics if d.is_error], validated.sources))
    if not compiled.ok:
        raise pulumi.RunError("gpufleet cannot plan these fleets:\n" + render_text(
            [d for d in compiled.diagnostics if d.is_error], validated.sources))
    return compiled


def component(backend: str) -> Any:
    return importlib.import_module(BACKENDS_BY_NAME[backend].component)


def emit(compiled: Compiled) -> None:
    providers: dict[str, pulumi.ProviderResource] = {}

    def provider_for(module: Any, p: ProviderPlan) -> pulumi.ProviderResource:
        if p.name not in providers:
            providers[p.name] = module.provider(p)
        return providers[p.name]

    for plan in compiled.plans:
        module = component(plan.backend)
        fleet = module.emit(plan, provider_for(module, plan.provider))
        pulumi.export(plan.name, fleet_outputs(plan, fleet))
    for gw in compiled.gateways:
        module = component(gw.backend)
        gateway = module.emit_gateway(gw, provider_for(module, gw.provider))
        pulumi.export(f"gateway-{gw.name}", {
            "backend": gw.backend, "region": gw.region, "addresses": gateway.addresses,
            "record": gw.record.fqdn if gw.record else None})


def fleet_outputs(plan: FleetPlan, fleet: Any) -> dict[str, Any]:
    """A fleet's stack output: what people, `gpufleet export dstack` and dstack need to reach
    and use it (nodes, the way in, networks by role with their CIDRs, subnets)."""
    access = plan.access
    bastion = None
    if access is not None and access.bastion is not None:
        bastion = {"name": access.bastion.name, "address": fleet.bastion_address,
                   "user": access.user}
    networks = {n.role: {"name": fleet.network_names.get(n.role),
                         "id": fleet.network_ids.get(n.role), "cidr": n.cidr,
                         "subnets": [s.cidr for s in n.subnets]}
                for n in plan.networks}
    return {
        "backend": plan.backend, "region": plan.region, "zone": plan.zone,
        "instance_type": plan.instance_type, "placement": "cluster" if plan.placement
        else "any", "public_ips": plan.public_ip, "scope": plan.provider.scope,
        "resource_group": getattr(fleet, "resource_group", None),
        "tenant_id": plan.options.get("tenant_id"),
        "nodes": [{"name": name, "private_ip": private, "public_ip": public,
                   "zone": plan.zone, "instance_type": plan.instance_type}
                  for name, private, public in zip(plan.node_names, fleet.internal_ips,
                                                   fleet.public_ips, strict=True)],
        "access": None if access is None else {"method": access.method,
                                               "user": access.user},
        "bastion": bastion,
        "networks": networks,
        "extra_vpcs": [fleet.network_names[n.role] for n in plan.networks
                       if n.role.startswith("gpu-")],
        "roce_vpcs": [fleet.network_names[n.role] for n in plan.networks if n.role == "roce"],
        "subnets": dict(fleet.subnet_ids),
    }


def main(base_dir: str | None = None, compiled: Compiled | None = None) -> None:
    """The stack program. ``compiled`` lets `gpufleet plan` pass the result it already
    computed from the same files instead of compiling them a second time."""
    if compiled is None:
        cfg = pulumi.Config("gpufleet")
        files = cfg.get_object("files") or []
        if not isinstance(files, list) or not files:
            raise pulumi.RunError("set the stack config `gpufleet:files` to a list of files")
        base = Path(pulumi.get_root_directory() or base_dir or os.getcwd())
        compiled = compile_config([str(f) for f in files], base, cfg.get("profile") or None,
                                  cfg.get("catalog") or None, cfg.get("lock") or None)
    emit(compiled)
