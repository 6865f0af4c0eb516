"""The canary test for secrets (issue 52): every command and provider function that takes a
secret runs with a canary value against a hostile local server - a redirect to another origin,
a bad status line, a cut-off chunked body, a 70 KB header, 150 headers, a slow drip, an error
that echoes the Authorization header back, a huge body, a dropped connection - and the canary
appears in no output, no error, no exception text and no file written; the other origin of a
redirect is never sent it. A canary with a trailing carriage return (a file saved with CRLF
line ends) is refused before anything is sent, naming where it came from."""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hostile_http import HOSTILE, Hostile, answer, drip, hostile, redirect

from gpufleet import outbound
from gpufleet.backends.lambda_ import api as lambda_api
from gpufleet.backends.lambda_.api import LambdaError, Pacer
from gpufleet.cli import main
from gpufleet.live import gateways
from gpufleet.live.preflight import Need, run_preflight
from gpufleet.live.probes.rest import BearerSession, session_get
from gpufleet.live.runner import LiveError

from planutil import write


class _Clock:
    t = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


def _canary() -> str:
    return "canary-" + secrets.token_hex(12)


Behaviours = {**{k: v for k, v in HOSTILE.items()}, "drip": lambda: drip(4.0, every=0.05)}
# A drip case lasts as long as the client's deadline. Its server sends a byte each 0.05 s,
# so a deadline of 0.3 s still sees several reads succeed before the whole answer is cut;
# every other case keeps the test's own, longer deadline (a loaded machine answers late).
DRIP_DEADLINE = 0.3
_DRIPPING: set[str] = set()  # the origins of the drip servers running


def _deadline(url: str, usual: float) -> float:
    """The deadline for a request to ``url``: a drip server's origin (scheme, host and port:
    a prefix would take port 4000 for 40001) waits DRIP_DEADLINE."""
    return DRIP_DEADLINE if "/".join(url.split("/", 3)[:3]) in _DRIPPING else usual


@pytest.fixture(params=sorted(Behaviours))
def server(request: pytest.FixtureRequest) -> Iterator[Hostile]:
    with hostile(Behaviours[request.param]()) as h:
        if request.param == "drip":
            _DRIPPING.add(h.url)
        try:
            yield h
        finally:
            _DRIPPING.discard(h.url)


@pytest.fixture
def elsewhere() -> Iterator[Hostile]:
    """The other origin a redirect points at: it must never be sent anything."""
    with hostile(answer(200, b'{"data": {}}')) as h:
        yield h


def _files_hold(root: Path, canary: str) -> list[str]:
    out = []
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            if canary.encode() in p.read_bytes():
                out.append(str(p))
    return out


def _no_canary(canary: str, *texts: str, root: Path | None = None) -> None:
    for t in texts:
        assert canary not in t, t[-400:]
    if root is not None:
        assert _files_hold(root, canary) == []


# --- the client itself ---------------------------------------------------------------------

def test_the_client_maps_every_hostile_answer_to_an_error_that_names_the_server(
        server: Hostile) -> None:
    canary = _canary()
    secret = outbound.Secret(canary, "$CANARY")
    try:
        resp = outbound.request("GET", server.url + "/x", secret=secret,
                                timeout=_deadline(server.url, 2.0),
                                max_bytes=1 << 20)
    except outbound.HttpError as e:
        assert server.url.replace("http://", "") in str(e) and canary not in str(e)
        assert canary not in repr(e) and canary not in repr(secret)
        return
    # the one behaviour that is an HTTP answer: an error that quotes the credential back
    assert resp.status == 401 and canary in resp.body.decode()  # what the server sent
    assert canary not in outbound.scrub(resp.body.decode())


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_credential_never_follows_a_redirect_to_another_origin(
        elsewhere: Hostile, status: int) -> None:
    canary = _canary()
    for target in (elsewhere.url + "/steal", elsewhere.url.replace("127.0.0.1", "localhost")):
        with hostile(redirect(target, status)) as h:
            with pytest.raises(outbound.HttpError, match="another origin") as e:
                outbound.request("POST", h.url + "/api", body=b"{}",
                                 secret=outbound.Secret(canary, "$CANARY"), timeout=3)
            assert canary not in str(e.value) and len(h.seen) == 1
    assert elsewhere.seen == []


