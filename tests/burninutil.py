"""The burn-in task's commands run for real in bash against stand-ins for nvidia-smi, dcgmi,
dmesg and all_reduce_perf (each playing a node of the test's choosing)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

STUBS = {
    "nvidia-smi": """
case "$*" in
  -L) for i in $(seq 0 $((${FAKE_GPUS:-8} - 1))); do
        echo "GPU $i: NVIDIA B200 (UUID: GPU-$i)"; done ;;
  *memory.used*) for i in $(seq 0 $((${FAKE_GPUS:-8} - 1))); do
      used=0; [ "$i" = "${FAKE_BUSY_GPU:--1}" ] && used=40960
      echo "$i, $used"; done ;;
  *clocks_throttle_reasons*) for i in $(seq 0 $((${FAKE_GPUS:-8} - 1))); do
      t="Not Active"; [ "$i" = "${FAKE_HOT_GPU:--1}" ] && t="Active"
      echo "$i, Not Active, $t, Not Active, Not Active"; done ;;
  *--query-remapped-rows*) [ -n "$FAKE_NO_ROWS" ] && { echo "[N/A], [N/A], [N/A], [N/A]"; exit 0; }
      for i in $(seq 0 $((${FAKE_GPUS:-8} - 1))); do
      p=No; [ "$i" = "${FAKE_ROW_PENDING:--1}" ] && p=Yes
      echo "0, 0, $p, No"; done ;;
  *--query-gpu*) for i in $(seq 0 $((${FAKE_GPUS:-8} - 1))); do
      mem=183359; [ "$i" = "${FAKE_SMALL_GPU:--1}" ] && mem=81559
      ecc=0; [ "$i" = "${FAKE_ECC_GPU:--1}" ] && ecc=4
      echo "$i, $mem, $ecc, No"; done ;;
  topo*) echo "GPU0 X NV18" ;;
esac""",
    "dcgmi": 'echo "dcgmi $*"; exit "${FAKE_DCGM_RC:-0}"',
    # the kernel log: an Xid event where the test asks for one
    "dmesg": """
[ -z "$FAKE_DMESG_DENIED" ] || { echo "dmesg: read kernel buffer failed" >&2; exit 1; }
echo "[    5.1] nvidia: module loaded"
x="NVRM: Xid (PCI:0000:3b:00): $FAKE_XID, pid=1234, name=python"
[ -z "$FAKE_XID" ] || echo "[ 99.2] $x" """,
    "nv-hostengine": "true",
    "apt-get": "true",
    "sleep": "true",
    "hostname": 'echo "a4-node-${DSTACK_NODE_RANK}"',
    "all_reduce_perf": """
for exp in 30 31 32 33; do
  bw="${FAKE_BUSBW:-560.00}"
  printf '%12d %13d     float     sum      -1   100.00  300.00  %s      0' \\
    $((1 << exp)) $((1 << (exp - 2))) "$bw"
  printf '   99.00  300.00  %s      0\\n' "$bw"
done""",
}


def node_log(tmp: Path, task: dict[str, object], rank: int, **env: str) -> str:
    """One node's output: the task's commands in bash, the tools stood in for."""
    bin_dir = tmp / f"bin-{rank}"
    bin_dir.mkdir()
    for name, body in STUBS.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/bash\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    marker = tmp / "host"
    marker.mkdir(exist_ok=True)
    (marker / "host-ready").write_text(
        "status=ready\n" + (f"fabric_software={env.pop('FAKE_FABRIC_SOFTWARE', 'gib:v1')}\n"
                            if env.get("FAKE_FABRIC_SOFTWARE", "gib:v1") else ""))
    (marker / "mounts-ready").write_text("status=ready\na4-data=/mnt/data\n")
    script = "\n".join(str(c) for c in task["commands"])  # type: ignore[attr-defined]
    script = script.replace("/opt/nccl-tests/build/all_reduce_perf", str(bin_dir /
                                                                          "all_reduce_perf"))
    script = script.replace("/gpufleet-host", str(marker))
    path = tmp / f"node-{rank}.sh"
    path.write_text(script + "\n")
    system = ":".join(os.path.dirname(shutil.which(t) or "/bin") for t in ("sed", "awk", "tr"))
    result = subprocess.run(["/bin/bash", str(path)], capture_output=True, text=True,
                            timeout=60, check=False, cwd=tmp, env={
                                "PATH": f"{bin_dir}:{system}:/usr/bin:/bin",
                                "DSTACK_NODE_RANK": str(rank), **env})
    return result.stdout
