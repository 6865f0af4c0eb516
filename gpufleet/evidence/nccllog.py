"""nccl-tests output -> the runs it holds (parse_log), and their verdict against the fleet's
expectation (verdict). A log that cannot be read says so (Unreadable): it never passes."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpufleet.compile import fabric_facts
from gpufleet.evidence.acceptance import _NUMBER, HOST_NOT_READY, Expectation
from gpufleet.evidence.ncclcover import coverage_of

MAX_LOG_BYTES = 50 * 1024 * 1024


# nccl-tests prints plain ASCII numbers; anything else (exponents, `_`, other scripts' digits,
# nan, 5,000 digits) is not evidence it wrote. Python's float() would take them all.


_COUNT = re.compile(r"[0-9]{1,12}")


_ROW = re.compile(r"^\s*([0-9]{1,15})\s+([0-9]{1,15})\s+(\S+)\s+(\S+)\s+(-?[0-9]{1,12})\s+(.*)$")




_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\S+)\s+(\S+)")


_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S*)")


# What the task's first command prints on a node whose host setup is not ready.


_HOST = re.compile(rf"gpufleet acceptance: node (\S+): {HOST_NOT_READY}: (.*)")


# nccl-tests' first line: the sizes it was told to run (every run of the log must hold each)
_HEADER = re.compile(r"^#\s*nThread\s+\d+.*?minBytes\s+([0-9]{1,15})\s+maxBytes\s+([0-9]{1,15})"
                     r"\s+step:\s+([0-9]{1,6})\(factor\)")


# nccl-tests' "Using devices" lines: which rank ran on which host and GPU
_RANK = re.compile(r"^#\s*Rank\s+([0-9]{1,6})\s+Group\s+[0-9]+\s+Pid\s+[0-9]+\s+on\s+(\S+)\s+"
                   r"device\s+([0-9]{1,3})\s+\[[^\]]*\]\s+(.+?)\s*$")


class Unreadable(ValueError):
    """A value nccl-tests would not have written."""


def _num(text: str) -> float:
    if not _NUMBER.fullmatch(text):
        raise Unreadable(text)
    return float(text)


def _wrong(text: str) -> int | None:
    if text.upper() == "N/A":
        return None
    if not _COUNT.fullmatch(text):
        raise Unreadable(text)
    return int(text)


@dataclass
class Row:
    size: int
    busbw_out: float
    busbw_in: float
    wrong_out: int | None
    wrong_in: int | None

    @property
    def busbw(self) -> float:
        return max(self.busbw_out, self.busbw_in)


@dataclass
class Run:
    """One all_reduce_perf table: its rows, and the lines nccl-tests ends a run with."""

    line: int  # where the table starts
    rows: list[Row] = field(default_factory=list)
    avg_busbw: float | None = None
    out_of_bounds: tuple[int, str] | None = None  # (count, "OK" or "FAILED")

    @property
    def peak(self) -> Row | None:
        return max(self.rows, key=lambda r: r.busbw) if self.rows else None

    def plateau(self, fraction: float = 0.95) -> int | None:
        """The smallest size from which bus bandwidth stays within ``fraction`` of the peak."""
        peak = self.peak
        if peak is None:
            return None
        start = None
        for r in self.rows:
            if r.busbw >= fraction * peak.busbw:
                start = r.size if start is None else start
            else:
                start = None
        return start

    def wrong(self) -> list[Row]:
        return [r for r in self.rows if (r.wrong_out or 0) > 0 or (r.wrong_in or 0) > 0]


@dataclass
class NcclLog:
    runs: list[Run] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # lines that cannot be read strictly
    too_big: bool = False  # larger than the read bound: the rest was not read
    hosts_not_ready: list[str] = field(default_factory=list)  # "node 1: reason"
    # per invocation of nccl-tests (each starts with its header): rank -> (host, GPU)
    rank_sets: list[dict[int, tuple[str, str]]] = field(default_factory=list)

    @property
    def ranks(self) -> dict[int, tuple[str, str]]:
        """The last invocation's ranks."""
        return self.rank_sets[-1] if self.rank_sets else {}
    sizes: tuple[int, ...] | None = None  # what the header says each run covers
    header_seen: bool = False  # a header since the last rank line
    devices: dict[tuple[str, int], int] = field(default_factory=dict)  # (host, GPU) -> rank

    def missing_sizes(self, run: Run) -> list[int]:
        return [s for s in self.sizes or () if s not in {r.size for r in run.rows}]

    @property
    def rows(self) -> list[Row]:
        return [r for run in self.runs for r in run.rows]


