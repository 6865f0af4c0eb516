"""`gpufleet diff` on exports written by a fixture in the real deployment v3 format:
no phantom diffs, node removals, isolation between fleets, file moves, renames, out-of-band
edits in the export, guards and exit codes."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from exportutil import export, write_export
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.cli import cli, main
from gpufleet.cli.runs import offline_diff
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog
from gpufleet.review import GuardOptions
from gpufleet.review.changes import Report
from gpufleet.review.state import parse_export

from planutil import write

A4 = ("type: fleet\nname: a4\nnodes: {nodes}\nplacement: cluster\nbackends: [gcp]\n"
      "availability_zones: [us-west2-c]\nspot_policy: auto\nresources:\n  gpu: B200:8\n"
      "tags:\n  team: {team}\n")
P5 = ("type: fleet\nname: trainer\nnodes: 2\nplacement: cluster\nbackends: [aws]\n"
      "regions: [us-east-1]\nresources:\n  gpu: H100:8\ntags:\n  team: {team}\n")
GW = "type: gateway\nname: gw1\nbackend: gcp\nregion: us-west2\ndomain: gpu.example.com\n"
BACKENDS = ("backends:\n  - type: gcp\n    project_id: p1\n    ssh_cidrs: [203.0.113.0/24]\n"
            "  - type: aws\n")


def files(tmp: Path, nodes: int = 3, a4_team: str = "ml", p5_team: str = "ml",
          moved: bool = False, gateway: bool = True, backends: str = BACKENDS) -> list[str]:
    a4 = A4.format(nodes=nodes, team=a4_team)
    p5 = P5.format(team=p5_team)
    out = [write(tmp, "backends.yml", backends)]
    if moved:  # other files, in another order (one configuration per file, as dstack reads)
        (tmp / "moved").mkdir(exist_ok=True)
        out += [write(tmp / "moved", "z-trainer.dstack.yml", p5),
                write(tmp / "moved", "b200s.yaml", a4)]
    else:
        out += [write(tmp, "a4.yml", a4), write(tmp, "p5.yml", p5)]
    if gateway:
        out.append(write(tmp, "gw.yml", GW))
    return out


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("baseline")
    return export(files(tmp))


NO_GUARDS = GuardOptions()


def run(tmp: Path, paths: list[str], state: dict[str, Any],
        guards: GuardOptions = NO_GUARDS, full: bool = False) -> Report:
    validated = validate_paths(paths)
    assert validated.ok, validated.diagnostics
    report, diags = offline_diff(validated, load_catalog(), paths,
                                 parse_export(json.dumps(state)), None, None, guards,
                                 full=full)
    assert report is not None, diags
    return report


def ops(report: Report) -> list[tuple[str, str]]:
    return sorted((c.op, c.name) for c in report.changes)


def test_same_yaml_gives_no_changes(tmp_path: Path, baseline: dict[str, Any]) -> None:
    report = run(tmp_path, files(tmp_path), baseline)
    assert report.changes == () and report.same > 40
    assert report.violations == ()


def test_one_node_less_is_exactly_one_delete(tmp_path: Path,
                                             baseline: dict[str, Any]) -> None:
    report = run(tmp_path, files(tmp_path, nodes=2), baseline)
    assert ops(report) == [("delete", "a4-node-2")]
    change = report.changes[0]
    assert (change.owner, change.yaml_key) == ("a4", "nodes")
    assert change.file is not None and change.file.endswith("a4.yml")


def test_editing_one_fleets_tags_touches_no_other_fleet(tmp_path: Path,
                                                         baseline: dict[str, Any]) -> None:
    report = run(tmp_path, files(tmp_path, p5_team="research"), baseline)
    assert report.changes and {c.owner for c in report.changes} == {"trainer"}
    assert {c.op for c in report.changes} == {"update"}
    assert all(c.yaml_key == "tags" for c in report.changes)
    prop = next(p for c in report.changes for p in c.properties if p.path == "tags.team")
    assert (prop.old, prop.new) == ("ml", "research")


def test_moving_and_reordering_fleets_changes_nothing(tmp_path: Path,
                                                      baseline: dict[str, Any]) -> None:
    report = run(tmp_path, files(tmp_path, moved=True), baseline)
    assert report.changes == ()


def test_rename_with_previous_names_is_aliased_not_replaced(tmp_path: Path,
                                                            baseline: dict[str, Any]) -> None:
    paths = files(tmp_path, backends=BACKENDS + "fleets:\n  b200s: {previous_names: [a4]}\n")
    Path(paths[1]).write_text(A4.format(nodes=3, team="ml").replace("name: a4", "name: b200s"))
    report = run(tmp_path, paths, baseline)
    assert not [c for c in report.changes if c.op in ("create", "delete", "replace")], ops(report)
    assert any("a4-node-0 -> b200s-node-0" in n for n in report.notes)
    # Without previous_names the same rename deletes and recreates everything.
    Path(paths[0]).write_text(BACKENDS)
    report = run(tmp_path, paths, baseline)
    kinds = {c.op for c in report.changes}
    assert kinds == {"create", "delete"}
    assert any("'a4' is not in the input files" in n for n in report.notes)


def _mutated(baseline: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(baseline)


def test_out_of_band_edits_in_the_export_are_each_found(tmp_path: Path,
                                                        baseline: dict[str, Any]) -> None:
    state = _mutated(baseline)
    res = state["deployment"]["resources"]
    # 1. an extra firewall rule someone added to the fleet's network
    rule = copy.deepcopy(next(r for r in res if r["urn"].endswith("::a4-bastion-ssh")))
    rule["urn"] = rule["urn"].replace("::a4-bastion-ssh", "::a4-debug-open")
    rule["id"] = "a4-debug-open-id"
    rule["inputs"]["sourceRanges"] = ["0.0.0.0/0"]
    res.append(rule)
    # 2. an instance whose machine type was changed
    node = next(r for r in res if r["urn"].endswith("::trainer-lt"))
    node["inputs"]["instanceType"] = "p4d.24xlarge"
    # 3. a subnet that was deleted
    res[:] = [r for r in res if not r["urn"].endswith("::a4-roce-5")]
    # Edits to the state itself (not through `pulumi up`) leave the recorded input digests
    # as they were, so only --full compares these fleets again.
    assert run(tmp_path, files(tmp_path), state).changes == ()
    report = run(tmp_path, files(tmp_path), state, full=True)
    found = {(c.name, c.op) for c in report.changes}
    assert ("a4-debug-open", "delete") in found
    assert ("trainer-lt", "update") in found
    assert ("a4-roce-5", "create") in found
    lt = next(c for c in report.changes if c.name == "trainer-lt")
    assert [(p.path, p.old, p.new) for p in lt.properties] == [
        ("instanceType", "p4d.24xlarge", "p5.48xlarge")]
    assert lt.yaml_key == "resources (chosen offer)"


def test_cidr_change_replaces_networks(tmp_path: Path, baseline: dict[str, Any]) -> None:
    paths = files(tmp_path)
    Path(paths[0]).write_text(BACKENDS.replace("project_id: p1", "project_id: p1\n"
                                               "    cidr: 10.200.0.0/15"))
    report = run(tmp_path, paths, baseline)
    subnets = [c for c in report.changes if c.type == "gcp:compute/subnetwork:Subnetwork"
               and c.owner == "a4"]
    assert subnets and all(c.op == "replace" and "ipCidrRange" in c.reasons for c in subnets)
    assert all(c.yaml_key == "cidr (backends file)" for c in subnets)
    assert not [c for c in report.changes if c.owner == "trainer"]


def test_guards(tmp_path: Path, baseline: dict[str, Any]) -> None:
    paths = files(tmp_path, gateway=False)
    report = run(tmp_path, paths, baseline, GuardOptions(("delete",), (), None))
    assert any("delete of network gw1-net" in v for v in report.violations)
    report = run(tmp_path, paths, baseline, GuardOptions(("delete",), ("gw1*",), None))
    assert report.violations == ()
    report = run(tmp_path, files(tmp_path, nodes=1), baseline, GuardOptions((), (), 1))
    assert report.violations == ("2 instance(s) would be replaced or deleted; the limit is 1",)
    report = run(tmp_path, files(tmp_path, nodes=2), baseline, GuardOptions((), (), 1))
    assert report.violations == ()


def test_cli_exit_codes_and_formats(tmp_path: Path, baseline: dict[str, Any]) -> None:
    state = write_export(tmp_path / "state.json", baseline)
    same = files(tmp_path)
    r = CliRunner().invoke(cli, ["diff", "--state", state, *same])
    assert r.exit_code == 0, r.output
    assert "approximation of `pulumi preview`" in r.output
    fewer = files(tmp_path, nodes=2)
    r = CliRunner().invoke(cli, ["diff", "--state", state, "--format", "json", *fewer])
    assert r.exit_code == 7
    data = json.loads(r.stdout)
    assert data["summary"]["delete"] == 1 and data["exit_code"] == 7
    assert data["changes"][0]["yaml_key"] == "nodes"
    r = CliRunner().invoke(cli, ["diff", "--state", state, "--format", "markdown", *fewer])
    assert r.exit_code == 7 and "| **delete** | `a4-node-2` |" in r.output
    r = CliRunner().invoke(cli, ["diff", "--state", state, "--forbid", "delete",
                                 *files(tmp_path, gateway=False)])
    assert r.exit_code == 1 and "FORBIDDEN CHANGES" in r.output


def test_cli_bad_exports_and_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = files(tmp_path)
    broken = write(tmp_path, "broken.json", "{\"version\": 3, \"deployment\": ")
    assert main(["diff", "--state", broken, *paths]) == 1
    old = write(tmp_path, "old.json", json.dumps({"version": 1, "deployment": {}}))
    assert main(["diff", "--state", old, *paths]) == 1
    assert main(["diff", "--state", str(tmp_path / "missing.json"), *paths]) == 2
    assert main(["diff", *paths]) == 2
    assert main(["diff", "--state", broken, "--forbid", "explode", *paths]) == 2
    err = capsys.readouterr().err
    assert "not a stack export" in err and "not valid JSON" in err
    assert "unsupported version 1" in err
    assert "Traceback" not in err


def test_checkpoint_and_v4_layouts_are_read(baseline: dict[str, Any]) -> None:
    v4 = {**baseline, "version": 4, "features": ["refreshBeforeUpdate"]}
    assert len(parse_export(json.dumps(v4)).resources) == len(
        baseline["deployment"]["resources"])
    checkpoint = {"version": 3, "checkpoint": {"latest": baseline["deployment"]}}
    state = parse_export(json.dumps(checkpoint))
    assert state.stack == "dev" and state.project == "gpufleet"


def test_malformed_exports_never_crash(tmp_path: Path, baseline: dict[str, Any],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    paths = files(tmp_path)
    resources = baseline["deployment"]["resources"]
    values = st.none() | st.booleans() | st.integers() | st.text(max_size=6) | \
        st.lists(st.integers(), max_size=2) | st.dictionaries(st.text(max_size=4),
                                                              st.integers(), max_size=2)

    @settings(max_examples=40, deadline=None, database=None)
    @given(st.integers(0, len(resources) - 1),
           st.sampled_from(["urn", "type", "inputs", "outputs", "parent", "provider",
                            "dependencies", "protect", "id", "ignoreChanges"]), values)
    def run(index: int, key: str, value: Any) -> None:
        state = copy.deepcopy(baseline)
        state["deployment"]["resources"][index][key] = value
        export = tmp_path / "state.json"
        export.write_text(json.dumps(state))
        code = main(["diff", "--state", str(export), *paths])
        err = capsys.readouterr().err
        assert code in (0, 1, 7) and "internal error" not in err, (index, key, value, err)
    run()


def _old_gateway(state: dict[str, Any]) -> dict[str, Any]:
    """The export of a stack whose gateway gpufleet built as a VM (before dstack's own
    gateways): the VM and its protected static address under the gateway component."""
    old = copy.deepcopy(state)
    resources = old["deployment"]["resources"]
    gw = next(r for r in resources if r["type"] == "gpufleet:gcp:Gateway")
    gw["outputs"]["gpufleet_digest"] = "sha256:an-older-gpufleet"  # its plan has changed
    provider = next(r for r in resources if r["type"] == "pulumi:providers:gcp")
    prefix = gw["urn"].rsplit("::", 1)[0]
    for typ, name, protect in (("gcp:compute/instance:Instance", "gw1-vm", False),
                               ("gcp:compute/address:Address", "gw1-ip", True)):
        resources.append({
            "urn": f"{prefix}${typ}::{name}", "custom": True, "type": typ, "id": name,
            "parent": gw["urn"], "protect": protect,
            "provider": f"{provider['urn']}::{provider['id']}",
            "inputs": {"region": "us-west2", "addressType": "EXTERNAL",
                       "networkTier": "PREMIUM"} if protect else {"machineType": "e2-medium"},
            "outputs": {"name": name}})
    return old


def test_an_old_gateway_vm_goes_with_its_reason_and_its_address_can_stay(
        tmp_path: Path, baseline: dict[str, Any]) -> None:
    old = _old_gateway(baseline)
    report = run(tmp_path, files(tmp_path), old)
    gone = {c.name: c for c in report.changes if c.op == "delete"}
    assert sorted(gone) == ["gw1-ip", "gw1-vm"]
    assert all("dstack creates its own" in (c.cause or "") for c in gone.values())
    assert gone["gw1-ip"].protect and "old_address: keep" in gone["gw1-ip"].action
    assert "pulumi state unprotect '" in gone["gw1-ip"].action
    guarded = run(tmp_path, files(tmp_path), old, GuardOptions(("delete",), (), None))
    assert any("delete of address gw1-ip" in v for v in guarded.violations)
    kept = run(tmp_path, files(tmp_path, backends=BACKENDS + "gateways:\n  gw1: "
                               "{old_address: keep}\n"), old)
    assert [c.name for c in kept.changes if c.op == "delete"] == ["gw1-vm"]


def test_the_record_follows_the_stack_config(tmp_path: Path, baseline: dict[str, Any]) -> None:
    state = write_export(tmp_path / "state.json", baseline)
    stack = write(tmp_path, "Pulumi.dev.yaml", "config:\n  gpufleet:gateways:\n    gw1:\n"
                  "      project: gateway-gw1\n      backend: gcp\n      region: us-west2\n"
                  "      targets: [192.0.2.1, 192.0.2.2]\n")
    r = CliRunner().invoke(cli, ["diff", "--state", state, "--stack-config", stack,
                                 "--format", "json", *files(tmp_path)])
    assert r.exit_code == 7, r.output
    created = [c for c in json.loads(r.stdout)["changes"] if c["op"] == "create"]
    assert [(c["name"], c["type"]) for c in created] == [
        ("gw1-dns", "gcp:dns/recordSet:RecordSet")]
    # without the stack config the record stays pending: nothing changes
    r = CliRunner().invoke(cli, ["diff", "--state", state, "--cwd", str(tmp_path / "none"),
                                 *files(tmp_path)])
    assert r.exit_code == 0, r.output


# --- comparing inputs without copying them ------------------------------------------------

_KEYS = st.sampled_from(["a", "b", "c", "__defaults", "__provider",
                         "4dabf18193072939515e22adb298388d"])
_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2),
                    st.sampled_from(["x", "y", "1b47061264138c4ac30d75fd1eb44270", ""]))
_VALUES = st.recursive(_LEAVES, lambda kids: st.one_of(
    st.lists(kids, max_size=3), st.dictionaries(_KEYS, kids, max_size=4)), max_leaves=25)


def _reference_diff(old: Any, new: Any) -> list[tuple[str, Any, Any]]:
    """What diff_values gave before it stopped copying: both sides stripped of the
    bookkeeping first, then walked."""
    from gpufleet.review.changes import _equal, _strip_defaults, is_secret

    def walk(old: Any, new: Any, path: str) -> list[tuple[str, Any, Any]]:
        if isinstance(old, dict) and isinstance(new, dict):
            out = []
            for k in new:
                p = f"{path}.{k}" if path else str(k)
                if k not in old:
                    if new[k] not in (None, [], {}):
                        out.append((p, None, new[k]))
                else:
                    out += walk(old[k], new[k], p)
            return out
        if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
            return [c for i, (a, b) in enumerate(zip(old, new, strict=True))
                    for c in walk(a, b, f"{path}[{i}]")]
        if is_secret(old) or is_secret(new):
            return [(path, "[secret]", "[secret]")] if old != new else []
        return [] if _equal(old, new) else [(path, old, new)]
    return walk(_strip_defaults(old), _strip_defaults(new), "")


@settings(deadline=None, max_examples=400)
@given(_VALUES, _VALUES, st.booleans())
def test_diff_values_reports_what_the_stripped_comparison_reports(
        old: Any, new: Any, similar: bool) -> None:
    """diff_values walks the inputs as they stand (equal parts skipped, the engine's
    bookkeeping ignored where it lies) and reports exactly what stripping both sides and
    walking them reported (a near copy of ``old`` tries the paths where little differs)."""
    from gpufleet.review.changes import diff_values

    if similar and isinstance(old, dict):
        new = {**copy.deepcopy(old), "__defaults": ["a"], "c": new}
    assert diff_values(old, new) == _reference_diff(old, new)
