"""A catalog file's parsed rows kept between runs (gpufleet/offers/rowcache.py): the same rows
as a parse, a changed file or a damaged entry parsed again, nothing kept with the cache off."""

from __future__ import annotations

import marshal
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufleet.offers import catalog
from gpufleet.offers.catalog import CatalogError

BUNDLED = Path(catalog.__file__).resolve().parent.parent / "data" / "catalog"


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[Path]:
    os.environ["GPUFLEET_CACHE"] = "on"
    os.environ["GPUFLEET_CACHE_DIR"] = str(tmp_path / "cache")
    try:
        yield tmp_path / "cache" / "catalog"
    finally:
        os.environ["GPUFLEET_CACHE"] = "off"
        os.environ.pop("GPUFLEET_CACHE_DIR")


def _csv(tmp_path: Path, backend: str = "lambda") -> Path:
    path = tmp_path / f"{backend}.csv"
    shutil.copy(BUNDLED / f"{backend}.csv", path)
    return path


def _parsed(path: Path, backend: str = "lambda") -> tuple[list[catalog.Row], int]:
    with path.open(newline="", encoding="utf-8") as fh:
        return catalog.parse_rows(backend, fh)


def _no_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("parsed, though an entry was kept")
    monkeypatch.setattr(catalog, "parse_rows", refuse)


def test_kept_rows_are_the_parsed_rows_and_are_read_without_parsing(
        tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _csv(tmp_path)
    first = catalog._rows("lambda", path)
    assert first == _parsed(path) and len(first[0]) > 100
    [entry] = cache.glob("lambda.*.bin")
    assert oct(entry.stat().st_mode & 0o777) == "0o600"
    _no_parse(monkeypatch)
    again = catalog._rows("lambda", path)
    assert again == first and all(type(r) is catalog.Row for r in again[0])


def test_a_changed_file_is_parsed_again_and_replaces_its_entry(tmp_path: Path,
                                                               cache: Path) -> None:
    path = _csv(tmp_path)
    before, _ = catalog._rows("lambda", path)
    [old] = cache.glob("lambda.*.bin")
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-5]))  # five rows fewer
    rows, _ = catalog._rows("lambda", path)
    assert rows == _parsed(path)[0] == before[:-5]
    [new] = cache.glob("lambda.*.bin")
    assert new != old and not old.exists()


@pytest.mark.parametrize("damage", [b"", b"\x00junk", "cut", "key", "width", "rows", "bad"])
def test_a_damaged_entry_is_parsed_again_and_written_again(
        tmp_path: Path, cache: Path, damage: object) -> None:
    path = _csv(tmp_path)
    want = catalog._rows("lambda", path)
    [entry] = cache.glob("lambda.*.bin")
    good = entry.read_bytes()
    doc = marshal.loads(good)
    bad = {"cut": good[: len(good) // 2],
           "key": marshal.dumps({**doc, "key": "another"}),
           "width": marshal.dumps({**doc, "rows": [r[:-1] for r in doc["rows"]]}),
           "rows": marshal.dumps({**doc, "rows": {}}),
           "bad": marshal.dumps({**doc, "bad": "0"})}.get(str(damage), damage)
    assert isinstance(bad, bytes)
    entry.write_bytes(bad)
    assert catalog._rows("lambda", path) == want
    assert entry.read_bytes() == good


def test_a_catalog_that_does_not_parse_keeps_nothing(tmp_path: Path, cache: Path) -> None:
    path = tmp_path / "lambda.csv"
    path.write_text("not,a,gpuhunt,header\n1,2,3,4\n")
    with pytest.raises(CatalogError, match="not a gpuhunt v2 catalog"):
        catalog._rows("lambda", path)
    assert not cache.exists() or not list(cache.iterdir())


def test_no_entry_with_the_cache_off_or_a_folder_that_cannot_be_written(
        tmp_path: Path, cache: Path) -> None:
    path = _csv(tmp_path)
    os.environ["GPUFLEET_CACHE"] = "off"
    assert catalog._rows("lambda", path) == _parsed(path) and not cache.exists()
    os.environ["GPUFLEET_CACHE"] = "on"
    cache.parent.mkdir()
    cache.write_text("a file where the folder should be")
    assert catalog._rows("lambda", path) == _parsed(path)
    assert list(cache.parent.rglob(".gpufleet-*")) == []
