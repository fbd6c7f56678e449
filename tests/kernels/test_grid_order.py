"""The test suite's shuffled program order under Triton's interpreter (tests/conftest.py)."""

import pytest
import torch
import triton
import triton.language as tl

from milegpo_kernels._backend import interpreter_on
from milegpo_kernels._launch_hooks import grid_order

pytestmark = pytest.mark.skipif(not interpreter_on(), reason="interpreter only")


@triton.jit
def _arrival_kernel(counter_ptr, out_ptr):
    pid = tl.program_id(0) * tl.num_programs(1) * tl.num_programs(2) + tl.program_id(1) * tl.num_programs(2) + \
        tl.program_id(2)
    tl.store(out_ptr + pid, tl.atomic_add(counter_ptr, 1))


def _arrivals(grid) -> list[int]:
    """Each program's place in the order the programs ran."""
    counter = torch.zeros(1, dtype=torch.int32)
    out = torch.full((grid[0] * grid[1] * grid[2],), -1, dtype=torch.int32)
    _arrival_kernel[grid](counter, out)
    return out.tolist()


@pytest.mark.parametrize("grid", [(7, 1, 1), (3, 2, 4), (1, 1, 1)])
def test_grid_order_runs_every_program_once_in_the_order_asked(grid):
    n = grid[0] * grid[1] * grid[2]
    with grid_order("sequential"):
        assert _arrivals(grid) == list(range(n))
    with grid_order("reverse"):
        assert _arrivals(grid) == list(range(n))[::-1]
    with grid_order("shuffle", seed=5):
        first = _arrivals(grid)
    assert sorted(first) == list(range(n))
    with grid_order("shuffle", seed=5):
        assert _arrivals(grid) == first  # reproducible from the seed
    if n > 4:
        assert first != list(range(n))


def test_suite_runs_programs_out_of_order(request):
    """The autouse fixture is on: this test's launches do not run 0, 1, 2, ... (with the
    default --grid-order shuffle); nested orders restore it."""
    if request.config.getoption("--grid-order") != "shuffle":
        pytest.skip("run with --grid-order shuffle")
    assert _arrivals((16, 1, 1)) != list(range(16))
    with grid_order("sequential"):
        assert _arrivals((16, 1, 1)) == list(range(16))
    assert _arrivals((16, 1, 1)) != list(range(16))


def test_grid_order_refuses_an_unknown_order():
    with pytest.raises(ValueError, match="order must be one of"), grid_order("random"):
        pass
