"""Hosts ready for dstack's SSH fleets: the boot script every node runs.

dstack's requirements for SSH-fleet hosts (dstack.ai/docs/concepts/fleets, "SSH fleets"):
Docker, the NVIDIA driver with CUDA 12.1 or newer, the NVIDIA Container Toolkit, and
passwordless `sudo` for the SSH user. The images gpufleet boots differ in what they carry,
so one script, rendered per image family, checks each requirement and installs only what is
missing, from the vendors' own apt repositories at the versions pinned below. It is
idempotent (GCP runs a startup script on every boot), retries each download a bounded number
of times, and records the outcome in a marker file and on the serial console:

- ``/var/lib/gpufleet/host-ready``: ``status=ready`` and what it found or installed;
- ``/var/lib/gpufleet/host-failed``: ``status=failed`` and the reason (the node still boots).

`gpufleet acceptance` checks the marker on every node before its NCCL run.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from gpufleet.backends import all_backends, traits_of
from gpufleet.compile.design import (
    BucketMountDesign,
    FilesystemDesign,
    FleetDesign,
    HostSetupDesign,
    ServerDesign,
)
from gpufleet.compile.filesystems import services
from gpufleet.fileio import package_data
from gpufleet.traits import UBUNTU, ImageFamily

# The versions installed where an image lacks them: the one place they are named.
DOCKER_VERSION = "28.5.1"  # docker-ce from download.docker.com (apt, Ubuntu jammy/noble)
NVIDIA_CTK_VERSION = "1.18.0"  # nvidia-container-toolkit from nvidia.github.io
MIN_CUDA = (12, 1)  # dstack's floor for SSH-fleet hosts
# Google's gIB NCCL plugin for RoCE on A4 / A3 Ultra, installed on the host into
# /usr/local/gib as Google's own installer does (container-engine-accelerators,
# gpudirect-rdma/nccl-rdma-installer.yaml: the image run with /bin/sh (it is Alpine-based),
# `container_entry.sh install --install-nccl`, then /var/lib/gib copied to the host)
GIB_IMAGE = "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.0.6"
# GPUDirect-TCPXO on A3 Mega, at the versions Google's own Slurm images run
# (slurm-gcp, tools/prologs-epilogs/receive-data-path-manager-mega): the installer of the
# FasTrak NCCL plugin (into /var/lib/tcpxo/lib64) and the receive-data-path manager (RxDM)
TCPXO_PLUGIN_IMAGE = ("us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/"
                      "nccl-plugin-gpudirecttcpx-dev:v1.0.10")
TCPXO_RXDM_IMAGE = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.16"
# GPUDirect-TCPX on A3 High, at the versions Google's Slurm images run (slurm-gcp,
# tools/prologs-epilogs/receive-data-path-manager): the TCPX NCCL plugin's installer (into
# /var/lib/tcpx/lib64) and the receive-data-path manager
TCPX_PLUGIN_IMAGE = ("us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/"
                     "nccl-plugin-gpudirecttcpx-dev:v3.1.9-2.19.4-12.0")
TCPX_RXDM_IMAGE = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12"


@dataclass(frozen=True, slots=True)
class FabricSoftware:
    """What a cluster fabric needs on the host for NCCL to use it, and how it is got."""

    what: str
    how: str  # "installed" (pinned above) or "verified" (the image's own)
    source: str


# fabric -> its collective software: the one place they are named
FABRIC_SOFTWARE = {
    "roce": FabricSoftware("the gIB NCCL plugin (/usr/local/gib)", f"installed ({GIB_IMAGE})",
                           "cloud.google.com/ai-hypercomputer/docs (A4 / A3 Ultra: NCCL over "
                           "RoCE needs the gIB plugin)"),
    "gpudirect-tcpxo": FabricSoftware(
        "the dmabuf import helper, the aperture devices, the FasTrak NCCL plugin "
        "(/var/lib/tcpxo/lib64) and the receive-data-path manager",
        f"installed ({TCPXO_PLUGIN_IMAGE}, {TCPXO_RXDM_IMAGE}; dmabuf-import-helper from "
        "gce-ai-infra's gpudirect-tcpxo-apt)",
        "Cluster Toolkit examples/machine-learning/a3-megagpu-8g/slurm-a3mega-image.yaml "
        "(DKMS module, aperture udev rule) and slurm-gcp receive-data-path-manager-mega "
        "(plugin, RxDM)"),
    "gpudirect-tcpx": FabricSoftware(
        "Google's TCPX kernel (the image's), the GPU-NIC topology, the TCPX NCCL plugin "
        "(/var/lib/tcpx/lib64) and the receive-data-path manager (/run/tcpx)",
        f"installed ({TCPX_PLUGIN_IMAGE}, {TCPX_RXDM_IMAGE}; the kernel verified)",
        "Cluster Toolkit examples/machine-learning/a3-highgpu-8g/a3high-slurm-blueprint.yaml "
        "(TCPX kernel, gpu_rxq_configuration.textproto, the NICs it waits for) and slurm-gcp "
        "receive-data-path-manager (plugin, RxDM)"),
    "efa": FabricSoftware("EFA's libfabric and the aws-ofi-nccl plugin", "verified (the "
                          "Deep Learning AMI ships both)",
                          "docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start-nccl.html"),
    "infiniband": FabricSoftware("InfiniBand verbs (mlx5) and NCCL", "verified (the HPC image "
                                 "ships them)", "github.com/Azure/azhpc-images"),
}


def fabric_software(fabric: str) -> FabricSoftware | None:
    """What the host setup installs or checks for a cluster fabric (None: nothing)."""
    return FABRIC_SOFTWARE.get(fabric)


RETRIES = 5
MARKER_DIR = "/var/lib/gpufleet"
READY_MARKER = f"{MARKER_DIR}/host-ready"
FAILED_MARKER = f"{MARKER_DIR}/host-failed"
SERVER_READY = f"{MARKER_DIR}/server-ready"
SERVER_FAILED = f"{MARKER_DIR}/server-failed"
MOUNTS_READY = f"{MARKER_DIR}/mounts-ready"
MOUNTS_FAILED = f"{MARKER_DIR}/mounts-failed"
MOUNT_TRIES = 60  # x 30 s: a filesystem still being created gets half an hour
BUCKETS_READY = f"{MARKER_DIR}/buckets-ready"
BUCKETS_FAILED = f"{MARKER_DIR}/buckets-failed"


# the families every backend shares; each backend's default GPU image is its traits'
# (gpu_image)
SHARED_FAMILIES = (UBUNTU, ImageFamily("custom-gpu", True, "a user image: nothing assumed"),
                   ImageFamily("custom", False, "a user image: nothing assumed"))


@cache
def families() -> dict[str, ImageFamily]:
    """Every image family by name: the shared ones and each backend's GPU image."""
    return {f.name: f for f in (*(t.gpu_image for t in all_backends()), *SHARED_FAMILIES)}


