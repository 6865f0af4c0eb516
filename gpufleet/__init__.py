"""gpufleet: dstack-format fleet and gateway YAML -> validated specs -> offers -> Pulumi.

The core (every stage under gpufleet/ but the CLI) never imports pulumi, gpufleet.components
or gpufleet.policy, not even inside a function; only the CLI and ``stacks/`` call the Pulumi
layer (``gpufleet.components``). tests/test_layout.py enforces it.
"""

__version__ = "0.1.0"

# before any of gpufleet's dataclasses is made: their generated methods' code kept between
# runs (gpufleet/classcode.py)
from gpufleet.classcode import install as _install

_install()
