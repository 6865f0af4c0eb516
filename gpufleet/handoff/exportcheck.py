"""What `export dstack` checks of the files it is about to write: names that come from the
stack outputs (one safe name each, never two outputs on one file) and the offline plan's
placeholder values, marked. Pure."""

from __future__ import annotations

import re

from gpufleet.handoff.outputs import ExportError

# The offline plan answers addresses and ids with values of this shape
# (components/<cloud>/offline.py): its `exports` work as outputs, for a dry run only.
PLACEHOLDER = re.compile(r"\bmock-[A-Za-z0-9._-]*")


def mark_placeholders(files: dict[str, str], notes: list[str]) -> None:
    """Files holding the offline plan's placeholder values say so on their first lines, and a
    note names them: dstack cannot reach `mock-...` hosts."""
    marked = []
    for name, text in files.items():
        found = sorted(set(PLACEHOLDER.findall(text)))
        if found:
            files[name] = (
                f"# PLACEHOLDERS: {', '.join(found[:3])}{' ...' if len(found) > 3 else ''} "
                "are the offline plan's stand-ins, not real\n# addresses or ids; export "
                "again from the deployed stack (`--stack` or `--state`) before use.\n" + text)
            marked.append(name)
    if marked:
        notes.append(f"{len(marked)} file(s) hold the offline plan's placeholder values "
                            f"(mock-...): {', '.join(marked)}; a dry run only, export again "
                            "after `pulumi up`")


# what gpufleet's program names its outputs: dstack's resource names, with a prefix for
# gateways and volumes
_OUTPUT_NAME = re.compile(r"[a-z][a-z0-9-]{0,60}")


def add_file(files: dict[str, str], file: str, text: str, output: str) -> None:
    """One more file; an output name gpufleet's program cannot have written, or two outputs
    landing on one file, is an error (nothing is written)."""
    if not _OUTPUT_NAME.fullmatch(output.split("-", 1)[-1] if output.startswith(
            ("gateway-", "volume-")) else output):
        raise ExportError(f"stack output '{output}' is not a name gpufleet's program writes "
                          "(lower-case letters, digits and dashes); nothing was written")
    if file in files:
        raise ExportError(f"two stack outputs would both be exported to {file} (fleet "
                          f"'{output}' and another); rename one of them; nothing was written")
    files[file] = text