def test_a_redirect_within_the_origin_is_followed_and_https_never_drops_to_http() -> None:
    with hostile(answer(200, b'{"ok": 1}')) as final:
        # same origin: the hostile server redirects to itself, then answers
        calls: list[str] = []

        def twice(seen: Any, conn: Any) -> None:
            calls.append(seen.target)
            (redirect("/there", 307) if len(calls) == 1 else answer(200, b"{}"))(seen, conn)
        with hostile(twice) as h:
            resp = outbound.request("GET", h.url + "/here",
                                    secret=outbound.Secret(_canary(), "$C"), timeout=3)
            assert resp.status == 200 and calls == ["/here", "/there"]
        # no credential: another origin is followed
        with hostile(redirect(final.url + "/f")) as h:
            assert outbound.request("GET", h.url, timeout=3).status == 200
    with pytest.raises(outbound.HttpError, match="from https to http"):
        outbound._may_follow("https://a.example/x", "http://a.example/y", False)


def test_one_deadline_for_the_whole_request_not_per_read() -> None:
    import time

    with hostile(drip(20.0)) as h:
        start = time.monotonic()
        with pytest.raises(outbound.HttpError, match=r"no whole answer within 1\.5 s"):
            outbound.request("GET", h.url, timeout=1.5)
        assert time.monotonic() - start < 4.0  # each byte came within a second: cut anyway


@pytest.mark.parametrize("value, why", [
    ("tok\r", "line end"), ("tok\n", "line end"), ("to k", "white space"),
    ("tök", "non-ASCII"), ("", "empty")])
def test_a_secret_that_cannot_travel_in_a_header_is_named_by_its_source(
        value: str, why: str) -> None:
    canary = _canary() + value
    with pytest.raises(outbound.SecretError, match=why) as e:
        outbound.Secret(canary if value else "", "$DSTACK_TOKEN").header_value()
    assert "$DSTACK_TOKEN" in str(e.value) and canary.strip() not in str(e.value)


# --- gateway sync: $DSTACK_TOKEN and dstack's CLI config -------------------------------------

@pytest.fixture
def stack(tmp_path: Path) -> Path:
    gw = write(tmp_path, "gw.dstack.yml", "type: gateway\nname: gw1\nbackend: aws\n"
               "region: us-east-1\ndomain: gw1.example.com\n")
    b = write(tmp_path, "backends.yml", "backends:\n  - type: aws\n")
    (tmp_path / "Pulumi.test.yaml").write_text(
        f"config:\n  gpufleet:files:\n    - {gw}\n    - {b}\n")
    return tmp_path


