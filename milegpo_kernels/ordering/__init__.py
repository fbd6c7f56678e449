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

from .._backend import resolve
from .torch_ops import COLUMNS, OrderedRows, check_inputs, ordered_rows_torch

__all__ = ["COLUMNS", "OrderedRows", "ordered_rows", "ordered_rows_torch"]


def ordered_rows(order, group, traj, state, next_state, success, invalid, reward, *,
                 backend: str = "auto") -> OrderedRows:
    """See the module."""
    cols = (group, traj, state, next_state, success, invalid, reward)
    check_inputs(order, cols)
    if resolve(backend, order) == "triton":
        from .triton_ops import ordered_rows_triton

        return ordered_rows_triton(order, *cols)
    return ordered_rows_torch(order, *cols)
