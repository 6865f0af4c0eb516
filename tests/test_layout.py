"""The package layout: the core (everything under gpufleet/ but the CLI) imports no Pulumi, no
components and no policy pack, anywhere, function-level imports included; stages import only
earlier stages, through their packages; no import circle; no module over 400 lines and no
function over 60; each cloud lives in its own folders (``gpufleet/backends/<cloud>/``,
``components/<cloud>/``) and no backend name is compared, keyed or matched anywhere else."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE_STAGES = ("input", "offers", "compile", "review", "live", "handoff", "evidence", "views")
# Which stages each stage may import (besides itself and the shared top-level modules).
ALLOWED: dict[str, set[str]] = {
    "input": set(),
    "offers": {"input"},
    "compile": {"input", "offers"},
    "review": {"input", "offers", "compile"},
    "live": {"input", "offers", "compile", "review"},
    "handoff": {"input", "offers", "compile", "review"},
    # day-2 evidence: acceptance, burn-in, scaling, storage runs, the ledger, the contract
    "evidence": {"input", "offers", "compile", "review"},
    "views": {"input", "offers", "compile", "review"},
    # A cloud's plugin (gpufleet/backends/<cloud>/plugin.py) points at its roles' code in
    # every stage, loaded on first use; nothing imports it (its entry point loads it).
    "plugin": set(CORE_STAGES),
    # The Pulumi layer runs the core (and the policy pack); the core never runs it.
    "components": {"input", "offers", "compile", "review", "live", "policy"},
    "policy": set(),  # the policy pack's rules stand alone (pulumi-policy loads them too)
    "cli": {*CORE_STAGES, "components", "policy"},
}
SHARED = {"gpufleet", "gpufleet.cachedir", "gpufleet.classcode", "gpufleet.diagnostics",
          "gpufleet.fileio", "gpufleet.traits", "gpufleet.traitparts", "gpufleet.objectstores",
          "gpufleet.codes", "gpufleet.codetable", "gpufleet.backends", "gpufleet.outbound",
          "gpufleet.exiting"}
FORBIDDEN_IN_CORE = ("pulumi", "pulumi_", "gpufleet.components", "gpufleet.policy")
MAX_LINES = 400
MAX_FUNCTION_LINES = 60
BACKENDS_PACKAGE = "gpufleet.backends"


def backend_names() -> tuple[str, ...]:
    from gpufleet.backends import SUPPORTED_BACKENDS

    return SUPPORTED_BACKENDS


def module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[0] in ("components", "policy"):
        parts.insert(0, "gpufleet")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def stage_of_module(name: str) -> str | None:
    """A cloud's folder is shared data (its traits and their tables, such as ``names``) plus
    role modules named after the stage that loads them: ``gpufleet.backends.aws.compile``
    belongs to the compile stage."""
    parts = name.split(".")
    if parts[0] != "gpufleet" or name in SHARED or len(parts) < 2:
        return None
    if name.startswith(BACKENDS_PACKAGE + "."):
        if len(parts) > 3 and parts[3] == "plugin":
            return "plugin"
        return parts[3] if len(parts) > 3 and parts[3] in CORE_STAGES else None
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
    for node in walked(path):
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
def parsed(path: Path) -> ast.Module:
    """The file's syntax tree, parsed once per process: the checks below read every source
    file, a dozen times over (read only: no check changes a tree)."""
    return ast.parse(path.read_text(), str(path))


@functools.cache
def walked(path: Path) -> tuple[ast.AST, ...]:
    """Every node of the file's tree (``ast.walk``'s order), listed once per process."""
    return tuple(ast.walk(parsed(path)))


@functools.cache
def known_modules() -> frozenset[str]:
    return frozenset(module_of(p) for p in sources())


def test_every_stage_is_a_package_with_a_one_line_docstring() -> None:
    for stage in CORE_STAGES:
        init = ROOT / "gpufleet" / stage / "__init__.py"
        doc = ast.get_docstring(parsed(init))
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
    from gpufleet.backends import BACKENDS

    folders = {t.folder for t in BACKENDS}
    bad = []
    for path in sources():
        own = stage_of_module(module_of(path))
        cloud = module_of(path).rsplit(".", 1)[0] + "." if own == "plugin" else None
        rel = path.relative_to(ROOT).parts
        if rel[0] == "components" and len(rel) > 2 and rel[1] in folders:
            cloud = f"{BACKENDS_PACKAGE}.{rel[1]}."  # a cloud's components read its planner
        for line, module in imported_modules(path):
            target = stage_of_module(module)
            if target in (None, own, "components", "cli", "policy"):
                continue
            if cloud is not None and module.startswith(cloud):
                continue  # a plugin (or a cloud's components) reaching its own cloud's code
            if module.count(".") > 1 and module in known_modules() \
                    and not _reexported(module):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {module}")
    assert bad == []


def _reexported(module: str) -> bool:
    """A submodule its package's __init__ hands out (``from gpufleet.compile import
    naming``)."""
    package, name = module.rsplit(".", 1)
    init = ROOT / Path(*package.split(".")) / "__init__.py"
    return init.exists() and any(
        isinstance(n, ast.ImportFrom) and n.module == package and not n.level
        and name in {a.name for a in n.names} for n in parsed(init).body)


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


def test_no_module_over_400_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in sources()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_no_function_over_60_lines() -> None:
    long = {f"{p.relative_to(ROOT)}:{node.lineno} {node.name}": n for p in sources()
            for node in walked(p)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and (n := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES}
    assert long == {}


# --- one folder per cloud ------------------------------------------------------------------

def _per_cloud(path: Path) -> bool:
    """A file in one cloud's own folders."""
    rel = path.relative_to(ROOT).parts
    names = backend_names()
    return (rel[:2] == ("gpufleet", "backends") and len(rel) > 3 and rel[2] in names) or \
        (rel[0] == "components" and len(rel) > 2 and rel[1] in names)


