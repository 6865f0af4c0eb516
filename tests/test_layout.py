"""The package layout: the core (everything under gpufleet/ but the CLI) imports no Pulumi, no
components and no policy pack, anywhere, function-level imports included; stages import only
earlier stages, through their packages; no import circle; no module over 500 lines."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE_STAGES = ("input", "offers", "compile", "review", "live", "handoff", "views")
# Which stages each stage may import (besides itself and the shared top-level modules).
ALLOWED: dict[str, set[str]] = {
    "input": set(),
    "offers": {"input"},
    "compile": {"input", "offers"},
    "review": {"input", "offers", "compile"},
    "live": {"input", "offers", "compile", "review"},
    "handoff": {"input", "offers", "compile", "review"},
    "views": {"input", "offers", "compile", "review"},
    # The Pulumi layer runs the core (and the policy pack); the core never runs it.
    "components": {"input", "offers", "compile", "review", "live", "policy"},
    "policy": set(),  # the policy pack's rules stand alone (pulumi-policy loads them too)
    "cli": {*CORE_STAGES, "components", "policy"},
}
SHARED = {"gpufleet", "gpufleet.diagnostics", "gpufleet.fileio", "gpufleet.traits"}
FORBIDDEN_IN_CORE = ("pulumi", "pulumi_", "gpufleet.components", "gpufleet.policy")
MAX_LINES = 500


def module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[0] in ("components", "policy"):
        parts.insert(0, "gpufleet")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def stage_of_module(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] != "gpufleet" or name in SHARED or len(parts) < 2:
        return None
    return "cli" if parts[1] == "__main__" else parts[1]


def sources() -> list[Path]:
    return sorted([*ROOT.joinpath("gpufleet").rglob("*.py"),
                   *ROOT.joinpath("components").rglob("*.py"),
                   *ROOT.joinpath("policy").rglob("*.py")])


def imported_modules(path: Path, own: str | None = None) -> Iterator[tuple[int, str]]:
    """Every module the file imports, at any depth, relative imports resolved. For
    ``from X import a, b``: X.a where that is a module of ours, else X itself."""
    own = own or module_of(path)
    package = own if path.name == "__init__.py" else own.rsplit(".", 1)[0]
    known = known_modules()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
            yield from ((node.lineno, m) for m in subs)
            if len(subs) < len(node.names):
                yield node.lineno, base
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(
                node.func, "id", "")) in ("import_module", "__import__") and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value,
                                                                          str):
            yield node.lineno, node.args[0].value


@functools.cache
def known_modules() -> frozenset[str]:
    return frozenset(module_of(p) for p in sources())


def test_every_stage_is_a_package_with_a_one_line_docstring() -> None:
    for stage in CORE_STAGES:
        init = ROOT / "gpufleet" / stage / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and "->" in doc, f"{stage}: say what the stage takes and gives"


def test_the_core_imports_no_pulumi_components_or_policy() -> None:
    """Anywhere under gpufleet/ but the CLI, at any depth of the file."""
    bad, checked = [], 0
    for path in ROOT.joinpath("gpufleet").rglob("*.py"):
        if module_of(path).startswith("gpufleet.cli"):
            continue
        for line, module in imported_modules(path):
            checked += 1
            if module == "pulumi" or module.startswith(FORBIDDEN_IN_CORE):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {module}")
    assert checked > 300  # the walk saw the imports, function-level ones included
    assert bad == []


def test_the_layout_check_sees_function_level_imports(tmp_path: Path) -> None:
    """The walk above would have caught the old review/ modules' imports inside functions."""
    sample = tmp_path / "sample.py"
    sample.write_text("def f() -> None:\n    from gpufleet.components.run import harness\n"
                      "    import pulumi.automation as auto\n    from ..policy import rules\n")
    found = [m for _, m in imported_modules(sample, "gpufleet.review.sample")]
    assert {"gpufleet.components.run.harness", "pulumi.automation", "gpufleet.policy.rules"} <= \
        set(found)


def test_no_module_imports_a_later_stage() -> None:
    bad: list[str] = []
    checked = 0
    for path in sources():
        own = stage_of_module(module_of(path))
        allowed = ALLOWED.get(own or "", set())
        for line, module in imported_modules(path):
            target = stage_of_module(module)
            if target is None or target == own:
                continue
            checked += 1
            if own is None or target not in allowed:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {own or 'top'} imports {module}")
    assert checked > 60  # the walk really saw the cross-stage imports
    assert bad == []


def test_cross_stage_imports_go_through_the_stage_package() -> None:
    """Other stages use what a stage's __init__ re-exports, not its inner modules (the
    Pulumi layer and the CLI are the entry points, imported by module)."""
    bad = []
    for path in sources():
        own = stage_of_module(module_of(path))
        for line, module in imported_modules(path):
            target = stage_of_module(module)
            if target in (None, own, "components", "cli", "policy"):
                continue
            if module.count(".") > 1 and module in known_modules() \
                    and not _reexported(module):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {module}")
    assert bad == []


def _reexported(module: str) -> bool:
    """A submodule its package's __init__ hands out (``from gpufleet.compile import
    naming``)."""
    package, name = module.rsplit(".", 1)
    init = ROOT / Path(*package.split(".")) / "__init__.py"
    return init.exists() and f"import {name}\n" in init.read_text()


def import_graph() -> dict[str, set[str]]:
    known = known_modules()
    graph: dict[str, set[str]] = {m: set() for m in known}
    for path in sources():
        own = module_of(path)
        for _, module in imported_modules(path):
            if module in known and module != own:
                graph[own].add(module)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle() -> None:
    graph = import_graph()
    assert sum(len(v) for v in graph.values()) > 150
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


def test_no_module_over_500_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in sources()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_the_package_docstring_tells_the_truth() -> None:
    doc = ast.get_docstring(ast.parse((ROOT / "gpufleet" / "__init__.py").read_text()))
    assert doc and "never imports" in doc and "pulumi" in doc


def test_every_package_is_in_the_wheel() -> None:
    """pyproject lists packages by hand: a new folder left out would vanish from the wheel."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {module_of(p) for p in sources() if p.name == "__init__.py"}
    found |= {"gpufleet.schemas", "gpufleet.data.catalog"}
    assert found == listed


def test_every_diagnostic_code_is_registered_and_documented(update_golden: bool) -> None:
    """The registry is complete (every code the sources emit) and has no stale entries, and
    docs/diagnostics.md is generated from it."""
    import re

    from gpufleet.codes import CODES, render_markdown

    from conftest import compare_or_update

    used = set()
    for path in sources():
        if path != ROOT / "gpufleet" / "codes.py":
            used |= set(re.findall(r'"([LSFGPBKOCV]\d{3})"', path.read_text()))
    assert used == set(CODES), (sorted(used - set(CODES)), sorted(set(CODES) - used))
    compare_or_update(ROOT / "docs" / "diagnostics.md", render_markdown(), update_golden)


def test_the_readme_shows_the_capability_table() -> None:
    from gpufleet.views import capability_markdown

    assert capability_markdown() in (ROOT / "README.md").read_text()
