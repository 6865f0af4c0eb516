"""Each backend's planner, found from the one registry (``gpufleet.backends``): the module
``gpufleet.backends.<cloud>.compile`` provides ``BACKEND``. A planner loads on first use, so
a cloud's planner may import this package while it is being imported."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterator, Mapping

from gpufleet.backends import SUPPORTED_BACKENDS, TRAITS_BY_NAME, role_module
from gpufleet.compile.seam import Backend


@functools.cache
def _load(backend: str) -> Backend:
    planner: Backend = importlib.import_module(role_module(backend, "compile")).BACKEND
    return planner


class _Planners(Mapping[str, Backend]):
    """backend name -> its planner, for every backend of the registry."""

    def __getitem__(self, backend: str) -> Backend:
        if backend not in TRAITS_BY_NAME:
            raise KeyError(backend)
        return _load(backend)

    def __iter__(self) -> Iterator[str]:
        return iter(SUPPORTED_BACKENDS)

    def __len__(self) -> int:
        return len(SUPPORTED_BACKENDS)


PLANNERS: Mapping[str, Backend] = _Planners()
