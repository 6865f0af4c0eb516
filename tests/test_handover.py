"""The hand-off to dstack on the bundled examples: every cluster fleet on three clouds gets an
SSH fleet file (an Azure scale set through its NIC list), every gateway a dstack gateway
file, private fleets a note on where the dstack server must run, and `--check-dns` checks
each wildcard record against the gateway's address."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from exportutil import export, write_export

from gpufleet.cli import main
from gpufleet.handoff import ExportError, scale_set_hosts
from gpufleet.input import validate_texts

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SUB = "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Compute"


def nic_list(vmss: str, addresses: list[str], arm: bool = False) -> Any:
    """`az vmss nic list -o json` (flattened), or the ARM answer it comes from."""
    nics = []
    for index, address in reversed(list(enumerate(addresses))):  # any order
        vm = f"{SUB}/virtualMachineScaleSets/{vmss}/virtualMachines/{index}"
        config = {"name": "ipconfig", "primary": True, "privateIPAddress": address,
                  "privateIPAllocationMethod": "Dynamic"}
        if arm:
            nics.append({"id": f"{vm}/networkInterfaces/nic", "properties": {
                "primary": True, "virtualMachine": {"id": vm},
                "ipConfigurations": [{"name": "ipconfig", "properties": config}]}})
        else:
            nics.append({"id": f"{vm}/networkInterfaces/nic", "primary": True,
                         "virtualMachine": {"id": vm}, "ipConfigurations": [config]})
    return {"value": nics} if arm else nics


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> str:
    tmp = tmp_path_factory.mktemp("handover")
    files = [*sorted((EXAMPLES / "fleets").glob("*.yml")),
             *sorted((EXAMPLES / "gateways").glob("*.yml")), EXAMPLES / "backends.yml"]
    return write_export(tmp / "state.json", export(files))


def nic_files(tmp: Path) -> list[str]:
    args = []
    for fleet, ips in (("nd-h100", ["10.2.0.4", "10.2.0.5", "10.2.0.6", "10.2.0.7"]),
                       ("a100-any", ["10.3.0.4", "10.3.0.5"])):
        path = tmp / f"{fleet}-nics.json"
        path.write_text(json.dumps(nic_list(f"{fleet}-vmss", ips)))
        args += ["--azure-nics", f"{fleet}={path}"]
    return args


def test_every_cluster_fleet_and_gateway_of_the_examples_is_handed_over(
        state: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = main(["export", "dstack", "--state", state, "--out", str(out),
                 *nic_files(tmp_path)])
    err = capsys.readouterr().err
    assert code == 0, err
    names = sorted(p.name for p in out.glob("*"))
    assert names == ["a100-any.dstack.yml", "a3mega-fabric.dstack.yml", "a3mega.dstack.yml",
                     "a4-fabric.dstack.yml", "a4-storage.dstack.yml", "a4.dstack.yml",
                     "dstack-server-config.yml", "gateway-gw-aws.dstack.yml",
                     "gateway-gw-azure.dstack.yml", "gateway-gw-gcp.dstack.yml",
                     "h100-train-storage.dstack.yml", "h100-train.dstack.yml",
                     "lambda-h100.dstack.yml", "nd-h100-storage.dstack.yml",
                     "nd-h100.dstack.yml"]
    # Lambda: an SSH fleet of the instances' public addresses, no proxy, no project
    lam = yaml.safe_load((out / "lambda-h100.dstack.yml").read_text())
    assert lam["ssh_config"]["hosts"] == [f"mock-public-ip-of-lambda-h100-node-{i}" for i in (0, 1)]
    assert "proxy_jump" not in lam["ssh_config"] and "placement" not in lam
    assert lam["ssh_config"]["user"] == "ubuntu"
    assert "fleet lambda-h100: lambda builds no network" in err
    # each cluster fleet's shared filesystem: in the fleet file's header, and a task that
    # mounts it as an instance volume on every node
    assert "#     - instance_path: /mnt/data   # filesystem a4-data" in \
        (out / "a4.dstack.yml").read_text()
    storage = yaml.safe_load((out / "nd-h100-storage.dstack.yml").read_text())
    assert storage["volumes"] == [{"instance_path": "/mnt/data", "path": "/mnt/data"}]
    assert storage["nodes"] == 4 and storage["fleets"] == ["nd-h100"]
    nd = yaml.safe_load((out / "nd-h100.dstack.yml").read_text())
    # by instance id, through the bastion, on the scale set's subnet
    assert nd["ssh_config"]["hosts"] == ["10.2.0.4", "10.2.0.5", "10.2.0.6", "10.2.0.7"]
    assert nd["ssh_config"]["proxy_jump"]["user"] == "azureuser"
    assert nd["ssh_config"]["network"] and nd["placement"] == "cluster"
    gw = yaml.safe_load((out / "gateway-gw-gcp.dstack.yml").read_text())
    assert gw == {"type": "gateway", "name": "gw-gcp", "backend": "gcp",
                  "region": "us-west2", "domain": "gcp.gpu.example.com"}
    text = (out / "gateway-gw-gcp.dstack.yml").read_text()
    assert "#   1. dstack apply --project gateway-gw-gcp -f gateway-gw-gcp.dstack.yml\n" in text
    assert "#   2. gpufleet gateway sync --stack STACK" in text
    # the server config names a network for each gateway's region, in its own project
    config = yaml.safe_load((out / "dstack-server-config.yml").read_text())
    projects = {p["name"]: p["backends"][0] for p in config["projects"]}
    assert "lambda-h100" not in projects
    assert projects["gateway-gw-aws"]["vpc_ids"] == {"us-east-1": "gw-aws-net-id"}
    assert projects["gateway-gw-gcp"]["vpc_name"].startswith("gw-gcp-net")
    assert projects["gateway-gw-gcp"]["subnetworks"] == {"us-west2": "gw-gcp-subnet"}
    assert projects["gateway-gw-azure"]["subnet_ids"]["eastus"].endswith("/gw-azure-subnet-id")
    # every written file is what gpufleet's own validation accepts as dstack's format
    assert validate_texts({p.name: p.read_text() for p in out.glob("*.dstack.yml")}).ok
    # dev-l4 has no nodes (networks only): named with the reason, not silently dropped
    assert "fleet dev-l4: no nodes (a networks-only fleet)" in err
    # private fleets: where a dstack server must run to use `public_ips: false`
    assert "fleet a4: private nodes (`public_ips: false`" in err


def test_a_scale_set_without_its_nic_list_is_named_with_the_command_to_get_it(
        state: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["export", "dstack", "--state", state, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert not (out / "nd-h100.dstack.yml").exists()
    assert ("fleet nd-h100: an Azure scale set (nd-h100-vmss-mock), whose instances' "
            "addresses are not stack outputs: pass --azure-nics nd-h100=FILE") in err
    assert "`az vmss nic list --resource-group" in err
    # a NIC list of the wrong length is refused for that fleet
    short = tmp_path / "short.json"
    short.write_text(json.dumps(nic_list("nd-h100-vmss", ["10.2.0.4"])))
    assert main(["export", "dstack", "--state", state, "--out", str(out), "--azure-nics",
                 f"nd-h100={short}"]) == 0
    assert "the scale set lists 1 instance(s), the stack deployed 4" in \
        capsys.readouterr().err
    assert main(["export", "dstack", "--state", state, "--out", str(out), "--azure-nics",
                 f"h100-train={short}"]) == 2
    assert "no Azure scale-set fleet 'h100-train'" in capsys.readouterr().err


def test_resolve_scale_sets_reads_the_nics_from_azure(
        state: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from gpufleet.backends.azure.live import scale_set_nics

    # the offline run's scale set ids are placeholders ("nd-h100-vmss-id")
    arm = "https://management.azure.com"
    nd = nic_list("nd-h100-vmss", ["10.2.0.9", "10.2.0.8", "10.2.0.7", "10.2.0.6"],
                  arm=True)["value"]
    pages = {  # the ARM answer in two pages (nextLink)
        f"{arm}nd-h100-vmss-id/networkInterfaces?api-version=2018-10-01":
            (200, {"value": nd[:3], "nextLink": f"{arm}/next"}),
        f"{arm}/next": (200, {"value": nd[3:]}),
        f"{arm}a100-any-vmss-id/networkInterfaces?api-version=2018-10-01":
            (200, nic_list("a100-any-vmss", ["10.3.0.7", "10.3.0.6"], arm=True)),
    }

    def fake(backend: str, ids: list[str]) -> dict[str, Any]:
        assert backend == "azure"
        return {i: scale_set_nics(lambda url: pages[url], i) for i in ids}
    monkeypatch.setattr("gpufleet.live.scale_set_nics", fake)
    out = tmp_path / "out"
    assert main(["export", "dstack", "--state", state, "--out", str(out),
                 "--resolve-scale-sets"]) == 0, capsys.readouterr().err
    hosts = yaml.safe_load((out / "nd-h100.dstack.yml").read_text())["ssh_config"]["hosts"]
    # instance 0 first, whatever the order of the pages
    assert hosts == ["10.2.0.9", "10.2.0.8", "10.2.0.7", "10.2.0.6"]
    assert yaml.safe_load((out / "a100-any.dstack.yml").read_text())["ssh_config"][
        "hosts"] == ["10.3.0.7", "10.3.0.6"]


def test_nic_lists_that_are_not_what_az_prints_are_refused() -> None:
    assert scale_set_hosts(nic_list("v", ["10.0.0.5", "10.0.0.4"]), False, "f") == \
        ["10.0.0.5", "10.0.0.4"]
    for bad in ({"value": 3}, [{"ipConfigurations": []}], "text",
                [{"virtualMachine": {"id": "x/virtualMachines/a"},
                  "ipConfigurations": [{"privateIPAddress": "10.0.0.4"}]}]):
        with pytest.raises(ExportError):
            scale_set_hosts(bad, False, "nics.json")


def test_check_dns_compares_each_wildcard_record_with_dstacks_gateway(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from gpufleet.input import SyncedGateway

    synced = {"gw-aws": SyncedGateway("gateway-gw-aws", "aws", "us-east-1",
                                      ("203.0.113.10", "203.0.113.11"), "running", "t"),
              "gw-gcp": SyncedGateway("gateway-gw-gcp", "gcp", "us-west2",
                                      ("lb.gcp.example.net",), "running", "t")}
    files = [*sorted((EXAMPLES / "gateways").glob("*.yml")), EXAMPLES / "backends.yml"]
    state = write_export(tmp_path / "state.json", export(files, synced=synced))
    answers = {"gpufleet-dns-check.aws.gpu.example.com": ["203.0.113.10"],
               "gpufleet-dns-check.gcp.gpu.example.com": ["203.0.113.9"],
               "lb.gcp.example.net": ["198.51.100.1"]}

    def resolve(host: str) -> list[str]:
        if host not in answers:
            raise OSError("Name or service not known")
        return answers[host]
    monkeypatch.setattr("gpufleet.cli.handoff._resolve", resolve)
    code = main(["export", "dstack", "--state", state, "--out", str(tmp_path / "o"),
                 "--check-dns"])
    out = capsys.readouterr().out
    assert code == 1
    assert "dns: gateway gw-aws: ok: gpufleet-dns-check.aws.gpu.example.com -> " \
           "203.0.113.10; dstack's gateway: 203.0.113.10, 203.0.113.11" in out
    # a load balancer's host name: the record must resolve where the host name does
    assert "dns: gateway gw-gcp: FAIL: gpufleet-dns-check.gcp.gpu.example.com -> " \
           "203.0.113.9; dstack's gateway: lb.gcp.example.net" in out
    assert "dns: gateway gw-azure: FAIL: the record is pending: run `gpufleet gateway " \
           "sync`, then `pulumi up`" in out
    answers["gpufleet-dns-check.gcp.gpu.example.com"] = ["198.51.100.1"]
    code = main(["export", "dstack", "--state", state, "--out", str(tmp_path / "o"),
                 "--check-dns"])
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("dns:")]
    assert code == 1 and [ln.split(":")[2].strip() for ln in lines] == ["ok", "FAIL", "ok"]
