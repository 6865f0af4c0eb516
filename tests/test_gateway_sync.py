"""`gpufleet gateway sync` against dstack 0.22.5 itself: answers built from dstack's own models
(`Gateway`, `GatewayReplica`), and the client's paths run against a real `dstack server`
started on 127.0.0.1 in `.venv-dstack` with a temporary home, its gateways created with
dstack's own test factories (tests/dstack_gateways.py), then stopped by its pid."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest
import yaml
from dstackserver import Home, free_port, helper, seeded

from gpufleet.cli import main
from gpufleet.input import SyncedGateway, stackconfig
from gpufleet.input.stackconfig import StackConfigError
from gpufleet.input.stackedit import set_gateways
from gpufleet.input.synced import parse_gateways
from gpufleet.live.gateways import Server, ServerError, Wanted, find_server, judge

from planutil import write

HELPER = Path(__file__).with_name("dstack_gateways.py")
ADDRS = ["203.0.113.10", "203.0.113.11"]
ELB = "abcd-lb-1234.us-east-1.elb.amazonaws.com"
SPECS = [  # what dstack runs; the files below ask for gw1..gw5 on aws us-east-1
    {"project": "gateway-gw1", "name": "gw1", "backend": "aws", "region": "us-east-1",
     "status": "running", "replicas": [{"hostname": a, "status": "running"} for a in ADDRS]},
    {"project": "gateway-gw2", "name": "gw2", "backend": "aws", "region": "eu-west-1",
     "status": "running", "replicas": [{"hostname": "198.51.100.2", "status": "running"}]},
    {"project": "gateway-gw4", "name": "gw4", "backend": "aws", "region": "us-east-1",
     "status": "running", "hostname": ELB, "load_balancer": {"type": "alb"},
     "replicas": [{"hostname": "10.0.0.4", "status": "running"}]},
    {"project": "gateway-gw5", "name": "gw5", "backend": "aws", "region": "us-east-1",
     "status": "provisioning", "replicas": []},
]
PROJECTS = ["gateway-gw1", "gateway-gw2", "gateway-gw3", "gateway-gw4", "gateway-gw5"]


def _helper(command: str, specs: list[dict[str, Any]], *args: str,
            env: dict[str, str] | None = None) -> str:
    return helper(HELPER, command, specs, *args, env=env)


def dstack_answers(specs: list[dict[str, Any]]) -> list[Any]:
    """What a dstack 0.22.5 server answers for these gateways, built with its models."""
    return list(json.loads(_helper("answer", specs)))


@pytest.fixture(scope="module")
def server(dstack_home: Home) -> Server:
    """A real dstack server holding the gateways of SPECS (shared with tests/test_health.py,
    which holds projects of other names)."""
    return seeded(dstack_home, PROJECTS, HELPER, SPECS)


STACK = """\
# the stack of the sync tests
encryptionsalt: v1:abc
config:
  # which files
  gpufleet:files:
{files}
  gpufleet:lock: {lock}
