"""`gpufleet topology`: AWS through botocore's Stubber (the EC2 model checks each request and
answer), GCP as the documented instances.get body, Azure's reason; the verdict, its exit
codes and the hostile answers (a node missing, paged answers, throttling, no support); the
acceptance pairs ring in topology order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from botocore.stub import Stubber
from click.testing import CliRunner
from exportutil import export, write_export

from gpufleet.backends.aws import live as aws_live
from gpufleet.backends.gcp import live as gcp_live
from gpufleet.cli import cli, main
from gpufleet.evidence import crossing
from gpufleet.live.topology import FleetNodes, FleetTopology, Position

from planutil import TEST_KEY, write

P5 = ("type: fleet\nname: p5\nnodes: 4\nplacement: cluster\nbackends: [aws]\n"
      "regions: [us-east-1]\nresources:\n  gpu: H100:8\n")
A4 = ("type: fleet\nname: a4\nnodes: 2\nplacement: cluster\nbackends: [gcp]\n"
      "availability_zones: [us-west2-c]\nspot_policy: auto\nresources:\n  gpu: B200:8\n")
ND = ("type: fleet\nname: nd\nnodes: 2\nbackends: [azure]\nregions: [eastus]\n"
      "resources:\n  gpu: H100:8\n")
BACKENDS = f"""backends:
  - type: aws
    ssh_cidrs: [203.0.113.0/24]
  - type: gcp
    project_id: p1
    ssh_cidrs: [203.0.113.0/24]
  - type: azure
    subscription_id: 11111111-2222-3333-4444-555555555555
    tenant_id: 00000000-0000-0000-0000-000000000000
    ssh_cidrs: [203.0.113.0/24]
access:
  ssh_public_key: {TEST_KEY}
fleets:
  p5: {{max_spread: subblock}}
  a4: {{max_spread: subblock}}
