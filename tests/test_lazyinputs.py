"""A service's input types made when first read (components/lazyinputs.py): the types the
SDK resolves to serialize a resource are the ones a whole import gives, a class is made once,
and an ``_inputs`` of another shape runs whole.

The SDK checks run in fresh interpreters (this process has loaded whole SDKs already); the
shape checks load a small SDK-like package written for each test."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
import threading
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.components import lazyinputs, sdk

ROOT = Path(__file__).resolve().parent.parent

# What pulumi's serializer sees of each input type a resource's arguments reach: for every
# type, the Pulumi name and the resolved type of each property (``input_type_types`` calls
# ``typing.get_type_hints`` on the getters in the defining module's globals).
WALK = textwrap.dedent("""
    import json, sys, typing
    import pulumi
    from pulumi import _types
    LAZY = sys.argv[1] == "lazy"
    if LAZY:
        from gpufleet.components import sdk
        sdk.by_class("pulumi_gcp", ["compute"])
        sdk.by_class("pulumi_azure_native", ["compute", "network"])
    import pulumi_gcp as gcp, pulumi_azure_native as az
    resources = [gcp.compute.Instance, gcp.compute.Firewall, gcp.compute.Subnetwork,
                 az.compute.VirtualMachineScaleSet, az.network.NetworkSecurityGroup]
    seen, out = set(), {}
    # each resource's own arguments (Azure's are ``InitArgs`` where an input type has the
    # plain name)
    todo = [getattr(sys.modules[r.__module__], r.__name__ + "InitArgs", None)
            or getattr(sys.modules[r.__module__], r.__name__ + "Args") for r in resources]
    def inner(t):
        yield t
        for a in typing.get_args(t):
            yield from inner(a)
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        types = (_types.input_type_types(cls) if _types.is_input_type(cls)
                 else _types.output_type_types(cls))
        out[f"{cls.__module__}.{cls.__qualname__}"] = {k: repr(v) for k, v in types.items()}
        for t in types.values():
            todo.extend(x for x in inner(t) if isinstance(x, type)
                        and (_types.is_input_type(x) or _types.is_output_type(x)))
    # what the SDK resolves to read a resource's outputs back, and the output types they reach
    for r in resources:
        types = _types.resource_types(r)
        out[r.__module__] = {k: repr(v) for k, v in types.items()}
        for t in types.values():
            todo.extend(x for x in inner(t) if isinstance(x, type) and _types.is_output_type(x))
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        types = _types.output_type_types(cls)
        out[f"{cls.__module__}.{cls.__qualname__}"] = {k: repr(v) for k, v in types.items()}
        todo.extend(x for t in types.values() for x in inner(t)
                    if isinstance(x, type) and _types.is_output_type(x))
    # TypedDicts a resource module names only in strings, read from ``_inputs``: made then,
    # their hints resolved in ``_inputs`` as a whole import resolves them
    # (``pulumi.Input`` names ``'Output[T]'``: the SDK resolves it with these locals)
    hint_locals = {"Output": pulumi.Output, "T": type(None)}
    dicts = {f"{m}.{n}": repr(typing.get_type_hints(getattr(sys.modules[m], n),
                                                    localns=hint_locals))
             for m, names in (("pulumi_gcp.compute._inputs", ("InstanceBootDiskArgsDict",
                                                              "InstanceNetworkInterfaceArgsDict",
                                                              "FirewallAllowArgsDict")),
                              ("pulumi_azure_native.network._inputs", ("SecurityRuleArgsDict",)),
                              ("pulumi_azure_native.compute._inputs",
                               ("VirtualMachineScaleSetOSProfileArgsDict",)))
             for n in names}
    made = {}
    if LAZY:
        from gpufleet.components import lazyinputs
        for name in ("pulumi_gcp.compute._inputs", "pulumi_azure_native.compute._inputs",
                     "pulumi_gcp.compute.outputs", "pulumi_azure_native.network.outputs"):
            index = lazyinputs._INDEXES[name]
            module = sys.modules[name]
            made[name] = [sum(n in vars(module) for n in index.names), len(index.names)]
        made["whole"] = lazyinputs.WHOLE
        made["stored"] = lazyinputs.STORED
    print(json.dumps({"types": out, "made": made, "dicts": dicts}))
