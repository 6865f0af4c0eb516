"""Semantic pass: dstack grammars and cross-field rules -> frozen specs + diagnostics. Pure.

Runs after the schema pass and only on fields the schema accepted, so every rule may trust
the shape of the value it reads.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable
from typing import Any

from gpufleet.diagnostics import Diagnostic, KeyPath, Severity
from gpufleet.input.loader import read_small_text
from gpufleet.input.normalize import (
    SpecError,
    check_tags,
    parse_idle_duration,
    parse_nodes,
    parse_resources,
    parse_retry,
)
from gpufleet.input.schema import Checked
from gpufleet.input.spec import (
    DEFAULT_RESOURCES,
    NO_ACCESS,
    AccessSpec,
    BackendConfig,
    CertificateSpec,
    FleetSpec,
    GatewaySpec,
    Lock,
    LockEntry,
    Origin,
    ProfileSpec,
    SshFleetSpec,
    SshHost,
    frozen_map,
)

_GCP_ZONE = re.compile(r"^([a-z]+-[a-z]+\d+)-[a-z]$")
_AWS_AZ = re.compile(r"^([a-z]{2}(?:-gov)?-[a-z]+-\d+)[a-z]$")
RESERVATION_BACKENDS = ("aws", "gcp")
PRIVATE_GATEWAY_BACKENDS = ("aws", "gcp")
# Fields a profile may fill in on a fleet (FleetSpec attribute names).
PROFILE_FIELDS = ("resources", "backends", "regions", "availability_zones", "instance_types",
                  "reservation", "spot_policy", "retry", "max_price", "idle_duration", "tags")


class _Ctx:
    """Collects diagnostics for one document; ``parse`` turns SpecErrors into located ones."""

    def __init__(self, c: Checked, code: str) -> None:
        self.c = c
        self.code = code
        self.diags: list[Diagnostic] = []

    def data(self) -> dict[str, Any]:
        d: dict[str, Any] = self.c.doc.data
        return d

    def has(self, key: str) -> bool:
        return key in self.data() and self.c.ok((key,))

    def error(self, path: KeyPath, message: str, code: str | None = None, *, key: bool = False,
              hint: str | None = None, severity: Severity = Severity.ERROR) -> None:
        at = self.c.doc.at_key if key else self.c.doc.at_value
        self.diags.append(at(path, code or self.code, message, hint=hint, severity=severity))

    def parse(self, key: str, fn: Callable[[Any], Any], code: str, default: Any = None) -> Any:
        if not self.has(key):
            return default
        try:
            return fn(self.data()[key])
        except SpecError as e:
            self.error((key, *e.subpath), e.message, code)
            return default

    def origin(self) -> Origin:
        src = self.c.doc.source
        line, col = src.key(("name",) if "name" in self.data() else ())
        positions = {str(k[0]): pos for k, pos in src.keys.items() if len(k) == 1}
        return Origin(self.c.doc.file, line, col, self.c.doc.index, frozen_map(positions))


def region_of_zone(zone: str) -> str | None:
    """Region of a GCP zone (``us-west2-c``) or AWS AZ (``us-east-1a``); None if unknown."""
    for pattern in (_GCP_ZONE, _AWS_AZ):
        m = pattern.match(zone)
        if m:
            return m.group(1)
    return None


def _strs(v: Any) -> tuple[str, ...] | None:
    return None if v is None else tuple(str(x) for x in v)


def _tags(ctx: _Ctx, base: KeyPath, raw: dict[str, Any]) -> dict[str, str]:
    """The `tags` of the mapping ``raw`` at ``base``, checked against dstack's regexes."""
    if "tags" not in raw or not ctx.c.ok((*base, "tags")):
        return {}
    tags = {str(k): str(v) for k, v in (raw["tags"] or {}).items()}
    for e in check_tags(tags):
        ctx.error((*base, "tags", *e.subpath), e.message, "F004", key=True)
    return tags


