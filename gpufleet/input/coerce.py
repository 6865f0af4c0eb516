"""What dstack's models convert before they validate, done the same way here: a value of another
type that converts (`'1.25'` for a number) is converted with a warning (L013); `backends`
narrows to the backends gpufleet builds; values that are not finite are found."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

from gpufleet.backends import backend_names, is_backend
from gpufleet.codes import (
    F022,
    L013,
)
from gpufleet.diagnostics import Diagnostic, KeyPath, Severity, format_path
from gpufleet.input.loader import Document
from gpufleet.input.schema_files import validator
from gpufleet.input.spec import DSTACK_BACKENDS

_INT_TEXT = re.compile(r"[+-]?[0-9]{1,30}")


_FLOAT_TEXT = re.compile(r"[+-]?([0-9]{1,30}(\.[0-9]{0,30})?|\.[0-9]{1,30})([eE][+-]?[0-9]{1,3})?")


_BOOL_TEXT = {"1": True, "on": True, "t": True, "true": True, "y": True, "yes": True,
              "0": False, "off": False, "f": False, "false": False, "n": False, "no": False}


_UNSET = object()


def _convert(value: Any, types: Iterable[str]) -> Any:
    """``value`` as pydantic's lax mode (which dstack's models use) reads it for a field of
    one of ``types``, else _UNSET."""
    wanted = list(types)
    if isinstance(value, bool):  # lax mode reads true as 1 where a number is wanted
        return int(value) if "integer" in wanted else float(value) if "number" in wanted \
            else _UNSET
    if isinstance(value, str):
        text = value.strip()
        if "integer" in wanted and _INT_TEXT.fullmatch(text):
            return int(text)
        if "number" in wanted and _FLOAT_TEXT.fullmatch(text) and math.isfinite(float(text)):
            return float(text)
        if "boolean" in wanted and text.lower() in _BOOL_TEXT:
            return _BOOL_TEXT[text.lower()]
        return _UNSET
    if isinstance(value, float) and "object" in wanted:
        return _UNSET  # `nodes: 2.0`, `gpu: 2.0`: dstack's parsers for these refuse a float
    if isinstance(value, float) and "integer" in wanted and value.is_integer():
        return int(value)
    if isinstance(value, int | float) and "string" in wanted:
        return str(value)
    if isinstance(value, int) and "boolean" in wanted and value in (0, 1):
        return bool(value)
    return _UNSET


def schema_of(err: Any) -> dict[str, Any]:
    """The subschema an error comes from; a boolean schema (`false`: nothing is valid
    there) has no keywords."""
    return err.schema if isinstance(err.schema, dict) else {}


def _wanted_types(err: Any) -> list[str]:
    if err.validator == "type":
        return _as_list(err.validator_value)
    if err.validator in ("anyOf", "oneOf") and err.context:
        return [t for e in err.context if e.validator == "type" and not e.relative_path
                for t in _as_list(e.validator_value)]
    return []


def _convertible(err: Any) -> Iterable[Any]:
    """``err`` and, below a union (`cpu: {min: 4.0}`), the errors inside the value of the
    branch its type matched (a branch of another type has its error at the value itself)."""
    yield err
    for e in err.context or ():
        if e.relative_path:
            yield from _convertible(e)


def coerce(doc: Document, kind: str) -> tuple[list[Diagnostic], list[Any]]:
    """Values of the wrong type that dstack's models convert (`max_price: '1.25'`,
    `reservation: 12345`, `blocks: '4'`, `default: 'true'`, `replicas: 2.0`): converted the same
    way, each with a warning, so that gpufleet accepts what dstack accepts. Also gives the
    schema's errors for the data as converted (the pass that found nothing left to convert:
    a valid document is walked once)."""
    out: list[Diagnostic] = []
    done: set[KeyPath] = set()
    for _ in range(4):  # a conversion can uncover another (a list of them)
        changed = False
        tops = list(validator(kind).iter_errors(doc.data))
        errors = [e for top in tops for e in _convertible(top)]
        for err in errors:
            path = tuple(err.absolute_path)
            if schema_of(err).get("x-coerce") is False or path in done:
                continue
            new = _convert(err.instance, _wanted_types(err))
            if new is _UNSET or not path or not _set(doc.data, path, new):
                continue
            changed = True
            done.add(path)
            was = json.dumps(err.instance) if isinstance(err.instance, bool) \
                else repr(err.instance)  # `true` as the YAML says it
            out.append(doc.at_value(path, L013, f"{_where(path, kind)}: {was} is "
                                    f"read as {json.dumps(new)}, as dstack's models convert it",
                                    severity=Severity.WARNING,
                                    hint=f"write {json.dumps(new)} to say so"))
        if not changed:
            return out, tops
    return out, list(validator(kind).iter_errors(doc.data))


def narrow_backends(doc: Document, kind: str) -> list[Diagnostic]:
    """`backends: [azure, lambda]`: dstack backends gpufleet does not build are dropped from
    a list that names one it does, with a warning (dstack would consider them too). A list
    of such backends only stays an error (F006): nothing would be left."""
    data = doc.data
    if kind == "fleet" and isinstance(data, dict):
        paths: list[KeyPath] = [("backends",)]
    elif kind == "profiles" and isinstance(data, dict) and isinstance(data.get("profiles"),
                                                                      list):
        paths = [("profiles", i, "backends") for i in range(len(data["profiles"]))]
    else:
        return []
    out = []
    for path in paths:
        holder = data
        for key in path[:-1]:
            holder = holder[key]
        value = holder.get(path[-1]) if isinstance(holder, dict) else None
        if not isinstance(value, list) or not all(isinstance(b, str) for b in value):
            continue
        kept = [b for b in value if is_backend(b)]
        dropped = [(i, b) for i, b in enumerate(value) if not is_backend(b)]
        if not kept or not dropped or any(b not in DSTACK_BACKENDS for _, b in dropped):
            continue
        for i, b in dropped:
            out.append(doc.at_value((*path, i), F022, f"backend '{b}' is left out: gpufleet "
                                    f"builds on {', '.join(backend_names())}; this "
                                    f"{'fleet' if kind == 'fleet' else 'profile'} uses "
                                    f"{', '.join(kept)}", severity=Severity.WARNING,
                                    hint=f"dstack still considers '{b}' when it provisions "
                                         "on its own; remove it here to say so"))
        holder[path[-1]] = kept
    return out


def _set(data: Any, path: KeyPath, value: Any) -> bool:
    for key in path[:-1]:
        data = data[key]
    if isinstance(data, dict | list):
        data[path[-1]] = value  # type: ignore[index]
        return True
    return False


def _not_finite(data: Any, path: KeyPath) -> list[tuple[KeyPath, str]]:
    """Where the document holds .nan or .inf (no bound holds for NaN, so the schema's
    bounds would let it through)."""
    if isinstance(data, float) and not math.isfinite(data):
        return [(path, ".nan" if math.isnan(data) else ("-.inf" if data < 0 else ".inf"))]
    items = data.items() if isinstance(data, dict) else enumerate(data) \
        if isinstance(data, list) else ()
    return [hit for k, v in items for hit in _not_finite(v, (*path, k))]


def _where(path: KeyPath, kind: str) -> str:
    return format_path(path) or kind


def _as_list(v: Any) -> list[str]:
    return list(v) if isinstance(v, list) else [v]
