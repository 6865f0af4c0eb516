"""Hints that say what is true: no `spot_policy: auto` advice when spot is allowed, exact
sizes explained, `validate` with no PATH reading only dstack/gpufleet files, rules naming the
flag that turns them down, and a two-label domain's zone described as what it is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpufleet.cli import cli
from gpufleet.views.plan import render_plan_text

from planutil import EXAMPLES, TEST_KEY, plan_files, write


def _offers(tmp: Path, body: str) -> str:
    f = write(tmp, "f.dstack.yml", "type: fleet\nname: f1\nnodes: 1\n" + body)
    r = CliRunner().invoke(cli, ["offers", f])
    assert r.exit_code == 1, r.output
    return r.stderr


def test_no_spot_advice_when_spot_is_already_allowed(tmp_path: Path) -> None:
    err = _offers(tmp_path, "spot_policy: auto\nmax_price: 0.01\nresources:\n  gpu: H100\n")
    assert "error[O001]" in err and "spot is already allowed: `spot_policy: auto`" in err
    assert "or allow spot" not in err
    err = _offers(tmp_path, "spot_policy: on-demand\nmax_price: 0.01\nresources:\n  gpu: H100\n")
    assert "raise `max_price` or allow spot (`spot_policy: auto`)" in err


def test_an_exact_memory_size_is_explained(tmp_path: Path) -> None:
    err = _offers(tmp_path, "resources:\n  gpu: A10G\n  memory: 24GB\n")
    assert "error[O002]" in err
    assert "`memory: 24GB` means exactly `24GB` in dstack's grammar; write a range such as " \
           "`memory: 24GB..` for at least that much" in err
    assert "means exactly" not in _offers(tmp_path, "resources:\n  gpu: Z9000\n")


def test_validate_without_a_path_reads_only_dstack_and_gpufleet_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "fleets").mkdir()
    write(tmp_path / "fleets", "a.dstack.yml", "type: fleet\nname: a1\nnodes: 1\n")
    write(tmp_path, "train.yml", "type: fleet\nname: b1\nnodes: 2\n")  # by content
    write(tmp_path, "backends.yml", "backends:\n  - type: aws\n")
    write(tmp_path, ".pre-commit-hooks.yaml", "- id: gpufleet\n  entry: gpufleet validate\n")
    (tmp_path / "stacks").mkdir()
    write(tmp_path / "stacks", "Pulumi.yaml", "name: gpufleet\nruntime: python\n")
    write(tmp_path, "ci.yml", "on: push\njobs: {}\n")
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["validate"])
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == ("ok: 3 file(s), 2 fleet(s), 0 gateway(s), 0 profile(s), "
                                "1 backend config(s); skipped 3 YAML file(s) that are not "
                                "fleet, gateway, profiles or backends files (name them to "
                                "check them anyway)")
    # hidden folders are not searched; named, a file is read whatever it holds
    r = CliRunner().invoke(cli, ["validate", "ci.yml"])
    assert r.exit_code == 1 and "L007" in r.output


def test_policy_list_names_the_flag_that_turns_a_rule_down() -> None:
    r = CliRunner().invoke(cli, ["policy", "list"])
    assert r.exit_code == 0
    assert "(it is by default)" not in r.stdout
    assert 'to silence it, `--policy-config FILE` with {"dns-ttl": "disabled"}' in r.stdout
    assert '`--policy-config FILE` with {"aws-imdsv2": "advisory"} (or "disabled")' in r.stdout


def test_up_help_lists_the_capacity_errors_itself() -> None:
    from gpufleet.live import CAPACITY_ERRORS

    text = CliRunner().invoke(cli, ["up", "--help"]).stdout
    assert "in the README" not in text
    codes = [c.code for c in CAPACITY_ERRORS if c.code.isidentifier()]  # not the messages
    assert len(codes) >= 8
    for code in codes:
        assert code.split("_WITH_DETAILS")[0] in text, code


def test_a_two_label_domain_is_its_own_zone(tmp_path: Path) -> None:
    backends = write(tmp_path, "backends.yml", "backends:\n  - type: aws\n    ssh_cidrs: "
                     f"[203.0.113.0/24]\naccess:\n  ssh_public_key: {TEST_KEY}\n")
    gw = write(tmp_path, "g.yml", "type: gateway\nname: gw1\nbackend: aws\nregion: us-east-1\n"
               "domain: example.org\n")
    text = render_plan_text(plan_files([gw, backends]))
    assert "the domain's parent" not in text
    assert "zone:     example.org, the domain itself (it has no parent below the top-level " \
           "domain)" in text
    gw = write(tmp_path, "g.yml", "type: gateway\nname: gw1\nbackend: aws\nregion: us-east-1\n"
               "domain: gpu.example.org\n")
    assert "zone:     example.org, the domain's parent" in render_plan_text(
        plan_files([gw, backends]))


def test_examples_still_validate_from_their_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EXAMPLES)
    r = CliRunner().invoke(cli, ["validate"])
    assert r.exit_code == 0 and "skipped" not in r.stdout, r.output
    assert os.getcwd() == str(EXAMPLES)


def test_validate_without_a_path_reads_a_settings_only_backends_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpufleet.input.spec import SETTINGS_KEYS

    for key in sorted(SETTINGS_KEYS):  # every key the schema takes as a backends file
        folder = tmp_path / key
        folder.mkdir()
        least = {"reservations": "reservations: []\n",
                 "control_plane": "control_plane: {url: 'http://10.0.0.5:3000'}\n"}
        write(folder, "settings.yml", least.get(key, f"{key}: {{}}\n"))
        monkeypatch.chdir(folder)
        r = CliRunner().invoke(cli, ["validate"])
        assert "skipped" not in r.output and "ok: 1 file(s)" in r.stdout, (key, r.output)
