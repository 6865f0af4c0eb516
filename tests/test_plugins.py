"""A cloud from outside the package: toycloud (tests/toycloud/) registers through the entry-point
groups `gpufleet.backends` and `gpufleet.components` of its own distribution and is
validated, offered and planned through the CLI, in a process of its own, without any shared
module of gpufleet naming it; a plugin gpufleet cannot use is refused by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpufleet.backends import plugins
from gpufleet.backends.plugin import Plugin, PluginError, Unsupported

ROOT = Path(__file__).resolve().parent.parent
TOY = Path(__file__).resolve().parent / "toycloud"
BACKENDS = ("access:\n  ssh_public_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGtoyKeyForTests "
            "toy\nbackends:\n  - type: toycloud\n    regions: [toy-north-1, toy-south-1]\n"
            "    ssh_cidrs: [198.51.100.0/24]\n")
FLEET = "type: fleet\nname: toy\nnodes: 3\nresources:\n  gpu: H100:8\nbackends: [toycloud]\n"


def gpufleet(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(TOY)}
    return subprocess.run([sys.executable, "-m", "gpufleet", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    (tmp_path / "backends.yml").write_text(BACKENDS)
    (tmp_path / "toy.yml").write_text(FLEET)
    return tmp_path


def test_a_cloud_from_another_package_is_validated_offered_and_planned(toy: Path) -> None:
    r = gpufleet(toy, "validate", ".")
    assert r.returncode == 0, r.stderr
    r = gpufleet(toy, "offers", "toy.yml")
    assert r.returncode == 0, r.stderr
    assert "toycloud  toy-south-1" in r.stdout and "$18.2500" in r.stdout  # its own catalog
    r = gpufleet(toy, "plan", ".", "--format", "json")
    assert r.returncode == 0, r.stderr
    plan: dict[str, Any] = json.loads(r.stdout)
    (fleet,) = plan["fleets"]
    assert (fleet["backend"], fleet["region"], fleet["instance_type"]) == \
        ("toycloud", "toy-south-1", "toy-8xh100")
    types = sorted(res["type"] for res in plan["resources"])
    assert types.count("toycloud:index:Machine") == 3  # two registered, one derived
    assert "toycloud:index:Firewall" in types
    firewall = next(res for res in plan["resources"] if res["type"].endswith(":Firewall"))
    assert firewall["inputs"]["ssh_cidrs"] == ["198.51.100.0/24"]
    assert plan["costs"]["after_per_hour"] == pytest.approx(3 * 18.25)


def test_the_toy_cloud_is_named_by_no_shared_module() -> None:
    found = [str(p.relative_to(ROOT)) for folder in ("gpufleet", "components", "schemas",
                                                     "policy", "stacks")
             for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix in
             (".py", ".json", ".yaml", ".yml") and "toycloud" in p.read_text()]
    assert found == []


def test_without_the_plugin_its_backend_is_unknown(toy: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-m", "gpufleet", "validate", "."], cwd=toy, env=env,
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 1 and "toycloud" in r.stdout + r.stderr


class _EntryPoint:
    def __init__(self, name: str, value: object, fails: bool = False) -> None:
        self.name, self.value, self._obj, self.fails = name, f"pkg:{name}", value, fails

    def load(self) -> object:
        if self.fails:
            raise ImportError("No module named 'pkg'")
        return self._obj


@pytest.mark.parametrize(("extra", "says"), [
    (_EntryPoint("broken", None, fails=True), "'broken' (pkg:broken) does not load"),
    (_EntryPoint("odd", object()), "is not the Plugin of backend 'odd'"),
    (_EntryPoint("half", "half"), "declares nothing for role(s) topology"),
])
def test_a_plugin_gpufleet_cannot_use_is_refused_by_name(monkeypatch: pytest.MonkeyPatch,
                                                         extra: _EntryPoint, says: str) -> None:
    import dataclasses

    from gpufleet.backends import entrypoints

    own = entrypoints.entry_points("gpufleet.backends")
    if extra.name == "half":  # every role but one
        base = plugins()["lambda"]
        roles = {k: v for k, v in base.roles.items() if k != "topology"}
        extra._obj = Plugin(dataclasses.replace(base.traits, name="half"), roles)
    monkeypatch.setattr(entrypoints, "entry_points",
                        lambda group: [*own, extra] if group == "gpufleet.backends" else [])
    plugins.cache_clear()
    try:
        with pytest.raises(PluginError, match=says.replace("(", r"\(").replace(")", r"\)")):
            plugins()
    finally:
        plugins.cache_clear()


def test_an_unsupported_role_says_why() -> None:
    from gpufleet.backends import role_of
    from gpufleet.backends.plugin import RoleUnsupported
    from gpufleet.live.probes import TOPOLOGY

    declared = plugins()["lambda"].roles["topology"]
    assert isinstance(declared, Unsupported)
    with pytest.raises(RoleUnsupported, match="no network topology"):
        role_of("lambda", TOPOLOGY)


def test_a_broken_plugin_package_stops_the_cli_with_its_name_not_a_traceback(
        toy: Path, tmp_path: Path) -> None:
    dist = tmp_path / "site" / "bad-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: bad\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[gpufleet.backends]\nbad = nosuchmodule:PLUGIN\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    r = subprocess.run([sys.executable, "-m", "gpufleet", "plan", str(ROOT / "examples")],
                       cwd=toy, env=env, capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "plugin 'bad' (nosuchmodule:PLUGIN) does not load" in r.stderr


@pytest.mark.parametrize("group", ["gpufleet.backends", "gpufleet.components",
                                   "console_scripts", "pytest11"])
def test_the_entry_point_reader_reads_what_importlib_metadata_reads(group: str) -> None:
    """gpufleet reads entry points itself (importlib.metadata's import cost validate 11 ms):
    the same names and values as the standard library's reader, here and with the toy's
    distribution first on the path."""
    import importlib.metadata

    from gpufleet.backends.entrypoints import entry_points

    def ours(paths: list[str] | None = None) -> list[tuple[str, str]]:
        return sorted((e.name, e.value) for e in entry_points(group, paths))

    def stdlib(paths: list[str] | None = None) -> list[tuple[str, str]]:
        found = importlib.metadata.distributions(path=paths) if paths is not None \
            else importlib.metadata.distributions()
        seen, out = set(), []
        for d in found:
            name = d.metadata["Name"].lower().replace("-", "_")
            if name in seen:
                continue
            seen.add(name)
            out += [(e.name, e.value) for e in d.entry_points if e.group == group]
        return sorted(out)

    assert ours() == sorted((e.name, e.value)
                            for e in importlib.metadata.entry_points(group=group))
    with_toy = [str(TOY), *sys.path]
    assert ours(with_toy) == stdlib(with_toy)
    if group.startswith("gpufleet."):
        assert ("toycloud", "toycloud:PLUGIN" if group.endswith("backends")
                else "toycloud.components") in ours(with_toy)


def test_the_policy_pack_reads_a_plugins_types() -> None:
    """With toycloud installed, its machine joins the types a gateway must not build; without
    it, the pack's lists do not name it."""
    code = ("from gpufleet.policy.tokens import GATEWAY_MACHINES as G; "
            "print('toycloud:index:Machine' in G)")
    with_toy = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(TOY)}, check=True)
    alone = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
                           check=True)
    assert (with_toy.stdout.strip(), alone.stdout.strip()) == ("True", "False")


