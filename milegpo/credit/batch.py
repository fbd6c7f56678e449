"""StepBatch: one row per environment step (spec section 1), validated.

Rows may come in any order; the estimators order them by (traj, t) themselves and
return per-row results in input order. A malformed batch is refused with a
:class:`BatchError` naming the first offending row (its index in the input) and
what was expected; a file that is not a StepBatch is refused naming the file.

Rewards are bounded where they enter (:data:`REWARD_LIMIT`), so that every statistic the
estimators compute from them is finite: see :func:`validate_batch`.
"""

from __future__ import annotations

import copy
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import torch

from ..files import atomic_write
from ..state_keys import SINK  # re-exported: the one definition, shared with milegpo.envs

FIELDS = ("group", "traj", "t", "state", "next_state", "success", "reward", "invalid", "milestone")
_INT_FIELDS = ("group", "traj", "t", "state", "next_state")
_BOOL_FIELDS = ("success", "invalid", "milestone")
#: the fields a batch may be built without (:meth:`StepBatch.from_rows`, the constructor, a ``.npz`` file): all False
OPTIONAL_FIELDS = ("invalid", "milestone")

#: the largest sum of ``|reward|`` over one trajectory's rows (so also the largest ``|reward|`` of a row) a batch
#: may hold; see :func:`validate_batch` for why rewards are refused above it rather than rescaled.
REWARD_LIMIT = 1e12


class BatchError(ValueError):
    """A StepBatch that breaks the spec's input contract (or a file that holds none)."""


class BatchTypeError(BatchError, TypeError):
    """A row value of the wrong kind (:meth:`StepBatch.from_rows`): a float or a string where an id is due."""


def _is_integer_type(kind: type) -> bool:
    return issubclass(kind, (int, np.integer)) and not issubclass(kind, (bool, np.bool_))


def _is_bool_type(kind: type) -> bool:
    return issubclass(kind, (bool, np.bool_)) or _is_integer_type(kind)  # 0 / 1 integers: checked by the constructor


def _is_real_type(kind: type) -> bool:
    return _is_integer_type(kind) or issubclass(kind, (float, np.floating))


#: field -> (the value types :meth:`StepBatch.from_rows` takes, what it says it expected)
_ROW_VALUE_KINDS = {
    **{name: (_is_integer_type, "an integer (int or numpy integer; a float is never rounded to an id)")
       for name in _INT_FIELDS},
    **{name: (_is_bool_type, "a bool (or the integer 0 / 1)") for name in _BOOL_FIELDS},
    "reward": (_is_real_type, "a real number (int or float, numpy's too)"),
}