"""


def stack(tmp: Path, **fleets: str) -> tuple[str, dict[str, Any]]:
    """A stack folder with its config, lock and state export; (state file, state)."""
    files = [write(tmp, "backends.yml", BACKENDS)]
    files += [write(tmp, f"{name}.yml", text) for name, text in fleets.items()]
    assert main(["lock", *files]) == 0
    (tmp / "Pulumi.dev.yaml").write_text(
        "config:\n  gpufleet:files: " + json.dumps([Path(f).name for f in files]) + "\n")
    state = export(files)
    return write_export(tmp / "state.json", state), state


def node_ids(state: dict[str, Any], typ: str) -> list[str]:
    return [r["id"] for r in state["deployment"]["resources"] if r["type"] == typ
            and "-node-" in r["urn"]]


def run(tmp: Path, state_file: str, *more: str) -> Any:
    return CliRunner().invoke(cli, ["topology", "--stack", "dev", "--cwd", str(tmp),
                                    "--state", state_file, *more])


@pytest.fixture
def ec2(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client("ec2", region_name="us-east-1")
    stub = Stubber(client)
    sleeps: list[float] = []
    monkeypatch.setattr(aws_live, "topology_reader",
                        lambda: aws_live.AwsTopology(lambda s, r: client, sleeps.append))
    with stub:
        yield stub
    stub.assert_no_pending_responses()


def answer(ids: list[str], layer3: list[str], token: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"Instances": [
        {"InstanceId": i, "InstanceType": "p5.48xlarge", "AvailabilityZone": "us-east-1a",
         "ZoneId": "use1-az1", "NetworkNodes": ["nn-spine-1", "nn-block-1", l3]}
        for i, l3 in zip(ids, layer3, strict=True)]}
    if token:
        out["NextToken"] = token
    return out


def test_four_aws_nodes_under_one_layer3_node_are_within(tmp_path: Path, ec2: Stubber) -> None:
    state_file, state = stack(tmp_path, p5=P5)
    ids = sorted(node_ids(state, "aws:ec2/instance:Instance"))
    assert len(ids) == 4
    ec2.add_response("describe_instance_topology", answer(ids, ["nn-3a"] * 4),
                     {"InstanceIds": ids})
    r = run(tmp_path, state_file)
    assert r.exit_code == 0, r.output
    assert "ok   fleet p5 (aws p5.48xlarge, 4 node(s)): within max_spread subblock" in r.output
    assert "spread: 1 spine(s), 1 block(s), 1 subblock(s)" in r.output


def test_one_aws_node_under_another_layer3_node_exits_1_naming_it(
        tmp_path: Path, ec2: Stubber) -> None:
    state_file, state = stack(tmp_path, p5=P5)
    ids = sorted(node_ids(state, "aws:ec2/instance:Instance"))
    # a paged answer: two pages, the last node under another layer-3 node
    ec2.add_response("describe_instance_topology",
                     answer(ids[:2], ["nn-3a", "nn-3a"], token="t1"), {"InstanceIds": ids})
    ec2.add_response("describe_instance_topology", answer(ids[2:], ["nn-3a", "nn-3b"]),
                     {"InstanceIds": ids, "NextToken": "t1"})
    r = run(tmp_path, state_file, "--format", "json")
    assert r.exit_code == 1, r.output
    doc = json.loads(r.output)
    (fleet,) = doc["fleets"]
    assert fleet["verdict"] == "beyond" and fleet["spread"]["subblock"] == 2
    odd = next(n for n in fleet["nodes"] if n["layers"]["subblock"] == "nn-3b")
    assert odd["node"] in fleet["reasons"][0] and "nn-3b" in fleet["reasons"][0]
    assert all(n["layers"]["spine"] == "nn-spine-1" for n in fleet["nodes"])
    # each node's private address from the stack's outputs: what `acceptance --topology` reads
    assert all(n["address"] and n["address"] != "None" for n in fleet["nodes"])
    assert sorted(fleet["order"]) == sorted(n["node"] for n in fleet["nodes"])


def test_a_node_missing_from_the_answer_is_no_verdict(tmp_path: Path, ec2: Stubber) -> None:
    state_file, state = stack(tmp_path, p5=P5)
    ids = sorted(node_ids(state, "aws:ec2/instance:Instance"))
    ec2.add_response("describe_instance_topology", answer(ids[:3], ["nn-3a"] * 3),
                     {"InstanceIds": ids})
    r = run(tmp_path, state_file)
    assert r.exit_code == 2 and "leaves out p5-node-" in r.output, r.output


def test_throttling_is_retried_then_reported(tmp_path: Path, ec2: Stubber) -> None:
    state_file, state = stack(tmp_path, p5=P5)
    ids = sorted(node_ids(state, "aws:ec2/instance:Instance"))
    ec2.add_client_error("describe_instance_topology", "RequestLimitExceeded")
    ec2.add_response("describe_instance_topology", answer(ids, ["nn-3a"] * 4),
                     {"InstanceIds": ids})
    assert run(tmp_path, state_file).exit_code == 0
    for _ in range(aws_live.TOPOLOGY_TRIES):
        ec2.add_client_error("describe_instance_topology", "RequestLimitExceeded")
    r = run(tmp_path, state_file)
    assert r.exit_code == 2 and "RequestLimitExceeded" in r.output
    ec2.add_client_error("describe_instance_topology", "UnauthorizedOperation")
    r = run(tmp_path, state_file)
    assert r.exit_code == 2 and "ec2:DescribeInstanceTopology" in r.output


def test_a_type_without_topology_support_exits_2_without_asking(
        tmp_path: Path, ec2: Stubber) -> None:
    state_file, _ = stack(tmp_path, g5=P5.replace("name: p5", "name: g5").replace(
        "H100:8", "A10G:1").replace("placement: cluster\n", ""))
    r = run(tmp_path, state_file)
    assert r.exit_code == 2 and "does not describe the topology of g5" in r.output, r.output


def gcp_body(name: str, subblock: str) -> dict[str, Any]:
    """instances.get as documented: resourceStatus.physicalHostTopology."""
    return {"name": name, "status": "RUNNING", "resourceStatus": {"physicalHostTopology": {
        "cluster": "cl-1", "block": "bk-7", "subblock": subblock, "host": f"h-{name}"}}}


def test_gcp_two_subblocks_for_a_fleet_allowed_one_exit_1(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state_file, state = stack(tmp_path, a4=A4)
    ids = node_ids(state, "gcp:compute/instance:Instance")
    answers = {f"{gcp_live.API}/{i.lstrip('/')}": (200, gcp_body(i.rsplit('/', 1)[-1], sb))
               for i, sb in zip(sorted(ids), ["sb-1", "sb-2"], strict=True)}
    monkeypatch.setattr(gcp_live, "topology_reader",
                        lambda: gcp_live.GcpTopology(lambda url: answers[url]))
    r = run(tmp_path, state_file)
    assert r.exit_code == 1, r.output
    assert "FAIL fleet a4" in r.output and "beyond max_spread subblock" in r.output
    assert "subblock cl-1/bk-7/sb-2: a4-node-1" in r.output
    # a VM outside a dense deployment: no physicalHostTopology, so no verdict
    for url in answers:
        answers[url] = (200, {"name": "x", "status": "RUNNING", "resourceStatus": {}})
    r = run(tmp_path, state_file)
    assert r.exit_code == 2 and "dense deployments" in r.output


def test_azure_exits_2_with_the_reason(tmp_path: Path) -> None:
    state_file, _ = stack(tmp_path, nd=ND)
    r = run(tmp_path, state_file)
    assert r.exit_code == 2 and "Azure exposes no network topology" in r.output, r.output


def _fleet(spread: str, *chains: tuple[str, ...]) -> FleetTopology:
    nodes = FleetNodes("f", "aws", "r", None, "p5.48xlarge", None,
                       {f"f-node-{i}": f"i-{i}" for i in range(len(chains))}, {}, spread)
    return FleetTopology(nodes, [Position(f"f-node-{i}", f"i-{i}", c)
                                 for i, c in enumerate(chains)])


def test_the_verdict_at_each_layer_and_the_layers_the_cloud_does_not_give() -> None:
    a, b = ("s1", "b1", "sb1"), ("s1", "b1", "sb2")
    assert _fleet("block", a, b).judge()[0] == "within"
    assert _fleet("subblock", a, b).judge()[0] == "beyond"
    assert _fleet("any", a, ("s9", "b9", "sb9")).judge()[0] == "within"
    verdict, why = _fleet("host", a, a).judge()  # AWS gives no host for p5
    assert verdict == "unknown" and "no `host` layer" in why[0]
    assert _fleet("subblock", a, b).order() == ["f-node-0", "f-node-1"]
    assert _fleet("any", b, a).order() == ["f-node-1", "f-node-0"]
    assert crossing(a, b) == "it crosses the subblock layer (sb1 / sb2)"
    assert crossing(a, ("s2", "b1", "sb1")).startswith("it crosses the spine layer")
    assert crossing(a, a) == "both nodes sit under the same network nodes"


def test_max_spread_is_checked_by_the_schema(tmp_path: Path) -> None:
    bad = BACKENDS.replace("max_spread: subblock}", "max_spread: rack}", 1)
    r = CliRunner().invoke(cli, ["validate", write(tmp_path, "backends.yml", bad)])
    assert r.exit_code == 1 and "rack" in r.output


def test_the_pairs_ring_follows_the_topology(tmp_path: Path) -> None:
    """Neighbours in the ring are neighbours in the network: the task reorders the nodes'
    addresses to the topology's order before it pairs them."""
    files = [write(tmp_path, "backends.yml", BACKENDS), write(tmp_path, "p5.yml", P5)]
    topo = {"fleets": [{"fleet": "p5", "nodes": [
        {"node": f"p5-node-{i}", "address": f"10.0.0.{i + 10}",
         "layers": {"spine": "s", "block": "b", "subblock": sb}}
        for i, sb in enumerate(["x", "y", "x", "y"])]}]}
    path = tmp_path / "topo.json"
    path.write_text(json.dumps(topo))
    out = tmp_path / "tasks"
    assert main(["acceptance", "p5", *files, "--out", str(out), "--topology", str(path)]) == 0
    pairs = yaml.safe_load((out / "p5-pairs.dstack.yml").read_text())
    script = pairs["commands"][-1]
    assert "order=(10.0.0.10 10.0.0.12 10.0.0.11 10.0.0.13)" in script
    nccl = yaml.safe_load((out / "p5-nccl.dstack.yml").read_text())
    assert any("order=(10.0.0.10 10.0.0.12 10.0.0.11 10.0.0.13)" in c
               for c in nccl["commands"])


