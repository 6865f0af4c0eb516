"""`gpufleet health` against a real dstack 0.22.5 server (tests/dstackserver.py) whose
database holds fleets, instances and DCGM health checks created with dstack's own test
factories (tests/dstack_health.py); hostile answers through a fake transport."""

from __future__ import annotations

import datetime as dt
import json
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from dstackserver import Home, free_port, seeded

from gpufleet.cli import main
from gpufleet.evidence import read_entries
from gpufleet.live.gateways import Server, ServerError
from gpufleet.live.health import fleet_nodes, read_fleet_health
from gpufleet.outbound import Secret

from planutil import write

HELPER = Path(__file__).with_name("dstack_health.py")
XID = "GPU 3: Xid 79, the GPU has fallen off the bus"
SPECS = [
    {"project": "mega", "fleet": "mega", "instances": [
        {"num": 0, "hostname": "10.0.0.2", "checks": [{"minutes_ago": 2, "status": "healthy"}]},
        {"num": 1, "hostname": "10.0.0.3", "health": "failure", "checks": [
            {"minutes_ago": 1, "status": "failure", "incidents": [{"system": 1,
                                                                   "message": XID}]},
            {"minutes_ago": 5, "status": "failure", "incidents": [{"system": 1,
                                                                   "message": XID}]},
            {"minutes_ago": 10, "status": "healthy"}]}]},
    {"project": "iso", "fleet": "iso", "instances": [
        {"num": 0, "hostname": "10.2.0.2", "checks": [{"minutes_ago": 1, "status": "healthy"}]},
        {"num": 1, "hostname": "10.2.0.3", "health": "failure", "checks": [
            {"minutes_ago": 1, "status": "failure", "incidents": [{"system": 1,
                                                                   "message": XID}]}]}]},
    {"project": "a4", "fleet": "a4", "instances": [
        {"num": 0, "hostname": "10.3.0.2", "checks": [{"minutes_ago": 1, "status": "healthy"}]},
        {"num": 1, "hostname": "10.3.0.3", "health": "failure", "checks": [
            {"minutes_ago": 1, "status": "failure", "incidents": [{"system": 1,
                                                                   "message": XID}]}]}]},
    {"project": "warn", "fleet": "warn", "instances": [
        {"num": 0, "hostname": "10.4.0.2", "health": "warning", "checks": [
            {"minutes_ago": 1, "status": "warning", "incidents": [
                {"system": 2, "message": "GPU 0: PCIe replay counter rising"}]}]}]},
    {"project": "dev", "fleet": "dev", "instances": [
        {"num": 0, "hostname": "10.1.0.2"},  # no check at all: dstack still says healthy
        {"num": 1, "hostname": "10.1.0.3", "checks": [{"minutes_ago": 60,
                                                       "status": "healthy"}]},
        {"num": 2, "hostname": "10.1.0.5", "unreachable": True,
         "checks": [{"minutes_ago": 1, "status": "healthy"}]}]},
]
OUTPUTS = {
    "mega": {"backend": "gcp", "public_ips": False, "nodes": [
        {"name": "mega-node-0", "private_ip": "10.0.0.2"},
        {"name": "mega-node-1", "private_ip": "10.0.0.3"}]},
    "dev": {"backend": "aws", "public_ips": False, "nodes": [
        {"name": "dev-node-0", "private_ip": "10.1.0.2"},
        {"name": "dev-node-1", "private_ip": "10.1.0.3"},
        {"name": "dev-node-2", "private_ip": "10.1.0.4"},  # never applied to dstack
        {"name": "dev-node-3", "private_ip": "10.1.0.5"}]},
    "iso": {"backend": "aws", "public_ips": False, "nodes": [
        {"name": "iso-node-0", "private_ip": "10.2.0.2"},
        {"name": "iso-node-1", "private_ip": "10.2.0.3"}]},
    "warn": {"backend": "aws", "nodes": [{"name": "warn-node-0", "private_ip": "10.4.0.2"}]},
    "nets-only": {"backend": "gcp", "nodes": []},
}


@pytest.fixture(scope="module")
def server(dstack_home: Home) -> Server:
    return seeded(dstack_home, ["mega", "dev", "iso", "a4", "warn"], HELPER, SPECS)


