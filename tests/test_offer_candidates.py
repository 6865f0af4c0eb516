"""The rows offer selection hands to gpuhunt's ``matches`` (``matching.candidates``): a query
that names GPUs reaches only GPU rows of those names, and CPU-only rows where it may take
none. The matches must be exactly those of every row matched, in the same order, for any
query: named GPUs in any case, unknown names, counts from none to many, open ranges,
memory-only and GPU-less queries, priced and unpriced rows."""

from __future__ import annotations

import importlib
from typing import Any

from gpuhunt import QueryFilter, matches
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gpufleet.offers import matching
from gpufleet.offers.catalog import load_catalog

# the module (the package's `select` is its function)
select = importlib.import_module("gpufleet.offers.select")

CATALOG = load_catalog()
NAMES = sorted({(item.gpu_name or "") for item, _ in matching.items(CATALOG, False, True)})


def _every_row(unpriced: bool, q: QueryFilter) -> list[Any]:
    return [o for item, o in matching.items(CATALOG, unpriced, None) if matches(item, q)]


def _picked(unpriced: bool, q: QueryFilter) -> list[Any]:
    return [o for item, o in matching.candidates(CATALOG, unpriced, matching.gpu_side(q),
                                                q.gpu_name) if matches(item, q)]


names = st.lists(st.one_of(st.sampled_from(NAMES), st.sampled_from(NAMES).map(str.upper),
                           st.sampled_from(NAMES).map(str.swapcase),
                           st.sampled_from(["", "nosuchgpu", "H100 ", "a100-80gb"])),
                 max_size=3).map(lambda xs: xs or None)
counts = st.sampled_from([None, 0, 1, 2, 8])


@settings(max_examples=150)
@given(names, counts, counts, st.sampled_from([None, 16.0, 80.0, 200.0]),
       st.sampled_from([None, 4, 64]), st.booleans())
def test_the_candidates_match_exactly_what_every_row_matches(
        gpu_name: list[str] | None, low: int | None, high: int | None,
        gpu_memory: float | None, cpu: int | None, unpriced: bool) -> None:
    if low is not None and high is not None and high < low:
        low, high = high, low
    q = QueryFilter(gpu_name=gpu_name, min_gpu_count=low, max_gpu_count=high,
                    min_gpu_memory=gpu_memory, min_cpu=cpu)
    side = matching.gpu_side(q)
    every = [o for o in _every_row(unpriced, q) if side is None or bool(o.gpu_count) == side]
    assert _picked(unpriced, q) == every
    # answered again from what the first asking kept: the same offers
    for _ in range(2):
        assert matching.matching(CATALOG, unpriced, q, None) == every


def test_a_named_gpu_skips_the_rows_of_other_gpus() -> None:
    q = QueryFilter(gpu_name=["h100"], min_gpu_count=8, max_gpu_count=8)
    rows = matching.candidates(CATALOG, False, matching.gpu_side(q), q.gpu_name)
    assert rows and {item.gpu_name.lower() for item, _ in rows} == {"h100"}
    assert len(rows) < len(matching.items(CATALOG, False, True)) / 5
    assert _picked(False, q) == _every_row(False, q) != []


_KEY = ("access: {ssh_public_key: \"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBIQCyff2ckZRUZ6RiZd"
        "RKLoVIKhAaBehbvNN+zI6TxR x\"}\n")
_BACKENDS = (_KEY + "backends:\n  - {type: aws}\n  - {type: gcp, project_id: p}\n"
             "  - {type: azure, subscription_id: s, tenant_id: t}\n")


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(["0", "H100:8", "A100:80GB:8", "L4", "24GB..", "1..", "MI300X:8"]),
       st.sampled_from([None, "[aws]", "[gcp]", "[azure]", "[aws, gcp]", "[]", "[lambda]"]),
       st.sampled_from(["", "spot_policy: spot\n", "spot_policy: auto\n",
                        "placement: cluster\n", "regions: [us-east-1]\n",
                        "max_price: 1.0\n", "reservation: cr-0123456789abcdef0\n",
                        "availability_zones: [us-central1-a]\n"]))
def test_matching_the_fleets_backends_first_selects_what_every_row_selects(
        gpu: str, backends: str | None, more: str) -> None:
    """``select`` matches the rows of the fleet's backends first, and every row only when
    none of theirs matches: the same offers, set-asides and refusals (with the counts its
    messages give) as matching every row."""
    import pytest

    from gpufleet.input import validate_texts

    text = (f"type: fleet\nname: ff\nnodes: 1\nresources:\n  gpu: {gpu}\n"
            + (f"backends: {backends}\n" if backends else "") + more)
    v = validate_texts({"f.yml": text, "b.yml": _BACKENDS})
    assume(v.ok)  # a region or zone of another cloud is refused before any offer
    fleet = v.inputs.fleets[0]
    got = select.select(fleet, CATALOG, v.inputs)
    real = matching.matching
    with pytest.MonkeyPatch.context() as m:
        m.setattr(select, "matching", lambda c, u, q, _backends: real(c, u, q, None))
        assert select.select(fleet, CATALOG, v.inputs) == got


def test_an_answered_query_is_a_fresh_list_and_other_questions_are_asked_anew(
        monkeypatch: Any) -> None:
    """What ``matching`` keeps per catalog: a caller that extends its list (a reservation's
    offers) changes no later answer; other backends, unpriced rows or any other field of the
    query are other questions; it keeps at most MATCHES_KEPT of them."""
    cpu_only = QueryFilter(min_gpu_count=0, max_gpu_count=0)
    matching.answered_queries(CATALOG).clear()
    first = matching.matching(CATALOG, False, cpu_only, ["gcp"])
    gcp = [o for o in _every_row(False, cpu_only) if o.backend == "gcp"]
    assert first == gcp
    first.append(first[0])
    assert matching.matching(CATALOG, False, cpu_only, ["gcp"]) == gcp
    assert matching.matching(CATALOG, False, cpu_only, ["aws"]) == [
        o for o in _every_row(False, cpu_only) if o.backend == "aws"]
    assert matching.matching(CATALOG, True, cpu_only, ["gcp"]) == [
        o for o in _every_row(True, cpu_only) if o.backend == "gcp"]
    big = QueryFilter(min_gpu_count=0, max_gpu_count=0, min_cpu=64)
    assert matching.matching(CATALOG, False, big, ["gcp"]) == [
        o for o in gcp if o.vcpus >= 64] != gcp
    monkeypatch.setattr(matching, "MATCHES_KEPT", 3)
    for cpu in range(1, 10):
        matching.matching(CATALOG, False, QueryFilter(min_cpu=cpu), ["aws"])
        assert len(matching.answered_queries(CATALOG)) <= 3