def image_family(backend: str, gpu: bool, default_image: bool) -> ImageFamily:
    """The family of the image a fleet boots: gpufleet's default for the backend, or a user
    image (`image` / `os_images`), of which nothing is assumed."""
    if not default_image:
        return families()["custom-gpu" if gpu else "custom"]
    if not gpu:
        return UBUNTU
    return traits_of(backend).gpu_image


def render(family: ImageFamily, user: str, fabric: str = "none", skypilot: bool = False
           ) -> str:
    """The boot script (bash) for one family, login user, cluster fabric and hand-off, from
    gpufleet/data/host-setup.sh (its @@NAME@@ placeholders filled in)."""
    _check_user(user)
    # only the fleet's own fabric step (gpufleet/data/fabric/<fabric>.sh): a step added for
    # another fabric leaves every other fleet's boot script as it was
    steps = _template(f"fabric/{fabric}.sh").rstrip("\n") if fabric in FABRIC_SOFTWARE else ""
    text = _fill("host-setup.sh", "gpufleet-host-setup", READY_MARKER, FAILED_MARKER, {
        "FABRIC_STEPS": steps, "FAMILY": family.name, "USER": user,
        "GPU": "1" if family.gpu else "0",
        "DOCKER": DOCKER_VERSION, "CTK": NVIDIA_CTK_VERSION, "GIB_IMAGE": GIB_IMAGE,
        "TCPXO_PLUGIN": TCPXO_PLUGIN_IMAGE, "TCPXO_RXDM": TCPXO_RXDM_IMAGE,
        "TCPX_PLUGIN": TCPX_PLUGIN_IMAGE, "TCPX_RXDM": TCPX_RXDM_IMAGE,
        "FABRIC": fabric if fabric in FABRIC_SOFTWARE else "none",
        "CUDA_MAJOR": str(MIN_CUDA[0]), "CUDA_MINOR": str(MIN_CUDA[1])})
    # the SkyPilot hand-off's checks, only in the scripts of fleets handed to SkyPilot (the
    # lines vanish from every other script, which stays byte for byte as it was)
    step = _template("handoff/skypilot.sh").rstrip("\n") + "\n" if skypilot else ""
    marker = f'echo "skypilot=$SKYPILOT" >> "$R{READY_MARKER}"\n' if skypilot else ""
    return text.replace("@@HANDOFF_STEPS@@\n", step).replace("@@HANDOFF_MARKER@@\n", marker)


