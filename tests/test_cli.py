"""CLI behaviour: exit codes, text and JSON output, schema printing, and that `validate`
never imports Pulumi."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpufleet.cli import cli, main

ROOT = Path(__file__).resolve().parent.parent
INVALID = ROOT / "tests" / "cases" / "invalid"


def test_validate_examples_exit_0() -> None:
    r = CliRunner().invoke(cli, ["validate", str(ROOT / "examples")])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("ok: 10 file(s), 5 fleet(s), 3 gateway(s)")


def test_validate_invalid_exit_1_with_location() -> None:
    r = CliRunner().invoke(cli, ["validate", str(INVALID / "unknown-key-resources.yml")])
    assert r.exit_code == 1
    assert "unknown-key-resources.yml:6:3: error[S001]: unknown key 'memroy' in resources" \
        in r.output
    assert "hint: did you mean 'memory'?" in r.output
    assert "\x1b[" not in r.output


def test_validate_collects_errors_of_all_files_sorted() -> None:
    files = [str(INVALID / n) for n in ("tag-key.yml", "blocks-zero.yml", "range-order.yml")]
    r = CliRunner().invoke(cli, ["validate", "--format", "json", *files])
    assert r.exit_code == 1
    records = json.loads(r.output)
    assert [Path(x["file"]).name for x in records] == [
        "blocks-zero.yml", "range-order.yml", "tag-key.yml"]
    assert set(records[0]) == {"file", "line", "column", "path", "code", "severity",
                               "message", "hint"}
    assert records[1]["path"] == "$.resources.cpu" and records[1]["code"] == "F002"


def test_json_output_is_an_empty_list_when_valid() -> None:
    r = CliRunner().invoke(cli, ["validate", "--format", "json",
                                 str(ROOT / "examples" / "fleets" / "gcp-a4.dstack.yml")])
    assert r.exit_code == 0 and json.loads(r.output) == []


def test_warnings_alone_exit_0() -> None:
    r = CliRunner().invoke(cli, ["validate", str(INVALID / "dstack-task.yml")])
    assert r.exit_code == 0 and "warning[L008]" in r.output


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["validate", str(tmp_path / "missing.yml")]) == 2
    assert main(["validate", "--format", "xml", str(ROOT / "examples")]) == 2
    assert main(["validate", str(tmp_path)]) == 2  # a folder without YAML files
    assert main(["nosuchcommand"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_schema_command_prints_the_schema() -> None:
    r = CliRunner().invoke(cli, ["schema", "fleet"])
    assert r.exit_code == 0
    assert json.loads(r.output)["title"] == "gpufleet fleet"


def test_validate_does_not_import_pulumi() -> None:
    code = (
        "import sys\n"
        "from gpufleet.cli import main\n"
        f"rc = main(['validate', {str(ROOT / 'examples')!r}])\n"
        "heavy = sorted(m for m in sys.modules if m == 'pulumi' or m.startswith('pulumi')"
        " or m.startswith('gpufleet.components') or m == 'gpuhunt')\n"
        "print('HEAVY', heavy)\n"
        "sys.exit(rc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=False)
    assert out.returncode == 0, out.stderr
    assert "HEAVY []" in out.stdout


def test_core_modules_do_not_import_pulumi() -> None:
    code = (
        "import sys, importlib, pkgutil, gpufleet\n"
        "for m in pkgutil.iter_modules(gpufleet.__path__):\n"
        "    importlib.import_module('gpufleet.' + m.name)\n"
        "print(sorted(m for m in sys.modules if m.startswith('pulumi')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"
