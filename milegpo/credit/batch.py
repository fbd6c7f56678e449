"""StepBatch: one row per environment step (spec section 1), validated.

Rows may come in any order; the estimators order them by (traj, t) themselves and
return per-row results in input order. A malformed batch is refused with a
:class:`BatchError` naming the first offending row (its index in the input) and
what was expected.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np
import torch

from ..state_keys import SINK  # re-exported: the one definition, shared with milegpo.envs

FIELDS = ("group", "traj", "t", "state", "next_state", "success", "reward", "invalid")
_INT_FIELDS = ("group", "traj", "t", "state", "next_state")
_BOOL_FIELDS = ("success", "invalid")


class BatchError(ValueError):
    """A StepBatch that breaks the spec's input contract."""


def _to_tensor(name: str, value: Any, device=None) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        t = value.detach()
    else:
        arr = np.asarray(value)
        if arr.dtype == object or arr.dtype.kind in "USV":
            raise TypeError(f"StepBatch.{name}: expected numbers, got array of dtype {arr.dtype}")
        t = torch.from_numpy(np.ascontiguousarray(arr)) if arr.size else torch.as_tensor(arr)
    if device is not None:
        t = t.to(device)
    if t.dim() != 1:
        raise ValueError(f"StepBatch.{name}: expected a 1-d array of length N, got shape {tuple(t.shape)}")
    if name in _INT_FIELDS:
        if t.dtype == torch.bool or t.dtype.is_floating_point or t.dtype.is_complex:
            raise TypeError(f"StepBatch.{name}: expected an integer dtype (int64), got {t.dtype}")
        return t.to(torch.int64)
    if name in _BOOL_FIELDS:
        if t.dtype == torch.bool:
            return t
        if t.dtype.is_floating_point or t.dtype.is_complex:
            raise TypeError(f"StepBatch.{name}: expected bool, got {t.dtype}")
        if t.numel() and bool(((t != 0) & (t != 1)).any()):
            bad = int(torch.nonzero((t != 0) & (t != 1))[0])
            raise TypeError(f"StepBatch.{name}: expected bool (or 0/1), row {bad} holds {int(t[bad])}")
        return t.to(torch.bool)
    # reward
    if t.dtype == torch.bool or t.dtype.is_complex:
        raise TypeError(f"StepBatch.reward: expected a float dtype, got {t.dtype}")
    return t.to(torch.float64)


