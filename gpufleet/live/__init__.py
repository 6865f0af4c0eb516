"""Live: a deployed stack through a runner (the Automation API) -> deploys and drift reports."""

from gpufleet.live.drift import DRIFT_NOTE, changes_from_events, live_drift, merge
from gpufleet.live.preview import UpPreview
from gpufleet.live.runner import (
    DeployRunner,
    EventSink,
    LiveError,
    MissingCli,
    PreviewRunner,
    UpOutcome,
)
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
    "MissingCli",
    "PreviewRunner",
    "UpError",
    "UpOptions",
    "UpOutcome",
    "UpPreview",
    "UpResult",
    "capacity_code",
    "capacity_failures",
    "changes_from_events",
    "deploy",
    "live_drift",
    "merge",
    "stack_files",
]
