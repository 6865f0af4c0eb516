"""The Automation API, in one place: selecting a stack, `up`, both drift previews and the
stack outputs, with Pulumi's errors mapped to ``gpufleet.live`` errors. Needs the Pulumi
CLI on the PATH (``MissingCli`` otherwise)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from pulumi import automation as auto

from gpufleet.live import EventSink, LiveError, MissingCli, UpOutcome

INSTALL = "https://www.pulumi.com/docs/install/"


@contextmanager
def pulumi_errors(stack: str, cwd: str) -> Iterator[None]:
    """Pulumi's exceptions -> LiveError with the stack, the folder and the CLI's last words."""
    try:
        yield
    except auto.errors.StackNotFoundError as e:
        raise LiveError(f"stack {stack} not found in {cwd}: {e}") from None
    except auto.errors.CommandError as e:
        raise LiveError(f"pulumi failed: {str(e).strip()[-2000:]}") from None


class AutomationStack:
    """A stack of the Pulumi project in ``cwd``, opened with the CLI; implements the
    runners ``gpufleet.live`` takes (DeployRunner, PreviewRunner)."""

    def __init__(self, stack: Any, name: str, cwd: str,
                 echo: Callable[[str], None] | None = None) -> None:
        self.stack = stack
        self.name = name
        self.cwd = cwd
        self.echo = echo

    @classmethod
    def open(cls, stack: str, cwd: str, echo: Callable[[str], None] | None = None,
             why: str = "") -> AutomationStack:
        """Select ``stack``; MissingCli (saying what works without it) when there is no CLI."""
        if shutil.which("pulumi") is None:
            raise MissingCli(f"the Pulumi CLI is not installed ({INSTALL})"
                             + (f"; {why}" if why else ""))
        with pulumi_errors(stack, cwd):
            return cls(auto.select_stack(stack_name=stack, work_dir=cwd), stack, cwd, echo)

    def config(self) -> Mapping[str, str]:
        with pulumi_errors(self.name, self.cwd):
            return {k: v.value for k, v in self.stack.get_all_config().items()}

    def outputs(self) -> dict[str, Any]:
        with pulumi_errors(self.name, self.cwd):
            return {k: v.value for k, v in self.stack.outputs().items()}

    def up(self, replace: Sequence[str] = ()) -> UpOutcome:
        """`pulumi up` (`--replace URN` for each of ``replace``); a failed update is an
        outcome (with its events), not an error."""
        events: list[Any] = []
        extra: dict[str, Any] = {"replace": list(replace)} if replace else {}
        try:
            result = self.stack.up(on_output=self.echo, on_event=events.append, **extra)
        except auto.errors.CommandError as e:
            return UpOutcome(False, error=str(e), events=tuple(events))
        state = getattr(result.summary, "result", "")
        if state != "succeeded":
            return UpOutcome(False, error=f"the update ended as {state!r}",
                             events=tuple(events))
        return UpOutcome(True, summary=str(result.stdout or "")[-2000:], events=tuple(events))

    def preview_refresh(self, on_event: EventSink) -> None:
        with pulumi_errors(self.name, self.cwd):
            self.stack.preview_refresh(on_event=on_event)

    def preview_refreshed(self, on_event: EventSink) -> None:
        """`pulumi preview --refresh`: what `up` would change against the cloud as it is."""
        with pulumi_errors(self.name, self.cwd):
            self.stack.preview(refresh=True, on_event=on_event)

    def preview(self, on_event: EventSink, replace: Sequence[str] = ()) -> None:
        """`pulumi preview`: what `pulumi up` would change (no refresh, as `up` runs);
        `--replace URN` for each of ``replace``."""
        extra: dict[str, Any] = {"replace": list(replace)} if replace else {}
        with pulumi_errors(self.name, self.cwd):
            self.stack.preview(on_event=on_event, **extra)

    def export(self) -> dict[str, Any]:
        """`pulumi stack export`: the deployment as the engine stores it."""
        with pulumi_errors(self.name, self.cwd):
            d = self.stack.export_stack()
        return {"version": d.version, "deployment": d.deployment}