def _sync(stack: Path, monkeypatch: pytest.MonkeyPatch, url: str, token: str,
          via_config: bool) -> int:
    monkeypatch.setattr(gateways, "TIMEOUT", _deadline(url, 0.7))
    for key in ("DSTACK_SERVER_URL", "DSTACK_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    config = stack / "dstack-config.yml"
    if via_config:
        config.write_text(yaml.safe_dump({"projects": [
            {"name": "main", "url": url, "token": token, "default": True}]}))
    else:
        monkeypatch.setenv("DSTACK_SERVER_URL", url)
        monkeypatch.setenv("DSTACK_TOKEN", token)
    return main(["gateway", "sync", "--stack", "test", "--cwd", str(stack),
                 "--dstack-config", str(config)])


@pytest.mark.parametrize("via_config", [False, True])
def test_gateway_sync_against_a_hostile_server(
        server: Hostile, stack: Path, via_config: bool, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    canary = _canary()
    before = (stack / "Pulumi.test.yaml").read_text()
    code = _sync(stack, monkeypatch, server.url, canary, via_config)
    out = capsys.readouterr()
    assert code == 2, out.err
    assert server.url in out.err and "nothing was written" in out.err
    if via_config:  # the config file is the user's own, where the token belongs
        (stack / "dstack-config.yml").unlink()
    _no_canary(canary, out.out, out.err, root=stack)
    assert (stack / "Pulumi.test.yaml").read_text() == before


@pytest.mark.parametrize("via_config", [False, True])
def test_gateway_sync_never_takes_a_token_to_another_origin(
        elsewhere: Hostile, stack: Path, via_config: bool, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    canary = _canary()
    with hostile(redirect(elsewhere.url + "/api/project/main/gateways/get", 307)) as h:
        code = _sync(stack, monkeypatch, h.url, canary, via_config)
    out = capsys.readouterr()
    assert code == 2 and "another origin" in out.err
    assert elsewhere.seen == []
    if via_config:
        (stack / "dstack-config.yml").unlink()
    _no_canary(canary, out.out, out.err, root=stack)


@pytest.mark.parametrize("via_config", [False, True])
def test_gateway_sync_names_a_crlf_token_by_its_source(
        stack: Path, via_config: bool, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    canary = _canary()
    with hostile(answer()) as h:
        code = _sync(stack, monkeypatch, h.url, canary + "\r", via_config)
        assert h.seen == []  # refused before anything was sent
    err = capsys.readouterr().err
    assert code == 2 and "line end" in err and canary not in err
    assert ("dstack-config.yml" in err) if via_config else ("$DSTACK_TOKEN" in err)


def test_drift_reads_the_gateways_through_the_same_guarded_path(
        server: Hostile, stack: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`gpufleet drift` checks synced records with the same reader `gateway sync` uses."""
    from gpufleet.cli.gateway import read_dstack

    canary = _canary()
    monkeypatch.setattr(gateways, "TIMEOUT", _deadline(server.url, 0.7))
    monkeypatch.setenv("DSTACK_TOKEN", canary)
    wanted = [gateways.Wanted("gw1", "main", "aws", "us-east-1")]
    with pytest.raises(gateways.ServerError) as e:
        read_dstack(wanted, {}, server.url, str(stack / "none.yml"))
    assert canary not in str(e.value) and canary not in repr(e.value)


# --- health: the same token, other endpoints ------------------------------------------------

def _health(tmp: Path, monkeypatch: pytest.MonkeyPatch, url: str, token: str) -> int:
    monkeypatch.setattr(gateways, "TIMEOUT", _deadline(url, 0.7))
    monkeypatch.setenv("DSTACK_SERVER_URL", url)
    monkeypatch.setenv("DSTACK_TOKEN", token)
    outputs = write(tmp, "outputs.json", json.dumps(
        {"f": {"nodes": [{"name": "f-node-0", "private_ip": "10.0.0.2"}]}}))
    return main(["health", "--outputs", outputs, "--dstack-config", str(tmp / "none.yml")])


def test_health_against_a_hostile_server(server: Hostile, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    canary = _canary()
    code = _health(tmp_path, monkeypatch, server.url, canary)
    out = capsys.readouterr()
    assert code == 2, out.err
    _no_canary(canary, out.out, out.err, root=tmp_path)


def test_health_never_takes_a_token_to_another_origin(
        elsewhere: Hostile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    canary = _canary()
    with hostile(redirect(elsewhere.url + "/api/instances/list", 307)) as h:
        code = _health(tmp_path, monkeypatch, h.url, canary)
    out = capsys.readouterr()
    assert code == 2 and "another origin" in out.err
    assert elsewhere.seen == []
    _no_canary(canary, out.out, out.err, root=tmp_path)


# --- Lambda: preflight and the stack's dynamic provider ------------------------------------

@pytest.fixture
def fast_lambda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lambda_api, "PACER", Pacer(_Clock()))
    # a launch whose answer is lost is looked for once, not three times, before it is sent
    # again (the drip cost each launch case 14 requests of 0.4 s; tests/test_lambda.py
    # counts the looks)
    monkeypatch.setattr(lambda_api, "FIND_TRIES", 1)
    made = lambda_api.LambdaApi.from_env.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(lambda_api.LambdaApi, "from_env", classmethod(
        lambda cls, key=None: dataclasses.replace(
            made(cls, key), timeout=_deadline(os.environ.get("LAMBDA_API_URL", ""), 0.4),
            retries=1)))


def _need() -> Need:
    return Need("lam", "lambda", None, "us-east-1", None, "gpu_8x_h100_sxm5", "H100", 80, 8,
                208, False, 2, 0)


def test_lambda_preflight_against_a_hostile_server(
        server: Hostile, fast_lambda: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpufleet.backends.lambda_.live import probe

    canary = _canary()
    monkeypatch.setenv("LAMBDA_API_URL", server.url)
    monkeypatch.setenv("LAMBDA_API_KEY", canary)
    try:
        report = run_preflight("dev", [_need()], {"lambda": probe()})
    except (LiveError, LambdaError) as e:
        _no_canary(canary, str(e), repr(e))
        return
    import json

    _no_canary(canary, "\n".join(report.lines()), json.dumps(report.to_json()))


def _provider_calls() -> list[tuple[str, Callable[[Any], Any]]]:
    from gpufleet.components.lambda_ import dynamic as prov

    inst = {"name": "lam-node-0-abc1234", "region_name": "us-east-1",
            "instance_type_name": "gpu_8x_h100_sxm5", "ssh_key_names": ["k"]}
    return [
        ("ssh key create", lambda: prov.SshKeyProvider().create(
            {"name": "lam-key-abc1234", "public_key": "ssh-ed25519 AAAA test"})),
        ("ruleset create", lambda: prov.FirewallRulesetProvider().create(
            {"name": "lam-fw", "region": "us-east-1", "rules": []})),
        ("filesystem create", lambda: prov.FilesystemProvider().create(
            {"name": "data-abc1234", "region": "us-east-1"})),
        ("instance create", lambda: prov.InstanceProvider().create(inst)),
        ("instance read", lambda: prov.InstanceProvider().read("0" * 32, inst)),
        ("instance delete", lambda: prov.InstanceProvider().delete("0" * 32, inst)),
    ]


@pytest.mark.parametrize("call", range(6), ids=[n for n, _ in [
    ("ssh key create", 0), ("ruleset create", 0), ("filesystem create", 0),
    ("instance create", 0), ("instance read", 0), ("instance delete", 0)]])
@pytest.mark.parametrize("how", ["config", "env", "crlf"])
def test_the_lambda_provider_against_a_hostile_server(
        server: Hostile, fast_lambda: None, call: int, how: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from gpufleet.components.lambda_ import dynamic as prov

    canary = _canary()
    key = canary + ("\r" if how == "crlf" else "")
    monkeypatch.setenv("LAMBDA_API_URL", server.url)
    monkeypatch.delenv("LAMBDA_API_KEY", raising=False)
    monkeypatch.setattr(prov, "_KEY", [key] if how in ("config", "crlf") else [])
    if how == "env":
        monkeypatch.setenv("LAMBDA_API_KEY", key)
    _, fn = _provider_calls()[call]
    try:
        got = fn()
    except Exception as e:  # what Pulumi prints of a provider's failure
        _no_canary(canary, str(e), repr(e), *(str(a) for a in e.args))
        if how == "crlf":
            assert "gpufleet:lambdaApiKey" in str(e) and "line end" in str(e)
            assert server.seen == []
        return
    _no_canary(canary, repr(got))


# --- GCP and Azure reads: a token from the cloud's credential library ------------------------

@pytest.mark.parametrize("cloud", ["gcp", "azure"])
def test_cloud_reads_against_a_hostile_server(
        server: Hostile, cloud: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpufleet.backends.azure import live as azure_live
    from gpufleet.backends.gcp import live as gcp_live

    canary = _canary()
    session = BearerSession(lambda: outbound.Secret(canary, f"the {cloud} default "
                                                    "credentials"))
    get = session_get(session, timeout=_deadline(server.url, 0.7))
    if cloud == "gcp":
        monkeypatch.setattr(gcp_live, "API", server.url)
        probe: Any = gcp_live.GcpProbe(get, "proj")
    else:
        monkeypatch.setattr(azure_live, "ARM", server.url)
        probe = azure_live.AzureProbe(get)
    need = Need("f", cloud, "proj" if cloud == "gcp" else "sub", "us-central1", "us-central1-a",
                "a3-highgpu-8g", "H100", 80, 8, 208, False, 2, 0)
    try:
        report = run_preflight("dev", [need], {cloud: probe})
    except LiveError as e:
        _no_canary(canary, str(e), repr(e))
        return
    import json

    _no_canary(canary, "\n".join(report.lines()), json.dumps(report.to_json()))


def test_the_cli_scrubs_an_unexpected_error_that_quotes_a_secret(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Defence in depth: even an internal error whose text quotes a secret is printed
    without it (and its traceback with -v)."""
    import gpufleet.cli.app as app

    canary = _canary()
    outbound.Secret(canary, "$X")

    def boom(**_: Any) -> None:
        raise RuntimeError(f"unexpected: {canary}")
    monkeypatch.setattr(app.cli, "main", boom)
    assert main(["-v", "validate"]) == 3
    err = capsys.readouterr().err
    assert "unexpected: ***" in err and canary not in err


def test_the_lambda_key_never_follows_a_redirect_to_another_origin(
        elsewhere: Hostile, fast_lambda: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpufleet.components.lambda_ import dynamic as prov

    canary = _canary()
    monkeypatch.setattr(prov, "_KEY", [canary])
    with hostile(redirect(elsewhere.url + "/api/v1/instance-types", 308)) as h:
        monkeypatch.setenv("LAMBDA_API_URL", h.url)
        with pytest.raises(LambdaError, match="another origin") as e:
            prov.InstanceProvider().read("0" * 32, {})
    assert elsewhere.seen == [] and canary not in str(e.value)


def test_no_module_but_the_client_sends_http() -> None:
    """Every request gpufleet makes itself goes through `gpufleet.outbound`: no other module
    of the package, the components, the policy pack, the stack or the scripts opens a URL."""
    import re

    root = Path(__file__).resolve().parents[1]
    pattern = re.compile(r"\burlopen\b|^\s*(import|from)\s+(requests|http\.client|urllib3|"
                         r"httpx|aiohttp)\b|\burllib\.request\b|\bhttp\.client\b", re.M)
    found = []
    for folder in ("gpufleet", "components", "policy", "stacks", "scripts"):
        for path in sorted((root / folder).rglob("*.py")):
            if path.name == "outbound.py" and path.parent.name == "gpufleet":
                continue
            if pattern.search(path.read_text()):
                found.append(str(path.relative_to(root)))
    assert found == []


# --- Azure's quota requests (issue 58): the PUT the stack's dynamic resource makes ----------

def _azure_put(canary: str) -> Any:
    session = BearerSession(lambda: outbound.Secret(canary, "the Azure default credentials"))

    def put(url: str, body: dict[str, Any]) -> tuple[int, Any]:
        answer = session.put(url, body, timeout=_deadline(url, 0.7))
        try:
            return answer.status_code, answer.json()
        except ValueError:
            return answer.status_code, None
    return put


def test_an_azure_quota_request_never_leaks_its_token(server: Hostile) -> None:
    from gpufleet.backends.azure.quotarequest import QuotaRequestError, file_request
    from gpufleet.live.preflight import ProbeError

    canary = _canary()
    try:
        result = file_request(_azure_put(canary), "sub", "eastus", "standardNDSH100v5Family",
                              317, arm=server.url)
    except (QuotaRequestError, ProbeError) as e:
        _no_canary(canary, str(e), repr(e))
        return
    _no_canary(canary, json.dumps(result))


@pytest.mark.parametrize("status", [302, 307])
def test_an_azure_quota_request_does_not_follow_a_redirect_elsewhere(
        elsewhere: Hostile, status: int) -> None:
    from gpufleet.backends.azure.quotarequest import file_request
    from gpufleet.live.preflight import ProbeError

    canary = _canary()
    with hostile(redirect(elsewhere.url + "/steal", status)) as h:
        with pytest.raises(ProbeError, match="another origin") as e:
            file_request(_azure_put(canary), "sub", "eastus", "cores", 500, arm=h.url)
        assert canary not in str(e.value)
    assert elsewhere.seen == []


def test_an_azure_quota_request_puts_the_documented_body() -> None:
    from gpufleet.backends.azure.quotarequest import QuotaRequestError, file_request

    accepted = {"properties": {"provisioningState": "Accepted"}}
    with hostile(answer(202, json.dumps(accepted).encode())) as h:
        result = file_request(_azure_put(_canary()), "s-1", "eastus",
                              "standardNDSH100v5Family", 317, arm=h.url)
        [seen] = h.seen
    assert result == {"status": 202, "state": "Accepted"}
    assert seen.method == "PUT" and seen.target == (
        "/subscriptions/s-1/providers/Microsoft.Compute/locations/eastus/providers/"
        "Microsoft.Quota/quotas/standardNDSH100v5Family?api-version=2023-02-01")
    assert json.loads(seen.body) == {"properties": {
        "limit": {"limitObjectType": "LimitValue", "value": 317},
        "name": {"value": "standardNDSH100v5Family"}}}
    with hostile(answer(400, b'{"error": {"code": "BadRequest"}}')) as h, \
            pytest.raises(QuotaRequestError, match="answered 400"):
        file_request(_azure_put(_canary()), "s-1", "eastus", "cores", 1, arm=h.url)
