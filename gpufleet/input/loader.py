"""The only file reader: YAML text -> plain data plus a SourceMap (key path -> line:col).

Builds Python values from PyYAML's composed node graph itself, so that every key keeps its
position, duplicate keys are caught, and alias expansion is bounded (a "billion laughs" file
is refused after a fixed number of nodes instead of exhausting memory).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from gpufleet.diagnostics import Diagnostic, KeyPath, display_path
from gpufleet.input.spec import LOCK_FILE

MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_NODES = 100_000
MAX_DEPTH = 64
YAML_SUFFIXES = (".yml", ".yaml")

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAGS = {"tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:binary"}

Position = tuple[int, int]


@dataclass(slots=True)
class SourceMap:
    """Key path -> 1-based (line, column) of the key and of the value."""

    keys: dict[KeyPath, Position] = field(default_factory=dict)
    values: dict[KeyPath, Position] = field(default_factory=dict)

    def key(self, path: KeyPath) -> Position:
        """Where the entry ``path`` starts: its key, else its value, else the nearest parent."""
        for i in range(len(path), -1, -1):
            p = path[:i]
            if p in self.keys:
                return self.keys[p]
            if p in self.values:
                return self.values[p]
        return (1, 1)

    def value(self, path: KeyPath) -> Position:
        """Where the value at ``path`` starts, else the nearest located parent."""
        for i in range(len(path), -1, -1):
            p = path[:i]
            if p in self.values:
                return self.values[p]
            if p in self.keys:
                return self.keys[p]
        return (1, 1)


@dataclass(frozen=True, slots=True)
class Document:
    """One YAML document of one file."""

    file: str
    index: int
    data: Any
    source: SourceMap

    def at_key(self, path: KeyPath, code: str, message: str, **kw: Any) -> Diagnostic:
        line, col = self.source.key(path)
        return Diagnostic(self.file, line, col, code, message, path=path, **kw)

    def at_value(self, path: KeyPath, code: str, message: str, **kw: Any) -> Diagnostic:
        line, col = self.source.value(path)
        return Diagnostic(self.file, line, col, code, message, path=path, **kw)


@dataclass(slots=True)
class LoadResult:
    documents: list[Document] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    sources: dict[str, list[str]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)


class _Abort(Exception):
    def __init__(self, diag: Diagnostic) -> None:
        super().__init__(diag.message)
        self.diag = diag


def expand_paths(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files as given, directories recursed for ``*.yml``/``*.yaml`` and ``gpufleet.lock``
    (hidden folders skipped)."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                out.extend(Path(root) / f for f in sorted(files)
                           if f.endswith(YAML_SUFFIXES) or f == LOCK_FILE)
        else:
            out.append(p)
    seen: set[Path] = set()
    unique = []
    for p in out:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


def load_paths(paths: Iterable[str | os.PathLike[str]]) -> LoadResult:
    result = LoadResult()
    for p in expand_paths(paths):
        load_file(p, result)
    return result


def read_small_text(path: str, limit: int) -> str:
    """A small text file (a key, a certificate), read at most ``limit`` bytes; OSError on
    anything else (missing, a folder, too large, not UTF-8)."""
    p = Path(path)
    if not p.is_file():
        raise OSError(2, "no such file")
    if p.stat().st_size > limit:
        raise OSError(27, f"larger than {limit} bytes")
    try:
        return p.read_bytes()[:limit].decode("utf-8")
    except UnicodeDecodeError:
        raise OSError(22, "not UTF-8 text") from None


def load_file(path: Path, result: LoadResult) -> None:
    name = display_path(str(path))
    result.files.append(name)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            result.diagnostics.append(
                Diagnostic(name, 1, 1, "L001", f"file is {size:,} bytes; the limit is "
                           f"{MAX_FILE_BYTES:,} (10 MB)",
                           hint="split the file or check that it is a fleet/gateway file")
            )
            return
        raw = path.read_bytes()
    except OSError as e:
        result.diagnostics.append(
            Diagnostic(name, 1, 1, "L000", f"cannot read file: {e.strerror or e}")
        )
        return
    load_bytes(name, raw, result)


def load_bytes(name: str, raw: bytes, result: LoadResult) -> None:
    """Decode and parse one file's bytes into ``result``."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        result.diagnostics.append(
            Diagnostic(name, line, col, "L002",
                       f"file is not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})",
                       hint="save the file as UTF-8")
        )
        return
    result.sources[name] = text.splitlines()
    load_text(name, text, result)


