"""Hostile input, class by class, as generated tests: nccl-tests logs (never a pass on
evidence that cannot be read), stack exports and outputs (never an internal error), output
targets (never replaced, never hung on) and alias expansion (refused, never exhausting
memory). CI runs a bounded number per class; `python bench/fuzz.py --hostile` many more."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gpufleet.cli import main
from gpufleet.evidence import Expectation, parse_log, verdict
from gpufleet.input.loader import LoadResult, load_text

from acceptanceutil import log

QUIET = settings(deadline=None, suppress_health_check=list(HealthCheck), max_examples=60)
A4_EXPECTATION = Expectation("roce", "RoCE", 680.0, 612.0, "test", True)


def run(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue() + err.getvalue()


# --- nccl-tests logs --------------------------------------------------------------------------

# Tokens nccl-tests never writes where a number goes.
NOT_NUMBERS = st.one_of(
    st.sampled_from(["lots", "nan", "inf", "-5", "1e308", "1E3", "7_00", "0x10", "\u0663",
                     "\u0667\u0660\u0660",
                     "1.2.3", "", "-", "+1", "N/A", "9" * 5000, "1,000", "\u00bd"]),
    st.text(min_size=1, max_size=8).filter(lambda t: not t.replace(".", "").isascii()
                                           or not t.replace(".", "").isdigit()))


@QUIET
@given(st.integers(0, 30), st.integers(0, 9), NOT_NUMBERS)
def test_a_row_with_an_unreadable_field_never_passes(row: int, column: int,
                                                     token: str) -> None:
    lines = log(700.0).splitlines()
    rows = [i for i, ln in enumerate(lines) if ln[:12].strip().isdigit()]
    i = rows[row % len(rows)]
    fields = lines[i].split()
    fields[5 + column % 8] = token.replace("\n", " ").strip() or "?"
    lines[i] = "  ".join(fields)
    result = verdict(parse_log("\n".join(lines) + "\n"), A4_EXPECTATION)
    assert result.code != 0, (fields, result.lines)


@QUIET
@given(st.lists(st.sampled_from(["pass", "fail", "wrong", "oob"]), min_size=1, max_size=4))
def test_any_failing_run_in_a_log_fails_it(kinds: list[str]) -> None:
    parts = {"pass": log(700.0), "fail": log(4.2), "wrong": log(700.0, wrong_at=20),
             "oob": log(700.0).replace(": 0 OK", ": 3 FAILED")}
    result = verdict(parse_log("".join(parts[k] for k in kinds)), A4_EXPECTATION)
    assert result.code == (0 if set(kinds) == {"pass"} else 1), result.lines


@QUIET
@given(st.text(max_size=300), st.integers(0, 40))
def test_noise_inserted_into_a_failing_log_never_makes_it_pass(noise: str, at: int) -> None:
    lines = log(4.2).splitlines()
    lines.insert(at % len(lines), noise)
    assert verdict(parse_log("\n".join(lines)), A4_EXPECTATION).code != 0


# --- stack exports and outputs ----------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 10**40) | st.floats(allow_nan=False) |
    st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["version", "deployment", "resources", "urn", "type", "outputs",
                         "inputs", "pending_operations", "checkpoint", "latest", "custom",
                         "parent", "provider", "dependencies", "propertyDependencies",
                         "4dabf18193072939515e22adb298388d", "plaintext", "ciphertext",
                         "nodes", "backend", "networks", "access", "bastion"]) |
        st.text(max_size=5), inner, max_size=4),
    max_leaves=12)


@pytest.fixture(scope="module")
def real_export(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from exportutil import export

    from planutil import EXAMPLES, SHARED

    return export([EXAMPLES / "fleets" / "gcp-a4.dstack.yml", *SHARED])


def paths_in(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(data, dict):
        for k, v in data.items():
            out += paths_in(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += paths_in(v, (*prefix, i))
    return out


def put(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    data = copy.copy(data)
    data[path[0]] = put(data[path[0]], path[1:], value)
    return data


def check_json_commands(tmp: Path, raw: bytes) -> None:
    p = tmp / "in.json"
    p.write_bytes(raw)
    from planutil import EXAMPLES, SHARED

    files = [str(EXAMPLES / "fleets" / "gcp-a4.dstack.yml"), *SHARED]
    for args in (["diff", "--state", str(p), *files, "--full"],
                 ["export", "dstack", "--state", str(p), "--out", str(tmp / "o"), "--force"],
                 ["export", "dstack", "--outputs", str(p), "--out", str(tmp / "o"),
                  "--force"]):
        code, out = run(*args)
        assert code in (0, 1, 2, 7), (args[0], code, out[-600:])
        assert "Traceback" not in out and "internal error" not in out


@QUIET
@given(JSON)
def test_any_json_is_read_or_refused(tmp_path_factory: pytest.TempPathFactory,
                                     data: Any) -> None:
    check_json_commands(tmp_path_factory.mktemp("j"), json.dumps(data).encode())


@settings(deadline=None, suppress_health_check=list(HealthCheck), max_examples=40)
@given(st.integers(0, 10**6), JSON)
def test_a_mutated_export_is_read_or_refused(tmp_path_factory: pytest.TempPathFactory,
                                             real_export: dict[str, Any], pick: int,
                                             value: Any) -> None:
    places = paths_in(real_export)
    mutated = put(real_export, places[pick % len(places)], value)
    check_json_commands(tmp_path_factory.mktemp("m"), json.dumps(mutated).encode())


@pytest.mark.parametrize("raw", [
    b"[" * 5000 + b"]" * 5000, "{}".encode("utf-16"), b"\xff\xfe{}", b"{\"version\": \xff}",
    b"{\"version\": " + b"9" * 5000 + b"}", b"{\"version\": 3, \"deployment\": "
    b"{\"resources\": [], \"pending_operations\": 5}}", b"{\"checkpoint\": \"x\"}",
    b"{\"version\": NaN}", b"",
])
def test_hostile_json_files_exit_1_with_not_a_stack_export(tmp_path: Path,
                                                           raw: bytes) -> None:
    p = tmp_path / "s.json"
    p.write_bytes(raw)
    from planutil import EXAMPLES, SHARED

    code, out = run("diff", "--state", str(p), str(EXAMPLES / "fleets" / "gcp-a4.dstack.yml"),
                    *SHARED)
    assert code == 1 and "not a stack export" in out, out


# --- output targets -------------------------------------------------------------------------

TARGETS = ["missing-folder", "fifo", "symlink", "dangling-symlink", "folder", "device"]


def make_target(tmp: Path, kind: str) -> Path:
    p = tmp / "target"
    if kind == "missing-folder":
        return tmp / "nowhere" / "target"
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "symlink":
        (tmp / "real").write_text("mine\n")
        p.symlink_to(tmp / "real")
    elif kind == "dangling-symlink":
        p.symlink_to(tmp / "gone")
    elif kind == "folder":
        p.mkdir()
    elif kind == "device":
        return Path("/dev/null")
    return p


def snapshot(p: Path) -> tuple[Any, ...]:
    try:
        st_ = os.lstat(p)
    except FileNotFoundError:
        return ("absent",)
    return (stat.S_IFMT(st_.st_mode), st_.st_ino, os.readlink(p) if p.is_symlink() else None)


@pytest.mark.parametrize("kind", TARGETS)
def test_plan_out_refuses_what_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    from planutil import EXAMPLES, SHARED

    target = make_target(tmp_path, kind)
    before = snapshot(target)
    code, out = run("plan", str(EXAMPLES / "fleets" / "dev-l4.dstack.yml"), *SHARED,
                    "--out", str(target))
    assert code == 2 and "gpufleet:" in out and "fleet dev-l4" not in out
    assert snapshot(target) == before


@pytest.mark.parametrize("kind", ["fifo", "symlink", "dangling-symlink", "folder", "foreign"])
def test_export_and_acceptance_refuse_targets_and_foreign_files(
        tmp_path: Path, kind: str, real_export: dict[str, Any]) -> None:
    from planutil import EXAMPLES, SHARED

    state = tmp_path / "state.json"
    state.write_text(json.dumps(real_export))
    out = tmp_path / "out"
    out.mkdir()
    victims = [out / "a4.dstack.yml", out / "a4-nccl.dstack.yml"]
    for v in victims:
        if kind == "foreign":
            v.write_text("type: fleet  # mine\n")
        else:
            make_target(tmp_path, kind).rename(v)
    before = [snapshot(v) for v in victims]
    code, text = run("export", "dstack", "--state", str(state), "--out", str(out))
    assert code == 2 and ("nothing was written" in text or "regular files" in text), text
    code, text = run("acceptance", "a4", str(EXAMPLES / "fleets" / "gcp-a4.dstack.yml"),
                     *SHARED, "--out", str(out))
    assert code == 2, text
    assert [snapshot(v) for v in victims] == before
    assert not (out / "dstack-server-config.yml").exists()  # nothing half-written


def test_an_out_folder_whose_parent_is_missing_is_refused_first(
        tmp_path: Path, real_export: dict[str, Any]) -> None:
    from planutil import EXAMPLES, SHARED

    state = tmp_path / "state.json"
    state.write_text(json.dumps(real_export))
    nowhere = tmp_path / "no" / "such" / "folder"
    code, text = run("export", "dstack", "--state", str(state), "--out", str(nowhere))
    assert code == 2 and "does not exist" in text
    code, text = run("acceptance", "a4", str(EXAMPLES / "fleets" / "gcp-a4.dstack.yml"),
                     *SHARED, "--out", str(nowhere))
    assert code == 2 and "does not exist" in text and not nowhere.parent.exists()


def test_lock_refuses_a_fifo_and_a_foreign_file(tmp_path: Path) -> None:
    from planutil import EXAMPLES, SHARED

    fleet = str(EXAMPLES / "fleets" / "dev-l4.dstack.yml")
    lock = tmp_path / "gpufleet.lock"
    os.mkfifo(lock)
    code, out = run("lock", fleet, *SHARED, "--lock", str(lock))
    assert code == 2 and "a FIFO" in out and stat.S_ISFIFO(os.lstat(lock).st_mode)


def test_concurrent_locks_keep_every_entry(tmp_path: Path) -> None:
    """Two `gpufleet lock` runs on one lock file with different fleet files: with the
    advisory lock around read-modify-write, both entries survive, every time."""
    import subprocess
    import sys

    from planutil import SHARED

    fleets = []
    for i in range(4):
        p = tmp_path / f"f{i}.yml"
        p.write_text(f"type: fleet\nname: fleet{i}\nnodes: 1\nbackends: [aws]\n"
                     "resources:\n  gpu: 0\n")
        fleets.append(str(p))
    lock = str(tmp_path / "gpufleet.lock")
    procs = [subprocess.Popen([sys.executable, "-m", "gpufleet", "lock", f, *SHARED,
                               "--lock", lock], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT) for f in fleets]
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out
    text = Path(lock).read_text()
    assert all(f"  fleet{i}:" in text for i in range(4)), text


# --- alias expansion ------------------------------------------------------------------------

@settings(deadline=None, suppress_health_check=list(HealthCheck), max_examples=40)
@given(st.integers(1, 12), st.integers(2, 60), st.booleans())
def test_alias_bombs_are_refused(levels: int, width: int, merge: bool) -> None:
    """Each level repeats the one below ``width`` times, through list items or mapping
    values; past 100,000 expanded values it is refused, never built."""
    if merge:
        lines = ["a0: &a0 {" + ", ".join(f"k{j}: v" for j in range(width)) + "}"]
        lines += [f"a{i}: &a{i} {{" + ", ".join(f"m{j}: *a{i - 1}" for j in range(width))
                  + "}" for i in range(1, levels + 1)]
    else:
        lines = ["a0: &a0 [" + ", ".join(["x"] * width) + "]"]
        lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]"
                  for i in range(1, levels + 1)]
    result = LoadResult()
    load_text("bomb.yml", "\n".join(lines) + "\n", result)
    codes = [d.code for d in result.diagnostics]
    assert codes in ([], ["L005"])
    if width ** (levels + 1) > 1_000_000:
        assert codes == ["L005"]


def test_a_folder_with_a_symlink_loop_is_reported_not_crashed(tmp_path: Path) -> None:
    (tmp_path / "a.yml").symlink_to(tmp_path / "b.yml")
    (tmp_path / "b.yml").symlink_to(tmp_path / "a.yml")
    code, out = run("validate", str(tmp_path))
    assert code == 1 and "error[L000]" in out and "symbolic links" in out


_json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(alphabet='[]{}"\\a', max_size=4)),
    lambda kids: st.one_of(st.lists(kids, max_size=3),
                           st.dictionaries(st.text(alphabet='[]{}"\\a', max_size=3), kids,
                                           max_size=3)),
    max_leaves=40)


def _char_walk(text: str) -> int:
    """The reference: brackets outside strings, one character at a time."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


