"""SkyPilot takes the same nodes (issue 57): `gpufleet export skypilot` writes SSH Node Pools and
tasks, checked by SkyPilot 0.14.1's own code in .venv-skypilot (tests/sky_oracle.py: its SSH
Node Pools loader and host-info preparation, sky/ssh_node_pools/utils.py; its task and
resources parser, sky/task.py). Hostile outputs are refused by gpufleet first; a fleet handed
to SkyPilot plans k3s's ports among its own nodes only (docs.k3s.io, "Inbound Rules for K3s
Nodes"), and its host setup checks what `sky ssh up` needs."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from exportutil import export, write_export
from hostutil import Host
from test_handover import nic_files

from gpufleet.cli import main
from gpufleet.compile.hostsetup import families, render
from gpufleet.offers.catalog import load_catalog

from planutil import TEST_KEY, by_type, plan_files, write

ROOT = Path(__file__).resolve().parent.parent
ORACLE = ROOT / ".venv-skypilot" / "bin" / "python"
EXAMPLES = ROOT / "examples"


def sky(tmp: Path, pools: Path | None, tasks: list[Path], ssh_config: Path | None = None
        ) -> dict[str, Any]:
    """What SkyPilot's own code makes of the files (a scratch HOME; `ssh` reads the exported
    ssh_config as ~/.ssh/config's `Include` would)."""
    assert ORACLE.exists(), "run `make sky-oracle` (make test does) to create .venv-skypilot"
    home, shim = tmp / "home", tmp / "shim"
    for d in (home, shim):
        d.mkdir(parents=True, exist_ok=True)
    ssh = shim / "ssh"
    flags = f'-F "{ssh_config}" ' if ssh_config else "-F /dev/null "
    ssh.write_text(f'#!/bin/sh\nexec /usr/bin/ssh {flags}"$@"\n')
    ssh.chmod(0o755)
    request = {"pools": str(pools) if pools else None, "tasks": [str(t) for t in tasks],
               "catalog": _catalog(tasks)}
    env = {**os.environ, "HOME": str(home), "PATH": f"{shim}:{os.environ['PATH']}"}
    r = subprocess.run([str(ORACLE), str(ROOT / "tests" / "sky_oracle.py")],
                       input=json.dumps(request), capture_output=True, text=True, env=env,
                       timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    result: dict[str, Any] = json.loads(r.stdout)
    return result


# SkyPilot's catalog columns (sky/catalog/common.py reads them): rows from gpufleet's bundled
# catalog for the offers the tasks name, so the parser validates them offline
COLUMNS = ["InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB",
           "GpuInfo", "Price", "SpotPrice", "Region", "AvailabilityZone"]


def _catalog(tasks: list[Path]) -> dict[str, str]:
    wanted: dict[str, set[tuple[str, str, str]]] = {}
    for t in tasks:
        for r in (yaml.safe_load(t.read_text()).get("resources") or {}).get("ordered") or []:
            cloud, region, *zone = r["infra"].split("/")
            wanted.setdefault(cloud, set()).add((r["instance_type"], region,
                                                 zone[0] if zone else f"{region}a"))
    out = {}
    rows = load_catalog().rows
    for cloud, offers in wanted.items():
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(COLUMNS)
        for itype, region, zone in sorted(offers):
            row = next(r for r in rows if r.backend == cloud and r.instance_type == itype)
            w.writerow([itype, row.gpu_name or "", row.gpu_count or "", row.vcpus,
                        row.memory_gib, "", row.price, row.price / 2, region, zone])
        out[cloud] = buf.getvalue()
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("sky")
    files = [*sorted((EXAMPLES / "fleets").glob("*.yml")), EXAMPLES / "backends.yml"]
    state = write_export(tmp / "state.json", export(files))
    out = tmp / "out"
    assert main(["export", "skypilot", "--state", state, "--out", str(out),
                 "--identity-file", str(tmp / "key"), "--task", str(EXAMPLES),
                 *nic_files(tmp)]) == 0
    (tmp / "key").write_text("not a real key\n")
    tasks = sorted(out.glob("*.sky.yaml"))
    return out, sky(tmp / "oracle", out / "ssh_node_pools.yaml", tasks, out / "ssh_config")


def test_every_example_fleet_with_nodes_is_a_pool_skypilot_loads(
        exported: tuple[Path, dict[str, Any]]) -> None:
    out, verdict = exported
    pools = verdict["pools"]
    assert "error" not in pools, pools
    # every fleet with nodes, Azure's scale sets and Lambda included (dev-l4 has none)
    assert sorted(pools) == ["a100-any", "a3mega", "a4", "h100-train", "lambda-h100",
                             "nd-h100"]
    # private nodes: host aliases SkyPilot finds in the ssh config, through the bastion
    mega = pools["a3mega"]
    assert [h["ip"] for h in mega] == ["a3mega-node-0", "a3mega-node-1"]
    assert all(h["use_ssh_config"] and h["user"] == "" for h in mega)
    config = (out / "ssh_config").read_text()
    assert "Host a3mega-node-0\n  HostName mock-private-ip-of-a3mega-node-0-nic0" in config
    assert "  ProxyJump a3mega-bastion\n" in config
    assert [h["ip"] for h in pools["nd-h100"]] == [f"nd-h100-node-{i}" for i in range(4)]
    assert "HostName 10.2.0.7\n" in config  # the scale set's addresses, from Azure's NIC list
    # public nodes: addresses, with the pool's user and key
    lam = pools["lambda-h100"]
    assert [h["ip"] for h in lam] == ["mock-public-ip-of-lambda-h100-node-0",
                                      "mock-public-ip-of-lambda-h100-node-1"]
    assert all(h["user"] == "ubuntu" and not h["use_ssh_config"] for h in lam)
    assert (out / "ssh_node_pools.yaml").read_text().startswith("# PLACEHOLDERS: ")


def test_the_task_files_parse_in_skypilot_with_the_offers_in_gpufleets_order(
        exported: tuple[Path, dict[str, Any]]) -> None:
    _, verdict = exported
    tasks = {Path(p).name: v for p, v in verdict["tasks"].items()}
    assert {n: v["error"] for n, v in tasks.items() if "error" in v} == {}
    launch = tasks["a3mega-launch.sky.yaml"]
    assert launch["ordered"] and launch["num_nodes"] == 2
    first = launch["resources"][0]
    assert (first["cloud"], first["region"], first["zone"], first["instance_type"],
            first["use_spot"]) == ("gcp", "us-central1", "us-central1-a", "a3-megagpu-8g",
                                   False)
    assert len(launch["resources"]) == 4  # the locked offer and three fallbacks
    lock = yaml.safe_load((EXAMPLES / "gpufleet.lock").read_text())["fleets"]
    for name in ("h100-train", "a4", "lambda-h100", "a100-any"):
        head = tasks[f"{name}-launch.sky.yaml"]["resources"][0]
        assert (head["cloud"], head["instance_type"], head["use_spot"]) == (
            lock[name]["backend"], lock[name]["instance_type"], lock[name]["spot"]), name
    nccl = tasks["h100-train-nccl.sky.yaml"]
    assert nccl["num_nodes"] == 4 and nccl["resources"][0]["cloud"] == "ssh"
    assert nccl["resources"][0]["accelerators"] == {"H100": 8}
    assert "all_reduce_perf" in nccl["run"]


def _outputs(tmp: Path) -> dict[str, Any]:
    tmp.mkdir(parents=True, exist_ok=True)
    files = [write(tmp, "b.yml", "access:\n  ssh_public_key: " + TEST_KEY + "\nbackends:\n"
                   "  - type: lambda\n    ssh_cidrs: [203.0.113.0/24]\nfleets:\n  pub:\n"
                   "    handoff: skypilot\n"),
             write(tmp, "f.yml", "type: fleet\nname: pub\nnodes: 2\nbackends: [lambda]\n"
                   "resources:\n  gpu: H100:8\n")]
    return export(files)


@pytest.mark.parametrize(("change", "refusal"), [
    (lambda n: n.update(public_ip="fd00::1"), "is IPv6"),
    (lambda n: n.update(public_ip="10.0.0.1\n  ProxyCommand sh"), "is not an IP address"),
    (lambda n: n.update(public_ip="host name"), "is not an IP address"),
    (lambda n: n.update(public_ip=None), "have no public ip for every node"),
])
def test_hostile_outputs_are_refused_before_skypilot_sees_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any, refusal: str) -> None:
    state = _outputs(tmp_path)
    [stack] = [r for r in state["deployment"]["resources"] if r["type"] == "pulumi:pulumi:Stack"]
    change(stack["outputs"]["pub"]["nodes"][0])
    path = write_export(tmp_path / "state.json", state)
    out = tmp_path / "out"
    assert main(["export", "skypilot", "--state", path, "--out", str(out)]) == 1
    assert refusal in capsys.readouterr().err and not out.exists()


