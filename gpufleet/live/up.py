"""`gpufleet up`: `pulumi up` through the Automation API, with capacity fallback.

When a fleet fails for lack of capacity, its lock entry moves to the next offer that still
satisfies the YAML (skipping every backend/location/type that failed), the lock is written
and `pulumi up` runs again - at most ``fallback`` times. Only the failed fleet moves; any
other error stops at once. A deploy is reported only when the engine says it succeeded.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufleet.backends import BACKENDS, is_backend, traits_of
from gpufleet.compile import Compiled
from gpufleet.fileio import folder_lock
from gpufleet.input import Lock, LockEntry, load_lock, stackconfig, validate_paths
from gpufleet.live.drift import changes_from_events
from gpufleet.live.preflight import ProbeFactory, check_stack, stack_needs
from gpufleet.live.preview import UpPreview
from gpufleet.live.runner import DeployRunner, LiveError, UpOutcome
from gpufleet.live.stack import StackFilesError, compile_stack
from gpufleet.offers import (
    Offer,
    entry_from_offer,
    load_catalog,
    pick_profile,
    select_locked,
    write_lock,
)
from gpufleet.review import (
    Report,
    State,
    StateError,
    fleet_costs,
    owner_of,
    parse_export,
    running_nodes,
)
from gpufleet.traits import CapacityCode

# The clouds' documented out-of-capacity errors (each backend's table), the only ones that
# trigger a fallback. Quota errors are not there: another offer on the same account would hit
# the same quota.
CAPACITY_ERRORS: tuple[CapacityCode, ...] = tuple(c for t in BACKENDS for c in t.capacity_errors)


def capacity_code(backend: str, message: str) -> str | None:
    """The capacity error a provider message reports, or None. Codes match as whole words,
    so `Unsupported` does not match `UnsupportedOperation`."""
    for c in traits_of(backend).capacity_errors if is_backend(backend) else ():
        if " " in c.code:
            if c.code in message:
                return c.code
        elif re.search(rf"(?<![A-Za-z_]){re.escape(c.code)}(?![A-Za-z_])", message):
            return c.code
    return None


class UpError(LiveError):
    """`gpufleet up` stopped: the message says why, and every attempt made."""


@dataclass(frozen=True, slots=True)
class Failure:
    fleet: str
    backend: str
    code: str
    urn: str
    message: str


def capacity_failures(outcome: UpOutcome, backends: Mapping[str, str]) -> list[Failure]:
    """Capacity failures per fleet from the engine's diagnostic events (``backends``: fleet
    name -> the backend it is deployed on); falls back to the error text for URNs."""
    out: dict[str, Failure] = {}
    messages: list[tuple[str, str]] = []
    for ev in outcome.events:
        diag = getattr(ev, "diagnostic_event", None)
        if diag is not None and diag.severity == "error":
            messages.append((diag.urn or "", diag.message))
    if not messages and outcome.error:
        messages = [(m.group(0), outcome.error)
                    for m in re.finditer(r"urn:pulumi:[^\s'\"]+", outcome.error)]
    for urn, message in messages:
        fleet = owner_of(urn, {}, {}, backends) if urn else None
        if fleet is None or fleet in out:
            continue
        code = capacity_code(backends[fleet], message)
        if code is not None:
            out[fleet] = Failure(fleet, backends[fleet], code, urn, message.strip())
    return list(out.values())


def _place(e: LockEntry | Offer) -> tuple[str, str, str]:
    return (e.backend, (e.zone or e.region).lower(), e.instance_type)


@dataclass
class Attempt:
    number: int
    outcome: str  # "succeeded", "capacity", "failed"
    moves: list[str] = field(default_factory=list)


@dataclass
class UpResult:
    attempts: list[Attempt]
    lock_file: str

    @property
    def succeeded(self) -> bool:
        return bool(self.attempts) and self.attempts[-1].outcome == "succeeded"

    @property
    def unchanged(self) -> bool:
        """The preview showed nothing to change, so `pulumi up` did not run."""
        return self.succeeded and self.attempts[-1].moves == [NO_CHANGES]


def stack_files(config: Mapping[str, str], cwd: str) -> tuple[list[str], str, str | None,
                                                                str | None]:
    """(files, lock path, profile, catalog) from the stack's `gpufleet:*` config, resolved
    as the stack program resolves them."""
    try:
        settings = stackconfig.settings_from_config(config)
    except stackconfig.StackConfigError as e:
        raise UpError(str(e)) from None
    base = Path(cwd)
    files = stackconfig.resolve_files(settings.files, base)
    return files, stackconfig.lock_path(settings, base, files), settings.profile, \
        settings.catalog


# (stack, files, profile, catalog, lock, state) -> the network quota needs
NetworkCounter = Callable[[str, Sequence[str], str | None, str | None, str, Any],
                          Sequence[Any]]


@dataclass(frozen=True, slots=True)
class UpOptions:
    """What `gpufleet up` may do on its own: fallback attempts, fleets it may move although
    they run nodes, and the guards of `plan`/`diff`."""

    fallback: int = 0
    allow_move: frozenset[str] = frozenset()
    max_instances: int | None = None
    max_cost_per_hour: float | None = None
    # the clouds' probes for the preflight that runs first (None: no preflight)
    preflight: ProbeFactory | None = None
    # the preflight's network quota needs of the stack's files against its state (the
    # offline run of its program, which the CLI makes); None: not checked
    network: NetworkCounter | None = None
    # launch nodes whose quota the plan finds short (it files the increase requests anyway)
    allow_pending_quota: bool = False


Confirm = Callable[[UpPreview], bool]
NO_CHANGES = "the preview shows no changes"


def deploy(runner: DeployRunner, cwd: str, options: UpOptions, echo: Callable[[str], None],
           confirm: Confirm) -> UpResult:
    """Preview, show the changes, check the guards, ask, then `pulumi up`; on a capacity
    error move a fleet with no nodes yet to its next offer and start over (fallback times)."""
    files, lock_path, profile, catalog_dir = stack_files(runner.config(), cwd)
    if options.preflight is not None:
        state = _state(runner)
        needs = stack_needs(files, profile, catalog_dir, lock_path, running_nodes(state))
        network = options.network(runner.name, files, profile, catalog_dir, lock_path,
                                  state) if options.network is not None else ()
        checked = check_stack(runner.name, needs, options.preflight, network=network)
        for line in checked.lines():
            echo(line)
        if not checked.ok:
            raise UpError("gpufleet up: the preflight failed; nothing was changed (fix what "
                          "it names, or pass --skip-preflight to deploy anyway)")
    tried: dict[str, set[tuple[str, str, str]]] = {}
    attempts: list[Attempt] = []
    for number in range(1, options.fallback + 2):
        compiled, lock = _compile(files, profile, catalog_dir, lock_path,
                                  options.allow_pending_quota)
        shown = preview_update(runner, compiled, lock)
        for line in shown.lines():
            echo(line)
        blocked = shown.violations(options.max_instances, options.max_cost_per_hour)
        if blocked:
            raise UpError(_history(attempts, "the preview breaks a guard; nothing was "
                                             "changed:\n  " + "\n  ".join(blocked)))
        if not shown.report.changes:
            attempts.append(Attempt(number, "succeeded", [NO_CHANGES]))
            return UpResult(attempts, lock_path)
        if not confirm(shown):
            raise UpError(_history(attempts, "not confirmed; nothing was changed"))
        outcome = runner.up()
        if outcome.succeeded:
            attempts.append(Attempt(number, "succeeded"))
            return UpResult(attempts, lock_path)
        failures = capacity_failures(outcome, {n: e.backend for n, e in lock.fleets.items()})
        if not failures:
            attempts.append(Attempt(number, "failed", [outcome.error.strip()[-2000:]]))
            raise UpError(_history(attempts, "`pulumi up` failed with an error that is not "
                                             "a lack of capacity; nothing was moved"))
        attempt = Attempt(number, "capacity")
        attempts.append(attempt)
        if number > options.fallback:
            attempt.moves = [f"{f.fleet}: {f.code} on {lock.fleets[f.fleet].short()}"
                             for f in failures]
            raise UpError(_history(attempts, f"no capacity after {number} attempt(s) "
                                             f"(--fallback {options.fallback})"))
        running = running_nodes(_state(runner))
        with folder_lock(lock_path):  # read-modify-write, as `gpufleet lock` does
            current, _ = load_lock(lock_path)
            if current is None:
                raise UpError(f"{lock_path} became unreadable during `gpufleet up`")
            moved = _move(failures, current, tried, files, profile, catalog_dir, attempt,
                          running, options.allow_move)
            write_lock(lock_path, moved.fleets, moved.gateways)
        for line in attempt.moves:
            echo(f"gpufleet up: {line}")
    raise UpError(_history(attempts, "no attempts left"))  # pragma: no cover - loop returns


def _compile(files: Sequence[str], profile: str | None, catalog_dir: str | None,
             lock_path: str, allow_pending_quota: bool = False) -> tuple[Compiled, Lock]:
    """The stack's files compiled as the stack program compiles them (from the lock); no
    node launches short of quota unless allowed."""
    try:
        _, compiled, lock = compile_stack(files, profile, catalog_dir, lock_path)
    except StackFilesError as e:
        raise UpError(str(e)) from None
    if not allow_pending_quota:
        _no_nodes_short_of_quota(compiled)
    return compiled, lock


def _state(runner: DeployRunner) -> State:
    """The stack's state now (what runs), from `pulumi stack export`."""
    try:
        return parse_export(json.dumps(runner.export()), "the stack's state")
    except StateError as e:
        raise UpError(f"cannot read the stack's state: {e}") from None


