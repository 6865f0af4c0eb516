"""Fuzz benchmark: generated inputs through `gpufleet validate` (and, for what validates, the
compile stage), in one process, with the slowest input and the peak memory printed.

Uses the strategies of tests/test_fuzz.py (type confusion on every key, odd grammar values,
YAML tags, anchors and merges, byte mutations of the valid corpus). The issue's bar: no
internal error (exit 3), no signal, no input over 2 s or 200 MB.

    python bench/fuzz.py [--examples 5000] [--seed 1] [--smoke]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--examples", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--smoke", action="store_true",
                    help="20 inputs: proves the benchmark still runs (CI)")
    args = ap.parse_args()
    if args.smoke:
        args.examples = 20
    import contextlib
    import io

    from hypothesis import HealthCheck, given, seed, settings
    from test_fuzz import companions, structural, textual

    from gpufleet.cli import main as gpufleet
    from gpufleet.compile.compiler import compile_inputs
    from gpufleet.input.validate import validate_paths
    from gpufleet.offers.catalog import load_catalog

    codes: Counter[int] = Counter()
    crashes: list[tuple[bytes, str]] = []
    slowest = (0.0, b"")
    folder = Path(tempfile.mkdtemp())
    catalog = load_catalog()

    def run(raw: bytes, text: str | None) -> None:
        nonlocal slowest
        path = folder / "f.yml"
        path.write_bytes(raw)
        start = time.perf_counter()
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = gpufleet(["validate", str(path)])
        if code not in (0, 1):
            crashes.append((raw[:300], err.getvalue()[-300:]))
        if text is not None and code == 0:
            validated = validate_paths([str(path), *companions(text)])
            if validated.ok:
                compile_inputs(validated.inputs, catalog)
        took = time.perf_counter() - start
        codes[code] += 1
        if took > slowest[0]:
            slowest = (took, raw[:200])

    opts = settings(max_examples=args.examples // 2, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))

    @seed(args.seed)
    @opts
    @given(structural())
    def by_structure(text: str) -> None:
        run(text.encode(), text)

    @seed(args.seed)
    @opts
    @given(textual())
    def by_bytes(raw: bytes) -> None:
        run(raw, None)

    start = time.perf_counter()
    by_structure()
    by_bytes()
    total = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"inputs: {sum(codes.values())} in {total:.0f} s; exit codes "
          f"{dict(sorted(codes.items()))}")
    print(f"slowest input: {slowest[0]:.3f} s; peak RSS of the whole run: {peak:.0f} MB")
    print(f"internal errors (exit 3): {codes.get(3, 0)}")
    for raw, err in crashes[:5]:
        print(f"  input {raw!r}\n  -> {err.strip()}")


if __name__ == "__main__":
    main()
