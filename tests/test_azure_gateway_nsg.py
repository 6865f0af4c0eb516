"""dstack 0.22.5 gives its Azure gateway VM the default security group (22 only) and never
attaches the gateway group (22, 80, 443) it creates: its create_gateway passes
`get_default_network_security_group_name(...)` (dstack: core/backends/azure/compute.py;
both names in core/backends/azure/utils.py). HTTP and HTTPS never reach the gateway.
`gpufleet gateway sync` and `drift` read the NIC's security group through ARM and say the
exact fix (issue 53, item 7). ARM answers below are in the shapes of the Network REST API
(publicIPAddresses - List All, networkInterfaces - Get, networkSecurityGroups - Get)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hostile_http import answer, hostile

from gpufleet.backends.azure import live as azure_live
from gpufleet.cli import main

from planutil import write

SUB = "11111111-2222-3333-4444-555555555555"
RG = f"/subscriptions/{SUB}/resourceGroups/dstack-rg"
NIC = f"{RG}/providers/Microsoft.Network/networkInterfaces/gw-vm-nic"
DEFAULT = f"{RG}/providers/Microsoft.Network/networkSecurityGroups/" \
          "dstack-rg-eastus-default-security-group"
GATEWAY = DEFAULT.replace("-default-security-group", "-gateway-security-group")
IPS = (f"{azure_live.ARM}/subscriptions/{SUB}/providers/Microsoft.Network/publicIPAddresses"
       f"?api-version={azure_live.NETWORK_API}")


def rule(name: str, port: str, source: str = "*", access: str = "Allow") -> dict[str, Any]:
    return {"name": name, "properties": {
        "protocol": "Tcp", "sourceAddressPrefix": source, "destinationPortRange": port,
        "access": access, "direction": "Inbound", "priority": 100}}


def arm(nsg_id: str, rules: list[dict[str, Any]], paged: bool = False) -> dict[str, Any]:
    ip = {"name": "gw-ip", "properties": {
        "ipAddress": "20.1.2.3", "ipConfiguration": {"id": f"{NIC}/ipConfigurations/ipconfig1"}}}
    first: dict[str, Any] = {"value": [] if paged else [ip]}
    out = {IPS: (200, first),
           f"{azure_live.ARM}{NIC}?api-version={azure_live.NETWORK_API}": (200, {
               "id": NIC, "properties": {"networkSecurityGroup": {"id": nsg_id}}}),
           f"{azure_live.ARM}{nsg_id}?api-version={azure_live.NETWORK_API}": (200, {
               "id": nsg_id, "properties": {"securityRules": rules}})}
    if paged:
        first["nextLink"] = IPS + "&$skiptoken=2"
        out[IPS + "&$skiptoken=2"] = (200, {"value": [ip]})
    return out


def getter(answers: dict[str, Any]) -> Any:
    return lambda url: answers.get(url, (404, {"error": {"code": "NotFound"}}))


def test_the_default_group_blocks_https_and_the_fix_names_the_gateway_group() -> None:
    verdict, detail = azure_live.gateway_security(
        getter(arm(DEFAULT, [rule("ssh", "22")])), SUB, "20.1.2.3")
    assert verdict == "blocked" and "TCP 80 or 443" in detail
    assert f"az network nic update --ids {NIC} --network-security-group {GATEWAY}" in detail


@pytest.mark.parametrize("rules, verdict", [
    ([rule("ssh", "22"), rule("http", "80"), rule("https", "443")], "ok"),
    ([rule("web", "80-443", "Internet")], "ok"),
    ([rule("all", "*", "0.0.0.0/0")], "ok"),
    ([rule("http", "80"), rule("https", "443", access="Deny")], "blocked"),
    ([rule("http", "80", "10.0.0.0/8"), rule("https", "443", "10.0.0.0/8")], "blocked"),
])
def test_which_rules_admit_the_gateway(rules: list[dict[str, Any]], verdict: str) -> None:
    assert azure_live.gateway_security(getter(arm(GATEWAY, rules)), SUB, "20.1.2.3")[0] == \
        verdict


def test_the_address_is_looked_for_page_by_page_and_may_not_be_found() -> None:
    got = azure_live.gateway_security(getter(arm(GATEWAY, [rule("h", "80"), rule("s", "443")],
                                                 paged=True)), SUB, "20.1.2.3")
    assert got[0] == "ok"
    verdict, detail = azure_live.gateway_security(getter(arm(GATEWAY, [])), SUB, "20.9.9.9")
    assert verdict == "unknown" and "no public IP 20.9.9.9" in detail


def _dstack_gateway(seen: Any, conn: Any) -> None:
    body = json.dumps({"id": "00000000-0000-0000-0000-000000000001", "name": "gw",
                       "project_name": "gateway-gw", "configuration": {
                           "type": "gateway", "name": "gw", "backend": "azure",
                           "region": "eastus", "domain": "gw.example.com"},
                       "created_at": "2026-11-26T00:00:00Z", "status": "running",
                       "default": False, "replicas": [{
                           "hostname": "20.1.2.3", "replica_num": 0,
                           "created_at": "2026-11-26T00:00:00Z", "status": "running"}]})
    answer(200, body.encode(), {"Content-Type": "application/json"})(seen, conn)


def test_gateway_sync_says_the_gateway_is_blocked_and_how_to_fix_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    gw = write(tmp_path, "gw.dstack.yml", "type: gateway\nname: gw\nbackend: azure\n"
               "region: eastus\ndomain: gw.example.com\n")
    b = write(tmp_path, "b.yml", f"backends:\n  - type: azure\n    subscription_id: {SUB}\n"
              "    tenant_id: 00000000-0000-0000-0000-000000000000\n")
    (tmp_path / "Pulumi.test.yaml").write_text(yaml.safe_dump(
        {"config": {"gpufleet:files": [gw, b]}}))
    answers = arm(DEFAULT, [rule("ssh", "22")])
    monkeypatch.setattr(azure_live, "azure_get", lambda: getter(answers))
    with hostile(_dstack_gateway) as server:
        monkeypatch.setenv("DSTACK_SERVER_URL", server.url)
        monkeypatch.setenv("DSTACK_TOKEN", "t0ken-for-the-test")
        code = main(["gateway", "sync", "--stack", "test", "--cwd", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "gateway gw: BLOCKED: 20.1.2.3: the gateway VM's NIC has security group " \
           "dstack-rg-eastus-default-security-group" in out
    assert f"--network-security-group {GATEWAY}" in out
    # the record is still written: dstack runs it there; the check says what to fix
    assert "20.1.2.3" in (tmp_path / "Pulumi.test.yaml").read_text()
    # once the gateway group is attached, the same sync is clean
    answers.update(arm(GATEWAY, [rule("ssh", "22"), rule("h", "80"), rule("s", "443")]))
    answers[f"{azure_live.ARM}{NIC}?api-version={azure_live.NETWORK_API}"] = (200, {
        "id": NIC, "properties": {"networkSecurityGroup": {"id": GATEWAY}}})
    with hostile(_dstack_gateway) as server:
        monkeypatch.setenv("DSTACK_SERVER_URL", server.url)
        assert main(["gateway", "sync", "--stack", "test", "--cwd", str(tmp_path)]) == 0
