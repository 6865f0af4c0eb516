"""The capability table of the backends gpufleet builds (``gpufleet.traits``). Pure."""

from __future__ import annotations

from gpufleet.backends import backend_names, own_features, traits_of
from gpufleet.traits import Feature


def capability_markdown() -> str:
    """One row per capability, one column per backend; a missing one says why."""
    rows = ["| capability | " + " | ".join(backend_names()) + " |",
            "|---|" + "---|" * len(backend_names())]
    for f in Feature:
        cells = ["yes" if traits_of(b).supports(f) else f"no: {traits_of(b).why_not(f)}"
                 for b in backend_names()]
        rows.append(f"| {f} | " + " | ".join(cells) + " |")
    for own in own_features():  # what one cloud's own services give
        cells = ["yes" if traits_of(b).owns(own.key, own.where) else f"no: {own.elsewhere}"
                 for b in backend_names()]
        rows.append(f"| {own.title} | " + " | ".join(cells) + " |")
    return "\n".join(rows)