def _row_column(name: str, values: list) -> np.ndarray:
    """The values of field ``name`` of :meth:`StepBatch.from_rows`' rows as one numpy array.

    Every value must be of a kind :data:`_ROW_VALUE_KINDS` allows for the field, exactly: a float id
    (``group=0.3``, ``t=1.9``, a float key above 2**53), a numeric string or a bool id is refused with a
    :class:`BatchTypeError` naming the first such row, never converted; an integer outside int64 too."""
    accepts, expected = _ROW_VALUE_KINDS[name]
    kinds = set(map(type, values))
    if not all(accepts(kind) for kind in kinds):
        row = next(i for i, v in enumerate(values) if not accepts(type(v)))
        raise BatchTypeError(f"row {row}: field {name!r} is {values[row]!r} ({type(values[row]).__name__}); "
                             f"expected {expected}")
    if name in _INT_FIELDS:
        if kinds != {int}:
            values = [int(v) for v in values]  # numpy integers: exact Python ints, range-checked below
        try:
            return np.asarray(values, dtype=np.int64)
        except OverflowError:
            row = next(i for i, v in enumerate(values) if not -(2 ** 63) <= v < 2 ** 63)
            raise BatchTypeError(f"row {row}: field {name!r} is {values[row]}, outside int64 "
                                 f"[-2**63, 2**63 - 1]") from None
    return np.asarray(values, dtype=np.float64 if name == "reward" else None)


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
    the action could not be parsed or was not admissible; milestone: bool, the step
    completed one of the environment's verifiable subgoals (``info["milestone"]`` of the
    step, :mod:`milegpo.envs.base`; optional: None, or absent from a row or a file, is all
    False). Only BEACON reads ``milestone``; every other method's result is the same
    without it.

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
    milestone: torch.Tensor

    def __init__(self, group, traj, t, state, next_state, success, reward, invalid, milestone=None, *,
                 validate: bool = True, device=None, _row_order: torch.Tensor | None = None):
        values = dict(zip(FIELDS, (group, traj, t, state, next_state, success, reward, invalid, milestone)))
        tensors = {k: _to_tensor(k, v, device) for k, v in values.items() if v is not None}
        if milestone is None:  # absent: no step completed a subgoal (the shape of the other fields, their device)
            tensors["milestone"] = torch.zeros_like(tensors["success"], dtype=torch.bool)
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
        """Build from a list of dicts with the keys of :data:`FIELDS` (``invalid`` and ``milestone`` may be
        omitted: False).

        Each value must be of its field's kind as it is (see :func:`_row_column`): ids and step indices
        ints, ``success`` / ``invalid`` / ``milestone`` bools (or 0 / 1), ``reward`` a real number; anything
        else, a float id or a numeric string among them, is a :class:`BatchTypeError` naming the row and the
        field."""
        rows = list(rows)
        cols: dict[str, list] = {k: [] for k in FIELDS}
        for i, r in enumerate(rows):
            missing = [k for k in FIELDS if k not in r and k not in OPTIONAL_FIELDS]
            if missing:
                raise BatchError(f"row {i}: missing key(s) {missing}; a row needs {list(FIELDS)}")
            extra = sorted(set(r) - set(FIELDS))
            if extra:
                raise BatchError(f"row {i}: unknown key(s) {extra}; a row has {list(FIELDS)}")
            for k in FIELDS:
                cols[k].append(r.get(k, False))
        empty = {"reward": np.float64, **{k: bool for k in _BOOL_FIELDS}}
        arrays = {k: _row_column(k, v) if v else np.zeros(0, dtype=empty.get(k, np.int64)) for k, v in cols.items()}
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

    def save(self, path) -> Path:
        """Write the batch as a ``.npz`` file (``replay`` reads it back), whole or not at all (a temporary file
        renamed over ``path``), one array per field of :data:`FIELDS` (``milestone`` too, all False where no
        step completed a subgoal); returns the file's path, ``path`` with ``.npz`` appended when it has another
        suffix or none (as numpy does)."""
        file = _npz_path(path)
        with atomic_write(file, "wb") as f:  # whole or absent: a crash mid-save leaves no torn batch
            np.savez_compressed(f, **self.to_numpy())
        return file

    @classmethod
    def load(cls, path) -> "StepBatch":
        """The batch :meth:`save` wrote to ``path`` (``load("x")`` finds ``x.npz``, as ``save("x")`` writes it).

        A file written before ``milestone`` existed (no such array) loads with ``milestone`` all False.
        A missing file is a ``FileNotFoundError``; a file that holds no StepBatch (empty, text, a single
        ``.npy`` array, truncated or corrupt) and arrays that break the batch contract are a
        :class:`BatchError`; every message names the file and what is wrong."""
        file = Path(path)
        if not file.exists() and _npz_path(file).exists():
            file = _npz_path(file)
        if not file.exists():
            tried = "" if file == _npz_path(file) else f" (nor {_npz_path(file)})"
            raise FileNotFoundError(f"{file}: no such StepBatch file{tried}")
        arrays = _read_npz(file)
        try:
            return cls(**arrays)
        except (BatchError, TypeError, ValueError) as e:
            raise BatchError(f"{file}: {e}") from None

    @staticmethod
    def concat(batches: "Iterable[StepBatch]") -> "StepBatch":
        batches = list(batches)
        if not batches:
            raise BatchError("StepBatch.concat needs at least one batch")
        return StepBatch(**{k: torch.cat([getattr(b, k) for b in batches]) for k in FIELDS})


def _npz_path(path) -> Path:
    """``path`` as numpy's ``savez`` names the file it writes: ``.npz`` appended unless it ends so."""
    file = Path(path)
    return file if file.suffix == ".npz" else file.with_name(file.name + ".npz")


#: how a file starts: a zip archive (a ``.npz``, or an empty one) and a single ``.npy`` array
_ZIP_MAGIC, _EMPTY_ZIP_MAGIC, _NPY_MAGIC = b"PK\x03\x04", b"PK\x05\x06", b"\x93NUMPY"