def test_the_reordering_runs_in_bash(tmp_path: Path) -> None:
    """The tasks' own commands, with stand-ins for mpirun: the hostfile and the ring come
    out in topology order, addresses the document lacks after them."""
    import subprocess

    from gpufleet.evidence import in_topology_order

    order = ["10.0.0.12", "10.0.0.10"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mpirun").write_text(
        '#!/bin/bash\nwhile [ $# -gt 0 ]; do case "$1" in --hostfile) cat "$2"; shift;; '
        '-H) echo "pair $2";; esac; shift; done\n')
    (bin_dir / "mpirun").chmod(0o755)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("10.0.0.10 slots=8\n10.0.0.11 slots=8\n10.0.0.12 slots=8\n")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "DSTACK_NODE_RANK": "0",
           "DSTACK_MPI_HOSTFILE": str(hostfile), "DSTACK_GPUS_NUM": "24",
           "DSTACK_GPUS_PER_NODE": "8", "DSTACK_NODES_IPS": "10.0.0.10\n10.0.0.11\n10.0.0.12"}
    nccl = in_topology_order({"commands": [
        'if [ "$DSTACK_NODE_RANK" -eq 0 ]; then\n  mpirun --allow-run-as-root --hostfile '
        '"$DSTACK_MPI_HOSTFILE" -n 24 x\nelse\n  sleep infinity\nfi']}, order)
    out = subprocess.run(["bash", "-c", nccl["commands"][-1]], env=env, capture_output=True,
                         text=True, timeout=30)
    assert out.stdout.split("\n")[:3] == ["10.0.0.12 slots=8", "10.0.0.10 slots=8",
                                          "10.0.0.11 slots=8"], out.stderr
    from gpufleet.evidence.pairs import PREFIX  # the ring's first pair is 12-10

    ring = in_topology_order({"commands": [
        'if [ "$DSTACK_NODE_RANK" -eq 0 ]; then\n  mapfile -t ips <<< "$DSTACK_NODES_IPS"; '
        'n=${#ips[@]}\n  mpirun -H "${ips[0]}:8,${ips[1]}:8" x\n'
        f'  echo "{PREFIX} n=$n"\nelse\n  sleep infinity\nfi']}, order)
    out = subprocess.run(["bash", "-c", ring["commands"][-1]], env=env, capture_output=True,
                         text=True, timeout=30)
    assert "pair 10.0.0.12:8,10.0.0.10:8" in out.stdout and "n=3" in out.stdout, out.stderr


