"""What the kernel tests share: the keys and sizes they probe, and how they compare floats.

Every credit-assignment op runs on random and adversarial inputs (empty, one row, lengths
around the kernels' block of 1024, forced hash collisions, the success-sink key, negative
keys) through three implementations:

- ``reference_*``: plain Python, written from the op's definition (the ground truth, named as the
  credit estimator's plain-Python backend ``reference`` and the policy loss's ``reference_policy_loss``; the
  benchmarks import these same functions from the op family's test file);
- the torch twin (the CPU path);
- the Triton kernels (``backend="triton"``: compiled on CUDA, under Triton's
  interpreter on CPU), with ``torch.empty`` returning NaN / garbage so an output
  element the kernel forgets to write fails the test.

Integer results must match exactly; float results to 1e-12 relative (atomics sum in
any order), and a torch-twin zero (an all-equal segment) must be an exact zero.
"""

from __future__ import annotations

import torch

SINK = (1 << 63) - 1
I64_MIN = -(1 << 63)
BLOCK = 1024  # the row kernels; the graph kernels sweep edges in blocks of 4096
RTOL = 1e-12
SIZES = [0, 1, 7, BLOCK - 1, BLOCK + 1, 2500]


def i64(vals, device):
    return torch.tensor(vals, dtype=torch.int64, device=device)


def to_cpu(t):
    return t.detach().cpu() if isinstance(t, torch.Tensor) else torch.as_tensor(t)


def check_close(got, want, rtol=RTOL, exact_zeros=None):
    """Elementwise |got - want| <= rtol * max(|want|, 1); zeros of want are exact, or, given
    ``exact_zeros`` (a bool per element), those where it is True: the zeros an op makes by
    design. A zero the reference reaches by chance (x equal to its segment's mean in the
    reference's order of summation) is a few ulps off where float atomics sum in another order,
    as on a GPU (and under the interpreter's shuffled lane order: tests/conftest.py)."""
    got = to_cpu(got).to(torch.float64)
    want = torch.as_tensor(want, dtype=torch.float64).reshape(got.shape)
    assert not torch.isnan(got).any(), "NaN in the output: an element was not written"
    err = (got - want).abs() / want.abs().clamp(min=1.0)
    assert err.max().item() <= rtol if err.numel() else True, f"max rel err {err.max().item():.3e}"
    zero = want == 0
    if exact_zeros is not None:
        zero &= torch.as_tensor(exact_zeros, dtype=torch.bool).reshape(got.shape)
    assert torch.equal(got[zero], want[zero]), "an exact zero of the reference is not exactly 0"


def random_keys(n, kind, rng):
    if kind == "small":
        return [rng.randrange(-5, 6) for _ in range(n)]
    if kind == "wide":
        return [rng.randrange(I64_MIN, SINK + 1) for _ in range(n)]
    if kind == "adversarial":  # sink, int64 min, -1 (the table's empty mark), 0, negatives
        pool = [SINK, I64_MIN, -1, 0, 1, -2, SINK - 1, I64_MIN + 1, -(1 << 40)]
        return [rng.choice(pool) for _ in range(n)]
    raise ValueError(kind)
