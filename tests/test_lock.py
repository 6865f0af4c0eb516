"""The offers lock: stable offers across catalog changes, re-picks limited to what changed,
deterministic and atomic writes, located errors for broken locks, `--locked`, the stack
program's refusal of a stale lock, and the incremental diff."""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from exportutil import export

from gpufleet.cli import cli, main
from gpufleet.cli.runs import offline_diff
from gpufleet.input.validate import load_lock, validate_paths
from gpufleet.offers.catalog import bundled_dir, load_catalog
from gpufleet.review import GuardOptions
from gpufleet.review.state import parse_export

from planutil import TEST_KEY, stack_config, write

A4 = ("type: fleet\nname: a4\nnodes: 2\nplacement: cluster\nbackends: [gcp]\n"
      "spot_policy: auto\nresources:\n  gpu: {gpu}\n")
P5 = ("type: fleet\nname: trainer\nnodes: 2\nplacement: cluster\nbackends: [aws]\n"
      "resources:\n  gpu: H100:8\n")
GW = "type: gateway\nname: gw1\nbackend: gcp\nregion: us-west2\ndomain: gpu.example.com\n"
BACKENDS = (f"access:\n  ssh_public_key: {TEST_KEY}\nbackends:\n  - type: gcp\n"
            "    project_id: p1\n    ssh_cidrs: [198.51.100.0/24]\n  - type: aws\n"
            "    ssh_cidrs: [198.51.100.0/24]\n")


def fleet_files(tmp: Path, gpu: str = "B200:8") -> list[str]:
    return [write(tmp, "backends.yml", BACKENDS), write(tmp, "a4.yml", A4.format(gpu=gpu)),
            write(tmp, "p5.yml", P5), write(tmp, "gw.yml", GW)]


