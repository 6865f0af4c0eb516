"""One entry point for the plan in any format. Pure."""

from __future__ import annotations

from gpufleet.review import PlanReport
from gpufleet.views.plan import render_plan_json, render_plan_text
from gpufleet.views.plan_markdown import render_plan_markdown


def render_plan(report: PlanReport, fmt: str, expand: bool = False) -> str:
    """The plan in ``fmt``: text, json or markdown."""
    if fmt == "json":
        return render_plan_json(report)
    if fmt == "markdown":
        return render_plan_markdown(report, expand)
    return render_plan_text(report, expand)
