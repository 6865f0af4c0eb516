"""Semantic checks by file kind: schema-checked documents -> frozen specs + diagnostics."""

from gpufleet.input.checks.backends import check_backends
from gpufleet.input.checks.context import region_of_zone
from gpufleet.input.checks.fleets import check_fleet
from gpufleet.input.checks.gateways import check_gateway
from gpufleet.input.checks.lock import check_lock
from gpufleet.input.checks.profiles import check_profiles

__all__ = ["check_backends", "check_fleet", "check_gateway", "check_lock", "check_profiles",
           "region_of_zone"]
