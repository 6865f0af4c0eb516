"""A catalog file's parsed rows, kept between runs.

Reading the bundled catalog (12,000 rows of CSV, each checked and converted) took 50 ms of
every command that resolves offers; the values it parsed, kept in ``marshal``'s format,
read back in a few. An entry stands for one file as it is (its resolved path, size and
modification time) parsed by this code (the parser's own source file, size and modification
time, and gpufleet's version): a changed catalog or parser is another entry. It lives in the
cache folder's `catalog/` (``gpufleet.cachedir``) as `<backend>.<key>.bin`, one per backend
(writing one removes that backend's others), written whole and readable by its owner only;
one that does not read back as the rows of its key is ignored and written again (the folder
is trusted as Python's .pyc files are). `GPUFLEET_CACHE=off`: no entry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gpufleet import __version__
from gpufleet.cachedir import PYTHON, cache_dir, read_entry, store_entry

Values = tuple[Any, ...]  # a row's field values, in its class's field order
R = TypeVar("R")


def _key(backend: str, path: Path, parser: Path, fields: tuple[str, ...]) -> str:
    st, code = path.stat(), parser.stat()
    return hashlib.sha256(repr((backend, str(path.resolve()), st.st_size, st.st_mtime_ns,
                                str(parser), code.st_size, code.st_mtime_ns, fields,
                                __version__, PYTHON)).encode()).hexdigest()[:40]


def cached_rows(backend: str, path: Path, parser: Path, fields: tuple[str, ...],
                parse: Callable[[], tuple[list[R], int]], values: Callable[[R], Values],
                make: Callable[..., R]) -> tuple[list[R], int]:
    """``parse()``'s rows and count of skipped rows for ``path``: made (``make(*values)``)
    from the cache when an entry for the file as it is and this parser reads back whole,
    else parsed and their ``values`` kept."""
    folder = cache_dir("catalog")
    try:
        key = _key(backend, path, parser, fields) if folder is not None else ""
    except OSError:
        folder = None
    if folder is None:
        return parse()
    entry = folder / f"{backend}.{key}.bin"
    hit = _read(entry, key, len(fields))
    if hit is not None:
        return [make(*v) for v in hit[0]], hit[1]
    rows, bad = parse()
    _write(folder, backend, entry, {"key": key, "rows": [values(r) for r in rows], "bad": bad})
    return rows, bad


def _read(entry: Path, key: str, width: int) -> tuple[list[Values], int] | None:
    doc = read_entry(entry)
    if not (doc is not None and doc.get("key") == key
            and type(doc.get("bad")) is int and isinstance(doc.get("rows"), list)):
        return None
    rows = doc["rows"]
    if not all(type(r) is tuple and len(r) == width for r in rows):
        return None
    return rows, doc["bad"]


def _write(folder: Path, backend: str, entry: Path, doc: dict[str, Any]) -> None:
    """Write an entry whole, or not at all; the backend's other entries go."""
    if store_entry(entry, doc):
        for old in folder.glob(f"{backend}.*.bin"):
            if old != entry:
                old.unlink(missing_ok=True)