# --- fleets ------------------------------------------------------------------------------

# Keys of backend fleets that SSH fleets do not take (dstack: server/services/fleets.py).
BACKEND_ONLY_KEYS = ("reservation", "resources", "backends", "regions", "availability_zones",
                     "instance_types", "spot_policy", "retry", "max_price", "idle_duration",
                     "tags", "backend_options")


def check_fleet(c: Checked) -> tuple[FleetSpec | SshFleetSpec | None, list[Diagnostic]]:
    ctx = _Ctx(c, "F000")
    d = ctx.data()
    if "ssh_config" in d:
        if "nodes" in d:
            ctx.error(("nodes",), "ssh_config and nodes are mutually exclusive", "F007",
                      key=True, hint="an SSH fleet lists its hosts; remove `nodes`")
        return check_ssh_fleet(ctx)
    if "nodes" not in d:
        ctx.error((), "No ssh_config or nodes specified", "F008", key=True,
                  hint="add `nodes: N` (the number of instances)")
    if "env" in d:
        ctx.error(("env",), "Backend fleet configuration does not support the following "
                  "fields: ['env']", "F007", key=True, hint="remove `env`")
    if "name" not in d:
        ctx.error((), "fleet has no `name`; gpufleet derives stable resource names from it",
                  "F009", key=True, hint="add `name: <lower-case name>`")
    nodes = ctx.parse("nodes", parse_nodes, "F001")
    resources = DEFAULT_RESOURCES
    if ctx.has("resources"):
        resources, errors = parse_resources(d["resources"])
        for e in errors:
            ctx.error(("resources", *e.subpath), e.message, "F002")
    retry = ctx.parse("retry", parse_retry, "F005")
    idle = ctx.parse("idle_duration", parse_idle_duration, "F003")
    tags = _tags(ctx, (), d)
    _fleet_rules(ctx)
    if nodes is None or any(x.is_error for x in (*ctx.diags, *c.diagnostics)):
        return None, ctx.diags
    spec = FleetSpec(
        name=d["name"], nodes=nodes, origin=ctx.origin(), placement=d.get("placement", "any"),
        blocks=d.get("blocks", 1), reservation=d.get("reservation"), resources=resources,
        backends=_strs(d.get("backends")), regions=_strs(d.get("regions")),
        availability_zones=_strs(d.get("availability_zones")),
        instance_types=_strs(d.get("instance_types")), spot_policy=d.get("spot_policy"),
        retry=retry, max_price=d.get("max_price"), idle_duration=idle, tags=frozen_map(tags),
        previous_names=_strs(d.get("previous_names")) or (),
        explicit=frozenset(k for k in PROFILE_FIELDS if k in d),
    )
    return spec, ctx.diags


def _fleet_rules(ctx: _Ctx) -> None:
    d = ctx.data()
    backends = d.get("backends") if ctx.has("backends") else None
    if ctx.has("regions") and backends:
        known = [b for b in backends if b in REGION_SHAPES]
        for i, region in enumerate(d["regions"]):
            if known and not any(REGION_SHAPES[b][0].fullmatch(str(region).lower())
                                 for b in known):
                check_region(ctx, ("regions", i), known[0], str(region), "F018")
    if ctx.has("reservation") and backends is not None and not any(
            b in RESERVATION_BACKENDS for b in backends):
        ctx.error(("reservation",), "`reservation` needs a backend with reservation support "
                  f"(aws, gcp), but backends are {', '.join(backends)}", "F011", key=True,
                  hint="add aws or gcp to `backends`, or remove `reservation`")
    if d.get("placement") == "cluster" and ctx.has("availability_zones"):
        regions = sorted({r for z in d["availability_zones"] if (r := region_of_zone(str(z)))})
        if len(regions) > 1:
            ctx.error(("availability_zones",), "placement: cluster puts every node in one "
                      f"backend region, but availability_zones span {', '.join(regions)}",
                      "F010", key=True, hint="list zones of a single region")
    if ctx.has("backend_options"):
        seen: set[str] = set()
        for i, opt in enumerate(d["backend_options"]):
            t = str(opt.get("type"))
            if t in seen:
                ctx.error(("backend_options", i), "backend_options contains duplicate entry "
                          f"for backend '{t}'", "F013")
            seen.add(t)