def backend_name_uses(tree: ast.AST, names: Sequence[str]) -> Iterator[tuple[int, str]]:
    """Where code compares with a backend name, keys a dict (or a dict's tuple key) by one,
    or matches a case on one."""
    def named(n: ast.AST | None) -> bool:
        if isinstance(n, ast.Tuple):
            return any(named(e) for e in n.elts)
        return isinstance(n, ast.Constant) and n.value in names

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(
                named(x) or (isinstance(x, ast.List | ast.Set) and any(map(named, x.elts)))
                for x in (node.left, *node.comparators)):
            yield node.lineno, "comparison with a backend name"
        elif _keyed_by(node, named, names):
            yield node.lineno, "dict keyed by backend names"
        elif isinstance(node, ast.Subscript) and named(node.slice):
            yield node.lineno, "lookup by a backend name"
        elif isinstance(node, ast.match_case) and any(
                isinstance(p, ast.MatchValue) and named(p.value) for p in ast.walk(node.pattern)):
            yield node.pattern.lineno, "match case on a backend name"


def _keyed_by(node: ast.AST, named: Callable[[ast.AST | None], bool],
              names: Sequence[str]) -> bool:
    if isinstance(node, ast.Dict):
        return any(named(k) for k in node.keys)
    return isinstance(node, ast.Call) and getattr(node.func, "id", "") == "dict" and any(
        kw.arg in names for kw in node.keywords)


def test_no_backend_name_outside_its_folder() -> None:
    """Shared code asks the backend's traits (gpufleet.backends), never its name."""
    names = backend_names()
    bad, seen = [], 0
    for path in sources():
        if _per_cloud(path):
            seen += 1
            continue
        bad += [f"{path.relative_to(ROOT)}:{line}: {what}"
                for line, what in backend_name_uses(parsed(path), names)]
    assert seen >= 3 * len(names)  # every cloud's traits, planner and components were skipped
    assert bad == []


# a Pulumi type or invoke token (`aws:ec2/instance:Instance`, `azure-native:compute:Vm`)
CLOUD_TOKEN = re.compile(r"[a-z][\w-]*(:[a-z][\w/.-]*)?:[A-Z]\w*")
OWN_TOKENS = ("pulumi:", "gpufleet:")  # Pulumi's own types and gpufleet's components
# dstack's own lists of its backends (its BackendType enum, its volume backends): facts of
# dstack's format, not of gpufleet's plugins
DSTACK_LISTS = ("gpufleet/input/spec.py", "gpufleet/input/checks/volumes.py")


def test_the_core_names_no_cloud_type_and_no_backend_outside_the_cloud_folders() -> None:
    """Every Pulumi type token and backend name of a cloud lives in its plugin's folder
    (gpufleet/backends/<cloud>/); shared code reads them from the registry."""
    from gpufleet.backends import BACKENDS

    folders = {t.folder for t in BACKENDS}
    names = backend_names()
    tokens, literals = [], []
    for path in sorted(ROOT.joinpath("gpufleet").rglob("*.py")):
        rel = path.relative_to(ROOT).parts
        if rel[1] == "backends" and len(rel) > 3 and rel[2] in folders:
            continue
        for node in walked(path):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            where = f"{'/'.join(rel)}:{node.lineno}: {node.value}"
            if CLOUD_TOKEN.fullmatch(node.value) and not node.value.startswith(OWN_TOKENS):
                tokens.append(where)
            if node.value in names and "/".join(rel) not in DSTACK_LISTS:
                literals.append(where)
    assert tokens == []
    assert literals == []


