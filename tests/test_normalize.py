"""dstack's shorthand grammars: the verified parses of yaml-reference.md and their errors."""

from __future__ import annotations

import pytest

from gpufleet.input.normalize import (
    SpecError,
    parse_cpu,
    parse_duration,
    parse_gpu,
    parse_idle_duration,
    parse_memory,
    parse_memory_range,
    parse_nodes,
    parse_retry,
)
from gpufleet.input.spec import Nodes, Range

INF = None


@pytest.mark.parametrize(("spec", "vendor", "names", "count", "memory"), [
    ("A100", None, ("A100",), Range(1, INF), None),
    ("A100:80GB:8", None, ("A100",), Range(8, 8), Range(80, 80)),
    ("H100:8", None, ("H100",), Range(8, 8), None),
    ("24GB..", None, (), Range(1, INF), Range(24, INF)),
    ("1..8", None, (), Range(1, 8), None),
    ("nvidia", "nvidia", (), Range(1, INF), None),
    ("amd:MI300X:8", "amd", ("MI300X",), Range(8, 8), None),
    ("A10G,A100", None, ("A10G", "A100"), Range(1, INF), None),
    ("24GB..40GB:2", None, (), Range(2, 2), Range(24, 40)),
    ("16GB..80GB:2..8", None, (), Range(2, 8), Range(16, 80)),
    ("tpu:v5litepod-8", "google", ("v5litepod-8",), Range(1, INF), None),
    ("0", None, (), Range(0, 0), None),
    ("0..8", None, (), Range(0, 8), None),
    (8, None, (), Range(8, 8), None),
    ("H100 : 8", None, ("H100",), Range(8, 8), None),
])
def test_gpu_verified_parses(spec: object, vendor: str | None, names: tuple[str, ...],
                             count: Range, memory: Range | None) -> None:
    g = parse_gpu(spec)
    assert (g.vendor, g.names, g.count, g.memory) == (vendor, names, count, memory)


def test_gpu_object_form() -> None:
    g = parse_gpu({"name": "tpu-v5p", "count": "2..", "total_memory": "160GB..",
                   "compute_capability": [8, 0]})
    assert g.names == ("v5p",) and g.count == Range(2, None)
    assert g.total_memory == Range(160, None) and g.compute_capability == (8, 0)


@pytest.mark.parametrize(("spec", "message"), [
    ("A100::8", "GPU spec contains empty token: A100::8"),
    ("A100:H100", "GPU spec name conflict: A100:H100"),
    ("2:4", "GPU spec count conflict: 2:4"),
    ("80GB:40GB", "GPU spec memory conflict: 80GB:40GB"),
    ("nvidia:amd", "GPU spec vendor conflict: nvidia:amd"),
    ("A100,", "GPU name can not be empty: A100,"),
    ("8..1", "Invalid range order: 8..1"),
])
def test_gpu_errors(spec: str, message: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_gpu(spec)
    assert e.value.message == message


@pytest.mark.parametrize(("value", "expected"), [
    (2, Nodes(2, 2, 2)), ("0..2", Nodes(0, 0, 2)), ("..4", Nodes(0, 0, 4)),
    ("2..", Nodes(2, 2, None)), ({"min": 2, "max": 10, "target": 6}, Nodes(2, 6, 10)),
    ({"max": 3}, Nodes(0, 0, 3)),
])
def test_nodes(value: object, expected: Nodes) -> None:
    assert parse_nodes(value) == expected


@pytest.mark.parametrize(("value", "message"), [
    (-1, "min cannot be negative"),
    ({"min": 2, "target": 1}, "target must not be be less than min"),
    ("3..1", "max must not be less than min"),
    ({"min": 1, "target": 5, "max": 3}, "max must not be less than target"),
])
def test_nodes_errors(value: object, message: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_nodes(value)
    assert e.value.message == message


@pytest.mark.parametrize(("value", "gb"), [
    (80, 80.0), ("80GB", 80.0), ("1TB", 1024.0), ("512MB", 0.5), ("2 tb", 2048.0), ("16", 16.0),
])
def test_memory(value: object, gb: float) -> None:
    assert parse_memory(value) == gb


def test_memory_errors_match_dstack() -> None:
    with pytest.raises(SpecError) as e:
        parse_memory("80GiB")
    assert e.value.message == "could not convert string to float: '80gib'"
    with pytest.raises(SpecError) as e:
        parse_memory_range("..")
    assert e.value.message == "Invalid empty range: .."
    assert parse_memory_range("512MB..2GB") == Range(0.5, 2.0)


@pytest.mark.parametrize(("value", "count", "arch"), [
    (8, Range(8, 8), None), ("16..", Range(16, None), None), ("arm:8..", Range(8, None), "arm"),
    ("x86:16", Range(16, 16), "x86"), ({"arch": "x86", "count": 4}, Range(4, 4), "x86"),
    ("arm", Range(2, None), "arm"),
])
def test_cpu(value: object, count: Range, arch: str | None) -> None:
    c = parse_cpu(value)
    assert (c.count, c.arch) == (count, arch)


@pytest.mark.parametrize(("value", "message"), [
    ("4:8", "CPU spec count conflict: 4:8"), ("x86:arm", "CPU spec arch conflict: x86:arm"),
    ("risc", "Invalid CPU architecture: risc"), ("x86::4", "CPU spec contains empty token"),
])
def test_cpu_errors(value: str, message: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_cpu(value)
    assert e.value.message == message


@pytest.mark.parametrize(("value", "seconds"), [
    (90, 90), ("90", 90), ("30s", 30), ("5m", 300), ("3h", 10800), ("3d", 259200),
    ("1w", 604800), ("2 h", 7200),
])
def test_duration(value: object, seconds: int) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["1y", "1h30m", "1.5h", "h"])
def test_duration_errors(value: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_duration(value)
    assert e.value.message == f"Cannot parse the duration {value}"


@pytest.mark.parametrize(("value", "expected"), [
    ("off", -1), (False, -1), (-1, -1), (-5, -1), (True, None), ("1h", 3600),
])
def test_idle_duration(value: object, expected: int | None) -> None:
    assert parse_idle_duration(value) == expected


def test_retry_forms() -> None:
    assert parse_retry(False) is None
    full = parse_retry(True)
    assert full is not None and full.duration == 3600 and len(full.on_events) == 3
    part = parse_retry({"on_events": ["error"], "duration": "2h"})
    assert part is not None and part.on_events == ("error",) and part.duration == 7200
    with pytest.raises(SpecError):
        parse_retry({"on_events": []})