class Readers:
    """A topology reader per backend whose answers change after the first read (the
    replaced node comes back under another layer-3 network node)."""

    def __init__(self, ids: list[str], after: str) -> None:
        self.ids, self.after, self.reads = ids, after, 0

    def __call__(self, backend: str) -> Any:
        return self

    def positions(self, fleet: FleetNodes) -> dict[str, tuple[str, ...]]:
        self.reads += 1
        moved = fleet.ids["p5-node-1"]
        return {i: ("nn-spine-1", "nn-block-1",
                    self.after if i == moved and self.reads > 1 else "nn-3a")
                for i in self.ids}


def test_replace_shows_the_old_position_and_fails_when_the_node_lands_off_the_spine(
        tmp_path: Path) -> None:
    from test_replace import ReplaceStack, runner

    from gpufleet.input.validate import load_lock
    from gpufleet.live import ReplaceError, replace_nodes

    files = [write(tmp_path, "backends.yml", BACKENDS), write(tmp_path, "p5.yml", P5)]
    assert main(["lock", *files]) == 0
    lock, _ = load_lock(str(tmp_path / "gpufleet.lock"))
    stack = ReplaceStack(files, export(files, lock=lock))
    ids = node_ids(stack.deployed, "aws:ec2/instance:Instance")
    lines: list[str] = []
    replace_nodes(runner(stack, lines), str(tmp_path), "p5", ["1"], lines.append,
                  lambda _p: True, dry_run=True, topology=Readers(ids, "nn-3b"))
    assert "  position of p5-node-1 now: nn-spine-1/nn-block-1/nn-3a" in lines
    assert stack.updated == []
    with pytest.raises(ReplaceError) as err:
        replace_nodes(runner(stack, lines), str(tmp_path), "p5", ["1"], lines.append,
                      lambda _p: True, topology=Readers(ids, "nn-3b"))
    assert "beyond max_spread subblock" in str(err.value)
    assert "p5-node-1: was nn-spine-1/nn-block-1/nn-3a, now nn-spine-1/nn-block-1/nn-3b" in \
        str(err.value)
    # landing under the same layer-3 node passes
    shown = replace_nodes(runner(stack, lines), str(tmp_path), "p5", ["1"], lines.append,
                          lambda _p: True, topology=Readers(ids, "nn-3a"))
    assert shown.nodes == ("p5-node-1",)
    assert "  position of p5-node-1 after: nn-spine-1/nn-block-1/nn-3a" in lines


