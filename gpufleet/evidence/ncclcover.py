"""What an nccl-tests log proves about where it ran: every node of the task, every GPU of
each (the rank lines), on the plan's GPU model. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpufleet.evidence.acceptance import Expectation


def coverage_of(rank_sets: Sequence[Mapping[int, tuple[str, str]]], has_header: bool,
                exp: Expectation) -> tuple[list[str], list[str]]:
    """(lines, why unreadable): each invocation spans every node the task was meant to, on
    the plan's GPU model. Counted from nccl-tests' rank lines, never taken on trust."""
    missing: list[str] = []
    if not has_header:
        missing.append("no nccl-tests header line (`# nThread ... minBytes ... maxBytes ... "
                       "step:`): which sizes the run was meant to cover cannot be told")
    lines: list[str] = []
    for ranks in rank_sets or [{}]:
        more, why = _ranks(ranks, exp)
        lines += [x for x in more if x not in lines]
        missing += [x for x in why if x not in missing]
    return lines, missing


def _ranks(ranks: Mapping[int, tuple[str, str]], exp: Expectation
           ) -> tuple[list[str], list[str]]:
    """One invocation's rank lines against the plan."""
    missing: list[str] = []
    if not ranks:
        if exp.nodes > 1:
            missing.append(f"no `# Rank ... on HOST` lines: which of the {exp.nodes} nodes ran "
                           "cannot be told (keep nccl-tests' whole output)")
        return [], missing
    hosts_seen = len({h for h, _ in ranks.values()})
    # every GPU of every node it ran on (a scaling run may span more nodes than the fleet's
    # acceptance task; fewer is judged below)
    want = max(exp.nodes, hosts_seen) * exp.gpus if exp.gpus else None
    gone = sorted(set(range(want)) - set(ranks)) if want else []
    if want and (gone or max(ranks) >= want):
        missing.append(f"rank lines for {want} GPU(s) expected ({want // (exp.gpus or 1)} "
                       f"node(s) x "
                       f"{exp.gpus}); " + (f"rank(s) {', '.join(map(str, gone[:6]))} missing"
                                           if gone else f"rank {max(ranks)} is beyond them"))
    hosts = sorted({h for h, _ in ranks.values()})
    lines = [f"the run spans {len(hosts)} node(s) ({', '.join(hosts[:4])}"
             f"{', ...' if len(hosts) > 4 else ''}), {len(ranks)} rank(s)"]
    if len(hosts) < exp.nodes:
        lines.append(f"FAIL: the run covers {len(hosts)} of {exp.nodes} nodes: the fabric "
                     "between the others was never used (run the acceptance task on every "
                     "node, or pass --nodes to judge fewer)")
    models = sorted({m for _, m in ranks.values()})
    if exp.gpu and any(exp.gpu.lower() not in m.lower() for m in models):
        lines.append(f"FAIL: the log's GPUs are {', '.join(models)}, the fleet's {exp.gpu}: "
                     "this is another fleet's log")
    return lines, missing
