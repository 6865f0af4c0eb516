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
import copy
import gc
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, cast

import pulumi
from pulumi.runtime import mocks as pmocks
from pulumi.runtime import resource as sdk_resource
from pulumi.runtime import rpc
from pulumi.runtime.proto import source_pb2
from pulumi.runtime.settings import SETTINGS
from pulumi.runtime.stack import run_pulumi_func

from .exports import resolved as resolved_exports
from .gettertypes import quick_hints
from .plainvalues import plain
from .runloop import run_loop

STACK_TYPE = "pulumi:pulumi:Stack"


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
    # input property -> the URNs its value comes from (what a replacement cascades along)
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)
    ignore_changes: list[str] = field(default_factory=list)
    replace_on_changes: list[str] = field(default_factory=list)
    delete_before_replace: bool = False
    retain_on_delete: bool = False
    deleted_with: str = ""
    aliases: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    state_urn: str = ""  # the URN this resource has in a seeding state (differs after a rename)

    def to_json(self) -> dict[str, Any]:
        return {"urn": self.urn, "type": self.type, "name": self.name, "parent": self.parent,
                "custom": self.custom, "provider": self.provider, "inputs": self.inputs,
                "id": self.id, "outputs": self.outputs, "dependencies": self.dependencies,
                "property_dependencies": self.property_dependencies,
                "retain_on_delete": self.retain_on_delete,
                "protect": self.protect, "ignore_changes": self.ignore_changes,
                "delete_before_replace": self.delete_before_replace,
                "replace_on_changes": self.replace_on_changes,
                "deleted_with": self.deleted_with, "aliases": self.aliases,
                "state_urn": self.state_urn}


class StrictMocks(pulumi.runtime.Mocks):
    """Ids are ``<name>-id``; state echoes inputs plus what ``outputs`` adds per type.

    ``invokes`` maps an invoke token to a function of its arguments; any other invoke
    raises, so a program that needs live data cannot pass silently.
    """

    def __init__(self, invokes: Mapping[str, Callable[[dict[str, Any]], dict[str, Any]]],
                 outputs: Callable[[str, str, dict[str, Any]], dict[str, Any]] | None = None,
                 seed: Mapping[str, tuple[str, dict[str, Any]]] | None = None) -> None:
        """``seed`` maps engine URNs of existing resources to (id, outputs) from a state
        export; with it, resources not in the seed behave as creates do in a preview (empty
        id, computed outputs unknown)."""
        self.invokes = invokes  # looked up one token at a time (it may load lazily)
        self.outputs = outputs
        self.seed = seed
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.local = threading.local()
        self.progress: Callable[[str], None] | None = None  # told of each resource
        self.registered = 0

    def new_resource(self, args: pmocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        self.registered += 1
        if self.progress is not None:
            self.progress(f"running the stack program: {self.registered} resources")
        return self.outcome(getattr(self.local, "urn", ""), args.typ, args.name,
                            dict(args.inputs))

    def outcome(self, urn: str, typ: str, name: str, inputs: dict[str, Any]
                ) -> tuple[str, dict[str, Any]]:
        """A resource's id and state: the seed's for one the state holds, unknown for a new
        one in a seeded preview, else ``<name>-id`` and the inputs plus the type's outputs."""
        state = dict(inputs)
        if self.seed is not None:
            if urn not in self.seed:
                return "", state  # a create in a preview: computed outputs stay unknown
            known_id, outputs = self.seed[urn]
            return known_id, {**outputs, **state}
        if self.outputs is not None:
            state.update(self.outputs(typ, name, inputs))
        return f"{name}-id", state

    def call(self, args: pmocks.MockCallArgs
             ) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        fn = self.invokes.get(args.token)
        if fn is None:
            raise KeyError(f"un-mocked invoke {args.token}: gpufleet plan has no offline "
                           "answer for it")
        self.calls.append((args.token, dict(args.args)))
        return fn(dict(args.args)), []  # no check failures


Untyped = Callable[..., Any]  # the SDK's MockMonitor methods carry no annotations


class RecordingMonitor(pmocks.MockMonitor):
    """A MockMonitor that keeps every registration request with its engine URN."""

    def __init__(self, mocks: StrictMocks, stack: str, project: str,
                 record_outputs: bool = False) -> None:
        super().__init__(mocks)
        self.stack, self.project = stack, project
        self.record_outputs = record_outputs
        self.regs: list[Registration] = []
        self.by_urn: dict[str, Registration] = {}
        self.mock_to_engine: dict[str, str] = {}
        self.renamed: dict[str, str] = {}  # engine URN -> URN in the seed state (aliases)
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

    def alias_urns(self, eurn: str, request: Any) -> list[str]:
        """Old URNs this registration may have: its own alias specs, and the alias its parent
        passes down when the child's name starts with the parent's (the engine's rule)."""
        prefix, name = eurn.rsplit("::", 1)
        out = [f"{prefix}::{a.spec.name}" for a in request.aliases
               if a.spec is not None and a.spec.name]
        parent = self.mock_to_engine.get(request.parent, "")
        if parent in self.renamed:
            new_parent = parent.rsplit("::", 1)[1]
            old_parent = self.renamed[parent].rsplit("::", 1)[1]
            if name.startswith(new_parent):
                out.append(f"{prefix}::{old_parent}{name[len(new_parent):]}")
        return out

    def RegisterResource(self, request: Any) -> Any:
        eurn = self.engine_urn(request.parent, request.type, request.name)
        assert isinstance(self.mocks, StrictMocks)
        seed = self.mocks.seed
        state_urn = eurn
        if seed is not None and eurn not in seed:
            state_urn = next((u for u in self.alias_urns(eurn, request) if u in seed), eurn)
            if state_urn != eurn:
                with self.lock:
                    self.renamed[eurn] = state_urn
        self.mocks.local.urn = state_urn
        resp = cast(Untyped, super().RegisterResource)(request)
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
            property_dependencies={
                prop: sorted(self.mock_to_engine.get(u, u) for u in deps.urns)
                for prop, deps in sorted(request.propertyDependencies.items()) if deps.urns},
            ignore_changes=list(request.ignoreChanges),
            replace_on_changes=list(request.replaceOnChanges),
            delete_before_replace=bool(request.deleteBeforeReplace),
            retain_on_delete=bool(request.retainOnDelete),
            deleted_with=self.mock_to_engine.get(request.deletedWith, request.deletedWith),
            aliases=[_alias(a) for a in request.aliases],
            outputs=plain(rpc.deserialize_properties(resp.object))
            if self.record_outputs and resp.object else {},
            state_urn=state_urn if seed is not None else "")
        with self.lock:
            self.regs.append(reg)
            self.by_urn[eurn] = reg
        return resp

    def RegisterResourceOutputs(self, request: Any) -> Any:
        """Components' ``register_outputs``: the engine stores them as the component's
        outputs (where `gpufleet diff` reads each fleet's input digest)."""
        with self.lock:
            reg = self.by_urn.get(self.mock_to_engine.get(request.urn, ""))
        if reg is not None and not reg.custom and request.outputs is not None:
            reg.outputs = plain(rpc.deserialize_properties(request.outputs))
        return cast(Untyped, super().RegisterResourceOutputs)(request)


