"""Backends files: dstack's server-side network settings plus gpufleet's own (`cidr`,
`ssh_cidrs`, `access`) -> BackendConfig + located diagnostics. Pure except that a
`file:` SSH key is read, bounded, relative to the backends file."""

from __future__ import annotations

import ipaddress
import os
import re
from typing import Any, Protocol, runtime_checkable

from gpufleet.backends import is_backend, owners, role_of, traits_of
from gpufleet.backends.plugin import RoleKey
from gpufleet.codes import B005, B006, B008, B010, B011, B019
from gpufleet.diagnostics import Diagnostic, KeyPath, Severity
from gpufleet.input.checks.context import Ctx, strs, tags_of
from gpufleet.input.files import read_small_text
from gpufleet.input.schema import Checked
from gpufleet.input.spec import (
    NO_ACCESS,
    AccessSpec,
    BackendConfig,
    NameSettings,
    Origin,
    frozen_map,
)


@runtime_checkable
class InputRules(Protocol):
    """A cloud's ``input`` role: the rules of its backends-file entry that the schema cannot
    state (dstack's config model's validators), as located diagnostics."""

    def backend_rules(self, ctx: Ctx, base: KeyPath, raw: dict[str, Any]) -> None: ...


INPUT: RoleKey[InputRules] = RoleKey("input", InputRules)  # type: ignore[type-abstract]

_SSH_KEY = re.compile(r"^(ssh-(rsa|ed25519|dss)|ecdsa-sha2-nistp(256|384|521)|"
                      r"sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com) [A-Za-z0-9+/]+=*"
                      r"( [^\n]*)?$")


def _access(ctx: Ctx, path: KeyPath, raw: dict[str, Any] | None, parent: AccessSpec,
            backend: str | None, legacy_key: str | None = None) -> AccessSpec:
    """An `access` block merged over ``parent``; `file:` keys are read relative to the file."""
    raw = dict(raw or {})
    if legacy_key and "ssh_public_key" not in raw:
        raw["ssh_public_key"] = legacy_key
    for opt in sorted(raw):  # options of one cloud's own service (iap, ssm, key_name)
        clouds = owners(opt)
        if clouds and raw[opt] and backend is not None and backend not in clouds:
            ctx.error((*path, opt), f"`{opt}` is an option of the {' or '.join(clouds)} "
                      f"backend, not {backend}", B010, key=True,
                      hint=f"move it to the {' or '.join(clouds)} entry")
    key: str | None = parent.ssh_public_key
    source: str | None = parent.key_file
    if raw.get("ssh_public_key"):
        key, source = _public_key(ctx, (*path, "ssh_public_key"), str(raw["ssh_public_key"]))
    return AccessSpec(key, source, raw.get("ssh_user", parent.ssh_user),
                      raw.get("bastion", parent.bastion), bool(raw.get("iap", parent.iap)),
                      bool(raw.get("ssm", parent.ssm)), raw.get("key_name", parent.key_name))


def _public_key(ctx: Ctx, path: KeyPath, value: str) -> tuple[str | None, str | None]:
    source = None
    text = value.strip()
    if text.startswith("file:"):
        rel = text[len("file:"):].strip()
        base = os.path.dirname(os.path.abspath(ctx.c.doc.file))
        full = os.path.join(base, os.path.expanduser(rel))
        try:
            text = read_small_text(full, 16 * 1024).strip()
        except OSError as e:
            ctx.error(path, f"cannot read the SSH public key {rel}: {e.strerror or e}", B011,
                      hint="the path is relative to the backends file")
            return None, None
        source = rel
        if "PRIVATE KEY" in text:
            ctx.error(path, f"{rel} is a private key", B011,
                      hint="point `ssh_public_key` at the `.pub` file; the private key never "
                           "leaves your machine")
            return None, None
    if not _SSH_KEY.match(text):
        ctx.error(path, "not an OpenSSH public key (expected `ssh-ed25519 AAAA...`, "
                  "`ssh-rsa AAAA...` or `ecdsa-sha2-...`)", B011,
                  hint="paste the `.pub` file's line, or write `file:path/to/key.pub`")
        return None, None
    return text, source


