"""The JSON Schemas shipped as ``gpufleet.schemas`` (the top-level ``schemas/`` folder).

Where a schema lists backends, the list follows the registry (``gpufleet.backends``): such a
node carries ``"x-gpufleet-backends": <which>`` and its ``enum`` (or, on the backends file's
entry, its per-backend ``allOf``) is made from the registered plugins when the schema is
loaded. The shipped files hold what gpufleet's own backends make (tests/test_schemas.py
fails when they differ; ``pytest --update-golden`` writes them), so editors read them as
they are.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

from gpufleet.input.schemacheck import Checker, matches, unsupported
from gpufleet.traits import BackendTraits

SLOT = "x-gpufleet-backends"
# which backends each kind of slot lists
SLOTS: dict[str, Callable[[BackendTraits], bool]] = {
    "all": lambda t: True,
    "reservations": lambda t: bool(t.reservation_kinds),
    "filesystems": lambda t: bool(t.filesystems),
    "entries": lambda t: True,  # the backends file's entry: one `if type: then $defs` each
}

KINDS = ("fleet", "gateway", "volume", "profiles", "backends", "lock")
_FILES = (*KINDS, "defs", "dstack-server-config", "task")


@cache
def schema_text(kind: str) -> str:
    # read from the package's folder, as fileio.package_data reads gpufleet's data (found
    # by its spec: an editable install maps it to the top-level schemas/ folder)
    spec = find_spec("gpufleet.schemas")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("gpufleet.schemas is not installed: reinstall gpufleet")
    folder = Path(next(iter(spec.submodule_search_locations)))
    return (folder / f"{kind}.schema.json").read_text("utf-8")


@cache
def schema(kind: str) -> dict[str, Any]:
    from gpufleet.backends import all_backends

    data: dict[str, Any] = with_backends(json.loads(schema_text(kind)), all_backends(),
                                         fresh=True)
    return data


def with_backends(doc: dict[str, Any], backends: Sequence[BackendTraits],
                  fresh: bool = False) -> dict[str, Any]:
    """``doc`` with every backend slot made from ``backends`` (in their order); a plugin's
    own backends-file settings (``settings_schema``) land in the backends file's `$defs`.
    ``fresh``: ``doc`` is the caller's own copy, filled in place."""
    out = doc if fresh else copy.deepcopy(doc)
    _fill(out, backends)
    defs = out.get("$defs")
    if isinstance(defs, dict) and _has_slot(out, "entries"):
        for t in backends:
            if t.settings_schema is not None:
                defs[t.name] = copy.deepcopy(dict(t.settings_schema))
    return out


def _fill(node: Any, backends: Sequence[BackendTraits]) -> None:
    if isinstance(node, list):
        for v in node:
            _fill(v, backends)
        return
    if not isinstance(node, dict):
        return
    which = node.get(SLOT)
    if which is not None:
        names = [t.name for t in backends if SLOTS[which](t)]
        if which == "entries":
            node["allOf"] = [{"if": {"properties": {"type": {"const": n}},
                                     "required": ["type"]},
                              "then": {"$ref": f"#/$defs/{n}"}} for n in names]
        else:
            node["enum"] = names
    for k, v in node.items():
        if k != SLOT:
            _fill(v, backends)


def _has_slot(node: Any, which: str) -> bool:
    if isinstance(node, dict):
        return node.get(SLOT) == which or any(_has_slot(v, which) for v in node.values())
    return isinstance(node, list) and any(_has_slot(v, which) for v in node)


