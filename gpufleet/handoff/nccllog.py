"""nccl-tests output -> the runs it holds (parse_log), and their verdict against the fleet's
expectation (verdict). A log that cannot be read says so (Unreadable): it never passes."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpufleet.handoff.acceptance import _NUMBER, HOST_NOT_READY, Expectation, fabric_facts

MAX_LOG_BYTES = 50 * 1024 * 1024


# nccl-tests prints plain ASCII numbers; anything else (exponents, `_`, other scripts' digits,
# nan, 5,000 digits) is not evidence it wrote. Python's float() would take them all.


_COUNT = re.compile(r"[0-9]{1,12}")


_ROW = re.compile(r"^\s*([0-9]{1,15})\s+([0-9]{1,15})\s+(\S+)\s+(\S+)\s+(-?[0-9]{1,12})\s+(.*)$")




_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\S+)\s+(\S+)")


_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S*)")


# What the task's first command prints on a node whose host setup is not ready.


_HOST = re.compile(rf"gpufleet acceptance: node (\S+): {HOST_NOT_READY}: (.*)")


# nccl-tests' "Using devices" lines: which rank ran on which host and GPU
_RANK = re.compile(r"^#\s*Rank\s+([0-9]{1,6})\s+Group\s+[0-9]+\s+Pid\s+[0-9]+\s+on\s+(\S+)\s+"
                   r"device\s+[0-9]+\s+\[[^\]]*\]\s+(.+?)\s*$")


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
    ranks: dict[int, tuple[str, str]] = field(default_factory=dict)  # rank -> (host, GPU)

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


def _read_rank(m: re.Match[str], number: int, log: NcclLog) -> None:
    """A rank line; the same rank on another host or GPU means two runs are mixed."""
    rank, where = int(m.group(1)), (m.group(2), m.group(3))
    if log.ranks.setdefault(rank, where) != where:
        log.problems.append(f"line {number}: rank {rank} is on {where[0]} here and on "
                            f"{log.ranks[rank][0]} before: two runs are mixed in this log")


def _row(m: re.Match[str]) -> Row:
    rest = m.group(6).split()
    if len(rest) != 8:
        raise Unreadable(f"{len(rest)} of 8 columns")
    for i in (0, 1, 4, 5):  # time and algbw of both sides must be numbers too
        _num(rest[i])
    if int(m.group(5)) < -1:
        raise Unreadable(m.group(5))
    return Row(int(m.group(1)), _num(rest[2]), _num(rest[6]), _wrong(rest[3]),
               _wrong(rest[7]))


def _read_summary(line: str, number: int, run: Run, log: NcclLog) -> bool:
    oob, avg = _OOB.match(line.strip()), _AVG.match(line.strip())
    if oob is not None:
        if _COUNT.fullmatch(oob.group(1)) and oob.group(2) in ("OK", "FAILED"):
            run.out_of_bounds = (int(oob.group(1)), oob.group(2))
        else:
            log.problems.append(f"line {number}: the out-of-bounds line cannot be read "
                                f"({line.strip()[:100]})")
        return True
    if avg is not None:
        try:
            run.avg_busbw = _num(avg.group(1))
        except Unreadable:
            log.problems.append(f"line {number}: the average bus bandwidth cannot be read "
                                f"({line.strip()[:100]})")
        return True
    return False


def _coverage(log: NcclLog, exp: Expectation) -> tuple[list[str], list[str]]:
    """(lines, why unreadable): the run spans every node the task was meant to, on the
    plan's GPU model. Counted from nccl-tests' rank lines, never taken on trust."""
    if not log.ranks:
        if exp.nodes > 1:
            return [], [f"no `# Rank ... on HOST` lines: which of the {exp.nodes} nodes ran "
                        "cannot be told (keep nccl-tests' whole output)"]
        return [], []
    hosts = sorted({h for h, _ in log.ranks.values()})
    lines = [f"the run spans {len(hosts)} node(s) ({', '.join(hosts[:4])}"
             f"{', ...' if len(hosts) > 4 else ''}), {len(log.ranks)} rank(s)"]
    if len(hosts) < exp.nodes:
        lines.append(f"FAIL: the run covers {len(hosts)} of {exp.nodes} nodes: the fabric "
                     "between the others was never used (run the acceptance task on every "
                     "node, or pass --nodes to judge fewer)")
    models = sorted({m for _, m in log.ranks.values()})
    if exp.gpu and any(exp.gpu.lower() not in m.lower() for m in models):
        lines.append(f"FAIL: the log's GPUs are {', '.join(models)}, the fleet's {exp.gpu}: "
                     "this is another fleet's log")
    return lines, []


@dataclass
class Verdict:
    code: int  # 0 pass, 1 fail, 2 unreadable
    lines: list[str]


def _size(n: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor} {unit}"
    return f"{n} B"


def _judge_run(run: Run, exp: Expectation, label: str) -> tuple[list[str], bool, list[str]]:
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
    coverage, missing = _coverage(log, exp)
    lines += coverage
    failed = failed or any(line.startswith("FAIL") for line in coverage)
    unreadable += missing
    if len(runs) > 1:
        lines.append(f"{len(runs)} runs in this log, judged one by one")
    for i, run in enumerate(runs, 1):
        label = f"run {i} (line {run.line}): " if len(runs) > 1 else ""
        more, bad, reasons = _judge_run(run, exp, label)
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
