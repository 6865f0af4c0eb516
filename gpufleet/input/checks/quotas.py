"""The backends file's `quotas:` (requests as code): whether the stack files an increase for
each short quota (`request`), with how much headroom, the contact Google asks for, and the
limits file `gpufleet quota --live --save` wrote (what the plan finds shortfalls with; it is
committed and reviewed like the lock). Pure but for reading that file."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from gpufleet.codes import B021
from gpufleet.diagnostics import Diagnostic, Severity
from gpufleet.input.checks.context import Ctx
from gpufleet.input.quotaspec import QuotaLimit, QuotaSettings
from gpufleet.input.schema import Checked

LIMITS_VERSION = 1
MAX_BYTES = 4 << 20


def check_quotas(c: Checked) -> tuple[QuotaSettings | None, list[Diagnostic]]:
    ctx = Ctx(c)
    raw = ctx.data().get("quotas")
    if not isinstance(raw, dict) or not c.ok(("quotas",)):
        return None, ctx.diags
    limits: tuple[QuotaLimit, ...] = ()
    path = raw.get("limits")
    if isinstance(path, str):
        where = Path(c.doc.file).parent / path
        try:
            limits = read_limits(where)
        except ValueError as e:
            ctx.error(("quotas", "limits"), f"{where}: {e}", B021,
                      hint="write it with `gpufleet quota --live --save FILE`")
            return None, ctx.diags
    elif raw.get("request"):
        ctx.error(("quotas", "request"), "`quotas.request` files increases for short quotas, "
                  "but no `limits` file says what the limits are, so the plan finds none",
                  B021, key=True, severity=Severity.WARNING,
                  hint="run `gpufleet quota --live --save quota-limits.json` and set "
                       "`limits: quota-limits.json`")
    return QuotaSettings(bool(raw.get("request")), float(raw.get("headroom", 10)),
                         raw.get("contact_email"), limits,
                         str(path) if isinstance(path, str) else None), ctx.diags


def read_limits(path: Path) -> tuple[QuotaLimit, ...]:
    """The limits file's entries; ValueError says what is wrong with it."""
    try:
        if path.stat().st_size > MAX_BYTES:
            raise ValueError(f"larger than {MAX_BYTES >> 20} MB")
        data = json.loads(path.read_text(encoding="utf-8"),
                          parse_constant=lambda c: _refuse(c))
    except OSError as e:
        raise ValueError(f"cannot read it ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON: {e.msg} at line {e.lineno}") from None
    if not isinstance(data, dict) or data.get("version") != LIMITS_VERSION or \
            not isinstance(data.get("limits"), list):
        raise ValueError(f"not a limits file of version {LIMITS_VERSION} (`gpufleet quota "
                         "--live --save` writes one)")
    return tuple(_entry(i, e) for i, e in enumerate(data["limits"]))


def _refuse(constant: str) -> Any:
    raise ValueError(f"{constant} is not a number")


def _entry(i: int, e: Any) -> QuotaLimit:
    try:
        dims = tuple(sorted((str(k), str(v)) for k, v in (e.get("dimensions") or {}).items()))
        limit, used = float(e["limit"]), float(e.get("used") or 0)
        if not (math.isfinite(limit) and math.isfinite(used)) or limit < 0 or used < 0:
            raise ValueError
        return QuotaLimit(str(e["backend"]), str(e["scope"]), str(e["region"]),
                          str(e["ident"]), dims, str(e["market"]), limit, used)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise ValueError(f"entry {i} is not {{backend, scope, region, ident, dimensions, "
                         "market, limit, used}} with finite, non-negative numbers") from None
