"""Ownership of resources (gpufleet.review.owners): the map over a whole state answers what
``owner_of`` answers for each URN alone, for any parent graph, loops and dangling parents
included (a hand-edited or corrupt state)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.review.owners import owner_map, owner_of

TYPES = ["gpufleet:gcp:Fleet", "gpufleet:aws:Gateway", "gpufleet:storage:Bucket",
         "gpufleet:gcp:Network", "gcp:compute/instance:Instance", "pulumi:pulumi:Stack"]


def _urn(i: int, typ: str) -> str:
    return f"urn:pulumi:dev::gpufleet::{typ}::r{i}"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(TYPES), st.integers(-1, 14), st.booleans()),
                min_size=1, max_size=15))
def test_the_map_answers_as_each_urn_walked_alone(rows: list[tuple[str, int, bool]]) -> None:
    urns = [_urn(i, typ) for i, (typ, _, _) in enumerate(rows)]
    # a parent: none (-1), another row (loops allowed), or a URN no row has (dangling),
    # whose type is read from the URN itself
    resources = [(urn, typ, "" if parent < 0 else
                  urns[parent] if parent < len(urns) and not dangling else
                  _urn(100 + parent, TYPES[parent % len(TYPES)]))
                 for urn, (typ, parent, dangling) in zip(urns, rows, strict=True)]
    parents = {u: p for u, _, p in resources}
    types = {u: t for u, t, _ in resources}
    want = {u: o for u in parents if (o := owner_of(u, parents, types)) is not None}
    assert owner_map(resources) == want


def test_the_highest_top_level_component_owns_and_a_bucket_is_named_apart() -> None:
    fleet, bucket = _urn(0, "gpufleet:gcp:Fleet"), _urn(1, "gpufleet:storage:Bucket")
    inner, node = _urn(2, "gpufleet:gcp:Fleet"), _urn(3, "gcp:compute/instance:Instance")
    resources = [(fleet, "gpufleet:gcp:Fleet", ""), (inner, "gpufleet:gcp:Fleet", fleet),
                 (node, "gcp:compute/instance:Instance", inner),
                 (bucket, "gpufleet:storage:Bucket", "")]
    assert owner_map(resources) == {fleet: "r0", inner: "r0", node: "r0",
                                    bucket: "bucket:r1"}