def test_shared_code_texts_name_no_backend_and_each_cloud_notes_its_own() -> None:
    """A code's title and fix are cloud-neutral; what it means on one cloud is that cloud's
    `code_notes` (docs/diagnostics.md prints them), keyed by codes that exist."""
    from gpufleet.backends import all_backends
    from gpufleet.codetable import CODES

    word = re.compile(r"\b(" + "|".join(backend_names()) + r")\b", re.IGNORECASE)
    named = [f"{code}: {c.title} | {c.fix}" for code, c in CODES.items()
             if word.search(c.title) or word.search(c.fix)]
    assert named == []
    unknown = [(t.name, code) for t in all_backends() for code in t.code_notes
               if code not in CODES]
    assert unknown == []
    assert sum(len(t.code_notes) for t in all_backends()) >= 20


def test_the_token_scan_sees_a_token() -> None:
    assert CLOUD_TOKEN.fullmatch("aws:ec2/networkInterface:NetworkInterface")
    assert CLOUD_TOKEN.fullmatch("azure-native:compute:VirtualMachineScaleSet")
    assert not CLOUD_TOKEN.fullmatch("a4-node-1") and not CLOUD_TOKEN.fullmatch("note: Say")


@pytest.mark.parametrize("code", [
    'if plan.backend == "aws": pass',
    'x = backend in ("gcp", "azure")',
    'DISKS = {"aws": 8, "gcp": 10}',
    'SERVICE = {("azure", "nfs"): "files"}',
    'n = DISKS["gcp"]',
    'd = dict(aws=1)',
    'match b:\n    case "azure":\n        pass',
])
def test_the_backend_name_scan_finds_each_form(code: str) -> None:
    assert list(backend_name_uses(ast.parse(code), ("aws", "gcp", "azure")))


def test_the_backend_name_scan_leaves_other_strings_alone() -> None:
    code = 'if kind == "lustre" and t.name == backend: x = {"awsx": 1}["awsx"]'
    assert list(backend_name_uses(ast.parse(code), ("aws", "gcp", "azure"))) == []


def test_the_pulumi_layer_runs_the_program_and_nothing_else() -> None:
    """The pipeline is the core's (gpufleet.review.pipeline): components/run/ runs the stack
    program and the policy pack and returns what they gave, never calling back into review."""
    bad = [f"{path.relative_to(ROOT)}:{line}: {module}"
           for path in sorted(ROOT.joinpath("components", "run").glob("*.py"))
           for line, module in imported_modules(path)
           if module == "gpufleet.review" or module.startswith("gpufleet.review.")]
    assert bad == []


def test_no_code_is_loaded_by_a_string() -> None:
    """A cloud's roles come from its plugin object (typed loaders), its components from
    their entry point: no module is imported by a name built at run time. The one
    exceptions are the provider SDKs' lazy class loaders (components/sdk.py and
    components/lazyinputs.py), which import the Pulumi SDKs' own service modules, not
    gpufleet's."""
    bad = []
    for path in sources():
        if path in (ROOT / "components" / "sdk.py", ROOT / "components" / "lazyinputs.py"):
            continue
        for node in walked(path):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(
                    node.func, "id", "")) in ("import_module", "__import__"):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert bad == []


def test_every_plugin_covers_every_role_with_code_of_the_roles_shape() -> None:
    """Each registered backend declares every role: a loader whose object satisfies the
    stage's Protocol, or Unsupported with a reason."""
    from gpufleet.backends import plugins, role_of
    from gpufleet.backends.plugin import ROLES, Unsupported
    from gpufleet.compile.planners import COMPILE
    from gpufleet.handoff.export import HANDOFF
    from gpufleet.input.checks.backends import INPUT
    from gpufleet.live.probes import GATEWAY_CHECK, PROBE, SCALE_SETS, TOPOLOGY

    keys = (INPUT, COMPILE, PROBE, TOPOLOGY, SCALE_SETS, GATEWAY_CHECK, HANDOFF)
    assert sorted(k.name for k in keys) == sorted(ROLES)  # every role has its stage's key
    for name, plugin in plugins().items():
        assert plugin.undeclared() == [], name
        for key in keys:
            declared = plugin.roles[key.name]
            if isinstance(declared, Unsupported):
                assert len(declared.reason) > 20, (name, key.name)
            else:
                assert isinstance(role_of(name, key), key.kind), (name, key.name)


