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
    assert r.output.startswith("ok: 14 file(s), 7 fleet(s), 3 gateway(s)")
    assert r.output.rstrip().endswith("1 lock file(s)")


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
        " or m.startswith('gpufleet.components') or m == 'gpuhunt'"
        # the later stages load when a command needs them, so `validate` starts fast
        " or m.startswith(('gpufleet.offers', 'gpufleet.compile', 'gpufleet.review',"
        " 'gpufleet.views'))"
        # the schema pass is gpufleet's own (schemacheck): jsonschema is the reference
        " or m.startswith(('jsonschema', 'referencing')) or m == 'importlib.resources')\n"
        "print('HEAVY', heavy)\n"
        "sys.exit(rc)\n"
    )
    assert "HEAVY []" in _python(code)


def test_core_modules_do_not_import_pulumi() -> None:
    code = (
        "import sys, importlib, pkgutil, gpufleet\n"
        "for m in pkgutil.walk_packages(gpufleet.__path__, 'gpufleet.'):\n"
        "    if not m.name.endswith('__main__'):\n"
        "        importlib.import_module(m.name)\n"
        "print(sorted(m for m in sys.modules if m.startswith('pulumi')))\n"
        "print(len([m for m in sys.modules if m.startswith('gpufleet.')]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    heavy, count = out.stdout.split()
    assert heavy == "[]"
    assert int(count) >= 30  # every stage's modules were imported, not just the top level


def test_offers_text_table_and_totals() -> None:
    r = CliRunner().invoke(cli, ["offers", str(ROOT / "examples"), "--fleet", "a4"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].startswith("catalog: bundled catalog")
    header = next(ln for ln in lines if "BACKEND" in ln).split()
    assert header == ["#", "BACKEND", "REGION", "ZONE", "INSTANCE", "RESOURCES", "SPOT", "PRICE"]
    assert any("a4-highgpu-8g" in ln and "224xCPU, 3968GB, 8xB200 (180GB)" in ln for ln in lines)
    assert any(ln.strip().startswith("total at target: 2 node(s)") for ln in lines)


def test_offers_json_contract() -> None:
    r = CliRunner().invoke(cli, ["offers", "--format", "json", "--max", "3",
                                 str(ROOT / "examples")])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    fleets = {f["fleet"]: f for f in data["fleets"]}
    assert set(fleets) == {"a4", "h100-train", "nd-h100", "a100-any", "dev-l4", "lambda-h100",
                           "a3mega"}
    offer = fleets["a4"]["offers"][0]
    for key in ("backend", "region", "zone", "instance_type", "gpu_name", "gpu_count",
                "gpu_memory_gib", "vcpus", "memory_gib", "spot", "price"):
        assert key in offer
    assert len(fleets["a100-any"]["offers"]) == 3
    prices = [o["price"] for o in fleets["a100-any"]["offers"]]
    assert prices == sorted(prices)
    a4 = fleets["a4"]
    assert a4["total_per_hour"] == pytest.approx(2 * offer["price"], abs=1e-3)


def test_offers_no_offer_exit_1_with_located_error(tmp_path: Path) -> None:
    f = tmp_path / "f.yml"
    f.write_text("type: fleet\nname: a4\nnodes: 2\nbackends: [gcp]\nspot_policy: auto\n"
                 "max_price: 30\nresources:\n  gpu: B200:8\n")
    r = CliRunner().invoke(cli, ["offers", str(f)])
    assert r.exit_code == 1
    assert "f.yml:6:1: error[O001]: no offer for fleet 'a4': 11 offer(s) match B200:8 but " \
           "none is under max_price 30 (cheapest: gcp " in r.output


def test_offers_usage_errors() -> None:
    assert main(["offers", str(ROOT / "examples"), "--fleet", "nope"]) == 2
    assert main(["offers", str(ROOT / "examples"), "--profile", "nope"]) == 2
    assert main(["offers", str(ROOT / "examples" / "gateways")]) == 2


def test_offers_refuses_invalid_input() -> None:
    r = CliRunner().invoke(cli, ["offers", str(INVALID / "range-order.yml")])
    assert r.exit_code == 1 and "error[F002]" in r.output


def test_catalog_listing() -> None:
    r = CliRunner().invoke(cli, ["catalog", "--gpu", "b200", "--backend", "gcp"])
    assert r.exit_code == 0, r.output
    row = next(ln for ln in r.output.splitlines() if ln.startswith("B200"))
    assert row.split()[:4] == ["B200", "180GB", "gcp", "8"]
    r = CliRunner().invoke(cli, ["catalog", "--format", "json"])
    gpus = {(g["gpu"], g["backend"]) for g in json.loads(r.output)["gpus"]}
    assert ("H100", "aws") in gpus and ("L4", "gcp") in gpus
    r = CliRunner().invoke(cli, ["catalog", "--gpu", "H10"])
    assert r.exit_code == 1 and "did you mean" in r.output


def test_python_dash_m_runs_the_cli() -> None:
    out = subprocess.run([sys.executable, "-m", "gpufleet", "validate", str(ROOT / "examples")],
                         capture_output=True, text=True, cwd=ROOT, check=False)
    assert out.returncode == 0 and out.stdout.startswith("ok: ")


def test_what_a_command_keeps_is_made_unwatched_then_frozen() -> None:
    """A parsed stack export: made with the cycle collector paused and frozen after, so the
    collector never walks its objects (re-enabled first, it walked them all at once)."""
    import gc

    from gpufleet.input import uncollected

    was = gc.isenabled()
    gc.enable()
    try:
        before = gc.get_freeze_count()
        with uncollected(freeze=True):
            assert not gc.isenabled()
            kept = [[i] for i in range(1000)]
        assert gc.isenabled()
        assert gc.get_freeze_count() >= before + len(kept)
        gc.disable()  # a caller that paused it itself: left paused, an error or not
        with pytest.raises(ValueError), uncollected(freeze=True):
            raise ValueError
        assert not gc.isenabled()
    finally:
        gc.unfreeze()
        if was:
            gc.enable()


def test_one_shot_commands_run_without_the_cyclic_collector_only_as_the_process() -> None:
    """Run as the process's own command line, an offline command bounded by its input runs
    without the cyclic collector; a command that waits on servers or the Pulumi CLI keeps it,
    and so does every call of ``main`` with arguments (the tests', a caller's process)."""
    code = (
        "import gc, io, sys, contextlib\n"
        "from gpufleet.cli import main\n"
        "out = []\n"
        "for argv in (['gpufleet', 'schema', 'fleet'], ['gpufleet', '-v', 'validate', 'nowhere'],"
        " ['gpufleet', 'health', '--outputs', 'nowhere'], ['gpufleet', '--help']):\n"
        "    gc.enable()\n"
        "    sys.argv = argv\n"
        "    with contextlib.redirect_stdout(io.StringIO()), "
        "contextlib.redirect_stderr(io.StringIO()):\n"
        "        main()\n"
        "    out.append(gc.isenabled())\n"
        "gc.enable()\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['schema', 'fleet'])\n"
        "out.append(gc.isenabled())\n"
        "print(out)\n"
    )
    assert _python(code).split() == ["[False,", "False,", "True,", "True,", "True]"]


def _python(code: str) -> str:
    """What ``code`` prints, run in a fresh interpreter (it must exit 0)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout
