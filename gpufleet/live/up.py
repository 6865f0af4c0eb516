"""`gpufleet up`: `pulumi up` through the Automation API, with capacity fallback.

When a fleet fails for lack of capacity, its lock entry moves to the next offer that still
satisfies the YAML (skipping every backend/location/type that failed), the lock is written
and `pulumi up` runs again - at most ``fallback`` times. Only the failed fleet moves; any
other error stops at once. A deploy is reported only when the engine says it succeeded.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpufleet.compile import compile_files
from gpufleet.diagnostics import render_text
from gpufleet.input import Lock, LockEntry, load_lock, stackconfig, validate_paths
from gpufleet.live.runner import DeployRunner, LiveError, UpOutcome
from gpufleet.offers import (
    Offer,
    entry_from_offer,
    load_catalog,
    pick_profile,
    select_locked,
    write_lock,
)
from gpufleet.review import owner_of


@dataclass(frozen=True, slots=True)
class CapacityCode:
    backend: str
    code: str  # the cloud's error code, or the stable phrase of its message
    source: str


# The clouds' documented out-of-capacity errors, the only ones that trigger a fallback.
# Quota errors are not here: another offer on the same account would hit the same quota.
CAPACITY_ERRORS: tuple[CapacityCode, ...] = (
    CapacityCode("gcp", "ZONE_RESOURCE_POOL_EXHAUSTED",
                 "cloud.google.com/compute/docs/troubleshooting/"
                 "troubleshooting-resource-availability"),
    CapacityCode("gcp", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
                 "cloud.google.com/compute/docs/troubleshooting/"
                 "troubleshooting-resource-availability"),
    CapacityCode("gcp", "does not have enough resources available to fulfill the request",
                 "cloud.google.com/compute/docs/troubleshooting/"
                 "troubleshooting-resource-availability (the message the Terraform-bridged "
                 "provider prints for ZONE_RESOURCE_POOL_EXHAUSTED)"),
    CapacityCode("gcp", "insufficientCapacity",
                 "cloud.google.com/compute/docs/troubleshooting/troubleshooting-bulk-vm-creation"),
    CapacityCode("aws", "InsufficientInstanceCapacity",
                 "docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html"),
    CapacityCode("aws", "InsufficientCapacityOnHost",
                 "docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html"),
    CapacityCode("aws", "InsufficientReservedInstanceCapacity",
                 "docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html"),
    CapacityCode("aws", "Unsupported",
                 "docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html "
                 "(the instance type is not offered in the requested Availability Zone)"),
    CapacityCode("azure", "SkuNotAvailable",
                 "learn.microsoft.com/azure/azure-resource-manager/troubleshooting/"
                 "error-sku-not-available"),
    CapacityCode("azure", "AllocationFailed",
                 "learn.microsoft.com/troubleshoot/azure/virtual-machines/windows/"
                 "allocation-failure"),
    CapacityCode("azure", "ZonalAllocationFailed",
                 "learn.microsoft.com/troubleshoot/azure/virtual-machines/windows/"
                 "allocation-failure"),
    CapacityCode("azure", "OverconstrainedAllocationRequest",
                 "learn.microsoft.com/troubleshoot/azure/virtual-machines/windows/"
                 "allocation-failure"),
    CapacityCode("azure", "OverconstrainedZonalAllocationRequest",
                 "learn.microsoft.com/troubleshoot/azure/virtual-machines/windows/"
                 "allocation-failure"),
)


def capacity_code(backend: str, message: str) -> str | None:
    """The capacity error a provider message reports, or None. Codes match as whole words,
    so `Unsupported` does not match `UnsupportedOperation`."""
    for c in CAPACITY_ERRORS:
        if c.backend != backend:
            continue
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


def deploy(runner: DeployRunner, cwd: str, fallback: int,
           echo: Callable[[str], None]) -> UpResult:
    """Run `pulumi up`; on capacity errors move the failed fleets' lock entries to their
    next offer and try again, at most ``fallback`` times."""
    files, lock_path, profile, catalog_dir = stack_files(runner.config(), cwd)
    validated, compiled = compile_files(files, profile, catalog_dir, lock_path)
    if compiled is None or not compiled.ok:
        diags = compiled.diagnostics if compiled is not None else validated.diagnostics
        raise UpError("the stack's files cannot be deployed as they are:\n" + render_text(
            [d for d in diags if d.is_error], validated.sources))
    tried: dict[str, set[tuple[str, str, str]]] = {}
    attempts: list[Attempt] = []
    for number in range(1, fallback + 2):
        outcome = runner.up()
        if outcome.succeeded:
            attempts.append(Attempt(number, "succeeded"))
            return UpResult(attempts, lock_path)
        lock, _ = load_lock(lock_path)
        if lock is None:
            raise UpError(f"{lock_path} became unreadable during `gpufleet up`")
        backends = {n: e.backend for n, e in lock.fleets.items()}
        failures = capacity_failures(outcome, backends)
        if not failures:
            attempts.append(Attempt(number, "failed", [outcome.error.strip()[-2000:]]))
            raise UpError(_history(attempts, "`pulumi up` failed with an error that is not "
                                             "a lack of capacity; nothing was moved"))
        attempt = Attempt(number, "capacity")
        attempts.append(attempt)
        if number > fallback:
            attempt.moves = [f"{f.fleet}: {f.code} on {lock.fleets[f.fleet].short()}"
                             for f in failures]
            raise UpError(_history(attempts, f"no capacity after {number} attempt(s) "
                                             f"(--fallback {fallback})"))
        lock = _move(failures, lock, tried, files, profile, catalog_dir, attempt)
        write_lock(lock_path, lock.fleets, lock.gateways)
        for line in attempt.moves:
            echo(f"gpufleet up: {line}")
    raise UpError(_history(attempts, "no attempts left"))  # pragma: no cover - loop returns


def _move(failures: Sequence[Failure], lock: Lock, tried: dict[str, set[tuple[str, str, str]]],
          files: Sequence[str], profile: str | None, catalog_dir: str | None,
          attempt: Attempt) -> Lock:
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
        nxt = next((o for o in sel.offers if _place(o) not in tried[fail.fleet]), None)
        if nxt is None:
            attempt.moves.append(f"{fail.fleet}: {fail.code} on {old.short()}; no other offer "
                                 "satisfies the YAML")
            raise UpError(_history([attempt], f"fleet '{fail.fleet}' has no offer left"))
        fleets[fail.fleet] = entry_from_offer(fail.fleet, st.digest, nxt, catalog)
        attempt.moves.append(f"{fail.fleet}: {fail.code} on {old.short()} -> moving to "
                             f"{fleets[fail.fleet].short()}")
    return dataclasses.replace(lock, fleets=fleets)


def _history(attempts: Sequence[Attempt], reason: str) -> str:
    lines = [f"gpufleet up: {reason}"]
    for a in attempts:
        lines.append(f"  attempt {a.number}: {a.outcome}")
        lines += [f"    {m}" for m in a.moves]
    return "\n".join(lines)
