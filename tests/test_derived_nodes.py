"""Big fleets at near-constant cost (issue 44): offline runs register each fleet's first nodes
and derive the rest. The proof: for every cloud and fleet kind, the derived run's records
(every registration, its inputs, ids, outputs and dependencies, and the stack outputs) are
byte-identical to a run that registers every node - for plans and for seeded diffs, for
node counts up to 64."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from exportutil import export
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gpufleet.compile.compiler import compile_inputs
from gpufleet.compile.runs import RunInputs
from gpufleet.components.run import diff as run_diff
from gpufleet.components.run import harness
from gpufleet.components.run.plan import run_offline
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog
from gpufleet.review import parse_export

from planutil import TEST_KEY, write

pytestmark = pytest.mark.slow  # every case runs the stack program twice

KEY = f"access:\n  ssh_public_key: {TEST_KEY}\n"
AWS = "  - type: aws\n    ssh_cidrs: [203.0.113.0/24]\n"
GCP = "  - type: gcp\n    project_id: p1\n    ssh_cidrs: [203.0.113.0/24]\n"
AZURE = ("  - type: azure\n    subscription_id: s1\n    tenant_id: t1\n"
         "    ssh_cidrs: [203.0.113.0/24]\n")
# (fleet body after `nodes:`, backends entries, more of the backends file)
KINDS: dict[str, tuple[str, str, str]] = {
    "aws-cluster": ("placement: cluster\nbackends: [aws]\nregions: [us-east-1]\n"
                    "resources:\n  gpu: H100:8\n", AWS, ""),
    "aws-public-efa": ("placement: cluster\nbackends: [aws]\nregions: [us-east-1]\n"
                       "resources:\n  gpu: H100:8\n",
                       AWS + "    public_ips: true\n", ""),
    "aws-spot": ("backends: [aws]\nregions: [us-east-1]\nspot_policy: spot\n"
                 "resources:\n  gpu: L4\n", AWS, ""),
    "aws-reservation": ("placement: cluster\nbackends: [aws]\nregions: [us-east-1]\n"
                        "reservation: cr-0123456789abcdef0\nresources:\n  gpu: H100:8\n",
                        AWS, ""),
    "aws-filesystem": ("placement: cluster\nbackends: [aws]\nregions: [us-east-1]\n"
                       "resources:\n  gpu: H100:8\n", AWS,
                       "filesystems:\n  - {name: data, backend: aws, region: us-east-1, "
                       "kind: lustre, capacity_gib: 1200, mount: /mnt/data, fleets: [f1]}\n"),
    "gcp-roce": ("placement: cluster\nbackends: [gcp]\navailability_zones: [us-west2-c]\n"
                 "spot_policy: auto\nresources:\n  gpu: B200:8\n", GCP, ""),
    "gcp-public": ("backends: [gcp]\nregions: [us-central1]\nresources:\n  gpu: L4\n",
                   GCP + "    public_ips: true\n", ""),
    "azure-scale-set": ("placement: cluster\nbackends: [azure]\nresources:\n"
                        "  gpu: H100:8\n", AZURE, ""),
    "azure-vms": ("backends: [azure]\nresources:\n  gpu: A100:80GB:8\n", AZURE, ""),
}


def _seeded(paths: list[str], compiled: Any, state: Any, sample: bool = True) -> Any:
    """The diff's run of the program over ``state`` (as ``gpufleet.review.pipeline`` runs it)."""
    seed = {r.urn: (r.id, dict(r.outputs)) for r in state.resources
            if r.type != "pulumi:pulumi:Stack"}
    return run_diff.run_seeded(RunInputs(tuple(paths), stack=state.stack or "dev"), compiled,
                               seed, state.project or "gpufleet", sample=sample)


def _files(tmp: Path, kind: str, nodes: int) -> list[str]:
    body, backends, more = KINDS[kind]
    fleet = write(tmp, "f1.yml", f"type: fleet\nname: f1\nnodes: {nodes}\n{body}")
    return [fleet, write(tmp, "b.yml", f"{KEY}backends:\n{backends}{more}")]


def _records(run: Any) -> str:
    return json.dumps({"resources": [r.to_json() for r in run.sorted()],
                       "exports": run.exports}, sort_keys=True)


