"""GCP's A3 Mega clusters with GPUDirect-TCPXO, as Google builds them on Ubuntu, handed to
dstack as an SSH fleet. The sources behind each number:

- networks: a host VPC and 8 GPU VPCs, one subnet and one NIC each, MTU 8244, firewall rules
  allowing the GPU subnet's own range only (dstack's examples/clusters/a3mega README; dstack
  0.22.5 core/backends/gcp/compute.py `_get_extra_subnets`: 8 for a3-megagpu-8g);
- the host setup: the dmabuf-import-helper DKMS module from gce-ai-infra's gpudirect-tcpxo-apt
  repository and the aperture-device udev rule (Cluster Toolkit examples/machine-learning/
  a3-megagpu-8g/slurm-a3mega-image.yaml), the FasTrak NCCL plugin installed into
  /var/lib/tcpxo/lib64 and the receive-data-path manager with `--num_hops=2 --num_nics=8`
  (slurm-gcp tools/prologs-epilogs/receive-data-path-manager-mega);
- what runs need: NCCL_FASTRAK_* with Ubuntu's interface names (Cluster Toolkit a3-megagpu-8g/
  nccl-tests/run-nccl-tests.sh; dstack examples/clusters/a3mega), the host paths dstack mounts
  on its own A3 Mega instances (dstack 0.22.5 server/services/backends/provisioning.py);
- the expected bus bandwidth: about 340 GB/s (NVIDIA AICR "GKE TCPXO networking", via
  cloud-recipes.md 2.4).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from exportutil import export, write_export
from hostutil import Host

from gpufleet.cli import main
from gpufleet.compile.compiler import compile_inputs
from gpufleet.compile.hostsetup import TCPXO_PLUGIN_IMAGE, TCPXO_RXDM_IMAGE, families, render
from gpufleet.evidence import burnin_task, pairs_task, task_for
from gpufleet.handoff.fabric import fabric_task
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog

from planutil import TEST_KEY, by_type, named, plan_files, write

NET = "gcp:compute/network:Network"
FIREWALL = "gcp:compute/firewall:Firewall"
INSTANCE = "gcp:compute/instance:Instance"
POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"
FLEET = ("type: fleet\nname: mega\nnodes: 2\nplacement: cluster\nbackends: [gcp]\n"
         "resources:\n  gpu: H100:8\n")
BACKENDS = ("access:\n  ssh_public_key: " + TEST_KEY + "\nbackends:\n  - type: gcp\n"
            "    project_id: p1\n    ssh_cidrs: [203.0.113.0/24]\n")
ACCOUNT = "    vm_service_account: nodes@p1.iam.gserviceaccount.com\n"


def _files(tmp: Path, account: bool = True) -> list[str]:
    return [write(tmp, "b.yml", BACKENDS + (ACCOUNT if account else "")),
            write(tmp, "f.yml", FLEET)]


def test_a_two_node_a3_mega_fleet_plans_its_networks_nics_placement_and_host_setup(
        tmp_path: Path) -> None:
    files = _files(tmp_path)
    compiled = compile_inputs(validate_paths(files).inputs, load_catalog())
    assert [d.code for d in compiled.diagnostics] == []
    [plan] = compiled.plans
    assert (plan.instance_type, plan.rdma) == ("a3-megagpu-8g", "gpudirect-tcpxo")
    assert plan.host_setup is not None and plan.host_setup.fabric == "gpudirect-tcpxo"
    report = plan_files(files)
    nets = {n["name"]: n["inputs"] for n in by_type(report, NET)}
    assert sorted(nets) == ["mega-gpu-1", "mega-gpu-2", "mega-gpu-3", "mega-gpu-4",
                            "mega-gpu-5", "mega-gpu-6", "mega-gpu-7", "mega-gpu-8", "mega-net"]
    assert {n["mtu"] for n in nets.values()} == {8244}
    # each GPU network admits its own subnet's range, and nothing else
    ranges = {r.name: r for n in plan.networks for r in n.firewall}
    for i in range(1, 9):
        rule = named(report, f"mega-gpu-internal-{i}", FIREWALL)["inputs"]
        gpu_net = next(n for n in plan.networks if n.role == f"gpu-{i}")
        assert rule["sourceRanges"] == [gpu_net.cidr] and f"mega-gpu-internal-{i}" in ranges
    world = [r["name"] for r in by_type(report, FIREWALL)
             if "0.0.0.0/0" in (r["inputs"].get("sourceRanges") or [])]
    assert world == []
    # 9 gVNICs per node: the host NIC first, then the 8 GPU NICs in network order
    for node in ("mega-node-0", "mega-node-1"):
        inputs = named(report, node, INSTANCE)["inputs"]
        nics = inputs["networkInterfaces"]
        assert [n["nicType"] for n in nics] == ["GVNIC"] * 9
        assert [n["subnetwork"].split("/")[-1].replace("-mock", "") for n in nics] == \
            ["mega-subnet", *(f"mega-gpu-subnet-{i}" for i in range(1, 10 - 1))]
        assert inputs["serviceAccount"]["email"] == "nodes@p1.iam.gserviceaccount.com"
        assert "receive-datapath-manager" in inputs["metadata"]["startup-script"]
    [policy] = by_type(report, POLICY)
    assert policy["inputs"]["groupPlacementPolicy"]["collocation"] == "COLLOCATED"


def test_without_a_node_service_account_the_plan_warns(tmp_path: Path) -> None:
    compiled = compile_inputs(validate_paths(_files(tmp_path, account=False)).inputs,
                              load_catalog())
    [diag] = compiled.diagnostics
    assert diag.code == "C029" and not diag.is_error
    assert "vm_service_account" in diag.message and "roles/artifactregistry.reader" in \
        str(diag.hint)


def _tcpxo_host(tmp: Path, **env: str) -> Host:
    host = Host(tmp, ("docker", "nvidia-ctk", "nvidia-smi", "nvidia-runtime", "dcgmi"), **env)
    stubs = {
        "docker": """
