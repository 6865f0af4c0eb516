"""Provider SDK services loaded class by class.

Each service of a provider SDK (``pulumi_gcp.compute``, ``pulumi_aws.ec2``,
``pulumi_azure_native.network``) is a package whose ``__init__`` imports every resource
module of the service -- 290 modules for GCP's compute, most of a second on a 2-core
machine -- while the program uses a few dozen classes. ``by_class(sdk, services)`` installs
those services as packages whose ``__init__`` has not run: an attribute read on one
(``gcp.compute.Instance``) imports only the module that defines it (``instance``, with the
service's ``outputs`` and the input types it names: ``lazyinputs`` makes those of a
service's ``_inputs`` class by class too). The components keep their typed
``gcp.compute.Instance`` spelling, so ``mypy --strict`` checks the same inputs.

A name the module guesses miss runs the service's own ``__init__`` (every class, as without
this module) and is counted in ``FULL_LOADS``: slower, never wrong. Tests assert the
bundled examples plan without one.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import re
import sys
import types
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from .lazyinputs import imported, lazy, make_all

# services whose own __init__ had to run, with the name that made it (for tests and benches)
FULL_LOADS: list[tuple[str, str]] = []
# What the Pulumi SDK's package imports (``from . import ..., automation``) and no run of the
# program reads: the Automation API, 35 ms of a cold plan's imports. ``defer_unread`` has it
# loaded when first read (``importlib.util.LazyLoader``): ``components.run.automation``, which
# drives the CLI, reads it and gets the whole module.
DEFERRED = ("pulumi.automation",)

_WORD = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def _snake(name: str) -> str:
    """``PublicIPAddress`` -> ``public_ip_address``: the SDKs' module naming."""
    return _WORD.sub("_", name).lower()


def _modules_for(name: str) -> Iterator[str]:
    """The modules of a service that may define ``name``, most likely first: a resource and
    its ``FooArgs`` (or ``FooInitArgs``) live in ``foo``; ``get_foo``/``get_foo_output`` and
    ``(Awaitable)GetFooResult`` in ``get_foo``; nested input types in ``_inputs``; enums in
    ``_enums``."""
    if name[:1].islower():
        yield name.removesuffix("_output")
        return
    base = name
    for suffix in ("ArgsDict", "InitArgs", "Args"):  # InitArgs: a resource's, where its
        # plain name is taken by an input type
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            yield _snake(base)
            yield "_inputs"
            return
    if base.endswith("Result"):  # a function's result, or an enum named so
        yield _snake(base.removeprefix("Awaitable").removesuffix("Result"))
    yield _snake(base)
    yield "_enums"
    yield "_inputs"


class _Service(types.ModuleType):
    """A service package whose ``__init__`` has not run; see the module's docstring."""

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        path = self.__dict__["__path__"]
        own = self.__dict__["__name__"]
        if importlib.machinery.PathFinder.find_spec(f"{own}.{attr}", path) is not None:
            return imported(f"{own}.{attr}")  # a module: ``outputs``
        for module in _modules_for(attr):
            if importlib.machinery.PathFinder.find_spec(f"{own}.{module}", path) is None:
                continue
            found = getattr(imported(f"{own}.{module}"), attr, None)
            if found is not None:
                setattr(self, attr, found)
                return found
        return self._load(attr)

    def _load(self, attr: str) -> Any:
        """The service's own ``__init__``, run once into this module."""
        FULL_LOADS.append((self.__name__, attr))
        make_all(self.__name__)  # the ``import *`` below takes every input type
        object.__setattr__(self, "__class__", types.ModuleType)  # plain attribute reads now
        spec = self.__spec__
        assert spec is not None and spec.loader is not None
        spec.loader.exec_module(self)
        return getattr(self, attr)


class _Deferred(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in DEFERRED:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = importlib.util.LazyLoader(spec.loader)
        return spec


def defer_unread() -> None:
    """``DEFERRED`` loaded when first read, from now on (a no-op once ``pulumi`` is imported:
    the modules are loaded already)."""
    if "pulumi" not in sys.modules and not any(isinstance(f, _Deferred) for f in sys.meta_path):
        sys.meta_path.insert(0, _Deferred())


def by_class(sdk: str, services: Iterable[str]) -> None:
    """Install ``sdk``'s ``services`` as class-by-class packages, unless already loaded."""
    top = importlib.util.find_spec(sdk)
    if top is None or top.submodule_search_locations is None:
        raise ImportError(f"no provider SDK {sdk!r}")  # a broken install: say so, never guess
    for service in services:
        name = f"{sdk}.{service}"
        present = sys.modules.get(name)
        if present is not None and type(present) is types.ModuleType:
            continue  # imported whole already (a test, a user's program): keep it
        spec = importlib.machinery.PathFinder.find_spec(name, top.submodule_search_locations)
        if spec is None or spec.loader is None:
            raise ImportError(f"no service {name!r} in the installed {sdk}")
        module = importlib.util.module_from_spec(spec)
        module.__class__ = _Service
        sys.modules[name] = module
        lazy(name)
        parent = sys.modules.get(sdk)
        if parent is not None:  # imported already: its lazy attribute points at the old one
            setattr(parent, service, module)


def package_module(sdk: str, module: str) -> types.ModuleType:
    """One resource module of an SDK whose package ``__init__`` imports every resource of the
    provider (pulumi_cloudflare: several hundred modules, some warning that they are
    deprecated): the package is installed unexecuted, then only ``module`` (with the
    package's ``_utilities``) is imported."""
    if sdk not in sys.modules:
        spec = importlib.util.find_spec(sdk)
        if spec is None:
            raise ModuleNotFoundError(f"{sdk} is not installed")
        sys.modules[sdk] = importlib.util.module_from_spec(spec)
    return imported(f"{sdk}.{module}")
