"""Lambda Cloud: the dynamic provider's CRUD and the API client against a local fake of
Lambda's API that validates every request and answer against the OpenAPI document 1.10.0
(tests/lambda_fake.py), with a fake clock for the rate limits; the preflight probe; the plan
of a Lambda fleet under the mock monitor."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dill
import pytest
import yaml
from click.testing import CliRunner
from exportutil import export, write_export
from lambda_fake import KEY, Fake, serve

from gpufleet.backends.lambda_ import api as lambda_api
from gpufleet.backends.lambda_.api import ACTIVE_WAIT, LambdaApi, LambdaError, Pacer
from gpufleet.cli import cli, main
from gpufleet.components.lambda_ import dynamic as prov
from gpufleet.live.preflight import MissingAccess, Need, run_preflight
from gpufleet.outbound import Secret

from planutil import TEST_KEY, by_type, plan_files, write


@dataclass
class FakeClock:
    t: float = 1000.0
    slept: list[float] = field(default_factory=list)

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds


@dataclass
class Env:
    fake: Fake
    url: str
    clock: FakeClock
    stamps: list[float]  # the fake clock when each request went out


@dataclass
class StampedPacer(Pacer):
    stamps: list[float] = field(default_factory=list)

    def wait(self, launch: bool) -> None:
        super().wait(launch)
        self.stamps.append(self.clock.now())


@pytest.fixture
def lam(monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    fake, clock = Fake(), FakeClock()
    with serve(fake) as url:
        monkeypatch.setenv("LAMBDA_API_URL", url)
        monkeypatch.setenv("LAMBDA_API_KEY", KEY)
        pacer = StampedPacer(clock)
        monkeypatch.setattr(lambda_api, "PACER", pacer)
        monkeypatch.setattr(lambda_api, "LISTING", lambda_api.Listing())
        monkeypatch.setattr(prov, "_KEY", [])
        yield Env(fake, url, clock, pacer.stamps)
        assert fake.violations == []  # every request and answer as the document says


def _instance_props(**more: Any) -> dict[str, Any]:
    return {"name": "lam-node-0-abc1234", "region_name": "us-east-1",
            "instance_type_name": "gpu_8x_h100_sxm5", "ssh_key_names": ["lam-key-abc1234"],
            "tags": [{"key": "gpufleet-fleet", "value": "lam"}],
            "firewall_rulesets": [{"id": "c" + "0" * 31}], "user_data": "#!/bin/bash\ntrue\n",
            **more}


def test_ssh_key_and_firewall_ruleset_create_read_update_delete(lam: Env) -> None:
    keys = prov.SshKeyProvider()
    made = keys.create({"name": "lam-key-abc1234", "public_key": "ssh-ed25519 AAAA test"})
    assert made.outs["key_id"] == made.id and made.id in lam.fake.keys
    assert keys.read(made.id, made.outs).id == made.id
    keys.delete(made.id, made.outs)
    assert lam.fake.keys == {} and keys.read(made.id, made.outs).id is None

    rules = prov.FirewallRulesetProvider()
    ssh = [{"protocol": "tcp", "port_range": [22, 22], "source_network": "203.0.113.0/24",
            "description": "ssh"}]
    rs = rules.create({"name": "lam-firewall-abc1234", "region": "us-east-1", "rules": ssh})
    assert lam.fake.rulesets[rs.id]["rules"] == ssh
    wider = [*ssh, {**ssh[0], "source_network": "198.51.100.0/24"}]
    d = rules.diff(rs.id, rs.outs, {**rs.outs, "rules": wider})
    assert d.changes and not d.replaces  # the API changes rules in place
    assert rules.diff(rs.id, rs.outs, {**rs.outs, "region": "us-west-1"}).replaces == ["region"]
    rules.update(rs.id, rs.outs, {**rs.outs, "rules": wider})
    assert rules.read(rs.id, rs.outs).outs["rules"] == wider  # refresh sees the API's rules
    lam.fake.in_use_deletes = 2  # its instances are still terminating
    rules.delete(rs.id, rs.outs)
    assert lam.fake.rulesets == {} and lam.clock.slept.count(prov.IN_USE_WAIT) == 2


def test_a_filesystem_is_created_read_and_deleted_and_reports_its_mount_point(lam: Env) -> None:
    fs = prov.FilesystemProvider()
    made = fs.create({"name": "data-abc1234", "region": "us-east-1"})
    assert made.outs["mount_point"] == "/lambda/nfs/data-abc1234"
    assert fs.read(made.id, made.outs).outs["filesystem_id"] == made.id
    fs.delete(made.id, made.outs)
    assert lam.fake.filesystems == {}


def test_an_instance_is_launched_followed_to_active_renamed_and_terminated(lam: Env) -> None:
    lam.fake.active_after = 3
    inst, ready = prov.InstanceProvider(), prov.InstanceReadyProvider()
    made = inst.create(_instance_props())
    assert made.outs["status"] == "booting" and made.outs["ip"] is None  # launched, not waited
    assert lam.clock.slept == []
    launch = next(b for m, p, b in lam.fake.requests if p == "/instance-operations/launch")
    assert launch["user_data"].startswith("#!/bin/bash") and launch["tags"]
    up = ready.create({"instance_id": made.id, "node": "lam-node-0"})
    assert up.id == made.id and up.outs["status"] == "active"
    assert up.outs["ip"] == lam.fake.instances[made.id]["ip"] and up.outs["private_ip"]
    assert lam.clock.slept.count(lambda_api.POLL) == 2  # two polls while it was booting
    assert ready.read(up.id, up.outs).outs["private_ip"] == up.outs["private_ip"]
    # a new instance is a new wait; deleting the wait leaves the instance to its resource
    assert ready.diff(up.id, up.outs, {**up.outs, "instance_id": "x"}).replaces == \
        ["instance_id"]
    ready.delete(up.id, up.outs)
    assert lam.fake.instances[made.id]["status"] == "active"
    # only the name changes in place; anything else replaces the instance
    assert inst.diff(made.id, made.outs, {**made.outs, "name": "x"}).replaces == []
    assert inst.diff(made.id, made.outs, {**made.outs, "user_data": "y"}).replaces == \
        ["user_data"]
    inst.update(made.id, made.outs, {**made.outs, "name": "lam-node-0-renamed"})
    assert lam.fake.instances[made.id]["name"] == "lam-node-0-renamed"
    inst.delete(made.id, made.outs)
    assert lam.fake.instances[made.id]["status"] == "terminated"
    assert inst.read(made.id, made.outs).id is None  # refresh: gone
    assert inst.read("a" + "f" * 31, made.outs).id is None  # 404: gone
    # the key lands nowhere in what the state keeps
    assert KEY not in json.dumps(made.outs)


def test_a_launch_that_never_becomes_active_fails_its_wait_and_stays_in_the_stack(
        lam: Env) -> None:
    lam.fake.never_active = True
    made = prov.InstanceProvider().create(_instance_props())
    start = lam.clock.t
    with pytest.raises(LambdaError, match="not active after 1800 s") as err:
        prov.InstanceReadyProvider().create({"instance_id": made.id, "node": "lam-node-0"})
    assert lam.clock.t - start >= ACTIVE_WAIT
    assert made.id in str(err.value) and "gpufleet replace" in str(err.value)
    (only,) = lam.fake.instances.values()
    # the Instance holds it: never a paid instance nobody tracks, never one terminated
    # behind the state's back
    assert only["status"] == "booting"


def test_every_booting_node_is_told_its_status_by_one_list_request_a_poll(lam: Env) -> None:
    lam.fake.active_after = 3
    inst, ready = prov.InstanceProvider(), prov.InstanceReadyProvider()
    ids = [inst.create(_instance_props(name=f"lam-node-{k}-abc1234")).id for k in range(3)]
    gets_before = len(lam.fake.requests)
    for k, i in enumerate(ids):  # in turn, as the provider's workers would
        assert ready.create({"instance_id": i, "node": f"lam-node-{k}"}).outs["status"] == \
            "active"
    asked = [p for m, p, _ in lam.fake.requests[gets_before:]]
    assert asked.count("/instances") == 3 and not [p for p in asked if p != "/instances"]


def test_429_and_5xx_are_retried_with_backoff_and_errors_are_reported(lam: Env) -> None:
    client = LambdaApi.from_env()
    lam.fake.fail("GET /instance-types", 429, 2)
    lam.fake.fail("GET /instance-types", 503, 1)
    assert "gpu_8x_h100_sxm5" in client.instance_types()
    assert [s for s in lam.clock.slept if s >= 1.0][:3] == [2.0, 2.0, 4.0]  # Retry-After, back-off
    lam.fake.fail("GET /ssh-keys", 500, lambda_api.RETRIES + 1)
    with pytest.raises(LambdaError) as err:
        client.list("/ssh-keys")
    assert err.value.status == 500
    # 400/404 are final: no retry
    lam.fake.fail("POST /ssh-keys", 400, 1)
    before = len(lam.fake.requests)
    with pytest.raises(LambdaError, match="global/invalid-parameters"):
        client.call("POST", "/ssh-keys", {"name": "k", "public_key": "ssh-ed25519 A"})
    assert len(lam.fake.requests) == before + 1


def test_a_wrong_key_is_401_without_retry_and_the_key_is_never_in_the_message(
        lam: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAMBDA_API_KEY", "wrong-key-987")
    with pytest.raises(LambdaError) as err:
        LambdaApi.from_env().instance_types()
    assert err.value.status == 401 and "wrong-key-987" not in str(err.value)
    assert len(lam.fake.requests) == 1
    monkeypatch.delenv("LAMBDA_API_KEY")
    with pytest.raises(LambdaError, match="gpufleet:lambdaApiKey"):
        LambdaApi.from_env()


def test_requests_are_spaced_one_second_and_launches_twelve(lam: Env) -> None:
    inst, ready = prov.InstanceProvider(), prov.InstanceReadyProvider()
    t0 = lam.clock.t
    first = inst.create(_instance_props())
    ready.create({"instance_id": first.id, "node": "lam-node-0"})
    launched = lam.clock.t
    inst.create(_instance_props(name="lam-node-1-abc1234"))
    gaps = [b - a for a, b in zip(lam.stamps, lam.stamps[1:], strict=False)]
    assert all(g >= 1.0 for g in gaps)  # one request per second
    assert first.id and launched >= t0
    launches = [t for t, (_m, p, _b) in zip(lam.stamps, lam.fake.requests, strict=True)
                if p == "/instance-operations/launch"]
    assert len(launches) == 2 and launches[1] - launches[0] >= 12.0


def test_the_api_key_comes_from_the_stack_config_and_is_not_pickled(lam: Env) -> None:
    from pulumi.dynamic import ConfigureRequest
    from pulumi.dynamic.config import Config

    p = prov.InstanceProvider()
    p.configure(ConfigureRequest(Config({"gpufleet:lambdaApiKey": "from-config"}, "gpufleet")))
    assert prov.api().key.reveal() == "from-config"
    # what Pulumi writes into the state for the provider: the class by reference
    blob = dill.dumps(p, protocol=5, recurse=True)
    assert b"from-config" not in blob and len(blob) < 2000


def test_a_bad_answer_is_an_error_not_a_crash(lam: Env) -> None:
    client = LambdaApi(Secret(KEY, "test"), lam.url, transport=lambda *_: (200, {}, b"{nope"))
    with pytest.raises(LambdaError, match="not JSON"):
        client.instance_types()
    client = LambdaApi(Secret(KEY, "test"), lam.url, transport=lambda *_: (200, {}, b'{"x": 1}'))
    with pytest.raises(LambdaError, match="without a Lambda answer"):
        client.instance_types()


def _need(region: str) -> Need:
    return Need("lam", "lambda", None, region, None, "gpu_8x_h100_sxm5", "H100", 80, 8, 208,
                False, 2, 0)


def test_preflight_asks_lambda_where_the_type_has_capacity(lam: Env) -> None:
    from gpufleet.backends.lambda_.live import probe

    lam.fake.capacity["gpu_8x_h100_sxm5"] = ["us-west-1", "us-south-1"]
    report = run_preflight("dev", [_need("us-east-1"), _need("us-west-1")],
                           {"lambda": probe()})
    offered = [c for c in report.checks if c.what == "offered"]
    assert [c.verdict for c in offered] == ["fail", "ok"]
    assert "Lambda has capacity for it now in us-south-1, us-west-1" in offered[0].detail
    assert all(c.verdict == "skip" for c in report.checks if c.what == "quota")
    assert report.exit_code == 1


def test_preflight_without_a_key_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpufleet.backends.lambda_.live import probe

    monkeypatch.delenv("LAMBDA_API_KEY", raising=False)
    with pytest.raises(MissingAccess, match="LAMBDA_API_KEY"):
        probe()


def test_the_fake_refuses_what_the_document_refuses(lam: Env) -> None:
    """The checks above can fail: a request the document forbids is a violation."""
    with pytest.raises(LambdaError):  # the fake answers 404 for a path not in the document
        LambdaApi.from_env().call("GET", "/no-such-path")
    with pytest.raises(LambdaError) as e:  # and 400 for a body its types refuse, as Lambda
        LambdaApi.from_env().call("POST", "/filesystems", {"name": "1-starts-with-a-digit",
                                                           "region": "us-east-1"})
    assert e.value.status == 400
    assert any("does not match" in v for v in lam.fake.violations)
    assert any("not in the document" in v for v in lam.fake.violations)
    lam.fake.violations.clear()
    # a typed server refuses 22.0 where the document says integer (JSON Schema alone would not)
    with pytest.raises(LambdaError):
        LambdaApi.from_env().call("POST", "/firewall-rulesets", {
            "name": "x", "region": "us-east-1", "rules": [
                {"protocol": "tcp", "port_range": [22.0, 22.0],
                 "source_network": "203.0.113.0/24", "description": "ssh"}]})
    assert any("is not of type 'integer'" in v for v in lam.fake.violations)
    lam.fake.violations.clear()


def test_the_policy_pack_holds_lambda_rulesets_to_ssh_from_ssh_cidrs() -> None:
    from types import SimpleNamespace

    from gpufleet.policy.rules import lambda_ssh_only, no_world_ingress, ssh_only_from_allowed

    def run(rule: Any, typ: str, props: dict[str, Any]) -> list[str]:
        found: list[str] = []
        args = SimpleNamespace(resource_type=f"pulumi-python:dynamic/lambda:{typ}",
                               props=props, name="lam-x", urn="urn:x",
                               get_config=lambda: {"ssh_cidrs": ["203.0.113.0/24"]})
        rule(args, lambda msg, urn: found.append(msg))
        return found

    ssh = {"protocol": "tcp", "port_range": [22, 22], "source_network": "203.0.113.0/24",
           "description": "ssh"}
    assert run(lambda_ssh_only, "FirewallRuleset", {"rules": [ssh]}) == []
    web = {**ssh, "port_range": [443, 443]}
    assert "opens tcp 443" in run(lambda_ssh_only, "FirewallRuleset", {"rules": [ssh, web]})[0]
    assert run(lambda_ssh_only, "Instance", {"firewall_rulesets": []})
    assert run(lambda_ssh_only, "Instance", {"firewall_rulesets": [{"id": "r"}]}) == []
    world = {**ssh, "source_network": "0.0.0.0/0"}
    assert run(no_world_ingress, "FirewallRuleset", {"rules": [world]})
    other = {**ssh, "source_network": "198.51.100.0/24"}
    assert "not in ssh_cidrs" in run(ssh_only_from_allowed, "FirewallRuleset",
                                     {"rules": [other]})[0]


FLEET = "type: fleet\nname: lam\nnodes: {nodes}\nresources:\n  gpu: H100:8\nbackends: [lambda]\n"
BACKENDS = ("backends:\n  - type: lambda\n    regions: [us-east-1]\n"
            "    ssh_cidrs: [203.0.113.0/24]\n"
            f"access:\n  ssh_public_key: {TEST_KEY}\n")


def _files(tmp: Path, nodes: int = 2) -> list[str]:
    return [write(tmp, "backends.yml", BACKENDS), write(tmp, "lam.yml", FLEET.format(nodes=nodes))]


def test_plan_lists_the_key_the_ruleset_and_two_instances_with_their_price(
        tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["plan", *_files(tmp_path)])
    assert r.exit_code == 0, r.output
    for line in ("pulumi-python:dynamic/lambda:FirewallRuleset  1",
                 "pulumi-python:dynamic/lambda:Instance         2",
                 "pulumi-python:dynamic/lambda:SshKey           1",
                 "lambda us-east-1  gpu_8x_h100_sxm5  8xH100  on-demand  $23.9200/h per node",
                 "$47.84/h, $34,923.20/month"):
        assert line in r.output
    report = plan_files(_files(tmp_path))
    (ruleset,) = by_type(report, "pulumi-python:dynamic/lambda:FirewallRuleset")
    assert ruleset["inputs"]["rules"] == [{
        "protocol": "tcp", "port_range": [22, 22], "source_network": "203.0.113.0/24",
        "description": "SSH from the ranges in ssh_cidrs"}]
    nodes = by_type(report, "pulumi-python:dynamic/lambda:Instance")
    assert [n["name"] for n in nodes] == ["lam-node-0", "lam-node-1"]
    for n in nodes:
        assert n["inputs"]["user_data"].startswith("#!/bin/bash")
        assert n["inputs"]["firewall_rulesets"] and n["inputs"]["ssh_key_names"]
        assert {"key": "gpufleet-fleet", "value": "lam"} in n["inputs"]["tags"]
    assert report.violations == ()


def test_the_lock_records_the_offer_and_no_address_block(tmp_path: Path) -> None:
    files = _files(tmp_path)
    assert main(["lock", *files]) == 0
    lock = yaml.safe_load((tmp_path / "gpufleet.lock").read_text())
    entry = lock["fleets"]["lam"]
    assert (entry["backend"], entry["instance_type"], entry["price"]) == \
        ("lambda", "gpu_8x_h100_sxm5", 23.92)
    assert not entry.get("cidr")
    assert main(["plan", "--locked", *files]) == 0


def test_diff_works_offline_on_an_export_holding_dynamic_resources(tmp_path: Path) -> None:
    state = export(_files(tmp_path))
    assert any(r["type"].startswith("pulumi-python:dynamic/") for r in
               state["deployment"]["resources"])
    path = write_export(tmp_path / "state.json", state)
    for full in ([], ["--full"]):  # --full compares every input (no phantom `__provider`)
        r = CliRunner().invoke(cli, ["diff", "--state", path, *full, *_files(tmp_path)])
        assert r.exit_code == 0 and "summary: 7 same" in r.output, r.output
    r = CliRunner().invoke(cli, ["diff", "--state", path, *_files(tmp_path, nodes=3)])
    assert "summary: 2 create, 7 same" in r.output, r.output
    assert "create   pulumi-python:dynamic/lambda:Instance  lam-node-2" in r.output


def test_a_lambda_filesystem_is_created_in_the_region_and_mounted_at_launch(
        tmp_path: Path) -> None:
    backends = BACKENDS + ("filesystems:\n  - name: lamdata\n    backend: lambda\n"
                           "    region: us-east-1\n    kind: nfs\n    capacity_gib: 1000\n"
                           "    mount: /data/lamdata\n    fleets: [lam]\n")
    files = [write(tmp_path, "backends.yml", backends),
             write(tmp_path, "lam.yml", FLEET.format(nodes=2))]
    report = plan_files(files)
    (fs,) = by_type(report, "pulumi-python:dynamic/lambda:Filesystem")
    assert fs["inputs"]["region"] == "us-east-1" and fs["inputs"]["name"].startswith("lamdata-")
    for node in by_type(report, "pulumi-python:dynamic/lambda:Instance"):
        assert node["inputs"]["file_system_mounts"] == [
            {"mount_point": "/data/lamdata", "file_system_id": "lamdata-id"}]
        assert "gpufleet-mount" not in node["inputs"]["user_data"]  # Lambda mounts it
    r = CliRunner().invoke(cli, ["plan", *files])
    assert "mounted at /data/lamdata by the cloud when each node launches" in r.output
    assert "$200.00/month" in r.output  # Lambda's $0.20 per GiB-month


def test_each_instance_waits_for_the_key_it_names_and_the_ruleset(tmp_path: Path) -> None:
    """The launch names the key by name (no output to wait on): an explicit dependency."""
    report = plan_files(_files(tmp_path))
    (key,) = by_type(report, "pulumi-python:dynamic/lambda:SshKey")
    (ruleset,) = by_type(report, "pulumi-python:dynamic/lambda:FirewallRuleset")
    for node in by_type(report, "pulumi-python:dynamic/lambda:Instance"):
        assert key["urn"] in node["dependencies"]
        assert ruleset["urn"] in node["dependencies"]


def test_a_fleet_over_the_launch_limit_is_refused(tmp_path: Path) -> None:
    files = [write(tmp_path, "backends.yml", BACKENDS),
             write(tmp_path, "lam.yml", FLEET.format(nodes=101))]
    r = CliRunner().invoke(cli, ["plan", *files])
    assert r.exit_code == 1 and "error[C027]" in r.stderr and "at most 100" in r.stderr


# --- what Lambda's API would refuse (issue 53: items 1, 5, 6) -------------------------------

def test_ruleset_ports_reach_the_api_as_integers(lam: Env) -> None:
    """Pulumi hands a dynamic provider every number as a double; the API types ports as
    integers (OpenAPI 1.10.0, FirewallRule.port_range)."""
    rules = [{"protocol": "tcp", "port_range": [22.0, 22.0],
              "source_network": "203.0.113.0/24", "description": "ssh"}]
    made = prov.FirewallRulesetProvider().create({"name": "lam-fw", "region": "us-east-1",
                                                   "rules": rules})
    sent = [b for m, p, b in lam.fake.requests if p == "/firewall-rulesets" and m == "POST"]
    assert sent[-1]["rules"][0]["port_range"] == [22, 22]
    assert all(type(x) is int for x in sent[-1]["rules"][0]["port_range"])
    prov.FirewallRulesetProvider().update(made.id, made.outs, {**made.outs, "rules": rules})
    patched = [b for m, p, b in lam.fake.requests if m == "PATCH"]
    assert all(type(x) is int for x in patched[-1]["rules"][0]["port_range"])


def _fs_files(tmp: Path, mount: str | None) -> list[str]:
    backends = BACKENDS + ("filesystems:\n  - name: lamdata\n    backend: lambda\n"
                           "    region: us-east-1\n    kind: nfs\n    capacity_gib: 1000\n"
                           + (f"    mount: {mount}\n" if mount else "") + "    fleets: [lam]\n")
    return [write(tmp, "backends.yml", backends), write(tmp, "lam.yml", FLEET.format(nodes=2))]


def test_a_lambda_filesystem_mounts_where_lambdas_api_allows(tmp_path: Path) -> None:
    """RequestedFilesystemMountEntry.mount_point: `^(/home|/lambda/nfs|/data)[//a-zA-Z0-9-]*$`
    (OpenAPI 1.10.0): the default is Lambda's own /lambda/nfs/NAME; /mnt/... is refused at
    validate, not by a 400 on every launch."""
    report = plan_files(_fs_files(tmp_path, None))
    for node in by_type(report, "pulumi-python:dynamic/lambda:Instance"):
        assert node["inputs"]["file_system_mounts"][0]["mount_point"] == "/lambda/nfs/lamdata"
    for bad in ("/mnt/data", "/data/my_data", "/srv/data", "/home/a.b"):
        r = CliRunner().invoke(cli, ["validate", *_fs_files(tmp_path, bad)])
        assert r.exit_code == 1 and "V023" in r.output and "/lambda/nfs/lamdata" in r.output, \
            (bad, r.output)
    for good in ("/data", "/home/ubuntu/data", "/lambda/nfs/x-1/y"):
        assert CliRunner().invoke(cli, ["validate", *_fs_files(tmp_path, good)]).exit_code == 0


@pytest.mark.parametrize("tags, why", [
    ({"a": "x"}, "one character"),
    ({"Team": "x", "team": "y"}, "both become 'team'"),
    ({"cost_center": "x", "cost-center": "y"}, "both become 'cost-center'"),
])
def test_tag_keys_lambda_would_refuse_or_merge_are_refused_at_plan(
        tmp_path: Path, tags: dict[str, str], why: str) -> None:
    fleet = FLEET.format(nodes=2) + "tags:\n" + "".join(f"  {k}: {v}\n" for k, v in tags.items())
    files = [write(tmp_path, "backends.yml", BACKENDS), write(tmp_path, "lam.yml", fleet)]
    r = CliRunner().invoke(cli, ["plan", *files])
    assert r.exit_code == 1 and "C028" in r.output and why in r.output, r.output


def test_launch_bodies_pass_the_fakes_strict_types(lam: Env, tmp_path: Path) -> None:
    """The whole plan's launch request, tags and mounts included, as the fake (strict
    integers, the document's patterns) takes it."""
    fleet = FLEET.format(nodes=1) + "tags:\n  ab: x\n  Owner: me\n"
    files = [write(tmp_path, "backends.yml", BACKENDS), write(tmp_path, "lam.yml", fleet)]
    (node,) = by_type(plan_files(files), "pulumi-python:dynamic/lambda:Instance")
    body = prov.launch_body({**node["inputs"], "firewall_rulesets": [{"id": "c" + "0" * 31}],
                             "ssh_key_names": ["lam-key-abc1234"]})
    assert lam.fake.check_request("/api/v1/instance-operations/launch", "POST", body) == []


