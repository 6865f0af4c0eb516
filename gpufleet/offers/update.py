"""`gpufleet catalog update`: download gpuhunt's published catalogs into the user cache.

Layout read (gpuhunt's offline providers): ``<base>/<backend>/version`` holds the latest
version; ``<base>/<backend>/<version>/catalog.zip`` holds ``<backend>.csv`` (CSV v2).
Every file is downloaded and checked before anything is written where readers look; the
new catalog then replaces the old one with one atomic ``os.replace`` of a symlink, so a
failed, partial or corrupt download leaves the previous catalog untouched.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from gpufleet.backends import SUPPORTED_BACKENDS, traits_of
from gpufleet.offers.catalog import CatalogError, bundled_dir, parse_rows, user_cache_dir
from gpufleet.outbound import HttpError, request

# gpuhunt's published location (dstackai/gpuhunt: src/gpuhunt/_internal/catalog.py); the
# same environment variable gpuhunt reads points both tools at a mirror.
DEFAULT_URL = "https://dstack-gpu-pricing.s3.eu-west-1.amazonaws.com/v3"
URL_ENV = "GPUHUNT_CATALOG_URL"
MAX_ZIP_BYTES = 200 * 1024 * 1024
MAX_CSV_BYTES = 256 * 1024 * 1024  # what one backend's CSV may inflate to
_VERSION = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class UpdateError(Exception):
    """Why an update failed; the previous catalog is untouched when this is raised."""


@dataclass(frozen=True, slots=True)
class UpdateResult:
    path: Path
    versions: dict[str, str]
    rows: dict[str, int]
    skipped: dict[str, int]


def default_url() -> str:
    return os.environ.get(URL_ENV, DEFAULT_URL).rstrip("/")


def _get(url: str, timeout: float, limit: int) -> bytes:
    """GET through gpufleet's HTTP client: ``timeout`` for the whole download, at most
    ``limit`` bytes, redirects followed only within https (no credential is sent)."""
    try:
        resp = request("GET", url, timeout=timeout, max_bytes=limit)
    except HttpError as e:
        raise UpdateError(f"GET {url}: {e}") from None
    if resp.status != 200:
        raise UpdateError(f"GET {url}: HTTP {resp.status}")
    return resp.body


def fetch_backend(base: str, backend: str, timeout: float) -> tuple[str, bytes, int, int]:
    """Download and check one backend's catalog: (version, csv bytes, rows, skipped rows).
    gpuhunt publishes it under its own name for the provider (`lambdalabs`)."""
    provider = traits_of(backend).catalog_provider
    version = _get(f"{base}/{provider}/version", timeout, 1024).decode("utf-8", "replace").strip()
    if not _VERSION.match(version):
        raise UpdateError(f"{base}/{provider}/version: not a version string: {version[:40]!r}")
    url = f"{base}/{provider}/{version}/catalog.zip"
    blob = _get(url, timeout, MAX_ZIP_BYTES)
    member = f"{provider}.csv"
    try:
        with zipfile.ZipFile(io.BytesIO(blob)) as zf:
            # bounded inflation: the size the archive declares, then at most that many bytes
            if zf.getinfo(member).file_size > MAX_CSV_BYTES:
                raise UpdateError(f"{url}: {member} inflates past {MAX_CSV_BYTES:,} bytes; "
                                  "this is not a catalog")
            with zf.open(member) as opened:
                raw = opened.read(MAX_CSV_BYTES + 1)
            if len(raw) > MAX_CSV_BYTES:
                raise UpdateError(f"{url}: {member} inflates past {MAX_CSV_BYTES:,} bytes")
    except KeyError:
        raise UpdateError(f"{url}: the archive has no {member}") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError) as e:
        raise UpdateError(f"{url}: not a valid zip archive ({e})") from None
    try:
        rows, skipped = parse_rows(backend, io.StringIO(raw.decode("utf-8")))
    except (UnicodeDecodeError, CatalogError) as e:
        raise UpdateError(f"{url}: {e}") from None
    if not rows:
        raise UpdateError(f"{url}: {member} has no usable rows ({skipped} malformed)")
    if skipped > len(rows):
        raise UpdateError(f"{url}: {member} is mostly malformed ({skipped} of "
                          f"{skipped + len(rows)} rows)")
    return version, raw, len(rows), skipped


def update_catalog(base: str | None = None, dest: Path | None = None,
                   backends: tuple[str, ...] = SUPPORTED_BACKENDS, timeout: float = 300.0,
                   now: dt.datetime | None = None) -> UpdateResult:
    """Download every backend, then swap the new catalog in atomically."""
    base = (base or default_url()).rstrip("/")
    link = dest or user_cache_dir()
    fetched = {b: fetch_backend(base, b, timeout) for b in backends}  # raises before writing
    link.parent.mkdir(parents=True, exist_ok=True)
    stamp = (now or dt.datetime.now(dt.UTC))
    staging = Path(tempfile.mkdtemp(prefix=".catalog-", dir=link.parent))
    try:
        for b, (_, raw, _, _) in fetched.items():
            (staging / f"{b}.csv").write_bytes(raw)
        shutil.copyfile(bundled_dir() / "network.csv", staging / "network.csv")
        meta = {"source": base, "version": " ".join(f"{b}={v[0]}" for b, v in fetched.items()),
                "date": stamp.strftime("%Y-%m-%d"), "downloaded_at": stamp.isoformat(),
                "rows": {b: v[2] for b, v in fetched.items()}}
        (staging / "catalog.json").write_text(json.dumps(meta, indent=2) + "\n")
        _swap(link, staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return UpdateResult(link, {b: v[0] for b, v in fetched.items()},
                        {b: v[2] for b, v in fetched.items()},
                        {b: v[3] for b, v in fetched.items()})


def _swap(link: Path, target: Path) -> None:
    """Point ``link`` at ``target`` atomically and remove the catalog it pointed at before."""
    old = link.resolve() if link.is_symlink() else None
    if link.exists() and not link.is_symlink():
        raise UpdateError(f"{link} exists and is not a catalog link; move it away first")
    tmp_link = link.with_name(f".{link.name}.{os.getpid()}.tmp")
    if tmp_link.is_symlink() or tmp_link.exists():
        tmp_link.unlink()
    os.symlink(target.name, tmp_link)
    os.replace(tmp_link, link)
    if old is not None and old != target.resolve() and old.parent == link.parent.resolve():
        shutil.rmtree(old, ignore_errors=True)
