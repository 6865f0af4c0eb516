"""Loader hazards: positions, duplicate keys, bounded aliases, size and encoding limits."""

from __future__ import annotations

import time
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.input.expansion import expansion_past_bound
from gpufleet.input.files import expand_paths, load_paths
from gpufleet.input.loader import (
    MAX_FILE_BYTES,
    MAX_TEXT_DEPTH,
    LoadResult,
    _Builder,
    depth_bound,
    load_text,
    nesting_depth,
)


def _load(text: str) -> LoadResult:
    result = LoadResult()
    load_text("f.yml", text, result)
    return result


def test_source_map_records_key_and_value_positions() -> None:
    r = _load("type: fleet\nresources:\n  gpu: H100:8\nbackends:\n  - gcp\n  - aws\n")
    src = r.documents[0].source
    assert src.key(("resources", "gpu")) == (3, 3)
    assert src.value(("resources", "gpu")) == (3, 8)
    assert src.value(("backends", 1)) == (6, 5)
    # An unknown path falls back to its nearest located parent.
    assert src.key(("resources", "gpu", "count")) == (3, 3)


def test_multi_document_positions_are_per_file_lines() -> None:
    r = _load("type: fleet\nname: a\n---\ntype: fleet\nname: b\n")
    assert [d.data["name"] for d in r.documents] == ["a", "b"]
    assert r.documents[1].source.key(("name",)) == (5, 1)
    assert [d.index for d in r.documents] == [0, 1]


def test_scalars_keep_yaml_types_and_dates_stay_strings() -> None:
    r = _load("a: 1\nb: 1.5\nc: true\nd: null\ne: 2024-01-01\nf: '8'\n1: x\n")
    assert r.documents[0].data == {"a": 1, "b": 1.5, "c": True, "d": None, "e": "2024-01-01",
                                   "f": "8", "1": "x"}


def test_billion_laughs_is_rejected_quickly() -> None:
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 12):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]")
    start = time.perf_counter()
    r = _load("\n".join(lines) + "\n")
    elapsed = time.perf_counter() - start
    assert [d.code for d in r.diagnostics] == ["L005"]
    assert r.documents == []
    assert elapsed < 5, "expansion must stop at the node budget, not expand 10^12 values"


