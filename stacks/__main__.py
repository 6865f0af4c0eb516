"""Pulumi program: compile the fleet and gateway files in `gpufleet:files` into resources."""

from gpufleet.components.program import main

main()
