"""Where the offline pipeline meets the Pulumi layer: `gpufleet plan` and `gpufleet diff` hand
the core's pipeline (``gpufleet.review.pipeline``) the functions that run the stack program
and the policy pack (``gpufleet.components.run``). The tests and benchmarks build their
reports here too, the way the commands do."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpufleet.cli import processors
from gpufleet.cli.runcache import MAX_NODES, MAX_SUBJECTS, cached, cached_policies
from gpufleet.compile import Compiled
from gpufleet.compile.runs import (
    Finding,
    PolicyRun,
    PolicySubject,
    ProgramRun,
    Progress,
    Registered,
    RunInputs,
)
from gpufleet.diagnostics import Diagnostic
from gpufleet.input import Inputs, Lock, SyncedGateway, Validated
from gpufleet.offers import Catalog
from gpufleet.review import (
    GuardOptions,
    PlanReport,
    Report,
    State,
    Violation,
    pipeline,
)


def build_report(validated: Validated, catalog: Catalog, paths: Sequence[str], stack: str,
                 profile: str | None, catalog_dir: str | None, lock: Lock | None = None,
                 locked: bool = False, policy_levels: Mapping[str, str] | None = None,
                 progress: Progress | None = None,
                 synced: Mapping[str, SyncedGateway] | None = None, policies: bool = True
                 ) -> tuple[PlanReport | None, list[Diagnostic]]:
    """The plan report (``pipeline.plan``), or None and the compile errors. The stack
    program runs (and the provider SDKs load) only when the run cache has no answer for
    these inputs and this code, and the policy pack (with pulumi-policy) only when it has
    none for these resources (``gpufleet.cli.runcache``); not at all without ``policies``
    (a report whose violations nobody reads: `gpufleet quota`'s)."""
    run = RunInputs(tuple(paths), catalog, profile, catalog_dir, stack, lock, locked,
                    dict(synced or {}))
    code = _components()
    rules = cached_policies(_rules, code) if policies else _no_rules
    return pipeline.plan(validated, run, cached(_program, code), rules, policy_levels,
                         progress)


def _no_rules(subjects: Sequence[PolicySubject], levels: Mapping[str, str]) -> list[Finding]:
    """The policy run of a report that shows no violations: none looked for."""
    return []


# the runner of the command that runs (``program_runner``, ``diff_runner``), while it lasts
_RUNNER: list[Any] = []


@contextlib.contextmanager
def _command_runner(prepare: Callable[[Callable[[], bool]], None], nice: bool = False
                    ) -> Iterator[None]:
    """The command's runner (``gpufleet.components.run.runner``) while the block lasts;
    none with one processor."""
    from gpufleet.components.run import runner

    with runner.runner(prepare, processors.jobs(), nice) as end:
        _RUNNER[:] = [end] if end is not None else []
        try:
            yield
        finally:
            _RUNNER.clear()


def program_runner() -> contextlib.AbstractContextManager[None]:
    """`plan` and `quota`: a process that imports the stack program and the policy pack
    while the command validates and compiles its files, then runs the program and the
    rules for it."""
    from gpufleet.components.run import runner

    return _command_runner(runner.load_program)


def diff_runner(paths: Sequence[str], profile: str | None, catalog_dir: str | None
                ) -> contextlib.AbstractContextManager[None]:
    """`diff`: a process that loads the SDKs a preview of ``paths`` uses (at a lower
    priority) while the command reads the export, then runs the preview if it is ready."""
    from gpufleet.components.run import runner

    def prepare(asked: Callable[[], bool]) -> None:
        runner.warm(paths, profile, catalog_dir, asked)
    return _command_runner(prepare, nice=True)


def _program() -> ProgramRun:
    jobs = processors.jobs()

    def registered(run: RunInputs, compiled: Compiled, progress: Progress | None = None
                   ) -> Registered:
        done = None
        # a larger run's records would cost more to send back than the runner saves, and
        # both processes would hold them (16,000 nodes: 216 MB where one process takes
        # 130): the runner is ended and the program runs here
        if _RUNNER and sum(p.nodes for p in compiled.plans) > MAX_NODES:
            _RUNNER[0].close()
        elif _RUNNER:  # its count of resources stays there: the line says where it runs

            def tick() -> None:
                if progress is not None:
                    progress("running the stack program: in a second process")
            done = _RUNNER[0].call("registered", dataclasses.replace(run, catalog=None),
                                   compiled, None, True, jobs, tick=tick)
        if not isinstance(done, Registered):  # no runner, or it failed: here
            from gpufleet.components.run import plan

            done = plan.registered(run, compiled, progress, jobs=jobs)
        return done
    return registered


def _rules() -> PolicyRun:
    def rules(subjects: Sequence[PolicySubject], levels: Mapping[str, str]) -> list[Finding]:
        done = _RUNNER[0].call("rules", list(subjects), dict(levels)) \
            if _RUNNER and len(subjects) <= MAX_SUBJECTS else None
        if not isinstance(done, list):  # no runner, or it failed: here
            from gpufleet.components.run.policy import run_rules

            done = run_rules(subjects, levels)
        return done
    return rules


def _components() -> tuple[Path, ...]:
    """The components' source folder (found without importing them)."""
    import importlib.util

    spec = importlib.util.find_spec("gpufleet.components")
    return tuple(Path(p) for p in (spec.submodule_search_locations or ())) if spec else ()


def offline_diff(validated: Validated, catalog: Catalog, paths: Sequence[str], state: State,
                 profile: str | None, catalog_dir: str | None, guards: GuardOptions,
                 lock: Lock | None = None, locked: bool = False, full: bool = False,
                 ssh_public_key: str | None = None,
                 synced: Mapping[str, SyncedGateway] | None = None
                 ) -> tuple[Report | None, list[Diagnostic]]:
    """The diff against ``state`` (``pipeline.diff``); ``ssh_public_key``, ``synced``: the
    stack config's key and gateways' addresses, where the stack's config was found. The
    preview runs in the command's runner (``diff_runner``) when it is worth it."""
    from gpufleet.components.run.diff import run_seeded
    from gpufleet.components.run.runner import MAX_SENT

    run = RunInputs(tuple(paths), catalog, profile, catalog_dir, state.stack or "dev", lock,
                    locked, dict(synced or {}), ssh_public_key)
    jobs = processors.jobs()

    def seeded(run: RunInputs, compiled: Compiled,
               seed: Mapping[str, tuple[str, Mapping[str, Any]]], project: str
               ) -> tuple[dict[str, Any], ...]:
        done = None
        if _RUNNER and compiled.plans and len(seed) <= MAX_SENT:
            # only to a runner ready by now (else it was starved: the processors are busy)
            done = _RUNNER[0].call("seeded", dataclasses.replace(run, catalog=None), compiled,
                               dict(seed), project, True, jobs, wait=False)
        if not isinstance(done, tuple):
            if _RUNNER:  # not used now: its processor goes to this run's parts
                _RUNNER[0].close()
            done = run_seeded(run, compiled, seed, project, jobs=jobs)
        return done
    return pipeline.diff(validated, run, state, guards, seeded, full)


def run_policies(resources: Sequence[Mapping[str, Any]], inputs: Inputs,
                 levels: Mapping[str, str] | None = None) -> list[Violation]:
    """The policy pack over a run's resources, as the plan reports it."""
    return pipeline.policy_violations(resources, inputs, _rules(), levels)