def test_a_topology_document_without_the_fleet_or_with_a_bad_address_is_refused(
        tmp_path: Path) -> None:
    files = [write(tmp_path, "backends.yml", BACKENDS), write(tmp_path, "p5.yml", P5)]
    path = tmp_path / "topo.json"
    for doc, says in (({"fleets": [{"fleet": "other", "nodes": []}]}, "no node of fleet p5"),
                      ({"fleet": "p5", "nodes": [{"node": "n", "address": "$(reboot)",
                                                  "layers": {"spine": "s"}}]},
                       "is not an IP address"),
                      ([1, 2], "no node of fleet p5")):
        path.write_text(json.dumps(doc))
        r = CliRunner().invoke(cli, ["acceptance", "p5", *files, "--out", str(tmp_path / "o"),
                                     "--topology", str(path)])
        assert r.exit_code == 2 and says in r.output, r.output
        assert not (tmp_path / "o" / "p5-nccl.dstack.yml").exists()


def test_topology_and_replace_verdicts_go_into_the_ledger(tmp_path: Path, ec2: Stubber) -> None:
    from gpufleet.cli.live import _replace_recorder
    from gpufleet.evidence import verify

    state_file, state = stack(tmp_path, p5=P5)
    ids = sorted(node_ids(state, "aws:ec2/instance:Instance"))
    ec2.add_response("describe_instance_topology", answer(ids, ["nn-3a"] * 3 + ["nn-3b"]),
                     {"InstanceIds": ids})
    ledger = str(tmp_path / "ledger.jsonl")
    assert run(tmp_path, state_file, "--record", ledger).exit_code == 1
    _replace_recorder(ledger, "p5", ["p5-node-3"])(0, "replaced", True)
    entries = [json.loads(x) for x in Path(ledger).read_text().splitlines()]
    assert [(e["kind"], e["verdict"], e["fleet"]) for e in entries] == [
        ("topology", "fail", "p5"), ("replace", "pass", "p5")]
    assert entries[0]["figures"]["spread"]["subblock"] == 2
    assert entries[1]["figures"]["nodes"] == ["p5-node-3"] and entries[1]["figures"]["hours"] >= 0
    assert verify(ledger)[0] == 0


# --- answers judged, not trusted (issue 52) ------------------------------------------------

def test_a_next_token_that_never_changes_is_refused(tmp_path: Path, ec2: Stubber) -> None:
    state_file, state = stack(tmp_path, p5=P5)
    ids = sorted(node_ids(state, "aws:ec2/instance:Instance"))
    ec2.add_response("describe_instance_topology", answer(ids[:2], ["nn-3a"] * 2, token="t1"),
                     {"InstanceIds": ids})
    ec2.add_response("describe_instance_topology", answer(ids[2:], ["nn-3a"] * 2, token="t1"),
                     {"InstanceIds": ids, "NextToken": "t1"})
    r = run(tmp_path, state_file)
    assert r.exit_code == 2 and "NextToken it had given before" in r.output, r.output


def test_paging_is_bounded(tmp_path: Path, ec2: Stubber, monkeypatch: pytest.MonkeyPatch
                           ) -> None:
    monkeypatch.setattr(aws_live, "MAX_PAGES", 3)
    state_file, state = stack(tmp_path, p5=P5)
    ids = sorted(node_ids(state, "aws:ec2/instance:Instance"))
    for i in range(3):
        ec2.add_response("describe_instance_topology", {"Instances": [], "NextToken": f"t{i}"},
                         {"InstanceIds": ids, **({"NextToken": f"t{i - 1}"} if i else {})})
    r = run(tmp_path, state_file)
    assert r.exit_code == 2 and "paged past 3 pages" in r.output, r.output