def test_the_version_reader_reads_what_importlib_metadata_reads(tmp_path: Path) -> None:
    """The run cache's key holds the SDKs' versions, read without importlib.metadata: the
    same versions, "" for what is not installed, the first of a name on the path winning,
    an old egg-info that is a file read too."""
    import importlib.metadata

    from gpufleet.backends.entrypoints import versions
    from gpufleet.cli.runcache import SDKS

    names = [*SDKS, "PyYAML", "click", "jsonschema", "gpufleet", "no-such-dist"]

    def stdlib(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return ""

    assert versions(names) == {n: stdlib(n) for n in names}
    assert versions(["pulumi"])["pulumi"]
    shadow = tmp_path / "pulumi-0.0.1.dist-info"
    shadow.mkdir()
    (shadow / "METADATA").write_text("Metadata-Version: 2.1\nName: pulumi\nVersion: 0.0.1\n")
    (tmp_path / "old_thing-1.2.egg-info").write_text("Name: old-thing\nVersion: 1.2\n\nbody")
    found = versions(["pulumi", "old.thing"], [str(tmp_path), *sys.path])
    assert found == {"pulumi": "0.0.1", "old.thing": "1.2"}
    paths = [str(tmp_path), *sys.path]
    assert found == {n: next(importlib.metadata.distributions(name=n, path=paths)).version
                     for n in found}