@dataclass(frozen=True, eq=False)
class StepBatch:
    """One row per environment step. Every field is an (N,) tensor after construction.

    group: int64 task-group id q; traj: int64 trajectory id (unique in the batch);
    t: step index 0..T-1; state / next_state: int64 state keys (next_state of a
    successful trajectory's last row is :data:`SINK`); success: bool outcome of the
    row's trajectory; reward: float64 environment reward of the step; invalid: bool,
    the action could not be parsed or was not admissible.

    ``row_order`` (not a field): the permutation that sorts the rows by (group, traj, t),
    found on the host while validating (where the batch is usually built: the rollout
    loop and the trainer build it from numpy arrays), carried along by :meth:`to`, so
    that the credit pipeline on a GPU need not sort the rows again; ``None`` for a batch
    built with ``validate=False`` (then the pipeline sorts them itself).
    :meth:`with_row_order` hands an order validation found to a copy of the rows (as
    :meth:`to` and the CUDA-graph buffers do); the keyword ``_row_order`` of the
    constructor does the same (kept for older callers).
    """

    group: torch.Tensor
    traj: torch.Tensor
    t: torch.Tensor
    state: torch.Tensor
    next_state: torch.Tensor
    success: torch.Tensor
    reward: torch.Tensor
    invalid: torch.Tensor

    def __init__(self, group, traj, t, state, next_state, success, reward, invalid, *, validate: bool = True,
                 device=None, _row_order: torch.Tensor | None = None):
        values = dict(zip(FIELDS, (group, traj, t, state, next_state, success, reward, invalid)))
        tensors = {k: _to_tensor(k, v, device) for k, v in values.items()}
        lengths = {k: v.shape[0] for k, v in tensors.items()}
        if len(set(lengths.values())) > 1:
            raise BatchError(f"StepBatch fields have different lengths: {lengths}")
        devices = {str(v.device) for v in tensors.values()}
        if len(devices) > 1:
            raise BatchError(f"StepBatch fields are on different devices: {sorted(devices)}")
        for k, v in tensors.items():
            object.__setattr__(self, k, v)
        if _row_order is not None:
            self._check_row_order(_row_order)
        object.__setattr__(self, "row_order", validate_batch(self) if validate else _row_order)

    def _check_row_order(self, order: torch.Tensor) -> None:
        n = len(self)
        if order.dtype != torch.int64 or order.shape != (n,) or str(order.device) != str(self.device):
            raise BatchError(f"StepBatch row_order must be ({n},) int64 on {self.device}, got "
                             f"{order.dtype} {tuple(order.shape)} on {order.device}")

    def with_row_order(self, order: torch.Tensor | None) -> "StepBatch":
        """The same rows (the same tensors, not copied) carrying ``order`` as their ``row_order``.

        order: (N,) int64 on the batch's device, the permutation that sorts these rows by
        (group, traj, t): the ``row_order`` that validating them found (moved or copied along
        with the fields, as :meth:`to` does), or ``None`` (the pipeline sorts the rows itself).
        Its dtype, shape and device are checked (:class:`BatchError`); that it sorts the rows
        is not (that is a read of the rows: a host sync on a GPU), so pass only an order
        validation found for these rows.
        """
        if order is not None:
            self._check_row_order(order)
        out = copy.copy(self)
        object.__setattr__(out, "row_order", order)
        return out

    # ------------------------------------------------------------------ helpers
    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, Any]], **kwargs) -> "StepBatch":
        """Build from a list of dicts with the keys of :data:`FIELDS` (``invalid`` may be omitted)."""
        rows = list(rows)
        cols: dict[str, list] = {k: [] for k in FIELDS}
        for i, r in enumerate(rows):
            missing = [k for k in FIELDS if k not in r and k != "invalid"]
            if missing:
                raise BatchError(f"row {i}: missing key(s) {missing}; a row needs {list(FIELDS)}")
            extra = sorted(set(r) - set(FIELDS))
            if extra:
                raise BatchError(f"row {i}: unknown key(s) {extra}; a row has {list(FIELDS)}")
            for k in FIELDS:
                cols[k].append(r.get(k, False))
        dtypes = {"group": np.int64, "traj": np.int64, "t": np.int64, "state": np.int64,
                  "next_state": np.int64, "success": None, "reward": None, "invalid": None}
        arrays = {}
        for k, v in cols.items():
            try:
                arrays[k] = np.asarray(v, dtype=dtypes[k]) if dtypes[k] is not None else np.asarray(v)
            except (TypeError, ValueError, OverflowError) as e:
                raise TypeError(f"StepBatch.from_rows: field {k!r} does not convert to int64: {e}") from None
            if not v:
                arrays[k] = np.zeros(0, dtype={"reward": np.float64, "success": bool, "invalid": bool}.get(k, np.int64))
        return cls(**arrays, **kwargs)

    def __len__(self) -> int:
        return int(self.group.shape[0])

    @property
    def device(self) -> torch.device:
        return self.group.device

    def to(self, device) -> "StepBatch":
        """The batch on ``device``, its ``row_order`` moved along (not found again)."""
        order = None if self.row_order is None else self.row_order.to(device)
        return StepBatch(**{k: getattr(self, k).to(device) for k in FIELDS}, validate=False).with_row_order(order)

    def select(self, index) -> "StepBatch":
        """Rows ``index`` (a bool mask or an index tensor), validated again."""
        return StepBatch(**{k: getattr(self, k)[index] for k in FIELDS})

    def as_dict(self) -> dict[str, torch.Tensor]:
        return {k: getattr(self, k) for k in FIELDS}

    def to_numpy(self) -> dict[str, np.ndarray]:
        return {k: v.cpu().numpy() for k, v in self.as_dict().items()}

    def rows(self) -> list[dict[str, Any]]:
        cols = {k: v.tolist() for k, v in self.as_dict().items()}
        return [dict(zip(FIELDS, vals)) for vals in zip(*(cols[k] for k in FIELDS))]

    def save(self, path) -> None:
        """Write the batch as a ``.npz`` file (``replay`` reads it back)."""
        np.savez_compressed(path, **self.to_numpy())

    @classmethod
    def load(cls, path) -> "StepBatch":
        with np.load(path) as z:
            missing = [k for k in FIELDS if k not in z.files]
            if missing:
                raise BatchError(f"{path}: not a StepBatch file, missing arrays {missing}")
            return cls(**{k: z[k] for k in FIELDS})

    @staticmethod
    def concat(batches: "Iterable[StepBatch]") -> "StepBatch":
        batches = list(batches)
        if not batches:
            raise BatchError("StepBatch.concat needs at least one batch")
        return StepBatch(**{k: torch.cat([getattr(b, k) for b in batches]) for k in FIELDS})


