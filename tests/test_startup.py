"""What a plan imports and what the offline run leaves out: provider services loaded class by
class (components/sdk.py), only the clouds a plan contains, the SDK's API-version type aliases
dropped from offline runs only, and the collector's thresholds restored after a run.

Import checks run in a fresh interpreter: this process has loaded whole SDKs already."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pulumi
import pytest

from gpufleet.components import sdk

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

PROBE = textwrap.dedent("""
    import json, sys
    from gpufleet.components import sdk
    from gpufleet.cli.runs import build_report
    from gpufleet.input import validate_paths
    from gpufleet.offers import load_catalog
    paths = sys.argv[1:]
    report, diags = build_report(validate_paths(paths), load_catalog(), paths, "dev", None,
                                 None)
    assert report is not None, diags
    deferred = {m: type(sys.modules[m]).__name__ for m in sdk.DEFERRED}
    from pulumi import automation  # read now: loaded whole
    read = [automation.LocalWorkspace.__name__, type(automation).__name__]
    print(json.dumps({"full_loads": sdk.FULL_LOADS, "resources": len(report.resources),
                      "modules": sorted(m for m in sys.modules if m.startswith("pulumi_")),
                      "deferred": deferred, "read": read}))
""")


def probe(*paths: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", PROBE, *paths], capture_output=True,
                          text=True, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return out


def test_the_examples_plan_without_loading_a_whole_provider_service() -> None:
    got = probe(str(EXAMPLES))
    assert got["full_loads"] == []
    modules = set(got["modules"])
    # what the program uses is loaded ...
    assert {"pulumi_gcp.compute.instance", "pulumi_aws.ec2.instance",
            "pulumi_azure_native.compute.virtual_machine_scale_set"} <= modules
    # ... and what it does not use is not: the services' other resource modules
    assert "pulumi_gcp.compute.vpn_tunnel" not in modules
    assert "pulumi_aws.ec2.transit_gateway" not in modules
    assert "pulumi_azure_native.network.express_route_circuit" not in modules
    compute = [m for m in modules if m.startswith("pulumi_gcp.compute.")]
    assert 5 < len(compute) < 40  # of 290 the service's __init__ would import
    # the Automation API the SDK's package imports is not run by the plan, and whole when read
    assert got["deferred"] == {"pulumi.automation": "_LazyModule"}
    assert got["read"] == ["LocalWorkspace", "module"]


def test_a_plan_imports_the_sdks_of_its_own_clouds_only(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.dstack.yml"
    fleet.write_text("type: fleet\nname: solo\nnodes: 2\nbackends: [aws]\n"
                     "regions: [us-east-1]\nresources:\n  gpu: L4\n")
    got = probe(str(fleet))
    sdks = {m.split(".")[0] for m in got["modules"]} - {"pulumi_policy"}
    assert sdks == {"pulumi_aws"}
    assert got["full_loads"] == []


def test_each_name_is_found_in_its_own_module_and_an_unknown_one_loads_the_service() -> None:
    script = textwrap.dedent("""
        import json, sys
        from gpufleet.components import sdk
        sdk.by_class("pulumi_gcp", ["compute"])
        import pulumi_gcp as gcp
        Instance = gcp.compute.Instance            # instance.py
        Args = gcp.compute.InstanceSchedulingArgs  # _inputs
        Tunnel = gcp.compute.VPNTunnel             # vpn_tunnel.py
        from pulumi_gcp.compute import outputs     # a module by name
        get = gcp.compute.get_network_output       # get_network.py
        before = sorted(m for m in sys.modules if m.startswith("pulumi_gcp.compute."))
        try:
            gcp.compute.NoSuchClass
            missing = None
        except AttributeError as e:
            missing = str(e)
        after = len([m for m in sys.modules if m.startswith("pulumi_gcp.compute.")])
        from pulumi_gcp.compute.instance import Instance as Direct
        print(json.dumps({"same": Instance is Direct and Instance is gcp.compute.Instance,
                          "args": Args.__module__, "tunnel": Tunnel.__module__,
                          "outputs": outputs.__name__, "get": get.__module__,
                          "before": before, "loads": sdk.FULL_LOADS, "missing": missing,
                          "after": after, "plain": type(gcp.compute).__name__}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["same"] is True
    assert got["args"] == "pulumi_gcp.compute._inputs"
    assert got["tunnel"] == "pulumi_gcp.compute.vpn_tunnel"
    assert got["outputs"] == "pulumi_gcp.compute.outputs"
    assert got["get"] == "pulumi_gcp.compute.get_network"
    assert got["before"] == [f"pulumi_gcp.compute.{m}" for m in (
        "_inputs", "get_network", "instance", "outputs", "vpn_tunnel")]
    # a name no module holds: the service's own __init__ runs (counted), then the plain
    # AttributeError any module gives, and the service is a plain module from then on
    assert got["loads"] == [["pulumi_gcp.compute", "NoSuchClass"]]
    assert "has no attribute 'NoSuchClass'" in got["missing"]
    assert got["after"] > 250
    assert got["plain"] == "module"


@pytest.mark.parametrize("backend", ["aws", "gcp", "azure"])
def test_every_name_a_used_service_exports_is_found_without_its_init(backend: str) -> None:
    """Read, not imported: each service's ``__init__`` (``from .x import *``) and each
    module's ``__all__``; the guesses must name the module for every one. An SDK upgrade
    that renames modules fails here instead of loading whole services unnoticed."""
    import importlib
    import importlib.util
    import re

    module = importlib.import_module(f"gpufleet.components.{backend}")
    top = importlib.util.find_spec(module.SDK)
    assert top is not None and top.submodule_search_locations is not None
    root = Path(next(iter(top.submodule_search_locations)))
    checked = 0
    for service in module.SERVICES:
        folder = root / service
        names = {p.stem for p in folder.glob("*.py")}
        for src in re.findall(r"^from \.(\w+) import \*$",
                              (folder / "__init__.py").read_text(), re.M):
            declared = re.search(r"^__all__ = \[(.*?)\]",
                                 (folder / f"{src}.py").read_text(), re.S | re.M)
            assert declared is not None, f"{service}/{src}.py has no __all__"
            for name in re.findall(r"'(\w+)'", declared.group(1)):
                guesses = [m for m in sdk._modules_for(name) if m in names]
                assert src in guesses, (service, name, src, guesses)
                checked += 1
    assert checked > 500


def test_a_service_already_imported_whole_is_left_alone() -> None:
    script = textwrap.dedent("""
        import json
        import pulumi_gcp as gcp
        whole = gcp.compute.Instance  # the service's own __init__ runs here
        from gpufleet.components import sdk
        sdk.by_class("pulumi_gcp", ["compute"])
        import sys
        service = sys.modules["pulumi_gcp.compute"]
        print(json.dumps({"same": service.Instance is whole and gcp.compute is service,
                          "kind": type(service).__name__}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"same": True, "kind": "module"}


def test_an_unknown_service_or_sdk_is_an_import_error() -> None:
    with pytest.raises(ImportError, match=r"no service 'pulumi_gcp\.no_such_service'"):
        sdk.by_class("pulumi_gcp", ["no_such_service"])
    with pytest.raises(ImportError, match="no provider SDK 'pulumi_nowhere'"):
        sdk.by_class("pulumi_nowhere", ["x"])


def test_offline_runs_drop_only_the_sdks_type_aliases() -> None:
    from pulumi_azure_native import network

    from gpufleet.components.run import harness

    def program() -> None:
        old = pulumi.Alias(name="old-vnet")
        network.VirtualNetwork("vnet", resource_group_name="rg", location="eastus",
                               opts=pulumi.ResourceOptions(aliases=[old]))

    run = harness.run_program(program, {}, harness.StrictMocks({}))
    (vnet,) = [r for r in run.registrations if r.name == "vnet"]
    # the SDK adds dozens of `azure-native:network/vYYYYMMDD:VirtualNetwork` aliases; none
    # reaches the mock engine, gpufleet's own (a rename) does
    assert vnet.aliases == [{"name": "old-vnet"}]
    seen: list[Any] = []

    def transformation(args: pulumi.ResourceTransformationArgs) -> None:
        seen.extend(args.opts.aliases or [])

    def sdk_program() -> None:
        network.VirtualNetwork("vnet2", resource_group_name="rg", location="eastus",
                               opts=pulumi.ResourceOptions(transformations=[transformation]))
    harness.run_program(sdk_program, {}, harness.StrictMocks({}))
    types = [a.type_ for a in seen if isinstance(a, pulumi.Alias)]
    assert len(types) > 20 and all(t.startswith("azure-native:network/v") for t in types)


def test_offline_runs_skip_only_the_sdks_stack_traces(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's call-stack capture is off while a program runs under the mock monitor (which
    never reads it), back afterwards - after a failed program too - and what the program
    registers is the same as with it."""
    import pulumi.runtime.resource as sdk_resource
    import pulumi_aws as aws

    from gpufleet.components.run import harness

    original = sdk_resource._get_stack_trace
    seen: list[Any] = []

    def program() -> None:
        seen.append(sdk_resource._get_stack_trace)
        parent = pulumi.ComponentResource("gpufleet:test:Group", "g")
        vpc = aws.ec2.Vpc("vpc", cidr_block="10.0.0.0/16",
                          opts=pulumi.ResourceOptions(parent=parent))
        aws.ec2.Subnet("sub", vpc_id=vpc.id, cidr_block="10.0.1.0/24",
                       opts=pulumi.ResourceOptions(parent=parent))

    fast = harness.run_program(program, {}, harness.StrictMocks({}))
    assert seen == [harness._no_stack_trace]
    assert sdk_resource._get_stack_trace is original
    with pytest.raises(Exception, match="boom"):
        harness.run_program(lambda: (_ for _ in ()).throw(RuntimeError("boom")), {},
                            harness.StrictMocks({}))
    assert sdk_resource._get_stack_trace is original
    monkeypatch.setattr(harness, "_no_stack_trace", original)  # the SDK's own capture
    full = harness.run_program(program, {}, harness.StrictMocks({}))
    assert seen[-1] is original
    assert len(fast.registrations) == 3
    assert [r.to_json() for r in fast.sorted()] == [r.to_json() for r in full.sorted()]


def test_the_collectors_thresholds_are_restored_after_a_run() -> None:
    import gc

    from gpufleet.components.run import harness

    before = gc.get_threshold()

    def failing() -> None:
        raise RuntimeError("boom")

    with pytest.raises(Exception, match="boom"):
        harness.run_program(failing, {}, harness.StrictMocks({}))
    assert gc.get_threshold() == before
    harness.run_program(lambda: None, {}, harness.StrictMocks({}))
    assert gc.get_threshold() == before


def test_a_stream_that_fails_part_way_leaves_the_target_as_it_was(tmp_path: Path) -> None:
    from gpufleet.fileio import write_chunks

    target = tmp_path / "plan.json"
    target.write_text("the plan before\n")

    def pieces() -> Any:
        yield "{\n"
        raise RuntimeError("the renderer broke")

    with pytest.raises(RuntimeError, match="renderer broke"):
        write_chunks(str(target), pieces())
    assert target.read_text() == "the plan before\n"
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]  # no temporary file left
    write_chunks(str(target), iter(["{", "}"]))
    assert target.read_text() == "{}\n"


@pytest.mark.parametrize("fails", [False, True])
@pytest.mark.parametrize("runs_before", [0, 3])
def test_a_run_cancels_its_own_pending_tasks_and_no_other_loops(
        fails: bool, runs_before: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task the program leaves waiting is cancelled when the run ends (failed or not),
    found among all tasks in a process's first run, from the run's own record of its tasks
    in later ones; a task of another loop is left alone."""
    import asyncio

    from gpufleet.components.run import harness, runloop

    monkeypatch.setattr(runloop, "_RUNS", [runs_before])

    other = asyncio.new_event_loop()
    theirs = other.create_task(asyncio.sleep(3600))
    left: list[asyncio.Future[None]] = []

    def program() -> None:
        left.append(asyncio.ensure_future(asyncio.Event().wait()))  # type: ignore[arg-type]
        if fails:
            raise RuntimeError("boom")

    try:
        if fails:
            with pytest.raises(Exception, match="boom"):
                harness.run_program(program, {}, harness.StrictMocks({}))
        else:
            harness.run_program(program, {}, harness.StrictMocks({}))
        assert len(left) == 1 and left[0].cancelled()
        assert not theirs.done()
    finally:
        theirs.cancel()
        other.run_until_complete(asyncio.gather(theirs, return_exceptions=True))
        other.close()
