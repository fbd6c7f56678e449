"""Test machinery for the package's Triton kernels under Triton's interpreter (CPU), for the tests
and the developer scripts, as :mod:`torch.testing` is torch's. The ops never import it.

- :func:`grid_order` runs each launch's programs, and each atomic's lanes, in another order than
  the interpreter's, and refuses a grid a CUDA device would (:func:`check_grid`);
- :func:`bounds_check`, :func:`poison_masked_loads`, :func:`race_check` hold every access to the
  kernel's tensors, give masked-off lanes garbage, and fail a launch whose programs or lanes
  race; :func:`garbage_empty` fills ``torch.empty`` with garbage;
- :func:`hooked_kernels` reports every launch, :func:`in_kernel` tells whether one is running;
- :func:`no_host_reads` fails a block that reads tensors on the host (a sync on CUDA);
  ``milegpo_kernels.inputs.host_checks(False)`` skips the ops' host-side checks as on CUDA.

Every check needs ``TRITON_INTERPRET=1`` (compiled kernels are not hooked).
"""

from ..inputs import host_checks
from .host_reads import HOST_READS, no_host_reads
from .launches import hooked_kernels, in_kernel, triton_modules
from .memory import (
    POISON_INT,
    OutOfBoundsError,
    RaceError,
    bounds_check,
    garbage_empty,
    poison_masked_loads,
    race_check,
)
from .order import CUDA_GRID_LIMITS, GRID_ORDERS, check_grid, grid_order


__all__ = [
    "CUDA_GRID_LIMITS",
    "GRID_ORDERS",
    "HOST_READS",
    "POISON_INT",
    "OutOfBoundsError",
    "RaceError",
    "bounds_check",
    "check_grid",
    "garbage_empty",
    "grid_order",
    "hooked_kernels",
    "host_checks",
    "in_kernel",
    "no_host_reads",
    "poison_masked_loads",
    "race_check",
    "triton_modules",
]
