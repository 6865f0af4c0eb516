#!/bin/bash
# gpufleet host setup (@@FAMILY@@): makes this node ready for a dstack SSH fleet.
# Checks Docker, the NVIDIA driver (CUDA >= @@CUDA_MAJOR@@.@@CUDA_MINOR@@), the NVIDIA Container
# Toolkit, NVIDIA DCGM and passwordless sudo for @@USER@@; installs only what is missing.
# Idempotent.
@@PRELUDE@@
mkdir -p "$R/etc/apt/keyrings" "$R/etc/apt/sources.list.d" "$R/etc/sudoers.d" "$R/usr/share/keyrings"
WANT_GPU=@@GPU@@
DOCKER_VERSION=@@DOCKER@@
NVIDIA_CTK_VERSION=@@CTK@@

# 1. the NVIDIA driver and its CUDA version (the image's job: never installed here)
DRIVER=none; CUDA=none
if [ "$WANT_GPU" = 1 ]; then
  command -v nvidia-smi > /dev/null || fail "no nvidia-smi: the image has no NVIDIA driver"
  retry nvidia-smi > /dev/null || fail "nvidia-smi fails: the driver is not loaded"
  DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n1)
  CUDA=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9]*\.[0-9]*\).*/\1/p' | head -n1)
  major=${CUDA%%.*}; minor=${CUDA#*.}
  if [ -z "$CUDA" ] || [ "$major" -lt @@CUDA_MAJOR@@ ] || \
     { [ "$major" -eq @@CUDA_MAJOR@@ ] && [ "$minor" -lt @@CUDA_MINOR@@ ]; }; then
    fail "driver $DRIVER supports CUDA ${CUDA:-unknown}; dstack needs @@CUDA_MAJOR@@.@@CUDA_MINOR@@ or newer"
  fi
fi

# 2. Docker, from download.docker.com at the pinned version when missing
if ! command -v docker > /dev/null; then
  say "installing docker-ce $DOCKER_VERSION"
  # shellcheck source=/dev/null
  . /etc/os-release
  retry apt_get update || fail "apt update failed"
  retry apt_get install ca-certificates curl gnupg || fail "apt cannot install curl/gnupg"
    retry curl -fsSL https://download.docker.com/linux/ubuntu/gpg -o "$R/etc/apt/keyrings/docker.asc" || fail "cannot download Docker's key"
  echo "deb [arch=$(dpkg --print-architecture) signed-by=/etc/apt/keyrings/docker.asc] https://download.docker.com/linux/ubuntu $VERSION_CODENAME stable" > "$R/etc/apt/sources.list.d/docker.list"
  retry apt_get update || fail "apt update failed after adding Docker's repository"
  PKG=$(apt-cache madison docker-ce | awk -v v="$DOCKER_VERSION" '$3 ~ "^5:"v"-" {print $3; exit}')
  [ -n "$PKG" ] || fail "docker-ce $DOCKER_VERSION is not in Docker's repository for $VERSION_CODENAME"
  retry apt_get install "docker-ce=$PKG" "docker-ce-cli=$PKG" containerd.io || fail "cannot install docker-ce $PKG"
fi
systemctl enable --now docker > /dev/null 2>&1 || fail "docker does not start"

# 3. the NVIDIA Container Toolkit, from nvidia.github.io at the pinned version when missing
if [ "$WANT_GPU" = 1 ]; then
  if ! command -v nvidia-ctk > /dev/null; then
    say "installing nvidia-container-toolkit $NVIDIA_CTK_VERSION"
    retry curl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey -o "$R@@DIR@@/nvidia-ctk.gpg" || fail "cannot download NVIDIA's key"
    gpg --batch --yes --dearmor -o "$R/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg" "$R@@DIR@@/nvidia-ctk.gpg" || fail "cannot read NVIDIA's key"
    echo "deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] https://nvidia.github.io/libnvidia-container/stable/deb/\$(ARCH) /" > "$R/etc/apt/sources.list.d/nvidia-container-toolkit.list"
    retry apt_get update || fail "apt update failed after adding NVIDIA's repository"
    V="$NVIDIA_CTK_VERSION-1"
    retry apt_get install "nvidia-container-toolkit=$V" "nvidia-container-toolkit-base=$V" \
      "libnvidia-container-tools=$V" "libnvidia-container1=$V" || fail "cannot install nvidia-container-toolkit $V"
  fi
  if ! docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q nvidia; then
    nvidia-ctk runtime configure --runtime=docker > /dev/null || fail "nvidia-ctk cannot configure Docker"
    systemctl restart docker || fail "docker does not restart with the NVIDIA runtime"
  fi
fi

# 3b. NVIDIA DCGM: dstack reads the GPUs' health from its host engine on SSH-fleet hosts
#     (dstack.ai/docs/concepts/fleets, "Health checks"); installed as NVIDIA's DCGM guide
#     does (docs.nvidia.com/datacenter/dcgm, "Installation": the CUDA repository,
#     datacenter-gpu-manager-4-cuda<the driver's CUDA major> with its recommends, and the
#     nvidia-dcgm service), then asked to list the GPUs
DCGM=none
if [ "$WANT_GPU" = 1 ]; then
  if ! command -v dcgmi > /dev/null; then
    say "installing NVIDIA DCGM (datacenter-gpu-manager-4-cuda$major)"
    # shellcheck source=/dev/null
    . /etc/os-release
    case "$(dpkg --print-architecture)" in arm64) NV_ARCH=sbsa ;; *) NV_ARCH=x86_64 ;; esac
    NV_REPO="https://developer.download.nvidia.com/compute/cuda/repos/ubuntu${VERSION_ID/./}/$NV_ARCH"
    if ! dpkg -s cuda-keyring > /dev/null 2>&1; then
      retry curl -fsSL "$NV_REPO/cuda-keyring_1.1-1_all.deb" -o "$R@@DIR@@/cuda-keyring.deb" || fail "cannot download NVIDIA's CUDA repository keyring ($NV_REPO)"
      dpkg -i "$R@@DIR@@/cuda-keyring.deb" > /dev/null || fail "cannot install NVIDIA's CUDA repository keyring"
    fi
    retry apt_get update || fail "apt update failed after adding NVIDIA's CUDA repository"
    retry apt_get install --install-recommends "datacenter-gpu-manager-4-cuda$major" || fail "cannot install datacenter-gpu-manager-4-cuda$major (NVIDIA DCGM)"
  fi
  systemctl enable --now nvidia-dcgm > /dev/null 2>&1 || fail "the nvidia-dcgm service does not start: DCGM's host engine, which dstack's health checks read"
  retry dcgmi discovery -l > /dev/null 2>&1 || fail "DCGM does not answer (dcgmi discovery -l): dstack cannot read the GPUs' health"
  DCGM=$(dcgmi --version 2>/dev/null | sed -n 's/.*[Vv]ersion *: *\([0-9][0-9.]*\).*/\1/p' | head -n1)
  DCGM=${DCGM:-unknown}
