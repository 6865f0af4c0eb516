"""Each backend's planner: its plugin's ``compile`` role (``gpufleet.backends.role_of``), a
``Backend`` (``gpufleet.compile.seam``). A planner loads on first use, so a cloud's planner
may import this package while it is being imported."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from gpufleet.backends import backend_names, is_backend, role_of
from gpufleet.backends.plugin import RoleKey
from gpufleet.compile.seam import Backend

COMPILE: RoleKey[Backend] = RoleKey("compile", Backend)  # type: ignore[type-abstract]


class _Planners(Mapping[str, Backend]):
    """backend name -> its planner, for every backend of the registry."""

    def __getitem__(self, backend: str) -> Backend:
        if not is_backend(backend):
            raise KeyError(backend)
        return role_of(backend, COMPILE)

    def __iter__(self) -> Iterator[str]:
        return iter(backend_names())

    def __len__(self) -> int:
        return len(backend_names())


PLANNERS: Mapping[str, Backend] = _Planners()
