"""One offline run of the stack program in several processes, a cloud's part in each.

Most of a cold `gpufleet plan` is the program's run, and most of that is per cloud: each
cloud's provider SDK modules load, their classes are made, its resources registered. The
clouds' parts share nothing: a fleet, its gateway, filesystems, buckets and quota requests
reach one another through the program's dicts of fleets, networks and providers, always
within one cloud (R2 joins its fleets' clouds: the Cloudflare provider is one per run). So a
process forked after compiling runs each part but the first, the first runs in this process,
and their registrations, invokes and exports come back (``pickle`` through a pipe) to be
joined as one run of the whole program would make them.

Nothing here changes what a plan says: a part that fails in any way (its program raises, a
child dies or sends nothing readable), or parts whose URNs meet, give None and the caller
runs the whole program in this process, as without this module, so an error is the whole
run's own. Only a process with no other thread forks (a forked thread's locks stay held);
the CLI's one-shot commands ask for it (``jobs``), the library and the tests' workers run
whole.

Costs (each backend's ``offline_run_cost``): a cloud's part of the examples' cold plan,
each cloud planned alone in a fresh process against a plan of nothing (2026-11-28, 2 cores):
AWS, Azure and GCP 0.35 s each, mostly their SDK modules, Lambda 0.03 s; each fleet,
gateway, volume or bucket about 0.02 s more. A fork and the pickle back cost about 0.02 s.

A part of one cloud may itself be split in two (``SHARD``) by its fleets that nothing
else in the run reaches (``shardable``): many fleets on one cloud (a `diff --full` of 20
GCP fleets ran 1.5 s in one process). Both halves register what the cloud's fleets share
(a region's provider, AWS's key pair) alike, so a URN two parts register with the same
values is kept once; with different values, the whole run is the program's again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pickle
import signal
from collections.abc import Callable, Iterator, Sequence

from gpufleet.backends import find
from gpufleet.compile import BucketDesign, Compiled, FleetDesign, emission_order
from gpufleet.objectstores import R2_CLOUD

from . import forks
from .harness import Registration, RunResult

# a part's cost in hundredths of a second: each cloud's own (its traits say), an item's
R2_COST = 5  # Cloudflare's two modules
ITEM = 2
OTHER = 35  # a backend no plugin builds here (the run refuses it; the cost is moot)
FORK = 2  # a process more: the fork, the child's exit, the result back
MAX_JOBS = 8
SHARD = "#"  # "gcp#0", "gcp#1": the part of the group "gcp" split in two by its fleets
SPLIT_GAIN = 0.85  # a split is taken where it promises this much of the wall time or less


def cost_of(cloud: str) -> int:
    """A cloud's own cost in an offline run (hundredths of a second)."""
    if cloud == R2_CLOUD:
        return R2_COST
    traits = find(cloud)
    return OTHER if traits is None else traits.offline_run_cost


def _bucket_cloud(b: BucketDesign) -> str:
    """The cloud whose part builds a bucket (R2's: the program's Cloudflare provider)."""
    return b.cloud if b.provider is not None else R2_CLOUD


def _joined(compiled: Compiled) -> dict[str, str]:
    """Each cloud the run touches -> the first cloud of the part it belongs to (union-find:
    a bucket joins its readers' clouds, a mount its bucket's, a gateway its fleet's)."""
    root: dict[str, str] = {}

    def root_of(c: str) -> str:
        root.setdefault(c, c)
        while root[c] != c:
            c = root[c]
        return c

    def join(a: str, b: str) -> None:
        ra, rb = root_of(a), root_of(b)
        if ra != rb:
            root[max(ra, rb)] = min(ra, rb)
    cloud_of = {p.name: p.backend for p in compiled.plans}
    for p in compiled.plans:
        root_of(p.backend)
        for m in p.buckets:
            join(p.backend, R2_CLOUD if m.secret is not None else m.cloud)
        for fs in p.filesystems:
            join(p.backend, fs.backend)
    for g in compiled.gateways:
        root_of(g.backend)
        if g.fleet:
            join(g.backend, cloud_of.get(g.fleet, g.backend))
    for b in compiled.buckets:
        own = root_of(_bucket_cloud(b))
        for r in b.readers:
            join(own, r.backend)
            join(own, cloud_of.get(r.fleet, r.backend))
    for v in compiled.volumes:
        root_of(v.backend)
    for q in compiled.quota_requests:
        root_of(q.backend)
    return {c: root_of(c) for c in list(root)}


