"""Registry of backends: name -> pure planner. Adding a backend = its traits in
``gpufleet.traits``, a planner module here and one line below, its component module in
``components/`` with one line in ``components/registry.py``, and the schema enum."""

from __future__ import annotations

from gpufleet.compile.backends.aws import BACKEND as AWS
from gpufleet.compile.backends.azure import BACKEND as AZURE
from gpufleet.compile.backends.base import Backend
from gpufleet.compile.backends.gcp import BACKEND as GCP

BACKENDS_BY_NAME: dict[str, Backend] = {
    "aws": AWS,
    "azure": AZURE,
    "gcp": GCP,
}
