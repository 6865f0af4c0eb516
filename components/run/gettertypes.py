"""The return types of the SDK classes' property getters, each annotation evaluated once per
module rather than once per getter, while a program runs offline.

The Pulumi SDK reads a resource's (and each input and output type's) outputs from its
getters' return annotations (``pulumi._types._raw_return_hints``, cached per class):
``typing.get_type_hints`` on every getter, 2,909 getters of 219 classes in a plan of the
examples, about 140 ms of a cold run. Most of those annotations recur: 594 distinct objects
(``pulumi.Output[str]``, ``pulumi.Output[Optional[str]]`` across every class), and a string
or forward reference (``'outputs.InstanceNetworkInterface'``) recurs within its module.

``return_hints`` computes what the SDK's function computes, with the SDK's own helpers and
``typing.get_type_hints`` on the first getter of each annotation, and reuses that result for
the others whose annotation is equal and whose class reads the same module globals (the same
module objects in its MRO: what ``_globals_for_cls`` merges). ``tests/test_gettertypes.py``
compares it with the SDK's function on every class a plan of the examples reads.
``quick_hints`` puts it in place of the SDK's for the time a run takes.
"""

from __future__ import annotations

import functools
import sys
import types
import typing
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import pulumi
from pulumi import _types as sdk_types

_MISSING = object()
# (annotation, the modules of the class's MRO) -> its evaluated return type (None: none).
# The module objects, not their names: a module made again under a name (a test's fake SDK)
# is another scope.
_EVALUATED: dict[tuple[Any, tuple[types.ModuleType | None, ...]], Any] = {}


@functools.cache
def return_hints(cls: type) -> dict[str, Any]:
    """``pulumi._types._raw_return_hints(cls)``: each getter's Pulumi name -> its resolved
    return annotation, before any Output/Optional unwrapping."""
    globalns = sdk_types._globals_for_cls(cls)
    localns = {"Output": pulumi.Output, "T": type(None)}  # as the SDK passes them
    scope = tuple(sys.modules.get(base.__module__) for base in cls.__mro__)
    hints: dict[str, Any] = {}
    for _, pulumi_name, prop in sdk_types._py_properties(cls):
        annotation = getattr(prop.fget, "__annotations__", {}).get("return", _MISSING)
        key = (annotation, scope)
        try:
            hint = _EVALUATED[key]
        except (KeyError, TypeError):  # TypeError: an annotation that cannot be hashed
            hint = typing.get_type_hints(prop.fget, globalns=globalns,
                                         localns=localns).get("return")
            with suppress(TypeError):
                _EVALUATED[key] = hint
        if hint is not None:
            hints[pulumi_name] = hint
    return hints


@contextmanager
def quick_hints() -> Iterator[None]:
    """``return_hints`` in place of the SDK's function while the block runs."""
    original = sdk_types._raw_return_hints
    sdk_types._raw_return_hints = return_hints
    try:
        yield
    finally:
        sdk_types._raw_return_hints = original