def test_oversized_file_is_a_located_diagnostic(tmp_path: Path) -> None:
    big = tmp_path / "big.yml"
    with big.open("wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)
    r = load_paths([big])
    assert [(d.code, d.line, d.column) for d in r.diagnostics] == [("L001", 1, 1)]
    assert r.documents == []


def test_bom_is_accepted(tmp_path: Path) -> None:
    p = tmp_path / "bom.yml"
    p.write_bytes(b"\xef\xbb\xbftype: fleet\nname: x\n")
    r = load_paths([p])
    assert r.diagnostics == [] and r.documents[0].data["type"] == "fleet"


def test_directories_recurse_and_skip_hidden(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / ".git").mkdir()
    for rel in ("a/x.dstack.yml", "b.yaml", "c.yml", ".git/d.yml", "notes.txt"):
        (tmp_path / rel).write_text("type: fleet\n")
    names = [p.relative_to(tmp_path).as_posix() for p in expand_paths([tmp_path])]
    assert names == ["b.yaml", "c.yml", "a/x.dstack.yml"]
    # The same file named twice is read once.
    assert len(expand_paths([tmp_path / "c.yml", tmp_path / "c.yml"])) == 1


def test_merge_keys_explicit_keys_win() -> None:
    r = _load("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  y: 3\n")
    assert r.documents[0].data["m"] == {"x": 1, "y": 3}


def test_non_regular_files_are_refused_without_reading(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "pipe.yml"
    os.mkfifo(fifo)  # reading it would block forever
    for path in (str(fifo), "/dev/zero"):
        result = load_paths([path])
        assert [d.code for d in result.diagnostics] == ["L000"]
        assert "not a regular file" in result.diagnostics[0].message


def test_a_merge_with_many_keys_is_read_once_per_key() -> None:
    keys = "\n".join(f"  k{i}: v{i}" for i in range(20_000))
    r = _load(f"base: &b\n{keys}\ncopy:\n  <<: *b\n  k0: mine\n")
    assert r.diagnostics == []
    copy = r.documents[0].data["copy"]
    assert len(copy) == 20_000 and copy["k0"] == "mine" and copy["k19999"] == "v19999"
    assert r.documents[0].source.key(("copy", "k5")) == (7, 3)


def test_many_plain_keys_are_not_an_alias_bomb() -> None:
    keys = "\n".join(f"k{i}: v" for i in range(45_000))
    r = _load("type: fleet\n" + keys + "\n")
    assert [d.code for d in r.diagnostics] == []
    assert len(r.documents[0].data) == 45_001


def test_a_file_past_the_parse_budget_is_refused_where_it_passes_it() -> None:
    """Plain YAML costs about 1.7 s and 200 MB per MB to compose: a file of more than
    100,000 values is refused from the scan alone, at the line where it passes the budget."""
    keys = "\n".join(f"k{i}: v" for i in range(400_000))  # 800,000 values, about 6 MB
    r = _load("type: fleet\n" + keys + "\n")
    assert [(d.code, d.line) for d in r.diagnostics] == [("L015", 50_001)]
    assert "more than 100,000 values" in r.diagnostics[0].message and not r.documents


def test_nesting_is_refused_before_the_parser() -> None:
    r = _load("a: " + "[" * 30_000 + "\n")
    assert [d.code for d in r.diagnostics] == ["L005"]
    deep_blocks = "".join(" " * i + f"k{i}:\n" for i in range(250))
    assert [d.code for d in _load(deep_blocks).diagnostics] == ["L005"]
    quoted = 'a: "' + "[" * 5_000 + '"\n'  # brackets in a string are not nesting
    assert _load(quoted).diagnostics == []


def test_a_quote_cannot_hide_nesting_from_the_prescan(tmp_path: Path) -> None:
    """`x: a '` is a plain scalar to YAML, not an open quote; 30,000 `[` after it once
    reached libyaml's recursive composer and killed the process. Run in a subprocess, so a
    crash fails the test instead of the test run."""
    import subprocess
    import sys

    bad = tmp_path / "bad.yml"
    bad.write_text("x: a '\ny: " + "[" * 30_000 + "\n")
    r = subprocess.run([sys.executable, "-m", "gpufleet", "validate", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "bad.yml:2:1: error[L005]: the YAML nests deeper than 200 levels" in r.stdout


def test_alias_expansion_counts_the_scalars_inside() -> None:
    """10,000 aliases of a 10,000-item list: 100 million values, refused after 100,000
    (bench/fuzz.py --bombs times it)."""
    text = "a: &a [" + ", ".join(["x"] * 10_000) + "]\nb: [" + ", ".join(["*a"] * 10_000) + "]\n"
    r = _load(text)
    assert [d.code for d in r.diagnostics] == ["L005"]
    assert "expands to more than 100,000 values" in r.diagnostics[0].message


def test_a_bomb_is_refused_before_a_value_is_built() -> None:
    """Nine mappings of nine, each repeating the one before: 9^10 values, refused at the
    anchor whose repeats pass the bound, without building one of them."""
    lines = ["a0: &a0 {" + ", ".join(f"k{j}: v" for j in range(9)) + "}"]
    lines += [f"a{i}: &a{i} {{" + ", ".join(f"m{j}: *a{i - 1}" for j in range(9)) + "}"
              for i in range(1, 10)]
    built: list[int] = []  # counts, not nodes: a node's repr would expand the bomb
    real = _Builder.build
    try:
        _Builder.build = lambda self, node, path: built.append(1)  # type: ignore[method-assign]
        r = _load("\n".join(lines) + "\n")
    finally:
        _Builder.build = real  # type: ignore[method-assign]
    assert built == []
    assert [(d.code, d.line) for d in r.diagnostics] == [("L005", 5)]
    assert "expands to more than 100,000 values" in r.diagnostics[0].message


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_the_expansion_measured_over_the_graph_is_the_builders_own_count(
        data: st.DataObject) -> None:
    """Anchored lists and mappings repeating earlier ones through aliases and merge keys
    (`<<: *a`, `<<: [*a, *b]`): the count the graph's measure reaches is the one the
    builder reaches building every value (the bound is passed at one less, not at it)."""
    defs: list[str] = []
    mappings: list[int] = []
    for i in range(data.draw(st.integers(1, 6))):
        items = data.draw(st.lists(st.sampled_from(["x", *(f"*d{j}" for j in range(i))]),
                                   max_size=4))
        if not data.draw(st.booleans()):
            defs.append(f"d{i}: &d{i} [{', '.join(items)}]")
            continue
        entries = [f"k{k}: {v}" for k, v in enumerate(items)]
        merged = data.draw(st.lists(st.sampled_from(mappings), max_size=3)) if mappings else []
        if merged:
            source = f"*d{merged[0]}" if len(merged) == 1 else \
                "[" + ", ".join(f"*d{j}" for j in merged) + "]"
            entries.insert(data.draw(st.integers(0, len(entries))), f"<<: {source}")
        defs.append(f"d{i}: &d{i} {{{', '.join(entries)}}}")
        mappings.append(i)
    top = data.draw(st.lists(st.sampled_from([f"*d{j}" for j in range(len(defs))]),
                             max_size=5))
    node = yaml.compose("\n".join(defs) + f"\ntop: [{', '.join(top)}]\n",
                        Loader=yaml.SafeLoader)
    builder = _Builder("f.yml")
    builder.build(node, ())
    assert expansion_past_bound(node, builder.count) is None
    if builder.count:
        assert expansion_past_bound(node, builder.count - 1) is not None


def test_a_folder_brings_in_dstacks_profiles_file_but_no_other_hidden_file(
        tmp_path: Path) -> None:
    """dstack keeps `profiles.yml` in `.dstack/`; other hidden folders stay skipped."""
    from gpufleet.input.validate import validate_paths

    (tmp_path / ".dstack").mkdir()
    (tmp_path / ".dstack" / "profiles.yml").write_text(
        "profiles:\n  - name: cheap\n    backends: [azure, lambda]\n    spot_policy: auto\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.yml").write_text("type: fleet\nname: hidden\nnodes: 1\n")
    (tmp_path / "f.yml").write_text("type: fleet\nname: shown\nnodes: 1\n")
    v = validate_paths([str(tmp_path)])
    assert [p.name for p in v.inputs.profiles] == ["cheap"]
    assert [f.name for f in v.inputs.fleets] == ["shown"]
    # The seed's profile from dstack's docs: both backends are built, nothing narrowed.
    assert v.diagnostics == []
    assert v.inputs.profiles[0].values["backends"] == ("azure", "lambda")


_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5))
_trees = st.recursive(_leaf, lambda kids: st.one_of(
    st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=4), kids, max_size=3)),
    max_leaves=60)


