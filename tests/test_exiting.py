"""A process that ran the stack program, or a command, exits without the interpreter's last
walk over what it made (gpufleet/exiting.py): what is alive is frozen when the exit
handlers are done, the handler is registered once, and the program registers it on the
path `pulumi up` runs (it compiles its own stack config)."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpufleet import exiting

from planutil import ROOT, TEST_KEY, stack_config, write


def _registered(monkeypatch: pytest.MonkeyPatch) -> list[Callable[..., Any]]:
    """Exit handlers registered from now on, in a process that has registered none."""
    seen: list[Callable[..., Any]] = []
    monkeypatch.setattr(exiting, "_REGISTERED", [])
    monkeypatch.setattr(exiting.atexit, "register", seen.append)
    return seen


def test_the_handler_is_registered_once(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _registered(monkeypatch)
    exiting.freeze_at_exit()
    exiting.freeze_at_exit()
    assert seen == [gc.freeze]


def test_what_is_alive_is_frozen_after_the_other_exit_handlers() -> None:
    """A handler registered before it (so run after it) sees the objects frozen; one
    registered after it (run before) does not yet."""
    script = ("import atexit, gc\n"
              "atexit.register(lambda: print('after', gc.get_freeze_count() > 0))\n"
              "from gpufleet.exiting import freeze_at_exit\n"
              "freeze_at_exit()\n"
              "atexit.register(lambda: print('before', gc.get_freeze_count() > 0))\n"
              "kept = [[i] for i in range(1000)]\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.split("\n")[:2] == ["before False", "after True"]


def test_the_program_registers_it_where_it_compiles_its_own_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpufleet.cli import main
    from gpufleet.components import program
    from gpufleet.components.run import harness, offline

    fleet = write(tmp_path, "f.yml", "type: fleet\nname: c1\nnodes: 1\nbackends: [gcp]\n"
                  "regions: [us-central1]\nresources:\n  gpu: L4\n")
    b = write(tmp_path, "b.yml", "backends:\n  - type: gcp\n    project_id: p1\n")
    assert main(["lock", fleet, b]) == 0
    config = {**stack_config([fleet, b]), "gpufleet:sshPublicKey": TEST_KEY}
    seen = _registered(monkeypatch)
    run = harness.run_program(program.main, config,
                              harness.StrictMocks(offline.INVOKES, offline.outputs))
    assert run.registrations and seen == [gc.freeze]
