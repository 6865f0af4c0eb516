"""Editing one fleet never moves another: for generated sets of fleets on every backend,
adding, removing, renaming or moving one fleet leaves every other fleet's plan - and the
resources the stack program registers for it - byte-identical, once the lock records the
address blocks (as `gpufleet lock` does)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufleet.compile import Compiled, compile_inputs, plan_to_json
from gpufleet.compile.runs import RunInputs
from gpufleet.components.run.plan import run_offline
from gpufleet.input import Inputs, Lock, validate_texts
from gpufleet.offers import load_catalog
from gpufleet.review import owner_map, relock

from planutil import EXAMPLES, TEST_KEY

pytestmark = pytest.mark.slow  # `pytest -m 'not slow'` skips this module

# Small pools (eight /16 blocks per backend), so that names often hash to the same block.
BACKENDS = f"""access: {{ssh_public_key: "{TEST_KEY}"}}
backends:
  - {{type: aws, cidr: 10.0.0.0/13, ssh_cidrs: [203.0.113.0/24]}}
  - {{type: gcp, cidr: 10.8.0.0/13, project_id: proj, ssh_cidrs: [203.0.113.0/24]}}
  - {{type: azure, cidr: 10.16.0.0/13, subscription_id: 00000000-0000-0000-0000-000000000000,
      tenant_id: t, ssh_cidrs: [203.0.113.0/24]}}