def parse_log(text: str, too_big: bool = False) -> NcclLog:
    """nccl-tests output: each table (size, count, type, redop, root, then time, algbw,
    busbw and #wrong out-of-place and in-place), ended by "# Out of bounds values : N OK"
    and "# Avg bus bandwidth : X". Lines of dstack and mpirun around it are ignored; a row or
    summary line that cannot be read strictly is a problem, never skipped; a table whose
    sizes go back down starts a new run, and a size that repeats means two runs are mixed."""
    log = NcclLog(too_big=too_big)
    run: Run | None = None
    for number, line in enumerate(text.splitlines(), 1):
        host = _HOST.search(line)
        if host is not None:
            log.hosts_not_ready.append(f"node {host.group(1)}: {host.group(2).strip()}")
            continue
        header = _HEADER.match(line.strip())
        if header is not None:
            _read_header(header, number, log)
            continue
        rank = _RANK.match(line.strip())
        if rank is not None:
            _read_rank(rank, number, log)
            continue
        if "#wrong" in line and "busbw" in line:
            run = Run(number)
            log.runs.append(run)
            continue
        if run is None:
            continue
        if _read_summary(line, number, run, log):
            continue
        m = _ROW.match(line)
        if m is None:
            continue
        try:
            row = _row(m)
        except Unreadable as e:
            log.problems.append(f"line {number}: {str(e)[:40]!r} is not a number nccl-tests "
                                f"writes ({line.strip()[:100]})")
            continue
        if run.rows and row.size <= run.rows[-1].size:
            if row.size == run.rows[-1].size:
                log.problems.append(f"line {number}: size {row.size} repeats: two runs are "
                                    "mixed in this log")
                continue
            run = Run(number)  # a second table without its header
            log.runs.append(run)
        run.rows.append(row)
    return log


def _read_header(m: re.Match[str], number: int, log: NcclLog) -> None:
    """The sizes the run was told to cover: minBytes up to maxBytes by the step factor."""
    low, high, factor = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if factor < 2 or low < 1 or high < low or high > 1 << 40:
        log.problems.append(f"line {number}: the header's sizes cannot be read "
                            f"({m.group(0)[:100]})")
        return
    sizes = []
    while low <= high:
        sizes.append(low)
        low *= factor
    if log.sizes is not None and tuple(sizes) != log.sizes:
        log.problems.append(f"line {number}: a second header with other sizes: two runs are "
                            "mixed in this log")
    log.sizes = tuple(sizes)
    log.header_seen = True  # rank lines after it may start a new invocation


def _read_rank(m: re.Match[str], number: int, log: NcclLog) -> None:
    """A rank line; the same rank again (on another host or the same) means two runs are
    mixed, or the line was repeated."""
    rank, where = int(m.group(1)), (m.group(2), m.group(4))
    if not log.rank_sets or (log.header_seen and rank in log.rank_sets[-1]):
        log.rank_sets.append({})  # nccl-tests ran again: it lists its ranks again
        log.devices.clear()
    log.header_seen = False
    ranks = log.rank_sets[-1]
    device = (m.group(2), int(m.group(3)))
    if log.devices.setdefault(device, rank) != rank:
        log.problems.append(f"line {number}: device {device[1]} of {device[0]} is rank "
                            f"{log.devices[device]} and rank {rank}")
    if rank in ranks and ranks[rank] == where:
        if not any("is listed twice" in p for p in log.problems):  # said once
            log.problems.append(f"line {number}: rank {rank} is listed twice (lines repeated, "
                                "or two runs interleaved)")
    elif ranks.setdefault(rank, where) != where:
        log.problems.append(f"line {number}: rank {rank} is on {where[0]} here and on "
                            f"{ranks[rank][0]} before: two runs are mixed in this log")


