"""The rows of a rollout batch in (group, traj, t) order, with their run boundaries: one op.

:func:`ordered_rows` gathers the batch's columns by a row order (the permutation that sorts
the rows by group, trajectory and step) and marks where runs start and end: a row that
starts a task group, a row that starts a trajectory, a row that ends one. The credit
pipeline numbers groups and trajectories by these runs (a cumulative sum of the starts).

The torch twin is a dozen small ops (gathers, comparisons of neighbours, fills); the
Triton kernel does it in one pass over the rows.

Inputs: ``order`` (N,) int64, a permutation of ``[0, N)``; ``group``, ``traj``, ``state``,
``next_state`` (N,) int64; ``success``, ``invalid`` (N,) bool; ``reward`` (N,) float64.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ._backend import resolve
from ._common import check_id_ranges

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


def _check(order, cols):
    n = order.shape[0]
    if order.dtype != torch.int64 or order.dim() != 1:
        raise ValueError(f"ordered_rows: order must be (N,) int64, got {order.dtype} {tuple(order.shape)}")
    for (name, dtype), t in zip(COLUMNS, cols):
        if t.dtype != dtype or t.shape != (n,) or t.device != order.device:
            raise ValueError(f"ordered_rows: {name} must be ({n},) {dtype} on {order.device}, got {t.dtype} "
                             f"{tuple(t.shape)} on {t.device}")
    check_id_ranges({"order": (order, n)}, "ordered_rows")


def ordered_rows(order, group, traj, state, next_state, success, invalid, reward, *,
                 backend: str = "auto") -> OrderedRows:
    """See the module."""
    cols = (group, traj, state, next_state, success, invalid, reward)
    _check(order, cols)
    if resolve(backend, order) == "triton":
        from .triton_rows import ordered_rows_triton

        return ordered_rows_triton(order, *cols)
    return ordered_rows_torch(order, *cols)


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
