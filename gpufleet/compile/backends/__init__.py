"""Registry of backends: name -> pure planner. Adding a backend = a planner module here, its
component module in ``components/``, one line below and one in the schema enum."""

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
