# gpufleet host setup, the efa fabric's step (rendered into host-setup.sh when a
# cluster's fabric is efa): sets FABRIC_SOFTWARE or fails.
[ -x "$R/opt/amazon/efa/bin/fi_info" ] || fail "no EFA software (/opt/amazon/efa/bin/fi_info): the image lacks the EFA installer's libfabric"
"$R/opt/amazon/efa/bin/fi_info" -p efa > /dev/null 2>&1 || fail "libfabric sees no EFA device (fi_info -p efa)"
any_file "$R"/opt/amazon/ofi-nccl/lib*/libnccl-net*.so "$R"/opt/aws-ofi-nccl/lib/libnccl-net*.so \
  || fail "no aws-ofi-nccl plugin (/opt/amazon/ofi-nccl): NCCL would not use EFA"
FABRIC_SOFTWARE="efa+aws-ofi-nccl"
