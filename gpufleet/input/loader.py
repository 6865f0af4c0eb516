"""The only file reader: YAML text -> plain data plus a SourceMap (key path -> line:col).

Builds Python values from PyYAML's composed node graph itself, so that every key keeps its
position, duplicate keys are caught, and alias expansion is bounded (a "billion laughs" file
is refused, measured over the node graph before anything is built, instead of exhausting
memory).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from gpufleet.codes import L003, L004, L005, L006, L009, L010, L011, L012, L015
from gpufleet.diagnostics import Diagnostic, KeyPath, Severity

from .expansion import MAX_VALUES, expansion_past_bound, split_merges

MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_DEPTH = 64
MAX_TEXT_DEPTH = 200  # refused before parsing: deeper nesting crashes PyYAML's C composer
# Scalars one file may hold, aliases not expanded (the parse budget): composing costs about
# 1.7 s and 200 MB per MB of plain YAML, and the largest file gpufleet reads (a lock of a
# thousand fleets) holds some 30,000. A file past it is refused before it is composed, at
# about 0.1 s per 100,000 values scanned.
MAX_FILE_VALUES = 100_000
MAX_INT_DIGITS = 30
YAML_SUFFIXES = (".yml", ".yaml")

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_YAML = "tag:yaml.org,2002:"
_STR_TAGS = {_YAML + "timestamp"}  # dates stay strings
_SCALAR_TAGS = {_YAML + t for t in ("str", "int", "float", "bool", "null", "timestamp")}
_MAP_TAG, _SEQ_TAG = _YAML + "map", _YAML + "seq"

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
    skipped: list[str] = field(default_factory=list)  # YAML files that are not ours


class _Abort(Exception):
    def __init__(self, diag: Diagnostic) -> None:
        super().__init__(diag.message)
        self.diag = diag


_OPEN_TOKENS = (yaml.FlowSequenceStartToken, yaml.FlowMappingStartToken,
                yaml.BlockMappingStartToken, yaml.BlockSequenceStartToken)
_CLOSE_TOKENS = (yaml.FlowSequenceEndToken, yaml.FlowMappingEndToken, yaml.BlockEndToken)


def nesting_depth(text: str, limit: int, values: int = MAX_FILE_VALUES) -> tuple[int, int]:
    """How deep the YAML nests, read from the scanner's tokens (libyaml's scanner is an
    iterative state machine, so any nesting is safe to scan; its composer recurses and
    crashes the process on deep input): the depth and the line where it passes ``limit``,
    else (0, 0); (-N, line) where the file holds more than ``values`` scalars (N of them
    counted by then). A syntax error ends the scan; the parser reports it."""
    depth = 0
    scalars = 0
    try:
        for token in yaml.scan(text, Loader=_Loader):
            if isinstance(token, yaml.ScalarToken):
                scalars += 1
                if scalars > values:
                    return -scalars, token.start_mark.line + 1
            elif isinstance(token, _OPEN_TOKENS):
                depth += 1
                if depth > limit:
                    return depth, token.start_mark.line + 1
            elif isinstance(token, _CLOSE_TOKENS):
                depth -= 1
    except yaml.MarkedYAMLError as e:
        # libyaml 0.2.6 (PyYAML 6.0.4's wheels) stops its scanner itself past 1,000 levels,
        # reading ahead of the tokens it has handed out: that is nesting too, not syntax.
        if "nesting depth" in str(e.problem or "") and e.problem_mark is not None:
            return max(depth, limit + 1), e.problem_mark.line + 1
    except yaml.YAMLError:
        pass
    return 0, 0


def depth_bound(text: str) -> int:
    """A bound, at C speed, on the depth ``nesting_depth`` counts: a flow collection opens on
    a `[` or `{`, and a block collection it counts starts right of the one it sits in (a
    sequence flush with its key, `key:\n- a`, has no start token), so within the longest
    line."""
    longest = max(map(len, text.splitlines()), default=0)
    return longest + 1 + text.count("[") + text.count("{")


def load_text(name: str, text: str, result: LoadResult) -> None:
    # the token scan (a Python loop over every token) only where its limits could be passed:
    # a scalar takes at least one character, a level of nesting is within depth_bound
    small = len(text) <= MAX_FILE_VALUES and depth_bound(text) <= MAX_TEXT_DEPTH
    depth, line = (0, 0) if small else nesting_depth(text, MAX_TEXT_DEPTH)
    if depth < 0:
        result.diagnostics.append(Diagnostic(
            name, line, 1, L015, f"the file holds more than {MAX_FILE_VALUES:,} values (here, "
            f"at line {line}); gpufleet reads no more in one file",
            hint="fleet, gateway and backends files hold a few hundred; is this the right "
                 "file? Split a generated one"))
        return
    if depth:
        result.diagnostics.append(Diagnostic(
            name, line, 1, L005, f"the YAML nests deeper than {MAX_TEXT_DEPTH} levels",
            hint="fleet and gateway files need a handful of levels; check for a runaway "
                 "`[` or `{`"))
        return
    index = 0
    documents = 0
    aliased = "*" in text  # without an alias no node is reached twice: nothing to measure
    try:
        for node in yaml.compose_all(text, Loader=_Loader):
            if node is None or (isinstance(node, ScalarNode) and node.tag == _YAML + "null"
                                and node.value in ("", "~", "null")):
                continue
            documents += 1
            try:
                doc, warnings = _build_document(name, index, node, aliased)
                result.documents.append(doc)
                result.diagnostics.extend(warnings)
            except _Abort as a:
                result.diagnostics.append(a.diag)
            index += 1
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        lines = text.splitlines() or [""]
        if line > len(lines):  # the parser's end mark sits past the last line
            line, col = len(lines), len(lines[-1]) + 1
        msg = e.problem or e.context or "invalid YAML"
        if e.context and e.problem and e.context_mark is not None:
            msg += f" ({e.context} started on line {e.context_mark.line + 1})"
        result.diagnostics.append(Diagnostic(name, line, col, L003, f"YAML syntax error: {msg}"))
        return
    except yaml.YAMLError as e:
        result.diagnostics.append(Diagnostic(name, 1, 1, L003, f"YAML error: {e}"))
        return
    except RecursionError:
        result.diagnostics.append(Diagnostic(name, 1, 1, L005, "the YAML nests too deeply"))
        return
    if documents == 0:
        result.diagnostics.append(Diagnostic(
            name, 1, 1, L011, "the file holds no YAML document (it is empty or only `---`)",
            severity=Severity.WARNING, hint="remove the file, or add a fleet or gateway"))


def _pos(node: Node) -> Position:
    return (node.start_mark.line + 1, node.start_mark.column + 1)


class _Builder:
    """Turns a composed node graph into plain data, recording positions as it goes."""

    _scalars = yaml.constructor.SafeConstructor()

    def __init__(self, name: str) -> None:
        self.name = name
        self.source = SourceMap()
        self.count = 0
        self.seen: set[int] = set()
        self.expanding = 0  # > 0 while building what an alias repeats
        self.active: set[int] = set()
        self.warnings: list[Diagnostic] = []

    def fail(self, node: Node, code: str, message: str, hint: str | None = None) -> _Abort:
        line, col = _pos(node)
        return _Abort(Diagnostic(self.name, line, col, code, message, hint=hint))

    def expanded_past(self, node: Node) -> _Abort:
        return self.fail(node, L005, f"document expands to more than {MAX_VALUES:,} values "
                         "(anchors and aliases are expanded)",
                         hint="this looks like an alias bomb; remove the nested aliases")

    def build(self, node: Node, path: KeyPath) -> Any:
        again = id(node) in self.seen  # reached again through an alias
        self.seen.add(id(node))
        if again or self.expanding:
            self.count += 1  # every value an alias expands to, scalars included
        if self.count > MAX_VALUES:
            raise self.expanded_past(node)
        if len(path) > MAX_DEPTH:
            raise self.fail(node, L005, f"document is nested deeper than {MAX_DEPTH} levels")
        self.source.values.setdefault(path, _pos(node))
        if isinstance(node, ScalarNode):
            return self.scalar(node, path)
        if node.tag not in (_MAP_TAG, _SEQ_TAG):
            raise self.fail(node, L010, f"unsupported YAML tag {_tag(node.tag)}",
                            hint="gpufleet reads plain mappings, lists, strings, numbers and "
                                 "booleans; remove the tag")
        if id(node) in self.active:
            raise self.fail(node, L006, "recursive alias: a node contains itself")
        self.active.add(id(node))
        self.expanding += again
        try:
            if isinstance(node, SequenceNode):
                return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
            assert isinstance(node, MappingNode)
            return self.mapping(node, path)
        finally:
            self.active.discard(id(node))
            self.expanding -= again

    def scalar(self, node: ScalarNode, path: KeyPath) -> Any:
        if node.tag not in _SCALAR_TAGS:
            raise self.fail(node, L010, f"unsupported YAML tag {_tag(node.tag)}",
                            hint="gpufleet reads plain mappings, lists, strings, numbers and "
                                 "booleans; remove the tag")
        if node.tag in _STR_TAGS:
            return node.value
        if node.tag == _YAML + "int":
            digits = sum(c.isdigit() for c in node.value)
            if digits > MAX_INT_DIGITS:
                raise self.fail(node, L009, f"{_where(path)}: a {digits}-digit integer; "
                                f"gpufleet reads at most {MAX_INT_DIGITS} digits")
        ctor = self._scalars.yaml_constructors[node.tag]
        try:
            value = ctor(self._scalars, node)
        except (ValueError, TypeError, KeyError, IndexError, OverflowError,
                yaml.YAMLError) as e:  # IndexError: an empty `!!int`
            kind = node.tag.rsplit(":", 1)[-1]
            shown = node.value if len(node.value) <= 40 else node.value[:40] + "..."
            raise self.fail(node, L009, f"{_where(path)}: cannot read {shown!r} as {kind}",
                            hint=f"remove the `!!{kind}` tag or write a valid {kind}") from e
        self.check_number(node, path, value)
        return value

    def check_number(self, node: ScalarNode, path: KeyPath, value: Any) -> None:
        """YAML 1.1 reads `017` as 15, `0x10` as 16, `1:30` as 90 and `1_000` as 1000 (so
        does dstack's loader): the value is kept, with a warning saying so."""
        if node.tag not in (_YAML + "int", _YAML + "float") or node.style:
            return
        raw = node.value
        digits = raw.lstrip("+-")
        if ":" in raw:
            why = "base 60"
        elif "_" in raw:
            why = "digit separators"
        elif node.tag == _YAML + "float":
            return
        elif digits[:2].lower() == "0x":
            why = "hexadecimal"
        elif digits[:2].lower() == "0b":
            why = "binary"
        elif len(digits) > 1 and digits.startswith("0"):
            why = "octal"
        else:
            return
        line, col = _pos(node)
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        self.warnings.append(Diagnostic(
            self.name, line, col, L012, f"{_where(path)}: `{raw}` is read as {shown} "
            f"(YAML 1.1 {why}, as dstack's loader reads it)", severity=Severity.WARNING,
            hint=f"write {shown}, or quote `{raw}` if it is text"))

    def key_of(self, node: Node) -> str:
        if not isinstance(node, ScalarNode):
            raise self.fail(node, L004, "mapping keys must be plain scalars")
        return str(node.value)

    def mapping(self, node: MappingNode, path: KeyPath) -> dict[str, Any]:
        out: dict[str, Any] = {}
        first: dict[str, Node] = {}
        pairs, merged = split_merges(node)
        for knode, vnode in pairs:
            key = self.key_of(knode)
            if key in first:
                line = first[key].start_mark.line + 1
                raise self.fail(knode, L004, f"duplicate key '{key}' (first defined on line "
                                f"{line})", hint="remove one of the two entries")
            first[key] = knode
            self.source.keys[(*path, key)] = _pos(knode)
            out[key] = self.build(vnode, (*path, key))
        for src in merged:
            self.merge_into(out, src, path)
        return out

    def merge_into(self, out: dict[str, Any], src: Node, path: KeyPath) -> None:
        if not isinstance(src, MappingNode):
            raise self.fail(src, L004, "a merge key (<<) needs a mapping or a list of mappings")
        value = self.build(src, (*path, "<<"))
        where = {knode.value: knode for knode, _ in src.value if isinstance(knode, ScalarNode)}
        for key, item in value.items():
            if key not in out:
                out[key] = item
                if key in where:
                    self.source.keys[(*path, key)] = _pos(where[key])


def _tag(tag: str) -> str:
    return "!!" + tag[len(_YAML):] if tag.startswith(_YAML) else tag


def _where(path: KeyPath) -> str:
    return ".".join(str(p) for p in path) or "the document"


def _build_document(name: str, index: int, node: Node, aliased: bool
                    ) -> tuple[Document, list[Diagnostic]]:
    builder = _Builder(name)
    past = expansion_past_bound(node) if aliased else None
    if past is not None:
        raise builder.expanded_past(past)
    data = builder.build(node, ())
    return Document(name, index, data, builder.source), builder.warnings

