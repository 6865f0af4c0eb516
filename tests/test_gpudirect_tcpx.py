"""GCP's A3 High clusters with GPUDirect-TCPX, on Ubuntu with Google's TCPX kernel, handed to
dstack as an SSH fleet. The sources behind each number:

- the image: Ubuntu booting Google's TCPX kernel (linux-gcp-tcpx), from a PPA Google's staff
  open (Cluster Toolkit examples/machine-learning/a3-highgpu-8g: README "Before starting",
  a3high-slurm-blueprint.yaml); the user names it (`tcpx_image`), gpufleet verifies it;
- networks: a host VPC and 4 GPU VPCs, one subnet and one gVNIC each, MTU 8244 (dstack 0.22.5
  core/backends/gcp/compute.py `_get_extra_subnets`: 4 for a3-highgpu-8g; the blueprint's
  sysnet and gpunets);
- the host setup: the 4 GPU NICs enp6s0, enp12s0, enp134s0, enp140s0 waited for (the
  blueprint's delay-a3.service), the GPU-to-NIC map gpu_rxq_configuration.textproto (the
  blueprint), the TCPX NCCL plugin v3.1.9 into /var/lib/tcpx/lib64 and the receive-data-path
  manager v2.0.12 with `--gpu_nic_preset manual` (slurm-gcp tools/prologs-epilogs/
  receive-data-path-manager);
- what runs need: NCCL_GPUDIRECTTCPX_* with Ubuntu's names and CPU bindings (Cluster Toolkit
  a3-highgpu-8g/nccl-tests/run-nccl-tests.sh), the socket directory and plugin mounted at
  the same paths (the same directory's README);
- the expected bus bandwidth: about 71 GB/s on 2 nodes (Cluster Toolkit examples/
  gke-a3-highgpu/multi-node-test-plan.md).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml
from exportutil import export, write_export
from hostutil import Host
from test_conformance import oracle

from gpufleet.cli import main
from gpufleet.compile.compiler import compile_inputs
from gpufleet.compile.hostsetup import TCPX_PLUGIN_IMAGE, TCPX_RXDM_IMAGE, families, render
from gpufleet.evidence import burnin_task, pairs_task, task_for
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog

from planutil import TEST_KEY, by_type, named, plan_files, write

NET = "gcp:compute/network:Network"
FIREWALL = "gcp:compute/firewall:Firewall"
INSTANCE = "gcp:compute/instance:Instance"
POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"
IMAGE = "projects/p1/global/images/family/a3high-tcpx-image"
NICS = ["enp6s0", "enp12s0", "enp134s0", "enp140s0"]


def _files(tmp: Path, image: bool = True, extra: str = "") -> list[str]:
    tmp.mkdir(parents=True, exist_ok=True)
    backends = ("access:\n  ssh_public_key: " + TEST_KEY + "\nbackends:\n  - type: gcp\n"
                "    project_id: p1\n    ssh_cidrs: [203.0.113.0/24]\n"
                "    vm_service_account: nodes@p1.iam.gserviceaccount.com\n")
    fleet = ("type: fleet\nname: high\nnodes: 2\nplacement: cluster\nbackends: [gcp]\n"
             "spot_policy: on-demand\nresources:\n  gpu: H100:8\n" + extra)
    return [write(tmp, "b.yml", backends + (f"    tcpx_image: {IMAGE}\n" if image else "")),
            write(tmp, "f.yml", fleet)]


def _plan(tmp: Path) -> Any:
    [plan] = compile_inputs(validate_paths(_files(tmp)).inputs, load_catalog()).plans
    return plan


def test_a_two_node_a3_high_fleet_plans_its_networks_nics_placement_and_image(
        tmp_path: Path) -> None:
    files = _files(tmp_path)
    compiled = compile_inputs(validate_paths(files).inputs, load_catalog())
    assert [d.code for d in compiled.diagnostics] == []
    [plan] = compiled.plans
    assert (plan.instance_type, plan.rdma, plan.image) == ("a3-highgpu-8g", "gpudirect-tcpx",
                                                           IMAGE)
    assert plan.host_setup is not None and plan.host_setup.fabric == "gpudirect-tcpx"
    assert plan.host_setup.family == "custom-gpu"  # a user image: nothing assumed
    report = plan_files(files)
    nets = {n["name"]: n["inputs"] for n in by_type(report, NET)}
    assert sorted(nets) == ["high-gpu-1", "high-gpu-2", "high-gpu-3", "high-gpu-4", "high-net"]
    assert {n["mtu"] for n in nets.values()} == {8244}
    for i in range(1, 5):  # each GPU network admits its own subnet's range only
        rule = named(report, f"high-gpu-internal-{i}", FIREWALL)["inputs"]
        gpu_net = next(n for n in plan.networks if n.role == f"gpu-{i}")
        assert rule["sourceRanges"] == [gpu_net.cidr]
    assert [r["name"] for r in by_type(report, FIREWALL)
            if "0.0.0.0/0" in (r["inputs"].get("sourceRanges") or [])] == []
    for node in ("high-node-0", "high-node-1"):
        inputs = named(report, node, INSTANCE)["inputs"]
        nics = inputs["networkInterfaces"]
        assert [n["nicType"] for n in nics] == ["GVNIC"] * 5
        assert [n["subnetwork"].split("/")[-1].replace("-mock", "") for n in nics] == \
            ["high-subnet", *(f"high-gpu-subnet-{i}" for i in range(1, 5))]
        assert inputs["bootDisk"]["initializeParams"]["image"] == IMAGE
        assert inputs["serviceAccount"]["email"] == "nodes@p1.iam.gserviceaccount.com"
        script = inputs["metadata"]["startup-script"]
        assert TCPX_RXDM_IMAGE in script and "linux-gcp-tcpx" in script
    [policy] = by_type(report, POLICY)
    assert policy["inputs"]["groupPlacementPolicy"]["collocation"] == "COLLOCATED"


def test_without_the_tcpx_image_a3_high_is_refused_and_a3_edge_always(tmp_path: Path) -> None:
    def refusal(folder: str, image: bool, itype: str) -> str:
        files = _files(tmp_path / folder, image, f"instance_types: [{itype}]\n")
        compiled = compile_inputs(validate_paths(files).inputs, load_catalog())
        [diag] = [d for d in compiled.diagnostics if d.is_error]
        assert diag.code == "C015", diag
        return f"{diag.message} | {diag.hint}"

    high = refusal("a", False, "a3-highgpu-8g")
    assert "Google's TCPX kernel" in high and "set `tcpx_image` for gcp" in high
    edge = refusal("b", True, "a3-edgegpu-8g")  # the image does not unlock Edge
    assert "published for a3-highgpu-8g only" in edge and "tcpx_image" not in \
        edge.split(" | ")[1]
    # the cheapest H100 cluster without the image is not an A3 High
    [plan] = compile_inputs(validate_paths(_files(tmp_path / "c", False)).inputs,
                            load_catalog()).plans
    assert plan.instance_type != "a3-highgpu-8g"
    # a single A3 High node needs no TCPX: it boots gpufleet's default image
    single = _files(tmp_path / "d")
    Path(single[1]).write_text(Path(single[1]).read_text().replace(
        "placement: cluster\n", "").replace("nodes: 2", "nodes: 1") +
        "instance_types: [a3-highgpu-8g]\n")
    [plan] = compile_inputs(validate_paths(single).inputs, load_catalog()).plans
    assert plan.image != IMAGE and plan.host_setup.fabric == "none"


def _tcpx_host(tmp: Path, **env: str) -> Host:
    host = Host(tmp, ("docker", "nvidia-ctk", "nvidia-smi", "nvidia-runtime", "dcgmi"),
                PY=sys.executable, **env)
    stubs = {
        "docker": """