def preview_update(runner: DeployRunner, compiled: Compiled, lock: Lock) -> UpPreview:
    """`pulumi preview` (what `pulumi up` would do now) with the cost before and after."""
    events: list[Any] = []
    runner.preview(events.append)
    changes = changes_from_events(events, "preview")
    costs = fleet_costs(compiled.plans, lock, running_nodes(_state(runner)),
                        gateways=compiled.gateways, volumes=compiled.volumes)
    return UpPreview(Report("up-preview", "", tuple(changes)), costs)


def _move(failures: Sequence[Failure], lock: Lock, tried: dict[str, set[tuple[str, str, str]]],
          files: Sequence[str], profile: str | None, catalog_dir: str | None,
          attempt: Attempt, running: Mapping[str, int], allow_move: frozenset[str]) -> Lock:
    """Each failed fleet's entry moved to its next untried offer; a fleet with running nodes
    stops the deploy instead (unless allowed), naming the offers that would work."""
    validated = validate_paths(files)
    catalog = load_catalog(catalog_dir)
    prof = pick_profile(validated.inputs.profiles, profile)
    fleets = dict(lock.fleets)
    specs = {f.name: f for f in validated.inputs.fleets}
    for fail in failures:
        old = fleets[fail.fleet]
        tried.setdefault(fail.fleet, set()).add(_place(old))
        sel, st, _ = select_locked(specs[fail.fleet], catalog, validated.inputs, prof, lock,
                                   upgrade=True)
        left = [o for o in sel.offers if _place(o) not in tried[fail.fleet]]
        nodes = running.get(fail.fleet, 0)
        if not left:
            attempt.moves.append(f"{fail.fleet}: {fail.code} on {old.short()}; no other offer "
                                 "satisfies the YAML")
            raise UpError(_history([attempt], f"fleet '{fail.fleet}' has no offer left"))
        if nodes and fail.fleet not in allow_move:
            attempt.moves.append(f"{fail.fleet}: {fail.code} on {old.short()}")
            attempt.moves += [f"  would work: {o.short()}: replaces its {nodes} running "
                              "node(s)" for o in left[:3]]
            raise UpError(_history([attempt], f"fleet '{fail.fleet}' runs {nodes} node(s), and "
                                              "moving it would replace them all; nothing was "
                                              f"moved (--allow-move {fail.fleet} accepts the "
                                              "move)"))
        nxt = left[0]
        keep = old.cidr if nxt.backend == old.backend else None
        fleets[fail.fleet] = entry_from_offer(fail.fleet, st.digest, nxt, catalog, keep)
        attempt.moves.append(f"{fail.fleet}: {fail.code} on {old.short()} -> moving to "
                             f"{fleets[fail.fleet].short()}"
                             + (f" (replaces its {nodes} running node(s))" if nodes else ""))
    return dataclasses.replace(lock, fleets=fleets)


