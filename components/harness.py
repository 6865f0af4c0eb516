"""Run the stack program offline under the Pulumi SDK's mock monitor and record everything.

This is how ``gpufleet plan`` previews without the Pulumi CLI, engine or plugins:
the real program registers its resources against a monitor that records each request
(type, name, parent, provider, inputs, options) and answers with deterministic ids. Mocks
are strict: an invoke without a mocked answer is an error, never a silent ``None``.
URNs are recomputed with the engine's rule (the parent's full qualified type), because the
mock monitor's own URNs differ from the engine's (pulumi-notes.md §3).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime import mocks as pmocks
from pulumi.runtime import rpc
from pulumi.runtime.settings import SETTINGS
from pulumi.runtime.stack import run_pulumi_func

STACK_TYPE = "pulumi:pulumi:Stack"
_SECRET_SIG = "4dabf18193072939515e22adb298388d"


@dataclass
class Registration:
    urn: str
    type: str
    name: str
    parent: str
    custom: bool
    provider: str
    inputs: dict[str, Any]
    id: str = ""
    protect: bool = False
    dependencies: list[str] = field(default_factory=list)
    ignore_changes: list[str] = field(default_factory=list)
    replace_on_changes: list[str] = field(default_factory=list)
    delete_before_replace: bool = False
    retain_on_delete: bool = False
    deleted_with: str = ""
    aliases: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"urn": self.urn, "type": self.type, "name": self.name, "parent": self.parent,
                "custom": self.custom, "provider": self.provider, "inputs": self.inputs,
                "protect": self.protect, "ignore_changes": self.ignore_changes,
                "delete_before_replace": self.delete_before_replace,
                "replace_on_changes": self.replace_on_changes,
                "deleted_with": self.deleted_with, "aliases": self.aliases}


def plain(value: Any) -> Any:
    """Deserialized wire values -> JSON-ready data (secrets marked, unknowns spelled out)."""
    if isinstance(value, dict):
        if value.get(_SECRET_SIG) == "1b47061264138c4ac30d75fd1eb44270":
            return {"secret": plain(value.get("value"))}
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if value is rpc.UNKNOWN or type(value).__name__ == "Unknown":
        return "<computed>"
    return str(value)


class StrictMocks(pulumi.runtime.Mocks):
    """Ids are ``<name>-id``; state echoes inputs plus what ``outputs`` adds per type.

    ``invokes`` maps an invoke token to a function of its arguments; any other invoke
    raises, so a program that needs live data cannot pass silently.
    """

    def __init__(self, invokes: Mapping[str, Callable[[dict[str, Any]], dict[str, Any]]],
                 outputs: Callable[[str, str, dict[str, Any]], dict[str, Any]] | None = None,
                 ids: Callable[[str, str], str | None] | None = None,
                 states: Callable[[str, str], dict[str, Any] | None] | None = None) -> None:
        self.invokes = dict(invokes)
        self.outputs = outputs
        self.ids = ids
        self.states = states
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.local = threading.local()

    def new_resource(self, args: pmocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        urn = getattr(self.local, "urn", "")
        known = self.ids(urn, args.typ) if self.ids else None
        state = dict(args.inputs)
        if self.outputs is not None:
            state.update(self.outputs(args.typ, args.name, args.inputs))
        if self.states is not None:
            seeded = self.states(urn, args.typ)
            if seeded is not None:
                state = {**seeded, **state}
        return known or f"{args.name}-id", state

    def call(self, args: pmocks.MockCallArgs) -> dict[str, Any]:
        fn = self.invokes.get(args.token)
        if fn is None:
            raise KeyError(f"un-mocked invoke {args.token}: gpufleet plan has no offline "
                           "answer for it")
        self.calls.append((args.token, dict(args.args)))
        return fn(dict(args.args))


class RecordingMonitor(pmocks.MockMonitor):
    """A MockMonitor that keeps every registration request with its engine URN."""

    def __init__(self, mocks: StrictMocks, stack: str, project: str) -> None:
        super().__init__(mocks)
        self.stack, self.project = stack, project
        self.regs: list[Registration] = []
        self.mock_to_engine: dict[str, str] = {}
        self.lock = threading.Lock()

    def engine_urn(self, parent_mock_urn: str, typ: str, name: str) -> str:
        parent = self.mock_to_engine.get(parent_mock_urn, "")
        ptype = parent.split("::")[2] if parent else ""
        if ptype == STACK_TYPE:
            ptype = ""
        qualified = f"{ptype}${typ}" if ptype else typ
        return f"urn:pulumi:{self.stack}::{self.project}::{qualified}::{name}"

    def _ref(self, provider_ref: str) -> str:
        if not provider_ref:
            return ""
        urn, _, pid = provider_ref.rpartition("::")
        return f"{self.mock_to_engine.get(urn, urn)}::{pid}"

    def RegisterResource(self, request: Any) -> Any:
        eurn = self.engine_urn(request.parent, request.type, request.name)
        assert isinstance(self.mocks, StrictMocks)
        self.mocks.local.urn = eurn
        resp = super().RegisterResource(request)
        with self.lock:
            self.mock_to_engine[resp.urn] = eurn
        if request.type == STACK_TYPE:
            return resp
        inputs = plain(rpc.deserialize_properties(request.object))
        reg = Registration(
            urn=eurn, type=request.type, name=request.name,
            parent=self.mock_to_engine.get(request.parent, ""), custom=bool(request.custom),
            provider=self._ref(request.provider), inputs=inputs, id=resp.id,
            protect=bool(request.protect),
            dependencies=sorted(self.mock_to_engine.get(d, d) for d in request.dependencies),
            ignore_changes=list(request.ignoreChanges),
            replace_on_changes=list(request.replaceOnChanges),
            delete_before_replace=bool(request.deleteBeforeReplace),
            retain_on_delete=bool(request.retainOnDelete),
            deleted_with=self.mock_to_engine.get(request.deletedWith, request.deletedWith),
            aliases=[_alias(a) for a in request.aliases])
        with self.lock:
            self.regs.append(reg)
        return resp


def _alias(a: Any) -> dict[str, Any]:
    spec = a.spec
    out: dict[str, Any] = {}
    for key in ("name", "type", "stack", "project"):
        v = getattr(spec, key, "")
        if v:
            out[key] = v
    if getattr(spec, "parentUrn", ""):
        out["parent"] = spec.parentUrn
    if getattr(spec, "noParent", False):
        out["no_parent"] = True
    if a.urn:
        out["urn"] = a.urn
    return out


@dataclass
class RunResult:
    registrations: list[Registration]
    exports: dict[str, Any]
    invokes: list[tuple[str, dict[str, Any]]]

    def sorted(self) -> list[Registration]:
        return sorted(self.registrations, key=lambda r: r.urn)


def run_program(program: Callable[[], None], config: Mapping[str, str], mocks: StrictMocks,
                stack: str = "dev", project: str = "gpufleet", preview: bool = False
                ) -> RunResult:
    """Run ``program`` once under mocks. Raises whatever the program raised."""
    pulumi.runtime.settings.ROOT.set(None)
    SETTINGS.rpc_manager.clear()
    SETTINGS.outputs.clear()
    pulumi.runtime.set_all_config(dict(config))
    monitor = RecordingMonitor(mocks, stack, project)
    quiet = logging.getLogger("gpufleet.mock-engine")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    loop = asyncio.new_event_loop()
    # After a failed program the SDK leaves sibling RPC futures whose errors nobody reads;
    # the first error is raised to the caller, the echoes are dropped instead of logged.
    loop.set_exception_handler(lambda _loop, _ctx: None)
    # The SDK runs monitor calls on the loop's default executor, and each worker thread
    # makes itself an event loop it never closes; own those loops so they can be closed.
    worker_loops: list[asyncio.AbstractEventLoop] = []

    def init_worker() -> None:
        wl = asyncio.new_event_loop()
        asyncio.set_event_loop(wl)
        worker_loops.append(wl)
    executor = ThreadPoolExecutor(max_workers=4, initializer=init_worker,
                                  thread_name_prefix="gpufleet-mock")
    loop.set_default_executor(executor)
    try:
        # The root Stack registers inside set_mocks: its futures must live on this loop.
        asyncio.set_event_loop(loop)
        pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=preview,
                                 monitor=monitor, logger=quiet)
        loop.run_until_complete(run_pulumi_func(program))
        exports = loop.run_until_complete(_exports())
    finally:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        asyncio.set_event_loop(None)
        executor.shutdown(wait=True)
        loop.close()
        for wl in worker_loops:
            wl.close()
    return RunResult(list(monitor.regs), exports, list(mocks.calls))


async def _exports() -> dict[str, Any]:
    """The program's ``pulumi.export`` values (the mock root Stack registers none)."""
    root = pulumi.runtime.settings.get_root_resource()
    outputs = getattr(root, "outputs", None) or {}
    resolved = await pulumi.Output.from_input(outputs).future(with_unknowns=True)
    return dict(plain(resolved) or {})