# nccl-tests' data types (bytes per element) and reduction ops
_TYPES = {"int8": 1, "uint8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "half": 2, "bfloat16": 2,
          "int32": 4, "uint32": 4, "float": 4, "int64": 8, "uint64": 8, "double": 8}
_OPS = ("sum", "prod", "max", "min", "avg", "none")


def _row(m: re.Match[str]) -> Row:
    rest = m.group(6).split()
    if len(rest) != 8:
        raise Unreadable(f"{len(rest)} of 8 columns")
    for i in (0, 1, 4, 5):  # time and algbw of both sides must be numbers too
        _num(rest[i])
    width = _TYPES.get(m.group(3))
    if width is None or m.group(4) not in _OPS:
        raise Unreadable(f"{m.group(3)} {m.group(4)}")
    if int(m.group(2)) * width != int(m.group(1)):  # count x element size is the size
        raise Unreadable(f"{m.group(2)} elements of {m.group(3)} are not {m.group(1)} bytes")
    if int(m.group(5)) < -1:
        raise Unreadable(m.group(5))
    return Row(int(m.group(1)), _num(rest[2]), _num(rest[6]), _wrong(rest[3]),
               _wrong(rest[7]))


def _read_summary(line: str, number: int, run: Run, log: NcclLog) -> bool:
    oob, avg = _OOB.match(line.strip()), _AVG.match(line.strip())
    if oob is not None:
        if run.out_of_bounds is not None:
            log.problems.append(f"line {number}: a second out-of-bounds line for one run")
        elif _COUNT.fullmatch(oob.group(1)) and oob.group(2) in ("OK", "FAILED"):
            run.out_of_bounds = (int(oob.group(1)), oob.group(2))
        else:
            log.problems.append(f"line {number}: the out-of-bounds line cannot be read "
                                f"({line.strip()[:100]})")
        return True
    if avg is not None:
        if run.avg_busbw is not None:
            log.problems.append(f"line {number}: a second average line for one run")
            return True
        try:
            run.avg_busbw = _num(avg.group(1))
        except Unreadable:
            log.problems.append(f"line {number}: the average bus bandwidth cannot be read "
                                f"({line.strip()[:100]})")
        return True
    return False


def embedded_failures(text: str) -> list[str]:
    """nccl-tests tables inside another task's log (burn-in, pairs), read by the same parser:
    what they prove wrong (#wrong > 0, out-of-bounds FAILED), whatever the task's own summary
    line says."""
    out = []
    # a task may print its table without nccl-tests' column header: rows count from the start
    for run in parse_log("# (rows) #wrong busbw\n" + text).runs:
        wrong = run.wrong()
        where = f"line {run.line - 1}" if run.line > 1 else "the start"
        if wrong:
            out.append(f"the nccl-tests table at {where} reports wrong results "
                       f"(#wrong > 0) at {', '.join(_size(r.size) for r in wrong[:3])}")
        if run.out_of_bounds is not None and run.out_of_bounds[1] == "FAILED":
            out.append(f"the nccl-tests table at {where} reports "
                       f"{run.out_of_bounds[0]} out-of-bounds value(s)")
    return out


@dataclass
class Verdict:
    code: int  # 0 pass, 1 fail, 2 unreadable
    lines: list[str]


def _size(n: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor} {unit}"
    return f"{n} B"


