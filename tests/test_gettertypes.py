"""The SDK getters' return types as an offline run computes them (components/run/gettertypes.py):
the same as the Pulumi SDK's own function gives, for every class a plan of the examples
asks about and for classes of different modules whose annotations read alike."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pulumi
import pytest
from pulumi import _types as sdk_types

from gpufleet.components.run import gettertypes, harness

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SDK_OWN = sdk_types._raw_return_hints.__wrapped__  # the SDK's function, without its cache


def _examples_run() -> None:
    from gpufleet.compile import compile_inputs
    from gpufleet.compile.runs import RunInputs
    from gpufleet.components.run.plan import run_offline
    from gpufleet.input import validate_paths
    from gpufleet.offers import load_catalog

    compiled = compile_inputs(validate_paths([EXAMPLES]).inputs, load_catalog())
    run_offline(RunInputs((EXAMPLES,)), compiled)


def test_every_class_a_plan_reads_gets_the_sdks_own_types(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[type] = []
    real = gettertypes.return_hints

    def recording(cls: type) -> dict[str, Any]:
        asked.append(cls)
        return real(cls)
    monkeypatch.setattr(gettertypes, "return_hints", recording)
    # the SDK's own caches of what it derives from the hints, filled by earlier tests here
    sdk_types._types_from_py_properties.cache_clear()
    sdk_types._required_property_names.cache_clear()
    original = sdk_types._raw_return_hints
    _examples_run()
    assert sdk_types._raw_return_hints is original  # back after the run
    classes = set(asked)
    modules = {c.__module__.split(".")[0] for c in classes}
    assert len(classes) > 150 and {"pulumi_aws", "pulumi_gcp", "pulumi_azure_native"} <= modules
    differ = [c for c in classes if real(c) != SDK_OWN(c)]
    assert not differ
    getters = sum(len(real(c)) for c in classes)
    assert getters > 2000  # the resources' getters, not only a few input types


def _sdk_module(name: str, size: str) -> types.ModuleType:
    """A module shaped like a provider SDK's: an output type ``Disk`` and a resource whose
    getters name it as a string, as the SDKs write forward references."""
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(f"""
import pulumi
from typing import Optional, Sequence

@pulumi.output_type
class Disk(dict):
    def __init__(__self__, *, size: {size}):
        pulumi.set(__self__, "size", size)

    @property
    @pulumi.getter
    def size(self) -> {size}:
        return pulumi.get(self, "size")

class Machine(pulumi.CustomResource):
    @property
    @pulumi.getter
    def disk(self) -> pulumi.Output[Optional['Disk']]:
        return pulumi.get(self, "disk")

    @property
    @pulumi.getter
    def disks(self) -> pulumi.Output[Sequence['Disk']]:
        return pulumi.get(self, "disks")

    @property
    @pulumi.getter
    def name(self) -> pulumi.Output[str]:
        return pulumi.get(self, "name")
""", module.__dict__)
    return module


def test_alike_annotations_resolve_in_their_own_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two modules whose getters read ``Optional['Disk']`` each get their own ``Disk``: an
    annotation is reused only within the modules it was evaluated in."""
    a = _sdk_module("gpufleet_test_sdk_a", "int")
    b = _sdk_module("gpufleet_test_sdk_b", "str")
    try:
        got_a, got_b = gettertypes.return_hints(a.Machine), gettertypes.return_hints(b.Machine)
        assert got_a == SDK_OWN(a.Machine) and got_b == SDK_OWN(b.Machine)
        assert got_a["disk"] == pulumi.Output[a.Disk | None]
        assert got_b["disks"].__args__[0].__args__ == (b.Disk,)
        assert got_a["name"] == pulumi.Output[str]
        assert gettertypes.return_hints(b.Disk) == {"size": str} == SDK_OWN(b.Disk)
    finally:
        sys.modules.pop("gpufleet_test_sdk_a", None)
        sys.modules.pop("gpufleet_test_sdk_b", None)


def test_a_module_made_again_under_its_name_is_another_scope() -> None:
    """A module replaced in ``sys.modules`` by one of the same name (a test's fake SDK made
    again, a module reloaded): its classes' ``'Disk'`` is its own, not the first one's."""
    try:
        first = _sdk_module("gpufleet_test_sdk_again", "int")
        got_first = gettertypes.return_hints(first.Machine)
        second = _sdk_module("gpufleet_test_sdk_again", "str")
        got_second = gettertypes.return_hints(second.Machine)
        assert got_first["disk"] == pulumi.Output[first.Disk | None]
        assert got_second["disk"] == pulumi.Output[second.Disk | None] != got_first["disk"]
        assert got_second == SDK_OWN(second.Machine)
    finally:
        sys.modules.pop("gpufleet_test_sdk_again", None)


def test_the_sdks_function_is_back_after_a_failed_run() -> None:
    original = sdk_types._raw_return_hints
    seen: list[Any] = []

    def failing() -> None:
        seen.append(sdk_types._raw_return_hints)
        raise RuntimeError("boom")

    with pytest.raises(Exception, match="boom"):
        harness.run_program(failing, {}, harness.StrictMocks({}))
    assert seen == [gettertypes.return_hints]
    assert sdk_types._raw_return_hints is original
