"""`gpufleet catalog update` end to end against a real HTTP server on 127.0.0.1 that serves
catalogs in gpuhunt's published layout (<base>/<backend>/version and
<base>/<backend>/<version>/catalog.zip). No HTTP mocking: the code under test opens sockets."""

from __future__ import annotations

import functools
import http.server
import io
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hostile_http import served
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.backends import SUPPORTED_BACKENDS, traits_of
from gpufleet.cli import cli
from gpufleet.offers.catalog import bundled_dir, load_catalog
from gpufleet.offers.update import UpdateError, update_catalog

BACKENDS = SUPPORTED_BACKENDS


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "www"
    root.mkdir()
    with served(functools.partial(_Quiet, directory=str(root))) as url:
        yield url + "/v3", root / "v3"


def publish(root: Path, version: str, price_factor: float = 1.0,
            csv_text: dict[str, str] | None = None, raw_zip: dict[str, bytes] | None = None
            ) -> None:
    """Write a catalog the way gpuhunt's collectors publish it: under gpuhunt's name for each
    provider (`lambdalabs` for gpufleet's `lambda`)."""
    for b in BACKENDS:
        provider = traits_of(b).catalog_provider
        folder = root / provider / version
        folder.mkdir(parents=True, exist_ok=True)
        (root / provider / "version").write_text(version + "\n")
        if raw_zip and b in raw_zip:
            (folder / "catalog.zip").write_bytes(raw_zip[b])
            continue
        text = (csv_text or {}).get(b)
        if text is None:
            lines = (bundled_dir() / f"{b}.csv").read_text().splitlines()
            out = [lines[0]]
            for line in lines[1:]:
                cells = line.split(",")
                cells[2] = str(round(float(cells[2]) * price_factor, 5))
                out.append(",".join(cells))
            text = "\n".join(out) + "\n"
        with zipfile.ZipFile(folder / "catalog.zip", "w") as zf:
            zf.writestr(f"{provider}.csv", text)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.resolve().iterdir())}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("GPUFLEET_CATALOG_DIR", raising=False)
    return tmp_path / "cache" / "gpufleet" / "catalog"


def test_update_downloads_and_later_runs_prefer_the_cache(server: tuple[str, Path],
                                                          cache: Path) -> None:
    url, root = server
    publish(root, "20261120", price_factor=2.0)
    assert load_catalog().chosen_by == "bundled"
    res = update_catalog(url)
    assert res.versions == dict.fromkeys(BACKENDS, "20261120")
    assert res.path == cache and cache.is_symlink()
    cat = load_catalog()
    assert cat.chosen_by == "cache" and cat.source == url
    assert cat.version == " ".join(f"{b}=20261120" for b in BACKENDS)
    assert (root / "lambdalabs" / "20261120" / "catalog.zip").is_file()  # gpuhunt's name
    assert {r.backend for r in cat.rows} == set(BACKENDS)
    bundled = load_catalog(str(bundled_dir()))
    assert len(cat.rows) == len(bundled.rows)
    assert cat.rows[0].price == pytest.approx(2 * bundled.rows[0].price, rel=1e-4)
    # network facts are kept from the bundled table
    assert cat.facts("gcp", "a4-highgpu-8g").nics == 10


def test_second_update_replaces_atomically_and_cleans_up(server: tuple[str, Path],
                                                         cache: Path) -> None:
    url, root = server
    publish(root, "v1")
    update_catalog(url)
    first_target = cache.resolve()
    publish(root, "v2", price_factor=3.0)
    update_catalog(url)
    assert cache.resolve() != first_target and not first_target.exists()
    assert load_catalog().version.startswith("aws=v2")
    leftovers = [p.name for p in cache.parent.iterdir() if p.name.startswith(".")]
    assert leftovers == [cache.resolve().name]


@pytest.mark.parametrize("breakage", ["corrupt-zip", "truncated-zip", "missing-backend",
                                      "no-csv-in-zip", "garbage-rows", "bad-version"])
