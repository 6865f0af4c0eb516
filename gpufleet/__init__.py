"""gpufleet: dstack-format fleet and gateway YAML -> validated specs -> offers -> Pulumi.

The core package never imports ``pulumi``; only ``gpufleet.components`` does.
"""

__version__ = "0.1.0"