def test_an_odd_fleet_name_or_key_path_is_refused(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    state = _outputs(tmp_path)
    [stack] = [r for r in state["deployment"]["resources"] if r["type"] == "pulumi:pulumi:Stack"]
    stack["outputs"]["Pub_Fleet"] = stack["outputs"].pop("pub")
    path = write_export(tmp_path / "state.json", state)
    assert main(["export", "skypilot", "--state", path, "--out", str(tmp_path / "o")]) == 1
    assert "cannot be a host alias" in capsys.readouterr().err
    good = write_export(tmp_path / "good.json", _outputs(tmp_path / "g"))
    assert main(["export", "skypilot", "--state", good, "--out", str(tmp_path / "o"),
                 "--identity-file", "~/.ssh/key\nHost *"]) == 1
    assert "--identity-file" in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_a_fleet_handed_to_skypilot_plans_k3s_ports_among_its_nodes_only(
        tmp_path: Path) -> None:
    backends = ("access:\n  ssh_public_key: " + TEST_KEY + "\nbackends:\n"
                "  - type: gcp\n    project_id: p1\n    ssh_cidrs: [203.0.113.0/24]\n"
                "  - type: aws\n    ssh_cidrs: [203.0.113.0/24]\n"
                "fleets:\n  gg:\n    handoff: skypilot\n  aa:\n    handoff: both\n")
    files = [write(tmp_path, "b.yml", backends),
             write(tmp_path, "g.yml", "type: fleet\nname: gg\nnodes: 2\nbackends: [gcp]\n"
                   "resources:\n  gpu: L4:1\n"),
             write(tmp_path, "a.yml", "type: fleet\nname: aa\nnodes: 2\nbackends: [aws]\n"
                   "resources:\n  gpu: L4:1\n")]
    report = plan_files(files)
    rules = {r["name"]: r["inputs"] for r in by_type(report, "gcp:compute/firewall:Firewall")}
    assert rules["gg-k3s"]["allows"] == [{"protocol": "tcp",
                                         "ports": ["6443", "10250", "2379-2380"]}]
    assert rules["gg-k3s-vxlan"]["allows"] == [{"protocol": "udp", "ports": ["8472"]}]
    for name in ("gg-k3s", "gg-k3s-vxlan"):  # from the fleet's own tag and subnet only
        assert rules[name]["sourceTags"] == rules[name]["targetTags"]
        assert all(s.startswith("10.") for s in rules[name].get("sourceRanges") or [])
    [sg] = [r["inputs"] for r in by_type(report, "aws:ec2/securityGroup:SecurityGroup")
            if r["name"] == "aa-sg"]
    k3s = [(i["protocol"], i["fromPort"], i["toPort"]) for i in sg["ingress"]
           if "k3s" in i["description"]]
    assert sorted(k3s) == [("tcp", 2379, 2380), ("tcp", 6443, 6443), ("tcp", 10250, 10250),
                           ("udp", 8472, 8472)]
    assert all(i.get("self") and not i.get("cidrBlocks") for i in sg["ingress"]
               if "k3s" in i["description"])
    assert report.violations == ()
    fleets = {p.name: p for p in report.fleets}
    assert fleets["gg"].handoff == "skypilot" and fleets["aa"].handoff == "both"
    assert all(f.host_setup is not None and f.host_setup.skypilot for f in fleets.values())


def test_the_policy_pack_catches_k3s_ports_open_to_a_public_range() -> None:
    from policy.rules import k3s_ports_private

    props = {"direction": "INGRESS", "allows": [{"protocol": "tcp", "ports": ["6443"]}],
             "sourceRanges": ["203.0.113.0/24", "10.0.0.0/19"]}
    args = SimpleNamespace(resource_type="gcp:compute/firewall:Firewall", name="g-k3s",
                           urn="urn:x", props=props)
    found: list[str] = []
    k3s_ports_private(args, lambda msg, urn=None: found.append(msg))
    assert found == ["g-k3s admits k3s's port(s) 6443 from 203.0.113.0/24"]
    args.props = {**props, "sourceRanges": ["10.0.0.0/19", "100.64.0.0/16"]}
    k3s_ports_private(args, lambda msg, urn=None: found.append(msg))
    args.props = {**props, "allows": [{"protocol": "tcp", "ports": ["22"]}]}
    k3s_ports_private(args, lambda msg, urn=None: found.append(msg))
    assert len(found) == 1


def _sky_host(tmp: Path, **env: str) -> Host:
    host = Host(tmp, ("docker", "nvidia-ctk", "nvidia-smi", "nvidia-runtime", "dcgmi"), **env)
    if not env.get("FAKE_NOT_DEBIAN"):
        (host.root / "etc").mkdir(parents=True, exist_ok=True)
        (host.root / "etc/debian_version").write_text("bookworm/sid\n")
    for tool in ("sort", "sed"):
        if not (host.bin / tool).exists():
            (host.bin / tool).symlink_to(f"/usr/bin/{tool}")
    return host


SKY_SCRIPT = render(families()["custom-gpu"], "ubuntu", "none", skypilot=True)


def test_the_host_setup_checks_what_skypilot_needs(tmp_path: Path) -> None:
    assert "skypilot" not in render(families()["custom-gpu"], "ubuntu")  # others: as before
    host = _sky_host(tmp_path / "ok")
    assert host.run(SKY_SCRIPT).returncode == 0
    assert host.marker("ready")["skypilot"] == "ready", host.marker("failed")
    # k3s that `sky ssh up` installed (its node label) is SkyPilot's own: still ready
    unit = host.root / "etc/systemd/system/k3s-agent.service"
    unit.parent.mkdir(parents=True)
    unit.write_text("ExecStart=/usr/local/bin/k3s agent --node-label skypilot-ip=10.0.0.2\n")
    assert host.run(SKY_SCRIPT).returncode == 0 and host.marker("ready")["skypilot"] == "ready"
    cases = {
        "FAKE_NOT_DEBIAN": "SkyPilot's SSH Node Pools need a Debian-based OS",
        "FAKE_GPU_NAMES": "SkyPilot takes one GPU type per node; nvidia-smi lists 2",
        "FOREIGN_K3S": "another Kubernetes runs here (k3s, not installed by sky ssh up)",
        "KUBELET": "another Kubernetes is installed here (kubelet)",
    }
    for i, (case, reason) in enumerate(cases.items()):
        env = {case: "1"} if case == "FAKE_NOT_DEBIAN" else \
            {"FAKE_GPU_NAMES": "NVIDIA H100 80GB HBM3\\nNVIDIA L4"} if case == "FAKE_GPU_NAMES" \
            else {}
        host = _sky_host(tmp_path / str(i), **env)
        if case == "FOREIGN_K3S":
            unit = host.root / "etc/systemd/system/k3s.service"
            unit.parent.mkdir(parents=True)
            unit.write_text("ExecStart=/usr/local/bin/k3s server\n")
        if case == "KUBELET":
            (host.bin / "kubelet").write_text("#!/bin/sh\n")
            (host.bin / "kubelet").chmod(0o755)
        host.fails(SKY_SCRIPT, reason)


def test_private_nodes_behind_identity_aware_proxy_are_aliases_with_its_tunnel(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """IAP with OS Login: each node an alias whose ProxyCommand is `gcloud compute
    start-iap-tunnel` (cloud.google.com/iap/docs/using-tcp-forwarding), as the OS Login
    user; Session Manager nodes take no SSH key, so they get no pool, and say so."""
    backends = ("access:\n  ssh_public_key: " + TEST_KEY + "\nbackends:\n"
                "  - type: gcp\n    project_id: p1\n    access: {iap: true}\n"
                "  - type: aws\n    access: {ssm: true}\n")
    files = [write(tmp_path, "b.yml", backends),
             write(tmp_path, "g.yml", "type: fleet\nname: gi\nnodes: 2\nbackends: [gcp]\n"
                   "resources:\n  gpu: L4:1\n"),
             write(tmp_path, "a.yml", "type: fleet\nname: as\nnodes: 1\nbackends: [aws]\n"
                   "resources:\n  gpu: L4:1\n")]
    state = write_export(tmp_path / "state.json", export(files))
    out = tmp_path / "out"
    key = tmp_path / "key"
    key.write_text("not a real key\n")
    assert main(["export", "skypilot", "--state", state, "--out", str(out),
                 "--identity-file", str(key)]) == 1  # no fleet can be a pool
    err = capsys.readouterr().err
    assert "pass --os-login-user" in err and "takes no SSH key" in err
    assert main(["export", "skypilot", "--state", state, "--out", str(out),
                 "--identity-file", str(key), "--os-login-user", "me_example_com"]) == 0
    config = (out / "ssh_config").read_text()
    assert "Host gi-node-0\n  HostName gi-node-0\n  User me_example_com\n" in config
    assert "ProxyCommand gcloud compute start-iap-tunnel %h 22 --listen-on-stdin " \
           "--project=p1 --zone=" in config
    assert "takes no SSH key" in capsys.readouterr().err  # the SSM fleet, named
    verdict = sky(tmp_path / "oracle", out / "ssh_node_pools.yaml", [], out / "ssh_config")
    assert [(h["ip"], h["use_ssh_config"]) for h in verdict["pools"]["gi"]] == [
        ("gi-node-0", True), ("gi-node-1", True)]
    assert main(["export", "skypilot", "--state", state, "--out", str(tmp_path / "o2"),
                 "--os-login-user", "me; rm -rf /"]) == 1
