"""The diagnostic codes as docs/diagnostics.md: every code with its title and fix, grouped by
pass (`python -m gpufleet.views.codes > docs/diagnostics.md`)."""

from __future__ import annotations

from gpufleet.backends import all_backends
from gpufleet.codes import CODES, PASSES


def _notes(code: str) -> str:
    """What the code means on each backend that says (its traits' code_notes)."""
    said = [f"{t.name}: {t.code_notes[code]}" for t in all_backends() if code in t.code_notes]
    return f" ({'; '.join(said)})" if said else ""


def render_markdown() -> str:
    """docs/diagnostics.md: every code with its title and fix, grouped by pass."""
    lines = ["# gpufleet diagnostic codes", "",
             "Generated from `gpufleet/codes.py` (`python -m gpufleet.views.codes "
             "> docs/diagnostics.md`); every diagnostic prints as "
             "`file:line:col: severity[CODE]: message` with a hint.", ""]
    for prefix, name in PASSES.items():
        lines += [f"## {prefix}: {name}", "", "| code | what | fix |", "|---|---|---|"]
        lines += [f"| `{code}` | {c.title}{_notes(code)} | {c.fix} |"
                  for code, c in sorted(CODES.items()) if code.startswith(prefix)]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_markdown(), end="")