def _type_alias_dropped(args: pulumi.ResourceTransformationArgs
                        ) -> pulumi.ResourceTransformationResult | None:
    """A resource's options without its aliases that change only the type token: the ones a
    provider SDK adds for its older API versions (pulumi-azure-native gives each resource up to
    90, ``azure-native:network/v20150501:VirtualNetwork`` ...). The SDK turns each into a URN
    output while it builds the resource: 60% of an offline run of the examples, for
    aliases only the engine reads, and only to adopt a resource a stack holds under an older
    type, which gpufleet never wrote. gpufleet's own aliases (renames) name the old name and
    are kept. Offline runs only: `pulumi up` sends every alias to the engine."""
    aliases = args.opts.aliases
    if not aliases:
        return None
    keep = [a for a in aliases if not _type_only(a)]
    if len(keep) == len(aliases):
        return None
    opts = copy.copy(args.opts)
    opts.aliases = keep
    return pulumi.ResourceTransformationResult(args.props, opts)


def _type_only(alias: Any) -> bool:
    """An alias that sets its type and leaves every other field unset (the SDK's ``...``)."""
    if not isinstance(alias, pulumi.Alias):
        return False
    fields: dict[str, Any] = vars(alias)
    return [k for k, v in fields.items() if v is not ...] == ["type_"]


def _without_type_aliases(program: Callable[[], None]) -> None:
    pulumi.runtime.register_stack_transformation(_type_alias_dropped)
    program()


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


# The collector's thresholds while a program runs. The SDK makes a task, futures and callbacks
# for every output (some 60,000 objects for the examples' 128 resources), so the default (700,
# 10, 10) runs a full collection over the loaded SDKs' 350,000 objects every few thousand
# outputs: half of the run on the examples. 10,000 young, rare full ones: the same peak memory.
RUN_GC_THRESHOLDS = (10_000, 100, 100)


