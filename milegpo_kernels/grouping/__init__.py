"""State-key grouping: tuples of int64 columns -> dense ids.

``dense_ids(group, key)`` turns (group, 64-bit state key) pairs into node ids and
``dense_ids(group, state, next_state)`` turns transitions into edge ids, with no
host synchronisation: the number of distinct tuples stays a 0-d device tensor and
every per-id array downstream is allocated at the static capacity ``M`` (the
number of input tuples).

The torch implementation sorts lexicographically (stable sorts, last column
first) and numbers the runs; ids are then in ascending tuple order. The Triton
implementation may number ids in another order: callers must not rely on the
order, only on ``ids`` being dense in ``[0, count)``.
"""

from __future__ import annotations

import torch

from .._backend import resolve
from .torch_ops import DenseIds, dense_ids_torch, lexsort

__all__ = ["DenseIds", "dense_ids", "dense_ids_torch", "lexsort"]


def dense_ids(*cols: torch.Tensor, backend: str = "auto", **kwargs) -> DenseIds:
    """Dense ids of int64 tuples: ``dense_ids(group, key)`` -> node ids.

    cols: each (M,) int64 on one device. Returns :class:`DenseIds`.
    """
    if resolve(backend, *cols) == "triton":
        from .triton_ops import dense_ids_triton

        return dense_ids_triton(*cols, **kwargs)
    return dense_ids_torch(*cols)