def _judge_run(run: Run, exp: Expectation, label: str, log: NcclLog
               ) -> tuple[list[str], bool, list[str]]:
    """(lines, failed, why unreadable) for one run."""
    peak = run.peak
    assert peak is not None
    lines = [f"{label}peak bus bandwidth: {peak.busbw:g} GB/s at {_size(peak.size)}"]
    plateau = run.plateau()
    if plateau is not None:
        lines.append(f"{label}bandwidth plateaus from {_size(plateau)} (within 5% of the peak)")
    unreadable: list[str] = []
    ceiling = float(fabric_facts()["max_busbw_gbps"])
    if peak.busbw > ceiling:
        unreadable.append(f"{label}a bus bandwidth of {peak.busbw:g} GB/s is more than any GPU "
                          f"interconnect carries ({ceiling:g} GB/s)")
    if run.avg_busbw is None:
        unreadable.append(f"{label}no 'Avg bus bandwidth' line: the run was cut off")
    else:
        lines.append(f"{label}average bus bandwidth (nccl-tests): {run.avg_busbw:g} GB/s")
    if run.out_of_bounds is None:
        unreadable.append(f"{label}no 'Out of bounds values' line: nccl-tests did not report "
                          "its correctness check (cut off, or not all_reduce_perf's output)")
    if all(r.wrong_out is None and r.wrong_in is None for r in run.rows):
        unreadable.append(f"{label}#wrong is N/A at every size: the results were not checked "
                          "(nccl-tests ran with -c 0); run it with -c 1")
    missing = log.missing_sizes(run)
    if missing:
        unreadable.append(f"{label}size(s) {', '.join(_size(s) for s in missing[:4])} missing "
                          "from the table the header announces")
    complete = not unreadable
    failed = False
    if run.out_of_bounds is not None and run.out_of_bounds[1] == "FAILED":
        failed = True
        lines.append(f"{label}FAIL: nccl-tests found {run.out_of_bounds[0]} out-of-bounds "
                     "value(s) (`# Out of bounds values : ... FAILED`)")
    wrong = run.wrong()
    if wrong:
        failed = True
        lines.append(f"{label}FAIL: wrong results (#wrong > 0) at " +
                     ", ".join(_size(r.size) for r in wrong[:5]))
    if peak.busbw <= 0:
        failed = True
        lines.append(f"{label}FAIL: a bus bandwidth of 0 at every size")
    if exp.threshold_gbps is not None and complete:  # a cut-off run is no bandwidth evidence
        if max(r.size for r in run.rows) < (1 << 30):
            lines.append(f"{label}note: the run stops below 1 GiB, where bus bandwidth has "
                         "not peaked yet")
        if peak.busbw < exp.threshold_gbps:
            failed = True
            lines.append(f"{label}FAIL: peak {peak.busbw:g} GB/s is below "
                         f"{exp.threshold_gbps:g} GB/s: check the RDMA NICs, their subnets, "
                         "the MTU and the NCCL plugin")
    return lines, failed, unreadable


def verdict(log: NcclLog, exp: Expectation) -> Verdict:
    """PASS only on complete, strictly readable evidence; certain failures (out-of-bounds,
    wrong results, low bandwidth) FAIL; anything that cannot be read is exit 2."""
    runs = [r for r in log.runs if r.rows]
    if log.hosts_not_ready:  # certain: the task stopped before NCCL on these nodes
        return Verdict(1, [f"FAIL: {h} (see /var/log/gpufleet-host-setup.log on the node)"
                           for h in log.hosts_not_ready] + ["FAIL"])
    if log.too_big:
        return Verdict(2, [f"unreadable log: larger than {MAX_LOG_BYTES // (1 << 20)} MB, and "
                           "gpufleet reads no more than that; keep the nccl-tests output only "
                           "(`dstack logs RUN > run.log`, then cut it to the table)"])
    if not runs:
        why = "no nccl-tests result table" if not log.runs else "the table has no rows"
        return Verdict(2, [f"unreadable log: {why} (was the run cut off before the first "
                           "size, or is this the wrong file?)", *log.problems[:3]])
    lines: list[str] = []
    failed = False
    unreadable: list[str] = list(log.problems)
    coverage, missing = coverage_of(log.rank_sets, log.sizes is not None, exp)
    lines += coverage
    failed = failed or any(line.startswith("FAIL") for line in coverage)
    unreadable += missing
    if len(runs) > 1:
        lines.append(f"{len(runs)} runs in this log, judged one by one")
    for i, run in enumerate(runs, 1):
        label = f"run {i} (line {run.line}): " if len(runs) > 1 else ""
        more, bad, reasons = _judge_run(run, exp, label, log)
        lines += more
        failed = failed or bad
        unreadable += reasons
    lines.append(exp.text())
    if failed:
        return Verdict(1, [*lines, *unreadable[:3], "FAIL"])
    if unreadable:
        return Verdict(2, [*lines, *(f"unreadable: {u}" for u in unreadable[:5]),
                           f"unreadable log: {len(unreadable)} problem(s); no verdict"])
    return Verdict(0, [*lines, "PASS"])
