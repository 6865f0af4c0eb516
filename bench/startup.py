"""Benchmark: whole-process times of `gpufleet --help`, `validate examples/`, `plan
examples/` (cold: the stack program runs; warm: the run cache answers, as on a second plan of
the same inputs and code), `quota examples/` (cold and warm), `export skypilot` of the
examples' stack and `health` of its fleets (against dstack's own server on this machine,
from `.venv-dstack`, holding each node with a recent healthy check), against a bare
`python -c pass`; and what a cold `plan examples/` spends importing.

Each command runs --rounds times as a fresh process (start-up, imports, work and exit all
counted, as a user or a pre-commit hook sees it); medians are printed. Then one
`python -X importtime` run of a cold `plan examples/` gives the provider SDKs' import time
and the largest imports. Targets (issue 60): `plan examples/` <= 1.2 s, `quota`, `export
skypilot` and `health` <= 1 s, on an idle 2-core machine; the cold plan is printed beside
the warm one (the provider SDK modules it loads: about 0.75 s of `-X importtime` self time,
which sees every one since stop 68). A cold plan runs each cloud's part of the program in a
process of its own on the processors it may use (``components/run/parallel.py``); the
cold plan with `GPUFLEET_JOBS=1` (one process, as on a machine of one processor or a
library call) is printed beside it, and the import times are read from such a run. Runs
keep Python's .pyc files as a user's shell does.

    python bench/startup.py [--rounds 7] [--smoke]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from measured import USER_ENV, cold_env, first_env, forget_runs

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = str(ROOT / "examples")
SDKS = ("pulumi_aws", "pulumi_gcp", "pulumi_azure_native")
ENV = USER_ENV


OFF = {"GPUFLEET_CACHE": "off"}  # no cache at all
ONE_JOB = {"GPUFLEET_JOBS": "1"}  # the program's run in one process, not a cloud's part each


def commands(tmp: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    """label -> (command, environment); ``tmp`` holds the caches (a cold run's is primed
    with the SDKs' type indexes, a warm run's with the run too, before the timed rounds)
    and the examples' stack export."""
    py = sys.executable
    warm = {"GPUFLEET_CACHE": "on", "GPUFLEET_CACHE_DIR": str(tmp / "cache")}
    cold = cold_env(tmp / "cold")
    gpufleet = [py, "-m", "gpufleet"]
    return {
        "python -c pass": ([py, "-c", "pass"], OFF),
        "gpufleet --help": ([*gpufleet, "--help"], OFF),
        "gpufleet validate examples/": ([*gpufleet, "validate", EXAMPLES], OFF),
        "gpufleet plan examples/ (first run)": ([*gpufleet, "plan", EXAMPLES],
                                                first_env(tmp / "first")),
        "gpufleet plan examples/ (cold)": ([*gpufleet, "plan", EXAMPLES], cold),
        "gpufleet plan examples/ (cold, 1 job)": ([*gpufleet, "plan", EXAMPLES],
                                                  {**cold, **ONE_JOB}),
        "gpufleet plan examples/ (warm)": ([*gpufleet, "plan", EXAMPLES], warm),
        "gpufleet quota examples/ (cold)": ([*gpufleet, "quota", EXAMPLES], cold),
        "gpufleet quota examples/ (warm)": ([*gpufleet, "quota", EXAMPLES], warm),
        "gpufleet export skypilot": ([*gpufleet, "export", "skypilot", "--state",
                                      str(tmp / "state.json"), "--out", str(tmp / "sky"),
                                      "--force"], OFF),
        "gpufleet health": ([*gpufleet, "health", "--outputs", str(tmp / "outputs.json")],
                            OFF),
    }


def write_state(path: Path) -> dict[str, Any]:
    """The examples' stack as `pulumi up` would leave it (an offline run), for the export;
    returns the stack's outputs."""
    from gpufleet.compile import compile_inputs
    from gpufleet.compile.runs import RunInputs
    from gpufleet.components.run.harness import deployment_v3
    from gpufleet.components.run.plan import run_offline
    from gpufleet.input import validate_paths
    from gpufleet.offers import load_catalog

    compiled = compile_inputs(validate_paths([EXAMPLES]).inputs, load_catalog())
    run = run_offline(RunInputs((EXAMPLES,)), compiled, record_outputs=True)
    path.write_text(json.dumps(deployment_v3(run, "dev", "gpufleet")))
    return dict(run.exports)


def health_fleets(outputs: dict[str, Any]) -> dict[str, Any]:
    """The stack outputs `gpufleet health` reads, each node given an address as the cloud
    would (the offline run's are placeholders): fleet -> its outputs."""
    fleets = {}
    for f, (name, out) in enumerate(sorted(outputs.items())):
        if isinstance(out, dict) and out.get("nodes"):
            nodes = [{**n, "private_ip": f"10.{f}.0.{i + 2}",  # public: documentation range
                      "public_ip": n.get("public_ip") and f"198.51.{f}.{i + 2}"}
                     for i, n in enumerate(out["nodes"])]
            fleets[name] = {**out, "nodes": nodes}
    return fleets