# --- SSH fleets --------------------------------------------------------------------------

def check_ssh_fleet(ctx: _Ctx) -> tuple[SshFleetSpec | None, list[Diagnostic]]:
    """dstack's rules for `ssh_config` fleets (server/services/fleets.py and the SSHParams
    model), with dstack's messages."""
    d = ctx.data()
    extra = [k for k in BACKEND_ONLY_KEYS if k in d]
    if extra:
        ctx.error((extra[0],), f"SSH fleet configuration does not support the following "
                  f"fields: {extra}", "F007", key=True,
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
            ctx.error((*base, "network"), f"Failed to parse network: {network}", "F014")
        else:
            if not net.is_private:
                ctx.error((*base, "network"), "Public network is specified when private "
                          "network is required", "F014")
    hosts: list[SshHost] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(cfg["hosts"]):
        h = {"hostname": raw} if isinstance(raw, str) else raw
        name = str(h["hostname"])
        at: KeyPath = (*base, "hosts", i) if isinstance(raw, str) else (*base, "hosts", i,
                                                                          "hostname")
        if name in seen:
            ctx.error(at, f"host {name} is listed twice (first as hosts[{seen[name]}])",
                      "F015", hint="list each host once")
        seen.setdefault(name, i)
        if cfg.get("user") is None and h.get("user") is None:
            ctx.error(at, f"No ssh user specified for host {name}", "F015",
                      hint="set `ssh_config.user`, or `user` on the host")
        if not any(x.get(k) for x in (cfg, h) for k in ("identity_file", "ssh_key")):
            ctx.error(at, f"No ssh key specified for host {name}", "F015",
                      hint="set `ssh_config.identity_file`, or `identity_file` on the host")
        ip = h.get("internal_ip")
        if ip is not None:
            try:
                addr = ipaddress.ip_address(ip)
            except ValueError:
                ctx.error((*base, "hosts", i, "internal_ip"), f"Invalid IP address: {ip}",
                          "F016")
            else:
                if not addr.is_private:
                    ctx.error((*base, "hosts", i, "internal_ip"), "IP address is not private",
                              "F016")
        hosts.append(SshHost(name, h.get("port", cfg.get("port")), h.get("user", cfg.get("user")),
                             h.get("identity_file", cfg.get("identity_file")), ip))
    with_ip = sum(1 for h in hosts if h.internal_ip is not None)
    if with_ip and with_ip != len(hosts):
        ctx.error((*base, "hosts"), "internal_ip must be specified for all hosts", "F016",
                  key=True)
    if with_ip and network is not None:
        ctx.error((*base, "network"), "internal_ip is mutually exclusive with network", "F016",
                  key=True)
    if d.get("placement") == "cluster" and network is None and not with_ip:
        ctx.error(("placement",), "placement: cluster with neither `ssh_config.network` nor "
                  "`internal_ip` on the hosts: dstack takes the hosts' common private network "
                  "at apply time, and fails if they do not share one", "F017", key=True,
                  hint="set `ssh_config.network` to the hosts' private subnet",
                  severity=Severity.WARNING)
    if any(x.is_error for x in (*ctx.diags, *ctx.c.diagnostics)):
        return None, ctx.diags
    return SshFleetSpec(d.get("name"), ctx.origin(), tuple(hosts), d.get("placement", "any"),
                        network), ctx.diags


# --- gateways ----------------------------------------------------------------------------

def check_gateway(c: Checked) -> tuple[GatewaySpec | None, list[Diagnostic]]:
    ctx = _Ctx(c, "G000")
    d = ctx.data()
    backend = d.get("backend") if ctx.has("backend") else None
    if "name" not in d:
        ctx.error((), "gateway has no `name`; gpufleet derives stable resource names from it",
                  "G007", key=True, hint="add `name: <lower-case name>`")
    if backend == "azure" and "instance_type" in d:
        ctx.error(("instance_type",), "The `azure` backend does not support the "
                  "`instance_type` gateway configuration property", "G002", key=True,
                  hint="remove `instance_type`: Azure gateways always use Standard_B1ms")
    public = d.get("public_ip", True)
    if public is False and backend is not None and backend not in PRIVATE_GATEWAY_BACKENDS:
        ctx.error(("public_ip",), f"private gateways (`public_ip: false`) are not supported "
                  f"for {backend} backend", "G003", key=True, hint="use aws or gcp")
    cert = _certificate(ctx)
    if cert is not None and cert.type == "lets-encrypt" and public is False:
        ctx.error(("certificate",) if "certificate" in d else ("public_ip",),
                  "lets-encrypt certificate type is not supported for private gateways", "G004",
                  key=True, hint="set `certificate: null`, or `{type: acm, arn: ...}` on aws")
    if cert is not None and cert.type == "acm" and backend is not None and backend != "aws":
        ctx.error(("certificate", "type"), "acm certificate type is supported for aws backend "
                  "only", "G005")
    replicas = d.get("replicas", 1) if ctx.has("replicas") else 1
    if cert is not None and cert.type == "lets-encrypt" and replicas > 1:
        ctx.error(("replicas",), "lets-encrypt certificate type is not supported for gateways "
                  "with several replicas", "G006", key=True,
                  hint="set `certificate: null`, or `{type: acm, arn: ...}` on aws")
    if ctx.has("domain"):
        _check_domain(ctx, d["domain"])
    if backend is not None and ctx.has("region"):
        check_region(ctx, ("region",), backend, str(d["region"]), "G014")
    tags = _tags(ctx, (), d)
    if any(x.is_error for x in (*ctx.diags, *c.diagnostics)):
        return None, ctx.diags
    spec = GatewaySpec(
        name=d["name"], backend=d["backend"], region=d["region"], origin=ctx.origin(),
        instance_type=d.get("instance_type"), domain=d.get("domain"), public_ip=public,
        certificate=cert, replicas=replicas, default=d.get("default", False),
        tags=frozen_map(tags), dns_zone=d.get("dns_zone"),
        protect_address=d.get("protect_address", True),
        create_dns_zone=d.get("create_dns_zone", False),
    )
    return spec, ctx.diags


_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")


def _check_domain(ctx: _Ctx, domain: str) -> None:
    name = domain.replace("${{ run.project_name }}", "project").lower().rstrip(".")
    labels = name.split(".")
    hint = ("use a DNS name such as `gpu.example.com`; gpufleet creates `*.<domain>` and "
            "services get `<run>.<domain>`")
    if name.startswith("*."):
        ctx.error(("domain",), f"invalid domain '{domain}': the wildcard is added by the "
                  "gateway", "G009", hint=f"write `domain: {name[2:]}`")
    elif _is_ip(name):
        ctx.error(("domain",), f"invalid domain '{domain}': an IP address is not a domain",
                  "G009", hint=hint)
    elif len(labels) < 2 or not all(_LABEL.fullmatch(lbl) for lbl in labels) \
            or len(name) > 253 or labels[-1].isdigit():
        ctx.error(("domain",), f"invalid domain '{domain}'", "G009", hint=hint)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return False
    return True


# Region names as each cloud spells them (us-east-1, us-central1, eastus); a region of the
# wrong shape is a typo or another cloud's region.
REGION_SHAPES = {
    "aws": (re.compile(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]{1,2}"), "us-east-1"),
    "gcp": (re.compile(r"[a-z]+-[a-z]+[0-9]{1,2}"), "us-central1"),
    "azure": (re.compile(r"[a-z]+[a-z0-9]*"), "eastus"),
}


def check_region(ctx: _Ctx, path: KeyPath, backend: str, region: str, code: str) -> None:
    shape = REGION_SHAPES.get(backend)
    if shape is None or shape[0].fullmatch(region.lower()):
        return
    others = [b for b, (rx, _) in REGION_SHAPES.items() if b != backend and rx.fullmatch(
        region.lower())]
    hint = f"{backend} regions look like {shape[1]}"
    if others:
        hint += f"; '{region}' looks like a {' or '.join(others)} region"
    ctx.error(path, f"'{region}' is not a region of {backend}", code, hint=hint)


def _certificate(ctx: _Ctx) -> CertificateSpec | None:
    d = ctx.data()
    if "certificate" not in d:
        return CertificateSpec("lets-encrypt")
    raw = d["certificate"]
    if raw is None or not ctx.c.ok(("certificate",)):
        return None
    return CertificateSpec(raw["type"], raw.get("arn"))


# --- profiles ----------------------------------------------------------------------------

def check_profiles(c: Checked) -> tuple[list[ProfileSpec], list[Diagnostic]]:
    ctx = _Ctx(c, "P000")
    out: list[ProfileSpec] = []
    if not c.ok_above(("profiles",)):
        return out, ctx.diags
    seen: dict[str, int] = {}
    for i, raw in enumerate(ctx.data()["profiles"]):
        if not isinstance(raw, dict) or not c.ok_above(("profiles", i)):
            continue
        name = str(raw.get("name"))
        if name in seen:
            ctx.error(("profiles", i, "name"), f"duplicate profile '{name}' (first at "
                      f"profiles[{seen[name]}])", "P001")
        seen.setdefault(name, i)
        values = _profile_values(ctx, ("profiles", i), raw)
        line, col = c.doc.source.key(("profiles", i))
        out.append(ProfileSpec(name, Origin(c.doc.file, line, col, c.doc.index),
                               bool(raw.get("default", False)), frozen_map(values)))
    defaults = [p for p in out if p.default]
    if len(defaults) > 1:
        ctx.error(("profiles",), "several profiles set `default: true`: "
                  f"{', '.join(p.name for p in defaults)}", "P002", key=True,
                  hint="keep `default: true` on one profile")
    return out, ctx.diags


def _profile_values(ctx: _Ctx, base: KeyPath, raw: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    raw = {k: v for k, v in raw.items() if ctx.c.ok((*base, k))}
    for key in ("backends", "regions", "availability_zones", "instance_types"):
        if key in raw:
            values[key] = _strs(raw[key])
    for key in ("reservation", "spot_policy", "max_price"):
        if key in raw:
            values[key] = raw[key]
    parsers: dict[str, Callable[[Any], Any]] = {
        "retry": parse_retry, "idle_duration": parse_idle_duration}
    for key, fn in parsers.items():
        if key in raw:
            try:
                values[key] = fn(raw[key])
            except SpecError as e:
                ctx.error((*base, key, *e.subpath), e.message, "F005")
    if "resources" in raw:
        res, errors = parse_resources(raw["resources"])
        for err in errors:
            ctx.error((*base, "resources", *err.subpath), err.message, "F002")
        values["resources"] = res
    if "tags" in raw:
        values["tags"] = frozen_map(_tags(ctx, base, raw))
    return values


# --- backends ----------------------------------------------------------------------------

_SSH_KEY = re.compile(r"^(ssh-(rsa|ed25519|dss)|ecdsa-sha2-nistp(256|384|521)|"
                      r"sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com) [A-Za-z0-9+/]+=*"
                      r"( [^\n]*)?$")
ACCESS_ONLY = {"iap": "gcp", "ssm": "aws", "key_name": "aws"}


def _access(ctx: _Ctx, path: KeyPath, raw: dict[str, Any] | None, parent: AccessSpec,
            backend: str | None, legacy_key: str | None = None) -> AccessSpec:
    """An `access` block merged over ``parent``; `file:` keys are read relative to the file."""
    raw = dict(raw or {})
    if legacy_key and "ssh_public_key" not in raw:
        raw["ssh_public_key"] = legacy_key
    for opt, cloud in ACCESS_ONLY.items():
        if raw.get(opt) and backend not in (None, cloud):
            ctx.error((*path, opt), f"`{opt}` is an option of the {cloud} backend, not "
                      f"{backend}", "B010", key=True, hint=f"move it to the {cloud} entry")
    key: str | None = parent.ssh_public_key
    source: str | None = parent.key_file
    if raw.get("ssh_public_key"):
        key, source = _public_key(ctx, (*path, "ssh_public_key"), str(raw["ssh_public_key"]))
    return AccessSpec(key, source, raw.get("ssh_user", parent.ssh_user),
                      raw.get("bastion", parent.bastion), bool(raw.get("iap", parent.iap)),
                      bool(raw.get("ssm", parent.ssm)), raw.get("key_name", parent.key_name))


def _public_key(ctx: _Ctx, path: KeyPath, value: str) -> tuple[str | None, str | None]:
    source = None
    text = value.strip()
    if text.startswith("file:"):
        rel = text[len("file:"):].strip()
        base = os.path.dirname(os.path.abspath(ctx.c.doc.file))
        full = os.path.join(base, os.path.expanduser(rel))
        try:
            text = read_small_text(full, 16 * 1024).strip()
        except OSError as e:
            ctx.error(path, f"cannot read the SSH public key {rel}: {e.strerror or e}", "B011",
                      hint="the path is relative to the backends file")
            return None, None
        source = rel
        if "PRIVATE KEY" in text:
            ctx.error(path, f"{rel} is a private key", "B011",
                      hint="point `ssh_public_key` at the `.pub` file; the private key never "
                           "leaves your machine")
            return None, None
    if not _SSH_KEY.match(text):
        ctx.error(path, "not an OpenSSH public key (expected `ssh-ed25519 AAAA...`, "
                  "`ssh-rsa AAAA...` or `ecdsa-sha2-...`)", "B011",
                  hint="paste the `.pub` file's line, or write `file:path/to/key.pub`")
        return None, None
    return text, source


def check_backends(c: Checked) -> tuple[list[BackendConfig], list[Diagnostic], AccessSpec]:
    """The backend entries, the diagnostics, and the file's top-level `access`."""
    ctx = _Ctx(c, "B000")
    out: list[BackendConfig] = []
    if not c.ok_above(("backends",)):
        return out, ctx.diags, NO_ACCESS
    top = NO_ACCESS
    if "access" in ctx.data() and c.ok(("access",)):
        top = _access(ctx, ("access",), ctx.data()["access"], NO_ACCESS, None)
    for i, raw in enumerate(ctx.data()["backends"]):
        base: KeyPath = ("backends", i)
        if not c.ok(base):
            continue
        t = raw["type"]
        _backend_rules(ctx, base, raw)
        line, col = c.doc.source.key(base)
        tags = _tags(ctx, base, raw)
        settings = {k: v for k, v in raw.items() if k not in ("type", "regions", "cidr",
                                                              "ssh_cidrs", "public_ips", "tags",
                                                              "access")}
        settings["tags"] = frozen_map(tags)
        access = _access(ctx, (*base, "access"), raw.get("access"), top, t,
                         raw.get("ssh_public_key"))
        out.append(BackendConfig(
            t, Origin(c.doc.file, line, col, c.doc.index), _strs(raw.get("regions")),
            raw.get("cidr"), _strs(raw.get("ssh_cidrs")) or (), raw.get("public_ips"),
            frozen_map(settings), access))
    return out, ctx.diags, top


def _backend_rules(ctx: _Ctx, base: KeyPath, raw: dict[str, Any]) -> None:
    t = raw["type"]
    if t == "aws":
        if "vpc_name" in raw and "vpc_ids" in raw:
            ctx.error((*base, "vpc_ids"), "Only one of `vpc_name` and `vpc_ids` can be "
                      "specified", "B002", key=True)
        if raw.get("default_vpcs") is False and not ("vpc_name" in raw or "vpc_ids" in raw):
            ctx.error((*base, "default_vpcs"), "`default_vpcs: false` needs `vpc_name` or "
                      "`vpc_ids`", "B003", key=True)
    if t == "azure":
        vpcs, subnets = raw.get("vpc_ids") or {}, raw.get("subnet_ids") or {}
        if raw.get("public_ips") is False and not (vpcs or subnets):
            ctx.error((*base, "public_ips"), "`vpc_ids` or `subnet_ids` must be specified if "
                      "`public_ips: false`.", "B004", key=True)
        for loc in sorted(set(vpcs) & set(subnets)):
            ctx.error((*base, "subnet_ids", loc), f"location '{loc}' is in both `vpc_ids` and "
                      "`subnet_ids`", "B007", key=True, hint="keep one of the two")
    if "cidr" in raw:
        _check_cidr(ctx, (*base, "cidr"), raw["cidr"], private=True)
    for j, cidr in enumerate(raw.get("ssh_cidrs") or []):
        net = _check_cidr(ctx, (*base, "ssh_cidrs", j), cidr, private=False)
        if net is not None and net.prefixlen == 0:
            ctx.error((*base, "ssh_cidrs", j), f"{cidr} opens SSH to the whole internet",
                      "B006", severity=Severity.WARNING,
                      hint="list your office or bastion ranges instead")


def _check_cidr(ctx: _Ctx, path: KeyPath, value: str, *, private: bool
                ) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as e:
        ctx.error(path, f"invalid CIDR '{value}': {e}", "B005",
                  hint="write a network address with a prefix, e.g. 10.0.0.0/16")
        return None
    if private and (net.version != 4 or not net.is_private or net.prefixlen > 24):
        ctx.error(path, f"`cidr` must be a private IPv4 range of /24 or larger, not {value}",
                  "B008", hint="use a range inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16")
    return net


def check_lock(c: Checked) -> tuple[Lock | None, list[Diagnostic]]:
    """A ``gpufleet.lock`` document -> Lock. Entries the schema rejected are left out."""
    ctx = _Ctx(c, "K001")
    if not c.ok(()):
        return None, ctx.diags
    data = ctx.data()
    parts: dict[str, dict[str, LockEntry]] = {"fleets": {}, "gateways": {}}
    for section, entries in parts.items():
        for name, raw in (data.get(section) or {}).items():
            base: KeyPath = (section, name)
            if not c.ok(base):
                continue
            zone, region = raw.get("zone"), raw["region"]
            if zone and region_of_zone(zone) not in (None, region):
                ctx.error((*base, "zone"), f"zone {zone} is not in region {region}", "K002",
                          hint="run `gpufleet lock --upgrade --fleet NAME` to pick the offer "
                               "again instead of editing the lock by hand")
                continue
            gpu = raw.get("gpu") or {}
            line, col = c.doc.source.key(base)
            entries[name] = LockEntry(
                name, raw["requirements"], raw["backend"], region, zone, raw["instance_type"],
                bool(raw["spot"]), _float(raw.get("price")), str(raw.get("catalog", "")),
                int(raw.get("cpus", 0)), float(raw.get("memory_gib", 0)), gpu.get("name"),
                int(gpu.get("count", 0)), _float(gpu.get("memory_gib")),
                Origin(c.doc.file, line, col, c.doc.index))
    return Lock(parts["fleets"], parts["gateways"], c.doc.file), ctx.diags


def _float(v: Any) -> float | None:
    return None if v is None else float(v)