# --- a launch is never sent twice blindly (issue 53, item 10) ------------------------------

def _live(fake: Fake) -> list[dict[str, Any]]:
    return [i for i in fake.instances.values() if i["status"] != "terminated"]


def test_a_launch_whose_answer_is_lost_is_adopted_not_sent_again(lam: Env) -> None:
    """Lambda launched it and the answer was a 503: the instance is found by its unique name
    and adopted - one paid instance, the one the state tracks."""
    lam.fake.lose("POST /instance-operations/launch", 503)
    made = prov.InstanceProvider().create(_instance_props())
    (only,) = lam.fake.instances.values()
    assert made.id == only["id"] and only["status"] == "active"
    launches = [p for m, p, b in lam.fake.requests if p == "/instance-operations/launch"]
    assert len(launches) == 1


def test_a_launch_that_launched_nothing_is_sent_again_after_looking(lam: Env) -> None:
    lam.fake.fail("POST /instance-operations/launch", 502)  # refused before acting
    made = prov.InstanceProvider().create(_instance_props())
    assert [i["id"] for i in _live(lam.fake)] == [made.id]
    looks = [p for m, p, b in lam.fake.requests if (m, p) == ("GET", "/instances")]
    assert len(looks) == lambda_api.FIND_TRIES  # looked before sending it again


