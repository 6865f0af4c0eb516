"""What a long command says while it works, and the cost warning of a plan.

On a terminal a plan shows one progress line on standard error (rewritten in place, cleared at
the end); in a pipe, a file or CI (not a terminal) it shows nothing. ``NO_COLOR`` is honoured
(the line has no colour anyway) and ``TERM=dumb`` gets no line.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from gpufleet.codes import C018
from gpufleet.diagnostics import Diagnostic, Severity

INTERVAL = 0.1  # seconds between redraws


def wants_progress(stream: TextIO) -> bool:
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return tty and os.environ.get("TERM") != "dumb"


@contextmanager
def progress_line(stream: TextIO | None = None) -> Iterator[Callable[[str], None] | None]:
    """A function that shows a status on one line of ``stream`` (standard error), or None
    when ``stream`` is not a terminal."""
    out = stream or sys.stderr
    if not wants_progress(out):
        yield None
        return
    start = time.monotonic()
    last = [0.0, 0]  # time of the last redraw, width of the text shown

    def show(text: str) -> None:
        now = time.monotonic()
        if now - last[0] < INTERVAL:
            return
        line = f"gpufleet: {text} ({now - start:.1f} s)"[:200]
        out.write("\r" + line + " " * max(0, int(last[1]) - len(line)))
        out.flush()
        last[0], last[1] = now, len(line)

    try:
        yield show
    finally:
        if last[1]:
            out.write("\r" + " " * int(last[1]) + "\r")
            out.flush()


def cost_warning(report: Any, inputs: Any, paths: Sequence[str],
                 threshold: float | None) -> list[Diagnostic]:
    """C018 when the plan's whole bill goes over ``threshold`` USD per month."""
    from gpufleet.offers import HOURS_PER_MONTH  # not at import: `validate` starts fast

    if threshold is None:
        return []
    month = report.per_hour * HOURS_PER_MONTH
    if month <= threshold:
        return []
    top = sorted(report.bills.values(), key=lambda b: -b.total)[:3]
    most = ", ".join(f"{b.owner} ${b.total * HOURS_PER_MONTH:,.0f}" for b in top)
    where = inputs.backends[0].origin.file if inputs.backends else paths[0]
    return [Diagnostic(where, 1, 1, C018, f"the plan costs ${month:,.0f}/month, over the "
                       f"warning threshold ${threshold:,.0f}/month (most: {most})",
                       severity=Severity.WARNING,
                       hint="set `cost: {warn_per_month: USD}` in the backends file or "
                            "`--warn-cost-per-month` to move the threshold")]
