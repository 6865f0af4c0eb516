# gpufleet host setup, the SkyPilot hand-off's step (rendered into host-setup.sh when the
# backends file hands the fleet to SkyPilot): checks what SkyPilot's SSH Node Pools need of a
# host, or fails. `sky ssh up` installs k3s over SSH (SkyPilot 0.14.1, sky/ssh_node_pools/
# deploy/deploy.py): it needs a Debian-based OS, nvidia-smi listing one GPU type per node
# (deploy/utils.py check_gpu) and no other Kubernetes on the host (SkyPilot's docs, "Deploy
# SkyPilot on existing machines").
[ -f "$R/etc/debian_version" ] || fail "SkyPilot's SSH Node Pools need a Debian-based OS (no /etc/debian_version)"
if [ "$WANT_GPU" = 1 ]; then
  GPU_TYPES=$(nvidia-smi --query-gpu=gpu_name --format=csv,noheader | sed 's/^ *//; s/ *$//' | sort -u | grep -c .)
  [ "$GPU_TYPES" = 1 ] || fail "SkyPilot takes one GPU type per node; nvidia-smi lists $GPU_TYPES"
fi
for unit in k3s k3s-agent; do
  f="$R/etc/systemd/system/$unit.service"
  # k3s that `sky ssh up` installed labels its node skypilot-ip=<host>; any other is not ours
  if [ -f "$f" ] && ! grep -q "skypilot-ip" "$f"; then
    fail "another Kubernetes runs here ($unit, not installed by sky ssh up): SkyPilot's SSH Node Pools install their own k3s"
  fi
done
for other in kubelet microk8s rke2; do
  if command -v "$other" > /dev/null; then
    fail "another Kubernetes is installed here ($other): SkyPilot's SSH Node Pools install their own k3s"
  fi
done
SKYPILOT=ready
