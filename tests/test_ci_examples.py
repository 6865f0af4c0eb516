"""The CI examples call gpufleet with commands and flags that exist."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
import yaml

from gpufleet.cli import cli

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / "examples" / "ci" / ".github" / "workflows").glob("*.yml"))


def _gpufleet_calls(text: str) -> list[list[str]]:
    calls = []
    for line in text.replace("\\\n", " ").splitlines():
        m = re.search(r"\bgpufleet\s+(\w.*)$", line)
        if m and not line.strip().startswith(("#", "name:", "- id")):
            calls.append(shlex.split(m.group(1).split(";")[0]))
    return calls


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_commands_exist(path: Path) -> None:
    data = yaml.safe_load(path.read_text())
    assert data["jobs"]
    calls = _gpufleet_calls(path.read_text())
    assert calls
    for args in calls:
        command = cli.get_command(click.Context(cli), args[0])
        assert command is not None, args
        known = {opt for p in command.params for opt in getattr(p, "opts", [])}
        flags = [a.split("=")[0] for a in args[1:] if a.startswith("--")]
        assert set(flags) <= known, (args, sorted(known))


def test_pre_commit_hook() -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hooks[0]["id"] == "gpufleet-validate"
    assert hooks[0]["entry"] == "gpufleet validate"
    assert "validate" in cli.list_commands(click.Context(cli))
