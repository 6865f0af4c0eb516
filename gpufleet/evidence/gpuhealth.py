"""What a burn-in checks beyond DCGM's diagnostic: the faults background health checks miss.

Each is printed by the burn-in task as `gpufleet burn-in: node=R check=NAME key=value...`
and judged here:

- `idle` (per GPU): memory in use before anything runs; a GPU holding more than
  ``IDLE_FRACTION`` of its memory while idle has a leftover process or a stuck context on it;
- `rows` (per GPU): row remapping, which replaced retired pages on A100 and later (NVIDIA,
  "GPU Memory Error Management", Row Remapping): a remapping pending needs a GPU reset, a
  remapping failure means the GPU must be replaced; `gpu=all supported=no` on GPUs without it;
- `xid`: the NVRM Xid events in the kernel log since boot; the codes NVIDIA's Xid catalog
  marks as hardware or driver faults of the GPU or its links fail the node
  (docs.nvidia.com/deploy/xid-errors), application faults (13, 31, 43, ...) do not;
- `throttle` (per GPU): the clock event reasons sampled while the NCCL all-reduce loads the
  GPUs: a hardware, thermal or power-brake slowdown under load fails the node;
- `soak` (with a duration): the NCCL all-reduce repeated for that long, its lowest and highest
  bus bandwidth; a drop of more than the margin fails the node.

Pure: the task's commands are text, the judging reads parsed facts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpufleet.evidence.acceptance import strict_int, strict_number

IDLE_FRACTION = 0.05  # of the GPU's memory, in use while nothing runs
# Xid codes NVIDIA's catalog lists as the GPU's or its links' fault (not an application's):
# 48 double-bit ECC, 61/62 internal micro-controller faults, 63/64 row remapping (ECC page
# retirement) events and failures, 74 NVLink error, 79 fallen off the bus, 92 high
# single-bit ECC rate, 94/95 contained / uncontained ECC errors, 119/120 GSP errors,
# 140 unrecovered ECC error
HARDWARE_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})
THROTTLE_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
                    "sw_thermal_slowdown")
_ACTIVE = {"Active": True, "NotActive": False}
_YES_NO = {"Yes": True, "No": False}


@dataclass
class GpuHealth:
    """One node's facts of these checks."""

    idle: dict[int, int] = field(default_factory=dict)  # gpu -> MiB in use while idle
    rows: dict[int, tuple[bool, bool]] = field(default_factory=dict)  # gpu -> pending, failed
    rows_supported: bool | None = None
    xid_readable: bool | None = None
    xids: tuple[int, ...] = ()
    throttle: dict[int, tuple[str, ...]] = field(default_factory=dict)  # gpu -> active ones
    soak: tuple[int, float, float] | None = None  # rounds, lowest, highest busbw

    def said(self, check: str) -> bool:
        return {"idle": bool(self.idle), "rows": self.rows_supported is not None,
                "xid": self.xid_readable is not None, "throttle": bool(self.throttle),
                "soak": self.soak is not None}.get(check, False)


CHECKS = ("idle", "rows", "xid", "throttle", "soak")


def read(h: GpuHealth, check: str, kv: Mapping[str, str]) -> None:
    """One line into ``h``; KeyError or ValueError when it cannot be read."""
    if check == "idle":
        h.idle[strict_int(kv["gpu"])] = strict_int(kv["used_mib"])
    elif check == "rows":
        if kv["gpu"] == "all":
            if kv["supported"] != "no" or h.rows:
                raise ValueError(kv["supported"])
            h.rows_supported = False
            return
        if h.rows_supported is False:
            raise ValueError("rows after `supported=no`")
        gpu, row = strict_int(kv["gpu"]), (_YES_NO[kv["pending"]], _YES_NO[kv["failure"]])
        strict_int(kv["correctable"], 9), strict_int(kv["uncorrectable"], 9)  # read, all
        h.rows_supported, h.rows[gpu] = True, row
    elif check == "xid":  # read whole before anything is kept: a bad line keeps nothing
        readable = {"yes": True, "no": False}[kv["readable"]]
        codes = kv["codes"]
        xids = () if codes == "none" else tuple(strict_int(c, 4) for c in codes.split(","))
        if strict_int(kv["count"], 9) < len(xids):
            raise ValueError(kv["count"])
        h.xid_readable, h.xids = readable, xids
    elif check == "throttle":
        active = tuple(r for r in THROTTLE_REASONS if _ACTIVE[kv[r]])
        h.throttle[strict_int(kv["gpu"])] = active
    elif check == "soak":
        low, high = strict_number(kv["min_busbw"]), strict_number(kv["max_busbw"])
        if low > high:
            raise ValueError(kv["min_busbw"])
        h.soak = (strict_int(kv["rounds"], 6), low, high)
    else:
        raise ValueError(check)


