"""Write examples/logs/: SAMPLE day-2 logs of the a4 example fleet to try `gpufleet acceptance
check` and `acceptance report` on without a cluster.

None comes from a real cluster. The burn-in and pairs logs are what the tasks `gpufleet
acceptance a4` writes print when their commands run in bash against the test suite's
stand-ins for nvidia-smi, dcgmi, dmesg, all_reduce_perf and mpirun (tests/burninutil.py,
tests/test_pairs.py); the nccl-tests logs at 2, 4 and 8 nodes follow nccl-tests' output
format (tests/test_scaling.py). Each file starts with a line saying it is a sample.

    .venv/bin/python scripts/sample_logs.py     # rewrites examples/logs/
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from burninutil import node_log  # noqa: E402
from test_pairs import pairs_log  # noqa: E402
from test_scaling import scaled_log  # noqa: E402

from gpufleet.cli import main  # noqa: E402

from acceptanceutil import A4  # noqa: E402

OUT = ROOT / "examples" / "logs"
SAMPLE = ("# SAMPLE log written by scripts/sample_logs.py with stand-ins for the GPU tools; "
          "not from a real cluster\n")
# bus bandwidth peaks (GB/s) at 2, 4 and 8 nodes: a healthy A4 RoCE fabric that scales
PEAKS = {2: 684.0, 4: 676.5, 8: 662.0}


def main_() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if main(["acceptance", "a4", *A4, "--out", str(tmp / "tasks")]) != 0:
            return 1
        burnin = yaml.safe_load((tmp / "tasks" / "a4-burnin.dstack.yml").read_text())
        pairs = yaml.safe_load((tmp / "tasks" / "a4-pairs.dstack.yml").read_text())
        nodes = []
        for rank in range(2):
            (tmp / f"n{rank}").mkdir()
            nodes.append(node_log(tmp / f"n{rank}", burnin, rank))
        (OUT / "a4-burnin.log").write_text(SAMPLE + "".join(nodes))
        (tmp / "p").mkdir()
        (OUT / "a4-pairs.log").write_text(SAMPLE + pairs_log(tmp / "p", pairs, 4))
    for n, peak in PEAKS.items():
        (OUT / f"a4-nccl-{n}nodes.log").write_text(SAMPLE + scaled_log(n, peak))
    for path in sorted(OUT.iterdir()):
        print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main_())
