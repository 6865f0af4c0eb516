"""`gpufleet drift`: live drift through the Pulumi Automation API (needs the Pulumi CLI).

Two passes, as pulumi-notes.md §4 recommends: `pulumi refresh --preview-only` finds what
changed in the cloud behind the stack's back (no state is written), then
`pulumi preview --refresh` shows what `pulumi up` would change now. Engine events from both
become the same change report `gpufleet diff` prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpufleet.live.runner import PreviewRunner
from gpufleet.review import Change, PropertyChange, Report, guard, owner_of
from gpufleet.review.changes import advise, yaml_key

DRIFT_NOTE = ("live drift - `pulumi refresh --preview-only` (cloud vs state) and "
        "`pulumi preview --refresh` (program vs refreshed cloud) through the Automation API")
QUIET_OPS = {"same", "read", "read-discard", "read-replacement", "discard", "discard-replaced",
             "remove-pending-replace"}
REPLACE_OPS = {"replace", "create-replacement", "delete-replaced"}


def _op(raw: Any) -> str:
    return str(getattr(raw, "value", raw))


def _lookup(values: Mapping[str, Any] | None, path: str) -> Any:
    cur: Any = values or {}
    for part in path.replace("]", "").replace("[", ".").split("."):
        if isinstance(cur, Mapping):
            cur = cur.get(part)
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return None
    return cur


def _kind(raw: Any) -> str:
    return _op(raw).replace("_", "-")


def changes_from_events(events: Iterable[Any], phase: str) -> list[Change]:
    """Automation API engine events -> changes. ``phase`` is "refresh" or "preview"."""
    parents: dict[str, str] = {}
    types: dict[str, str] = {}
    steps: dict[str, Any] = {}
    for ev in events:
        pre = getattr(ev, "resource_pre_event", None)
        if pre is None or pre.metadata is None:
            continue
        md = pre.metadata
        types[md.urn] = md.type
        for side in (md.old, md.new):
            if side is not None and side.parent:
                parents[md.urn] = side.parent
        op = _op(md.op)
        if op in QUIET_OPS:
            continue
        if op == "refresh" and not (md.detailed_diff or md.diffs):
            continue
        # A replacement shows up as several steps; keep the most telling one per URN.
        if md.urn not in steps or op in REPLACE_OPS:
            steps[md.urn] = md
    out = []
    for urn, md in sorted(steps.items()):
        op = _op(md.op)
        op = "replace" if op in REPLACE_OPS else ("update" if op == "refresh" else op)
        props = []
        for path, pd in sorted((md.detailed_diff or {}).items()):
            old_vals = (md.old.outputs if phase == "refresh" else md.old.inputs) \
                if md.old is not None else None
            new_vals = (md.new.outputs if phase == "refresh" else md.new.inputs) \
                if md.new is not None else None
            props.append(PropertyChange(path, _lookup(old_vals, path), _lookup(new_vals, path),
                                        _kind(pd.diff_kind)))
        if not props and md.diffs:
            props = [PropertyChange(d, None, None, "update") for d in md.diffs]
        if phase == "refresh":
            klass = "deleted out of band" if op == "delete" else "out-of-band edit"
        else:
            klass = "pending program change"
        owner = owner_of(urn, parents, types)
        protect = bool((md.old and md.old.protect) or (md.new and md.new.protect))
        name = urn.rsplit("::", 1)[1]
        out.append(Change(urn, md.type, op, klass, owner, None,
                          yaml_key(md.type, name, op, props, owner), tuple(props),
                          advise(op, klass, protect), protect, tuple(md.keys or ())))
    return out


def merge(refresh: Sequence[Change], preview: Sequence[Change]) -> list[Change]:
    """Out-of-band edits first; a pending change on the same resource is kept as well only
    when it is a different operation."""
    seen = {(c.urn, c.op) for c in refresh}
    return [*refresh, *(c for c in preview if (c.urn, c.op) not in seen)]


def live_drift(runner: PreviewRunner, stack: str, forbid: Sequence[str],
               allow: Sequence[str], max_instances: int | None) -> Report:
    """Both previews through ``runner``, merged into one change report with the guards."""
    refresh_events: list[Any] = []
    runner.preview_refresh(refresh_events.append)
    preview_events: list[Any] = []
    runner.preview_refreshed(preview_events.append)
    changes = merge(changes_from_events(refresh_events, "refresh"),
                    changes_from_events(preview_events, "preview"))
    return Report("live-drift", stack, tuple(changes),
                  violations=tuple(guard(changes, forbid, allow, max_instances)))
