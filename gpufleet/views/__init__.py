"""Views: offers and plan reports -> text, JSON and Markdown for terminals and PR comments."""

from gpufleet.views.offers import (
    catalog_summary,
    render_catalog_text,
    render_offers_json,
    render_offers_text,
)
from gpufleet.views.plan import (
    PlanReport,
    render_plan_json,
    render_plan_markdown,
    render_plan_text,
)

__all__ = [
    "PlanReport", "catalog_summary", "render_catalog_text", "render_offers_json",
    "render_offers_text", "render_plan_json", "render_plan_markdown", "render_plan_text",
]
