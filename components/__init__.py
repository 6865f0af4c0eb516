"""Pulumi ComponentResources, one module per backend (installed as ``gpufleet.components``),
the stack program (``program``) and the runners of it (``run``).

``COMPONENTS_BY_NAME`` (``registry``) maps a backend name to a loader of the module that
implements it; modules load on first use, so a fleet on one cloud never loads another
cloud's SDK.
"""

from .sdk import defer_unread

defer_unread()  # before the Pulumi SDK is first imported: what no run reads loads when read
