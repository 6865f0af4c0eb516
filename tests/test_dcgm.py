"""NVIDIA DCGM on every GPU node (issue 56, point 1): dstack 0.22.5 reads an SSH-fleet host's
GPU health from DCGM's host engine (its server keeps the shim's `dcgm` health response:
server/schemas/health/dcgm.py, services/instances.py), so the host setup installs DCGM as
NVIDIA's guide does (the CUDA repository's datacenter-gpu-manager-4-cuda<major> with its
recommends, the nvidia-dcgm service) and is ready only when `dcgmi discovery -l` answers."""

from __future__ import annotations

from pathlib import Path

from hostutil import Host

from gpufleet.compile.hostsetup import families, render

from planutil import examples_plan_json

GCP = render(families()["gcp-ubuntu-accelerator"], "ubuntu")
ALL = ("docker", "nvidia-ctk", "nvidia-smi", "nvidia-runtime")


def test_a_gpu_host_without_dcgm_gets_it_started_and_asked(tmp_path: Path) -> None:
    host = Host(tmp_path, ALL)
    result = host.run(GCP)
    assert result.returncode == 0, result.stderr
    assert host.marker("ready")["dcgm"] == "4.4.1", host.marker("failed")
    assert any("install --install-recommends datacenter-gpu-manager-4-cuda12" in line
               for line in host.log("apt"))
    assert "enable --now nvidia-dcgm" in host.log("systemctl")
    # the next boot finds it: nothing installed again, the host engine asked again
    before = len(host.log("apt"))
    assert host.run(GCP).returncode == 0
    assert len(host.log("apt")) == before and host.marker("ready")["dcgm"] == "4.4.1"


def test_the_package_follows_the_drivers_cuda_major(tmp_path: Path) -> None:
    host = Host(tmp_path, ALL, FAKE_CUDA="13.0")
    assert host.run(GCP).returncode == 0
    assert any("datacenter-gpu-manager-4-cuda13" in line for line in host.log("apt"))


def test_a_host_engine_that_does_not_answer_fails_the_marker(tmp_path: Path) -> None:
    host = Host(tmp_path, (*ALL, "dcgmi"), FAKE_DCGM_DOWN="1")
    assert host.run(GCP).returncode == 0  # the machine still boots
    assert host.marker("ready") == {}
    assert host.marker("failed")["reason"] == (
        "DCGM does not answer (dcgmi discovery -l): dstack cannot read the GPUs' health")
    assert host.log("apt") == []  # it was there: nothing installed


def test_a_cpu_host_gets_no_dcgm(tmp_path: Path) -> None:
    host = Host(tmp_path, ("docker",))
    assert host.run(render(families()["ubuntu"], "ubuntu")).returncode == 0
    assert host.marker("ready")["dcgm"] == "none"
    assert not any("datacenter-gpu-manager" in line for line in host.log("apt"))


def test_the_plan_says_which_fleets_get_dcgm() -> None:
    fleets = {f["name"]: f for f in examples_plan_json()["fleets"]}
    gpu = {n for n, f in fleets.items() if f.get("host_setup") and f["host_setup"]["dcgm"]}
    assert {"a4", "a3mega", "h100-train", "nd-h100", "lambda-h100"} <= gpu
    assert all(f["gpu"] for n, f in fleets.items() if n in gpu)