@pytest.mark.parametrize("damage, why", [
    (lambda a: a["Instances"][1].update(NetworkNodes=["nn-spine-1", " ", "nn-3a"]),
     "blank or malformed"),
    (lambda a: a["Instances"][1].update(NetworkNodes=["nn-spine-1", "", "nn-3a"]),
     "blank or malformed"),
    (lambda a: a["Instances"].append({**a["Instances"][0], "NetworkNodes": [
        "nn-spine-1", "nn-block-1", "nn-3z"]}), "twice, at two positions"),
])
def test_blank_or_duplicate_aws_answers_name_the_node(
        tmp_path: Path, ec2: Stubber, damage: Any, why: str) -> None:
    state_file, state = stack(tmp_path, p5=P5)
    ids = sorted(node_ids(state, "aws:ec2/instance:Instance"))
    body = answer(ids, ["nn-3a"] * 4)
    damage(body)
    ec2.add_response("describe_instance_topology", body, {"InstanceIds": ids})
    r = run(tmp_path, state_file)
    assert r.exit_code == 2 and why in r.output and "p5-node-" in r.output, r.output


@pytest.mark.parametrize("body", [
    ["not", "an", "object"], "text", {"resourceStatus": []},
    {"resourceStatus": {"physicalHostTopology": "cl-1/bk-7"}},
    {"resourceStatus": {"physicalHostTopology": {"cluster": "cl-1", "block": "",
                                                 "subblock": "sb-1"}}},
    {"resourceStatus": {"physicalHostTopology": {"cluster": "cl-1", "subblock": "sb-1"}}},
    {"resourceStatus": {"physicalHostTopology": {"cluster": 7, "block": "b",
                                                 "subblock": "sb-1"}}},
])
def test_a_gcp_answer_that_is_not_an_instance_names_the_node(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: Any) -> None:
    state_file, state = stack(tmp_path, a4=A4)
    ids = sorted(node_ids(state, "gcp:compute/instance:Instance"))
    answers = {f"{gcp_live.API}/{i.lstrip('/')}": (200, gcp_body(i.rsplit('/', 1)[-1], "sb"))
               for i in ids}
    answers[f"{gcp_live.API}/{ids[1].lstrip('/')}"] = (200, body)
    monkeypatch.setattr(gcp_live, "topology_reader",
                        lambda: gcp_live.GcpTopology(lambda url: answers[url]))
    r = run(tmp_path, state_file)
    assert r.exit_code == 2 and "a4-node-" in r.output, r.output
    assert "no verdict" in r.output


def test_the_deployed_nodes_are_judged_and_differences_from_the_files_named(
        tmp_path: Path, ec2: Stubber) -> None:
    """A node that runs but was removed from the YAML is judged (and named); a node the
    YAML has that does not run is named, not judged."""
    state_file, state = stack(tmp_path, p5=P5)
    ids = sorted(node_ids(state, "aws:ec2/instance:Instance"))
    (tmp_path / "p5.yml").write_text(P5.replace("nodes: 4", "nodes: 3"))
    ec2.add_response("describe_instance_topology", answer(ids, ["nn-3a"] * 3 + ["nn-3b"]),
                     {"InstanceIds": ids})
    r = run(tmp_path, state_file, "--format", "json")
    doc = json.loads(r.output)
    (fleet,) = doc["fleets"]
    assert r.exit_code == 1 and len(fleet["nodes"]) == 4
    assert fleet["not_in_files"] == ["p5-node-3"] and fleet["not_deployed"] == []
    assert any("running but not in the fleet's files" in x and "p5-node-3" in x
               for x in fleet["reasons"])
    (tmp_path / "p5.yml").write_text(P5.replace("nodes: 4", "nodes: 6"))
    ec2.add_response("describe_instance_topology", answer(ids, ["nn-3a"] * 4),
                     {"InstanceIds": ids})
    r = run(tmp_path, state_file, "--format", "json")
    (fleet,) = json.loads(r.output)["fleets"]
    assert r.exit_code == 0 and fleet["not_deployed"] == ["p5-node-4", "p5-node-5"]