def _count_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each run of the program from now on, as the number of resources it registered."""
    registered: list[int] = []
    real = harness.run_program

    def counted(*args: Any, **kw: Any) -> Any:
        run = real(*args, **kw)
        registered.append(len(run.registrations))
        return run
    monkeypatch.setattr(harness, "run_program", counted)
    return registered


def _compiled(files: list[str]) -> Any:
    validated = validate_paths(files)
    assert validated.ok, validated.diagnostics
    compiled = compile_inputs(validated.inputs, load_catalog())
    assert compiled.ok, compiled.diagnostics
    return compiled


def _without_outputs(run: Any) -> Any:
    """A run that recorded outputs, as a run that did not would have it: the custom
    resources' outputs left out (a component's, which the engine stores, and the exports
    are kept)."""
    return dataclasses.replace(run, registrations=[
        dataclasses.replace(r, outputs={}) if r.custom else r for r in run.registrations])


@pytest.mark.parametrize("kind", ["aws-public-efa", "gcp-roce", "azure-scale-set"])
def test_a_full_run_without_outputs_is_one_with_them_less_the_custom_outputs(
        tmp_path: Path, kind: str) -> None:
    """What the plan test below compares a derived run without outputs to."""
    files = _files(tmp_path, kind, 3)
    compiled = _compiled(files)
    full = run_offline(RunInputs(tuple(files)), compiled, True, sample=False)
    assert any(r.outputs for r in full.registrations if r.custom)
    assert _records(_without_outputs(full)) == _records(
        run_offline(RunInputs(tuple(files)), compiled, False, sample=False))


@pytest.mark.parametrize("nodes", [1, 2, 3, 5, 17, 64])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_derived_plan_is_byte_identical_to_a_full_one(
        tmp_path: Path, kind: str, nodes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With and without outputs, against the one full run (with them: the test above holds
    the one without them to it)."""
    files = _files(tmp_path, kind, nodes)
    compiled = _compiled(files)
    registered = _count_runs(monkeypatch)
    full = run_offline(RunInputs(tuple(files)), compiled, True, sample=False)
    derived = run_offline(RunInputs(tuple(files)), compiled, False)
    assert _records(derived) == _records(_without_outputs(full))
    assert _records(run_offline(RunInputs(tuple(files)), compiled, True)) == _records(full)
    # each derived plan ran the program once (no fall-back to a full run), registering
    # fewer resources than the full one when there were nodes to derive
    assert len(registered) == 3
    assert (registered[1] < registered[0]) == (nodes > 2 and kind != "azure-scale-set")
    fleet = next(r for r in full.registrations if r.name == "f1" and not r.custom)
    assert fleet is not None and len(full.exports["f1"]["nodes"]) == nodes


@pytest.mark.parametrize(("deployed", "planned"), [(3, 3), (3, 9), (9, 4), (0, 6), (64, 64)])
@pytest.mark.parametrize("kind", ["aws-public-efa", "azure-vms", "gcp-roce",
                                  "azure-scale-set"])
def test_a_derived_diff_is_byte_identical_to_a_full_one(tmp_path: Path, kind: str,
                                                          deployed: int, planned: int) -> None:
    """Seeded from an export of `deployed` nodes (the state's real-looking ids and outputs),
    planning `planned`: the nodes the state holds and the new ones are derived apart."""
    (tmp_path / "old").mkdir()
    deployment = export(_files(tmp_path / "old", kind, deployed)) if deployed else \
        {"version": 3, "deployment": {"resources": []}}
    state = parse_export(json.dumps(deployment))
    new = _files(tmp_path, kind, planned)
    compiled = _compiled(new)
    full = _seeded(new, compiled, state, sample=False)
    derived = _seeded(new, compiled, state)
    assert json.dumps(derived, sort_keys=True) == json.dumps(full, sort_keys=True)


@pytest.mark.parametrize("kind", ["aws-cluster", "gcp-roce", "azure-vms"])
def test_the_program_pulumi_runs_registers_every_node(tmp_path: Path, kind: str) -> None:
    """`pulumi up` and `pulumi preview` run the program outside any offline run: no sample,
    every node registered; an offline run's sample ends with it, even when it fails."""
    from gpufleet.components import program
    from gpufleet.components.run.plan import offline_config
    from gpufleet.components.sampling import is_sampling, registered_nodes, sampling

    files = _files(tmp_path, kind, 9)
    compiled = _compiled(files)
    (plan,) = compiled.plans
    assert registered_nodes(plan) == plan.node_names and not is_sampling()
    from gpufleet.components.run import offline

    mocks = harness.StrictMocks(offline.invokes_for(compiled.dns_zones), offline.outputs)
    run = harness.run_program(lambda: program.main(compiled=compiled),
                              offline_config(RunInputs(tuple(files)), compiled), mocks)
    nodes = {r.name for r in run.registrations if r.name in plan.node_names}
    assert nodes == set(plan.node_names) and len(nodes) == 9
    with pytest.raises(RuntimeError), sampling():
        assert registered_nodes(plan) == plan.node_names[:2]
        raise RuntimeError("an offline run that fails")
    assert not is_sampling() and registered_nodes(plan) == plan.node_names


# --- derived nodes rename only what gpufleet generated (issue 52) --------------------------

