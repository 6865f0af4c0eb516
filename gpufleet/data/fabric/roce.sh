# gpufleet host setup, the roce fabric's step (rendered into host-setup.sh when a
# cluster's fabric is roce): sets FABRIC_SOFTWARE or fails.
if ! any_file "$R"/usr/local/gib/lib64/libnccl-net*.so; then
  say "installing the gIB NCCL plugin (@@GIB_IMAGE@@)"
  mkdir -p "$R/usr/local/gib"
  # as Google's installer runs the image (an Alpine image: /bin/sh; the plugin lands in
  # /var/lib/gib): container-engine-accelerators, gpudirect-rdma/nccl-rdma-installer.yaml
  retry docker run --rm -v "$R/usr/local/gib:/target/gib" --entrypoint /bin/sh @@GIB_IMAGE@@ \
    -c '/scripts/container_entry.sh install --install-nccl && cp -a /var/lib/gib/. /target/gib/' \
    || fail "cannot install the gIB NCCL plugin from @@GIB_IMAGE@@"
fi
any_file "$R"/usr/local/gib/lib64/libnccl-net*.so || fail "no gIB NCCL plugin in /usr/local/gib/lib64: NCCL would not use RoCE"
[ -f "$R/usr/local/gib/scripts/set_nccl_env.sh" ] || fail "no /usr/local/gib/scripts/set_nccl_env.sh: the gIB install is incomplete"
FABRIC_SOFTWARE="gib:@@GIB_IMAGE@@"