def test_failed_update_keeps_previous_catalog(server: tuple[str, Path], cache: Path,
                                             breakage: str) -> None:
    url, root = server
    publish(root, "good")
    update_catalog(url)
    before = snapshot(cache)
    good_zip = (root / "gcp" / "good" / "catalog.zip").read_bytes()
    if breakage == "corrupt-zip":
        publish(root, "next", raw_zip={"gcp": b"PK\x03\x04 this is not a zip"})
    elif breakage == "truncated-zip":
        publish(root, "next", raw_zip={"gcp": good_zip[: len(good_zip) // 2]})
    elif breakage == "missing-backend":
        publish(root, "next")
        (root / "azure" / "next" / "catalog.zip").unlink()
    elif breakage == "no-csv-in-zip":
        import io
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr("other.csv", "x")
        publish(root, "next", raw_zip={"aws": buf.getvalue()})
    elif breakage == "garbage-rows":
        publish(root, "next", csv_text={"aws": "instance_name,location,price,spot\n"
                                               "a,b,notanumber,maybe\n"})
    elif breakage == "bad-version":
        publish(root, "next")
        (root / "gcp" / "version").write_text("../../etc/passwd\n")
    with pytest.raises(UpdateError):
        update_catalog(url)
    assert snapshot(cache) == before
    assert load_catalog().version.startswith("aws=good")
    assert not [p for p in cache.parent.iterdir() if p.name.startswith(".catalog-")
                and p.resolve() != cache.resolve()]


def test_cli_update_reports_and_failure_exits_1(server: tuple[str, Path], cache: Path) -> None:
    url, root = server
    publish(root, "c1")
    r = CliRunner().invoke(cli, ["catalog", "update", "--url", url])
    assert r.exit_code == 0, r.output
    assert "gcp: version c1" in r.output and f"catalog updated: {cache}" in r.output
    r = CliRunner().invoke(cli, ["catalog", "update", "--url", url + "/nothing-here"])
    assert r.exit_code == 1
    assert "catalog update failed, previous catalog kept" in r.output and "HTTP 404" in r.output
    r = CliRunner().invoke(cli, ["catalog", "--gpu", "B200"])
    assert r.exit_code == 0 and f"{url} catalog aws=c1" in r.output


def test_unreachable_server_is_a_clear_error(cache: Path) -> None:
    with pytest.raises(UpdateError, match=r"GET http://127\.0\.0\.1:9/v3/aws/version"):
        update_catalog("http://127.0.0.1:9/v3", timeout=5)
    assert not cache.exists()


def test_explicit_dir_and_env_override_the_cache(cache: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "mine"
    d.mkdir()
    (d / "gcp.csv").write_text((bundled_dir() / "gcp.csv").read_text())
    assert load_catalog(str(d)).chosen_by == "--catalog"
    assert {r.backend for r in load_catalog(str(d)).rows} == {"gcp"}
    monkeypatch.setenv("GPUFLEET_CATALOG_DIR", str(d))
    assert load_catalog().chosen_by == "GPUFLEET_CATALOG_DIR"


def test_a_zip_that_inflates_past_the_bound_is_refused(server: tuple[str, Path], cache: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A few KB that inflate to more than a catalog ever is (the bound made small here)."""
    import io

    import gpufleet.offers.update as update

    monkeypatch.setattr(update, "MAX_CSV_BYTES", 64 * 1024)
    url, root = server
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("gcp.csv", "instance_name,location,price,spot\n" + "a" * (1 << 20))
    assert len(buf.getvalue()) < 16 * 1024
    publish(root, "bomb", raw_zip={"gcp": buf.getvalue()})
    with pytest.raises(UpdateError, match="inflates past"):
        update_catalog(url)


def test_rows_with_a_huge_field_or_a_negative_price_are_skipped() -> None:
    import io

    from gpufleet.offers.catalog import CatalogError, parse_rows

    header = "instance_name,location,price,cpu,memory,gpu_count,gpu_name,gpu_memory,spot\n"
    good = "g6.xlarge,us-east-1,0.80,4,16,1,L4,24,false\n"
    rows, skipped = parse_rows("aws", io.StringIO(
        header + good + "x" * 1000 + ",us-east-1,0.8,4,16,1,L4,24,false\n"
        "g6.xlarge,us-east-1,-3.5,4,16,1,L4,24,false\n"
        "g6.xlarge,us-east-1,nan,4,16,1,L4,24,false\n"))
    assert [r.price for r in rows] == [0.8] and skipped == 3
    # a field past the csv module's own bound: the file is not a catalog (no crash)
    with pytest.raises(CatalogError, match="cannot be read as CSV"):
        parse_rows("aws", io.StringIO(header + "x" * 200_000 + ",a,1,1,1,0,,,false\n"))


def _reference_rows(backend: str, text: str) -> tuple[list[object], int]:
    """The reader as it was (csv.DictReader, a dict per row), with a short row's missing
    values read as empty (it crashed on them): what parse_rows must still give."""
    import csv
    import io
    import math

    from gpufleet.offers.catalog import MAX_FIELD, Row

    reader = csv.DictReader(io.StringIO(text), restval="")
    rows, bad = [], 0
    for r in reader:
        try:
            if None in r or any(isinstance(v, str) and len(v) > MAX_FIELD
                                for v in r.values()):
                raise ValueError("long or extra")
            spot = r["spot"].lower()
            if spot not in ("true", "false"):
                raise ValueError(spot)
            count = int(r.get("gpu_count") or 0)
            name, vendor = r.get("gpu_name") or None, r.get("gpu_vendor") or None
            if name and name.startswith("tpu-"):
                name, vendor = name[4:], vendor or "google"
            elif vendor is None and count:
                vendor = "nvidia"
            if not r["instance_name"] or not r["location"]:
                raise ValueError("empty")
            price = float(r["price"])
            if not math.isfinite(price) or price < 0:
                raise ValueError(price)
            rows.append(Row(backend, r["instance_name"], r["location"], price,
                            int(r.get("cpu") or ""), float(r.get("memory") or ""), count,
                            name, float(r["gpu_memory"]) if r.get("gpu_memory") else None,
                            spot == "true",
                            float(r["disk_size"]) if r.get("disk_size") else None, vendor,
                            tuple((r.get("flags") or "").split()), r.get("cpu_arch") or "x86"))
        except (ValueError, TypeError, KeyError):
            bad += 1
    return rows, bad


_CELLS = st.sampled_from(["g6.xlarge", "us-east-1", "", "0.8", "-1", "nan", "4", "16", "1",
                          "L4", "tpu-v5p", "24", "false", "True", "maybe", "efa gpudirect",
                          "arm64", '"a,b"', "1e3"])


@settings(deadline=None, max_examples=300)
@given(st.lists(st.lists(_CELLS, max_size=16), max_size=8),
       st.sampled_from([
           "instance_name,location,price,cpu,memory,gpu_count,gpu_name,gpu_memory,spot,"
           "disk_size,gpu_vendor,flags,cpu_arch,provider_data",
           "instance_name,location,price,cpu,memory,gpu_count,gpu_name,gpu_memory,spot",
           "spot,price,location,instance_name,memory,cpu"]))
def test_rows_read_by_index_are_the_rows_a_dict_reader_gives(
        rows: list[list[str]], header: str) -> None:
    """Rows of any width (short ones too: they crashed the reader), any order of columns
    and any values read as the dict reader read them, row for row and skipped count."""
    from gpufleet.offers.catalog import parse_rows

    text = header + "\n" + "".join(",".join(r) + "\n" for r in rows)
    assert parse_rows("aws", io.StringIO(text)) == _reference_rows("aws", text)


def test_a_truncated_download_is_skipped_row_by_row_not_a_crash() -> None:
    from gpufleet.offers.catalog import parse_rows

    header = ("instance_name,location,price,cpu,memory,gpu_count,gpu_name,gpu_memory,spot,"
              "disk_size,gpu_vendor,flags,cpu_arch\n")
    rows, skipped = parse_rows("aws", io.StringIO(
        header + "p5.48xlarge,us-east-1,98.3\n" + "g6.xlarge,us-east-1,0.80,4,16,1,L4,24,false\n"))
    assert [r.instance_type for r in rows] == ["g6.xlarge"] and skipped == 1
    assert rows[0].cpu_arch == "x86"  # the absent trailing columns read as empty