def run_cli(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(cli, list(args))
    return r.exit_code, r.output


def lock_files(tmp: Path, *extra: str, paths: list[str] | None = None) -> str:
    code, out = run_cli("lock", *(paths or fleet_files(tmp)), *extra)
    assert code == 0, out
    return (tmp / "gpufleet.lock").read_text()


def shifted_catalog(tmp: Path, factor: float, drop: set[str],
                    dearer: set[tuple[str, str]] | None = None) -> str:
    """A copy of the bundled catalog with every price multiplied, some types removed and
    some (type, location) rows made ten times dearer."""
    out = tmp / "catalog"
    shutil.copytree(bundled_dir(), out)
    for name in ("aws.csv", "gcp.csv", "azure.csv"):
        with (out / name).open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        fields = list(rows[0])
        with (out / name).open("w", newline="") as fh:
            w = csv.DictWriter(fh, fields)
            w.writeheader()
            for r in rows:
                if r["instance_name"] in drop:
                    continue
                f = factor * (10 if (r["instance_name"], r["location"]) in (dearer or ()) else 1)
                r["price"] = f"{float(r['price']) * f:.5f}"
                w.writerow(r)
    return str(out)


def entries(lock_text: str) -> dict[str, str]:
    """Each top-level entry's lines, to compare entries byte for byte."""
    out: dict[str, str] = {}
    current = None
    for line in lock_text.splitlines():
        if line.startswith("  ") and not line.startswith("    "):
            current = line.strip().rstrip(":")
            out[current] = ""
        if current and line.startswith("  "):
            out[current] += line + "\n"
    return out


def plan_json(*args: str) -> dict[str, Any]:
    r = CliRunner().invoke(cli, ["plan", "--format", "json", *args])
    assert r.exit_code == 0, r.output
    data: dict[str, Any] = json.loads(r.stdout)
    return data


def test_lock_records_offers_and_validates(tmp_path: Path) -> None:
    text = lock_files(tmp_path)
    lock, result = load_lock(tmp_path / "gpufleet.lock")
    assert lock is not None and result.ok
    assert sorted(lock.fleets) == ["a4", "trainer"] and sorted(lock.gateways) == ["gw1"]
    a4 = lock.fleets["a4"]
    assert (a4.backend, a4.instance_type, a4.gpu_name, a4.gpu_count) == \
        ("gcp", "a4-highgpu-8g", "B200", 8)
    assert a4.requirements.startswith("sha256:") and a4.catalog.startswith("bundled ")
    assert str(tmp_path) not in text  # no local path in a committed file
    code, out = run_cli("validate", str(tmp_path))
    assert code == 0 and "1 lock file(s)" in out


def test_same_yaml_new_prices_and_a_removed_type_change_nothing(tmp_path: Path) -> None:
    paths = fleet_files(tmp_path)
    lock_files(tmp_path)
    lock, _ = load_lock(tmp_path / "gpufleet.lock")
    assert lock is not None
    before = plan_json(*paths)
    trainer = lock.fleets["trainer"]
    catalog = shifted_catalog(tmp_path, 0.5, {lock.fleets["a4"].instance_type},
                              {(trainer.instance_type, trainer.region)})
    after = plan_json("--catalog", catalog, *paths)
    assert after["resources"] == before["resources"]
    assert [f["lock"]["status"] for f in after["fleets"]] == ["locked", "locked"]
    # Without the lock, the same catalog moves the trainer to another instance type.
    unlocked = plan_json("--catalog", catalog, "--lock", str(tmp_path / "none.lock"),
                         paths[0], paths[2])
    assert unlocked["fleets"][0]["region"] != trainer.region
    assert unlocked["fleets"][0]["lock"]["status"] == "new"
    # The offline diff against what `pulumi up` left: no changes at all.
    state = export(paths, lock=lock)
    validated = validate_paths(paths)
    report, _ = offline_diff(validated, load_catalog(catalog), paths,
                             parse_export(json.dumps(state)), None, catalog, GuardOptions(),
                             lock, locked=True)
    assert report is not None and report.changes == ()
    report, _ = offline_diff(validated, load_catalog(catalog), paths,
                             parse_export(json.dumps(state)), None, catalog, GuardOptions(),
                             lock, full=True)
    assert report is not None and report.changes == () and report.same > 30


def test_a_removed_type_is_named_in_a_warning(tmp_path: Path) -> None:
    paths = fleet_files(tmp_path)
    lock_files(tmp_path)
    catalog = shifted_catalog(tmp_path, 1.0, {"a4-highgpu-8g"})
    r = CliRunner().invoke(cli, ["plan", "--catalog", catalog, *paths])
    assert r.exit_code == 0
    assert "warning[O010]: fleet 'a4': the locked offer (gcp" in r.output
    assert "a4-highgpu-8g" in r.output and "the cloud decides" in r.output


def test_changing_one_fleet_repicks_only_that_fleet(tmp_path: Path) -> None:
    old = lock_files(tmp_path)
    before = plan_json(*fleet_files(tmp_path))
    paths = fleet_files(tmp_path, gpu="H200:8")
    plan = plan_json(*paths)
    status = {f["name"]: f["lock"]["status"] for f in plan["fleets"]}
    assert status == {"a4": "changed", "trainer": "locked"}
    a4 = next(f for f in plan["fleets"] if f["name"] == "a4")
    assert a4["lock"]["previous"]["instance_type"] == "a4-highgpu-8g"
    _, out = run_cli("plan", *paths)
    assert "NEW OFFER (requirements changed since it was locked); locked before: gcp" in out
    new = lock_files(tmp_path, paths=paths)
    assert entries(new)["trainer"] == entries(old)["trainer"]
    assert entries(new)["gw1"] == entries(old)["gw1"]
    assert entries(new)["a4"] != entries(old)["a4"]
    after = plan_json(*paths)

    def trainer(p: dict[str, Any]) -> list[Any]:
        return [r for r in p["resources"] if "trainer" in r["urn"]]
    assert trainer(after) == trainer(before)


def test_lock_twice_writes_the_same_file_and_keeps_its_mtime(tmp_path: Path) -> None:
    first = lock_files(tmp_path)
    lock = tmp_path / "gpufleet.lock"
    os.utime(lock, (1_000_000_000, 1_000_000_000))
    code, out = run_cli("lock", *fleet_files(tmp_path))
    assert code == 0 and "is up to date" in out
    assert lock.read_text() == first and lock.stat().st_mtime == 1_000_000_000
    code, out = run_cli("lock", "--check", *fleet_files(tmp_path))
    assert code == 0


@pytest.mark.parametrize(("edit", "where", "code"), [
    (lambda t: t.replace("spot: true", "spot: maybe", 1), "spot", "S002"),
    (lambda t: t.replace("lock_version: 1", "lock_version: 2"), "lock_version", "S"),
    (lambda t: t.replace("requirements: sha256:", "requirements: md5:", 1), "requirements",
     "S"),
    (lambda t: t.replace("backend: gcp", "backend: gcp\n    backend: aws", 1), "backend",
     "L"),
    (lambda t: t + "fleets: [\n", "fleets", "L"),
    (lambda t: t.replace("zone: us-", "zone: eu-", 1), "zone", "K002"),
])
def test_a_broken_lock_is_a_located_error_and_stays_untouched(
        tmp_path: Path, edit: Any, where: str, code: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lock_files(tmp_path)
    path = tmp_path / "gpufleet.lock"
    broken = edit(path.read_text())
    path.write_text(broken)
    for cmd in ("lock", "plan"):
        assert main([cmd, *fleet_files(tmp_path)]) == 1
        err = capsys.readouterr().err
        assert "gpufleet.lock:" in err and f"error[{code}" in err, err
        assert "Traceback" not in err
        assert path.read_text() == broken
    assert main(["validate", str(path)]) == 1


def test_a_yaml_file_is_not_a_lock(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = fleet_files(tmp_path)
    assert main(["plan", "--lock", paths[1], *paths]) == 1
    assert "K003" in capsys.readouterr().err


def test_plan_locked_fails_on_a_missing_or_stale_lock(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = fleet_files(tmp_path)
    assert main(["plan", "--locked", *paths]) == 1
    err = capsys.readouterr().err
    assert "error[O011]: fleet 'a4' is not locked: there is no lock file" in err
    assert "gateway 'gw1' is not locked" in err
    lock_files(tmp_path)
    assert main(["plan", "--locked", *paths, write(tmp_path, "new.yml",
                                                   P5.replace("trainer", "second"))]) == 1
    assert "error[O011]: fleet 'second' has no entry in" in capsys.readouterr().err
    assert main(["plan", "--locked", *paths]) == 0
    capsys.readouterr()
    stale = fleet_files(tmp_path, gpu="H200:8")
    assert main(["plan", "--locked", *stale]) == 1
    err = capsys.readouterr().err
    assert "a4.yml:2:1: error[O011]: the requirements of fleet 'a4' changed since" in err
    assert "trainer" not in err


def test_the_stack_program_refuses_a_stale_lock_with_the_same_message(tmp_path: Path) -> None:
    from gpufleet.components import program
    from gpufleet.components.run import harness, offline


    lock_files(tmp_path)
    stale = fleet_files(tmp_path, gpu="H200:8")
    mocks = harness.StrictMocks(offline.invokes_for(["example.com"]), offline.outputs)
    with pytest.raises(Exception, match=r"error\[O011\]: the requirements of fleet 'a4' "
                                        r"changed since .*gpufleet.lock was written"):
        harness.run_program(program.main, stack_config(stale, None, None), mocks)
    fresh = fleet_files(tmp_path)
    run = harness.run_program(program.main, stack_config(fresh, None, None), mocks)
    assert {r.name for r in run.registrations if r.type.endswith(":Fleet")} == \
        {"a4", "trainer"}


def test_upgrade_prints_old_new_cost_and_replaced_nodes(tmp_path: Path) -> None:
    lock_files(tmp_path)
    lock, _ = load_lock(tmp_path / "gpufleet.lock")
    assert lock is not None
    trainer = lock.fleets["trainer"]
    catalog = shifted_catalog(tmp_path, 1.0, set(), {(trainer.instance_type, trainer.region)})
    code, out = run_cli("lock", "--catalog", catalog, *fleet_files(tmp_path))
    assert code == 0 and "is up to date" in out  # a catalog change alone moves nothing
    code, out = run_cli("lock", "--catalog", catalog, "--upgrade", "--fleet", "trainer",
                        *fleet_files(tmp_path))
    assert code == 0, out
    line = next(ln for ln in out.splitlines() if ln.startswith("fleet trainer: upgraded"))
    assert "->" in line and "replaces 2 node(s)" in line and "/h" in line
    assert "a4" not in out.split("upgrade:")[0]
    new, _ = load_lock(tmp_path / "gpufleet.lock")
    assert new is not None and new.fleets["a4"] == lock.fleets["a4"]
    assert new.fleets["trainer"].region != trainer.region
    code, out = run_cli("lock", "--fleet", "trainer", *fleet_files(tmp_path))
    assert code == 2 and "--upgrade" in out
    code, out = run_cli("lock", "--upgrade", "--fleet", "nope", *fleet_files(tmp_path))
    assert code == 2


def test_entries_of_other_files_are_kept_unless_pruned(tmp_path: Path) -> None:
    lock_files(tmp_path)
    only_a4 = [str(tmp_path / "backends.yml"), str(tmp_path / "a4.yml")]
    code, out = run_cli("lock", *only_a4)
    assert code == 0 and "kept 2 entries" in out
    code, out = run_cli("lock", "--prune", *only_a4)
    assert code == 0 and "fleet trainer: removed from the lock" in out
    lock, _ = load_lock(tmp_path / "gpufleet.lock")
    assert lock is not None and list(lock.fleets) == ["a4"] and not lock.gateways


def test_diff_reruns_only_the_fleet_whose_inputs_changed(tmp_path: Path) -> None:
    paths = fleet_files(tmp_path)
    lock_files(tmp_path)
    lock, _ = load_lock(tmp_path / "gpufleet.lock")
    state = parse_export(json.dumps(export(paths, lock=lock)))
    changed = [write(tmp_path, "p5.yml", P5.replace("nodes: 2", "nodes: 1")),
               *paths[:2], paths[3]]
    report, _ = offline_diff(validate_paths(changed), load_catalog(), changed, state, None,
                             None, GuardOptions(), lock)
    assert report is not None
    assert [(c.op, c.name) for c in report.changes] == [("delete", "trainer-node-1")]
    assert "fleet a4: skipped (inputs unchanged since the export)" in report.notes
    assert "gateway gw1: skipped (inputs unchanged since the export)" in report.notes
    assert "fleet trainer: run (its inputs changed since the export)" in report.notes
    full, _ = offline_diff(validate_paths(changed), load_catalog(), changed, state, None,
                           None, GuardOptions(), lock, full=True)
    assert full is not None and full.changes == report.changes
    assert full.same == report.same


def test_a_renamed_fleet_keeps_its_locked_offer(tmp_path: Path) -> None:
    paths = fleet_files(tmp_path)
    old = lock_files(tmp_path)
    renamed = write(tmp_path, "p5.yml", P5.replace("name: trainer", "name: trainer2"))
    write(tmp_path, "backends.yml", BACKENDS + "fleets:\n  trainer2: {previous_names: [trainer]}\n")
    assert main(["plan", "--locked", *paths[:2], renamed, paths[3]]) == 0
    new = lock_files(tmp_path, paths=[*paths[:2], renamed, paths[3]])
    assert "trainer:" not in new.replace("trainer2:", "")
    assert entries(new)["trainer2"].split("\n", 1)[1] == entries(old)["trainer"].split("\n", 1)[1]


# --- address blocks -----------------------------------------------------------------------

def test_the_lock_records_each_address_block_and_plan_uses_it(tmp_path: Path) -> None:
    text = lock_files(tmp_path)
    lock, _ = load_lock(tmp_path / "gpufleet.lock")
    assert lock is not None
    blocks = {n: e.cidr for n, e in {**lock.fleets, **lock.gateways}.items()}
    assert all(blocks.values()) and len(set(blocks.values())) == 3, blocks
    assert "cidr: " in text
    code, out = run_cli("plan", "--format", "json", *fleet_files(tmp_path))
    assert code == 0, out
    plan = json.loads(out[out.index("{"):])
    a4 = next(f for f in plan["fleets"] if f["name"] == "a4")
    assert a4["networks"][0]["cidr"].startswith(str(blocks["a4"]).rsplit(".", 2)[0])


def test_a_changed_pool_moves_the_blocks_it_no_longer_holds_and_says_so(
        tmp_path: Path) -> None:
    files = fleet_files(tmp_path)
    lock_files(tmp_path, paths=files)
    before, _ = load_lock(tmp_path / "gpufleet.lock")
    assert before is not None
    write(tmp_path, "backends.yml", BACKENDS.replace(
        "  - type: aws\n", "  - type: aws\n    cidr: 172.20.0.0/14\n"))
    code, out = run_cli("lock", *files)
    assert code == 0, out
    assert "warning[C016]" not in out  # lock writes, the plan warns
    assert f"trainer: address block {before.fleets['trainer'].cidr} -> 172.2" in out
    assert "replaced, and with them 2 node(s)" in out
    after, _ = load_lock(tmp_path / "gpufleet.lock")
    assert after is not None and after.fleets["a4"].cidr == before.fleets["a4"].cidr
    write(tmp_path, "backends.yml", BACKENDS.replace(
        "  - type: aws\n", "  - type: aws\n    cidr: 172.24.0.0/14\n"))
    r = CliRunner().invoke(cli, ["plan", *files])
    assert r.exit_code == 0
    assert "warning[C016]" in r.output and "no longer holds" in r.output


def test_two_entries_recording_one_block_are_an_error_naming_both(tmp_path: Path) -> None:
    text = lock_files(tmp_path)
    lock, _ = load_lock(tmp_path / "gpufleet.lock")
    assert lock is not None
    a4 = lock.fleets["a4"].cidr
    gw = lock.gateways["gw1"].cidr
    (tmp_path / "gpufleet.lock").write_text(text.replace(f"cidr: {gw}", f"cidr: {a4}"))
    r = CliRunner().invoke(cli, ["plan", *fleet_files(tmp_path)])
    assert r.exit_code == 1
    assert "error[C004]" in r.output and f"a4 and gateway:gw1 both record {a4}" in r.output


def test_an_invalid_block_in_the_lock_is_a_located_error(tmp_path: Path) -> None:
    text = lock_files(tmp_path)
    lock, _ = load_lock(tmp_path / "gpufleet.lock")
    assert lock is not None
    bad = text.replace(f"cidr: {lock.fleets['a4'].cidr}", "cidr: 10.1.2.3/16")
    (tmp_path / "gpufleet.lock").write_text(bad)
    r = CliRunner().invoke(cli, ["validate", str(tmp_path / "gpufleet.lock")])
    assert r.exit_code == 1 and "error[K004]" in r.output
    assert "not a network address (10.1.0.0/16 is)" in r.output