def _by_name(c: Checked, key: str) -> dict[str, dict[str, Any]]:
    """The settings by fleet (or gateway) name the schema let through (a list or a number
    where a mapping belongs is reported by the schema pass, and left out here)."""
    value = c.doc.data.get(key) if isinstance(c.doc.data, dict) else None
    if not isinstance(value, dict) or not c.ok_above((key,)):
        return {}
    return {str(k): dict(v) for k, v in value.items()
            if isinstance(v, dict) and c.ok((key, k))}


def check_backends(c: Checked) -> tuple[list[BackendConfig], list[Diagnostic], AccessSpec,
                                        NameSettings]:
    """The backend entries, the diagnostics, the file's top-level `access`, and the
    settings of fleets and gateways by name."""
    ctx = Ctx(c)
    out: list[BackendConfig] = []
    if not c.ok_above(("backends",)):
        return out, ctx.diags, NO_ACCESS, NameSettings()
    gateways, fleets = _by_name(c, "gateways"), _by_name(c, "fleets")
    names = NameSettings(
        fleets, gateways,
        {name: _entry_origin(c, ("gateways", name), entry) for name, entry in gateways.items()},
        {name: _entry_origin(c, ("fleets", name), entry) for name, entry in fleets.items()})
    top = NO_ACCESS
    if "access" in ctx.data() and c.ok(("access",)):
        top = _access(ctx, ("access",), ctx.data()["access"], NO_ACCESS, None)
    for i, raw in enumerate(ctx.entries("backends")):
        base: KeyPath = ("backends", i)
        if not c.ok(base):
            continue
        t = raw["type"]
        _backend_rules(ctx, base, raw)
        line, col = c.doc.source.key(base)
        tags = tags_of(ctx, base, raw)
        settings = {k: v for k, v in raw.items() if k not in ("type", "regions", "cidr",
                                                              "ssh_cidrs", "public_ips", "tags",
                                                              "access")}
        settings["tags"] = frozen_map(tags)
        access = _access(ctx, (*base, "access"), raw.get("access"), top, t,
                         raw.get("ssh_public_key"))
        out.append(BackendConfig(
            t, Origin(c.doc.file, line, col, c.doc.index), strs(raw.get("regions")),
            raw.get("cidr"), strs(raw.get("ssh_cidrs")) or (), raw.get("public_ips"),
            frozen_map(settings), access))
    return out, ctx.diags, top, names


def _entry_origin(c: Checked, path: KeyPath, entry: dict[str, Any]) -> Origin:
    """An entry's origin, with the positions of its own keys (for later stages' errors)."""
    line, col = c.doc.source.key(path)
    return Origin(c.doc.file, line, col, c.doc.index,
                  {str(k): c.doc.source.key((*path, k)) for k in entry})


def _backend_rules(ctx: Ctx, base: KeyPath, raw: dict[str, Any]) -> None:
    t = raw["type"]
    if is_backend(t):  # the rules of dstack's own config model for this backend
        role_of(t, INPUT).backend_rules(ctx, base, raw)
        for key in traits_of(t).export_requires:
            if not raw.get(key):
                ctx.error(base, f"the {t} backend sets no `{key}`, which dstack's {t} backend "
                          "requires: `gpufleet export dstack` writes it into the dstack "
                          "server's config for every fleet on this backend", B019, key=True,
                          hint=f"add `{key}: ...` to this backend entry")
    if "cidr" in raw:
        _check_cidr(ctx, (*base, "cidr"), raw["cidr"], private=True)
    for j, cidr in enumerate(raw.get("ssh_cidrs") or []):
        net = _check_cidr(ctx, (*base, "ssh_cidrs", j), cidr, private=False)
        if net is not None and net.prefixlen == 0:
            ctx.error((*base, "ssh_cidrs", j), f"{cidr} opens SSH to the whole internet",
                      B006, severity=Severity.WARNING,
                      hint="list your office or bastion ranges instead")


def _check_cidr(ctx: Ctx, path: KeyPath, value: str, *, private: bool
                ) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as e:
        ctx.error(path, f"invalid CIDR '{value}': {e}", B005,
                  hint="write a network address with a prefix, e.g. 10.0.0.0/16")
        return None
    if private and (net.version != 4 or not net.is_private or net.prefixlen > 24):
        ctx.error(path, f"`cidr` must be a private IPv4 range of /24 or larger, not {value}",
                  B008, hint="use a range inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16")
    return net
