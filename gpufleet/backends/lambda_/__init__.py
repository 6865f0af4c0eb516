"""lambda: what Lambda Cloud can do through its public API and the tables gpufleet keeps for
it. Pure data.

Lambda Cloud's API (docs-api.lambda.ai/api/cloud, OpenAPI 1.10.0) launches single instances
with a public address each, `user_data` (cloud-init), tags, regional firewall rulesets and
regional filesystems; it has no VPCs, placement, reservations or spot market, and its 1-Click
Clusters cannot be created through it. No Pulumi provider exists for it: gpufleet's
components drive the API through a dynamic provider (components/lambda_/). The backend's code
lives in `lambda_` folders: `lambda` is a Python keyword. dstack 0.22.5's own Lambda backend
(core/backends/lambdalabs/compute.py) creates single instances, no gateways, no volumes.
"""

from __future__ import annotations

import re
from types import MappingProxyType

from gpufleet.backends.lambda_ import names as _names
from gpufleet.codes import B020, C027, C028, F025, V023
from gpufleet.traits import (
    BackendTraits,
    CapacityCode,
    Feature,
    FilesystemService,
    ImageFamily,
    ResourceKind,
    ZoneModel,
)

_API = "docs-api.lambda.ai/api/cloud (OpenAPI 1.10.0)"
_NO_GATEWAYS = ("dstack runs no gateway on lambda (dstack 0.22.5: LambdaCompute has no "
                "gateway support)")

TRAITS = BackendTraits(
    "lambda", frozenset({Feature.SHARED_FILESYSTEMS}),
    MappingProxyType({
        Feature.CLUSTER: "Lambda's API launches single instances with no interconnect "
                         "between them; its 1-Click Clusters (InfiniBand) cannot be created "
                         "through it: use one as an SSH fleet (README, \"Lambda Cloud\")",
        Feature.SPOT: "Lambda sells on-demand instances only",
        Feature.RESERVATIONS: "Lambda's API takes no reservation",
        Feature.CAPACITY_BLOCKS: "Capacity Blocks for ML are an EC2 purchase option",
        Feature.GATEWAYS: _NO_GATEWAYS,
        Feature.PRIVATE_GATEWAYS: _NO_GATEWAYS,
        Feature.GATEWAY_INSTANCE_TYPE: _NO_GATEWAYS,
        Feature.GATEWAY_LOAD_BALANCER: _NO_GATEWAYS,
        Feature.SHARED_NETWORKS: "Lambda has no networks to share: every instance has its own "
                                 "public address"}),
    re.compile(r"[a-z]+-[a-z]+-\d+"), "us-east-1", "ubuntu", zones=ZoneModel.NONE,
    package="lambda_", gpuhunt_provider="lambdalabs", networkless=True,
    pulumi_package="pulumi-python:dynamic/lambda",
    # Lambda Cloud's API (OpenAPI 1.10.0) has no quota endpoint: a launch is limited by the
    # capacity of the region (`insufficient-capacity`), not by a per-account quota
    quota_note="Lambda Cloud has no quota to ask for: its API (1.10.0) has no quota "
               "endpoint, and capacity alone limits a launch (`gpufleet preflight` reads it)",
    code_notes=MappingProxyType({
        C027: "100 instances, one launch per 12 seconds",
        C028: "a key needs a letter and at least one more character",
        V023: "under /home, /lambda/nfs or /data; letters, digits, `-` and `/` only",
        F025: "no interconnect through its API, no spot market",
        B020: "every instance has its own public address"}),
    node_types=(_names.INSTANCE,),
    resources=MappingProxyType({
        # the API changes an instance's name only (POST /instances/{id}); everything else it
        # was launched with replaces it
        _names.INSTANCE: ResourceKind(
            frozenset({"region_name", "instance_type_name", "ssh_key_names",
                       "file_system_mounts", "user_data", "tags", "firewall_rulesets",
                       "image"}), "instance", billed_as="instance"),
        # a node's wait for `active` (components/lambda_/dynamic.py): a new one with its
        # instance
        _names.READY: ResourceKind(frozenset({"instance_id"}),
                                   replaced_with=frozenset({"instance_id"})),
        _names.SSH_KEY: ResourceKind(frozenset({"name", "public_key"})),
        # PATCH /firewall-rulesets/{id} changes the name and the rules in place
        _names.FIREWALL: ResourceKind(frozenset({"region"}), "network"),
        _names.FILESYSTEM: ResourceKind(frozenset({"name", "region"}), "storage",
                                        billed_as="filesystem"),
    }),
    server_size="", gpu_image=ImageFamily(
        "lambda-stack", True, "NVIDIA driver, CUDA, Docker and the NVIDIA Container Toolkit as "
        "Lambda Stack installs them on Lambda's default image (docs.lambda.ai, On-Demand "
        "Cloud)"),
    # a Lambda filesystem: regional, elastic (no size to give), mounted by every instance of
    # the region that names it at launch (file_system_mounts)
    filesystems=MappingProxyType({
        "nfs": FilesystemService(
            "lambda-filesystem", "Lambda filesystem", False, mounted_at_launch=True,
            # Lambda's own default mount point, and the launch request's pattern
            # (OpenAPI 1.10.0, RequestedFilesystemMountEntry.mount_point, maxLength 256)
            default_mount="/lambda/nfs/{name}",
            mount_pattern=r"(/home|/lambda/nfs|/data)[/a-zA-Z0-9-]{0,245}",
            mount_rule="Lambda's API (OpenAPI 1.10.0, RequestedFilesystemMountEntry) takes "
                       "paths under /home, /lambda/nfs or /data of letters, digits, `-` and "
                       "`/`")}),
    export_requires=(),
    capacity_errors=(
        CapacityCode("lambda", "instance-operations/launch/insufficient-capacity", _API),),
    name_rules=_names.NAME_RULES, name_budgets=_names.NAME_BUDGETS,
    labels=_names.tags,
    offline_run_cost=3,  # a dynamic provider of gpufleet's own: no SDK modules
)