def problems(h: GpuHealth, gpu_gib: float | None, margin: float) -> list[str]:
    """What these facts say is wrong with the node (each a reason to replace or reset it)."""
    why: list[str] = []
    limit = IDLE_FRACTION * gpu_gib * 1024 if gpu_gib else 2048
    why += [f"GPU {g} holds {mib} MiB while idle (a leftover process or a stuck context)"
            for g, mib in sorted(h.idle.items()) if mib > limit]
    why += [f"GPU {g}: a row remapping is pending (reset the GPU)"
            for g, (pending, failed) in sorted(h.rows.items()) if pending and not failed]
    why += [f"GPU {g}: row remapping failed (replace the node)"
            for g, (_, failed) in sorted(h.rows.items()) if failed]
    bad = sorted(set(h.xids) & HARDWARE_XIDS)
    if bad:
        why.append(f"Xid {', '.join(map(str, bad))} in the kernel log since boot (GPU or "
                   "link faults in NVIDIA's Xid catalog)")
    why += [f"GPU {g}: clocks held down under load ({', '.join(active)})"
            for g, active in sorted(h.throttle.items()) if active]
    if h.soak is not None:
        rounds, low, high = h.soak
        if high <= 0 or low < high * (1 - margin):
            why.append(f"the soak's busbw fell to {low:g} GB/s from {high:g} GB/s over "
                       f"{rounds} round(s) (margin {100 * margin:.0f}%)")
    return why


def incomplete(h: GpuHealth, gpus: int | None) -> list[str]:
    """What these checks should show and do not (no verdict): per-GPU lines missing, the
    kernel log unreadable."""
    out = []
    if h.xid_readable is False:
        out.append("its kernel log could not be read (no Xid verdict): run the task privileged")
    if gpus:
        for check, seen in (("idle", h.idle), ("throttle", h.throttle)):
            if seen and sorted(seen) != list(range(gpus)):
                out.append(f"`{check}` lines for {len(seen)} of {gpus} GPU(s)")
        if h.rows_supported and sorted(h.rows) != list(range(gpus)):
            out.append(f"`rows` lines for {len(h.rows)} of {gpus} GPU(s)")
    return out


def commands(say: str) -> tuple[list[str], str, str]:
    """(the commands before the load, the one starting the throttle sample before it, the
    one printing the sample after it). ``say`` opens an echo of a burn-in line."""
    before = [
        "nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits | tr -d ' ' "
        f'| while IFS=, read -r i used; do {say} check=idle gpu=$i used_mib=$used"; done',
        "rows=$(nvidia-smi --query-remapped-rows=remapped_rows.correctable,"
        "remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure "
        "--format=csv,noheader 2>/dev/null | tr -d ' ' | grep -v 'N/A')",
        f'if [ -z "$rows" ]; then {say} check=rows gpu=all supported=no"; else i=0; '
        'echo "$rows" | while IFS=, read -r c u p f; do '
        f'{say} check=rows gpu=$i correctable=$c uncorrectable=$u pending=$p failure=$f"; '
        "i=$((i + 1)); done; fi",
        "if dmesg > /dev/null 2>&1; then r=yes; else r=no; fi; "
        "n=$(dmesg 2>/dev/null | grep -c 'NVRM: Xid'); "
        "c=$(dmesg 2>/dev/null | sed -n 's/.*NVRM: Xid ([^)]*): \\([0-9]*\\),.*/\\1/p' "
        "| sort -un | paste -sd, -); "
        f'{say} check=xid readable=$r count=$n codes=${{c:-none}}"',
    ]
    fields = ",".join(f"clocks_throttle_reasons.{r}" for r in THROTTLE_REASONS)
    start = (f"(sleep 5; nvidia-smi --query-gpu=index,{fields} --format=csv,noheader "
             "> gpufleet-throttle.csv) &")
    after = ("wait; tr -d ' ' < gpufleet-throttle.csv | while IFS=, read -r i a b c d; "
             f'do {say} check=throttle gpu=$i {THROTTLE_REASONS[0]}=$a '
             f'{THROTTLE_REASONS[1]}=$b {THROTTLE_REASONS[2]}=$c {THROTTLE_REASONS[3]}=$d"; '
             "done")
    return before, start, after


def soak_duration(text: str) -> int:
    """A soak's length: whole seconds, minutes or hours (`90s`, `30m`, `2h`), at most a week;
    ValueError otherwise."""
    m = re.fullmatch(r"([0-9]{1,6})([smh]?)", text.strip())
    seconds = int(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)] if m else 0
    if not 0 < seconds <= 7 * 24 * 3600:
        raise ValueError(f"{text!r} is not a duration like 90s, 30m or 2h (at most a week)")
    return seconds


def soak_command(say: str, seconds: int, run: str) -> str:
    """``run`` (a single-node all-reduce printing its table) repeated for ``seconds``, and
    the lowest and highest peak bus bandwidth of its rounds."""
    return (f"end=$((SECONDS + {seconds})); k=0; lo=; hi=0; while [ $SECONDS -lt $end ]; do "
            f"bw=$({run} | awk '/^ +[0-9]+ +[0-9]+ +float/ {{if ($8 > m) m = $8}} "
            "END {print m + 0}'); k=$((k + 1)); "
            'lo=$(awk -v a="${lo:-$bw}" -v b="$bw" \'BEGIN {print (b < a) ? b : a}\'); '
            'hi=$(awk -v a="$hi" -v b="$bw" \'BEGIN {print (b > a) ? b : a}\'); done; '
            f'{say} check=soak rounds=$k min_busbw=${{lo:-0}} max_busbw=$hi"')