def _read_npz(file: Path) -> dict[str, np.ndarray]:
    """The :data:`FIELDS` arrays of the StepBatch file ``file`` (``milestone`` only where the file holds it:
    files saved before it existed lack it); :class:`BatchError` naming the file and what is wrong for anything
    else (a folder, an empty, text or ``.npy`` file, a truncated or corrupt archive, missing arrays, pickled
    objects)."""
    if file.is_dir():
        raise BatchError(f"{file}: a folder, not a StepBatch .npz file")
    with open(file, "rb") as f:
        head = f.read(8)
    if not head:
        raise BatchError(f"{file}: empty file (0 bytes), not a StepBatch .npz file")
    if head.startswith(_NPY_MAGIC):
        raise BatchError(f"{file}: a single .npy array, not a StepBatch .npz archive of the arrays {list(FIELDS)} "
                         "(StepBatch.save writes one)")
    if not head.startswith((_ZIP_MAGIC, _EMPTY_ZIP_MAGIC)):
        raise BatchError(f"{file}: not a .npz archive (it starts with {head!r}); a StepBatch file is the .npz "
                         "StepBatch.save writes")
    try:
        with zipfile.ZipFile(file) as archive:
            members = {name[:-len(".npy")]: name for name in archive.namelist() if name.endswith(".npy")}
            missing = [k for k in FIELDS if k not in members and k != "milestone"]
            if missing:
                raise BatchError(f"{file}: not a StepBatch file, missing arrays {missing} (it holds "
                                 f"{sorted(members)})")
            # each member read whole, so that zipfile checks its CRC (np.load reads only as far as the array
            # goes: a flipped bit in the data would go unnoticed)
            return {k: np.lib.format.read_array(io.BytesIO(archive.read(members[k])), allow_pickle=False)
                    for k in FIELDS if k in members}
    except BatchError:
        raise
    except Exception as e:  # noqa: BLE001 - zipfile, zlib, numpy's format reader: all say "this file is damaged"
        raise BatchError(f"{file}: unreadable .npz archive, truncated or corrupt ({type(e).__name__}: {e})") from None


def trajectory_order(batch: StepBatch) -> torch.Tensor:
    """Permutation that sorts rows by (traj, t); stable, no host sync."""
    o1 = torch.sort(batch.t, stable=True).indices
    return o1.index_select(0, torch.sort(batch.traj.index_select(0, o1), stable=True).indices)


def validate_batch(batch: StepBatch) -> torch.Tensor:
    """Raise :class:`BatchError` naming the first offending row, or return the permutation that
    sorts the rows by (group, traj, t) (the batch's ``row_order``).

    Rewards: finite, and the sum of ``|reward|`` over each trajectory's rows at most :data:`REWARD_LIMIT`
    (1e12; so every row's ``|reward|`` too). Refused, not computed around: with that bound every quantity
    the estimators form from rewards stays finite and keeps its precision without rescaling anything (an
    episode score Z, a discounted return and a group's mean are at most 1e12 in size, their squares in a
    variance at most ~4e24, far from float64's 1.8e308, and the advantages of ``norm="mean"``, which keep the
    rewards' scale, stay finite in the policy loss's float32), while a reward near 1e155 would overflow the
    group variance to inf and zero the group's advantages, and one near 1e308 the episode score itself.
    Scaling the rewards down instead would change the estimators' arithmetic for every batch and hide a
    reward that is almost certainly a bug; no environment here comes near (ALFWorld 10, WebShop 1).
    """
    n = len(batch)
    if n == 0:
        return torch.zeros(0, dtype=torch.int64, device=batch.device)
    rew = batch.reward
    bad = ~torch.isfinite(rew)
    if bool(bad.any()):
        i = int(torch.nonzero(bad)[0])
        raise BatchError(f"row {i} (traj {int(batch.traj[i])}, t {int(batch.t[i])}): reward is {float(rew[i])}, "
                         "expected a finite number")
    bad = rew.abs() > REWARD_LIMIT
    if bool(bad.any()):
        i = int(torch.nonzero(bad)[0])
        raise BatchError(f"row {i} (traj {int(batch.traj[i])}, t {int(batch.t[i])}): reward is {float(rew[i]):g}, "
                         f"expected |reward| <= {REWARD_LIMIT:g} (milegpo.credit.batch.REWARD_LIMIT)")
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
    trajectory_index = torch.cumsum((~same_prev).to(torch.int64), 0) - 1  # (N,) of the sorted rows
    abs_reward_sum = torch.zeros(n, dtype=rew.dtype, device=batch.device).index_add_(
        0, trajectory_index, rew.index_select(0, order).abs())
    fail(abs_reward_sum.index_select(0, trajectory_index) > REWARD_LIMIT,
         lambda i: f"the sum of |reward| over trajectory {int(batch.traj[i])}'s rows is "
                   f"{float(rew[batch.traj == batch.traj[i]].abs().sum()):g}, expected at most {REWARD_LIMIT:g} "
                   "(milegpo.credit.batch.REWARD_LIMIT)")
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


__all__ = ["SINK", "FIELDS", "OPTIONAL_FIELDS", "REWARD_LIMIT", "StepBatch", "BatchError", "BatchTypeError", "validate_batch",
           "trajectory_order"]
