"""What every semantic check shares: the per-document context that collects located
diagnostics, and small readers (zones, tags, regions). Pure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpufleet.backends import all_backends, find
from gpufleet.codes import F004
from gpufleet.diagnostics import Diagnostic, KeyPath, Severity
from gpufleet.input.normalize import SpecError, check_tags
from gpufleet.input.schema import Checked
from gpufleet.input.spec import Origin, frozen_map


class Ctx:
    """Collects diagnostics for one document; ``parse`` turns SpecErrors into located ones."""

    def __init__(self, c: Checked) -> None:
        self.c = c
        self.diags: list[Diagnostic] = []

    def data(self) -> dict[str, Any]:
        d: dict[str, Any] = self.c.doc.data
        return d

    def entries(self, key: str) -> list[Any]:
        """The document's list under ``key``; [] when it is absent or not a list (the
        schema pass reported that: no entry can be read)."""
        value = self.data().get(key)
        return value if isinstance(value, list) else []

    def has(self, key: str) -> bool:
        return key in self.data() and self.c.ok((key,))

    def error(self, path: KeyPath, message: str, code: str, *, key: bool = False,
              hint: str | None = None, severity: Severity = Severity.ERROR) -> None:
        at = self.c.doc.at_key if key else self.c.doc.at_value
        self.diags.append(at(path, code, message, hint=hint, severity=severity))

    def parse(self, key: str, fn: Callable[[Any], Any], code: str, default: Any = None) -> Any:
        if not self.has(key):
            return default
        try:
            return fn(self.data()[key])
        except SpecError as e:
            self.error((key, *e.subpath), e.message, e.code or code)
            return default

    def origin(self) -> Origin:
        src = self.c.doc.source
        line, col = src.key(("name",) if "name" in self.data() else ())
        positions = {str(k[0]): pos for k, pos in src.keys.items() if len(k) == 1}
        return Origin(self.c.doc.file, line, col, self.c.doc.index, frozen_map(positions))


def region_of_zone(zone: str) -> str | None:
    """Region of a zone by its backend's zone pattern (GCP ``us-west2-c``, AWS ``us-east-1a``);
    None if no backend names zones like it."""
    for t in all_backends():
        m = t.zone_pattern.match(zone) if t.zone_pattern is not None else None
        if m:
            return m.group(1)
    return None


def strs(v: Any) -> tuple[str, ...] | None:
    return None if v is None else tuple(str(x) for x in v)


def tags_of(ctx: Ctx, base: KeyPath, raw: dict[str, Any]) -> dict[str, str]:
    """The `tags` of the mapping ``raw`` at ``base``, checked against dstack's regexes."""
    if "tags" not in raw or not ctx.c.ok((*base, "tags")):
        return {}
    tags = {str(k): str(v) for k, v in (raw["tags"] or {}).items()}
    for e in check_tags(tags):
        ctx.error((*base, "tags", *e.subpath), e.message, F004, key=True)
    return tags


def check_region(ctx: Ctx, path: KeyPath, backend: str, region: str, code: str) -> None:
    """A region of the wrong shape for its backend is a typo or another cloud's region."""
    traits = find(backend)
    if traits is None or traits.region_pattern.fullmatch(region.lower()):
        return
    others = [t.name for t in all_backends()
              if t.name != backend and t.region_pattern.fullmatch(region.lower())]
    hint = f"{backend} regions look like {traits.region_example}"
    if others:
        hint += f"; '{region}' looks like a {' or '.join(others)} region"
    ctx.error(path, f"'{region}' is not a region of {backend}", code, hint=hint)