SHAPES = ["f1-node-0", "f1-node-1", "f1-node-2", "f1-node-10", "x-f1-node-1-y", "f1-node-2x",
          "f1-node-1-eip", "f1"]


def _tagged(tmp: Path, kind: str, nodes: int, tags: dict[str, str], neighbour: str | None
            ) -> list[str]:
    body, backends, more = KINDS[kind]
    tag_text = "tags:\n" + "".join(f"  {k}: {v}\n" for k, v in tags.items()) if tags else ""
    files = [write(tmp, "f1.yml", f"type: fleet\nname: f1\nnodes: {nodes}\n{body}{tag_text}")]
    if neighbour:
        files.append(write(tmp, "n.yml", f"type: fleet\nname: {neighbour}\nnodes: 3\n{body}"))
    return [*files, write(tmp, "b.yml", f"{KEY}backends:\n{backends}{more}")]


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["aws-cluster", "gcp-roce", "azure-vms"]),
       nodes=st.integers(3, 6),
       tags=st.dictionaries(st.sampled_from(["note", "owner", "ref"]), st.sampled_from(SHAPES),
                            max_size=3),
       stack=st.sampled_from(["dev", "f1-node-1", "f1-node-2", "f1-node-2-eip"]),
       neighbour=st.sampled_from([None, "g-f1-node-1", "f1-node-2x-b", "h"]))
def test_user_strings_stack_and_neighbour_names_are_never_renamed(
        tmp_path_factory: pytest.TempPathFactory, kind: str, nodes: int,
        tags: dict[str, str], stack: str, neighbour: str | None) -> None:
    tmp = tmp_path_factory.mktemp("derive")
    files = _tagged(tmp, kind, nodes, tags, neighbour)
    validated = validate_paths(files)
    assume(validated.ok)
    compiled = compile_inputs(validated.inputs, load_catalog())
    assume(compiled.ok)
    full = run_offline(RunInputs(tuple(files), stack=stack), compiled, True,
                       sample=False)
    derived = run_offline(RunInputs(tuple(files), stack=stack), compiled, True)
    assert _records(derived) == _records(full)
    # and a diff seeded from that stack's own export (what the full run recorded, as
    # `pulumi up` would leave it)
    state = parse_export(json.dumps(harness.deployment_v3(full, stack, "gpufleet")))
    got = _seeded(files, compiled, state)
    want = _seeded(files, compiled, state, sample=False)
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)


@pytest.mark.parametrize("kind", ["aws-cluster", "gcp-roce", "azure-vms"])
def test_a_user_tag_shaped_like_a_node_name_is_derived_not_renamed(
        tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The case the old renamer got wrong - a tag `note: f1-node-1` became f1-node-2, -3 on
    the derived nodes - now derives (no fall-back to a full run) and keeps the tag."""
    files = _tagged(tmp_path, kind, 6, {"note": "f1-node-1"}, None)
    compiled = _compiled(files)
    runs = _count_runs(monkeypatch)
    derived = run_offline(RunInputs(tuple(files), stack="f1-node-1"), compiled, True)
    assert len(runs) == 1  # derived, not run again in full
    nodes = [r for r in derived.registrations if r.custom and "-node-" in r.name
             and r.type.endswith(("instance:Instance", "VirtualMachine"))]
    assert len(nodes) == 6
    assert all("f1-node-1" in json.dumps(r.inputs) for r in nodes)
    assert all(r.urn.startswith("urn:pulumi:f1-node-1::") for r in derived.registrations)


def test_a_missing_output_is_never_borrowed_from_another_node(tmp_path: Path) -> None:
    """Node 4's instance lost its primary interface's id in the state: node 4's address
    association is not pointed at another node's interface (the derived run falls back to
    registering every node, which is the truth)."""
    files = _files(tmp_path, "aws-public-efa", 6)
    deployment = export(files)
    node = next(r for r in deployment["deployment"]["resources"]
                if r["type"] == "aws:ec2/instance:Instance" and r["urn"].endswith("f1-node-4"))
    borrowed = node["outputs"].pop("primaryNetworkInterfaceId")
    state = parse_export(json.dumps(deployment))
    compiled = _compiled(files)
    derived = _seeded(files, compiled, state)
    full = _seeded(files, compiled, state, sample=False)
    assert json.dumps(derived, sort_keys=True) == json.dumps(full, sort_keys=True)
    others = [r["outputs"]["primaryNetworkInterfaceId"]
              for r in deployment["deployment"]["resources"]
              if r["type"] == "aws:ec2/instance:Instance" and "f1-node-" in r["urn"]
              and "primaryNetworkInterfaceId" in r["outputs"]]
    assoc = [c for c in derived if "f1-node-4" in json.dumps(c.get("urn", ""))
             and "eipAssociation" in json.dumps(c)]
    assert borrowed not in others and not any(o in json.dumps(assoc) for o in others)