@settings(deadline=None, max_examples=500)
@given(_json_values)
def test_the_depth_of_a_parsed_value_agrees_with_a_character_walk(value: object) -> None:
    """parse_json counts depth on the parsed value, level by level; the text's brackets
    outside strings (which may hold brackets and escaped quotes) are the reference."""
    from gpufleet.input.jsonfile import MAX_JSON_DEPTH, nesting

    text = json.dumps(value)
    assert nesting(value) == _char_walk(text)
    assert nesting(value, limit=2) == min(_char_walk(text), 3)
    assert nesting(json.loads(text)) <= MAX_JSON_DEPTH


@settings(deadline=None, max_examples=300)
@given(_json_values, st.integers(min_value=-3, max_value=2), st.integers(0, 40),
       st.sampled_from(["[", '{"k": ']))
def test_parse_json_refuses_exactly_what_nests_past_the_bound_from_any_depth(
        value: object, extra: int, calls: int, opener: str) -> None:
    """parse_json holds the bound with the recursion limit where the scanner counts
    against it: a value wrapped to end near the bound (a number or a hook's call at the
    deepest level included) is read or refused exactly as its brackets say, whatever
    the depth of the code that asks."""
    from gpufleet.input.jsonfile import MAX_JSON_DEPTH, JsonInputError, parse_json

    inner = json.dumps(value)
    assume(re.search(r"\d{31}", inner) is None)  # refused for its digits, at any depth
    wraps = max(0, MAX_JSON_DEPTH + extra - _char_walk(inner))
    closer = "]" if opener == "[" else "}"
    text = opener * wraps + inner + closer * wraps

    def parse(depth: int) -> object:
        return parse(depth - 1) if depth else parse_json(text.encode(), "x.json", "a value")
    # the recursion limit's path runs with no other thread (pytest-xdist's worker has one),
    # the walk's beside them: both give the same answers
    for threads in (1, 2):
        with mock.patch("gpufleet.input.jsonfile.threading.active_count",
                        return_value=threads):
            if _char_walk(text) > MAX_JSON_DEPTH:
                with pytest.raises(JsonInputError, match="nested deeper than"):
                    parse(calls)
            else:
                assert parse(calls) == json.loads(text)


