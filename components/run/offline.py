"""Offline answers for `gpufleet plan`: strict invoke mocks and computed outputs per type,
each cloud's in ``components/<cloud>/offline.py`` (found by the Pulumi package that prefixes a
token or type, and loaded only when a resource of that cloud asks).

Every value there is a placeholder that says so (``mock-...``); `gpufleet plan` prints which
lookups were answered offline so reviewers know what the real `pulumi preview` will read.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from gpufleet.backends import all_backends, backend_of_type

from ..registry import Invoke, OfflineAnswers, components_for

__all__ = ["INVOKES", "Invoke", "Invokes", "invokes_for", "outputs"]


def _cloud(token: str) -> OfflineAnswers | None:
    """The offline answers of the backend whose Pulumi package prefixes ``token``."""
    backend = backend_of_type(token)
    if backend is None:
        return None
    return components_for(backend).offline


class Invokes(Mapping[str, Invoke]):
    """invoke token -> its offline answer, for a run whose gateways look up ``dns_zones``."""

    def __init__(self, dns_zones: Iterable[str] = ()) -> None:
        self.dns_zones = tuple(dns_zones)

    def __getitem__(self, token: str) -> Invoke:
        module = _cloud(token)
        if module is None:
            raise KeyError(token)
        table: dict[str, Invoke] = module.invokes(self.dns_zones)
        return table[token]

    def __iter__(self) -> Iterator[str]:
        for t in all_backends():
            yield from components_for(t.name).offline.invokes(self.dns_zones)

    def __len__(self) -> int:
        return sum(1 for _ in self)


INVOKES = Invokes()


def invokes_for(dns_zones: Iterable[str]) -> Invokes:
    """The offline answers for a run whose gateways look up these DNS zones."""
    return Invokes(dns_zones)


def outputs(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Computed outputs that downstream inputs read (self links, names)."""
    if typ.startswith("cloudflare:"):  # R2: no compute backend, its own few answers
        from .. import r2

        return r2.offline_outputs(typ, name)
    module = _cloud(typ)
    found: dict[str, Any] = module.outputs(typ, name, inputs) if module is not None else {}
    return found
