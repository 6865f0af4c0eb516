"""A stack's files compiled as its Pulumi program compiles them: from the lock, strictly."""

from __future__ import annotations

from collections.abc import Sequence

from gpufleet.compile import Compiled, compile_files
from gpufleet.diagnostics import render_text
from gpufleet.input import Lock, Validated, load_lock
from gpufleet.live.runner import LiveError
from gpufleet.offers import CatalogError, UnknownProfile


class StackFilesError(LiveError):
    """The stack's files (or its lock) cannot be deployed as they are."""


def compile_stack(files: Sequence[str], profile: str | None, catalog_dir: str | None,
                  lock_path: str) -> tuple[Validated, Compiled, Lock]:
    """(inputs, plans, lock) of a stack; StackFilesError with the located errors."""
    try:
        validated, compiled = compile_files(files, profile, catalog_dir, lock_path)
    except (CatalogError, UnknownProfile) as e:  # the stack config names what is not there
        raise StackFilesError(f"the stack config's gpufleet settings: {e}") from None
    lock, _ = load_lock(lock_path)
    if compiled is None or not compiled.ok or lock is None:
        diags = compiled.diagnostics if compiled is not None else validated.diagnostics
        raise StackFilesError("the stack's files cannot be deployed as they are:\n" +
                              render_text([d for d in diags if d.is_error], validated.sources))
    return validated, compiled, lock