def trajectory_order(batch: StepBatch) -> torch.Tensor:
    """Permutation that sorts rows by (traj, t); stable, no host sync."""
    o1 = torch.sort(batch.t, stable=True).indices
    return o1.index_select(0, torch.sort(batch.traj.index_select(0, o1), stable=True).indices)


def validate_batch(batch: StepBatch) -> torch.Tensor:
    """Raise :class:`BatchError` naming the first offending row, or return the permutation that
    sorts the rows by (group, traj, t) (the batch's ``row_order``)."""
    n = len(batch)
    if n == 0:
        return torch.zeros(0, dtype=torch.int64, device=batch.device)
    rew = batch.reward
    bad = ~torch.isfinite(rew)
    if bool(bad.any()):
        i = int(torch.nonzero(bad)[0])
        raise BatchError(f"row {i} (traj {int(batch.traj[i])}, t {int(batch.t[i])}): reward is {float(rew[i])}, "
                         "expected a finite number")
    bad = batch.state == SINK
    if bool(bad.any()):
        i = int(torch.nonzero(bad)[0])
        raise BatchError(f"row {i} (traj {int(batch.traj[i])}, t {int(batch.t[i])}): the success sink "
                         f"SINK={SINK} is used as a state; it has no outgoing steps")
    order = trajectory_order(batch)
    tr, t = batch.traj[order], batch.t[order]
    same_prev = torch.zeros(n, dtype=torch.bool, device=batch.device)
    same_prev[1:] = tr[1:] == tr[:-1]
    is_last = torch.ones(n, dtype=torch.bool, device=batch.device)
    is_last[:-1] = ~same_prev[1:]
    prev_t = torch.full_like(t, -1)
    prev_t[1:] = t[:-1]
    expected_t = torch.where(same_prev, prev_t + 1, torch.zeros_like(t))

    def fail(mask_sorted: torch.Tensor, message) -> None:
        if bool(mask_sorted.any()):
            rows = order[mask_sorted]
            i = int(rows.min())
            raise BatchError(f"row {i} (traj {int(batch.traj[i])}, t {int(batch.t[i])}): {message(i)}")

    def dup_msg(i):
        return f"trajectory {int(batch.traj[i])} has more than one row with t={int(batch.t[i])}"

    dup = torch.zeros(n, dtype=torch.bool, device=batch.device)
    dup[1:] = same_prev[1:] & (t[1:] == t[:-1])
    fail(dup, dup_msg)
    fail(t != expected_t, lambda i: "step indices of a trajectory must be 0..T-1 without gaps; "
                                     f"expected t={int(expected_t[(order == i).nonzero()[0, 0]])}")
    for name in ("group", "success"):
        col = getattr(batch, name)[order]
        diff = torch.zeros(n, dtype=torch.bool, device=batch.device)
        diff[1:] = same_prev[1:] & (col[1:] != col[:-1])
        fail(diff, lambda i, name=name: f"{name} differs from the trajectory's previous row; "
                                        f"every row of a trajectory must have the same {name}")
    s, ns = batch.state[order], batch.next_state[order]
    mismatch = torch.zeros(n, dtype=torch.bool, device=batch.device)
    mismatch[:-1] = ~is_last[:-1] & (ns[:-1] != s[1:])
    fail(mismatch, lambda i: f"next_state {int(batch.next_state[i])} differs from the state of the "
                             "trajectory's next row")
    succ = batch.success[order]
    fail(is_last & succ & (ns != SINK), lambda i: "the last step of a successful trajectory must have "
                                                  f"next_state == SINK ({SINK}), got {int(batch.next_state[i])}")
    fail(is_last & ~succ & (ns == SINK), lambda i: "a failed trajectory ends in the success sink SINK; "
                                                   "mark it success=True or give its real last observation")
    # every trajectory has one group: a stable sort of the (traj, t) order by group is (group, traj, t)
    return order.index_select(0, torch.sort(batch.group.index_select(0, order), stable=True).indices)


__all__ = ["SINK", "FIELDS", "StepBatch", "BatchError", "validate_batch", "trajectory_order"]
