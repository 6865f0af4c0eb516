"""Test support for the evidence tests: nccl-tests logs written in nccl-tests' documented
output format (the size/count/type/redop/root table with time, algbw, busbw and #wrong for
out-of-place and in-place, the "Using devices" lines and the "Avg bus bandwidth" line), and
the A4 example's files."""

from __future__ import annotations

from planutil import EXAMPLES

__all__ = ["A4", "EXAMPLES", "HEADER", "log", "ranks", "row"]

HEADER = """# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 50
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""


def row(size: int, busbw: float, wrong: str = "0") -> str:
    count = size // 4
    return (f"{size:>12} {count:>13}     float     sum      -1   {100.0:8.2f}  "
            f"{busbw / 1.875:6.2f}  {busbw:6.2f}  {wrong:>5}   {99.0:8.2f}  "
            f"{busbw / 1.875:6.2f}  {busbw:6.2f}  {wrong:>5}")


def ranks(nodes: int = 2, gpu: str = "NVIDIA B200", gpus: int = 8) -> list[str]:
    """nccl-tests' "Using devices" lines: which rank ran on which host and GPU."""
    return ["# Using devices", *(
        f"#  Rank {r:2d} Group  0 Pid {1000 + r:5d} on a4-node-{r // gpus} device  {r % gpus} "
        f"[0x{r:02x}] {gpu}" for r in range(nodes * gpus))]


def log(peak: float, wrong_at: int | None = None, last: int = 33, avg: bool = True,
        nodes: int = 2, gpu: str = "NVIDIA B200") -> str:
    lines = ["[node-0] NCCL INFO NET/gIB : Using [0]mlx5_0 ...", *ranks(nodes, gpu),
             HEADER.rstrip("\n")]
    for exp in range(3, last + 1):
        size = 1 << exp
        bw = peak * min(1.0, size / (1 << 28))  # rises, then plateaus from 256 MiB
        lines.append(row(size, round(bw, 2), "3" if exp == wrong_at else "0"))
    lines.append("# Out of bounds values : 0 OK")
    if avg:
        lines.append(f"# Avg bus bandwidth    : {peak / 3:.4f} ")
    return "\n".join(lines) + "\n"


A4 = [str(EXAMPLES / "fleets" / "gcp-a4.dstack.yml"), str(EXAMPLES / "backends.yml")]