""")


def walk(mode: str, env: dict[str, str] | None = None) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", WALK, mode], capture_output=True, text=True,
                          check=False, cwd=ROOT, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    out: dict[str, object] = json.loads(done.stdout)
    return out


def test_the_types_a_resource_reaches_resolve_as_a_whole_import_resolves_them() -> None:
    lazy, whole = walk("lazy"), walk("whole")
    assert lazy["types"] == whole["types"]
    assert lazy["dicts"] == whole["dicts"] and len(whole["dicts"]) == 5  # type: ignore[arg-type]
    assert len(whole["types"]) > 100  # type: ignore[arg-type]
    made = lazy["made"]
    assert isinstance(made, dict) and made["whole"] == []
    for name in ("pulumi_gcp.compute._inputs", "pulumi_azure_native.compute._inputs",
                 "pulumi_gcp.compute.outputs", "pulumi_azure_native.network.outputs"):
        count, total = made[name]
        assert 0 < count < total, name
    assert made["pulumi_gcp.compute._inputs"][0] * 5 < made["pulumi_gcp.compute._inputs"][1]
    assert made["pulumi_gcp.compute.outputs"][0] * 5 < made["pulumi_gcp.compute.outputs"][1]
    kinds = {k.rsplit(".", 2)[-2] for k in lazy["types"]}  # type: ignore[attr-defined]
    assert {"_inputs", "outputs"} <= kinds


INPUTS = '''\
# coding=utf-8
import pulumi
from typing import Optional, TypedDict

__all__ = [
    'BaseArgs',
    'LeafArgs',
    'MidArgs',
    'MidArgsDict',
    'UnusedArgs',
    'SlowArgs',
]

class BaseArgs:
    kind = "base"

@pulumi.input_type
class LeafArgs:
    def __init__(__self__, *, size: Optional[pulumi.Input[int]] = None):
        if size is not None:
            pulumi.set(__self__, "size", size)

    @property
    @pulumi.getter
    def size(self) -> Optional[pulumi.Input[int]]:
        return pulumi.get(self, "size")


class MidArgsDict(TypedDict):
    leaf: 'LeafArgs'


@pulumi.input_type
class MidArgs(BaseArgs):
    def __init__(__self__, *, leaf: Optional[pulumi.Input['LeafArgs']] = None):
        if leaf is not None:
            pulumi.set(__self__, "leaf", leaf)

    @property
    @pulumi.getter
    def leaf(self) -> Optional[pulumi.Input['LeafArgs']]:
        return pulumi.get(self, "leaf")


@pulumi.input_type
class UnusedArgs:
    pass


class SlowArgs:
    import time as _time
    _time.sleep(0.05)  # made while another thread asks for it too
'''

THING = '''\
import pulumi
from ._inputs import *

__all__ = ['Thing']

class Thing:
    """Takes a 'MidArgs' or a 'MidArgsDict'."""
    def __init__(self, mid: Optional['MidArgs'] = None) -> None:
        self.mid = mid
'''

INIT = "from ._inputs import *\nfrom .thing import *\n"


@pytest.fixture
def fake_sdk(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, Path]]:
    """An SDK-like package ``fakesdk_<test>`` with one service ``svc``."""
    name = f"fakesdk_{request.node.name.replace('-', '_')}"[:60]
    service = tmp_path / name / "svc"
    service.mkdir(parents=True)
    (tmp_path / name / "__init__.py").write_text("")
    (service / "__init__.py").write_text(INIT)
    (service / "_inputs.py").write_text(INPUTS)
    (service / "thing.py").write_text(THING.replace("Optional", "typing.Optional")
                                      .replace("import pulumi\n", "import pulumi, typing\n"))
    sys.path.insert(0, str(tmp_path))
    try:
        yield name, service
    finally:
        sys.path.remove(str(tmp_path))
        for key in [k for k in sys.modules if k == name or k.startswith(f"{name}.")]:
            del sys.modules[key]
        lazyinputs._SERVICES.discard(f"{name}.svc")


def test_a_module_gets_the_types_its_text_names_and_no_other(
        fake_sdk: tuple[str, Path]) -> None:
    name, _ = fake_sdk
    sdk.by_class(name, ["svc"])
    thing = importlib.import_module(f"{name}.svc.thing")
    inputs = sys.modules[f"{name}.svc._inputs"]
    # named in the text (MidArgs), and what it names (LeafArgs, BaseArgs); MidArgsDict is
    # named only inside a string, so neither the module nor ``_inputs`` has it yet
    assert {"MidArgs", "LeafArgs", "BaseArgs"} <= set(vars(thing))
    assert "MidArgsDict" not in vars(thing) and "MidArgsDict" not in vars(inputs)
    assert "UnusedArgs" not in vars(thing) and "UnusedArgs" not in vars(inputs)
    assert thing.MidArgs is inputs.MidArgs and issubclass(thing.MidArgs, thing.BaseArgs)
    assert inputs.__all__ == []  # given to each importer's ``import *`` while it runs
    from pulumi import _types
    assert _types.is_input_type(thing.MidArgs) and not _types.is_input_type(thing.BaseArgs)
    assert _types.input_type_types(thing.MidArgs) == {"leaf": thing.LeafArgs}
    assert thing.MidArgs.__module__ == f"{name}.svc._inputs"
    # a TypedDict read from ``_inputs`` is made then, and its hints resolve there
    assert inputs.MidArgsDict.__annotations__.keys() == {"leaf"}
    assert typing.get_type_hints(inputs.MidArgsDict) == {"leaf": inputs.LeafArgs}
    # a class read later is made then, once
    unused = inputs.UnusedArgs
    assert unused is inputs.UnusedArgs and _types.is_input_type(unused)
    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        inputs.Nothing  # noqa: B018
    assert f"{name}.svc._inputs" not in lazyinputs.WHOLE


DICTS = '''\
# coding=utf-8
import pulumi
from typing import TypedDict

class LeafArgsDict(TypedDict):
    size: int

class MidArgsDict(TypedDict):
    leaf: 'LeafArgsDict'

class OtherArgsDict(TypedDict):
    size: int
'''


@pytest.mark.parametrize("text", ["Alias = MidArgsDict\n",
                                  "def f(m: 'MidArgsDict') -> None: ...\n"])
def test_a_typed_dict_is_imported_where_a_module_names_it_outside_a_string(
        fake_sdk: tuple[str, Path], text: str) -> None:
    """A module that reads an ``ArgsDict`` when it runs gets it, with the TypedDicts it
    names; one naming it only in a string gets none, and reading it from ``_inputs`` makes it
    and what it names."""
    name, service = fake_sdk
    (service / "_inputs.py").write_text(DICTS)
    (service / "user.py").write_text(f"from ._inputs import *\n{text}")
    sdk.by_class(name, ["svc"])
    user = importlib.import_module(f"{name}.svc.user")
    inputs = sys.modules[f"{name}.svc._inputs"]
    bare = text.startswith("Alias")
    assert ("MidArgsDict" in vars(user)) == bare and ("LeafArgsDict" in vars(user)) == bare
    assert "OtherArgsDict" not in vars(inputs)
    assert typing.get_type_hints(inputs.MidArgsDict) == {"leaf": inputs.LeafArgsDict}
    if bare:
        assert user.Alias is inputs.MidArgsDict


def test_a_service_loaded_whole_afterwards_keeps_the_classes_made_before(
        fake_sdk: tuple[str, Path]) -> None:
    name, _ = fake_sdk
    sdk.by_class(name, ["svc"])
    service = sys.modules[f"{name}.svc"]
    mid = service.MidArgs  # made lazily
    with pytest.raises(AttributeError):
        service.NoSuchName  # noqa: B018  -- the service's own __init__ runs
    assert (f"{name}.svc", "NoSuchName") in sdk.FULL_LOADS
    assert service.MidArgs is mid and service.Thing.__module__ == f"{name}.svc.thing"
    inputs = sys.modules[f"{name}.svc._inputs"]
    assert inputs.__all__ == ["BaseArgs", "LeafArgs", "MidArgsDict", "MidArgs", "UnusedArgs",
                              "SlowArgs"]
    assert service.UnusedArgs is inputs.UnusedArgs


def test_a_class_read_by_two_threads_at_once_is_made_once(fake_sdk: tuple[str, Path]) -> None:
    name, _ = fake_sdk
    sdk.by_class(name, ["svc"])
    inputs = importlib.import_module(f"{name}.svc._inputs")
    start = threading.Barrier(4)
    got: list[type] = []

    def read() -> None:
        start.wait()
        got.append(inputs.SlowArgs)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and all(g is got[0] for g in got)


@pytest.mark.parametrize("form", ["latin-1", "pyc alone"])
def test_a_module_whose_text_is_unreadable_gets_every_type(
        fake_sdk: tuple[str, Path], form: str) -> None:
    """A module not in UTF-8, or without source: what it names is unknown, so its
    ``import *`` gets every input type, and the service's types are made whole from then."""
    import py_compile

    name, service = fake_sdk
    source = service / "latin.py"
    source.write_bytes(b"# -*- coding: latin-1 -*-\n# caf\xe9\nfrom ._inputs import *\n")
    if form == "pyc alone":
        py_compile.compile(str(source), cfile=str(service / "latin.pyc"), doraise=True)
        source.unlink()
    sdk.by_class(name, ["svc"])
    mid = importlib.import_module(f"{name}.svc.thing").MidArgs  # lazily, before
    latin = importlib.import_module(f"{name}.svc.latin")
    assert (type(latin.__loader__).__name__ == "SourcelessFileLoader") == (form == "pyc alone")
    inputs = sys.modules[f"{name}.svc._inputs"]
    assert {"UnusedArgs", "SlowArgs", "MidArgs"} <= set(vars(latin))
    assert latin.MidArgs is mid and inputs.__all__[-1] == "SlowArgs"
    assert f"{name}.svc" not in lazyinputs._SERVICES


@pytest.mark.parametrize("odd", [
    "\ndef helper():\n    return 1\n",                      # a function at column 0
    "\nALIAS = 'LeafArgs'\n",                               # an assignment
    "\n@some.other_decorator\nclass Other:\n    pass\n",     # another decorator
    "\nclass Meta(LeafArgs, metaclass=type):\n    pass\n",  # a keyword in the bases
])
def test_an_inputs_module_of_another_shape_runs_whole(
        fake_sdk: tuple[str, Path], odd: str) -> None:
    name, service = fake_sdk
    text = INPUTS + odd
    if "some.other" in odd:
        text = text.replace("import pulumi\n", "import pulumi\nimport types\n"
                            "some = types.SimpleNamespace(other_decorator=lambda c: c)\n")
    (service / "_inputs.py").write_text(text)
    sdk.by_class(name, ["svc"])
    thing = importlib.import_module(f"{name}.svc.thing")
    inputs = sys.modules[f"{name}.svc._inputs"]
    assert f"{name}.svc._inputs" in lazyinputs.WHOLE
    assert type(inputs).__name__ == "module"
    assert "UnusedArgs" in vars(inputs) and "UnusedArgs" in vars(thing)  # ``import *`` whole
