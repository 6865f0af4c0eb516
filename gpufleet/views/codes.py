"""The diagnostic codes as docs/diagnostics.md: every code with its title and fix, grouped by
pass (`python -m gpufleet.views.codes > docs/diagnostics.md`)."""

from __future__ import annotations

from gpufleet.codes import CODES, PASSES


def render_markdown() -> str:
    """docs/diagnostics.md: every code with its title and fix, grouped by pass."""
    lines = ["# gpufleet diagnostic codes", "",
             "Generated from `gpufleet/codes.py` (`python -m gpufleet.views.codes "
             "> docs/diagnostics.md`); every diagnostic prints as "
             "`file:line:col: severity[CODE]: message` with a hint.", ""]
    for prefix, name in PASSES.items():
        lines += [f"## {prefix}: {name}", "", "| code | what | fix |", "|---|---|---|"]
        lines += [f"| `{code}` | {c.title} | {c.fix} |" for code, c in sorted(CODES.items())
                  if code.startswith(prefix)]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_markdown(), end="")