fi

# 4. the login user: passwordless sudo and the docker group
if id @@USER@@ > /dev/null 2>&1; then
  S="$R/etc/sudoers.d/90-gpufleet-@@USER@@"
  echo "@@USER@@ ALL=(ALL) NOPASSWD:ALL" > "$S.tmp"
  visudo -cf "$S.tmp" > /dev/null || fail "the sudoers entry does not parse"
  chmod 0440 "$S.tmp" && mv "$S.tmp" "$S"
  usermod -aG docker @@USER@@ || fail "cannot add @@USER@@ to the docker group"
else
  fail "no user @@USER@@ on this host"
fi

# 5. the cluster fabric's collective software: without it NCCL falls back to TCP on the
#    primary NIC, a fraction of the fabric's bandwidth, and says so only in its debug log
FABRIC=@@FABRIC@@
FABRIC_SOFTWARE=none
any_file() { for f in "$@"; do [ -e "$f" ] && return 0; done; return 1; }
@@FABRIC_STEPS@@
@@HANDOFF_STEPS@@

CTK=$(nvidia-ctk --version 2>/dev/null | sed -n 's/.*version \([0-9.]*\).*/\1/p' | head -n1)
printf 'status=ready\nfamily=@@FAMILY@@\nuser=@@USER@@\ndocker=%s\nnvidia_container_toolkit=%s\ndriver=%s\ncuda=%s\ndcgm=%s\nfabric=%s\nfabric_software=%s\n' \
  "$(docker version --format '{{.Server.Version}}' 2>/dev/null)" "${CTK:-none}" "$DRIVER" "$CUDA" "$DCGM" "$FABRIC" "$FABRIC_SOFTWARE" > "$R@@READY@@"
@@HANDOFF_MARKER@@
rm -f "$R@@FAILED@@"
say "ready (@@FAMILY@@): docker, driver $DRIVER, CUDA $CUDA, toolkit ${CTK:-none}, DCGM $DCGM, sudo for @@USER@@, fabric $FABRIC ($FABRIC_SOFTWARE)"