case "$1" in
  info) echo '{"nvidia":{},"runc":{}}' ;;
  version) echo 28.5.1 ;;
  inspect) if [ -e "$STATE/rxdm" ]; then echo true; else echo false; fi ;;
  rm) rm -f "$STATE/rxdm" ;;
  logs) if [ -e "$STATE/rxdm" ] && [ -z "$FAKE_RXDM_STUCK" ]; then
          echo "I1127 rx_rule_manager.cc] Buffer manager initialization complete"
        else echo "I1127 starting"; fi ;;
  run) echo "$*" >> "$STATE/docker.log"
       case "$*" in
         *nccl-plugin-gpudirecttcpx*)
           [ -z "$FAKE_PLUGIN_FAIL" ] || exit 1
           lib=$(echo "$*" | sed -n 's/.*-v \\([^:]*\\):\\/var\\/lib .*/\\1/p')/tcpxo/lib64
           mkdir -p "$lib" && touch "$lib/libnccl-net.so"
           echo 'export NCCL_NET=FasTrak' > "$lib/nccl-env-profile.sh" ;;
         *tcpgpudmarxd*) touch "$STATE/rxdm" ;;
       esac ;;
esac""",
        "apt-get": """
echo "$*" >> "$STATE/apt.log"
case "$*" in *"install dmabuf-import-helper"*) touch "$STATE/dkms" ;; esac""",
        "modprobe": """
[ -e "$STATE/dkms" ] || exit 1
mkdir -p "$GPUFLEET_ROOT/dev" && touch "$GPUFLEET_ROOT/dev/dmabuf_import_helper" """,
        "udevadm": """
echo "$*" >> "$STATE/udev.log"
if [ "$1" = trigger ] && [ -z "$FAKE_NO_APERTURE" ]; then
  for b in 0000:06:00.1 0000:07:00.1; do mkdir -p "$GPUFLEET_ROOT/dev/aperture_devices/$b"; done
