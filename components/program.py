"""The Pulumi program behind ``stacks/``: config -> load -> validate -> compile -> emit.

``stacks/__main__.py`` calls :func:`main`; ``gpufleet plan`` runs the same function under
the SDK's mock monitor. Invalid input aborts the program with the rendered diagnostics.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pulumi

from gpufleet.compile import (
    DIGEST_OUTPUT,
    Compiled,
    FleetDesign,
    GatewayDesign,
    ProviderDesign,
    compile_files,
    emission_order,
    input_digest,
)
from gpufleet.diagnostics import render_text
from gpufleet.exiting import freeze_at_exit
from gpufleet.input import stackconfig

from .registry import BackendComponents, FleetResources, GatewayResources, components_for
from .sampling import registered_nodes
from .volumes import emit_volume

BUCKET_TYPE = "gpufleet:storage:Bucket"  # owns a bucket's resources (diff and drift say so)


def compile_settings(settings: stackconfig.StackSettings, base: Path) -> Compiled:
    """The stack's files -> plans. Offers come only from the lock (`gpufleet:lock`, default
    gpufleet.lock beside the first file): a missing or stale entry stops `pulumi up` with the
    same message as `gpufleet plan --locked`, so a catalog change never moves a cluster."""
    files = stackconfig.resolve_files(settings.files, base)
    validated, compiled = compile_files(files, settings.profile, settings.catalog,
                                        stackconfig.lock_path(settings, base, files),
                                        settings.gateways)
    if compiled is None:
        raise pulumi.RunError("invalid gpufleet input:\n" + render_text(
            [d for d in validated.diagnostics if d.is_error], validated.sources))
    if not compiled.ok:
        raise pulumi.RunError("gpufleet cannot plan these fleets:\n" + render_text(
            [d for d in compiled.diagnostics if d.is_error], validated.sources))
    return compiled


def read_settings() -> stackconfig.StackSettings:
    """The stack config through Pulumi (`pulumi config`, or the mock run's config map)."""
    cfg = pulumi.Config(stackconfig.NAMESPACE)
    raw = {key: cfg.get(key.split(":", 1)[1]) for key in stackconfig.KEYS}
    try:
        return stackconfig.settings_from_config(raw)
    except stackconfig.StackConfigError as e:
        raise pulumi.RunError(str(e)) from None


def emit(compiled: Compiled) -> None:
    providers: dict[str, pulumi.ProviderResource | None] = {}

    def provider_for(module: BackendComponents, p: ProviderDesign
                     ) -> pulumi.ProviderResource | None:
        if p.name not in providers:
            providers[p.name] = module.provider(p)
        return providers[p.name]

    shared: dict[str, Any] = {}  # filesystems other fleets mount, as their fleet builds them
    fleets: dict[str, FleetResources] = {}  # a gateway may share a fleet's network
    for plan in emission_order(compiled.plans):
        module = components_for(plan.backend)
        fleet = module.emit(plan, provider_for(module, plan.provider), shared)
        fleets[plan.name] = fleet
        pulumi.export(plan.name, fleet_outputs(plan, fleet))
    for gw in compiled.gateways:
        module = components_for(gw.backend)
        gateway = module.emit_gateway(gw, provider_for(module, gw.provider), fleets)
        pulumi.export(f"gateway-{gw.name}", gateway_outputs(gw, gateway))
    for req in compiled.quota_requests:  # `quotas: {request: true}`: an increase per shortfall
        module = components_for(req.backend)
        file_request = getattr(module, "emit_quota_request", None)
        if file_request is None:
            raise pulumi.RunError(f"{req.backend} files no quota requests")
        file_request(req, provider_for(module, req.provider))
    for bucket in compiled.buckets:  # the backends file's `buckets:`, a component each
        holder = pulumi.ComponentResource(BUCKET_TYPE, bucket.name, None)
        if bucket.provider is None:  # R2: the program's own Cloudflare provider
            from . import r2

            r2.emit_bucket(bucket, holder)
        else:
            module = components_for(bucket.cloud)
            file_bucket = getattr(module, "emit_bucket", None)
            if file_bucket is None:
                raise pulumi.RunError(f"{bucket.cloud} builds no buckets")
            file_bucket(bucket, provider_for(module, bucket.provider), fleets, holder)
        holder.register_outputs({DIGEST_OUTPUT: input_digest(bucket)})
    for plan in compiled.plans:  # R2 mounts: a token per fleet and bucket, kept as a secret
        r2_mounts = [m for m in plan.buckets if m.secret is not None]
        if r2_mounts:
            from . import r2

            module = components_for(plan.backend)
            keep = getattr(module, "emit_r2_secrets", None)
            if keep is None:
                raise pulumi.RunError(f"{plan.backend} keeps no secrets for R2 mounts")
            owner = fleets[plan.name]  # the fleet's component holds its tokens and secrets
            parent = owner if isinstance(owner, pulumi.Resource) else None
            keep(plan, owner, [(m, r2.credentials(m, plan.name, parent)) for m in r2_mounts],
                 provider_for(module, plan.provider))
    for vol in compiled.volumes:
        volume_id: Any = vol.volume_id
        if vol.created:
            module = components_for(vol.backend)
            volume_id = emit_volume(vol, provider_for(module, vol.provider))
        pulumi.export(f"volume-{vol.name}", {
            "backend": vol.backend, "region": vol.region, "zone": vol.zone,
            "size_gib": vol.size_gib, "volume_id": volume_id, "created": vol.created})


def _bastion_output(plan: FleetDesign, fleet: FleetResources) -> dict[str, Any] | None:
    """The bastion's name, address and user, and the tunnel to a dstack server on it."""
    access = plan.access
    if access is None or access.bastion is None:
        return None
    bastion: dict[str, Any] = {"name": access.bastion.name,
                               "address": fleet.bastion_address, "user": access.user}
    server = access.bastion.server
    if server is not None:  # control_plane: the dstack server runs on the bastion
        port, user = server.port, access.user
        bastion["server"] = {
            "port": port, "version": server.dstack_version,
            "url": f"http://127.0.0.1:{port}",  # through the tunnel, on your machine
            "tunnel": pulumi.Output.from_input(fleet.bastion_address).apply(
                lambda a: f"ssh -N -L {port}:127.0.0.1:{port} {user}@{a}")}
    return bastion


def fleet_outputs(plan: FleetDesign, fleet: FleetResources) -> dict[str, Any]:
    """A fleet's stack output: what people, `gpufleet export dstack` and dstack need to reach
    and use it (nodes, the way in, networks by role with their CIDRs, subnets)."""
    access = plan.access
    bastion = _bastion_output(plan, fleet)
    networks = {n.role: {"name": fleet.network_names.get(n.role),
                         "id": fleet.network_ids.get(n.role), "cidr": n.cidr,
                         "subnets": [s.cidr for s in n.subnets],
                         "subnet_ids": [fleet.subnet_ids.get(s.name) for s in n.subnets],
                         **({"project": n.project} if n.project else {})}
                for n in plan.networks}
    return {
        "backend": plan.backend, "region": plan.region, "zone": plan.zone,
        "instance_type": plan.instance_type, "placement": "cluster" if plan.placement
        else "any", "public_ips": plan.public_ip, "scope": plan.provider.scope,
        # the cluster fabric whose software the host setup installed (`export dstack`
        # writes what runs need to use it)
        "fabric": plan.host_setup.fabric if plan.host_setup is not None else "none",
        "resource_group": getattr(fleet, "resource_group", None),
        "tenant_id": getattr(plan.options, "tenant_id", None),  # where the backend has one
        # the nodes' service account, where the backend gives them one (dstack's own A3
        # instances need it too: `export dstack` passes it on)
        "service_account": getattr(plan.options, "service_account", None),
        **({"dstack_creds": dict(plan.dstack_creds)} if plan.dstack_creds else {}),
        # who takes the nodes beside dstack (`export skypilot` reads it); absent: dstack only
        **({"handoff": plan.handoff} if plan.handoff else {}),
        "nodes": [{"name": name, "private_ip": private, "public_ip": public,
                   "zone": plan.zone, "instance_type": plan.instance_type}
                  for name, private, public in zip(registered_nodes(plan), fleet.internal_ips,
                                                   fleet.public_ips, strict=True)],
        "access": None if access is None else {"method": access.method,
                                               "user": access.user},
        "bastion": bastion,
        "networks": networks,
        "extra_vpcs": [fleet.network_names[n.role] for n in plan.networks
                       if n.role.startswith("gpu-")],
        "roce_vpcs": [fleet.network_names[n.role] for n in plan.networks if n.role == "roce"],
        "subnets": dict(fleet.subnet_ids),
        # an Azure scale set: `gpufleet export dstack` lists its instances' addresses
        "scale_set": _scale_set(fleet),
        # shared filesystems the nodes mount: `export dstack` turns them into instance volumes
        "filesystems": {fs.name: {"kind": fs.kind, "service": fs.service, "mount": fs.mount,
                                  "target": getattr(fleet, "filesystems", {}).get(fs.name),
                                  "capacity_gib": fs.capacity_gib}
                        for fs in plan.filesystems},
        # buckets the nodes mount (FUSE): the exports say where the data is
        **({"buckets": {m.bucket: {"cloud": m.cloud, "mount": m.path,
                                   "read_only": m.read_only} for m in plan.buckets}}
           if plan.buckets else {}),
    }


def gateway_outputs(gw: GatewayDesign, res: GatewayResources) -> dict[str, Any]:
    """A gateway's stack output: what `export dstack` writes for dstack (the configuration,
    the project, and the network dstack's gateway lands in, shaped like a fleet's output
    so the backend's own hand-off reads it) and where its record points."""
    rec = gw.record
    options = gw.options
    return {
        "backend": gw.backend, "region": gw.region, "scope": gw.provider.scope,
        "project": gw.project, "fleet": gw.fleet, "public_ips": gw.public,
        "load_balancer": gw.load_balancer,
        "resource_group": getattr(res, "resource_group", None),
        "tenant_id": options.tenant_id if options is not None else None,
        "networks": {"main": {"name": res.network_name, "id": res.network_id,
                              "cidr": gw.network.cidr,
                              "subnets": [s.cidr for s in gw.network.subnets],
                              "subnet_ids": [res.subnet_ids.get(s.name)
                                             for s in gw.network.subnets]}},
        "subnets": dict(res.subnet_ids),
        "configuration": dict(gw.configuration),
        "record": rec.fqdn if rec else None,
        "record_type": rec.record_type if rec else None,
        "targets": list(rec.targets) if rec else [],
        "old_addresses": list(res.old_addresses),
    }


def _scale_set(fleet: FleetResources) -> dict[str, Any] | None:
    vmss = getattr(fleet, "scale_set", None)
    return None if vmss is None else {"name": vmss.name, "id": vmss.id}


def main(base_dir: str | None = None, compiled: Compiled | None = None) -> None:
    """The stack program. ``compiled`` lets `gpufleet plan` pass the result it already
    computed from the same files instead of compiling them a second time."""
    if compiled is None:  # as `pulumi up` and `pulumi preview` run it: a process of its own
        freeze_at_exit()  # its exit skips the walk of what the run made (gpufleet.exiting)
        base = Path(pulumi.get_root_directory() or base_dir or os.getcwd())
        compiled = compile_settings(read_settings(), base)
    emit(compiled)
