"""The offline harness resolves a program's exports by walking them (components/run/exports)
to what the SDK's ``Output.from_input`` resolves them to, and hands it whatever it cannot
resolve the same way."""

from __future__ import annotations

import asyncio
import enum
import json
import re
from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pytest

from gpufleet.components.run import harness


class Level(enum.IntEnum):
    HIGH = 3


def _future(value: Any) -> asyncio.Future[Any]:
    f = asyncio.get_event_loop().create_future()
    f.set_result(value)
    return f


def _plain_tree() -> None:
    net = gcp.compute.Network("n", name="n", auto_create_subnetworks=False)
    pulumi.export("plain", {"a": [1, 2.5, None, True, "x"], "t": (1, "two"), "e": {}, "l": []})
    pulumi.export("outputs", {
        "id": net.id, "nested": pulumi.Output.from_input({"k": [net.name, (net.id,)]}),
        "apply": net.name.apply(lambda n: {"deep": [n, pulumi.Output.from_input("z")]}),
        "secret": pulumi.Output.secret("s3cret"), "all": pulumi.Output.all(net.id, 4)})
    pulumi.export("nodes", [{"name": f"n{i}", "ip": net.id.apply(lambda v, i=i: f"{v}-{i}"),
                             "public": None} for i in range(5)])


def _args_tree() -> None:  # an input type: only the SDK's lifting makes it what it makes
    pulumi.export("args", {"s": [gcp.compute.InstanceSchedulingArgs(preemptible=True)]})


def _unknown_tree() -> None:  # an Output not known, as in a preview
    unknown: pulumi.Output[str] = pulumi.Output(set(), _future("x"), _future(False))
    pulumi.export("unknown", {"known": "k", "maybe": [unknown]})


def _int_key_tree() -> None:
    pulumi.export("keys", {3: "int key"})


def _subclass_tree() -> None:
    pulumi.export("enum", {"level": Level.HIGH, "key": pulumi.Output.from_input([Level.HIGH])})


async def _sdk(tree: Any) -> Any:
    return await pulumi.Output.from_input(tree).future(with_unknowns=True)


def _exports(program: Callable[[], None]) -> Any:
    """The run's exports, objects' addresses left out; or the error the run raised."""
    try:
        found = harness.run_program(program, {}, harness.StrictMocks({})).exports
    except Exception as e:  # compared with the SDK's own error
        return f"{type(e).__name__}: {e}"
    return json.loads(re.sub(r" at 0x[0-9a-f]+", "", json.dumps(found)))


@pytest.mark.parametrize("program", [_plain_tree, _args_tree, _unknown_tree, _subclass_tree,
                                     _int_key_tree])
def test_exports_resolve_as_the_sdks_lifting_resolves_them(
        program: Callable[[], None], monkeypatch: pytest.MonkeyPatch) -> None:
    walked = _exports(program)
    monkeypatch.setattr(harness, "resolved_exports", _sdk)
    assert walked == _exports(program) and walked


def test_a_plain_tree_is_walked_and_anything_else_goes_to_the_sdk(
        monkeypatch: pytest.MonkeyPatch) -> None:
    handed: list[str] = []
    lift = pulumi.Output.from_input

    def counted(value: Any) -> Any:
        if isinstance(value, dict) and value and all(k in ("plain", "outputs", "nodes", "args",
                                                         "unknown", "enum", "keys") for k in value):
            handed.append(",".join(value))
        return lift(value)

    monkeypatch.setattr(pulumi.Output, "from_input", staticmethod(counted))
    plain = _exports(_plain_tree)
    assert handed == [] and plain["nodes"][4] == {"name": "n4", "ip": "n-id-4", "public": None}
    assert plain["outputs"]["apply"] == {"deep": ["n", "z"]}
    for program, name in ((_args_tree, "args"), (_unknown_tree, "unknown"),
                          (_subclass_tree, "enum"), (_int_key_tree, "keys")):
        _exports(program)
        assert handed[-1] == name
