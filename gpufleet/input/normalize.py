"""dstack's shorthand grammars -> structured values, with dstack's own error texts. Pure.

Each parser raises :class:`SpecError` with the message dstack gives for the same input
(yaml-reference.md §2.3-§6); callers attach the position.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from gpufleet.codes import F020
from gpufleet.input.spec import CPUSpec, GPUSpec, Nodes, Range, ResourcesSpec, RetrySpec


class SpecError(ValueError):
    """A grammar error; ``subpath`` locates it below the value being parsed."""

    def __init__(self, message: str, subpath: tuple[str | int, ...] = (),
                 code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.subpath = subpath
        self.code = code  # None: the caller's code for the field

    def below(self, key: str | int) -> SpecError:
        return SpecError(self.message, (key, *self.subpath), self.code)


# Values dstack's models read but gpufleet refuses (README, "dstack conformance"): no offer
# matches them, and the arithmetic of a plan cannot carry them.
OWN_BOUND = F020


def _own(message: str, subpath: tuple[str | int, ...] = ()) -> SpecError:
    return SpecError(f"{message}; gpufleet's rule (dstack reads it): counts and sizes are "
                     f"whole, finite and between 0 and {MAX_COUNT:,}", subpath, OWN_BOUND)


GPU_VENDORS = {"nvidia": "nvidia", "amd": "amd", "google": "google", "intel": "intel",
               "tenstorrent": "tenstorrent", "tpu": "google", "tt": "tenstorrent"}
CPU_ARCHS = ("x86", "arm")
RETRY_EVENTS = ("no-capacity", "interruption", "error")
DEFAULT_RETRY_SECONDS = 3600
_DURATION_RE = re.compile(r"([0-9]{1,9}) *([smhdw])")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
TAG_KEY_RE = re.compile(r"^[_\-a-zA-Z0-9]{1,60}$")
TAG_VALUE_RE = re.compile(r"^[a-zA-Z0-9 .:/=_\-+@]{0,256}$")


# --- numbers and ranges ------------------------------------------------------------------

MAX_COUNT = 10**9  # no count or size in a fleet comes near this
_INT = re.compile(r"[-+]?[0-9]{1,4300}")  # Python's int() reads at most 4,300 digits


def _to_int(v: Any) -> int:
    if isinstance(v, bool):
        raise SpecError(f"invalid integer: {v}")
    if isinstance(v, int):
        n = v
    elif isinstance(v, float):
        raise SpecError(f"expected a whole number, not {v:g}")
    elif isinstance(v, str) and _INT.fullmatch(v.strip()):
        digits = v.strip().lstrip("+-")
        if len(digits) > 18:
            raise _own(f"{_short(v.strip())} is too large")
        n = int(v.strip())
    else:
        raise SpecError(f"'{_short(v)}' is not a whole number")
    if abs(n) > MAX_COUNT:
        raise _own(f"{_short(n)} is too large")
    return n


def _short(v: Any) -> str:
    s = str(v)
    return s if len(s) <= 40 else s[:40] + "..."


def parse_memory(v: Any) -> float:
    """Memory in GB: a number, or a string with TB/GB/MB (case-insensitive)."""
    if isinstance(v, bool):
        raise SpecError(f"Invalid memory size: {v}")
    if isinstance(v, int | float):
        value = float(v) if abs(v) <= MAX_COUNT else math.inf
        s = _short(v)
    elif isinstance(v, str):
        s = v.replace(" ", "").lower()
        scale = {"tb": 1024.0, "gb": 1.0, "mb": 1 / 1024}.get(s[-2:])
        number = s[:-2] if scale is not None else s
        try:  # what dstack does: Python's float() on the number, so 1e3, nan and 1_0 parse
            value = float(number) * (scale or 1.0)
        except ValueError:
            raise SpecError(f"could not convert string to float: '{_short(s)}'") from None
        s = _short(s)
    else:
        raise SpecError(f"Invalid memory size: {_short(v)}")
    if not math.isfinite(value) or value < 0 or value > MAX_COUNT:
        raise _own(f"Invalid memory size: {s}")
    return value


def _range(v: Any, conv: Any, unit: str = "") -> Range:
    lo: Any
    hi: Any
    if isinstance(v, Mapping):
        lo, hi = v.get("min"), v.get("max")
        lo = None if lo is None else conv(lo)
        hi = None if hi is None else conv(hi)
    elif isinstance(v, str) and ".." in v:
        parts = v.replace(" ", "").split("..")
        if len(parts) != 2:
            raise SpecError(f"Invalid range: {v}")
        lo = conv(parts[0]) if parts[0] else None
        hi = conv(parts[1]) if parts[1] else None
    else:
        lo = hi = conv(v)
    if lo is None and hi is None:
        raise SpecError("Invalid empty range: ..")
    if (lo is not None and lo < 0) or (hi is not None and hi < 0):
        raise _own(f"Invalid range: {_short(v)} (a negative bound)")
    if lo is not None and hi is not None and lo > hi:
        raise SpecError(f"Invalid range order: {_fmt(lo)}{unit}..{_fmt(hi)}{unit}")
    return Range(lo, hi)


def _fmt(v: float) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def parse_int_range(v: Any) -> Range:
    return _range(v, _to_int)


def parse_memory_range(v: Any) -> Range:
    return _range(v, parse_memory, "GB")


# --- nodes -------------------------------------------------------------------------------

def parse_nodes(v: Any) -> Nodes:
    """``2``, ``"0..2"``, ``"..4"``, ``"2.."`` or ``{min, target, max}``."""
    lo: int | None
    hi: int | None
    target: int | None = None
    if isinstance(v, Mapping):
        lo = None if v.get("min") is None else _to_int(v["min"])
        hi = None if v.get("max") is None else _to_int(v["max"])
        target = None if v.get("target") is None else _to_int(v["target"])
    elif isinstance(v, str) and ".." in v:
        parts = v.replace(" ", "").split("..")
        if len(parts) != 2:
            raise SpecError(f"Invalid range: {v}")
        lo = _to_int(parts[0]) if parts[0] else None
        hi = _to_int(parts[1]) if parts[1] else None
    else:
        lo = hi = _to_int(v)
    lo = 0 if lo is None else lo
    if lo < 0:
        raise SpecError("min cannot be negative")
    target = lo if target is None else target
    if target < lo:
        raise SpecError("target must not be be less than min")
    if hi is not None and hi < lo:
        raise SpecError("max must not be less than min")
    if hi is not None and hi < target:
        raise SpecError("max must not be less than target")
    return Nodes(lo, target, hi)


# --- resources ---------------------------------------------------------------------------

def parse_cpu(v: Any) -> CPUSpec:
    if isinstance(v, Mapping) and v and v.keys() <= {"min", "max"}:
        return CPUSpec(parse_int_range(v))  # dstack reads `{min: 4, max: 8}` as the count
    if isinstance(v, Mapping):
        if v.keys() & {"min", "max"}:
            raise SpecError("a CPU mapping is either `{min, max}` (a count range) or `{arch, "
                            "count}`; write `{arch: ..., count: {min: ..., max: ...}}`")
        arch = v.get("arch")
        if arch is not None and arch not in CPU_ARCHS:
            raise SpecError(f"Invalid CPU architecture: {arch}", ("arch",))
        count = parse_int_range(v["count"]) if v.get("count") is not None else Range(2, None)
        return CPUSpec(count, arch)
    if isinstance(v, int) and not isinstance(v, bool):
        return CPUSpec(parse_int_range(v))
    s = str(v)
    arch = None
    parsed: Range | None = None
    for token in s.replace(" ", "").split(":"):
        if not token:
            raise SpecError("CPU spec contains empty token")
        if ".." in token or token.isdigit():
            if parsed is not None:
                raise SpecError(f"CPU spec count conflict: {s}")
            parsed = parse_int_range(token)
        else:
            if token not in CPU_ARCHS:
                raise SpecError(f"Invalid CPU architecture: {token}")
            if arch is not None:
                raise SpecError(f"CPU spec arch conflict: {s}")
            arch = token
    return CPUSpec(parsed or Range(2, None), arch)


def parse_compute_capability(v: Any) -> tuple[int, int]:
    parts: Any = v
    if isinstance(v, float):
        parts = str(v)
    if isinstance(parts, str):
        parts = parts.strip().split(".")
    if isinstance(parts, list | tuple) and len(parts) == 2:
        try:
            return int(parts[0]), int(parts[1])
        except (TypeError, ValueError):
            pass
    raise SpecError(f"Invalid compute capability: {v}")


def _tokenize_gpu(v: str) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    for token in v.replace(" ", "").split(":"):
        if not token:
            raise SpecError(f"GPU spec contains empty token: {v}")
        vendor = GPU_VENDORS.get(token.lower())
        if vendor:
            if "vendor" in spec:
                raise SpecError(f"GPU spec vendor conflict: {v}")
            spec["vendor"] = vendor
        elif token[0].isalpha():
            if "name" in spec:
                raise SpecError(f"GPU spec name conflict: {v}")
            spec["name"] = token.split(",")
            if any(not n for n in spec["name"]):
                raise SpecError(f"GPU name can not be empty: {v}")
        elif any(c.isalpha() for c in token):
            if not re.search(r"[0-9.](tb|gb|mb)(\.\.|$)", token.lower()):
                parse_memory_range(token)  # dstack's error, if dstack refuses it too
                raise SpecError(f"GPU spec token '{_short(token)}' is neither a count (8, 1..4) "
                                f"nor a memory size with a unit (80GB, 24GB..): {_short(v)}; "
                                "gpufleet's rule (dstack reads it as GB)", code=OWN_BOUND)
            if "memory" in spec:
                raise SpecError(f"GPU spec memory conflict: {v}")
            spec["memory"] = token
        else:
            if "count" in spec:
                raise SpecError(f"GPU spec count conflict: {v}")
            spec["count"] = token
    return spec


def parse_gpu(v: Any) -> GPUSpec:
    """GPU spec: ``H100:8``, ``A100:80GB:2``, ``24GB..:2``, ``nvidia``, or the object form."""
    if isinstance(v, int) and not isinstance(v, bool):
        v = str(v)
    if not isinstance(v, str | Mapping):
        raise SpecError(f"`gpu` takes a count (2), a spec (H100:8, A100:80GB:2) or a mapping, "
                        f"not {_short(v)}")
    spec = _tokenize_gpu(v) if isinstance(v, str) else dict(v)
    vendor = spec.get("vendor")
    if vendor is not None:
        vendor = GPU_VENDORS.get(str(vendor).lower())
        if vendor is None:
            raise SpecError(f"Invalid GPU vendor: {spec['vendor']}", ("vendor",))
    raw_names = spec.get("name")
    names: list[str] = []
    if raw_names is not None:
        for n in raw_names if isinstance(raw_names, list) else [raw_names]:
            n = str(n).strip()
            if not n:
                raise SpecError(f"GPU name can not be empty: {raw_names}; gpufleet's rule (dstack "
                                "reads it, and no offer has an empty name)", ("name",), OWN_BOUND)
            names.append(n[4:] if n.startswith("tpu-") else n)
    count = (_sub(parse_int_range, spec["count"], "count") if spec.get("count") is not None
             else Range(1, None))
    memory = _sub(parse_memory_range, spec["memory"], "memory") if spec.get("memory") else None
    total = (_sub(parse_memory_range, spec["total_memory"], "total_memory")
             if spec.get("total_memory") is not None else None)
    cc = (_sub(parse_compute_capability, spec["compute_capability"], "compute_capability")
          if spec.get("compute_capability") is not None else None)
    return GPUSpec(count, vendor, tuple(names), memory, total, cc)


def _sub(fn: Any, value: Any, key: str) -> Any:
    try:
        return fn(value)
    except SpecError as e:
        raise e.below(key) from None


def parse_disk(v: Any) -> Range:
    if isinstance(v, Mapping):
        size: Range = _sub(parse_memory_range, v.get("size"), "size")
        return size
    return parse_memory_range(v)


def parse_resources(v: Mapping[str, Any]) -> tuple[ResourcesSpec, list[SpecError]]:
    """Each field is parsed on its own so that every error is reported, not just the first."""
    errors: list[SpecError] = []
    out: dict[str, Any] = {}
    parsers = {"cpu": parse_cpu, "memory": parse_memory_range, "gpu": parse_gpu,
               "disk": parse_disk, "shm_size": parse_memory}
    for key, fn in parsers.items():
        if v.get(key) is None:
            continue
        try:
            out[key] = fn(v[key])
        except SpecError as e:
            errors.append(e.below(key))
    return ResourcesSpec(**out), errors


# --- durations, retry, tags --------------------------------------------------------------

def parse_duration(v: Any) -> int:
    """Seconds from ``90``, ``"90"`` or ``"3d"`` (s, m, h, d, w; no fractions, no compounds)."""
    if isinstance(v, int) and not isinstance(v, bool):
        if abs(v) > MAX_COUNT * 100:
            raise SpecError(f"Cannot parse the duration {_short(v)} (too long)")
        return v
    s = str(v)
    if re.fullmatch(r"-?[0-9]{1,12}", s):
        return int(s)
    m = _DURATION_RE.fullmatch(s)
    if not m:
        raise SpecError(f"Cannot parse the duration {_short(s)}")
    return int(m.group(1)) * _DURATION_UNITS[m.group(2)]


def parse_idle_duration(v: Any) -> int | None:
    """``off``/``false``/negative -> -1 (never terminate); ``true`` -> default (None)."""
    if v is True:
        return None
    if v is False or v == "off":
        return -1
    seconds = parse_duration(v)
    return -1 if seconds < 0 else seconds


def parse_retry(v: Any) -> RetrySpec | None:
    if v is False or v is None:
        return None
    if v is True:
        return RetrySpec(RETRY_EVENTS, DEFAULT_RETRY_SECONDS)
    events = v.get("on_events")
    if events is not None and len(events) == 0:
        raise SpecError("`on_events` cannot be empty", ("on_events",))
    duration = (_sub(parse_duration, v["duration"], "duration")
                if v.get("duration") is not None else DEFAULT_RETRY_SECONDS)
    return RetrySpec(tuple(events) if events else RETRY_EVENTS, duration)


def check_tags(tags: Mapping[str, Any]) -> list[SpecError]:
    errors = []
    for key, value in tags.items():
        if not TAG_KEY_RE.fullmatch(key):
            errors.append(SpecError(f"Invalid tag key {key}. The key must match regex "
                                    "'^[_\\-a-zA-Z0-9]{1,60}$'", (key,)))
        elif not TAG_VALUE_RE.fullmatch(str(value)):
            errors.append(SpecError(f"Invalid tag value {value}. The value must match regex "
                                    "'^[a-zA-Z0-9 .:/=_\\-+@]{0,256}$'", (key,)))
    return errors
