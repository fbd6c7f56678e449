"""ordered_rows: Triton kernel vs torch twin vs plain Python.

Random batches in a shuffled order (the op gathers by the permutation that sorts them),
one group, one-row trajectories, one row, no rows, lengths around the kernel's block of
1024, the success sink and negative keys, 1e5 rows; an order entry out of range is refused.
"""

from __future__ import annotations

import random

import pytest
import torch

from milegpo_kernels import OrderedRows, ordered_rows, ordered_rows_torch

from .helpers import BLOCK, I64_MIN, SINK

pytestmark = pytest.mark.usefixtures("garbage_empty")


def reference_ordered_rows(order, group, traj, state, next_state, success, invalid, reward) -> dict:
    n = len(order)
    cols = {"group": group, "traj": traj, "state": state, "next_state": next_state, "success": success,
            "invalid": invalid, "reward": reward}
    out = {k: [v[o] for o in order] for k, v in cols.items()}
    g, tr = out["group"], out["traj"]
    new_group = [i == 0 or g[i] != g[i - 1] for i in range(n)]
    first = [i == 0 or tr[i] != tr[i - 1] for i in range(n)]
    out["starts"] = [[int(x) for x in new_group], [int(x) for x in first]]
    out["first_flags"] = [new_group, first]
    out["last"] = [i == n - 1 or tr[i] != tr[i + 1] for i in range(n)]
    return out


def _batch(rng, n_groups, k, max_len):
    rows = []
    traj = 0
    for g in rng.sample(range(-5, 10_000), n_groups):
        for _ in range(k):
            for t in range(rng.randint(1, max_len)):
                rows.append((g, traj * 7 - 3, t))
            traj += 1
    rng.shuffle(rows)
    n = len(rows)
    order = sorted(range(n), key=lambda i: rows[i])  # (group, traj, t)
    keys = [SINK, I64_MIN, -1, 0, 12345]
    return (order, [r[0] for r in rows], [r[1] for r in rows], [rng.choice(keys) for _ in range(n)],
            [rng.choice(keys) for _ in range(n)], [rng.random() < 0.4 for _ in range(n)],
            [rng.random() < 0.2 for _ in range(n)], [rng.gauss(0.0, 1.0) for _ in range(n)])


def _tensors(data, device):
    dtypes = (torch.int64,) * 5 + (torch.bool, torch.bool, torch.float64)
    return [torch.tensor(x, dtype=dt, device=device).reshape(len(x)) for x, dt in zip(data, dtypes)]


def _check(got: OrderedRows, want: dict):
    for name in OrderedRows._fields:
        assert getattr(got, name).cpu().tolist() == want[name], name


CASES = {"empty": (0, 0, 1), "one_row": (1, 1, 1), "one_group": (1, 8, 20), "one_row_trajectories": (5, 40, 1),
         "mixed": (7, 8, 50), "around_block": (9, 6, 40)}


@pytest.mark.parametrize("case", list(CASES))
def test_ordered_rows(case, device):
    data = _batch(random.Random(len(case)), *CASES[case])
    want = reference_ordered_rows(*data)
    args = _tensors(data, device)
    _check(ordered_rows(*args, backend="triton"), want)
    _check(ordered_rows_torch(*(a.cpu() for a in args)), want)


def test_ordered_rows_block_boundaries_and_1e5(device):
    for n_groups, k, max_len in ((3, 1, BLOCK), (50, 40, 99)):
        data = _batch(random.Random(n_groups), n_groups, k, max_len)
        assert len(data[0]) > BLOCK
        _check(ordered_rows(*_tensors(data, device), backend="triton"), reference_ordered_rows(*data))


def test_ordered_rows_errors(device):
    data = _batch(random.Random(1), 2, 2, 3)
    args = _tensors(data, device)
    with pytest.raises(ValueError, match=r"order must be \(N,\) int64"):
        ordered_rows(args[0].int(), *args[1:], backend="triton")
    with pytest.raises(ValueError, match=r"reward must be \(\d+,\) torch.float64"):
        ordered_rows(*args[:-1], args[-1].float(), backend="triton")
    if device == "cpu":  # on CUDA the kernel reads row 0 for such entries (a check would sync)
        bad = args[0].clone()
        bad[2] = len(bad)
        for backend in ("torch", "triton"):
            with pytest.raises(ValueError, match=rf"ordered_rows: order\[2\] = {len(bad)} is outside"):
                ordered_rows(bad, *args[1:], backend=backend)
