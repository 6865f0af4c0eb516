"""The package layout follows the pipeline: input <- offers <- compile <- review <- cli, with
views used by review and cli, and components importing only compile (and diagnostics)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Which stages each stage may import (besides itself and the shared top-level modules).
ALLOWED: dict[str, set[str]] = {
    "input": set(),
    "offers": {"input"},
    "compile": {"input", "offers"},
    "views": {"input", "offers", "compile"},
    "components": {"compile"},
    "policy": set(),  # the policy pack's rules stand alone (pulumi-policy loads them too)
    "review": {"input", "offers", "compile", "views", "components", "policy"},
    "cli": {"input", "offers", "compile", "views", "review", "policy"},
}
SHARED = {"gpufleet", "gpufleet.diagnostics", "gpufleet.fileio", "gpufleet.traits"}


def stage_of_file(path: Path) -> str:
    rel = path.relative_to(ROOT)
    if rel.parts[0] in ("components", "policy"):
        return rel.parts[0]
    if len(rel.parts) == 2:  # gpufleet/<module>.py
        return "cli" if rel.stem in ("cli", "__main__") else "top"
    return rel.parts[1]


def stage_of_module(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] != "gpufleet" or name in SHARED:
        return None
    if parts[1] in ("components", "policy"):
        return parts[1]
    return "cli" if parts[1] == "cli" else parts[1]


def imported_modules(path: Path) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


def sources() -> list[Path]:
    return sorted([*ROOT.joinpath("gpufleet").rglob("*.py"),
                   *ROOT.joinpath("components").glob("*.py"),
                   *ROOT.joinpath("policy").glob("*.py")])


def test_every_stage_is_a_package_with_a_one_line_docstring() -> None:
    for stage in ("input", "offers", "compile", "review", "views"):
        init = ROOT / "gpufleet" / stage / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and "\n" not in doc.strip(), stage
        assert "->" in doc, f"{stage}: say what the stage takes and gives"


def test_no_module_imports_a_later_stage() -> None:
    bad: list[str] = []
    checked = 0
    for path in sources():
        own = stage_of_file(path)
        if own == "top":  # gpufleet/__init__.py, diagnostics.py: import no stage at all
            allowed: set[str] = set()
        else:
            allowed = ALLOWED[own]
        for line, module in imported_modules(path):
            target = stage_of_module(module)
            if target is None or target == own:
                continue
            checked += 1
            if target not in allowed:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {own} imports {module}")
    assert checked > 40  # the walk really saw the cross-stage imports
    assert bad == []


def test_cross_stage_imports_go_through_the_stage_package() -> None:
    """Other stages use what a stage's __init__ re-exports, not its inner modules."""
    bad = []
    for path in sources():
        own = stage_of_file(path)
        for line, module in imported_modules(path):
            target = stage_of_module(module)
            if target in (None, own, "components", "cli", "policy") or module.count(".") == 1:
                continue
            bad.append(f"{path.relative_to(ROOT)}:{line}: {module}")
    assert bad == []