def _chain(kinds: list[str]) -> object:
    """A chain of one-key mappings and one-item sequences: the most levels per column."""
    tree: object = "v"
    for kind in reversed(kinds):
        tree = {"k": tree} if kind == "map" else [tree]
    return tree


_kinds = st.lists(st.sampled_from(["map", "seq"]), min_size=1, max_size=90)
_chains = _kinds.map(_chain)


def _by_hand(kinds: list[str]) -> str:
    """The same chain as a person may write it: one space more per level (`k:`, `-`)."""
    lines = [" " * col + ("k:" if kind == "map" else "-") for col, kind in enumerate(kinds)]
    return "\n".join([*lines, " " * len(kinds) + "v"]) + "\n"


@settings(max_examples=300, deadline=None)
@given(tree=st.one_of(_trees, _chains), style=st.sampled_from([False, True, None]),
       indent=st.sampled_from([2, 4]), compact=st.booleans())
def test_the_depth_bound_holds_for_any_nesting(tree: object, style: bool | None, indent: int,
                                              compact: bool) -> None:
    """The loader skips the token scan where ``depth_bound`` is within the limit: the bound
    must never be below the depth the scan would count, in block, flow and mixed styles,
    with sequences written flush under their keys (`key:\\n- a`, the tightest)."""
    text = yaml.safe_dump(tree, default_flow_style=style, indent=indent, width=10_000)
    if compact:  # "- - - a" and sequences flush with their keys
        text = text.replace("-\n" + " " * indent + "- ", "- - ")
    bound = depth_bound(text)
    assert nesting_depth(text, bound) == (0, 0), (bound, text)


@settings(max_examples=200, deadline=None)
@given(kinds=_kinds)
def test_the_depth_bound_holds_for_one_space_indents(kinds: list[str]) -> None:
    text = _by_hand(kinds)
    assert yaml.safe_load(text) == _chain(kinds)  # what it means, to be sure of the case
    bound = depth_bound(text)
    assert nesting_depth(text, bound) == (0, 0), (bound, text)


def test_a_file_past_the_bound_is_still_scanned_and_refused() -> None:
    deep = "a:\n" + "".join(" " * i + f"k{i}:\n" for i in range(1, 260)) + " " * 260 + "v\n"
    assert depth_bound(deep) > MAX_TEXT_DEPTH
    result = LoadResult()
    load_text("deep.yml", deep, result)
    assert [d.code for d in result.diagnostics] == ["L005"]