@contextlib.contextmanager
def dstack_server(tmp: Path, fleets: dict[str, Any]) -> Iterator[dict[str, str]]:
    """dstack's own server (`.venv-dstack`, as the tests start it) holding each fleet's
    nodes with a recent healthy DCGM check; yields the environment `gpufleet health`
    reads its URL and token from."""
    sys.path.insert(0, str(ROOT / "tests"))
    from dstackserver import running  # tests/ is a folder of modules, not a package

    specs = [{"project": name, "fleet": name, "instances": [
        {"num": i, "hostname": n["public_ip"] or n["private_ip"],
         "checks": [{"minutes_ago": 1, "status": "healthy"}]}
        for i, n in enumerate(out["nodes"])]} for name, out in fleets.items()]
    home = tmp / "dstack-home"
    home.mkdir()
    with running(home, list(fleets), ROOT / "tests" / "dstack_health.py", specs) as server:
        yield {"DSTACK_SERVER_URL": server.url, "DSTACK_TOKEN": server.token.reveal()}


def timed(cmd: list[str], env: dict[str, str]) -> float:
    forget_runs(env)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True,
                          check=False, cwd=ROOT, env={**ENV, **env})
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"bench/startup.py: {' '.join(cmd[1:])} failed ({done.returncode}):\n"
                 f"{done.stdout[-3000:]}{done.stderr}")
    return elapsed


def import_times(cold: dict[str, str]) -> tuple[dict[str, float], list[tuple[float, str]]]:
    """Self import time per provider SDK, and the ten largest imports (cumulative, s), of a
    cold plan (``cold``: its environment) in one process (-X importtime sees no child's)."""
    forget_runs(cold)
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "gpufleet", "plan",
                           EXAMPLES], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, check=True, cwd=ROOT, env={**ENV, **cold, **ONE_JOB})
    per_sdk = dict.fromkeys(SDKS, 0.0)
    top: list[tuple[float, str]] = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line or "self [us]" in line:
            continue
        own, cumulative, name = line[len("import time:"):].split("|")
        module = name.strip()
        sdk = module.split(".", 1)[0]
        if sdk in per_sdk:
            per_sdk[sdk] += int(own) / 1e6
        top.append((int(cumulative) / 1e6, name.rstrip()))
    return per_sdk, sorted(top, reverse=True)[:10]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--smoke", action="store_true",
                    help="one round, no target: proves the benchmark still runs (CI)")
    args = ap.parse_args()
    rounds = 1 if args.smoke else args.rounds
    from gpufleet.cli.processors import available

    env_note = (f"{os.cpu_count()} cores, {available()} usable, "
                f"Python {sys.version.split()[0]}")
    print(f"start-up, whole process, median of {rounds} ({env_note})")
    medians = {}
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        fleets = health_fleets(write_state(tmp / "state.json"))
        (tmp / "outputs.json").write_text(json.dumps(fleets))
        table = commands(tmp)
        health = table.pop("gpufleet health")

        def measure(label: str, cmd: list[str], env: dict[str, str]) -> None:
            if ("(warm)" in label or "(cold" in label) and not args.smoke:
                timed(cmd, env)  # a first run fills the cache (cold: the SDKs' indexes)
            medians[label] = statistics.median(timed(cmd, env) for _ in range(rounds))
            print(f"  {label:<36} {medians[label]:6.2f} s")
        for label, (cmd, env) in table.items():
            measure(label, cmd, env)
        # dstack's server only while `health` is timed: its own background loops take CPU
        # the other commands would be timed beside
        with dstack_server(tmp, fleets) as server_env:
            measure("gpufleet health", health[0], {**health[1], **server_env})
        per_sdk, top = import_times(table["gpufleet plan examples/ (cold)"][1])
    print("provider SDK imports in `plan examples/` (self time, -X importtime):")
    for sdk, seconds in per_sdk.items():
        print(f"  {sdk:<30} {seconds:6.2f} s")
    print("largest imports (cumulative):")
    for seconds, name in top:
        print(f"  {seconds:6.2f} s {name}")
    if not args.smoke:
        for label, target in (("gpufleet plan examples/ (warm)", 1.2),
                              ("gpufleet plan examples/ (cold)", 1.2),
                              ("gpufleet quota examples/ (cold)", 1.0),
                              ("gpufleet quota examples/ (warm)", 1.0),
                              ("gpufleet export skypilot", 1.0),
                              ("gpufleet health", 1.0)):
            print(f"{label}: {medians[label]:.2f} s (target <= {target} s): "
                  f"{'met' if medians[label] <= target else 'NOT met'}")


if __name__ == "__main__":
    main()