def _no_stack_trace() -> source_pb2.StackTrace:
    """What the SDK sends when it finds no caller's frame: an empty trace (so no source
    position). Stands in for ``pulumi.runtime.resource._get_stack_trace`` while a program
    runs here: the SDK walks the whole call stack and makes a protobuf frame per level for
    every registration, for the engine to show where a resource was declared; the mock
    monitor never reads it (6-10% of a plan of the examples)."""
    return source_pb2.StackTrace()


def run_program(program: Callable[[], None], config: Mapping[str, str], mocks: StrictMocks,
                stack: str = "dev", project: str = "gpufleet", preview: bool = False,
                record_outputs: bool = False) -> RunResult:
    """Run ``program`` once under mocks. Raises whatever the program raised.
    ``record_outputs`` keeps each resource's output state too (for writing exports)."""
    pulumi.runtime.settings.ROOT.set(None)
    SETTINGS.rpc_manager.clear()
    SETTINGS.outputs.clear()
    pulumi.runtime.set_all_config(dict(config))
    monitor = RecordingMonitor(mocks, stack, project, record_outputs)
    quiet = logging.getLogger("gpufleet.mock-engine")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    run = run_loop()  # errors nobody reads dropped; its pending tasks found at the end
    loop = run.loop
    # The SDK runs monitor calls on the loop's default executor, and each worker thread
    # makes itself an event loop it never closes; own those loops so they can be closed.
    worker_loops: list[asyncio.AbstractEventLoop] = []

    def init_worker() -> None:
        wl = asyncio.new_event_loop()
        asyncio.set_event_loop(wl)
        worker_loops.append(wl)
    executor = ThreadPoolExecutor(max_workers=2, initializer=init_worker,
                                  thread_name_prefix="gpufleet-mock")
    loop.set_default_executor(executor)
    thresholds = gc.get_threshold()
    gc.set_threshold(*RUN_GC_THRESHOLDS)
    stack_trace = sdk_resource._get_stack_trace
    sdk_resource._get_stack_trace = _no_stack_trace
    try:
        # The root Stack registers inside set_mocks: its futures must live on this loop.
        asyncio.set_event_loop(loop)
        pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=preview,
                                 monitor=monitor, logger=quiet)
        with quick_hints():  # the SDK's getter types, each annotation evaluated once
            loop.run_until_complete(run_pulumi_func(lambda: _without_type_aliases(program)))
            exports = loop.run_until_complete(_exports())
    finally:
        pending = run.pending()
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        asyncio.set_event_loop(None)
        executor.shutdown(wait=True)
        loop.close()
        for wl in worker_loops:
            wl.close()
        gc.set_threshold(*thresholds)
        sdk_resource._get_stack_trace = stack_trace
    return RunResult(list(monitor.regs), exports, list(mocks.calls))


async def _exports() -> dict[str, Any]:
    """The program's ``pulumi.export`` values (the mock root Stack registers none)."""
    root = pulumi.runtime.settings.get_root_resource()
    return dict(plain(await resolved_exports(getattr(root, "outputs", None) or {})) or {})


def deployment_v3(run: RunResult, stack: str, project: str,
                  time: str = "2026-11-01T00:00:00Z") -> dict[str, Any]:
    """A `pulumi stack export` (deployment v3) of what a run registered, as the engine would
    store it after `pulumi up`: inputs as sent (plus the `__defaults` bookkeeping bridged
    providers add), outputs, ids, parents and provider references. Used by tests and
    benchmarks to make realistic exports without the engine."""
    root = f"urn:pulumi:{stack}::{project}::{STACK_TYPE}::{project}-{stack}"
    resources: list[dict[str, Any]] = [{"urn": root, "custom": False, "type": STACK_TYPE,
                                         "outputs": dict(run.exports),
                                         "created": time, "modified": time}]
    for r in run.sorted():
        entry: dict[str, Any] = {
            "urn": r.urn, "custom": r.custom, "type": r.type,
            "inputs": {**r.inputs, "__defaults": []} if r.custom else {},
            "outputs": r.outputs, "parent": r.parent or root,
            "protect": r.protect, "dependencies": r.dependencies,
            "propertyDependencies": r.property_dependencies, "created": time,
            "modified": time}
        if r.custom:
            entry["id"] = r.id
        if r.provider:
            entry["provider"] = r.provider
        if r.ignore_changes:
            entry["ignoreChanges"] = r.ignore_changes
        resources.append(entry)
    return {"version": 3, "deployment": {
        "manifest": {"time": time, "magic": "gpufleet-fixture", "version": "v3.272.0"},
        "secrets_providers": {"type": "passphrase", "state": {"salt": "v1:fixture"}},
        "resources": resources}}