def test_the_recursion_limit_holds_the_json_bound_on_this_interpreter() -> None:
    """The fast path is the one taken here (CPython 3.11: the scanner counts against the
    recursion limit), and the limit is given back after a parse and after a refusal."""
    from gpufleet.input.jsonfile import JsonInputError, _int, _margin, parse_json

    if sys.version_info[:2] != (3, 11):
        pytest.skip("the scanner's levels count against the recursion limit in 3.11 only")
    assert _margin({"parse_int": _int("x")}) is not None
    limit = sys.getrecursionlimit()
    with pytest.raises(JsonInputError, match="nested deeper than"):
        parse_json(b"[" * 5000 + b"]" * 5000, "x.json", "a value")
    assert parse_json(b"[[1]]", "x.json", "a value") == [[1]]
    assert sys.getrecursionlimit() == limit


def test_json_nested_past_the_bound_is_refused_with_its_offset() -> None:
    from gpufleet.input.jsonfile import MAX_JSON_DEPTH, JsonInputError, parse_json

    n = MAX_JSON_DEPTH + 1
    deep = '{"a": "[[[", "b": ' + "[" * n + "]" * n + "}"
    with pytest.raises(JsonInputError, match=f"nested deeper than {MAX_JSON_DEPTH} levels "
                                             r"\(at offset (\d+)\)") as e:
        parse_json(deep.encode(), "x.json", "a stack export")
    offset = int(str(e.value).split("at offset ")[1].split(")")[0])
    assert deep[offset] == "[" and offset > deep.index("b")
    ok = '{"b": ' + "[" * (n - 2) + "]" * (n - 2) + "}"  # exactly the bound: read
    assert parse_json(ok.encode(), "x.json", "a stack export")["b"] is not None
    # far past what the C parser recurses into: its own guard, the same message
    with pytest.raises(JsonInputError, match="nested deeper than"):
        parse_json(b"[" * 200_000 + b"]" * 200_000, "x.json", "a stack export")
    with pytest.raises(JsonInputError, match="nested deeper than"):
        parse_json(b'{"a": ' * 200_000, "x.json", "a stack export")


