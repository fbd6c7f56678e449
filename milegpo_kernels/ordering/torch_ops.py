"""The result type, the input checks and the torch twin of :func:`milegpo_kernels.ordered_rows`
(gathers and neighbour comparisons); the op is described in :mod:`milegpo_kernels.ordering`."""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..inputs import check_id_ranges

COLUMNS = (("group", torch.int64), ("traj", torch.int64), ("state", torch.int64), ("next_state", torch.int64),
           ("success", torch.bool), ("invalid", torch.bool), ("reward", torch.float64))


class OrderedRows(NamedTuple):
    """The columns in order, each (N,); ``starts`` (2, N) int64: row i starts a task group
    (row 0), a trajectory (row 1); ``first_flags`` the same as bool; ``last`` (N,) bool: row i
    ends a trajectory."""

    group: torch.Tensor
    traj: torch.Tensor
    state: torch.Tensor
    next_state: torch.Tensor
    success: torch.Tensor
    invalid: torch.Tensor
    reward: torch.Tensor
    starts: torch.Tensor
    first_flags: torch.Tensor
    last: torch.Tensor


def check_inputs(order, cols):
    """Raise ValueError naming the first input of :func:`milegpo_kernels.ordered_rows` that is wrong: a
    column's dtype / shape / device, or (on the host) an ``order`` entry outside ``[0, N)``."""
    n = order.shape[0]
    if order.dtype != torch.int64 or order.dim() != 1:
        raise ValueError(f"ordered_rows: order must be (N,) int64, got {order.dtype} {tuple(order.shape)}")
    for (name, dtype), t in zip(COLUMNS, cols):
        if t.dtype != dtype or t.shape != (n,) or t.device != order.device:
            raise ValueError(f"ordered_rows: {name} must be ({n},) {dtype} on {order.device}, got {t.dtype} "
                             f"{tuple(t.shape)} on {t.device}")
    check_id_ranges({"order": (order, n)}, "ordered_rows")


def ordered_rows_torch(order, group, traj, state, next_state, success, invalid, reward) -> OrderedRows:
    """The torch twin of :func:`ordered_rows`."""
    n, dev = order.shape[0], order.device
    g, tr, s, ns = torch.stack([group, traj, state, next_state]).index_select(1, order).unbind(0)
    y, inv = torch.stack([success, invalid]).index_select(1, order).unbind(0)
    starts = torch.ones(2, n, dtype=torch.int64, device=dev)
    starts[0, 1:] = g[1:] != g[:-1]
    starts[1, 1:] = tr[1:] != tr[:-1]
    last = torch.ones(n, dtype=torch.bool, device=dev)
    last[:-1] = tr[1:] != tr[:-1]
    return OrderedRows(g, tr, s, ns, y, inv, reward.index_select(0, order), starts, starts.bool(), last)