def _history(attempts: Sequence[Attempt], reason: str) -> str:
    lines = [f"gpufleet up: {reason}"]
    for a in attempts:
        lines.append(f"  attempt {a.number}: {a.outcome}")
        lines += [f"    {m}" for m in a.moves]
    return "\n".join(lines)


def _no_nodes_short_of_quota(compiled: Compiled) -> None:
    """`quotas: {request: true}` found a quota short: the stack files its increase, but no
    node of a fleet counting against it launches until it is granted (`pulumi up` would fail
    half-way); `nodes: 0..N` builds the rest and files the request."""
    short = sorted({f.split(" (", 1)[0] for q in compiled.quota_requests for f in q.fleets})
    launching = [p.name for p in compiled.plans if p.name in short and p.nodes > 0]
    if launching:
        asks = "; ".join(f"{q.backend} {q.region} {q.ident}: limit {q.limit:,.0f}, needs "
                         f"{q.need:,} {q.unit}" for q in compiled.quota_requests)
        raise UpError(f"gpufleet up: quota short for fleets {', '.join(launching)} ({asks}); "
                      "nothing was changed. Set `nodes: 0..N` on them while the increase is "
                      "pending (the stack then files the request and builds their networks), "
                      "run `gpufleet quota --live --save` once it is granted, or pass "
                      "--allow-pending-quota to launch anyway")
