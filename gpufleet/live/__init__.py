"""Live: a deployed stack through a runner (the Automation API) -> deploys and drift reports;
the clouds asked through probes -> preflight reports."""

from gpufleet.live.drift import DRIFT_NOTE, changes_from_events, live_drift, merge
from gpufleet.live.gateways import (
    ServerError,
    SyncReport,
    Wanted,
    find_server,
    http_post,
    record_drift,
    sync,
    wanted_gateways,
)
from gpufleet.live.netquota import NetworkNeed, network_needs, state_records
from gpufleet.live.preflight import (
    MissingAccess,
    Need,
    PreflightReport,
    Probe,
    ProbeError,
    check_stack,
    run_preflight,
    stack_needs,
)
from gpufleet.live.preview import UpPreview
from gpufleet.live.probes import default_probes, scale_set_api, scale_set_nics
from gpufleet.live.replace import ReplaceError, ReplacePlan, ScaleSetPlan, replace_nodes
from gpufleet.live.runner import (
    DeployRunner,
    EventSink,
    LiveError,
    MissingCli,
    PreviewRunner,
    UpOutcome,
)
from gpufleet.live.stack import compile_stack
from gpufleet.live.up import (
    CAPACITY_ERRORS,
    UpError,
    UpOptions,
    UpResult,
    capacity_code,
    capacity_failures,
    deploy,
    stack_files,
)

__all__ = [
    "CAPACITY_ERRORS",
    "DRIFT_NOTE",
    "DeployRunner",
    "EventSink",
    "LiveError",
    "MissingAccess",
    "MissingCli",
    "Need",
    "NetworkNeed",
    "PreflightReport",
    "PreviewRunner",
    "Probe",
    "ProbeError",
    "ReplaceError",
    "ReplacePlan",
    "ScaleSetPlan",
    "ServerError",
    "SyncReport",
    "UpError",
    "UpOptions",
    "UpOutcome",
    "UpPreview",
    "UpResult",
    "Wanted",
    "capacity_code",
    "capacity_failures",
    "changes_from_events",
    "check_stack",
    "compile_stack",
    "default_probes",
    "deploy",
    "find_server",
    "http_post",
    "live_drift",
    "merge",
    "network_needs",
    "record_drift",
    "replace_nodes",
    "run_preflight",
    "scale_set_api",
    "scale_set_nics",
    "stack_files",
    "stack_needs",
    "state_records",
    "sync",
    "wanted_gateways",
]
