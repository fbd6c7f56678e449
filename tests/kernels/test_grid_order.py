"""The test suite's shuffled program order under Triton's interpreter (tests/conftest.py)."""

import pytest
import torch
import triton
import triton.language as tl

from milegpo_kernels import interpreter_on
from milegpo_kernels.testing import CUDA_GRID_LIMITS, check_grid, grid_order

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


@triton.jit
def _lane_arrival_kernel(counter_ptr, out_ptr, claim_ptr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(out_ptr + i, tl.atomic_add(counter_ptr + i * 0, 1))  # every lane on one counter
    won = tl.atomic_cas(claim_ptr + i * 0, tl.zeros((BLOCK,), tl.int32) - 1, i)  # every lane on one slot
    tl.store(out_ptr + BLOCK + i, won)


def _lane_arrivals(block=16):
    counter, claim = torch.zeros(1, dtype=torch.int32), torch.full((1,), -1, dtype=torch.int32)
    out = torch.full((2 * block,), -2, dtype=torch.int32)
    _lane_arrival_kernel[(1,)](counter, out, claim, BLOCK=block)
    return out[:block].tolist(), int(claim), out[block:].tolist()


def test_grid_order_takes_an_atomics_lanes_in_the_order_asked():
    """A GPU applies an atomic's lanes in no set order: float sums round differently, another
    lane wins a compare-and-swap; the interpreter goes 0, 1, 2, ... unless told otherwise."""
    with grid_order("sequential"):
        arrivals, winner, seen = _lane_arrivals()
    assert arrivals == list(range(16)) and winner == 0 and seen == [-1] + [0] * 15
    with grid_order("reverse"):
        arrivals, winner, seen = _lane_arrivals()
    assert arrivals == list(range(16))[::-1] and winner == 15 and seen == [15] * 15 + [-1]
    with grid_order("shuffle", seed=3):
        arrivals, winner, seen = _lane_arrivals()
    assert sorted(arrivals) == list(range(16)) and arrivals != list(range(16))
    assert seen[winner] == -1 and all(s == winner for j, s in enumerate(seen) if j != winner)
    with grid_order("shuffle", seed=3):
        assert _lane_arrivals() == (arrivals, winner, seen)  # reproducible from the seed


def test_grid_order_refuses_an_unknown_order():
    with pytest.raises(ValueError, match="order must be one of"), grid_order("random"):
        pass


@pytest.mark.parametrize("grid", [(1, 65536, 1), (1, 1, 70000), (2**31, 1, 1)])
def test_grid_order_refuses_a_grid_a_gpu_refuses(grid):
    """The interpreter would run these (slowly); a CUDA launch fails: at most 65,535 programs on
    axes 1 and 2, 2**31 - 1 on axis 0. Refused before any program runs."""
    counter, out = torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    axis = max(range(3), key=lambda a: grid[a] / CUDA_GRID_LIMITS[a])
    with pytest.raises(RuntimeError, match=f"programs on axis {axis}, over the"):
        with grid_order("sequential"):
            _arrival_kernel[grid](counter, out)
    assert int(counter) == 0


def test_check_grid_takes_the_limits():
    check_grid((2**31 - 1, 65535, 65535))
    with pytest.raises(RuntimeError, match=r"launch grid \(1, 65536, 1\)"):
        check_grid((1, 65536, 1))