"""
GPUS = ["0", "A100:80GB:8", "H100:8"]
CLOUDS = ["aws", "gcp", "azure"]


@dataclasses.dataclass(frozen=True)
class Fleet:
    name: str
    backend: str
    gpu: str
    nodes: int
    previous: tuple[str, ...] = ()

    def yaml(self) -> str:
        return (f"type: fleet\nname: {self.name}\nnodes: {self.nodes}\n"
                f"backends: [{self.backend}]\nspot_policy: auto\n"
                f"resources:\n  gpu: {self.gpu}\n")


names = st.from_regex(r"[a-z][a-z0-9]{2,8}", fullmatch=True)
fleets = st.builds(Fleet, names, st.sampled_from(CLOUDS), st.sampled_from(GPUS),
                   st.integers(1, 2))
fleet_sets = st.lists(fleets, min_size=2, max_size=7, unique_by=lambda f: f.name)


def with_renames(backends: str, fs: list[Fleet]) -> str:
    """The backends file with the fleets' `previous_names` (gpufleet's own setting)."""
    renamed = [f for f in fs if f.previous]
    if not renamed:
        return backends
    return backends + "fleets:\n" + "".join(
        f"  {f.name}: {{previous_names: [{', '.join(f.previous)}]}}\n" for f in renamed)


def inputs_of(fs: list[Fleet], backends: str = BACKENDS) -> Inputs:
    texts = {"backends.yml": with_renames(backends, fs),
             **{f"{f.name}.yml": f.yaml() for f in fs}}
    v = validate_texts(texts)
    assert v.ok, v.diagnostics
    return v.inputs


def compiled(fs: list[Fleet], lock: Lock | None, backends: str = BACKENDS) -> Compiled:
    return compile_inputs(inputs_of(fs, backends), load_catalog(), None, lock)


def locked(fs: list[Fleet], backends: str = BACKENDS) -> Lock:
    """The lock `gpufleet lock` writes for these fleets."""
    inputs = inputs_of(fs, backends)
    empty = Lock(exists=False)
    c = compile_inputs(inputs, load_catalog(), None, empty)
    new = relock(inputs, c, empty, load_catalog())
    return Lock(new.fleets, new.gateways, "gpufleet.lock")


def plans_by_name(c: Compiled) -> dict[str, str]:
    out = {}
    for p in c.plans:
        data = plan_to_json(p)
        data.pop("file")
        out[p.name] = json.dumps(data, sort_keys=True)
    return out


def edit(fs: list[Fleet], how: str, pick: int, extra: Fleet) -> tuple[list[Fleet], set[str]]:
    """One edit of one fleet; returns the new set and the names of the untouched fleets."""
    target = fs[pick % len(fs)]
    rest = [f for f in fs if f is not target]
    others = {f.name for f in rest}
    if how == "add":
        if extra.name in {f.name for f in fs}:
            extra = dataclasses.replace(extra, name=extra.name + "x")
        return [*fs, extra], {f.name for f in fs}
    if how == "remove":
        return rest, others
    if how == "rename":
        renamed = dataclasses.replace(target, name=target.name + "new",
                                      previous=(target.name,))
        return [*rest, renamed], others
    moved = dataclasses.replace(target, backend=CLOUDS[(CLOUDS.index(target.backend) + 1) % 3])
    return [*rest, moved], others


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(fleet_sets, st.sampled_from(["add", "remove", "rename", "move"]), st.integers(0, 10),
       fleets)
def test_one_edit_leaves_every_other_plan_identical(fs: list[Fleet], how: str, pick: int,
                                                    extra: Fleet) -> None:
    lock = locked(fs)
    before = plans_by_name(compiled(fs, lock))
    after_fleets, untouched = edit(fs, how, pick, extra)
    after = plans_by_name(compiled(after_fleets, lock))
    for name in untouched:
        assert after[name] == before[name], f"{how}: fleet {name} changed"


def resources_of(c: Compiled, fleets_wanted: set[str]) -> dict[str, str]:
    run = run_offline(RunInputs(()), c)
    regs = [r.to_json() for r in run.sorted()]
    owners = owner_map([(r["urn"], r["type"], r["parent"]) for r in regs])
    return {r["urn"]: json.dumps({k: r[k] for k in ("type", "parent", "provider", "inputs")},
                                 sort_keys=True)
            for r in regs if owners.get(r["urn"]) in fleets_wanted}


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(fleet_sets, st.sampled_from(["add", "remove", "rename", "move"]), st.integers(0, 10),
       fleets)
def test_one_edit_leaves_every_other_fleets_resources_identical(
        fs: list[Fleet], how: str, pick: int, extra: Fleet) -> None:
    lock = locked(fs)
    after_fleets, untouched = edit(fs, how, pick, extra)
    before = resources_of(compiled(fs, lock), untouched)
    after = resources_of(compiled(after_fleets, lock), untouched)
    assert before and after == before


def test_the_examples_moving_one_fleet_to_another_cloud_moves_nothing_else(
        tmp_path: Path) -> None:
    """The issue's case: `spot_policy: on-demand` moves a100-any from Azure to AWS; every
    other example fleet keeps its plan, and h100-train keeps 10.30.0.0/16."""
    import shutil

    from gpufleet.input import load_lock, validate_paths

    shutil.copytree(EXAMPLES, tmp_path / "ex")
    lock, _ = load_lock(tmp_path / "ex" / "gpufleet.lock")
    assert lock is not None
    before = compile_inputs(validate_paths([str(tmp_path / "ex")]).inputs, load_catalog(),
                            None, lock)
    f = tmp_path / "ex" / "fleets" / "multicloud-a100.dstack.yml"
    f.write_text(f.read_text().replace("spot_policy: auto", "spot_policy: on-demand"))
    after = compile_inputs(validate_paths([str(tmp_path / "ex")]).inputs, load_catalog(),
                           None, lock)
    moved = {p.name: p.backend for p in after.plans}
    assert {p.name: p.backend for p in before.plans}["a100-any"] != moved["a100-any"]
    b, a = plans_by_name(before), plans_by_name(after)
    assert {n for n in b if b[n] != a[n]} == {"a100-any"}
    assert after.blocks["h100-train"] == "10.30.0.0/16"


def test_five_new_fleets_beside_nine_move_none_of_them() -> None:
    """The issue's second case, on AWS alone (in a /12 pool: 16 blocks for 14 fleets):
    nine locked fleets, five added."""
    nine = [Fleet(f"old{i}", "aws", "0", 1) for i in range(9)]
    five = [Fleet(f"a{i}", "aws", "0", 1) for i in range(5)]
    wide = BACKENDS.replace("10.0.0.0/13", "10.0.0.0/12")
    lock = locked(nine, wide)
    before = plans_by_name(compiled(nine, lock, wide))
    after = plans_by_name(compiled(nine + five, lock, wide))
    assert all(after[f.name] == before[f.name] for f in nine)


def test_a_lock_without_blocks_is_upgraded_without_moving_anything() -> None:
    """Locks written before blocks were recorded: `gpufleet lock` records the blocks the
    fleets have now, also when new fleets arrive in the same run."""
    fs = [Fleet(f"f{i}", "aws", "0", 1) for i in range(6)]
    lock = locked(fs)
    bare = Lock({n: dataclasses.replace(e, cidr=None) for n, e in lock.fleets.items()},
                {}, "gpufleet.lock")
    now = compiled(fs, bare)
    assert {n: now.blocks[n] for n in lock.fleets} == {n: e.cidr for n, e in lock.fleets.items()}
    grown = compiled([Fleet("aaa", "aws", "0", 1), *fs], bare)
    assert all(grown.blocks[n] == e.cidr for n, e in lock.fleets.items())
    inputs = inputs_of(fs)
    upgraded = relock(inputs, now, bare, load_catalog())
    assert upgraded.moves == () and len(upgraded.recorded) == 6
