# gpufleet host setup, the gpudirect-tcpx fabric's step (rendered into host-setup.sh when a
# cluster's fabric is gpudirect-tcpx): sets FABRIC_SOFTWARE or fails.
# A3 High's GPUDirect-TCPX on Ubuntu, as Google's Slurm images set it up: the image boots
# Google's TCPX kernel (Cluster Toolkit, a3-highgpu-8g/a3high-slurm-blueprint.yaml; its PPA
# is opened by Google's staff, so the kernel is the image's and only verified here), the
# GPU NICs are routable before anything starts (the blueprint's delay-a3.service), the
# receive path reads its GPU-to-NIC map from gpu_rxq_configuration.textproto (the same
# blueprint), and the TCPX NCCL plugin and the receive-data-path manager run as slurm-gcp's
# receive-data-path-manager starts them
case "$(uname -r)" in
  *tcpx*) ;;
  *) fail "the running kernel $(uname -r) is not Google's TCPX kernel (linux-gcp-tcpx): boot the image named in tcpx_image, which must carry it" ;;
esac
GPU_NICS=(enp6s0 enp12s0 enp134s0 enp140s0)
for nic in "${GPU_NICS[@]}"; do
  [ -e "$R/sys/class/net/$nic" ] || fail "no GPU NIC $nic (an a3-highgpu-8g on Ubuntu names its 4 GPU NICs ${GPU_NICS[*]})"
done
WAIT_ONLINE="$R/usr/lib/systemd/systemd-networkd-wait-online"
if [ -x "$WAIT_ONLINE" ]; then
  "$WAIT_ONLINE" "${GPU_NICS[@]/#/--interface=}" -o routable --timeout=120 \
    || fail "the GPU NICs (${GPU_NICS[*]}) are not routable after 120 s"
fi
# the GPU-to-NIC map the receive path reads (PCI addresses of a3-highgpu-8g; each NIC
# serves two GPUs, queues 8-11 and 12-15), written unless the image carries one
TOPO_DIR="$R/opt/tcpdirect_benchmark"
TOPO="$TOPO_DIR/gpu_rxq_configuration.textproto"
if [ ! -s "$TOPO" ]; then
  mkdir -p "$TOPO_DIR"
  {
    for entry in "06 04 05 enp6s0" "0c 0a 0b enp12s0" "86 84 85 enp134s0" "8c 8a 8b enp140s0"; do
      read -r nic_bus gpu_a gpu_b ifname <<< "$entry"
      echo "gpu_rxq_configs {"
      first=8
      for gpu in "$gpu_a" "$gpu_b"; do
        printf '  gpu_infos {\n    gpu_pci_addr: "0000:%s:00.0"\n' "$gpu"
        for q in 0 1 2 3; do echo "    queue_ids: $((first + q))"; done
        echo "  }"
        first=$((first + 4))
      done
      printf '  nic_pci_addr: "0000:%s:00.0"\n  ifname: "%s"\n}\n' "$nic_bus" "$ifname"
    done
    printf 'rss_set_size: 8\ntcpd_queue_size: 8\nmax_rx_rules: 100000\n'
  } > "$TOPO.tmp" || fail "cannot write $TOPO"
  mv "$TOPO.tmp" "$TOPO" || fail "cannot write $TOPO"
fi
# Google's images, pulled with the node's service account where gcloud can lend it
command -v gcloud > /dev/null && gcloud auth configure-docker --quiet us-docker.pkg.dev > /dev/null 2>&1
if ! any_file "$R"/var/lib/tcpx/lib64/libnccl-net*.so; then
  say "installing the TCPX NCCL plugin (@@TCPX_PLUGIN@@)"
  retry docker run --rm --name nccl-installer --network=host -v "$R/var/lib:/var/lib" @@TCPX_PLUGIN@@ install --install-nccl \
    || fail "cannot install the TCPX NCCL plugin from @@TCPX_PLUGIN@@ (the nodes need Artifact Registry read access)"
fi
any_file "$R"/var/lib/tcpx/lib64/libnccl-net*.so || fail "no TCPX NCCL plugin in /var/lib/tcpx/lib64: NCCL would fall back to TCP"
mkdir -p "$R/run/tcpx"
if [ "$(docker inspect -f '{{.State.Running}}' receive-datapath-manager 2> /dev/null)" != true ]; then
  say "starting the receive-data-path manager (@@TCPX_RXDM@@)"
  docker rm -f receive-datapath-manager > /dev/null 2>&1
  retry docker run --detach --restart=unless-stopped --name receive-datapath-manager \
    --cap-add=NET_ADMIN --network=host --privileged --gpus all --ulimit memlock=-1 \
    --volume /opt/tcpdirect_benchmark:/opt/tcpdirect_benchmark --volume /run/tcpx:/run/tcpx \
    --env LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu \
    --entrypoint /tcpgpudmarxd/build/app/tcpgpudmarxd \
    @@TCPX_RXDM@@ --gpu_nic_preset manual \
    --gpu_nic_topology /opt/tcpdirect_benchmark/gpu_rxq_configuration.textproto \
    --gpu_shmem_type fd --uds_path /run/tcpx \
    || fail "cannot start the receive-data-path manager (@@TCPX_RXDM@@)"
fi
# ready when its sockets appear in /run/tcpx, the interface NCCL's plugin connects to
n=0
until [ -n "$(find "$R/run/tcpx" -maxdepth 1 -type s 2> /dev/null | head -n1)" ]; do
  n=$((n + 1))
  [ "$n" -le 60 ] || fail "the receive-data-path manager opened no socket under /run/tcpx in 120 s: $(docker logs --tail 2 receive-datapath-manager 2>&1 | tr '\n' ' ')"
  sleep 2
done
FABRIC_SOFTWARE="tcpx:@@TCPX_PLUGIN@@+@@TCPX_RXDM@@"