@pytest.fixture
def env(server: Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    monkeypatch.setenv("DSTACK_SERVER_URL", server.url)
    monkeypatch.setenv("DSTACK_TOKEN", server.token.reveal())
    return write(tmp_path, "outputs.json", json.dumps(OUTPUTS))


def test_a_failing_node_is_named_with_its_incident_and_since_when(
        env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = str(tmp_path / "ledger.jsonl")
    assert main(["health", "--outputs", env, "--fleet", "mega", "--record", ledger]) == 1
    out = capsys.readouterr().out
    assert "ok       mega/mega-node-0 (10.0.0.2)" in out
    failing = next(line for line in out.splitlines() if "mega-node-1" in line)
    assert failing.startswith("FAILURE  mega/mega-node-1 (10.0.0.3) since ")
    assert failing.endswith(f": {XID}")
    since = dt.datetime.fromisoformat(failing.split(" since ")[1][:19])
    age = dt.datetime.now(dt.UTC).replace(tzinfo=None) - since
    assert dt.timedelta(minutes=4) < age < dt.timedelta(minutes=7)  # the 5-minute check
    entries, problems = read_entries(ledger)
    assert problems == [] and len(entries) == 1
    e = entries[0]
    assert (e["kind"], e["fleet"], e["verdict"], e["nodes"]) == ("health", "mega", "fail", 2)
    assert e["figures"]["failure_nodes"] == 1
    assert e["figures"]["nodes"] == {"mega-node-0": "healthy", "mega-node-1": "failure"}
    assert main(["ledger", "verify", ledger]) == 0


def test_nodes_dstack_cannot_vouch_for_give_no_verdict(
        env: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["health", "--outputs", env, "--fleet", "dev", "--format", "json"]) == 2
    nodes = {n["node"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert {n: v["status"] for n, v in nodes.items()} == {
        "dev-node-0": "unknown", "dev-node-1": "unknown", "dev-node-2": "unknown",
        "dev-node-3": "unknown"}
    assert "no health check" in nodes["dev-node-0"]["why"]
    assert "older than 15 min" in nodes["dev-node-1"]["why"]
    assert "not an instance of dstack's fleet dev" in nodes["dev-node-2"]["why"]
    assert "unreachable" in nodes["dev-node-3"]["why"]
    # a failure anywhere outweighs what is unknown elsewhere
    assert main(["health", "--outputs", env]) == 1


def test_markdown_and_an_unknown_fleet(env: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["health", "--outputs", env, "--fleet", "mega", "--format", "markdown"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("| fleet | node | status | since | incidents |")
    assert "| mega | mega-node-1 | failure |" in out and XID in out
    assert main(["health", "--outputs", env, "--fleet", "nets-only"]) == 2
    assert "no fleet of that name with nodes" in capsys.readouterr().err


def test_a_refused_token_and_a_server_that_is_down_say_so_without_the_token(
        env: str, server: Server, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    canary = "canary-" + secrets.token_hex(8)
    monkeypatch.setenv("DSTACK_TOKEN", canary)
    assert main(["health", "--outputs", env, "--fleet", "mega"]) == 2
    captured = capsys.readouterr()
    assert "refuses the token from $DSTACK_SERVER_URL and $DSTACK_TOKEN" in captured.err
    assert canary not in captured.out + captured.err
    monkeypatch.setenv("DSTACK_SERVER_URL", f"http://127.0.0.1:{free_port()}")
    assert main(["health", "--outputs", env, "--fleet", "mega"]) == 2
    captured = capsys.readouterr()
    assert "cannot reach the dstack server" in captured.err and canary not in captured.err


NOW = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)
SERVER = Server("http://dstack.test", Secret("t0k3n", "test"), "test")
INSTANCE = {"instance_num": 0, "hostname": "10.0.0.2", "unreachable": False,
            "fleet_name": "f", "health_status": "healthy"}
CHECK = {"collected_at": "2026-11-27T11:58:00", "status": "healthy", "events": []}


def _fake(instances: Any, checks: Any) -> Any:
    def post(url: str, body: Mapping[str, Any], token: Secret) -> tuple[int, Any]:
        if url.endswith("/api/instances/list"):
            return 200, instances
        return 200, checks
    return post


@pytest.mark.parametrize(("instances", "checks", "why"), [
    ({"not": "a list"}, {"health_checks": []}, "answered no list"),
    ([{**INSTANCE, "instance_num": "0"}], {"health_checks": []}, "another shape"),
    ([{**INSTANCE, "instance_num": True}], {"health_checks": []}, "another shape"),
    ([{**INSTANCE, "unreachable": "no"}], {"health_checks": []}, "another shape"),
    ([INSTANCE], {"health_checks": "none"}, "answered no list"),
    ([INSTANCE], {"health_checks": [{**CHECK, "status": "fine"}]}, "`HealthCheck`"),
    ([INSTANCE], {"health_checks": [{**CHECK, "collected_at": "yesterday"}]}, "`HealthCheck`"),
    ([INSTANCE], {"health_checks": [{**CHECK, "events": [{"status": "failure"}]}]},
     "`HealthCheck`"),
    ([INSTANCE], None, "answered no list"),
])
def test_answers_of_another_shape_are_refused_not_guessed(instances: Any, checks: Any,
                                                          why: str) -> None:
    with pytest.raises(ServerError, match=why):
        read_fleet_health(_fake(instances, checks), SERVER, "f", [("f-node-0", "10.0.0.2")], NOW,
                   dt.timedelta(minutes=15))


def test_the_latest_check_decides_and_the_oldest_of_its_run_is_since() -> None:
    checks = {"health_checks": [
        {**CHECK, "collected_at": "2026-11-27T11:40:00+00:00", "status": "warning",
         "events": [{"timestamp": "x", "status": "warning", "message": "old"}]},
        {**CHECK, "collected_at": "2026-11-27T11:59:00+00:00", "status": "warning",
         "events": [{"timestamp": "x", "status": "warning", "message": "PCIe replay"}]},
        {**CHECK, "collected_at": "2026-11-27T11:30:00+00:00", "status": "healthy"}]}
    [node] = read_fleet_health(_fake([INSTANCE], checks), SERVER, "f", [("f-node-0", "10.0.0.2")],
                        NOW, dt.timedelta(minutes=15))
    assert (node.status, node.since, node.incidents) == (
        "warning", "2026-11-27T11:40:00+00:00", ("PCIe replay",))


def test_fleet_nodes_take_the_address_dstack_was_given() -> None:
    outputs = {"pub": {"public_ips": True, "nodes": [{"name": "n0", "public_ip": "1.2.3.4",
                                                      "private_ip": "10.0.0.9"}]},
               "priv": {"nodes": [{"name": "n0", "private_ip": "10.0.0.8"}]},
               "gw": {"domain": "x"}, "garbage": "text"}
    assert fleet_nodes(outputs) == {"priv": [("n0", "10.0.0.8")], "pub": [("n0", "1.2.3.4")]}
    assert fleet_nodes(outputs, ["pub"]) == {"pub": [("n0", "1.2.3.4")]}


# --- the health policy ------------------------------------------------------------------

def _policy_files(tmp: Path, fleet: str, policy: str) -> list[str]:
    """The fleet's file and a backends file with its `health` policy."""
    f = write(tmp, f"{fleet}.dstack.yml", f"type: fleet\nname: {fleet}\nnodes: 2\n"
              "backends: [aws]\nresources:\n  gpu: H100:8\n")
    b = write(tmp, "backends.yml", f"backends:\n  - type: aws\nfleets:\n  {fleet}:\n"
              f"    health: {policy}\n")
    return [f, b]


def test_a_policy_with_a_value_it_does_not_know_is_refused_where_it_stands(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = _policy_files(tmp_path, "iso", "{on_failure: reboot}")
    assert main(["validate", *files]) == 1
    err = capsys.readouterr().out
    assert "backends.yml:5" in err and "reboot" in err


def test_apply_isolates_the_failing_node_in_dstack_and_records_it(
        env: str, server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = _policy_files(tmp_path, "iso", "{on_failure: isolate, spares: 1}")
    ledger = str(tmp_path / "ledger.jsonl")
    # a dry run first: it says what it would do and changes nothing
    assert main(["health", *files, "--outputs", env, "--fleet", "iso"]) == 1
    out = capsys.readouterr().out
    assert "policy: iso/iso-node-1 (failure): isolate (remove from dstack's fleet)" in out
    assert "(a dry run: --apply carries these out)" in out
    assert main(["health", *files, "--outputs", env, "--fleet", "iso", "--apply", "--yes",
                 "--record", ledger]) == 1
    out = capsys.readouterr().out
    assert "gpufleet health: isolated iso/iso-node-1 (dstack instance 1)" in out
    entries, _ = read_entries(ledger)
    action = [e for e in entries if e["kind"] == "health-action"]
    assert [(e["fleet"], e["figures"]["action"], e["figures"]["nodes"], e["verdict"])
            for e in action] == [("iso", "isolate", ["iso-node-1"], "pass")]
    # dstack took it out of the fleet: the node is no longer one of its instances
    assert main(["health", "--outputs", env, "--fleet", "iso", "--format", "json"]) == 2
    nodes = {n["node"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert nodes["iso-node-0"]["status"] == "healthy"
    assert "not an instance of dstack's fleet iso" in nodes["iso-node-1"]["why"]


def test_a_replacement_needs_the_stack(env: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    files = _policy_files(tmp_path, "mega", "{on_failure: replace}")
    assert main(["health", *files, "--outputs", env, "--fleet", "mega", "--apply",
                 "--yes"]) == 2
    assert "give --stack" in capsys.readouterr().err


def test_apply_replaces_exactly_the_failing_node_through_gpufleet_replace(
        server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`on_failure: replace`: the failing node, and nothing else, goes through `gpufleet
    replace` (its preview first) on a stand-in for the Automation API's stack, and the
    replacement is recorded."""
    from test_replace import ReplaceStack, export, files, load_lock

    import gpufleet.components.run.automation as automation

    monkeypatch.setenv("DSTACK_SERVER_URL", server.url)
    monkeypatch.setenv("DSTACK_TOKEN", server.token.reveal())
    paths = files(tmp_path)
    stack = ReplaceStack(paths, export(paths, lock=load_lock(str(tmp_path / "gpufleet.lock"))[0]))
    monkeypatch.setattr("shutil.which", lambda _name: "/usr/bin/pulumi")
    monkeypatch.setattr(automation.auto, "select_stack", lambda **_: stack)
    outputs = write(tmp_path, "outputs.json", json.dumps({"a4": {"nodes": [
        {"name": "a4-node-0", "private_ip": "10.3.0.2"},
        {"name": "a4-node-1", "private_ip": "10.3.0.3"}]}}))
    policy = _policy_files(tmp_path / "policy" if (tmp_path / "policy").mkdir() is None
                           else tmp_path, "a4", "{on_failure: replace}")
    ledger = str(tmp_path / "ledger.jsonl")
    assert main(["health", *policy, "--outputs", outputs, "--stack", "dev", "--cwd",
                 str(tmp_path), "--apply", "--yes", "--record", ledger]) == 1
    out = capsys.readouterr().out
    assert "policy: a4/a4-node-1 (failure): replace" in out
    assert "replaced a4-node-1 in stack dev" in out
    assert len(stack.previewed) == 1 and len(stack.updated) == 1
    assert [u.rsplit("::", 1)[1] for u in stack.updated[0]] == ["a4-node-1"]
    entries, _ = read_entries(ledger)
    done = [e for e in entries if e["kind"] == "replace"]
    assert [(e["fleet"], e["figures"]["nodes"], e["figures"]["replaced"]) for e in done] == [
        ("a4", ["a4-node-1"], True)]


def test_a_warning_fails_only_where_asked(env: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["health", "--outputs", env, "--fleet", "warn"]) == 0
    assert "WARNING  warn/warn-node-0 (10.4.0.2) since" in capsys.readouterr().out
    assert main(["health", "--outputs", env, "--fleet", "warn", "--warnings-fail"]) == 1
    files = _policy_files(tmp_path, "warn", "{on_warning: isolate, spares: 1}")
    assert main(["health", *files, "--outputs", env, "--fleet", "warn"]) == 1  # the policy's
    assert "policy: warn/warn-node-0 (warning): isolate" in capsys.readouterr().out


def test_reading_a_live_stack_without_the_pulumi_cli_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("shutil.which", lambda _name: None)
    assert main(["health", "--stack", "dev", "--cwd", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpufleet health: ") and "Pulumi CLI" in err
    assert main(["health"]) == 2
    assert "give --stack, --outputs or --state" in capsys.readouterr().err