case "$1" in
  info) echo '{"nvidia":{},"runc":{}}' ;;
  version) echo 28.5.1 ;;
  inspect) if [ -e "$STATE/rxdm" ]; then echo true; else echo false; fi ;;
  rm) rm -f "$STATE/rxdm" ;;
  logs) echo "E1127 tcpgpudmarxd: header split is not enabled" ;;
  run) echo "$*" >> "$STATE/docker.log"
       case "$*" in
         *nccl-plugin-gpudirecttcpx*)
           [ -z "$FAKE_PLUGIN_FAIL" ] || exit 1
           lib=$(echo "$*" | sed -n 's/.*-v \\([^:]*\\):\\/var\\/lib .*/\\1/p')/tcpx/lib64
           mkdir -p "$lib" && touch "$lib/libnccl-net.so" ;;
         *tcpgpudmarxd*)
           touch "$STATE/rxdm"
           [ -n "$FAKE_RXDM_STUCK" ] || "$PY" -c "import socket, sys
socket.socket(socket.AF_UNIX).bind(sys.argv[1])" "$GPUFLEET_ROOT/run/tcpx/get_gpu_fd_0" ;;
       esac ;;
esac""",
        "uname": 'echo "${FAKE_KERNEL:-6.8.0-1015-gcp-tcpx}"',
        "gcloud": 'echo "$*" >> "$STATE/gcloud.log"',
    }
    host.stub(stubs, ("tr", "find"))
    for nic in NICS:
        if nic != env.get("FAKE_MISSING_NIC"):
            (host.root / "sys/class/net" / nic).mkdir(parents=True)
    wait = host.root / "usr/lib/systemd/systemd-networkd-wait-online"
    wait.parent.mkdir(parents=True)
    wait.write_text('#!/bin/bash\necho "$*" >> "$STATE/wait.log"\n[ -z "$FAKE_NOT_ROUTABLE" ]\n')
    wait.chmod(0o755)
    return host


SCRIPT = render(families()["custom-gpu"], "ubuntu", "gpudirect-tcpx")


def test_the_tcpx_host_setup_installs_and_starts_what_the_fabric_needs(
        tmp_path: Path) -> None:
    host = _tcpx_host(tmp_path)
    marker = host.ready(SCRIPT, "gpudirect-tcpx")
    assert marker["fabric_software"] == f"tcpx:{TCPX_PLUGIN_IMAGE}+{TCPX_RXDM_IMAGE}"
    assert host.log("wait") == [" ".join(f"--interface={n}" for n in NICS)
                                + " -o routable --timeout=120"]
    topo = (host.root / "opt/tcpdirect_benchmark/gpu_rxq_configuration.textproto").read_text()
    assert [line.split('"')[1] for line in topo.splitlines() if "ifname" in line] == NICS
    gpus = [line.split('"')[1] for line in topo.splitlines() if "gpu_pci_addr" in line]
    assert gpus == ["0000:04:00.0", "0000:05:00.0", "0000:0a:00.0", "0000:0b:00.0",
                    "0000:84:00.0", "0000:85:00.0", "0000:8a:00.0", "0000:8b:00.0"]
    assert topo.count("queue_ids: 8\n") == 4 and topo.count("queue_ids: 15\n") == 4
    assert topo.endswith("rss_set_size: 8\ntcpd_queue_size: 8\nmax_rx_rules: 100000\n")
    runs = host.log("docker")
    assert runs[0].endswith(f"{TCPX_PLUGIN_IMAGE} install --install-nccl")
    rxdm = runs[1]
    assert "--restart=unless-stopped --name receive-datapath-manager" in rxdm
    assert "--volume /run/tcpx:/run/tcpx" in rxdm
    assert "--entrypoint /tcpgpudmarxd/build/app/tcpgpudmarxd" in rxdm
    assert rxdm.endswith(f"{TCPX_RXDM_IMAGE} --gpu_nic_preset manual --gpu_nic_topology "
                         "/opt/tcpdirect_benchmark/gpu_rxq_configuration.textproto "
                         "--gpu_shmem_type fd --uds_path /run/tcpx")
    assert host.log("gcloud") == ["auth configure-docker --quiet us-docker.pkg.dev"]
    # the next boot: the plugin and the daemon are there; nothing runs again
    assert host.run(SCRIPT).returncode == 0
    assert len(host.log("docker")) == len(runs) and host.marker("ready")["status"] == "ready"


def test_a_tcpx_host_missing_a_piece_is_not_ready_and_says_which(tmp_path: Path) -> None:
    cases = {
        "FAKE_KERNEL": ("6.8.0-1025-gcp", "the running kernel 6.8.0-1025-gcp is not Google's "
                        "TCPX kernel (linux-gcp-tcpx)"),
        "FAKE_MISSING_NIC": ("enp134s0", "no GPU NIC enp134s0"),
        "FAKE_NOT_ROUTABLE": ("1", "the GPU NICs (enp6s0 enp12s0 enp134s0 enp140s0) are not "
                              "routable after 120 s"),
        "FAKE_PLUGIN_FAIL": ("1", f"cannot install the TCPX NCCL plugin from "
                             f"{TCPX_PLUGIN_IMAGE}"),
        "FAKE_RXDM_STUCK": ("1", "the receive-data-path manager opened no socket under "
                            "/run/tcpx in 120 s: E1127 tcpgpudmarxd: header split"),
    }
    for i, (flag, (value, reason)) in enumerate(cases.items()):
        _tcpx_host(tmp_path / str(i), **{flag: value}).fails(SCRIPT, reason)


def test_the_tasks_carry_the_plugin_environment_and_mounts(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    task, exp = task_for(plan)
    env = task["env"]
    assert env["NCCL_NET"] == "GPUDirectTCPX_v7"
    assert env["NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"].split(",") == NICS
    assert env["NCCL_GPUDIRECTTCPX_CTRL_DEV"] == env["NCCL_SOCKET_IFNAME"] == "enp0s12"
    assert env["NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX"] == "/run/tcpx"
    assert env["LD_LIBRARY_PATH"].startswith("/var/lib/tcpx/lib64:")
    mounts = [{"instance_path": p, "path": p} for p in ("/var/lib/tcpx/lib64", "/run/tcpx")]
    assert all(m in task["volumes"] for m in mounts) and task["shell"] == "bash"
    assert "no socket under /run/tcpx" in "\n".join(task["commands"])
    assert (exp.busbw_gbps, exp.nodes) == (70, 2) and "multi-node-test-plan.md" in exp.source
    pairs = pairs_task(plan)
    assert pairs is not None and "-x NCCL_GPUDIRECTTCPX_SOCKET_IFNAME" in pairs["commands"][-1]
    burnin = burnin_task(plan, "nvcr.io/nvidia/pytorch:24.12-py3")
    assert any("check=fabric want=gpudirect-tcpx" in c for c in burnin["commands"])
    assert all(m in burnin["volumes"] for m in mounts)


def test_export_hands_dstack_files_its_own_models_take(tmp_path: Path) -> None:
    state = write_export(tmp_path / "state.json", export(_files(tmp_path)))
    out = tmp_path / "out"
    assert main(["export", "dstack", "--state", state, "--out", str(out)]) == 0
    config = yaml.safe_load((out / "dstack-server-config.yml").read_text())
    [entry] = next(p["backends"] for p in config["projects"] if p["name"] == "high")
    assert entry["vm_service_account"] == "nodes@p1.iam.gserviceaccount.com"
    assert len(entry["extra_vpcs"]) == 4
    task = yaml.safe_load((out / "high-fabric.dstack.yml").read_text())
    assert task["fleets"] == ["high"] and task["nodes"] == 2
    assert task["env"]["NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX"] == "/run/tcpx"
    written = {p.name: p.read_text() for p in sorted(out.glob("*.yml"))}
    verdicts = oracle(written, {"dstack-server-config.yml": "server-config"})
    assert {n: v.get("error") for n, v in verdicts.items() if not v["ok"]} == {}
    assert {v["type"] for v in verdicts.values()} >= {"fleet", "task", "server-config"}