def _every_value_ok(value: Any) -> bool:
    """The plain walk (every value looked at), which the state's container walk must match."""
    from gpufleet.review.state import SECRET_SIG, SECRET_VALUE

    if isinstance(value, dict):
        if SECRET_SIG in value:
            return value[SECRET_SIG] == SECRET_VALUE and any(
                isinstance(value.get(k), str) for k in ("ciphertext", "plaintext"))
        return all(_every_value_ok(v) for v in value.values())
    if isinstance(value, list):
        return all(_every_value_ok(v) for v in value)
    return True


def _secret_values() -> st.SearchStrategy[Any]:
    from gpufleet.review.state import SECRET_SIG, SECRET_VALUE

    secret = st.fixed_dictionaries(
        {SECRET_SIG: st.sampled_from([SECRET_VALUE, "x", 1])},
        optional={"ciphertext": st.sampled_from(["v1:abc", 3, None]),
                  "plaintext": st.sampled_from(['"x"', False])})
    leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=3), secret)
    return st.recursive(leaves, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=2), inner, max_size=4)),
        max_leaves=20)


@settings(deadline=None, max_examples=300)
@given(st.dictionaries(st.text(max_size=2), _secret_values(), max_size=4))
def test_the_secret_walk_finds_what_a_walk_over_every_value_finds(
        outputs: dict[str, Any]) -> None:
    """The state's walk looks into containers only: it answers what looking at every value
    answers, for secrets well and badly formed at any depth."""
    from gpufleet.review import state

    assert state._secrets_ok(outputs) == _every_value_ok(outputs)


def test_a_malformed_secret_is_refused_however_its_key_is_spelt(
        real_export: dict[str, Any]) -> None:
    """Every secret is checked; a key spelt with JSON escapes still counts."""
    from gpufleet.review import StateError, parse_export
    from gpufleet.review.state import SECRET_SIG

    data = copy.deepcopy(real_export)
    resources = data["deployment"]["resources"]
    i = next(i for i, r in enumerate(resources) if r.get("outputs"))
    good = json.dumps(data).replace("<", "\\u003c")  # as Go writes `<`, `>`, `&`
    assert parse_export(good).resources
    resources[i]["outputs"]["leak"] = {SECRET_SIG: "1b47061264138c4ac30d75fd1eb44270"}
    plain = json.dumps(data)
    escaped = plain.replace(SECRET_SIG, "\\u0034" + SECRET_SIG[1:4] + "\\u0066"
                            + SECRET_SIG[5:])  # "4" and "f" as escapes
    assert SECRET_SIG not in escaped and json.loads(escaped) == data
    for text in (plain, escaped):
        with pytest.raises(StateError, match=f"resource #{i} is malformed \\(a secret in "
                                             "outputs\\)"):
            parse_export(text)