def with_fabric(plan: FleetDesign, skypilot: bool = False) -> FleetDesign:
    """A cluster's host setup also installs or checks its fabric's collective software; a
    fleet handed to SkyPilot's also checks what SkyPilot needs of a host."""
    fabric = plan.rdma if plan.placement is not None and plan.rdma in FABRIC_SOFTWARE \
        else "none"
    if plan.host_setup is None or (fabric == "none" and not skypilot):
        return plan
    hs = plan.host_setup
    script = render(families()[hs.family], hs.user, fabric, skypilot)
    return dataclasses.replace(plan, host_setup=dataclasses.replace(
        hs, fabric=fabric, digest=digest(script), skypilot=skypilot or None))


def render_server(server: ServerDesign) -> str:
    """The control plane's boot script: dstack ``server.dstack_version`` as a systemd
    service on ``server.port``, from gpufleet/data/dstack-server.sh."""
    _check_user(server.user)
    if not all(part.isdigit() for part in server.dstack_version.split(".")):
        raise ValueError(f"not a dstack version: {server.dstack_version!r}")
    return _fill("dstack-server.sh", "gpufleet-dstack-server", SERVER_READY, SERVER_FAILED,
                 {"VERSION": server.dstack_version, "PORT": str(server.port),
                  "USER": server.user})


def _check_user(user: str) -> None:
    if not user or not user.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"not a login user name: {user!r}")


def _fill(name: str, tag: str, ready: str, failed: str, values: dict[str, str]) -> str:
    text = _template(name).replace("@@PRELUDE@@", _template("prelude.sh").rstrip("\n"))
    for key, value in {**values, "TAG": tag, "RETRIES": str(RETRIES), "DIR": MARKER_DIR,
                       "READY": ready, "FAILED": failed}.items():
        text = text.replace(f"@@{key}@@", value)
    return text


@cache
def _template(name: str) -> str:
    return package_data(*name.split("/")).read_text(encoding="utf-8")


def digest(script: str) -> str:
    return "sha256:" + hashlib.sha256(script.encode()).hexdigest()[:16]


def host_setup_plan(backend: str, settings: Mapping[str, Any], gpu: bool,
                    default_image: bool, user: str) -> HostSetupDesign | None:
    """The fleet's boot script, unless the backends file says `host_setup: none`."""
    if settings.get("host_setup") == "none":
        return None
    family = image_family(backend, gpu, default_image)
    return HostSetupDesign(family.name, user, digest(render(family, user)))


