"""A fake node for the boot scripts: every command the script calls that would touch the
machine (apt-get, curl, docker, nvidia-smi, nvidia-ctk, systemctl, usermod, ...) is a stub on
PATH that records its arguments and plays a host of one image family; the files the script
writes go under GPUFLEET_ROOT."""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

CORE = ("mkdir", "rm", "chmod", "mv", "cp", "touch", "sed", "awk", "head",
        "cat", "grep", "tee", "dirname")
STUBS = {
    "nvidia-smi": """
case "$*" in
  *gpu_name*) printf '%b\n' "${FAKE_GPU_NAMES:-NVIDIA H100 80GB HBM3}" ;;
  *--query-gpu*) echo "${FAKE_DRIVER:-570.133.20}" ;;
  *) d=${FAKE_DRIVER:-570.133.20}
     echo "| NVIDIA-SMI $d  Driver Version: $d  CUDA Version: ${FAKE_CUDA:-12.8}  |" ;;
esac""",
    "docker": """
case "$1" in
  info) if [ -e "$STATE/nvidia-runtime" ]; then echo '{"nvidia":{},"runc":{}}'
        else echo '{"runc":{}}'; fi ;;
  version) echo "${FAKE_DOCKER:-28.5.1}" ;;
  run) echo "$*" >> "$STATE/docker.log"
       [ -z "$FAKE_GIB_FAIL" ] || exit 1
       # the nccl-plugin-gib image as Google's installer runs it (container-engine-
       # accelerators, gpudirect-rdma/nccl-rdma-installer.yaml): an Alpine image, so
       # /bin/sh and no /bin/bash; `container_entry.sh install --install-nccl` leaves the
       # plugin in /var/lib/gib, which the command must copy out through its mount
       shift; host=""; entry=""; script=""
       while [ $# -gt 0 ]; do
         case "$1" in
           -v) host=${2%%:*}; target=${2#*:}; shift 2 ;;
           --entrypoint) entry=$2; shift 2 ;;
           -c) script=$2; shift 2 ;;
           *) shift ;;
         esac
       done
       [ "$entry" = /bin/sh ] || { echo "exec: $entry: no such file or directory" >&2; exit 127; }
       case "$script" in
         *"/scripts/container_entry.sh install --install-nccl"*"cp -a /var/lib/gib/. $target/"*)
           mkdir -p "$host/lib64" "$host/scripts"
           touch "$host/lib64/libnccl-net_internal.so" "$host/scripts/set_nccl_env.sh" ;;
       esac ;;
esac""",
    "nvidia-ctk": """
case "$1" in
  --version) echo "NVIDIA Container Toolkit CLI version ${FAKE_CTK:-1.18.0}" ;;
  runtime) echo "$*" >> "$STATE/ctk.log"; touch "$STATE/nvidia-runtime" ;;
esac""",
    "apt-get": """
echo "$*" >> "$STATE/apt.log"
case "$*" in
  *docker-ce=*) cp "$STATE/stubs/docker" "$BIN/docker" ;;
esac
case "$*" in
  *nvidia-container-toolkit=*) cp "$STATE/stubs/nvidia-ctk" "$BIN/nvidia-ctk" ;;
esac
case "$*" in
  *datacenter-gpu-manager-4-cuda*) cp "$STATE/stubs/dcgmi" "$BIN/dcgmi" ;;
esac""",
    # NVIDIA DCGM's CLI: the GPUs it sees, and its version (DCGM 4's `dcgmi --version`)
    "dcgmi": """
case "$1" in
  discovery) if [ -n "$FAKE_DCGM_DOWN" ]; then
               echo "Error: unable to establish a connection to the specified host"; exit 1
             fi
             echo "8 GPUs found." ;;
  --version) echo "dcgmi  version: ${FAKE_DCGM:-4.4.1}" ;;
esac""",
    "apt-cache": """
for v in ${FAKE_DOCKER_REPO:-28.5.1 27.5.1}; do
  echo " docker-ce | 5:$v-1~ubuntu.22.04~jammy |" \
    "https://download.docker.com/linux/ubuntu jammy/stable amd64 Packages"
done""",
    "curl": 'while [ $# -gt 0 ]; do [ "$1" = -o ] && touch "$2"; shift; done',
    "gpg": 'while [ $# -gt 0 ]; do [ "$1" = -o ] && touch "$2"; shift; done',
    "dpkg": "echo amd64",
    "systemctl": 'echo "$*" >> "$STATE/systemctl.log"',
    "id": '[ "$1" = "${FAKE_USER:-ubuntu}" ]',
    "visudo": 'grep -q "NOPASSWD:ALL" "$2"',
    "usermod": 'echo "$*" >> "$STATE/usermod.log"',
    "sleep": "true",
    "python3": """
if [ "$1" = -m ] && [ "$2" = venv ]; then
  mkdir -p "$3/bin"; cp "$STATE/stubs/pip" "$3/bin/pip"
fi""",
    "pip": """
echo "$*" >> "$STATE/pip.log"
d=$(dirname "$0")
printf '#!/bin/bash\necho "dstack version %s"\n' "${FAKE_DSTACK:-0.22.5}" > "$d/dstack"
chmod +x "$d/dstack"
""",
}


