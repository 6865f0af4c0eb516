"""The capability table of the backends gpufleet builds (``gpufleet.traits``). Pure."""

from __future__ import annotations

from gpufleet.backends import SUPPORTED_BACKENDS, TRAITS_BY_NAME
from gpufleet.traits import Feature


def capability_markdown() -> str:
    """One row per capability, one column per backend; a missing one says why."""
    rows = ["| capability | " + " | ".join(SUPPORTED_BACKENDS) + " |",
            "|---|" + "---|" * len(SUPPORTED_BACKENDS)]
    for f in Feature:
        cells = ["yes" if TRAITS_BY_NAME[b].supports(f) else f"no: {TRAITS_BY_NAME[b].why_not(f)}"
                 for b in SUPPORTED_BACKENDS]
        rows.append(f"| {f} | " + " | ".join(cells) + " |")
    return "\n".join(rows)
