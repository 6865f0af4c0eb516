"""The entry points of one group, read the way the packaging specification lays them out
(packaging.python.org, "Entry points specification": an `entry_points.txt` INI file in each
installed distribution's `.dist-info` or `.egg-info` folder, `name = module:attr` per line
under `[group]`), without `importlib.metadata`: importing that (it parses e-mail headers for
a distribution's metadata) took 11 ms of `gpufleet validate`'s 200 ms, for a lookup that
needs none of it. As `importlib.metadata` does, the first distribution of a name on
``sys.path`` wins; tests/test_plugins.py checks that both read the same entry points.
``versions`` reads installed distributions' versions the same way (the run cache's key)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass

_SUFFIXES = (".dist-info", ".egg-info")
_LINE = re.compile(r"\s*([^=\s][^=]*?)\s*=\s*(\S.*?)\s*$")


@dataclass(frozen=True)
class EntryPoint:
    name: str
    value: str  # module:attr (attr optional)
    group: str

    def load(self) -> object:
        """The object the value names (pkgutil.resolve_name imports the module)."""
        import pkgutil

        return pkgutil.resolve_name(self.value.split("[")[0].strip())


def entry_points(group: str, paths: Iterable[str] | None = None) -> list[EntryPoint]:
    """Every entry point of ``group`` in the distributions on ``paths`` (``sys.path``)."""
    seen: set[str] = set()
    out: list[EntryPoint] = []
    for folder in paths if paths is not None else sys.path:
        for dist, text in _distributions(folder or "."):
            if dist in seen:
                continue
            seen.add(dist)
            out += _parse(text, group)
    return out


def versions(names: Iterable[str], paths: Iterable[str] | None = None) -> dict[str, str]:
    """Each distribution's version as its metadata says it (`Version:` in `METADATA`, or an
    egg-info's `PKG-INFO`), the first of a name on ``paths`` (``sys.path``); "" where none
    is installed (``importlib.metadata.version`` raises there)."""
    wanted = {_normal(n): n for n in names}
    found = dict.fromkeys(wanted.values(), "")
    for folder in paths if paths is not None else sys.path:
        for dist, path in _folders(folder or "."):
            if dist in wanted:
                found[wanted.pop(dist)] = _version(path)
        if not wanted:
            break
    return found


def _version(path: str) -> str:
    # a folder's METADATA or PKG-INFO; an old egg-info may be the PKG-INFO file itself
    for meta in (os.path.join(path, "METADATA"), os.path.join(path, "PKG-INFO"), path):
        try:
            with open(meta, encoding="utf-8") as f:
                for line in f:
                    if line.startswith("Version:"):
                        return line[len("Version:"):].strip()
                    if not line.strip():
                        break  # the headers end at the first blank line
        except OSError:
            continue
    return ""


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _folders(folder: str) -> Iterable[tuple[str, str]]:
    """(normalised distribution name, metadata folder) of each distribution there."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:  # not a folder (a zip file on sys.path, a missing one)
        return
    for name in names:
        if name.endswith(_SUFFIXES):
            yield _normal(name.rsplit(".", 1)[0].split("-")[0]), os.path.join(folder, name)


def _distributions(folder: str) -> Iterable[tuple[str, str]]:
    """(normalised distribution name, entry_points.txt text) of each distribution there."""
    for dist, path in _folders(folder):
        try:
            with open(os.path.join(path, "entry_points.txt"), encoding="utf-8") as f:
                text = f.read()
        except OSError:
            yield dist, ""  # a distribution without entry points still shadows later ones
            continue
        yield dist, text


def _parse(text: str, group: str) -> list[EntryPoint]:
    out: list[EntryPoint] = []
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        m = _LINE.match(line)
        if section == group and m:
            out.append(EntryPoint(m.group(1), m.group(2), group))
    return out
