# gpufleet host setup, the gpudirect-tcpxo fabric's step (rendered into host-setup.sh when a
# cluster's fabric is gpudirect-tcpxo): sets FABRIC_SOFTWARE or fails.
# A3 Mega's GPUDirect-TCPXO on Ubuntu, as Google's own images set it up: the dmabuf
# import helper (a DKMS module from gce-ai-infra's apt repository) and the aperture
# devices (cluster-toolkit, a3mega-slurm-image.yaml), then the FasTrak NCCL plugin and
# the receive-data-path manager (slurm-gcp, receive-data-path-manager-mega)
mkdir -p "$R/etc/modules-load.d" "$R/etc/udev/rules.d"
if ! modprobe import-helper 2> /dev/null; then
  say "installing the dmabuf import helper (dmabuf-import-helper, DKMS)"
  echo "deb [trusted=yes] http://packages.cloud.google.com/apt apt-transport-artifact-registry-stable main" > "$R/etc/apt/sources.list.d/artifact-registry.list"
  retry apt_get update || fail "apt update failed after adding apt-transport-artifact-registry"
  retry apt_get install dkms apt-transport-artifact-registry "linux-headers-$(uname -r)" || fail "cannot install dkms, apt-transport-artifact-registry and the kernel headers"
  echo "deb [arch=all trusted=yes] ar+https://us-apt.pkg.dev/projects/gce-ai-infra gpudirect-tcpxo-apt main" > "$R/etc/apt/sources.list.d/gpudirect-tcpxo.list"
  retry apt_get update || fail "apt cannot read gce-ai-infra's gpudirect-tcpxo-apt repository (the nodes' service account needs Artifact Registry read access: vm_service_account)"
  retry apt_get install dmabuf-import-helper || fail "cannot install dmabuf-import-helper"
  modprobe import-helper || fail "the import-helper module does not load: TCPXO cannot hand GPU memory to the NICs"
fi
echo import-helper > "$R/etc/modules-load.d/gpufleet-tcpxo.conf"  # before docker restarts RxDM
[ -e "$R/dev/dmabuf_import_helper" ] || fail "no /dev/dmabuf_import_helper after loading import-helper"
# each aperture device (PCI 1ae0:0084) bound under /dev/aperture_devices, writable
cat > "$R/etc/udev/rules.d/00-a3-megagpu.rules" <<'RULES'
ACTION=="add", SUBSYSTEM=="pci", ATTR{vendor}=="0x1ae0", ATTR{device}=="0x0084", TAG+="systemd", \
RUN+="/usr/bin/mkdir --mode=0755 -p /dev/aperture_devices", \
RUN+="/usr/bin/systemd-mount --type=none --options=bind --collect %S/%p /dev/aperture_devices/%k", \
RUN+="/usr/bin/bash -c '/usr/bin/chmod 0666 /dev/aperture_devices/%k/resource*'"
RULES
udevadm trigger --action=add --subsystem-match=pci --attr-match=vendor=0x1ae0 --attr-match=device=0x0084 && udevadm settle
set -- "$R"/dev/aperture_devices/*
[ -e "$1" ] || fail "no aperture devices under /dev/aperture_devices (PCI 1ae0:0084): is this an a3-megagpu-8g?"
# Google's images, pulled with the node's service account where gcloud can lend it
command -v gcloud > /dev/null && gcloud auth configure-docker --quiet us-docker.pkg.dev > /dev/null 2>&1
if ! any_file "$R"/var/lib/tcpxo/lib64/libnccl-net*.so || [ ! -f "$R/var/lib/tcpxo/lib64/nccl-env-profile.sh" ]; then
  say "installing the TCPXO NCCL plugin (@@TCPXO_PLUGIN@@)"
  retry docker run --rm --name nccl-installer --network=host -v "$R/var/lib:/var/lib" @@TCPXO_PLUGIN@@ install --install-nccl \
    || fail "cannot install the TCPXO NCCL plugin from @@TCPXO_PLUGIN@@ (the nodes need Artifact Registry read access)"
  # the profile assumes eth0..8; Ubuntu names the NICs enp*: point NCCL at the devices
  # (the variable is the profile's, expanded where it is sourced)
  # shellcheck disable=SC2016
  printf 'export NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY=/dev/aperture_devices\nexport LD_LIBRARY_PATH=/var/lib/tcpxo/lib64:${LD_LIBRARY_PATH}\n' >> "$R/var/lib/tcpxo/lib64/nccl-env-profile.sh"
fi
any_file "$R"/var/lib/tcpxo/lib64/libnccl-net*.so || fail "no TCPXO NCCL plugin in /var/lib/tcpxo/lib64: NCCL would fall back to TCP"
[ -f "$R/var/lib/tcpxo/lib64/nccl-env-profile.sh" ] || fail "no /var/lib/tcpxo/lib64/nccl-env-profile.sh: the plugin install is incomplete"
if [ "$(docker inspect -f '{{.State.Running}}' receive-datapath-manager 2> /dev/null)" != true ]; then
  say "starting the receive-data-path manager (@@TCPXO_RXDM@@)"
  docker rm -f receive-datapath-manager > /dev/null 2>&1
  retry docker run --detach --restart=unless-stopped --name receive-datapath-manager \
    --cap-add=NET_ADMIN --network=host --privileged --gpus all \
    --volume /dev/dmabuf_import_helper:/dev/dmabuf_import_helper \
    --env LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu \
    @@TCPXO_RXDM@@ --num_hops=2 --num_nics=8 --uid= --alsologtostderr \
    || fail "cannot start the receive-data-path manager (@@TCPXO_RXDM@@)"
fi
n=0
until docker logs receive-datapath-manager 2>&1 | grep -q "Buffer manager initialization complete"; do
  n=$((n + 1))
  [ "$n" -le 60 ] || fail "the receive-data-path manager did not finish initializing in 120 s: $(docker logs --tail 2 receive-datapath-manager 2>&1 | tr '\n' ' ')"
  sleep 2
done
FABRIC_SOFTWARE="tcpxo:@@TCPXO_PLUGIN@@+@@TCPXO_RXDM@@"