def test_a_404_or_a_garbled_answer_while_booting_does_not_kill_a_healthy_node(
        lam: Env) -> None:
    lam.fake.active_after = 2
    made = prov.InstanceProvider().create(_instance_props())
    lam.fake.garble("GET /instances", 1)  # a proxy's error page
    lam.fake.unlisted = 2  # Lambda lists a launch late: two lists without it...
    lam.fake.fail("GET /instances/{id}", 404, 2)  # ...and no answer by its id yet
    up = prov.InstanceReadyProvider().create({"instance_id": made.id, "node": "lam-node-0"})
    assert up.outs["status"] == "active" and _live(lam.fake)[0]["id"] == made.id


def test_an_instance_that_stays_gone_fails_its_wait(lam: Env) -> None:
    made = prov.InstanceProvider().create(_instance_props())
    lam.fake.unlisted = lambda_api.GONE_AFTER
    lam.fake.fail("GET /instances/{id}", 404, lambda_api.GONE_AFTER)
    with pytest.raises(LambdaError, match="not found 3 times while it booted"):
        prov.InstanceReadyProvider().create({"instance_id": made.id, "node": "lam-node-0"})


def test_a_script_or_tag_change_replaces_no_running_lambda_node(tmp_path: Path) -> None:
    """One policy on every cloud (issue 53, item 9): AWS and Azure ignore boot-script
    changes of running nodes; Lambda's launch-only `user_data` and `tags` are ignored too,
    so a change to either previews no replacement (`gpufleet replace` asks for one)."""
    state = export(_files(tmp_path))
    path = write_export(tmp_path / "state.json", state)
    tagged = FLEET.format(nodes=2) + "tags:\n  owner: ml-team\n"
    files = [write(tmp_path, "backends.yml", BACKENDS), write(tmp_path, "lam.yml", tagged)]
    r = CliRunner().invoke(cli, ["diff", "--state", path, "--full", *files])
    summary = r.output.split("summary:")[-1]
    assert r.exit_code == 0 and "replace" not in summary and "7 same" in summary, r.output
    report = plan_files(files)
    for node in by_type(report, "pulumi-python:dynamic/lambda:Instance"):
        assert set(node["ignore_changes"]) >= {"user_data", "tags"}


