"""Command line: thin click commands, one module per command group, that parse options, call
one pipeline and map the outcome to an exit code (0 ok, 1 invalid input, 2 usage error,
3 internal error). Each command's module is imported when the command runs (app.COMMANDS),
and heavy modules (pulumi, gpuhunt) inside the commands that need them, so `gpufleet
validate` starts fast."""

from gpufleet.cli.app import cli, main

__all__ = ["cli", "main"]
