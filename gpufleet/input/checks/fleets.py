"""Fleet files: dstack's grammars and cross-field rules for backend fleets and SSH fleets
-> FleetSpec / SshFleetSpec + located diagnostics. Pure.

Runs after the schema pass and only on fields the schema accepted, so every rule may trust
the shape of the value it reads.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from gpufleet.backends import backend_names, backends_with, is_backend, supports, traits_of
from gpufleet.codes import (
    F001,
    F002,
    F003,
    F005,
    F007,
    F008,
    F009,
    F010,
    F011,
    F013,
    F014,
    F015,
    F016,
    F017,
    F018,
    F021,
    F023,
    F025,
)
from gpufleet.diagnostics import Diagnostic, KeyPath, Severity
from gpufleet.input.checks.context import (
    Ctx,
    check_region,
    region_of_zone,
    strs,
    tags_of,
)
from gpufleet.input.checks.names import check_name_budget
from gpufleet.input.normalize import parse_idle_duration, parse_nodes, parse_resources, parse_retry
from gpufleet.input.schema import Checked
from gpufleet.input.spec import DEFAULT_RESOURCES, FleetSpec, SshFleetSpec, SshHost, frozen_map
from gpufleet.traits import Feature

# Fields a profile may fill in on a fleet (FleetSpec attribute names).
PROFILE_FIELDS = ("resources", "backends", "regions", "availability_zones", "instance_types",
                  "reservation", "spot_policy", "retry", "max_price", "idle_duration", "tags")

# --- fleets ------------------------------------------------------------------------------

# Keys of backend fleets that SSH fleets do not take (dstack: server/services/fleets.py).
BACKEND_ONLY_KEYS = ("reservation", "resources", "backends", "regions", "availability_zones",
                     "instance_types", "spot_policy", "retry", "max_price", "idle_duration",
                     "tags", "backend_options")


def check_fleet(c: Checked, declared_groups: frozenset[str] = frozenset()
                ) -> tuple[FleetSpec | SshFleetSpec | None, list[Diagnostic]]:
    """``declared_groups``: the capacity reservation groups the backends files declare
    (names and ids); a fleet on azure alone may name one of those."""
    ctx = Ctx(c)
    d = ctx.data()
    if "ssh_config" in d:
        if "nodes" in d:
            ctx.error(("nodes",), "ssh_config and nodes are mutually exclusive", F007,
                      key=True, hint="an SSH fleet lists its hosts; remove `nodes`")
        return check_ssh_fleet(ctx)
    if "nodes" not in d:
        ctx.error((), "No ssh_config or nodes specified", F008, key=True,
                  hint="add `nodes: N` (the number of instances)")
    if "env" in d:
        ctx.error(("env",), "Backend fleet configuration does not support the following "
                  "fields: ['env']", F007, key=True, hint="remove `env`")
    if "name" not in d:
        ctx.error((), "fleet has no `name`; gpufleet derives stable resource names from it",
                  F009, key=True, hint="add `name: <lower-case name>`")
    nodes = ctx.parse("nodes", parse_nodes, F001)
    resources = DEFAULT_RESOURCES
    if ctx.has("resources"):
        resources, errors = parse_resources(d["resources"])
        for e in errors:
            ctx.error(("resources", *e.subpath), e.message, e.code or F002)
    retry = ctx.parse("retry", parse_retry, F005)
    idle = ctx.parse("idle_duration", parse_idle_duration, F003)
    tags = tags_of(ctx, (), d)
    _fleet_rules(ctx, declared_groups)
    named = strs(d.get("backends")) if c.ok(("backends",)) else None
    check_name_budget(ctx, d.get("name"), ("fleet",), named or backend_names(), F023,
                      "fleet")
    if nodes is None or any(x.is_error for x in (*ctx.diags, *c.diagnostics)):
        return None, ctx.diags
    spec = FleetSpec(
        name=d["name"], nodes=nodes, origin=ctx.origin(), placement=d.get("placement", "any"),
        blocks=d.get("blocks", 1), reservation=d.get("reservation"), resources=resources,
        backends=strs(d.get("backends")), regions=strs(d.get("regions")),
        availability_zones=strs(d.get("availability_zones")),
        instance_types=strs(d.get("instance_types")), spot_policy=d.get("spot_policy"),
        retry=retry, max_price=d.get("max_price"), idle_duration=idle, tags=frozen_map(tags),
        explicit=frozenset(k for k in PROFILE_FIELDS if k in d),
    )
    return spec, ctx.diags


def _fleet_rules(ctx: Ctx, declared_groups: frozenset[str] = frozenset()) -> None:
    d = ctx.data()
    backends = d.get("backends") if ctx.has("backends") else None
    if ctx.has("regions") and backends:
        known = [traits_of(b) for b in backends if is_backend(b)]
        for i, region in enumerate(d["regions"]):
            if known and not any(t.region_pattern.fullmatch(str(region).lower())
                                 for t in known):
                check_region(ctx, ("regions", i), known[0].name, str(region), F018)
    if ctx.has("reservation") and backends is not None and not any(
            supports(b, Feature.RESERVATIONS) for b in backends) and not (
            any(is_backend(b) and traits_of(b).declared_reservations_only
                for b in backends) and str(d["reservation"]) in declared_groups):
        able = backends_with(Feature.RESERVATIONS)
        ctx.error(("reservation",), "`reservation` needs a backend with reservation support "
                  f"({', '.join(able)}), but backends are {', '.join(backends)}", F011,
                  key=True, hint=f"add {' or '.join(able)} to `backends`, or remove "
                  "`reservation`")
    if d.get("placement") == "cluster":
        _needs(ctx, backends, "placement", Feature.CLUSTER, "placement: cluster")
    if d.get("spot_policy") == "spot":
        _needs(ctx, backends, "spot_policy", Feature.SPOT, "spot_policy: spot")
    if d.get("placement") == "cluster" and ctx.has("availability_zones"):
        regions = sorted({r for z in d["availability_zones"] if (r := region_of_zone(str(z)))})
        if len(regions) > 1:
            ctx.error(("availability_zones",), "placement: cluster puts every node in one "
                      f"backend region, but availability_zones span {', '.join(regions)}",
                      F010, key=True, hint="list zones of a single region")
    if ctx.has("backend_options"):
        seen: set[str] = set()
        for i, opt in enumerate(d["backend_options"]):
            t = str(opt.get("type"))
            if t in seen:
                ctx.error(("backend_options", i), "backend_options contains duplicate entry "
                          f"for backend '{t}'", F013)
            seen.add(t)


def _needs(ctx: Ctx, backends: list[str] | None, key: str, feature: Feature, what: str
           ) -> None:
    """A setting no backend of the fleet's list can honour: each one's reason (the others,
    dstack's own backends, are left out with F022)."""
    known = [b for b in backends or () if is_backend(b)]
    if not known or any(supports(b, feature) for b in known):
        return
    able = backends_with(feature)
    ctx.error((key,), f"{what}: " + "; ".join(f"{b}: {traits_of(b).why_not(feature)}"
                                             for b in known), F025, key=True,
              hint=f"add {' or '.join(able)} to `backends`, or remove `{key}`")


# --- SSH fleets --------------------------------------------------------------------------

def check_ssh_fleet(ctx: Ctx) -> tuple[SshFleetSpec | None, list[Diagnostic]]:
    """dstack's rules for `ssh_config` fleets (server/services/fleets.py and the SSHParams
    model), with dstack's messages."""
    d = ctx.data()
    extra = [k for k in BACKEND_ONLY_KEYS if k in d]
    if extra:
        ctx.error((extra[0],), f"SSH fleet configuration does not support the following "
                  f"fields: {extra}", F007, key=True,
                  hint="an SSH fleet describes machines that exist; remove these keys")
    if not ctx.c.ok(("ssh_config",)):
        return None, ctx.diags
    cfg = d["ssh_config"]
    base: KeyPath = ("ssh_config",)
    network = cfg.get("network")
    if network is not None:
        try:
            net = ipaddress.ip_network(network, strict=False)
        except ValueError:
            ctx.error((*base, "network"), f"Failed to parse network: {network}", F014)
        else:
            if not net.is_private:
                ctx.error((*base, "network"), "Public network is specified when private "
                          "network is required", F014)
    hosts = _ssh_hosts(ctx, cfg, base)
    with_ip = sum(1 for h in hosts if h.internal_ip is not None)
    if with_ip and with_ip != len(hosts):
        ctx.error((*base, "hosts"), "internal_ip must be specified for all hosts", F016,
                  key=True)
    if with_ip and network is not None:
        ctx.error((*base, "network"), "internal_ip is mutually exclusive with network", F016,
                  key=True)
    if d.get("placement") == "cluster" and network is None and not with_ip:
        ctx.error(("placement",), "placement: cluster with neither `ssh_config.network` nor "
                  "`internal_ip` on the hosts: dstack takes the hosts' common private network "
                  "at apply time, and fails if they do not share one", F017, key=True,
                  hint="set `ssh_config.network` to the hosts' private subnet",
                  severity=Severity.WARNING)
    if any(x.is_error for x in (*ctx.diags, *ctx.c.diagnostics)):
        return None, ctx.diags
    return SshFleetSpec(d.get("name"), ctx.origin(), tuple(hosts), d.get("placement", "any"),
                        network), ctx.diags


def _ssh_hosts(ctx: Ctx, cfg: dict[str, Any], base: KeyPath) -> list[SshHost]:
    """Each host with a user, a key, a private internal_ip if any, listed once."""
    hosts: list[SshHost] = []
    seen: dict[tuple[str, int], int] = {}
    for i, raw in enumerate(cfg["hosts"]):
        h: dict[str, Any] = {"hostname": raw} if isinstance(raw, str) else raw
        name = str(h["hostname"])
        at: KeyPath = (*base, "hosts", i) if isinstance(raw, str) else (*base, "hosts", i,
                                                                          "hostname")
        if cfg.get("user") is None and h.get("user") is None:
            ctx.error(at, f"No ssh user specified for host {name}", F015,
                      hint="set `ssh_config.user`, or `user` on the host")
        if not any(x.get(k) for x in (cfg, h) for k in ("identity_file", "ssh_key")):
            ctx.error(at, f"No ssh key specified for host {name}", F015,
                      hint="set `ssh_config.identity_file`, or `identity_file` on the host")
        ip = h.get("internal_ip")
        if ip is not None:
            try:
                addr = ipaddress.ip_address(ip)
            except ValueError:
                ctx.error((*base, "hosts", i, "internal_ip"), f"Invalid IP address: {ip}",
                          F016)
            else:
                if not addr.is_private:
                    ctx.error((*base, "hosts", i, "internal_ip"), "IP address is not private",
                              F016)
        host = SshHost(name, h.get("port", cfg.get("port")), h.get("user", cfg.get("user")),
                       h.get("identity_file", cfg.get("identity_file")), ip)
        if host.address in seen:  # one jump host on several ports is several hosts
            ctx.error(at, f"host {host.address_text} is listed twice (first as "
                      f"hosts[{seen[host.address]}]); gpufleet's rule: dstack would add the "
                      "same machine twice", F021, hint="list each host once")
        seen.setdefault(host.address, i)
        hosts.append(host)
    return hosts