class Host:
    """A fake node of one image family: which tools it has, and what the script leaves."""

    def __init__(self, tmp: Path, has: tuple[str, ...], **env: str) -> None:
        self.root, self.state, self.bin = tmp / "root", tmp / "state", tmp / "bin"
        for d in (self.root, self.state / "stubs", self.bin):
            d.mkdir(parents=True, exist_ok=True)
        for name in CORE:
            real = shutil.which(name)
            assert real is not None, name
            (self.bin / name).symlink_to(real)
        for name, body in STUBS.items():
            stub = self.state / "stubs" / name
            stub.write_text(f"#!/bin/bash\n{body}\n")
            stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
            if name not in ("docker", "nvidia-ctk", "nvidia-smi", "dcgmi") or name in has:
                shutil.copy(stub, self.bin / name)
        if "nvidia-runtime" in has:
            (self.state / "nvidia-runtime").touch()
        self.env = {"PATH": str(self.bin), "GPUFLEET_ROOT": str(self.root),
                    "STATE": str(self.state), "BIN": str(self.bin), **env}

    def stub(self, stubs: dict[str, str], tools: tuple[str, ...] = ()) -> None:
        """Replace (or add) commands on the fake node's PATH with these bash bodies, and link
        the real ``tools`` the script needs beside them."""
        for name, body in stubs.items():
            path = self.bin / name
            if path.exists() or path.is_symlink():
                path.unlink()
            path.write_text(f"#!/bin/bash\n{body}\n")
            path.chmod(0o755)
        for tool in tools:
            real = shutil.which(tool)
            assert real is not None, tool
            if not (self.bin / tool).exists():
                (self.bin / tool).symlink_to(real)

    def run(self, script: str) -> subprocess.CompletedProcess[str]:
        path = self.state / "setup.sh"
        path.write_text(script)
        return subprocess.run(["/bin/bash", str(path)], env=self.env, capture_output=True,
                              text=True, timeout=60, check=False)

    def ready(self, script: str, fabric: str) -> dict[str, str]:
        """Run ``script``; it must leave the ready marker for ``fabric`` (else show why)."""
        result = self.run(script)
        assert result.returncode == 0, result.stderr
        marker = self.marker("ready")
        assert marker.get("status") == "ready" and marker["fabric"] == fabric, \
            self.marker("failed")
        return marker

    def fails(self, script: str, reason: str) -> None:
        """Run ``script``: the node still boots, not ready, and the reason starts so."""
        assert self.run(script).returncode == 0
        assert self.marker("ready") == {}
        failed = self.marker("failed")
        assert failed["status"] == "failed" and failed["reason"].startswith(reason), failed

    def marker(self, which: str) -> dict[str, str]:
        path = self.root / "var/lib/gpufleet" / f"host-{which}"
        if not path.exists():
            return {}
        return dict(line.split("=", 1) for line in path.read_text().splitlines())

    def log(self, name: str) -> list[str]:
        path = self.state / f"{name}.log"
        return path.read_text().splitlines() if path.exists() else []
