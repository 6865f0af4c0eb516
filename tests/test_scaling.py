"""`gpufleet acceptance report`: nccl-tests logs of one fleet at 2, 4 and 8 nodes (node
counts read from the logs' rank lines) -> the table, a PNG/SVG plot, and the verdict of each
node count against the expected bus bandwidth; `check --format json` and `--expect-busbw`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.cli import main
from gpufleet.evidence import nodes_in

from acceptanceutil import A4, HEADER, row
from planutil import write


def scaled_log(nodes: int, peak: float, gpus: int = 8, wrong: bool = False,
               gpu: str = "NVIDIA B200") -> str:
    lines = ["# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor)",
             "# Using devices"]
    for rank in range(nodes * gpus):
        lines.append(f"#  Rank {rank:2d} Group  0 Pid {1000 + rank:5d} on a4-node-{rank // gpus}"
                     f" device  {rank % gpus} [0x{rank:02x}] {gpu}")
    lines.append(HEADER.rstrip("\n"))
    for exp in range(3, 34):
        size = 1 << exp
        bw = peak * min(1.0, size / (1 << 28))
        lines.append(row(size, round(bw, 2), "1" if wrong and exp == 20 else "0"))
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {peak / 3:.4f} "]
    return "\n".join(lines) + "\n"


def logs(tmp: Path, peaks: dict[int, float]) -> list[str]:
    return [write(tmp, f"run-{i}.log", scaled_log(n, p))
            for i, (n, p) in enumerate(sorted(peaks.items()))]


def test_the_node_count_comes_from_the_rank_lines() -> None:
    assert nodes_in(scaled_log(8, 600.0)) == 8
    assert nodes_in(scaled_log(1, 600.0, gpus=4)) == 1
    assert nodes_in("# Rank 0 on host-0\n# rank 1 group 0 pid 2 on host-1 device 0\n") == 0


def test_eight_nodes_far_below_two_fail_with_the_table_and_a_png(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = logs(tmp_path, {2: 675.0, 4: 640.0, 8: 300.0})
    png = tmp_path / "scaling.png"
    code = main(["acceptance", "report", *paths, "--fleet", "a4", *A4, "--plot", str(png)])
    out = capsys.readouterr().out
    assert code == 1
    assert "bus bandwidth (GB/s) by message size:" in out
    assert "size  2 node(s)  4 node(s)  8 node(s)" in " ".join(out.split("\n")[2].split()) \
        or "2 node(s)  4 node(s)  8 node(s)" in out
    assert "8 GiB     675.00     640.00     300.00" in out
    assert "ok   2 node(s): peak 675.00 GB/s at 256 MiB = 99% of 680 GB/s" in out
    assert "FAIL 8 node(s): peak 300.00 GB/s at 256 MiB = 44% of 680 GB/s" in out
    assert out.rstrip().endswith("FAIL")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    # the same logs draw the same bytes; run again, the command replaces its own plot
    assert main(["acceptance", "report", *paths, "--fleet", "a4", *A4, "--plot",
                 str(png)]) == 1
    assert png.read_bytes() == data
    again = tmp_path / "again.png"
    main(["acceptance", "report", *paths, "--fleet", "a4", *A4, "--plot", str(again)])
    assert again.read_bytes() == data


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_a_plot_it_wrote_is_replaced_and_a_foreign_file_is_not(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str) -> None:
    paths = logs(tmp_path, {2: 675.0, 4: 640.0})
    plot = tmp_path / f"scaling{suffix}"
    args = ["acceptance", "report", *paths, "--fleet", "a4", *A4, "--plot", str(plot)]
    assert main(args) == 0 and main(args) == 0, capsys.readouterr().err
    assert b"written by `gpufleet acceptance report`" in plot.read_bytes()[:4096]
    foreign = tmp_path / f"mine{suffix}"
    foreign.write_bytes(b"my own picture")
    assert main([*args[:-1], str(foreign)]) == 2
    assert "was not written by gpufleet" in capsys.readouterr().err
    assert foreign.read_bytes() == b"my own picture"
    assert main([*args[:-1], str(foreign), "--force"]) == 0
    assert foreign.read_bytes() != b"my own picture"


def test_json_and_markdown_keep_the_figures_and_the_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = logs(tmp_path, {2: 675.0, 8: 620.0})
    assert main(["acceptance", "report", *paths, "--fleet", "a4", *A4,
                 "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # one pass mark with `acceptance check`: 90% of the expected figure
    assert data["verdict"] == "pass" and data["threshold_fraction"] == 0.9
    assert [(r["nodes"], r["peak_busbw_gbps"], r["reference_gbps"], r["verdict"])
            for r in data["runs"]] == [(2, 675.0, 680.0, "pass"), (8, 620.0, 680.0, "pass")]
    assert data["runs"][1]["busbw_by_size"][str(1 << 33)] == 620.0
    # a stricter contract: 95% of 680 fails the 8-node run
    assert main(["acceptance", "report", *paths, "--fleet", "a4", *A4, "--threshold",
                 "0.95", "--format", "markdown"]) == 1
    md = capsys.readouterr().out
    assert "| 8 | 620.00 | 256 MiB | 680 | 91% | **FAIL** |" in md
    # the contract's own figure per node count
    assert main(["acceptance", "report", *paths, "--fleet", "a4", *A4, "--threshold",
                 "0.95", "--expect-busbw", "8=640", "--format", "json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert runs[1]["reference_source"] == "--expect-busbw 8="


def test_logs_that_cannot_be_read_give_no_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = logs(tmp_path, {2: 675.0})
    bare = write(tmp_path, "bare.log", scaled_log(4, 640.0).split("# Using devices\n")[0]
                 + HEADER + "\n".join(scaled_log(4, 640.0).split(HEADER)[1:]))
    no_ranks = write(tmp_path, "noranks.log", "\n".join(
        line for line in scaled_log(4, 640.0).splitlines() if "Rank" not in line) + "\n")
    assert main(["acceptance", "report", *good, no_ranks, "--fleet", "a4", *A4]) == 2
    assert "no `# Rank ... on HOST device ...` lines" in capsys.readouterr().out
    twin = write(tmp_path, "twin.log", scaled_log(2, 670.0))
    assert main(["acceptance", "report", *good, twin, "--fleet", "a4", *A4]) == 2
    assert "are both 2-node runs" in capsys.readouterr().out
    wrong = write(tmp_path, "wrong.log", scaled_log(4, 640.0, wrong=True))
    assert main(["acceptance", "report", *good, wrong, "--fleet", "a4", *A4]) == 2
    assert "did not report correct results" in capsys.readouterr().out
    assert bare  # a log with its rank lines is read (the table rows stay)
    assert main(["acceptance", "report", *good, "--fleet", "a4", *A4, "--plot",
                 str(tmp_path / "x.jpg")]) == 2


def test_without_a_published_figure_the_smallest_run_is_the_reference(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from planutil import TEST_KEY

    fleet = write(tmp_path, "f.yml", "type: fleet\nname: g2\nnodes: 8\nplacement: cluster\n"
                  "resources:\n  gpu: L4:1\nbackends: [gcp]\n")
    backends = write(tmp_path, "b.yml", f"backends:\n  - type: gcp\n    project_id: p1\n"
                     f"access:\n  ssh_public_key: {TEST_KEY}\n")
    paths = [write(tmp_path, "a.log", scaled_log(2, 20.0, gpus=1, gpu="NVIDIA L4")),
             write(tmp_path, "b.log", scaled_log(8, 10.0, gpus=1, gpu="NVIDIA L4"))]
    code = main(["acceptance", "report", *paths, "--fleet", "g2", fleet, backends])
    out = capsys.readouterr().out
    assert code == 1
    assert "the 2-node run's own peak (no published figure: scaling only)" in out
    assert "FAIL 8 node(s): peak 10.00 GB/s at 256 MiB = 50% of 20 GB/s" in out


def test_check_takes_the_contracts_figure_and_speaks_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "nccl.log", scaled_log(2, 600.0))
    assert main(["acceptance", "check", path, "--fleet", "a4", *A4, "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert (data["expected_busbw_gbps"], data["threshold_gbps"], data["verdict"]) == \
        (680.0, 612.0, "fail")
    assert main(["acceptance", "check", path, "--fleet", "a4", *A4, "--expect-busbw",
                 "640", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["threshold_gbps"], data["source"], data["verdict"]) == \
        (576.0, "--expect-busbw", "pass")


def test_the_backends_file_sets_the_fleets_figures_by_node_count(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`fleets: {a4: {expect_busbw: {2: 680, 8: 500}}}`: each figure applies from its count up,
    so 4 nodes are judged against 680 and 8 against 500; the command line still wins."""
    key = str(Path(A4[1]).parent / "keys")
    base = Path(A4[1]).read_text().replace("file:keys", f"file:{key}")
    # the examples' backends file ends with its `fleets:` settings: a4's go under them
    assert base.rstrip().splitlines()[-3] == "fleets:"
    backends = base + "  a4:\n    expect_busbw: {2: 680, 8: 500}\n"
    files = [A4[0], write(tmp_path, "backends.yml", backends)]
    paths = logs(tmp_path, {2: 675.0, 4: 500.0, 8: 450.0})
    assert main(["acceptance", "report", *paths, "--fleet", "a4", *files,
                 "--format", "json"]) == 1
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [(r["nodes"], r["reference_gbps"], r["verdict"]) for r in runs] == [
        (2, 680.0, "pass"), (4, 680.0, "fail"), (8, 500.0, "pass")]
    assert runs[2]["reference_source"] == "the backends file's expect_busbw (8+ nodes)"
    # the check of one log reads its node count from the rank lines: 8 nodes, 90% of 500
    eight = paths[2]
    assert main(["acceptance", "check", eight, "--fleet", "a4", *files,
                 "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["nodes"], data["expected_busbw_gbps"], data["threshold_gbps"]) == \
        (8, 500.0, 450.0)
    # without the file, the published 2-node figure applies at 8 nodes, and says so
    assert main(["acceptance", "check", eight, "--fleet", "a4", *A4, "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["expected_busbw_gbps"] == 680.0
    assert "measured on 2 nodes, applied at 8" in data["source"]
    assert main(["acceptance", "check", eight, "--fleet", "a4", *files,
                 "--expect-busbw", "8=520"]) == 1
    capsys.readouterr()
    # a figure that is not one is refused where it is written
    bad = write(tmp_path, "bad.yml", base
                + "  a4:\n    expect_busbw: {0: 680}\n")
    assert main(["validate", A4[0], bad]) == 1
    assert "fleets.a4.expect_busbw" in capsys.readouterr().out


def test_acceptance_writes_the_task_at_each_node_count(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    fleet = Path(A4[0]).read_text().replace("nodes: 2", "nodes: 2..8")
    assert fleet != Path(A4[0]).read_text()
    files = [write(tmp_path, "a4.dstack.yml", fleet), A4[1]]
    out_dir = tmp_path / "runs"
    assert main(["acceptance", "a4", *files, "--out", str(out_dir),
                 "--node-counts", "2,4,8"]) == 0
    capsys.readouterr()
    for n in (2, 4, 8):
        task = yaml.safe_load((out_dir / f"a4-nccl-{n}.dstack.yml").read_text())
        assert (task["name"], task["nodes"]) == (f"a4-nccl-{n}", n)
    assert main(["acceptance", "a4", *files, "--out", str(tmp_path / "x"),
                 "--node-counts", "2,16"]) == 2
    assert "allows at most 8 nodes" in capsys.readouterr().err
    assert not (tmp_path / "x" / "a4-nccl.dstack.yml").exists()
    assert main(["acceptance", "a4", *files, "--out", str(out_dir),
                 "--node-counts", "1,2"]) == 2
