"""Logical names come from YAML names only: same YAML, same names; offers and node counts
never rename anything."""

from __future__ import annotations

from pathlib import Path

from gpufleet.compile import naming

from planutil import plan_files, write


def test_names_are_built_from_fleet_name_role_and_index() -> None:
    assert naming.child("a4", "net") == "a4-net"
    assert naming.child("a4", "roce", 3) == "a4-roce-3"
    assert naming.node("a4", 0) == "a4-node-0"
    assert naming.provider("gcp", "proj", "us-west2") == "gcp-proj-us-west2"
    assert naming.provider("aws", None, "us-east-1") == "aws-us-east-1"


FLEET = ("type: fleet\nname: trainer\nnodes: {nodes}\nbackends: [gcp]\nspot_policy: auto\n"
         "resources:\n  gpu: {gpu}\n")


def _names(tmp: Path, nodes: int, gpu: str) -> set[str]:
    f = write(tmp, "f.yml", FLEET.format(nodes=nodes, gpu=gpu))
    return {r["urn"] for r in plan_files([f]).resources}


def test_same_yaml_same_urns(tmp_path: Path) -> None:
    assert _names(tmp_path, 2, "L4") == _names(tmp_path, 2, "L4")


def test_node_count_only_adds_or_removes_nodes(tmp_path: Path) -> None:
    two, three = _names(tmp_path, 2, "L4"), _names(tmp_path, 3, "L4")
    assert three - two == {u for u in three if u.endswith("::trainer-node-2")}
    assert two <= three


def test_changing_the_offer_renames_nothing(tmp_path: Path) -> None:
    small, big = _names(tmp_path, 2, "L4"), _names(tmp_path, 2, "A100:8")
    # Different machine types and regions, same logical names for every resource; only the
    # explicit provider, which is per (backend, project, region) by design, differs.
    def resources(urns: set[str]) -> set[str]:
        return {u for u in urns if "::pulumi:providers:" not in u}
    assert resources(small) == resources(big)
    assert small != big
