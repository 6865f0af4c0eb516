"""Setting `gpufleet:gateways` in a `Pulumi.<stack>.yaml` without the Pulumi CLI: the key's
block is replaced (or added at the end of `config:`) and every other line stays as the user
wrote it, comments included. The result is read back and must hold the same config as
before but for that key, or nothing is written. Pure.

The value is structured config (a YAML mapping), which Pulumi hands to the program as JSON,
as `pulumi config set --path` would store it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import yaml

from gpufleet.input.stackconfig import GATEWAYS, StackConfigError
from gpufleet.input.synced import SyncedGateway

_TOP = re.compile(r"^(?!\s)(?!#)(\S[^:]*):")  # a top-level key
_CONFIG = re.compile(r"^config:\s*(#.*)?$")


def _block(gateways: Mapping[str, SyncedGateway], indent: str) -> list[str]:
    if not gateways:
        return []
    data = {GATEWAYS: {n: g.to_json() for n, g in sorted(gateways.items())}}
    text = yaml.safe_dump(data, sort_keys=True, default_flow_style=False, indent=2)
    return [indent + line + "\n" for line in text.splitlines()]


def _config_span(lines: list[str]) -> tuple[int, int] | None:
    """(first line after `config:`, end of its block), or None without `config:`."""
    start = next((i for i, ln in enumerate(lines) if _CONFIG.match(ln)), None)
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if _TOP.match(lines[i])), len(lines))
    return start + 1, end


def set_gateways(text: str, gateways: Mapping[str, SyncedGateway]) -> str:
    """``text`` with `gpufleet:gateways` set to ``gateways`` (removed when empty)."""
    lines = text.splitlines(keepends=True)
    if any(re.match(r"config:\s*[^#\s]", ln) for ln in lines):
        raise StackConfigError(f"the stack config's `config:` is written inline; set "
                               f"`{GATEWAYS}` with `pulumi config set --path` instead")
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    span = _config_span(lines)
    if span is None:
        new = lines + (["config:\n", *_block(gateways, "  ")] if gateways else [])
        return _checked(text, "".join(new), gateways)
    first, end = span
    keys = [i for i in range(first, end) if lines[i].strip() and
            not lines[i].lstrip().startswith("#") and
            len(lines[i]) - len(lines[i].lstrip()) == _indent(lines, first, end)]
    indent = " " * _indent(lines, first, end)
    at = next((i for i in keys if lines[i].strip().startswith(GATEWAYS + ":")), None)
    if at is None:
        while end > first and not lines[end - 1].strip():
            end -= 1  # keep blank lines after the block where they were
        new = lines[:end] + _block(gateways, indent) + lines[end:]
    else:
        stop = next((i for i in keys if i > at), end)
        while stop > at + 1 and (not lines[stop - 1].strip()
                                 or lines[stop - 1].lstrip().startswith("#")):
            stop -= 1  # a comment or blank line before the next key stays with it
        new = lines[:at] + _block(gateways, indent) + lines[stop:]
    return _checked(text, "".join(new), gateways)


def _indent(lines: list[str], first: int, end: int) -> int:
    """The indent of the config block's keys (2 when it has none)."""
    for i in range(first, end):
        if lines[i].strip() and not lines[i].lstrip().startswith("#"):
            return len(lines[i]) - len(lines[i].lstrip())
    return 2


def _checked(old: str, new: str, gateways: Mapping[str, SyncedGateway]) -> str:
    """``new`` when it holds what ``old`` held but for `gpufleet:gateways`, which holds
    ``gateways``; else StackConfigError (the caller writes nothing)."""
    try:
        before, after = yaml.safe_load(old) or {}, yaml.safe_load(new) or {}
    except yaml.YAMLError as e:
        raise StackConfigError(f"the stack config is not YAML ({e}); set the value with "
                               f"`pulumi config set --path {GATEWAYS}...` instead") from None
    if not isinstance(before, dict) or not isinstance(after, dict):
        raise StackConfigError("the stack config is not a YAML mapping")
    old_cfg = dict(before.get("config") or {})
    new_cfg = dict(after.get("config") or {})
    got = new_cfg.pop(GATEWAYS, None)
    old_cfg.pop(GATEWAYS, None)
    want = {n: g.to_json() for n, g in gateways.items()} or None
    rest_same = {k: v for k, v in before.items() if k != "config"} == \
        {k: v for k, v in after.items() if k != "config"}
    if old_cfg != new_cfg or got != want or not rest_same:
        raise StackConfigError(f"gpufleet could not set `{GATEWAYS}` in the stack config "
                               "without touching its other values (an unusual layout); set "
                               f"it with `pulumi config set --path '{GATEWAYS}...'` instead")
    return new
