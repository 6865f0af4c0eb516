"""gcp: the dstack backend config entry for the networks of one fleet, from its stack
outputs (what `gpufleet export dstack` writes). Handoff stage."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def backend_entry(out: Mapping[str, Any], main: Mapping[str, Any],
                  plain: Callable[[Any], Any]) -> dict[str, Any]:
    """dstack's settings for this fleet's network (``plain`` unwraps a secret output); a
    ValueError says what the backends file lacks."""
    if not out.get("scope"):
        raise ValueError("a GCP fleet's backends entry sets no `project_id`, which dstack's "
                         "gcp backend requires: set it in the backends file and re-run "
                         "`pulumi up`")
    entry: dict[str, Any] = {"project_id": out["scope"], "vpc_name": plain(main.get("name"))}
    if main.get("project"):  # a Shared VPC of this host project
        entry["vpc_project_id"] = main["project"]
    if out.get("extra_vpcs"):
        entry["extra_vpcs"] = [plain(v) for v in out["extra_vpcs"]]
    if out.get("roce_vpcs"):
        entry["roce_vpcs"] = [plain(v) for v in out["roce_vpcs"]]
    # the service account the nodes run as: the one dstack's A3 instances pull Google's
    # GPUDirect images with (dstack's examples/clusters/a3high: `vm_service_account`)
    if isinstance(out.get("service_account"), str) and out["service_account"]:
        entry["vm_service_account"] = out["service_account"]
    # dstack takes "any usable subnet" of the VPC in a region unless `subnetworks` names one
    # (dstack 0.22.5: core/backends/gcp/compute.py, _get_vpc_subnet): name the main one, so a
    # gateway's proxy-only subnet beside it is never taken for instances
    first = (main.get("subnet_ids") or [None])[0]
    name = str(plain(first) or "").rstrip("/").rsplit("/", 1)[-1]
    if name and not main.get("project"):
        entry["subnetworks"] = {out["region"]: name}
    return entry