fi""",
        "uname": "echo 6.8.0-1025-gcp",
        "gcloud": 'echo "$*" >> "$STATE/gcloud.log"',
    }
    host.stub(stubs, ("tr",))
    return host


SCRIPT = render(families()["gcp-ubuntu-accelerator"], "ubuntu", "gpudirect-tcpxo")


def test_the_tcpxo_host_setup_installs_and_starts_what_the_fabric_needs(
        tmp_path: Path) -> None:
    host = _tcpxo_host(tmp_path)
    marker = host.ready(SCRIPT, "gpudirect-tcpxo")
    assert marker["fabric_software"] == f"tcpxo:{TCPXO_PLUGIN_IMAGE}+{TCPXO_RXDM_IMAGE}"
    apt = host.log("apt")
    assert any("install dkms apt-transport-artifact-registry linux-headers-6.8.0-1025-gcp"
               in line for line in apt)
    assert any("install dmabuf-import-helper" in line for line in apt)
    lists = host.root / "etc/apt/sources.list.d"
    assert "ar+https://us-apt.pkg.dev/projects/gce-ai-infra gpudirect-tcpxo-apt main" in \
        (lists / "gpudirect-tcpxo.list").read_text()
    assert (host.root / "etc/modules-load.d/gpufleet-tcpxo.conf").read_text() == \
        "import-helper\n"
    rule = (host.root / "etc/udev/rules.d/00-a3-megagpu.rules").read_text()
    assert 'ATTR{vendor}=="0x1ae0", ATTR{device}=="0x0084"' in rule and \
        "/dev/aperture_devices/%k" in rule
    runs = host.log("docker")
    assert runs[0].endswith(f"{TCPXO_PLUGIN_IMAGE} install --install-nccl")
    rxdm = runs[1]
    assert "--restart=unless-stopped --name receive-datapath-manager" in rxdm
    assert "--volume /dev/dmabuf_import_helper:/dev/dmabuf_import_helper" in rxdm
    assert rxdm.endswith(f"{TCPXO_RXDM_IMAGE} --num_hops=2 --num_nics=8 --uid= "
                         "--alsologtostderr")
    profile = (host.root / "var/lib/tcpxo/lib64/nccl-env-profile.sh").read_text()
    assert "export NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY=/dev/aperture_devices" in profile
    assert "export LD_LIBRARY_PATH=/var/lib/tcpxo/lib64:${LD_LIBRARY_PATH}" in profile
    assert host.log("gcloud") == ["auth configure-docker --quiet us-docker.pkg.dev"]
    # the next boot: the module, plugin and daemon are there; nothing is installed again
    before_apt, before_docker = len(apt), len(runs)
    assert host.run(SCRIPT).returncode == 0
    assert (len(host.log("apt")), len(host.log("docker"))) == (before_apt, before_docker)
    assert host.marker("ready")["status"] == "ready"
    assert profile == (host.root / "var/lib/tcpxo/lib64/nccl-env-profile.sh").read_text()


def test_a_tcpxo_host_missing_a_piece_is_not_ready_and_says_which(tmp_path: Path) -> None:
    cases = {
        "FAKE_NO_APERTURE": "no aperture devices under /dev/aperture_devices",
        "FAKE_PLUGIN_FAIL": f"cannot install the TCPXO NCCL plugin from {TCPXO_PLUGIN_IMAGE}",
        "FAKE_RXDM_STUCK": "the receive-data-path manager did not finish initializing in 120 "
                           "s: I1127 starting",
    }
    for i, (flag, reason) in enumerate(cases.items()):
        _tcpxo_host(tmp_path / str(i), **{flag: "1"}).fails(SCRIPT, reason)


def _plan(tmp: Path) -> Any:
    [plan] = compile_inputs(validate_paths(_files(tmp)).inputs, load_catalog()).plans
    return plan


def test_the_acceptance_task_carries_the_plugin_environment_and_mounts(tmp_path: Path) -> None:
    task, exp = task_for(_plan(tmp_path))
    env = task["env"]
    assert env["NCCL_FASTRAK_CTRL_DEV"] == "enp0s12" and env["NCCL_SOCKET_IFNAME"] == "enp0s12"
    assert env["NCCL_FASTRAK_IFNAME"].split(",") == [
        "enp6s0", "enp7s0", "enp13s0", "enp14s0", "enp134s0", "enp135s0", "enp141s0",
        "enp142s0"]
    assert env["NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"] == "/dev/aperture_devices"
    assert task["shell"] == "bash"
    assert {"instance_path": "/dev/aperture_devices", "path": "/dev/aperture_devices"} in \
        task["volumes"]
    assert {"instance_path": "/var/lib/tcpxo/lib64", "path": "/var/lib/tcpxo/lib64"} in \
        task["volumes"]
    commands = "\n".join(task["commands"])
    assert ". /var/lib/tcpxo/lib64/nccl-env-profile.sh" in commands
    # the profile's own NCCL variables reach every rank, not only node 0's shell
    assert "awk -F= '/^NCCL_/" in task["commands"][-1]
    assert (exp.busbw_gbps, exp.nodes) == (340, 2) and "TCPXO" in exp.source


def test_export_writes_the_fabric_task_for_a_deployed_a3_mega_fleet() -> None:
    out = {"fabric": "gpudirect-tcpxo", "nodes": [{"name": "mega-node-0"},
                                                  {"name": "mega-node-1"}]}
    text = fabric_task("mega", out)
    assert text is not None
    doc = yaml.safe_load(text)
    assert doc["type"] == "task" and doc["fleets"] == ["mega"] and doc["nodes"] == 2
    assert doc["volumes"][0] == {"instance_path": "/dev/aperture_devices",
                                 "path": "/dev/aperture_devices"}
    assert doc["env"]["NCCL_FASTRAK_IFNAME"].startswith("enp6s0,")
    assert "copy `env`, `volumes`, `shell`" in text
    # nothing for a networks-only fleet (dstack's own instances get the mounts), for a stack
    # deployed before the output existed, or for an output of the wrong shape
    assert fabric_task("mega", {**out, "nodes": []}) is None
    assert fabric_task("mega", {"nodes": out["nodes"]}) is None
    assert fabric_task("mega", {**out, "fabric": "../etc; rm -rf /"}) is None
    assert fabric_task("mega", {**out, "fabric": ["gpudirect-tcpxo"]}) is None


def test_the_pairs_and_burnin_tasks_reach_the_fabric_on_a3_mega(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    pairs = pairs_task(plan)
    assert pairs is not None and pairs["shell"] == "bash"  # `mapfile`, the profile script
    run = pairs["commands"][-1]
    assert "-x NCCL_FASTRAK_IFNAME" in run and "awk -F= '/^NCCL_/" in run
    assert ". /var/lib/tcpxo/lib64/nccl-env-profile.sh" in "\n".join(pairs["commands"])
    assert {"instance_path": "/var/lib/tcpxo/lib64", "path": "/var/lib/tcpxo/lib64"} in \
        pairs["volumes"]
    burnin = burnin_task(plan, "nvcr.io/nvidia/pytorch:24.12-py3")
    assert burnin["shell"] == "bash"  # `${ecc/...}` substitutions
    assert any("check=fabric want=gpudirect-tcpxo" in c for c in burnin["commands"])
    assert {"instance_path": "/dev/aperture_devices", "path": "/dev/aperture_devices"} in \
        burnin["volumes"]


def test_export_hands_dstack_the_fabric_task_and_the_nodes_service_account(
        tmp_path: Path) -> None:
    state = write_export(tmp_path / "state.json", export(_files(tmp_path)))
    out = tmp_path / "out"
    assert main(["export", "dstack", "--state", state, "--out", str(out)]) == 0
    config = yaml.safe_load((out / "dstack-server-config.yml").read_text())
    [entry] = next(p["backends"] for p in config["projects"] if p["name"] == "mega")
    assert entry["vm_service_account"] == "nodes@p1.iam.gserviceaccount.com"
    assert len(entry["extra_vpcs"]) == 8
    task = yaml.safe_load((out / "mega-fabric.dstack.yml").read_text())
    assert task["fleets"] == ["mega"] and task["nodes"] == 2 and task["shell"] == "bash"