def _items(compiled: Compiled) -> list[tuple[str, str]]:
    """(kind, cloud) of everything the program builds."""
    return ([("plan", p.backend) for p in compiled.plans]
            + [("gateway", g.backend) for g in compiled.gateways]
            + [("volume", v.backend) for v in compiled.volumes]
            + [("quota", q.backend) for q in compiled.quota_requests]
            + [("bucket", _bucket_cloud(b)) for b in compiled.buckets])


def groups(compiled: Compiled) -> dict[str, int]:
    """Each part that must run in one process (named by its first cloud) -> its cost."""
    part = _joined(compiled)
    cost: dict[str, int] = {}
    for cloud, first in part.items():
        cost[first] = cost.get(first, 0) + cost_of(cloud)
    for _, cloud in _items(compiled):
        cost[part[cloud]] += ITEM
    return cost


def _packed(cost: dict[str, int], bins: int) -> list[list[str]]:
    """Largest first into the lightest bin; empty bins dropped."""
    load = [0] * bins
    out: list[list[str]] = [[] for _ in range(bins)]
    for name in sorted(cost, key=lambda n: (-cost[n], n)):
        i = load.index(min(load))
        load[i] += cost[name]
        out[i].append(name)
    return [sorted(b) for b in out if b]


def _best(cost: dict[str, int], cpus: int) -> tuple[float, list[list[str]]]:
    """The estimated wall time and the packing of ``cost``'s parts that makes it least."""
    total = sum(cost.values())
    best: tuple[float, list[list[str]]] = (float(total), [sorted(cost)])
    for k in range(2, min(len(cost), MAX_JOBS) + 1):
        parts = _packed(cost, k)
        longest = max(sum(cost[n] for n in p) for p in parts)
        wall = max(longest, total / min(k, cpus)) + FORK * (len(parts) - 1)
        if wall < best[0]:
            best = (wall, parts)
    return best


def plan_parts(compiled: Compiled, cpus: int) -> list[list[str]]:
    """The parts (lists of first clouds, or of a group's two halves) whose estimated wall
    time on ``cpus`` processors is least: the largest part, or the whole spread over the
    processors, plus a fork each; the largest group split in two where that is far less."""
    cost = groups(compiled)
    if cpus < 2:
        return [sorted(cost)]
    best = _best(cost, cpus)
    split = _split_largest(compiled, cost)
    if split is not None:
        other = _best(split, cpus)
        if other[0] <= SPLIT_GAIN * best[0]:
            best = other
    return best[1]


def shardable(compiled: Compiled) -> list[str]:
    """The fleets nothing else in the run reaches, in the order the program builds them: no
    filesystem, bucket mount or joined network of their own, mounting or joined by no
    other, named by no gateway and no bucket's reader."""
    tied: set[str] = set()
    for p in compiled.plans:
        joins = {n.joins for n in p.networks if n.joins}
        if p.filesystems or p.buckets or joins:
            tied |= {p.name, *joins, *(x for fs in p.filesystems for x in fs.peers)}
    tied |= {g.fleet for g in compiled.gateways if g.fleet}
    tied |= {r.fleet for b in compiled.buckets for r in b.readers}
    return [p.name for p in emission_order(compiled.plans) if p.name not in tied]