def script_for(plan: HostSetupDesign) -> str:
    """The script a plan names (the components put it into user data / metadata)."""
    return render(families()[plan.family], plan.user, plan.fabric, bool(plan.skypilot))


def target_placeholder(fs: FilesystemDesign) -> str:
    """What stands for a filesystem's mount target until the stack knows it."""
    return f"@@TARGET:{fs.name}@@"


def render_mounts(backend: str, mounts: Sequence[FilesystemDesign],
                  targets: Mapping[str, str]) -> str:
    """The mount script of a fleet's filesystems, their targets (`dns@tcp:/name`,
    `host:/export`) filled in from ``targets`` (by name; the placeholder where missing)."""
    lines = []
    for fs in mounts:
        target = targets.get(fs.name, target_placeholder(fs))
        for part in (fs.name, target, fs.mount):
            if not part or any(ch.isspace() or ch in "'\\$`" for ch in part):
                raise ValueError(f"filesystem {fs.name}: {part!r} cannot go into the script")
        options = services()[fs.service].mount_options
        lines.append(f"{fs.name} {fs.kind} {target} {fs.mount} {options}")
    return _fill("mount.sh", "gpufleet-mount", MOUNTS_READY, MOUNTS_FAILED, {
        "BACKEND": backend, "MOUNTS": "\n".join(lines), "MOUNT_TRIES": str(MOUNT_TRIES)})


def render_bucket_mounts(mounts: Sequence[BucketMountDesign], secrets: str = "none") -> str:
    """The script mounting a fleet's buckets with their FUSE clients (data/bucket-mount.sh);
    ``secrets``: the reader of the nodes' secret store (an R2 mount's credentials)."""
    lines = []
    for m in mounts:
        parts = (m.bucket, m.client, m.region, m.path, "ro" if m.read_only else "rw",
                 m.account or "-", m.secret or "-", m.secret_where or "-")
        if any(not p or any(ch.isspace() or ch in "'\\$`" for ch in p) for p in parts):
            raise ValueError(f"bucket {m.bucket}: {parts!r} cannot go into the script")
        lines.append(" ".join(parts))
    return _fill("bucket-mount.sh", "gpufleet-buckets", BUCKETS_READY, BUCKETS_FAILED,
                 {"BUCKETS": "\n".join(lines), "MOUNT_TRIES": str(MOUNT_TRIES),
                  "SECRETS": secrets})


def node_script(plan: FleetDesign, targets: Mapping[str, str] | None = None) -> str | None:
    """Everything a node runs at boot: the host setup, the mounts of its filesystems and of
    its buckets (a wrapper writing each out and running them in turn), or the host setup
    alone."""
    host = script_for(plan.host_setup) if plan.host_setup is not None else None
    services = {s.key: s for s in traits_of(plan.backend).filesystems.values()}
    ours = [f for f in plan.filesystems if not services[f.service].mounted_at_launch]
    if not ours and not plan.buckets:
        return host
    mounts = render_mounts(plan.backend, ours, targets or {}) if ours else None
    store = traits_of(plan.backend).secret_store
    buckets = render_bucket_mounts(plan.buckets, store.fetch if store else "none") \
        if plan.buckets else None
    parts = ["#!/bin/bash",
             "# gpufleet node boot script: the host setup, then the shared filesystems"
             + (" and the buckets" if buckets else ""),
             f"mkdir -p {MARKER_DIR}"]
    run = []
    for name, text in (("host-setup.sh", host), ("mount.sh", mounts),
                       ("bucket-mount.sh", buckets)):
        if text is None:
            continue
        tag = f"GPUFLEET_{name.split('.')[0].upper().replace('-', '_')}_EOF"
        parts += [f"cat > {MARKER_DIR}/{name} <<'{tag}'", text.rstrip("\n"), tag]
        run.append(f"bash {MARKER_DIR}/{name}")
    return "\n".join([*parts, *run]) + "\n"