def test_a_ruleset_update_previews_no_node_replacement(tmp_path: Path) -> None:
    """The Python dynamic provider cannot preview: for an update the engine hands back the
    inputs, without the provider's outputs (`ruleset_id`, `filesystem_id`). The launch
    names the ruleset and the filesystem by the resource's id, which a preview keeps, so a
    changed `ssh_cidrs` previews as the ruleset's update alone (issue 53, item 8)."""
    from gpufleet.compile.compiler import compile_inputs
    from gpufleet.compile.runs import RunInputs
    from gpufleet.components import program
    from gpufleet.components.run import harness, offline
    from gpufleet.components.run.plan import offline_config
    from gpufleet.input.validate import validate_paths
    from gpufleet.offers.catalog import load_catalog

    backends = BACKENDS + ("filesystems:\n  - name: lamdata\n    backend: lambda\n"
                           "    region: us-east-1\n    kind: nfs\n    capacity_gib: 100\n"
                           "    fleets: [lam]\n")
    files = [write(tmp_path, "backends.yml", backends),
             write(tmp_path, "lam.yml", FLEET.format(nodes=2))]
    compiled = compile_inputs(validate_paths(files).inputs, load_catalog())
    # what a preview of an update answers for a dynamic resource: its inputs, nothing more
    mocks = harness.StrictMocks(offline.invokes_for(compiled.dns_zones),
                                lambda typ, name, inputs: {})
    run = harness.run_program(lambda: program.main(compiled=compiled),
                              offline_config(RunInputs(tuple(files)), compiled), mocks,
                              preview=True)
    nodes = [r for r in run.registrations if r.type.endswith("lambda:Instance")]
    assert len(nodes) == 2
    for n in nodes:
        assert n.inputs["firewall_rulesets"] == [{"id": "lam-firewall-id"}], n.inputs
        assert n.inputs["file_system_mounts"][0]["file_system_id"] == "lamdata-id"


