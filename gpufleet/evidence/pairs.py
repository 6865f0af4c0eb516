"""Finding the node that makes the collective slow: NCCL all-reduce over pairs of nodes, and
the check of its log.

The pairs task runs on every node of the fleet; its first node runs nccl-tests once per pair
of neighbours in a ring of the nodes (0-1, 1-2, ..., n-1 - 0), one pair at a time so the
pairs do not share the fabric, and prints `gpufleet pairs: a=I b=J host_a=IP host_b=IP
busbw=X rc=N` per pair. Every node is in two pairs: a node whose pairs are *all* slow (under
the pass mark, or more than ``margin`` under the fastest pair, or failed) is named; a slow
pair whose two nodes each have a good pair elsewhere points at the link between them. With
two nodes there is one pair and nothing to compare: it is judged against the pass mark only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpufleet.compile import FleetDesign, run_setup
from gpufleet.evidence.acceptance import (
    FROM_SETUP,
    Expectation,
    strict_int,
    strict_number,
    tagged_lines,
    task_for,
)
from gpufleet.evidence.nccllog import embedded_failures
from gpufleet.evidence.order import crossing

PREFIX = "gpufleet pairs:"
_IP = re.compile(r"[0-9A-Za-z.:-]{1,64}")


def pairs_task(plan: FleetDesign) -> dict[str, Any] | None:
    """The dstack task (as data), or None for a fleet whose nodes share no RDMA fabric (or of
    one node): there is no inter-node collective to make slow."""
    task, exp = task_for(plan)
    if not exp.multi_node:
        return None
    env = task["env"]
    setup = bool(run_setup(plan.rdma))  # the fabric's own settings script (fabrics.json)
    exports = " ".join(f"-x {k}" for k in sorted(env)) + (FROM_SETUP if setup else "")
    run = (
        'if [ "$DSTACK_NODE_RANK" -eq 0 ]; then\n'
        '  mapfile -t ips <<< "$DSTACK_NODES_IPS"; n=${#ips[@]}; g=$DSTACK_GPUS_PER_NODE\n'
        "  for i in $(seq 0 $((n - 1))); do\n"
        "    j=$(( (i + 1) % n )); [ \"$n\" -eq 2 ] && [ \"$i\" -eq 1 ] && break\n"
        "    mpirun --allow-run-as-root -H \"${ips[$i]}:$g,${ips[$j]}:$g\" -n $((2 * g)) "
        f"-N \"$g\" --bind-to none {exports} /opt/nccl-tests/build/all_reduce_perf "
        "-b 1G -e 4G -f 2 -g 1 -c 1 -n 20 > gpufleet-pair.log 2>&1; rc=$?\n"
        "    cat gpufleet-pair.log\n"
        "    bw=$(awk '/^ +[0-9]+ +[0-9]+ +float/ {if ($8 > m) m = $8} END {print m + 0}' "
        "gpufleet-pair.log)\n"
        f'    echo "{PREFIX} a=$i b=$j host_a=${{ips[$i]}} host_b=${{ips[$j]}} busbw=$bw '
        'rc=$rc"\n'
        "  done\n"
        f'  echo "{PREFIX} done nodes=$n"\n'
        "else\n  sleep infinity\nfi")
    commands = [c for c in task["commands"] if not c.startswith(("if [ \"$DSTACK_NODE_RANK",
                                                                 "/opt/nccl-tests"))]
    # bash: `mapfile` is not in the image's /bin/sh (dash), dstack's default with an image
    return {**task, "name": f"{plan.name[:29]}-pairs", "shell": "bash",
            "commands": [*commands, run]}


@dataclass(frozen=True, slots=True)
class PairRun:
    a: int
    b: int
    host_a: str
    host_b: str
    busbw: float
    rc: int

    @property
    def failed(self) -> bool:
        return self.rc != 0 or self.busbw <= 0


def is_pairs_log(text: str) -> bool:
    return PREFIX in text


def parse_pairs(text: str) -> tuple[list[PairRun], int | None, list[str]]:
    """(the pair runs, the node count of the `done` line or None, what cannot be read)."""
    runs: list[PairRun] = []
    done: int | None = None
    problems: list[str] = []
    for number, body, kv in tagged_lines(text, PREFIX):
        try:
            if body.startswith("done "):
                if done is not None:
                    problems.append(f"line {number}: a second `done` line (two runs in one "
                                    "log?)")
                done = strict_int(kv["nodes"], 6)
                continue
            if not (_IP.fullmatch(kv["host_a"]) and _IP.fullmatch(kv["host_b"])):
                raise ValueError(body)
            runs.append(PairRun(strict_int(kv["a"], 6), strict_int(kv["b"], 6), kv["host_a"],
                                kv["host_b"], strict_number(kv["busbw"]),
                                strict_int(kv["rc"], 6)))
        except (KeyError, ValueError):
            problems.append(f"line {number}: not a pairs line gpufleet writes ({body[:80]})")
    return runs, done, problems


def _ring_problems(runs: list[PairRun], n: int, want: int) -> list[str]:
    """Each pair of the task's ring (node i with node i+1, the last with the first) exactly
    once: a pair reported twice, or one the ring has not, proves nothing about the others."""
    ring = {(i, (i + 1) % n) for i in range(want)}
    got = [(r.a, r.b) for r in runs]
    out = [f"pair {a}-{b} is reported {got.count((a, b))} times" for a, b in sorted(set(got))
           if got.count((a, b)) > 1]
    out += [f"pair {a}-{b} is not one of the task's ring" for a, b in sorted(set(got) - ring)]
    out += [f"pair {a}-{b} never reported" for a, b in sorted(ring - set(got))]
    return out


def judge_pairs(text: str, nodes_planned: int, exp: Expectation, margin: float,
                positions: Mapping[str, tuple[str, ...]] | None = None
                ) -> tuple[int, list[str]]:
    """(exit code, lines): 0 no slow pair, 1 the node(s) or link(s) named, 2 no verdict.
    ``positions``: address -> topology layers: a slow link says the layer it crosses."""
    runs, done, problems = parse_pairs(text)
    if done is None:
        problems.append("no `done` line: the task did not finish (or the log is cut off)")
    n = done or 0
    want = 1 if n == 2 else n
    if done is not None and len(runs) != want:
        problems.append(f"{len(runs)} pair run(s) for {n} nodes, the task runs {want}")
    problems += _ring_problems(runs, n, want) if done is not None else []
    if done is not None and n < nodes_planned:
        problems.append(f"the task ran on {n} node(s), the fleet has {nodes_planned}")
    embedded = embedded_failures(text)
    if embedded:  # the tables' own correctness check, whatever a pair line says
        return 1, [*(f"FAIL: {e}" for e in embedded), "FAIL"]
    if problems or not runs:
        return 2, [*(f"unreadable: {p}" for p in problems[:5]),
                   "no verdict: the pairs log is incomplete"]
    # The fastest pair is the reference: with a bad node in a ring of three, two of the three
    # pairs are slow and their median would be a slow one.
    best = max((r.busbw for r in runs if not r.failed), default=0.0)
    mark = exp.threshold_gbps

    def slow(r: PairRun) -> str | None:
        if r.failed:
            return f"the run failed (exit {r.rc})" if r.rc else "no bandwidth measured"
        if mark is not None and r.busbw < mark:
            return f"{r.busbw:g} GB/s, under the pass mark {mark:g} GB/s"
        if len(runs) > 1 and r.busbw < best * (1 - margin):
            return (f"{r.busbw:g} GB/s, {100 * (1 - r.busbw / best):.0f}% under the fastest "
                    f"pair's {best:g} GB/s")
        return None

    why = {(r.a, r.b): slow(r) for r in runs}
    lines = [f"pair {r.a}-{r.b} ({r.host_a}, {r.host_b}): {r.busbw:g} GB/s"
             + (f"  SLOW: {w}" if (w := why[(r.a, r.b)]) else "") for r in runs]
    hosts = {r.a: r.host_a for r in runs} | {r.b: r.host_b for r in runs}
    named = sorted(i for i in hosts
                   if all(why[(r.a, r.b)] for r in runs if i in (r.a, r.b)))
    links = [r for r in runs if why[(r.a, r.b)] and r.a not in named and r.b not in named]
    if len(runs) == 1 and named:
        lines.append(f"FAIL: nodes {runs[0].host_a} and {runs[0].host_b}: the only pair is "
                     "slow; with two nodes the pair cannot say which (their burn-in logs can)")
        return 1, lines
    if named or links:
        lines += [f"FAIL node {i} ({hosts[i]}): every pair it is in is slow" for i in named]
        lines += [f"FAIL link {r.a}-{r.b} ({r.host_a}, {r.host_b}): slow while both nodes are "
                  "fast with their other neighbour (a cable, a switch port, a NIC's link)"
                  + (f"; {crossing(positions.get(r.host_a), positions.get(r.host_b))}"
                     if positions is not None else "") for r in links]
        if named:
            lines.append(f"FAIL: replace {', '.join(hosts[i] for i in named)} (`gpufleet "
                         "replace FLEET NODE...`; the address is the node's private IP)")
        return 1, lines
    ref = f"pass mark {mark:g} GB/s, " if mark is not None else ""
    return 0, [*lines, f"PASS: {len(runs)} pair(s) of {n} nodes within {100 * margin:.0f}% "
                       f"of the fastest, {best:g} GB/s ({ref}{exp.fabric})"]
