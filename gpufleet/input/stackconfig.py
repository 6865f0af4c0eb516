"""The stack's `gpufleet:*` configuration, read and written in one place: the stack program,
`gpufleet up` and the offline runs of `plan` and `diff` all go through it. Pure except
:func:`resolve_files`, which expands globs against the file system, and
:func:`read_stack_file`, which reads a `Pulumi.<stack>.yaml`.
"""

from __future__ import annotations

import glob
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpufleet.input.files import read_small_text
from gpufleet.input.loader import MAX_FILE_BYTES, LoadResult, load_text
from gpufleet.input.lockspec import LOCK_FILE
from gpufleet.input.synced import (
    SyncedError,
    SyncedGateway,
    gateways_json,
    parse_gateways,
)

NAMESPACE = "gpufleet"
FILES = "gpufleet:files"
LOCK = "gpufleet:lock"
PROFILE = "gpufleet:profile"
CATALOG = "gpufleet:catalog"
SSH_PUBLIC_KEY = "gpufleet:sshPublicKey"
GATEWAYS = "gpufleet:gateways"
KEYS = (FILES, LOCK, PROFILE, CATALOG, SSH_PUBLIC_KEY, GATEWAYS)
FILES_MISSING = f"set the stack config `{FILES}` to a list of files"


_PLACEHOLDER = re.compile(r"<the stack config (gpufleet:[A-Za-z]+), read at `pulumi up`>")


def placeholder(key: str) -> str:
    """What an offline run holds where `pulumi up` reads the stack config ``key``."""
    return f"<the stack config {key}, read at `pulumi up`>"


def placeholder_key(value: object) -> str | None:
    """The config key whose placeholder ``value`` holds (anywhere inside it), else None."""
    if isinstance(value, str):
        m = _PLACEHOLDER.search(value)
        return m.group(1) if m else None
    items = value.values() if isinstance(value, Mapping) else value \
        if isinstance(value, list | tuple) else ()
    return next((k for v in items if (k := placeholder_key(v)) is not None), None)


class StackConfigError(ValueError):
    """The stack config cannot be used; the message says which key to set."""


@dataclass(frozen=True, slots=True)
class StackSettings:
    """What the stack config says: fleet files (paths or globs relative to the project
    folder), the lock, the profile, a catalog folder and the SSH key set at `pulumi up`."""

    files: tuple[str, ...]
    lock: str | None = None
    profile: str | None = None
    catalog: str | None = None
    ssh_public_key: str | None = None
    # what `gpufleet gateway sync` last read from the dstack server, by gateway name
    gateways: Mapping[str, SyncedGateway] = field(default_factory=dict)

    def to_config(self) -> dict[str, str]:
        """The config map, as `pulumi config` holds it (structured values as JSON)."""
        config = {FILES: json.dumps(list(self.files))}
        for key, value in ((LOCK, self.lock), (PROFILE, self.profile),
                           (CATALOG, self.catalog), (SSH_PUBLIC_KEY, self.ssh_public_key)):
            if value:
                config[key] = value
        if self.gateways:
            config[GATEWAYS] = gateways_json(self.gateways)
        return config


def settings_from_config(config: Mapping[str, str | None]) -> StackSettings:
    """Parse the stack config (full `gpufleet:` keys, string values as Pulumi passes them)."""
    raw = config.get(FILES) or "[]"
    try:
        files = json.loads(raw)
    except ValueError:
        raise StackConfigError(f"{FILES_MISSING} (it holds {raw[:80]!r}, not a JSON list)") \
            from None
    if not isinstance(files, list) or not files or not all(isinstance(f, str) for f in files):
        raise StackConfigError(FILES_MISSING)
    try:
        gateways = parse_gateways(config.get(GATEWAYS))
    except SyncedError as e:
        raise StackConfigError(str(e)) from None
    return StackSettings(tuple(files), config.get(LOCK) or None, config.get(PROFILE) or None,
                         config.get(CATALOG) or None, config.get(SSH_PUBLIC_KEY) or None,
                         gateways)


def offline_settings(paths: Sequence[str], profile: str | None, catalog_dir: str | None,
                     lock_file: str | None = None, ssh_public_key: str | None = None
                     ) -> StackSettings:
    """The settings an offline run uses for files named on the command line."""
    return StackSettings(tuple(os.path.abspath(p) for p in paths),
                         os.path.abspath(lock_file) if lock_file else None, profile,
                         os.path.abspath(catalog_dir) if catalog_dir else None, ssh_public_key)


def resolve_path(path: str, base: Path) -> str:
    return path if os.path.isabs(path) else str(base / path)


def resolve_files(patterns: Sequence[str], base: Path) -> list[str]:
    """Paths or globs relative to the stack folder -> existing paths, in a stable order."""
    out: list[str] = []
    for pattern in patterns:
        full = resolve_path(pattern, base)
        matches = sorted(glob.glob(full, recursive=True)) or [full]
        out.extend(m for m in matches if m not in out)
    return out


def default_lock_path(paths: Sequence[str | os.PathLike[str]]) -> str:
    """``gpufleet.lock`` beside the first path (inside it, when the first path is a folder)."""
    first = Path(paths[0]) if paths else Path(".")
    folder = first if first.is_dir() else first.parent
    return str(folder / LOCK_FILE)


def lock_path(settings: StackSettings, base: Path, files: Sequence[str]) -> str:
    """The lock a stack deploys from: `gpufleet:lock`, else gpufleet.lock beside the first
    file."""
    return resolve_path(settings.lock, base) if settings.lock else default_lock_path(files)


def read_stack_file(path: str) -> dict[str, str | None]:
    """The `gpufleet:*` keys of a `Pulumi.<stack>.yaml`, as Pulumi hands them to the program
    (structured values as JSON). A `secure:` value cannot be read offline: None. The file is
    read with the same bounds as every input file (size, nesting, aliases)."""
    try:
        text = read_small_text(path, MAX_FILE_BYTES)
    except OSError as e:
        raise StackConfigError(f"cannot read the stack config {path}: {e.strerror or e}") \
            from None
    loaded = LoadResult()
    load_text(path, text, loaded)
    errors = [d for d in loaded.diagnostics if d.is_error]
    if errors:
        raise StackConfigError(f"{path}:{errors[0].line}:{errors[0].column}: "
                               f"{errors[0].message}")
    data = loaded.documents[0].data if loaded.documents else None
    config = data.get("config") if isinstance(data, dict) else None
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise StackConfigError(f"{path}: `config` is not a mapping")
    out: dict[str, str | None] = {}
    for key in KEYS:
        value = config.get(key)
        if value is None:
            continue
        if isinstance(value, dict) and "secure" in value:
            out[key] = None
        elif isinstance(value, str):
            out[key] = value
        else:
            out[key] = json.dumps(value)
    return out
