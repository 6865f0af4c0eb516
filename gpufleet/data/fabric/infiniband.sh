# gpufleet host setup, the infiniband fabric's step (rendered into host-setup.sh when a
# cluster's fabric is infiniband): sets FABRIC_SOFTWARE or fails.
command -v ibv_devinfo > /dev/null || fail "no InfiniBand verbs tools (ibv_devinfo): use the HPC image"
ibv_devinfo -l 2>/dev/null | grep -q mlx5 || fail "no InfiniBand device (mlx5) is visible"
ldconfig -p | grep -q 'libnccl\.so' || fail "no NCCL library on the host: the HPC image ships it"
FABRIC_SOFTWARE="infiniband+nccl"
