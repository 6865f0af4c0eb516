"""The address allocator: property tests (no overlaps, inside the parent, stable) and a
table of known-good layouts."""

from __future__ import annotations

from ipaddress import IPv4Network

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.compile.cidr import AllocationError, _probe, allocate_blocks, pack, split

names = st.lists(st.from_regex(r"[a-z][a-z0-9-]{1,12}", fullmatch=True), min_size=1,
                 max_size=40, unique=True)


@given(names)
@settings(max_examples=150)
def test_blocks_disjoint_inside_pool_and_order_free(fleets: list[str]) -> None:
    pool = IPv4Network("10.0.0.0/8")
    a = allocate_blocks(pool, fleets)
    b = allocate_blocks(pool, list(reversed(fleets)))
    assert a == b  # a function of the set of names, not of file order
    blocks = list(a.values())
    assert all(x.subnet_of(pool) and x.prefixlen == 16 for x in blocks)
    assert len(set(blocks)) == len(blocks)


@given(names, st.from_regex(r"[a-z][a-z0-9-]{1,12}", fullmatch=True))
@settings(max_examples=150)
def test_adding_a_fleet_moves_no_other_fleet_unless_hashes_collide(fleets: list[str],
                                                                   new: str) -> None:
    pool = IPv4Network("10.0.0.0/8")
    before = allocate_blocks(pool, fleets)
    if new in before:
        return
    slots = list(pool.subnets(new_prefix=16))
    first_choice = slots[_probe(new, 0, len(slots))]
    after = allocate_blocks(pool, [*fleets, new])
    if first_choice not in before.values():
        assert {k: after[k] for k in before} == before


@given(st.lists(st.integers(min_value=18, max_value=28), min_size=1, max_size=12))
@settings(max_examples=150)
def test_pack_is_disjoint_aligned_and_inside(prefixes: list[int]) -> None:
    block = IPv4Network("10.20.0.0/16")
    requests = [(f"r{i}", p) for i, p in enumerate(prefixes)]
    if sum(1 << (32 - p) for p in prefixes) > block.num_addresses:
        with pytest.raises(AllocationError):
            pack(block, requests)
        return
    out = pack(block, requests)
    nets = list(out.values())
    assert all(n.subnet_of(block) for n in nets)
    assert all(not a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1:])
    assert out == pack(block, requests)


@pytest.mark.parametrize(("requests", "expected"), [
    # GCP A4 / A3 Ultra: main /19, one gVNIC /20, RoCE /18 (split into 8 x /21)
    ([("main", 19), ("gpu-1", 20), ("roce", 18)],
     {"roce": "10.37.0.0/18", "main": "10.37.64.0/19", "gpu-1": "10.37.96.0/20"}),
    # GCP A3 Mega: main /19 + 8 gVNIC /20
    ([("main", 19)] + [(f"gpu-{i}", 20) for i in range(1, 9)],
     {"main": "10.37.0.0/19", **{f"gpu-{i}": f"10.37.{32 + 16 * (i - 1)}.0/20"
                                 for i in range(1, 9)}}),
])
def test_known_good_layouts(requests: list[tuple[str, int]], expected: dict[str, str]) -> None:
    out = pack(IPv4Network("10.37.0.0/16"), requests)
    assert {k: str(v) for k, v in out.items()} == expected


def test_split_roce_range_into_eight() -> None:
    parts = split(IPv4Network("10.37.0.0/18"), 8)
    assert [str(p) for p in parts][:2] == ["10.37.0.0/21", "10.37.8.0/21"] and len(parts) == 8
    with pytest.raises(AllocationError):
        split(IPv4Network("10.37.0.0/18"), 6)


def test_pool_too_small_is_an_error() -> None:
    with pytest.raises(AllocationError, match=r"holds 1 block\(s\) of /16 and all are taken "
                       r"\(a1 10.1.0.0/16\); 'b2' does not fit, 0 free"):
        allocate_blocks("10.1.0.0/16", ["a1", "b2"])
    with pytest.raises(AllocationError, match="smaller than one /16"):
        allocate_blocks("10.1.0.0/20", ["a1"])


@pytest.mark.parametrize(("pool", "prefix"), [("10.0.0.0/8", 16), ("10.128.0.0/9", 20),
                                              ("172.16.0.0/12", 16), ("10.0.0.0/16", 16),
                                              ("192.168.4.0/22", 24)])
def test_the_pools_blocks_are_its_subnets_in_address_order(pool: str, prefix: int) -> None:
    """Blocks made when asked for are the pool's ``subnets(new_prefix)``, slot for slot."""
    from gpufleet.compile.cidr import _Blocks

    net = IPv4Network(pool)
    blocks = _Blocks(net, prefix)
    expected = list(net.subnets(new_prefix=prefix))
    assert len(blocks) == len(expected)
    assert [blocks[i] for i in range(len(blocks))] == expected
    assert [blocks.index(b) for b in expected] == list(range(len(expected)))
    with pytest.raises(IndexError):
        blocks[len(expected)]
    with pytest.raises(IndexError):
        blocks[-1]
