"""Pulumi ComponentResources, one module per backend (installed as ``gpufleet.components``).

``BACKENDS_BY_NAME`` maps a backend name to the module that implements it; modules are
imported on first use so that a fleet on one cloud never loads another cloud's SDK.
"""

BACKENDS_BY_NAME: dict[str, str] = {}
