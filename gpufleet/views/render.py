"""One entry point for the plan in any format. Pure."""

from __future__ import annotations

from collections.abc import Iterable

from gpufleet.review import PlanReport
from gpufleet.views.plan import plan_json_chunks, render_plan_json, render_plan_text
from gpufleet.views.plan_markdown import render_plan_markdown


def render_plan(report: PlanReport, fmt: str, expand: bool = False) -> str:
    """The plan in ``fmt``: text, json or markdown."""
    if fmt == "json":
        return render_plan_json(report)
    if fmt == "markdown":
        return render_plan_markdown(report, expand)
    return render_plan_text(report, expand)


def plan_chunks(report: PlanReport, fmt: str, expand: bool = False) -> Iterable[str]:
    """``render_plan`` in pieces, to be written as they come (a large JSON plan is never one
    string)."""
    if fmt == "json":
        return plan_json_chunks(report)
    return (render_plan(report, fmt, expand),)
