"""The result type, the column check and the torch twin of :func:`milegpo_kernels.dense_ids`
(stable lexicographic sorts); the op is described in :mod:`milegpo_kernels.grouping`."""

from __future__ import annotations

from typing import NamedTuple

import torch


class DenseIds(NamedTuple):
    """ids: (M,) int64 in [0, count); count: 0-d int64 tensor; is_first: (M,) bool,
    True for exactly one input position of every distinct tuple."""

    ids: torch.Tensor
    count: torch.Tensor
    is_first: torch.Tensor


def check_cols(cols: tuple[torch.Tensor, ...]) -> int:
    """The columns' length M; raises naming the first column that is not (M,) int64 on column 0's device."""
    if not cols:
        raise ValueError("dense_ids needs at least one column")
    m = cols[0].shape[0]
    for i, c in enumerate(cols):
        if c.dim() != 1:
            raise ValueError(f"dense_ids: column {i} must be 1-d, got shape {tuple(c.shape)}")
        if c.dtype != torch.int64:
            raise TypeError(f"dense_ids: column {i} must be int64, got {c.dtype}")
        if c.shape[0] != m:
            raise ValueError(f"dense_ids: column {i} has length {c.shape[0]}, column 0 has {m}")
        if c.device != cols[0].device:
            raise ValueError(f"dense_ids: column {i} is on {c.device}, column 0 on {cols[0].device}")
    return m


def lexsort(*cols: torch.Tensor) -> torch.Tensor:
    """Permutation sorting the tuples (cols[0], cols[1], ...) ascending; stable."""
    order = torch.sort(cols[-1], stable=True).indices  # the last key first, then each earlier one
    for c in reversed(cols[:-1]):
        order = order.index_select(0, torch.sort(c.index_select(0, order), stable=True).indices)
    return order


def dense_ids_torch(*cols: torch.Tensor) -> DenseIds:
    m = check_cols(cols)
    device = cols[0].device
    if m == 0:
        empty = torch.empty(0, dtype=torch.int64, device=device)
        return DenseIds(empty, torch.zeros((), dtype=torch.int64, device=device), empty.bool())
    order = torch.sort(cols[0], stable=True).indices if len(cols) == 1 else lexsort(*cols)
    boundary = torch.zeros(m, dtype=torch.bool, device=device)
    boundary[0] = True
    for c in cols:
        cs = c.index_select(0, order)
        boundary[1:] |= cs[1:] != cs[:-1]
    rank = torch.cumsum(boundary.to(torch.int64), 0) - 1
    ids = torch.empty(m, dtype=torch.int64, device=device).scatter_(0, order, rank)
    is_first = torch.empty(m, dtype=torch.bool, device=device).scatter_(0, order, boundary)
    return DenseIds(ids, rank[-1] + 1, is_first)
