"""Views: offers, plan reports, change reports and rules -> text, JSON and Markdown."""

from gpufleet.views.backends import capability_markdown
from gpufleet.views.changes import (
    render_change_json,
    render_change_markdown,
    render_change_text,
)
from gpufleet.views.offers import (
    catalog_summary,
    render_catalog_text,
    render_offers_json,
    render_offers_text,
)
from gpufleet.views.plan import render_plan_json, render_plan_text
from gpufleet.views.plan_markdown import render_plan_markdown
from gpufleet.views.policy import render_rules, rules_table
from gpufleet.views.quota import LIMITS_MARKER, limits_json, quota_json, quota_markdown, quota_text
from gpufleet.views.render import plan_chunks, render_plan

__all__ = [
    "LIMITS_MARKER",
    "capability_markdown",
    "catalog_summary",
    "limits_json",
    "plan_chunks",
    "quota_json",
    "quota_markdown",
    "quota_text",
    "render_catalog_text",
    "render_change_json",
    "render_change_markdown",
    "render_change_text",
    "render_offers_json",
    "render_offers_text",
    "render_plan",
    "render_plan_json",
    "render_plan_markdown",
    "render_plan_text",
    "render_rules",
    "rules_table",
]
