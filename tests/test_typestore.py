"""The provider SDKs' type indexes kept between runs (components/typestore.py): an index read
back makes the classes a fresh one makes, an entry is used only for the source and
interpreter it was written for, and one that is not whole -- truncated, another module's,
pointing past its end, not code -- is ignored and written again, never trusted."""

from __future__ import annotations

import importlib
import marshal
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_lazyinputs import INPUTS, fake_sdk, walk  # noqa: F401  (fake_sdk: the fixture)

from gpufleet.components import lazyinputs, sdk, typestore


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cache on, in a folder of its own; returns where the type indexes go."""
    monkeypatch.setenv("GPUFLEET_CACHE", "on")
    monkeypatch.setenv("GPUFLEET_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "sdk"


def _forget(name: str) -> None:
    """The fake SDK as a new process finds it: nothing imported, no index held."""
    for key in [k for k in sys.modules if k == name or k.startswith(f"{name}.")]:
        del sys.modules[key]
        lazyinputs._INDEXES.pop(key, None)
    lazyinputs.STORED[:] = [m for m in lazyinputs.STORED if not m.startswith(f"{name}.")]
    lazyinputs._SERVICES.discard(f"{name}.svc")
    importlib.invalidate_caches()


def _load(name: str) -> tuple[object, object]:
    """The fake service imported through ``sdk.by_class``: its ``thing`` and ``_inputs``."""
    _forget(name)
    sdk.by_class(name, ["svc"])
    thing = importlib.import_module(f"{name}.svc.thing")
    return thing, sys.modules[f"{name}.svc._inputs"]


def _stored(name: str) -> bool:
    return f"{name}.svc._inputs" in lazyinputs.STORED


@pytest.fixture
def fake(fake_sdk: tuple[str, Path]) -> Iterator[tuple[str, Path]]:  # noqa: F811
    yield fake_sdk
    _forget(fake_sdk[0])


def test_an_index_read_back_makes_the_classes_a_fresh_one_makes(
        store: Path, fake: tuple[str, Path]) -> None:
    from pulumi import _types

    name, _ = fake
    thing, inputs = _load(name)
    assert not _stored(name)
    entries = list(store.iterdir())
    assert len(entries) == 1
    assert stat.S_IMODE(entries[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(store.stat().st_mode) == 0o700
    fresh = {n: _types.input_type_types(getattr(thing, n)) for n in ("MidArgs", "LeafArgs")}
    thing, inputs = _load(name)
    assert _stored(name)
    assert {"MidArgs", "LeafArgs", "BaseArgs"} <= set(vars(thing))
    # read back, still made only when named (MidArgsDict: only inside a string)
    assert "UnusedArgs" not in vars(inputs) and "MidArgsDict" not in vars(inputs)
    assert inputs.MidArgsDict.__annotations__.keys() == {"leaf"}  # type: ignore[attr-defined]
    mid = thing.MidArgs  # type: ignore[attr-defined]
    assert _types.is_input_type(mid) and issubclass(mid, thing.BaseArgs)  # type: ignore[attr-defined]
    assert mid.__module__ == f"{name}.svc._inputs"
    assert _types.input_type_types(mid) == {"leaf": thing.LeafArgs}  # type: ignore[attr-defined]
    assert {n: repr(_types.input_type_types(getattr(thing, n))) for n in fresh} == \
        {n: repr(v) for n, v in fresh.items()}
    assert _types.is_input_type(inputs.UnusedArgs)  # type: ignore[attr-defined]
    assert inputs.__all__ == []  # type: ignore[attr-defined]


def test_an_edited_source_is_indexed_again(store: Path, fake: tuple[str, Path]) -> None:
    name, service = fake
    _load(name)
    (service / "_inputs.py").write_text(INPUTS + "\n\nclass AddedArgs:\n    pass\n")
    _, inputs = _load(name)
    assert not _stored(name)
    assert inputs.AddedArgs.__name__ == "AddedArgs"  # type: ignore[attr-defined]
    _, inputs = _load(name)  # and the entry written for the new text is read
    assert _stored(name) and inputs.AddedArgs.__name__ == "AddedArgs"  # type: ignore[attr-defined]


def _header(raw: bytes) -> tuple[int, tuple]:  # type: ignore[type-arg]
    at = len(typestore._MARK) + typestore._LENGTH
    size = int.from_bytes(raw[len(typestore._MARK):at], "big")
    return at + size, marshal.loads(raw[at:at + size])


def _rewritten(raw: bytes, header: tuple) -> bytes:  # type: ignore[type-arg]
    end, _ = _header(raw)
    head = marshal.dumps(header)
    return typestore._MARK + len(head).to_bytes(typestore._LENGTH, "big") + head + raw[end:]


def _with_part(raw: bytes, name: str, part: bytes) -> bytes:
    """The entry with class ``name``'s part (its refs and body) replaced by ``part``."""
    end, (key, preamble, classes) = _header(raw)
    parts = {n: raw[end + s:end + e] for n, (_, _, s, e) in classes.items()}
    parts[name] = part
    moved, at = {}, 0
    for n, (bases, decorator, _, _) in classes.items():
        moved[n] = (bases, decorator, at, at + len(parts[n]))
        at += len(parts[n])
    head = marshal.dumps((key, preamble, moved))
    return (typestore._MARK + len(head).to_bytes(typestore._LENGTH, "big") + head
            + b"".join(parts.values()))


