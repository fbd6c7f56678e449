"""discounted_returns: Triton kernel vs torch twin vs plain Python (GiGPO's step return).

Trajectories of random lengths (1 step, the horizon, runs crossing the kernel's block of
1024), a batch whose last row is not marked as a trajectory's end, gamma 0 and 1,
1e5 rows. The kernel walks as the reference does: equal to the last bit.
"""

from __future__ import annotations

import random

import pytest
import torch

from milegpo_kernels import discounted_returns, discounted_returns_torch

from .test_credit_ops import BLOCK, _close

pytestmark = pytest.mark.usefixtures("garbage_empty")


def py_discounted_returns(reward, last, gamma):
    out, running = [0.0] * len(reward), 0.0
    for i in range(len(reward) - 1, -1, -1):
        if i == len(reward) - 1 or last[i]:
            running = 0.0
        running = reward[i] + gamma * running
        out[i] = running
    return out


def _trajectories(rng, n, max_len):
    last, left = [], 0
    for i in range(n):
        if left == 0:
            left = rng.randint(1, max_len)
        left -= 1
        last.append(left == 0)
    reward = [rng.choice([0.0, 0.0, 1.0, -0.1, rng.gauss(0.0, 3.0)]) for _ in range(n)]
    return reward, last


CASES = {"empty": (0, 5), "one": (1, 1), "singletons": (300, 1), "horizon_50": (2000, 50),
         "block_plus_one": (BLOCK + 1, 9)}


@pytest.mark.parametrize("gamma", [0.95, 1.0, 0.0])
@pytest.mark.parametrize("case", list(CASES))
def test_discounted_returns(case, gamma, device):
    n, max_len = CASES[case]
    reward, last = _trajectories(random.Random(n + max_len), n, max_len)
    want = py_discounted_returns(reward, last, gamma)
    r = torch.tensor(reward, dtype=torch.float64, device=device)
    lt = torch.tensor(last, dtype=torch.bool, device=device)
    got = discounted_returns(r, lt, gamma, backend="triton")
    assert got.shape == (n,) and got.cpu().tolist() == want  # bit-exact: the same walk
    _close(discounted_returns_torch(r.cpu(), lt.cpu(), gamma), want)


def test_discounted_returns_walk_across_blocks(device):
    # one trajectory longer than a block: its lane walks back through the block before
    reward, _ = _trajectories(random.Random(2), BLOCK + 40, 1)
    last = [i in (20, BLOCK + 39) for i in range(BLOCK + 40)]
    want = py_discounted_returns(reward, last, 0.95)
    r = torch.tensor(reward, dtype=torch.float64, device=device)
    got = discounted_returns(r, torch.tensor(last, device=device), 0.95, backend="triton")
    assert got.cpu().tolist() == want


def test_discounted_returns_unmarked_last_row_and_1e5(device):
    reward, last = _trajectories(random.Random(3), 100_000, 8)
    last[-1] = False  # the batch's last row ends a trajectory anyway
    want = py_discounted_returns(reward, last, 0.9)
    r = torch.tensor(reward, dtype=torch.float64, device=device)
    lt = torch.tensor(last, dtype=torch.bool, device=device)
    assert discounted_returns(r, lt, 0.9, backend="triton").cpu().tolist() == want
    _close(discounted_returns_torch(r.cpu(), lt.cpu(), 0.9), want)


def test_discounted_returns_errors(device):
    r = torch.zeros(4, dtype=torch.float64, device=device)
    with pytest.raises(ValueError, match=r"reward must be \(N,\) torch.float64"):
        discounted_returns(r.float(), torch.ones(4, dtype=torch.bool, device=device), 0.9, backend="triton")
    with pytest.raises(ValueError, match="last must be a bool tensor like reward"):
        discounted_returns(r, torch.ones(3, dtype=torch.bool, device=device), 0.9, backend="triton")
    with pytest.raises(ValueError, match="gamma must be finite"):
        discounted_returns(r, torch.ones(4, dtype=torch.bool, device=device), float("nan"), backend="triton")
