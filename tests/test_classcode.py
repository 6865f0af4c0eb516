"""gpufleet's dataclasses' generated methods run from code kept between runs
(gpufleet/classcode.py): the same classes as compiled afresh, another package's classes
untouched, a damaged table ignored and written again, and nothing kept when the cache is off."""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpufleet import classcode

ROOT = Path(__file__).resolve().parent.parent
TABLE = f"dataclasses.{sys.implementation.cache_tag}.bin"

# In a fresh interpreter: import modules full of dataclasses, and describe every generated
# method of theirs (code, annotations, defaults) and how a made instance behaves.
PROBE = r"""
import dataclasses, json, re, sys
sys.path.insert(0, sys.argv[1])
import gpufleet.input.spec, gpufleet.compile.design, gpufleet.traits
from gpufleet import classcode

@dataclasses.dataclass(frozen=True)
class Outside:  # a class of another module ("__main__"): never kept
    x: int = 1

def describe(cls):
    out = {}
    for name in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__"):
        fn = cls.__dict__.get(name)
        code = getattr(fn, "__code__", None)
        if code is not None and code.co_filename == "<string>":
            described = [code.co_code.hex(), repr(code.co_consts), code.co_names,
                         code.co_varnames, fn.__qualname__, repr(fn.__annotations__),
                         repr(fn.__defaults__), repr(fn.__kwdefaults__)]
            out[name] = [re.sub(" at 0x[0-9a-f]+", "", str(d)) for d in described]
    return out

classes = {}
for module in (gpufleet.input.spec, gpufleet.compile.design, gpufleet.traits):
    for name, cls in vars(module).items():
        if (isinstance(cls, type) and dataclasses.is_dataclass(cls)
                and cls.__module__ == module.__name__):
            classes[f"{module.__name__}.{name}"] = describe(cls)
o = Outside()
try:
    o.x = 2
    frozen = False
except dataclasses.FrozenInstanceError:
    frozen = True
print(json.dumps({"classes": classes, "outside": describe(Outside), "frozen": frozen,
                  "repr": repr(o), "eq": o == Outside(), "stats": classcode.stats()}))
"""


def _probe(tmp_path: Path, cache: str) -> dict[str, Any]:
    env = {**os.environ, "GPUFLEET_CACHE": cache, "GPUFLEET_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", PROBE, str(ROOT)], capture_output=True,
                          text=True, env=env, check=True, cwd=tmp_path)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_kept_code_makes_the_very_classes_a_fresh_compile_makes(tmp_path: Path) -> None:
    off = _probe(tmp_path, "off")
    assert off["stats"] == [0, 0] and not (tmp_path / "code").exists()
    first = _probe(tmp_path, "on")  # compiles every text and writes the table
    table = classcode.read_table(tmp_path / "code" / TABLE)
    hits, compiled = first["stats"]
    assert hits == 0 and compiled == len(table) > 300
    second = _probe(tmp_path, "on")  # runs every text from the table
    assert second["stats"] == [compiled, 0]
    assert len(off["classes"]) > 40
    for run in (first, second):
        assert run["classes"] == off["classes"]
        assert (run["outside"], run["frozen"], run["repr"], run["eq"]) == (
            off["outside"], True, "Outside(x=1)", True)
    # the annotations are evaluated as a fresh compile has them (no __future__ inherited)
    init = next(c["__init__"] for c in second["classes"].values() if "__init__" in c)
    assert "'return': None" in init[5] and "_type_" not in init[5]
    # nothing of another package's classes is kept
    assert not any("Outside" in text for text in table)


@pytest.mark.parametrize("damage", [b"", b"\x00junk", "cut", "python", "format", "types"])
def test_a_damaged_table_is_ignored_and_written_again(tmp_path: Path, damage: object) -> None:
    _probe(tmp_path, "on")
    path = tmp_path / "code" / TABLE
    good = path.read_bytes()
    doc = marshal.loads(good)
    bad = {"cut": good[: len(good) // 2],
           "python": marshal.dumps({**doc, "python": "cpython-20"}),
           "format": marshal.dumps({**doc, "format": 99}),
           "types": marshal.dumps({**doc, "code": {"text": "not code"}})}.get(str(damage), damage)
    assert isinstance(bad, bytes)
    path.write_bytes(bad)
    assert classcode.read_table(path) == {}
    again = _probe(tmp_path, "on")
    assert again["stats"][0] == 0 and again["stats"][1] > 300  # compiled afresh
    (tmp_path / "good.bin").write_bytes(good)
    assert classcode.read_table(path).keys() == classcode.read_table(tmp_path / "good.bin").keys()


def test_a_folder_that_cannot_be_written_costs_nothing_but_the_cache(tmp_path: Path) -> None:
    (tmp_path / "code").write_text("a file where the folder should be")
    run = _probe(tmp_path, "on")
    assert run["stats"][1] > 300 and (tmp_path / "code").is_file()
    assert list(tmp_path.rglob(".gpufleet-*")) == []


def test_the_cache_folder_and_no_home_to_put_it_in(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    """`$GPUFLEET_CACHE_DIR`, else `$XDG_CACHE_HOME/gpufleet`, else `~/.cache/gpufleet`; with
    no home folder (no $HOME and no passwd entry) no cache, never a failed import."""
    from gpufleet.cachedir import cache_dir

    monkeypatch.setenv("GPUFLEET_CACHE", "on")
    monkeypatch.setenv("GPUFLEET_CACHE_DIR", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir("code") == tmp_path / "explicit" / "code"
    monkeypatch.delenv("GPUFLEET_CACHE_DIR")
    assert cache_dir("code") == tmp_path / "xdg" / "gpufleet" / "code"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "gpufleet" / "runs"

    def nowhere() -> Path:
        raise RuntimeError("Could not determine home directory.")
    monkeypatch.setattr(Path, "home", staticmethod(nowhere))
    assert cache_dir("code") is None
    monkeypatch.setenv("GPUFLEET_CACHE", "off")
    monkeypatch.setenv("GPUFLEET_CACHE_DIR", str(tmp_path / "explicit"))
    assert cache_dir("code") is None


def test_an_entry_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    from gpufleet.cachedir import write_entry

    target = tmp_path / "cache" / "kind" / "entry.bin"
    assert write_entry(target, b"whole") and target.read_bytes() == b"whole"
    assert oct(target.stat().st_mode & 0o777) == "0o600"
    assert oct(target.parent.stat().st_mode & 0o777) == "0o700"
    blocked = tmp_path / "cache" / "kind" / "a-folder"
    blocked.mkdir()  # the rename cannot replace a folder: nothing written, nothing left
    assert not write_entry(blocked, b"data") and blocked.is_dir()
    assert sorted(p.name for p in target.parent.iterdir()) == ["a-folder", "entry.bin"]
    (tmp_path / "file").write_text("a file where a folder should be")
    assert not write_entry(tmp_path / "file" / "entry.bin", b"data")