def _pattern(_validator: Any, pattern: str, instance: Any, _schema: Any) -> Any:
    """jsonschema's `pattern` as schemacheck has it (``matches``: `$` is the string's end)."""
    from jsonschema.exceptions import ValidationError

    if isinstance(instance, str) and not matches(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


@cache
def validator(kind: str) -> Any:
    """A Draft 2020-12 validator of ``kind`` whose references reach every shipped schema:
    gpufleet's own checker (schemacheck) where it implements every keyword the schema uses,
    else jsonschema's."""
    root = schema(kind)
    try:
        checker = Checker(inlined(root, _lookup, root["$id"]), _resolved)
        if _unsupported(checker.schema) is None:
            return checker
    except LookupError:
        pass
    return jsonschema_validator(kind)


@cache
def jsonschema_validator(kind: str) -> Any:
    """jsonschema's validator of ``kind`` (the reference schemacheck is held to)."""
    from jsonschema import Draft202012Validator, validators
    from referencing import Registry, Resource

    registry: Registry[Any] = Registry().with_resources(
        (schema(name)["$id"], Resource.from_contents(schema(name))) for name in _FILES
    )
    # JSON Schema counts 2.0 as an integer; a YAML `2.0` is a float, and code that counts
    # nodes or replicas with it would break, so integers here are Python ints only.
    checker = Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _c, v: isinstance(v, int) and not isinstance(v, bool))
    strict = validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator, type_checker=checker, validators={"pattern": _pattern})
    root = schema(kind)
    resolver = registry.resolver()
    return strict(inlined(root, lambda uri: resolver.lookup(uri).contents, root["$id"]),
                  registry=registry)


_BASE = "https://gpufleet.dev/schemas/"  # each shipped schema's `$id`: _BASE + its file name


def _document(url: str) -> Any:
    """The shipped schema whose `$id` is ``url`` (loaded alone: a fleet's check reads two
    of the nine files), else None."""
    name = url.removeprefix(_BASE).removesuffix(".schema.json")
    if name not in _FILES or schema(name).get("$id") != url:
        return None
    return schema(name)


def _lookup(uri: str) -> Any:
    """What an absolute reference points at among the shipped schemas (a JSON pointer; an
    anchor or an unknown document is a LookupError)."""
    url, fragment = urldefrag(uri)
    node = _document(url)
    if node is None or (fragment and not fragment.startswith("/")):
        raise LookupError(uri)
    for part in fragment.split("/")[1:]:
        part = unquote(part).replace("~1", "/").replace("~0", "~")
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise LookupError(uri) from None
    return node


@cache
def _resolved(uri: str) -> Any:
    """The node an absolute `$ref` left in a schema points at, its own references inlined."""
    return inlined(_lookup(uri), _lookup, urldefrag(uri).url, frozenset({uri}))


def _unsupported(root: Any) -> str | None:
    """What in ``root`` or a schema its references reach schemacheck leaves to jsonschema."""
    todo, seen = [root], set()
    while todo:
        node = todo.pop()
        found = unsupported(node, root=node is root)
        if found:
            return found
        for uri in _refs(node):
            if uri not in seen:
                seen.add(uri)
                todo.append(_resolved(uri))
    return None


def _refs(node: Any) -> Iterable[str]:
    if isinstance(node, list):
        for v in node:
            yield from _refs(v)
    elif isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                yield v
            elif k != "$defs":
                yield from _refs(v)


# Keywords that only annotate: a `$ref` beside them alone validates as its target does.
_ANNOTATIONS = frozenset({"description", "title", "markdownDescription", "$comment",
                          "examples", "default"})


def inlined(node: Any, lookup: Callable[[str], Any], base: str,
            seen: frozenset[str] = frozenset()) -> Any:
    """``node`` with each `$ref` (beside annotations only) replaced by what it points at
    (``lookup`` of the absolute reference), once, when the validator is made: the validator
    then never looks a reference up (a third of the schema pass on 200 files,
    bench/validate.py). Errors are the same: a `$ref` yields its target's errors, whose
    ``schema`` is that same target. A reference in a cycle, or beside other keywords, stays a
    `$ref`, made absolute so it resolves where it now sits; `$defs` are left as they are (the
    registry keeps the originals). ``base``: the URI relative references start from (the
    shipped schemas set `$id` on their roots only)."""
    if isinstance(node, list):
        return [inlined(v, lookup, base, seen) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        uri = urljoin(base, ref)
        if uri in seen or not set(node) - {"$ref"} <= _ANNOTATIONS:
            rest = {k: inlined(v, lookup, base, seen) for k, v in node.items()
                    if k != "$ref"}
            return {"$ref": uri, **rest}
        return inlined(lookup(uri), lookup, urldefrag(uri).url, seen | {uri})
    return {k: v if k == "$defs" else inlined(v, lookup, base, seen)
            for k, v in node.items()}
