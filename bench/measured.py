"""A command's wall time and its own peak memory, for the benchmarks.

Linux counts in a process's peak RSS the memory of the process it was forked from, up to
the exec: a child started by a benchmark that holds a 400 MB export in memory reports
400 MB whatever it used itself. So the command is started by a small launcher process
(about 10 MB), and the launcher's wait4 reads the command's peak.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

# the environment the benchmarks run commands in, as a user's shell runs them: Python writes
# the .pyc files it reads on the next run (a PYTHONDONTWRITEBYTECODE=1 inherited here would
# compile every module edited since the last write on each timed run)
USER_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}



def processor_seconds(who: int = resource.RUSAGE_CHILDREN) -> float:
    """User and system seconds so far of this process (``RUSAGE_SELF``) or of its children
    that were waited for (``RUSAGE_CHILDREN``), as ``resource.getrusage`` counts them."""
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


_COLD: set[str] = set()  # the cache folders of cold runs
_FIRST: set[str] = set()  # the cache folders of first runs


def cold_env(folder: Path) -> dict[str, str]:
    """The environment of a cold run as a user's next run of new inputs has it: gpufleet's
    cache on in ``folder``, with no run or policy entry (``forget_runs`` removes them before
    each timed run) but what a first run wrote that stands for code, as Python keeps the .pyc
    files it wrote: the provider SDKs' type indexes (``sdk/``), the compiled methods of
    gpufleet's dataclasses (``code/``) and the bundled catalog's parsed rows (``catalog/``)."""
    _COLD.add(str(folder))
    return {"GPUFLEET_CACHE": "on", "GPUFLEET_CACHE_DIR": str(folder)}


def first_env(folder: Path) -> dict[str, str]:
    """The environment of a first run after installing: gpufleet's cache on in ``folder``,
    empty before each timed run (``forget_runs``), so the run writes the SDKs' type indexes
    and its run entry."""
    _FIRST.add(str(folder))
    return {"GPUFLEET_CACHE": "on", "GPUFLEET_CACHE_DIR": str(folder)}


def forget_runs(env: dict[str, str]) -> None:
    """Before a timed run in a ``cold_env``: its run and policy entries removed; in a
    ``first_env``: everything."""
    folder = env.get("GPUFLEET_CACHE_DIR", "")
    if env.get("GPUFLEET_CACHE") != "on":
        return
    if folder in _COLD:
        for kind in ("runs", "policies"):
            shutil.rmtree(Path(folder) / kind, ignore_errors=True)
    if folder in _FIRST:
        shutil.rmtree(folder, ignore_errors=True)

_LAUNCHER = """
import json, os, subprocess, sys, time
out, cmd = sys.argv[1], sys.argv[2:]
start = time.perf_counter()
proc = subprocess.Popen(cmd)
_, status, usage = os.wait4(proc.pid, 0)
seconds = time.perf_counter() - start
with open(out, "w") as fh:
    json.dump({"code": os.waitstatus_to_exitcode(status), "seconds": seconds,
               "peak_mb": usage.ru_maxrss / 1024}, fh)
"""


@dataclass(frozen=True)
class Measured:
    code: int
    seconds: float
    peak_mb: float


def run_measured(cmd: list[str], stdout: IO[Any] | int | None = None,
                 stderr: IO[Any] | int | None = None,
                 env: dict[str, str] | None = None, cwd: str | Path | None = None) -> Measured:
    """Run ``cmd`` (its output to ``stdout``/``stderr``) and measure it."""
    with tempfile.NamedTemporaryFile(suffix=".json") as result:
        subprocess.run([sys.executable, "-c", _LAUNCHER, result.name, *cmd], stdout=stdout,
                       stderr=stderr, env=env, cwd=cwd, check=True)
        data = json.loads(Path(result.name).read_text())
    return Measured(int(data["code"]), float(data["seconds"]), float(data["peak_mb"]))