def test_one_registry_lists_the_backends() -> None:
    """The schema enum, planners, components and prices derive from gpufleet.backends."""
    from gpufleet.backends import BACKENDS, SUPPORTED_BACKENDS, plugins
    from gpufleet.compile import PLANNERS
    from gpufleet.components.registry import registered
    from gpufleet.input.schema_files import schema

    assert tuple(t.name for t in BACKENDS) == SUPPORTED_BACKENDS
    assert set(PLANNERS) == set(registered()) == set(SUPPORTED_BACKENDS) == set(plugins())
    for t in BACKENDS:  # the folder is the name, or `package` where the name is a keyword
        assert (ROOT / "gpufleet" / "backends" / t.folder / "__init__.py").exists()
        assert (ROOT / "components" / t.folder / "__init__.py").exists()
    enum = schema("fleet")["$defs"]["backend"]["enum"] if "backend" in schema("fleet").get(
        "$defs", {}) else None
    if enum is not None:
        assert set(SUPPORTED_BACKENDS) <= set(enum)


def test_the_package_docstring_tells_the_truth() -> None:
    doc = ast.get_docstring(parsed(ROOT / "gpufleet" / "__init__.py"))
    assert doc and "never imports" in doc and "pulumi" in doc


def test_every_package_is_in_the_wheel() -> None:
    """pyproject lists packages by hand: a new folder left out would vanish from the wheel."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {module_of(p) for p in sources() if p.name == "__init__.py"}
    found |= {"gpufleet.schemas", "gpufleet.data", "gpufleet.data.catalog"}
    assert found == listed


def test_every_diagnostic_code_is_registered_and_documented(update_golden: bool) -> None:
    """The registry is complete (every code the sources emit) and has no stale entries, and
    docs/diagnostics.md is generated from it."""
    import re

    import gpufleet.codes as codes
    from gpufleet.codes import CODES
    from gpufleet.views.codes import render_markdown

    from conftest import compare_or_update

    used: set[str] = set()
    literals: list[str] = []
    for path in sources():
        if path in (ROOT / "gpufleet" / "codes.py", ROOT / "gpufleet" / "codetable.py"):
            continue
        for node in walked(path):
            if isinstance(node, ast.ImportFrom) and node.module == "gpufleet.codes":
                used |= {a.name for a in node.names}
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and re.fullmatch(r"[LSFGPBKOCV]\d{3}", node.value):
                literals.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value}")
    assert literals == []  # codes by name: a misspelt one is an import error
    assert used - {"CODES", "Code", "PASSES"} == set(CODES), \
        (sorted(used - set(CODES)), sorted(set(CODES) - used))
    assert all(getattr(codes, c) == c for c in CODES)
    compare_or_update(ROOT / "docs" / "diagnostics.md", render_markdown(), update_golden)


def test_no_module_branches_on_a_code() -> None:
    """A code names a diagnostic for the reader; behaviour follows from facts, not from which
    diagnostic was printed."""
    import re

    def is_code(n: ast.AST) -> bool:
        text = n.id if isinstance(n, ast.Name) else n.value if isinstance(
            n, ast.Constant) and isinstance(n.value, str) else ""
        return re.fullmatch(r"[LSFGPBKOCV]\d{3}", text) is not None

    bad = [f"{path.relative_to(ROOT)}:{node.lineno}" for path in sources()
           if path.name not in ("codes.py", "codetable.py")
           for node in walked(path)
           if isinstance(node, ast.Compare)
           and any(is_code(x) for x in (node.left, *node.comparators))]
    assert bad == []


def test_the_readme_shows_the_capability_table() -> None:
    from gpufleet.views import capability_markdown

    assert capability_markdown() in (ROOT / "README.md").read_text()


def test_every_data_file_ships_in_the_package() -> None:
    """A non-editable install carries every file under gpufleet/data: each matches a
    package-data pattern of pyproject.toml (a boot script left out fails only once
    installed, as `export skypilot` once did in CI's install check)."""
    import fnmatch
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]
    data = ROOT / "gpufleet" / "data"
    missing = []
    for path in sorted(data.rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".py":
            continue
        rel = path.relative_to(ROOT / "gpufleet").parts  # ("data", "handoff", "x.sh")
        for depth in range(len(rel) - 1, 0, -1):  # the nearest package with patterns
            package = "gpufleet." + ".".join(rel[:depth])
            if package in patterns:
                inner = "/".join(rel[depth:])
                if not any(inner.count("/") == p.count("/") and fnmatch.fnmatch(inner, p)
                           for p in patterns[package]):  # a glob's * stays in its folder
                    missing.append("/".join(rel))
                break
        else:
            missing.append("/".join(rel))
    assert missing == []