# --- Lambda's account-wide firewall (issue 53, item 11) ------------------------------------

def _ssh_need(region: str) -> Need:
    return dataclasses.replace(_need(region), ssh_sources=("203.0.113.0/24",))


@pytest.mark.parametrize("rules, verdict, named", [
    ([], "ok", None),
    ([{"protocol": "tcp", "port_range": [22, 22], "source_network": "203.0.113.8/29",
       "description": "ssh, narrower"}], "ok", None),
    ([{"protocol": "tcp", "port_range": [22, 22], "source_network": "0.0.0.0/0",
       "description": "ssh from anywhere"}], "fail", "tcp 22-22 from 0.0.0.0/0"),
    ([{"protocol": "tcp", "port_range": [8888, 8888], "source_network": "203.0.113.0/24",
       "description": "jupyter"}], "fail", "tcp 8888-8888"),
    ([{"protocol": "icmp", "source_network": "0.0.0.0/0", "description": "ping"}], "fail",
     "icmp from 0.0.0.0/0"),
])
def test_preflight_reads_lambdas_global_ruleset(lam: Env, rules: list[dict[str, Any]],
                                                verdict: str, named: str | None) -> None:
    """The global ruleset applies in every region and only allows: a rule wider than the
    fleet's ssh_cidrs opens every node, whatever the fleet's own ruleset says."""
    from gpufleet.backends.lambda_.live import probe

    lam.fake.capacity["gpu_8x_h100_sxm5"] = ["us-east-1"]
    lam.fake.global_rules = rules
    report = run_preflight("dev", [_ssh_need("us-east-1")], {"lambda": probe()})
    (check,) = [c for c in report.checks if c.what == "firewall"]
    assert check.verdict == verdict, check.detail
    assert named is None or named in check.detail


def test_us_south_1_is_failed_for_firewall_rules_do_not_apply_there(lam: Env) -> None:
    from gpufleet.backends.lambda_.live import probe

    lam.fake.capacity["gpu_8x_h100_sxm5"] = ["us-south-1"]
    report = run_preflight("dev", [_ssh_need("us-south-1")], {"lambda": probe()})
    (check,) = [c for c in report.checks if c.what == "firewall"]
    assert check.verdict == "fail" and "do not apply in us-south-1" in check.detail


def test_the_stacks_needs_carry_the_fleets_ssh_cidrs(tmp_path: Path) -> None:
    """What preflight compares the global ruleset with: the plan's SSH sources."""
    from gpufleet.live.preflight import stack_needs

    files = _files(tmp_path)
    assert main(["lock", *files]) == 0
    (need,) = stack_needs(files, None, None, str(tmp_path / "gpufleet.lock"), {})
    assert need.ssh_sources == ("203.0.113.0/24",)