def load_text(name: str, text: str, result: LoadResult) -> None:
    index = 0
    try:
        for node in yaml.compose_all(text, Loader=_Loader):
            if node is None:
                continue
            try:
                result.documents.append(_build_document(name, index, node))
            except _Abort as a:
                result.diagnostics.append(a.diag)
            index += 1
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        msg = e.problem or e.context or "invalid YAML"
        if e.context and e.problem and e.context_mark is not None:
            msg += f" ({e.context} started on line {e.context_mark.line + 1})"
        result.diagnostics.append(Diagnostic(name, line, col, "L003", f"YAML syntax error: {msg}"))
    except yaml.YAMLError as e:
        result.diagnostics.append(Diagnostic(name, 1, 1, "L003", f"YAML error: {e}"))


def _pos(node: Node) -> Position:
    return (node.start_mark.line + 1, node.start_mark.column + 1)


class _Builder:
    """Turns a composed node graph into plain data, recording positions as it goes."""

    _scalars = yaml.constructor.SafeConstructor()

    def __init__(self, name: str) -> None:
        self.name = name
        self.source = SourceMap()
        self.count = 0
        self.active: set[int] = set()

    def fail(self, node: Node, code: str, message: str, hint: str | None = None) -> _Abort:
        line, col = _pos(node)
        return _Abort(Diagnostic(self.name, line, col, code, message, hint=hint))

    def build(self, node: Node, path: KeyPath) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise self.fail(node, "L005", f"document expands to more than {MAX_NODES:,} values "
                            "(anchors and aliases are expanded)",
                            hint="this looks like an alias bomb; remove the nested aliases")
        if len(path) > MAX_DEPTH:
            raise self.fail(node, "L005", f"document is nested deeper than {MAX_DEPTH} levels")
        self.source.values.setdefault(path, _pos(node))
        if isinstance(node, ScalarNode):
            return self.scalar(node)
        if id(node) in self.active:
            raise self.fail(node, "L006", "recursive alias: a node contains itself")
        self.active.add(id(node))
        try:
            if isinstance(node, SequenceNode):
                return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
            assert isinstance(node, MappingNode)
            return self.mapping(node, path)
        finally:
            self.active.discard(id(node))

    def scalar(self, node: ScalarNode) -> Any:
        if node.tag in _STR_TAGS:
            return node.value
        ctor = self._scalars.yaml_constructors.get(node.tag)
        if ctor is None:
            return node.value
        return ctor(self._scalars, node)

    def key_of(self, node: Node) -> str:
        if not isinstance(node, ScalarNode):
            raise self.fail(node, "L004", "mapping keys must be plain scalars")
        return str(node.value)

    def mapping(self, node: MappingNode, path: KeyPath) -> dict[str, Any]:
        out: dict[str, Any] = {}
        first: dict[str, Node] = {}
        merged: list[Node] = []
        for knode, vnode in node.value:
            if knode.tag == _MERGE_TAG:
                merged.extend(vnode.value if isinstance(vnode, SequenceNode) else [vnode])
                continue
            key = self.key_of(knode)
            if key in first:
                line = first[key].start_mark.line + 1
                raise self.fail(knode, "L004", f"duplicate key '{key}' (first defined on line "
                                f"{line})", hint="remove one of the two entries")
            first[key] = knode
            self.source.keys[(*path, key)] = _pos(knode)
            out[key] = self.build(vnode, (*path, key))
        for src in merged:
            self.merge_into(out, src, path)
        return out

    def merge_into(self, out: dict[str, Any], src: Node, path: KeyPath) -> None:
        if not isinstance(src, MappingNode):
            raise self.fail(src, "L004", "a merge key (<<) needs a mapping or a list of mappings")
        value = self.build(src, (*path, "<<"))
        for key, item in value.items():
            if key not in out:
                out[key] = item
                for knode, _ in src.value:
                    if isinstance(knode, ScalarNode) and knode.value == key:
                        self.source.keys[(*path, key)] = _pos(knode)


def _build_document(name: str, index: int, node: Node) -> Document:
    builder = _Builder(name)
    data = builder.build(node, ())
    return Document(name, index, data, builder.source)