def _second_half(compiled: Compiled, group: str) -> list[str]:
    """The fleets the second half of ``group`` (one cloud's part) runs: the last of its
    shardable ones, as many as make the halves' items even; none for a group of clouds."""
    part = _joined(compiled)
    if [c for c, first in part.items() if first == group] != [group]:
        return []
    backend = {p.name: p.backend for p in compiled.plans}
    movable = [n for n in shardable(compiled) if part.get(backend[n]) == group]
    items = sum(1 for _, cloud in _items(compiled) if part[cloud] == group)
    take = min(len(movable), items // 2)
    return movable[len(movable) - take:] if take and len(movable) >= 2 else []


def _split_largest(compiled: Compiled, cost: dict[str, int]) -> dict[str, int] | None:
    """``cost`` with its largest group as two halves (each its cloud's own cost and its
    items'), or None where that group cannot be split."""
    group = min(cost, key=lambda n: (-cost[n], n))
    moved = _second_half(compiled, group)
    if not moved:
        return None
    out = {n: c for n, c in cost.items() if n != group}
    out[group + SHARD + "0"] = cost[group] - ITEM * len(moved)
    out[group + SHARD + "1"] = cost_of(group) + ITEM * len(moved)
    return out


def subset(compiled: Compiled, units: set[str]) -> Compiled:
    """The compiled plans of the part whose units are ``units``: first clouds (their whole
    group), or a group's halves (``gcp#0``: all but the fleets of ``gcp#1``)."""
    part = _joined(compiled)
    whole = {u for u in units if SHARD not in u}
    halves = dict(u.rsplit(SHARD, 1) for u in units if SHARD in u)
    moved = {n for g in halves for n in _second_half(compiled, g)}

    def mine(cloud: str) -> bool:
        group = part.get(cloud, cloud)
        return group in whole or halves.get(group) == "0"

    def fleet_mine(p: FleetDesign) -> bool:
        half = halves.get(part.get(p.backend, p.backend))
        return (mine(p.backend) and p.name not in moved) or (half == "1" and p.name in moved)
    return dataclasses.replace(
        compiled, plans=tuple(p for p in compiled.plans if fleet_mine(p)),
        gateways=tuple(g for g in compiled.gateways if mine(g.backend)),
        volumes=tuple(v for v in compiled.volumes if mine(v.backend)),
        quota_requests=tuple(q for q in compiled.quota_requests if mine(q.backend)),
        buckets=tuple(b for b in compiled.buckets if mine(_bucket_cloud(b))))


def export_order(compiled: Compiled) -> list[str]:
    """The stack's exports in the order the program makes them (``program.emit``)."""
    return ([p.name for p in emission_order(compiled.plans)]
            + [f"gateway-{g.name}" for g in compiled.gateways]
            + [f"volume-{v.name}" for v in compiled.volumes])


def joined(compiled: Compiled, results: Sequence[RunResult]) -> RunResult | None:
    """The parts' results as one run's; None when two parts registered one URN with
    different values (the same values: kept once) or the exports are not the ones the
    whole program makes."""
    seen: dict[str, Registration] = {}
    regs: list[Registration] = []
    for r in (r for res in results for r in res.registrations):
        if r.urn in seen:
            if seen[r.urn] != r:
                return None
            continue
        seen[r.urn] = r
        regs.append(r)
    exports = {k: v for res in results for k, v in res.exports.items()}
    order = export_order(compiled)
    if sorted(order) != sorted(exports):
        return None
    return RunResult(regs, {k: exports[k] for k in order},
                     [i for res in results for i in res.invokes])


def run_parts(compiled: Compiled, run_part: Callable[[Compiled], RunResult],
              jobs: int) -> RunResult | None:
    """The program's run over ``compiled`` as parts in forked processes (at most ``jobs``
    processors counted), or None: not worth it, not possible, or a part failed."""
    parts = plan_parts(compiled, jobs)
    if len(parts) < 2 or not forks.forkable():
        return None
    subsets = [subset(compiled, set(p)) for p in parts]
    try:
        with _children(subsets[1:], run_part) as children:
            try:
                mine = run_part(subsets[0])
            except Exception:
                return None
            theirs = [_collect(pid, fd) for pid, fd in children]
    except OSError:  # no process or pipe to be had (a limit reached, no memory)
        return None
    if any(r is None for r in theirs):
        return None
    return joined(compiled, [mine, *[r for r in theirs if r is not None]])


@contextlib.contextmanager
def _children(subsets: Sequence[Compiled], run_part: Callable[[Compiled], RunResult]
              ) -> Iterator[list[tuple[int, int]]]:
    """A forked process per subset, each writing its result to a pipe: (pid, read end).
    Children still running when the block ends (an error, Ctrl-C) are killed and reaped."""
    children: list[tuple[int, int]] = []
    try:
        for sub in subsets:
            read, write = os.pipe()
            try:
                pid = os.fork()
            except OSError:
                os.close(read)
                os.close(write)
                raise
            if pid == 0:  # the child: never returns into the caller's code
                _child(sub, run_part, write, [fd for _, fd in children] + [read])
            os.close(write)
            children.append((pid, read))
        yield children
    finally:
        for pid, fd in children:
            with contextlib.suppress(OSError):
                os.close(fd)
            with contextlib.suppress(OSError):
                if os.waitpid(pid, os.WNOHANG) == (0, 0):
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)


def _child(sub: Compiled, run_part: Callable[[Compiled], RunResult], write: int,
           inherited: Sequence[int]) -> None:
    """Run one part and send ``("ok", result)``, or ``("failed", None)``; then end the
    process at once (no atexit handlers, no buffers of the parent's flushed twice)."""
    status = 1
    try:
        forks.detach(inherited)
        try:
            message: tuple[str, RunResult | None] = ("ok", run_part(sub))
        except BaseException:
            message = ("failed", None)
        forks.send(write, message)
        status = 0
    finally:
        os._exit(status)


def _collect(pid: int, fd: int) -> RunResult | None:
    """A child's result, once it has sent all of it and ended well; else None."""
    try:
        data = forks.receive(fd)
    except EOFError:
        data = b""
    _, status = os.waitpid(pid, 0)
    if status != 0:
        return None
    try:
        kind, result = pickle.loads(data)
    except Exception:
        return None
    return result if kind == "ok" and isinstance(result, RunResult) else None