def _spoil(raw: bytes, how: str) -> bytes:
    end, (key, preamble, classes) = _header(raw)
    first = next(iter(classes))
    bases, decorator, start, stop = classes[first]
    if how == "truncated":
        return raw[: len(raw) // 2]
    if how == "garbage":
        return os.urandom(len(raw))
    if how == "no marker":
        return raw[len(typestore._MARK):]
    if how == "another key":
        return _rewritten(raw, (("other", *key[1:]), preamble, classes))
    if how == "past its end":
        return _rewritten(raw, (key, preamble, {**classes,
                                                first: (bases, decorator, start,
                                                        len(raw) * 2)}))
    refs, body = marshal.loads(raw[end + start:end + stop])
    if how == "a body that is not code":
        return _with_part(raw, first, marshal.dumps((refs, "not code")))
    if how == "a ref to no class":
        return _with_part(raw, first, marshal.dumps((("Nowhere",), body)))
    if how == "a part cut short":
        return _with_part(raw, first, marshal.dumps((refs, body))[:-8])
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["truncated", "garbage", "no marker", "another key",
                                 "past its end"])
def test_an_entry_that_is_not_whole_is_ignored_and_written_again(
        store: Path, fake: tuple[str, Path], how: str) -> None:
    name, _ = fake
    _load(name)
    (entry,) = store.iterdir()
    entry.write_bytes(_spoil(entry.read_bytes(), how))
    thing, _ = _load(name)
    assert not _stored(name)
    assert thing.MidArgs.__name__ == "MidArgs"  # type: ignore[attr-defined]
    _load(name)
    assert _stored(name)  # written again, whole


@pytest.mark.parametrize("how", ["a body that is not code", "a ref to no class",
                                 "a part cut short"])
def test_a_class_whose_stored_part_does_not_read_is_made_from_the_text(
        store: Path, fake: tuple[str, Path], how: str) -> None:
    """A class's part is read only when the class is made: one that does not read back is
    refused then, and that module's classes come from its text (the entry written again)."""
    name, _ = fake
    _load(name)
    (entry,) = store.iterdir()
    raw = _spoil(entry.read_bytes(), how)
    entry.write_bytes(raw)
    stored = typestore.load(_header(raw)[1][0])
    assert stored is not None  # the header is whole
    with pytest.raises((ValueError, EOFError)):
        stored.body("BaseArgs")
    thing, _ = _load(name)  # MidArgs names BaseArgs, whose stored part is the spoiled one
    assert _stored(name) and thing.MidArgs.kind == "base"  # type: ignore[attr-defined]
    assert issubclass(thing.MidArgs, thing.BaseArgs)  # type: ignore[attr-defined]
    assert entry.read_bytes() != raw
    _load(name)
    stored = typestore.load(_header(entry.read_bytes())[1][0])
    assert stored is not None and stored.body("BaseArgs").co_name == "BaseArgs"


def test_no_entry_is_written_with_the_cache_off_or_unwritable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: tuple[str, Path]) -> None:
    name, _ = fake
    monkeypatch.setenv("GPUFLEET_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GPUFLEET_CACHE", "off")
    thing, _ = _load(name)
    assert thing.MidArgs and not (tmp_path / "cache").exists()  # type: ignore[attr-defined]
    (tmp_path / "cache").write_text("a file where the folder would be")
    monkeypatch.setenv("GPUFLEET_CACHE", "on")
    thing, _ = _load(name)
    assert thing.MidArgs and not _stored(name)  # type: ignore[attr-defined]


def test_the_types_a_resource_reaches_resolve_the_same_from_the_store(tmp_path: Path) -> None:
    """The real SDKs: the second of two runs reads every index from the store and resolves
    the types a whole import resolves."""
    env = {"GPUFLEET_CACHE": "on", "GPUFLEET_CACHE_DIR": str(tmp_path)}
    first, second, whole = walk("lazy", env), walk("lazy", env), walk("whole")
    assert first["types"] == second["types"] == whole["types"]
    made = second["made"]
    assert isinstance(made, dict) and made["whole"] == []
    assert {"pulumi_gcp.compute._inputs", "pulumi_gcp.compute.outputs",
            "pulumi_azure_native.network.outputs"} <= set(made["stored"])
    assert made["pulumi_gcp.compute._inputs"] == first["made"]["pulumi_gcp.compute._inputs"]  # type: ignore[index]