# trailing comment
"""


@pytest.fixture
def stack(tmp_path: Path) -> Path:
    files = []
    for i in range(1, 6):
        files.append(write(tmp_path, f"gw{i}.dstack.yml", f"type: gateway\nname: gw{i}\n"
                           "backend: aws\nregion: us-east-1\ndomain: gw{i}.example.com\n"
                           .replace("{i}", str(i)) + ("load_balancer: {type: alb}\n"
                                                       "certificate: null\n" if i == 4 else "")))
    files.append(write(tmp_path, "backends.yml", "backends:\n  - type: aws\n"))
    (tmp_path / "Pulumi.test.yaml").write_text(STACK.format(
        files="\n".join(f"    - {f}" for f in files), lock=tmp_path / "gpufleet.lock"))
    return tmp_path


def _cli_config(tmp: Path, url: str, token: str, project: str = "main") -> str:
    path = tmp / "dstack-config.yml"
    path.write_text(yaml.safe_dump({"projects": [{"name": project, "url": url, "token": token,
                                                  "default": True}]}))
    return str(path)


def _sync(stack: Path, config: str, *extra: str, env: dict[str, str] | None = None,
          monkeypatch: pytest.MonkeyPatch | None = None) -> int:
    assert monkeypatch is not None
    for key in ("DSTACK_SERVER_URL", "DSTACK_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    return main(["gateway", "sync", "--stack", "test", "--cwd", str(stack),
                 "--dstack-config", config, *extra])


@pytest.mark.slow
def test_sync_reads_dstack_and_the_stack_program_follows(
        server: Server, stack: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from gpufleet.components import program
    from gpufleet.components.run import harness, offline

    before = (stack / "Pulumi.test.yaml").read_text()
    code = _sync(stack, _cli_config(stack, server.url, server.token.reveal()),
                 monkeypatch=monkeypatch)
    out = capsys.readouterr()
    assert code == 1  # gw2, gw3 and gw5 are not synced; gw1 and gw4 are written
    assert server.token.reveal() not in out.out + out.err
    lines = {ln.split(":")[0]: ln for ln in out.out.splitlines()}
    assert "synced: 203.0.113.10, 203.0.113.11 (new)" in lines["gateway gw1 (project gateway-gw1)"]
    assert "mismatch: dstack's gateway gw2 in project gateway-gw2 runs on aws eu-west-1" in \
        lines["gateway gw2 (project gateway-gw2)"]
    assert "missing: dstack has no gateway gw3 in project gateway-gw3 yet: `dstack apply " \
        "--project gateway-gw3 -f gateway-gw3.dstack.yml`" in \
        lines["gateway gw3 (project gateway-gw3)"]
    assert f"synced: {ELB}" in lines["gateway gw4 (project gateway-gw4)"]
    assert "pending: dstack's gateway gw5 is provisioning" in \
        lines["gateway gw5 (project gateway-gw5)"]
    after = (stack / "Pulumi.test.yaml").read_text()
    # every line the user had is still there, in order; only the key was added
    assert [ln for ln in after.splitlines() if ln in before.splitlines()] == \
        before.splitlines()
    config = stackconfig.read_stack_file(str(stack / "Pulumi.test.yaml"))
    entries = parse_gateways(config[stackconfig.GATEWAYS])
    assert sorted(entries) == ["gw1", "gw4"]
    assert entries["gw1"].targets == tuple(ADDRS) and entries["gw4"].targets == (ELB,)
    # the stack program, as `pulumi up` runs it, reads them: two A records, one alias
    assert main(["lock", *map(str, sorted(stack.glob("gw*.dstack.yml"))),
                 str(stack / "backends.yml")]) == 0
    mocks = harness.StrictMocks(offline.INVOKES, offline.outputs)
    run = harness.run_program(lambda: program.main(str(stack)),
                              {k: v for k, v in config.items() if v}, mocks)
    records = {r.name: r.inputs for r in run.registrations
               if r.type == "aws:route53/record:Record"}
    assert records["gw1-dns"]["records"] == ADDRS and records["gw1-dns"]["type"] == "A"
    assert records["gw4-dns"]["aliases"][0]["name"] == ELB
    assert sorted(records) == ["gw1-dns", "gw4-dns"]  # the others stay pending
    # a second sync with nothing new writes nothing; --check agrees
    assert _sync(stack, _cli_config(stack, server.url, server.token.reveal()),
                 monkeypatch=monkeypatch) == 1
    assert (stack / "Pulumi.test.yaml").read_text() == after
    assert _sync(stack, _cli_config(stack, server.url, server.token.reveal()), "--gateway", "gw1",
                 "--check", monkeypatch=monkeypatch) == 0


@pytest.mark.slow
def test_check_finds_a_record_dstack_has_moved_away_from(
        server: Server, stack: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = stack / "Pulumi.test.yaml"
    stale = {"gw1": SyncedGateway("gateway-gw1", "aws", "us-east-1", ("192.0.2.99",),
                                  "running", "2026-11-01T00:00:00Z")}
    path.write_text(set_gateways(path.read_text(), stale))
    before = path.read_text()
    cfg = _cli_config(stack, server.url, server.token.reveal())
    assert _sync(stack, cfg, "--gateway", "gw1", "--check", monkeypatch=monkeypatch) == 7
    assert path.read_text() == before  # --check writes nothing
    assert _sync(stack, cfg, "--gateway", "gw1", monkeypatch=monkeypatch) == 0
    entries = parse_gateways(stackconfig.read_stack_file(str(path))[stackconfig.GATEWAYS])
    assert entries["gw1"].targets == tuple(ADDRS)


@pytest.mark.slow
def test_a_refused_token_writes_nothing_and_never_shows_the_token(
        server: Server, stack: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    before = (stack / "Pulumi.test.yaml").read_text()
    bad = "not-the-token-" + secrets.token_hex(4)
    assert _sync(stack, _cli_config(stack, server.url, bad), monkeypatch=monkeypatch) == 2
    err = capsys.readouterr().err
    assert "refused the token" in err and "HTTP 403" in err and bad not in err
    assert (stack / "Pulumi.test.yaml").read_text() == before
    # the token from the environment wins over the CLI config, and is not shown either
    assert _sync(stack, _cli_config(stack, server.url, bad), "--gateway", "gw1",
                 env={"DSTACK_SERVER_URL": server.url, "DSTACK_TOKEN": server.token.reveal()},
                 monkeypatch=monkeypatch) == 0
    assert server.token.reveal() not in capsys.readouterr().err


@pytest.mark.slow
def test_an_unknown_project_and_a_server_that_is_down(
        server: Server, stack: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    before = (stack / "Pulumi.test.yaml").read_text()
    # a gateway that shares a fleet whose project the server does not have
    (stack / "backends.yml").write_text("backends:\n  - type: aws\ngateways:\n"
                                        "  gw1: {fleet: nosuch}\n")
    cfg = _cli_config(stack, server.url, server.token.reveal())
    assert _sync(stack, cfg, "--gateway", "gw1", monkeypatch=monkeypatch) == 2
    assert "has no project nosuch (HTTP 404)" in capsys.readouterr().err
    down = _cli_config(stack, f"http://127.0.0.1:{free_port()}", server.token.reveal())
    assert _sync(stack, down, monkeypatch=monkeypatch) == 2
    assert "cannot reach the dstack server at http://127.0.0.1:" in capsys.readouterr().err
    assert (stack / "Pulumi.test.yaml").read_text() == before


def test_answers_from_dstacks_own_models() -> None:
    wanted = Wanted("gw", "p", "aws", "us-east-1")
    base = {"project": "p", "name": "gw", "backend": "aws", "region": "us-east-1"}
    two, lb, half, failed, other = dstack_answers([
        {**base, "status": "running",
         "replicas": [{"hostname": a, "status": "running"} for a in ADDRS]},
        {**base, "status": "running", "hostname": ELB, "load_balancer": {"type": "alb"},
         "replicas": [{"hostname": "10.0.0.1", "status": "running"}]},
        {**base, "status": "running", "replicas": [
            {"hostname": ADDRS[0], "status": "running"},
            {"hostname": None, "status": "provisioning"}]},
        {**base, "status": "failed", "replicas": []},
        {**base, "region": "us-west-2", "status": "running",
         "replicas": [{"hostname": ADDRS[0], "status": "running"}]}])
    found = judge(wanted, two, "now")
    assert found.outcome == "synced" and found.synced is not None
    assert found.synced.targets == tuple(ADDRS) and not found.synced.is_hostname
    found = judge(wanted, lb, "now")
    assert found.synced is not None and found.synced.targets == (ELB,)
    assert found.synced.is_hostname
    found = judge(wanted, half, "now")  # only running replicas are pointed at
    assert found.synced is not None and found.synced.targets == (ADDRS[0],)
    assert judge(wanted, failed, "now").outcome == "failed"
    assert judge(wanted, other, "now").outcome == "mismatch"
    for broken in ({}, {**two, "status": "sleeping"}, {**two, "name": "other"},
                   {**two, "replicas": "x"}, [two], None):
        with pytest.raises(ServerError, match="not a dstack gateway"):
            judge(wanted, broken, "now")
    with pytest.raises(ServerError, match="neither an IPv4 address nor a host name"):
        judge(wanted, {**two, "hostname": "not a host!"}, "now")


def test_where_the_server_and_token_come_from() -> None:
    cfg = yaml.safe_dump({"projects": [
        {"name": "a", "url": "http://a:3000", "token": "ta"},
        {"name": "b", "url": "http://b:3000/", "token": "tb", "default": True}]})
    assert find_server("a", None, {}, cfg, "cfg").url == "http://a:3000"
    got = find_server("zzz", None, {}, cfg, "cfg")  # the default entry's server
    assert (got.url, got.token.reveal()) == ("http://b:3000", "tb") and "tb" not in repr(got)
    env = {"DSTACK_SERVER_URL": "http://e:1", "DSTACK_TOKEN": "te"}
    assert find_server("a", None, env, cfg, "cfg").url == "http://e:1"
    assert find_server("a", "http://u:2", {"DSTACK_TOKEN": "te"}, cfg, "cfg").token.reveal() == "te"
    with pytest.raises(ServerError, match=r"--url needs the server's token in \$DSTACK_TOKEN"):
        find_server("a", "http://u:2", {}, cfg, "cfg")
    with pytest.raises(ServerError, match="no dstack server for project a: run `dstack "
                                          "project add"):
        find_server("a", None, {}, None, "cfg")
    with pytest.raises(ServerError, match="cfg:1:12: YAML syntax error"):
        find_server("a", None, {}, "projects: [", "cfg")
    with pytest.raises(ServerError, match="nests deeper than 200 levels"):
        find_server("a", None, {}, "projects: " + "[" * 5000, "cfg")


def test_the_stack_file_keeps_every_other_line() -> None:
    entry = {"gw": SyncedGateway("p", "aws", "us-east-1", ("192.0.2.1",), "running", "t")}
    text = ("encryptionsalt: x\nconfig:\n    # files\n    gpufleet:files:\n    - a.yml\n"
            "    gpufleet:gateways:\n      old: {project: q}\n    # the lock\n"
            "    gpufleet:lock: l\nother: 1\n")
    new = set_gateways(text, entry)
    assert "    # files\n    gpufleet:files:\n    - a.yml\n" in new
    assert "    # the lock\n    gpufleet:lock: l\nother: 1\n" in new
    assert "old:" not in new and "      gw:\n" in new
    assert yaml.safe_load(new)["config"]["gpufleet:gateways"]["gw"]["targets"] == ["192.0.2.1"]
    removed = set_gateways(new, {})
    assert "gpufleet:gateways" not in removed and "gpufleet:lock: l" in removed
    assert yaml.safe_load(set_gateways("name: s\n", entry))["config"]["gpufleet:gateways"]
    with pytest.raises(StackConfigError, match="written inline"):
        set_gateways("config: {a: 1}\n", entry)
    # a layout the splice would break is refused rather than written
    with pytest.raises(StackConfigError):
        set_gateways("config:\n  gpufleet:files: [a]\n  gpufleet:gateways: {x: 1,\n  y: 2}\n",
                     entry)


class QuietStack:
    """The Automation API stack `gpufleet drift` opens, answering that Pulumi sees no drift
    (the Pulumi CLI is not here); the gateway check is what is tested."""

    def preview_refresh(self, sink: Any) -> None:
        return None

    def preview_refreshed(self, sink: Any) -> None:
        return None


@pytest.mark.slow
def test_drift_reports_a_record_dstack_has_moved_away_from(
        server: Server, stack: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from gpufleet.components.run.automation import AutomationStack

    monkeypatch.setattr(AutomationStack, "open", classmethod(lambda cls, *a, **k: QuietStack()))
    path = stack / "Pulumi.test.yaml"
    path.write_text(set_gateways(path.read_text(), {
        "gw1": SyncedGateway("gateway-gw1", "aws", "us-east-1", ("192.0.2.99",), "running",
                             "2026-11-01T00:00:00Z")}))
    drift = ["drift", "--stack", "test", "--cwd", str(stack), "--format", "json"]
    cfg = _cli_config(stack, server.url, server.token.reveal())
    capsys.readouterr()
    assert main([*drift, "--dstack-config", cfg]) == 7
    data = json.loads(capsys.readouterr().out)
    moved = [c for c in data["changes"] if c["type"] == "gpufleet:gateway:Record"]
    assert [(c["owner"], c["class"]) for c in moved] == [("gw1", "gateway moved")]
    assert moved[0]["properties"][0]["old"] == ["192.0.2.99"]
    assert moved[0]["properties"][0]["new"] == ADDRS
    assert "gpufleet gateway sync --stack test" in moved[0]["action"]
    # a server it cannot ask fails the run, saying so; --no-gateways leaves it out
    down = _cli_config(stack, f"http://127.0.0.1:{free_port()}", server.token.reveal())
    assert main([*drift, "--dstack-config", down]) == 1
    assert "gateway records not checked against dstack: cannot reach the dstack server" in \
        capsys.readouterr().out
    assert main([*drift, "--dstack-config", down, "--no-gateways"]) == 0
