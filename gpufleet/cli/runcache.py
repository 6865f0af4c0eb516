"""A cache of what the stack program registered offline, so a `gpufleet plan` of inputs it
has planned before skips the program and the provider SDKs it imports (most of a cold plan's
time: the Pulumi SDK, the provider SDK modules the program loads and the program's run).

The key is everything a run's registrations are made of: the compiled plans, the run's
inputs (files, profile, catalog folder, stack, the stack's SSH key), the versions of
gpufleet, Pulumi and every provider SDK, and a fingerprint of gpufleet's own code (each
source file's path, size and modification time, so an edit without a version bump never
reads an old answer). An entry is the registrations as plain data in ``marshal``'s format
(``gpufleet.cachedir.store_entry``: the records derived nodes share stay shared, so a
1,000-node run's entry is 0.3 MB written in a few ms, where JSON wrote 15 MB in 62) under the
cache folder
(``gpufleet.cachedir``: `$GPUFLEET_CACHE_DIR`, else `~/.cache/gpufleet`), written
whole (a temporary file renamed into place) and readable by its owner only; one that does
not read back as a run of the same key and Python is ignored. Runs of more than MAX_NODES
nodes are not kept.
The policy pack's findings are kept the same way (`policies/` beside `runs/`), keyed by each
subject as the rules see it, the levels, the versions and the code: a plan answered from
the cache then imports neither the provider SDKs nor pulumi-policy (and the Pulumi SDK under
it). `GPUFLEET_CACHE=off` turns both off. Pure but for the cache folder."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpufleet import __version__
from gpufleet.backends.entrypoints import versions
from gpufleet.cachedir import cache_dir, read_entry, store_entry
from gpufleet.compile import Compiled, plan_to_json
from gpufleet.compile.runs import (
    Finding,
    PolicyRun,
    PolicySubject,
    ProgramRun,
    Progress,
    Registered,
    RunInputs,
)

KEEP = 8  # entries kept; the oldest go first
# runs of more nodes are not kept: their records (each node's boot script among them) would
# make an entry of hundreds of MB, and writing it costs what the cache saves
MAX_NODES = 1000
SDKS = ("pulumi", "pulumi-aws", "pulumi-gcp", "pulumi-azure-native", "pulumi-cloudflare",
        "pulumi-policy")
# policy findings of more subjects are not kept: the key alone would be a digest of every
# resource's JSON, which costs about what the rules do
MAX_SUBJECTS = 5000
_ROOT = Path(__file__).resolve().parent.parent  # the gpufleet package
SUFFIX = ".run"  # an entry's file: {key}.run (entries of earlier versions, *.json, are removed)


def _code_fingerprint(roots: Iterable[Path]) -> list[tuple[str, int, int]]:
    out = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            st = path.stat()
            out.append((str(path.relative_to(root.parent)), st.st_size, st.st_mtime_ns))
    return out


def _digest(data: dict[str, Any], code: Iterable[Path]) -> str:
    """The digest of ``data`` with what every answer also depends on: gpufleet's and the
    SDKs' versions and the code's fingerprint."""
    # the SDKs' versions read without importlib.metadata (its import cost a warm plan 23 ms)
    full = {**data, "gpufleet": __version__, "sdks": versions(SDKS),
            "code": _code_fingerprint(code)}
    text = json.dumps(full, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def run_key(run: RunInputs, compiled: Compiled, code: Iterable[Path]) -> str:
    """The digest of everything the run's registrations are made of."""
    return _digest({"compiled": plan_to_json(compiled),
                    "run": {"paths": [os.path.abspath(p) for p in run.paths],
                            "profile": run.profile, "catalog_dir": run.catalog_dir,
                            "stack": run.stack, "ssh_public_key": run.ssh_public_key}}, code)


def _entry(path: Path, key: str) -> dict[str, Any] | None:
    """The object of an entry, only when it reads as one written for ``key`` by this Python."""
    doc = read_entry(path)
    return doc if doc is not None and doc.get("key") == key else None


def _read(path: Path, key: str) -> Registered | None:
    """An entry, only when it reads back whole as a run of ``key``."""
    doc = _entry(path, key)
    if doc is None:
        return None
    resources, invokes, exports = doc.get("resources"), doc.get("invokes"), doc.get("exports")
    if not (isinstance(resources, list) and all(isinstance(r, dict) for r in resources)
            and isinstance(invokes, list) and isinstance(exports, dict)
            and all(isinstance(i, list) and len(i) == 2 and isinstance(i[0], str)
                    and isinstance(i[1], dict) for i in invokes)):
        return None
    return Registered(tuple(resources), tuple((i[0], i[1]) for i in invokes), exports)


def _write(folder: Path, key: str, result: Registered) -> None:
    _store(folder, key, {"resources": list(result.resources),
                         "invokes": [list(i) for i in result.invokes],
                         "exports": dict(result.exports)})


