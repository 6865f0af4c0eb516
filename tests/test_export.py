"""`gpufleet export dstack`: SSH fleet files that validate and a server config naming exactly
the networks the plan created, from a stack export or `pulumi stack output --json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from exportutil import export

from gpufleet.cli import main
from gpufleet.compile.compiler import compile_inputs
from gpufleet.input.schema_files import validator
from gpufleet.input.validate import validate_paths
from gpufleet.offers.catalog import load_catalog

from planutil import TEST_KEY, write

BACKENDS = (f"access:\n  ssh_public_key: {TEST_KEY}\nbackends:\n  - type: gcp\n"
            "    project_id: p1\n    ssh_cidrs: [198.51.100.0/24]\n  - type: aws\n"
            "    ssh_cidrs: [198.51.100.0/24]\n  - type: azure\n    tenant_id: t1\n"
            "    subscription_id: s1\n    ssh_cidrs: [198.51.100.0/24]\n")
FLEETS = (
    "type: fleet\nname: a4\nnodes: 2\nplacement: cluster\nbackends: [gcp]\nspot_policy: auto\n"
    "resources:\n  gpu: B200:8\n---\n"
    "type: fleet\nname: mega\nnodes: 0..2\nplacement: cluster\nbackends: [gcp]\n"
    "spot_policy: auto\ninstance_types: [a3-megagpu-8g]\n---\n"
    "type: fleet\nname: p5\nnodes: 3\nplacement: cluster\nbackends: [aws]\n"
    "regions: [us-east-1]\nresources:\n  gpu: H100:8\n---\n"
    "type: fleet\nname: nc\nnodes: 1\nbackends: [azure]\nresources:\n  gpu: A100:80GB:1\n---\n"
    "type: fleet\nname: nets-only\nnodes: 0..2\nbackends: [gcp]\nspot_policy: auto\n"
    "resources:\n  gpu: B200:8\n")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("export")
    files = [write(tmp, "b.yml", BACKENDS), *(write(tmp, f"f{i}.yml", doc)
                                             for i, doc in enumerate(FLEETS.split("---\n")))]
    compiled = compile_inputs(validate_paths(files).inputs, load_catalog())
    state = export(files)
    return {"tmp": tmp, "state": state, "plans": {p.name: p for p in compiled.plans},
            "outputs": next(r for r in state["deployment"]["resources"]
                            if r["type"] == "pulumi:pulumi:Stack")["outputs"]}


def run_export(tmp: Path, *args: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    out = tmp / "out"
    code = main(["export", "dstack", *args, "--out", str(out)])
    texts = {p.name: p.read_text() for p in sorted(out.glob("*"))} if out.exists() else {}
    config = yaml.safe_load(texts.get("dstack-server-config.yml", "{}") or "{}")
    return code, config, texts


def test_export_from_a_state_file(stack: dict[str, Any], tmp_path: Path) -> None:
    state = write(tmp_path, "state.json", json.dumps(stack["state"]))
    code, config, texts = run_export(tmp_path, "--state", state)
    assert code == 0
    assert sorted(texts) == ["a4-fabric.dstack.yml", "a4.dstack.yml",
                             "dstack-server-config.yml", "nc.dstack.yml",
                             "p5.dstack.yml"]  # mega and nets-only: networks for dstack
    assert validate_paths([str(tmp_path / "out" / n) for n in texts
                           if n.endswith(".dstack.yml") and "-fabric" not in n]).diagnostics == []
    assert list(validator("dstack-server-config").iter_errors(config)) == []
    projects = {p["name"]: p["backends"][0] for p in config["projects"]}
    plans = stack["plans"]
    for name in ("a4", "mega"):
        created = {n.role: n.name for n in plans[name].networks}
        gcp = projects[name]
        assert gcp["vpc_name"] == f"{created['main']}-mock"
        assert gcp["extra_vpcs"] == [f"{created[r]}-mock" for r in sorted(created)
                                     if r.startswith("gpu-")]
        assert gcp.get("roce_vpcs", []) == ([f"{created['roce']}-mock"] if "roce" in created
                                            else [])
    assert (len(projects["a4"]["extra_vpcs"]), len(projects["a4"]["roce_vpcs"])) == (1, 1)
    assert (len(projects["mega"]["extra_vpcs"]), "roce_vpcs" in projects["mega"]) == (8, False)
    assert projects["p5"]["vpc_ids"] == {"us-east-1": "p5-vpc-id"}
    assert projects["nc"]["tenant_id"] == "t1" and projects["nc"]["subscription_id"] == "s1"
    assert projects["nets-only"]["vpc_name"] == "nets-only-net-mock"  # the networks-only case


def test_ssh_fleet_file_reaches_the_nodes_through_the_bastion(stack: dict[str, Any],
                                                             tmp_path: Path) -> None:
    outputs = write(tmp_path, "outputs.json", json.dumps(stack["outputs"]))
    code, _, texts = run_export(tmp_path, "--outputs", outputs, "--identity-file",
                                "~/.ssh/team")
    assert code == 0
    a4 = yaml.safe_load(texts["a4.dstack.yml"])
    assert a4["type"] == "fleet" and a4["name"] == "a4" and a4["placement"] == "cluster"
    cfg = a4["ssh_config"]
    assert cfg["user"] == "ubuntu" and cfg["identity_file"] == "~/.ssh/team"
    assert cfg["proxy_jump"] == {"hostname": "mock-address-of-a4-bastion-ip",
                                 "user": "ubuntu", "identity_file": "~/.ssh/team"}
    assert cfg["network"] == stack["plans"]["a4"].networks[0].subnets[0].cidr
    assert cfg["hosts"] == [n["private_ip"] for n in stack["outputs"]["a4"]["nodes"]]
    nc = yaml.safe_load(texts["nc.dstack.yml"])
    assert "placement" not in nc and nc["ssh_config"]["user"] == "azureuser"


def test_files_it_did_not_write_are_never_replaced(stack: dict[str, Any], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    state = write(tmp_path, "state.json", json.dumps(stack["state"]))
    out = tmp_path / "out"
    out.mkdir()
    (out / "a4.dstack.yml").write_text("type: fleet\nname: mine\n")
    code, _, texts = run_export(tmp_path, "--state", state)
    assert code == 2 and "was not written by gpufleet; nothing was written" in \
        capsys.readouterr().err
    assert sorted(texts) == ["a4.dstack.yml"] and texts["a4.dstack.yml"].endswith("mine\n")
    assert run_export(tmp_path, "--state", state, "--force")[0] == 0
    assert run_export(tmp_path, "--state", state)[0] == 0  # its own files: replaced


def test_bad_sources_are_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["export", "dstack", "--out", str(tmp_path)]) == 2
    bad = write(tmp_path, "bad.json", "{not json")
    assert main(["export", "dstack", "--state", bad, "--out", str(tmp_path / "o")]) == 1
    assert "not a stack export" in capsys.readouterr().err
    empty = write(tmp_path, "empty.json", "{}")
    assert main(["export", "dstack", "--outputs", empty, "--out", str(tmp_path / "o")]) == 1
    assert "no gpufleet fleets" in capsys.readouterr().err
    monkeypatch.setattr("shutil.which", lambda _name: None)
    assert main(["export", "dstack", "--stack", "dev", "--out", str(tmp_path / "o")]) == 2
    assert not (tmp_path / "o").exists()


def test_malformed_outputs_are_refused_and_nothing_is_written(
        stack: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    base = stack["outputs"]["a4"]
    values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                          lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                          max_leaves=5)

    @settings(max_examples=60, deadline=None, database=None)
    @given(st.sampled_from(sorted(base)), values)
    def run(key: str, value: Any) -> None:
        broken = {"a4": {**base, key: value}}
        path = write(tmp_path, "outputs.json", json.dumps(broken))
        out = tmp_path / "never"
        code = main(["export", "dstack", "--outputs", path, "--out", str(out)])
        err = capsys.readouterr().err
        assert code in (0, 1) and "internal error" not in err, (key, value, err)
        if code == 1:
            assert not out.exists()
        else:
            import shutil
            shutil.rmtree(out)
    run()


@pytest.mark.parametrize(("output", "key"), [("tenant_id", "tenant_id"),
                                              ("scope", "subscription_id")])
def test_an_azure_key_missing_from_the_outputs_names_the_fleet_and_the_key(
        stack: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        output: str, key: str) -> None:
    """Outputs of a stack deployed before `validate` required the key (B019)."""
    outputs = {**stack["outputs"], "nc": {**stack["outputs"]["nc"], output: None}}
    path = write(tmp_path, "outputs.json", json.dumps(outputs))
    code, _, texts = run_export(tmp_path, "--outputs", path)
    err = capsys.readouterr().err
    assert code == 1 and texts == {}
    assert f"fleet 'nc': its azure backends entry set no `{key}` when it was deployed" in err


def test_a_shared_vpc_fleet_hands_dstack_its_host_project(tmp_path: Path) -> None:
    backends = (f"access:\n  ssh_public_key: {TEST_KEY}\nbackends:\n  - type: gcp\n"
                "    project_id: svc\n    vpc_project_id: host\n    vpc_name: shared\n")
    files = [write(tmp_path, "b.yml", backends),
             write(tmp_path, "f.yml", "type: fleet\nname: sv\nnodes: 1\nbackends: [gcp]\n"
                   "resources:\n  gpu: L4:1\n")]
    state = write(tmp_path, "state.json", json.dumps(export(files)))
    code, config, _ = run_export(tmp_path, "--state", state)
    assert code == 0
    gcp = config["projects"][0]["backends"][0]
    assert (gcp["project_id"], gcp["vpc_project_id"]) == ("svc", "host")
    assert gcp["vpc_name"] == "shared"  # the host network, looked up by its name


def test_declared_dstack_credentials_are_kept_by_reference_never_inline(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A key file's path goes into the server config as the backends file gives it; inline
    secrets never go into a file gpufleet writes - the project keeps the default and a note
    names the keys left out (issue 53, item 15). The config parses with dstack's models
    (the conformance test's oracle reads every server config export writes)."""
    key = tmp_path / "gcp.json"  # dstack reads the key file when it loads the config
    key.write_text(json.dumps({"type": "service_account", "project_id": "p1"}))
    backends = BACKENDS.replace(
        "    project_id: p1\n",
        f"    project_id: p1\n    creds: {{type: service_account, filename: {key}}}\n"
    ).replace("  - type: aws\n", "  - type: aws\n    creds: {type: access_key, access_key: "
              "AKIAEXAMPLE, secret_key: canary-secret-value}\n")
    files = [write(tmp_path, "b.yml", backends),
             write(tmp_path, "f0.yml", FLEETS.split("---\n")[0]),
             write(tmp_path, "f2.yml", FLEETS.split("---\n")[2])]
    state = write(tmp_path, "state.json", json.dumps(export(files)))
    assert "canary-secret-value" not in Path(state).read_text()
    code, config, texts = run_export(tmp_path, "--state", state)
    err = capsys.readouterr().err
    assert code == 0, err
    backends_of = {p["name"]: p["backends"][0] for p in config["projects"]}
    assert backends_of["a4"]["creds"] == {"type": "service_account", "filename": str(key)}
    assert backends_of["p5"]["creds"] == {"type": "default"}
    assert "fleet p5: the backends file gives dstack aws credentials of type access_key " \
           "inline (access_key, secret_key)" in err
    assert not any("canary-secret-value" in t for t in texts.values())
    assert not any("AKIAEXAMPLE" in t for t in texts.values())
    from test_conformance import oracle

    verdict = oracle({"cfg": texts["dstack-server-config.yml"]}, {"cfg": "server-config"})
    assert verdict["cfg"]["ok"], verdict["cfg"]["error"]
