"""Pulumi program: load the YAML files named in config `gpufleet:files` and validate them."""

from gpufleet.stack import run

run()
