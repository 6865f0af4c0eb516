"""Compile: specs + offers -> pure per-fleet and per-gateway plans (names, CIDRs, NICs)."""

from gpufleet.compile import naming, runs
from gpufleet.compile.addresses import address_key, gateway_key
from gpufleet.compile.buckets import BucketDesign, BucketReader
from gpufleet.compile.compiler import Compiled, compile_files, compile_inputs, needs_stack_key
from gpufleet.compile.design import (
    ANY_SUBNET,
    AccessDesign,
    BastionDesign,
    BucketMountDesign,
    DnsRecordDesign,
    FilesystemDesign,
    FirewallRule,
    FleetDesign,
    GatewayDesign,
    GatewayOptions,
    NetworkDesign,
    ProviderDesign,
    SubnetDesign,
    VolumeDesign,
    options_of,
)
from gpufleet.compile.digest import DIGEST_OUTPUT, input_digest, plan_to_json
from gpufleet.compile.fabrics import fabric, fabric_facts, run_env, run_mounts, run_setup
from gpufleet.compile.filesystems import emission_order
from gpufleet.compile.filesystems import services as filesystem_services
from gpufleet.compile.gateway import project_of as gateway_project
from gpufleet.compile.handoff import (
    K3S_SOURCE,
    K3S_TCP,
    K3S_UDP,
    SKY_MARKER,
    handoff_text,
    takes,
)
from gpufleet.compile.hostsetup import MARKER_DIR as HOST_MARKER_DIR
from gpufleet.compile.hostsetup import fabric_software, node_script, render_server
from gpufleet.compile.hostsetup import families as host_families
from gpufleet.compile.hostsetup import script_for as host_script
from gpufleet.compile.planners import PLANNERS
from gpufleet.compile.quotaneeds import (
    QuotaRequestDesign,
    QuotaRow,
    compute_rows,
    peak_nodes,
    quota_requests,
    request_value,
)
from gpufleet.compile.seam import KEY_CONFIG

__all__ = [
    "ANY_SUBNET",
    "DIGEST_OUTPUT",
    "HOST_MARKER_DIR",
    "K3S_SOURCE",
    "K3S_TCP",
    "K3S_UDP",
    "KEY_CONFIG",
    "PLANNERS",
    "SKY_MARKER",
    "AccessDesign",
    "BastionDesign",
    "BucketDesign",
    "BucketMountDesign",
    "BucketReader",
    "Compiled",
    "DnsRecordDesign",
    "FilesystemDesign",
    "FirewallRule",
    "FleetDesign",
    "GatewayDesign",
    "GatewayOptions",
    "NetworkDesign",
    "ProviderDesign",
    "QuotaRequestDesign",
    "QuotaRow",
    "SubnetDesign",
    "VolumeDesign",
    "address_key",
    "compile_files",
    "compile_inputs",
    "compute_rows",
    "emission_order",
    "fabric",
    "fabric_facts",
    "fabric_software",
    "filesystem_services",
    "gateway_key",
    "gateway_project",
    "handoff_text",
    "host_families",
    "host_script",
    "input_digest",
    "naming",
    "needs_stack_key",
    "node_script",
    "options_of",
    "peak_nodes",
    "plan_to_json",
    "quota_requests",
    "render_server",
    "request_value",
    "run_env",
    "run_mounts",
    "run_setup",
    "runs",
    "takes",
]
