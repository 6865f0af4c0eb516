"""What live operations need of a Pulumi stack, as protocols, and how they fail. Pure.

The Automation API implementation is ``gpufleet.components.run.automation``; tests hand in
their own runners built on the Automation API's types.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gpufleet.outbound import scrub


class LiveError(Exception):
    """A live operation stopped: the stack was not found, Pulumi failed, or the deploy
    gave up. The message says why, with every secret this process holds taken out."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(scrub(a) if isinstance(a, str) else a for a in args))


class MissingCli(LiveError):
    """No Pulumi CLI on this machine: live operations cannot run here."""


@dataclass(frozen=True, slots=True)
class UpOutcome:
    """What one `pulumi up` run reported: success, or the failure text and its events."""

    succeeded: bool
    summary: str = ""
    error: str = ""
    events: tuple[Any, ...] = ()


EventSink = Callable[[Any], None]


class DeployRunner(Protocol):
    """What `gpufleet up` needs of a stack: its config, its state (`pulumi stack export`),
    a preview of the update (engine events to ``on_event``) and the update itself, either
    with `--replace` on the given URNs."""

    name: str  # the stack's name

    def config(self) -> Mapping[str, str]: ...

    def export(self) -> dict[str, Any]: ...

    def preview(self, on_event: EventSink, replace: Sequence[str] = ()) -> None: ...

    def up(self, replace: Sequence[str] = ()) -> UpOutcome: ...


class PreviewRunner(Protocol):
    """The two previews `gpufleet drift` runs, each feeding engine events to ``on_event``:
    cloud vs state, and program vs the refreshed cloud."""

    def preview_refresh(self, on_event: EventSink) -> None: ...

    def preview_refreshed(self, on_event: EventSink) -> None: ...
