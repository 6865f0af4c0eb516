"""dstack 0.22.5's own command line, many times in one process: reads a JSON list of argument
lists (without the leading `dstack`) on standard input and writes a JSON list of
{"code", "out"} - the exit status and what the command printed on its standard output and
error - one per list, each run through dstack's CLI entry point (``dstack._internal.cli.main``)
as `dstack ARGS...` would run it. Runs in `.venv-dstack` and imports nothing of gpufleet; one
process spares each command the CLI's second of imports."""

from __future__ import annotations

import contextlib
import io
import json
import sys


def run(argv: list[str]) -> dict[str, object]:
    from dstack._internal.cli.main import main

    out = io.StringIO()
    code: object = 0
    sys.argv = ["dstack", *argv]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            main()
        except SystemExit as e:  # argparse's errors and the CLI's exit(1)
            code = e.code if e.code is not None else 0
    return {"code": code, "out": out.getvalue()}


if __name__ == "__main__":
    json.dump([run(argv) for argv in json.load(sys.stdin)], sys.stdout)