def _store(folder: Path, key: str, entry: dict[str, Any]) -> None:
    """Write an entry whole, or not at all (a result that is not plain data is not kept)."""
    if not store_entry(folder / f"{key}{SUFFIX}", {"key": key, **entry}):
        return
    try:
        for legacy in folder.glob("*.json"):  # entries of earlier versions: never read again
            legacy.unlink(missing_ok=True)
        entries = sorted(folder.glob(f"*{SUFFIX}"), key=lambda p: p.stat().st_mtime_ns)
        for old in entries[:-KEEP]:
            old.unlink(missing_ok=True)
    except OSError:
        return  # a cache that cannot be tidied is no cache, never a failed plan


def cached(load: Callable[[], ProgramRun], code: Iterable[Path] = ()) -> ProgramRun:
    """A ProgramRun that answers from the cache when it can and runs ``load()``'s program
    (imported only then) when it cannot. ``code``: package folders whose sources the key
    covers besides gpufleet's own (the components)."""
    roots = (_ROOT, *code)

    def program_run(run: RunInputs, compiled: Compiled,
                    progress: Progress | None = None) -> Registered:
        folder = cache_dir()
        if folder is None or sum(p.nodes for p in compiled.plans) > MAX_NODES:
            return load()(run, compiled, progress)
        key = run_key(run, compiled, roots)
        hit = _read(folder / f"{key}{SUFFIX}", key)
        if hit is not None:
            if progress is not None:
                progress("the stack program's run: from the cache (same inputs and code)")
            _remember(key, hit)
            return hit
        result = load()(run, compiled, progress)
        _write(folder, key, result)
        _remember(key, result)
        return result
    program: ProgramRun = program_run
    return program


# The last run this process answered through the cache: its key, its records (held, so that
# no other object takes their ids) and each record's position by id.
_LAST_RUN: list[tuple[str, tuple[Mapping[str, Any], ...], dict[int, int]]] = []


def _remember(key: str, result: Registered) -> None:
    _LAST_RUN[:] = [(key, result.resources, {id(r): i for i, r in enumerate(result.resources)})]


def policy_key(subjects: Sequence[PolicySubject], levels: Mapping[str, str],
               code: Iterable[Path]) -> str:
    """The digest of everything the rules' findings are made of: each subject as the rules
    see it (its resource and the pack config), the levels, the versions and the code. When
    every subject's resource is a record of the run the cache last answered (the same
    objects), that run's key stands for the records (its records are what the key's inputs
    and code make) and each subject is its position: a 1,000-node plan's key in a few ms,
    not 0.1 s of its 15 MB of JSON."""
    if _LAST_RUN:
        key, _, position = _LAST_RUN[0]
        if all(id(s.resource) in position for s in subjects):
            return _digest({"run": key, "subjects": [[position[id(s.resource)], s.config]
                                                     for s in subjects],
                            "levels": dict(levels)}, code)
    return _digest({"subjects": [[s.resource, s.config] for s in subjects],
                    "levels": dict(levels)}, code)


def _read_findings(path: Path, key: str, subjects: int) -> list[Finding] | None:
    """An entry of findings, only when it reads back whole as findings of ``key``."""
    doc = _entry(path, key)
    found = doc.get("findings") if doc is not None else None
    if not isinstance(found, list):
        return None
    fields = ("subject", "rule", "level", "message", "remediation")
    out = []
    for f in found:
        if not (isinstance(f, dict) and set(f) == set(fields)
                and type(f["subject"]) is int and 0 <= f["subject"] < subjects
                and all(isinstance(f[k], str) for k in fields[1:])):
            return None
        out.append(Finding(f["subject"], f["rule"], f["level"], f["message"],
                           f["remediation"]))
    return out


def cached_policies(load: Callable[[], PolicyRun], code: Iterable[Path] = ()) -> PolicyRun:
    """A PolicyRun that answers from the cache when the same subjects were checked at the
    same levels by the same code, and imports ``load()``'s pack (pulumi-policy, with the
    Pulumi SDK under it) only when it runs the rules."""
    roots = (_ROOT, *code)

    def policy_run(subjects: Sequence[PolicySubject], levels: Mapping[str, str]
                   ) -> list[Finding]:
        folder = cache_dir("policies")
        if folder is None or len(subjects) > MAX_SUBJECTS:
            return load()(subjects, levels)
        key = policy_key(subjects, levels, roots)
        hit = _read_findings(folder / f"{key}{SUFFIX}", key, len(subjects))
        if hit is not None:
            return hit
        found = load()(subjects, levels)
        _store(folder, key, {"findings": [dataclasses.asdict(f) for f in found]})
        return found
    policies: PolicyRun = policy_run
    return policies
