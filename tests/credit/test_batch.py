"""StepBatch validation (spec section 1), its row order and its I/O."""

import numpy as np
import pytest
import torch

from milegpo.credit import SINK, BatchError, StepBatch, estimate

from .batches import rows_ok


def test_valid_batch_and_roundtrip(tmp_path):
    b = StepBatch.from_rows(rows_ok())
    assert len(b) == 4
    assert b.reward.dtype == torch.float64 and b.state.dtype == torch.int64 and b.success.dtype == torch.bool
    path = tmp_path / "b.npz"
    b.save(path)
    c = StepBatch.load(path)
    for k, v in b.as_dict().items():
        assert torch.equal(v, getattr(c, k))
    assert c.rows() == b.rows()


def test_row_order_found_while_validating_and_carried():
    from milegpo_kernels import lexsort

    from .batches import make_batch

    b = make_batch(4, n_groups=3, k=4, horizon=6)
    shuffled = b.select(torch.randperm(len(b), generator=torch.Generator().manual_seed(0)))
    for batch in (b, shuffled, StepBatch.from_rows(rows_ok())):
        assert torch.equal(batch.row_order, lexsort(batch.group, batch.traj, batch.t))
        assert torch.equal(batch.to("cpu").row_order, batch.row_order)
    raw = StepBatch(**shuffled.as_dict(), validate=False)
    assert raw.row_order is None and raw.to("cpu").row_order is None
    with pytest.raises(BatchError, match=r"row_order must be \(4,\) int64"):
        StepBatch.from_rows(rows_ok(), validate=False, _row_order=torch.arange(3))
    r_raw, r_val = estimate(raw, "milegpo", backend="torch"), estimate(shuffled, "milegpo", backend="torch")
    assert torch.equal(r_raw.advantages, r_val.advantages)  # the pipeline sorts an unvalidated batch itself


def test_with_row_order_carries_an_order_into_a_copy():
    from .batches import make_batch

    b = make_batch(5, n_groups=2, k=3, horizon=5)
    raw = StepBatch(**b.as_dict(), validate=False)
    carried = raw.with_row_order(b.row_order)
    assert carried is not raw and raw.row_order is None and carried.row_order is b.row_order
    assert all(getattr(carried, k) is getattr(raw, k) for k in b.as_dict())  # the same tensors, not copies
    assert carried.with_row_order(None).row_order is None
    assert StepBatch(**b.as_dict(), validate=False, _row_order=b.row_order).row_order is b.row_order  # older callers
    for bad, what in ((b.row_order[1:], rf"\({len(b) - 1},\)"), (b.row_order.to(torch.int32), "torch.int32")):
        with pytest.raises(BatchError, match=rf"row_order must be \({len(b)},\) int64 on cpu, got .*{what}"):
            raw.with_row_order(bad)
    a_raw, a_carried = (estimate(x, "milegpo", backend="torch").advantages for x in (raw, carried))
    assert torch.equal(a_carried, a_raw)  # the pipeline sorts the rows itself, or takes the carried order


def test_empty_batch():
    b = StepBatch.from_rows([])
    assert len(b) == 0
    r = estimate(b, "milegpo", backend="torch")
    assert r.advantages.shape == (0,)


def _mutate(i, **changes):
    rows = rows_ok()
    rows[i] = {**rows[i], **changes}
    return rows


@pytest.mark.parametrize(
    "rows, pattern",
    [
        (_mutate(1, next_state=7), r"row 1 \(traj 0, t 0\): next_state 7 differs from the state"),
        (_mutate(3, next_state=9), r"row 3 .*successful trajectory must have next_state == SINK"),
        (_mutate(0, next_state=SINK), r"row 0 .*failed trajectory ends in the success sink"),
        (_mutate(2, state=SINK), r"row 2 .*sink .* is used as a state"),
        (_mutate(0, t=2), r"row 0 \(traj 1, t 2\): step indices .* expected t=1"),
        (_mutate(2, t=1), r"trajectory 1 has more than one row with t=1"),
        (_mutate(1, t=-1), r"step indices"),
        (_mutate(0, reward=float("nan")), r"row 0 .*reward is nan"),
        (_mutate(0, reward=float("inf")), r"row 0 .*reward is inf"),
        (_mutate(0, group=5), r"row 0 .*group differs"),
        (_mutate(0, success=True), r"success differs"),
    ],
)
def test_malformed_rows_name_the_row(rows, pattern):
    with pytest.raises(BatchError, match=pattern):
        StepBatch.from_rows(rows)


def test_lengths_and_dtypes():
    cols = {k: [r[k] for r in rows_ok()] for k in rows_ok()[0]}
    bad = {**cols, "reward": cols["reward"][:3]}
    with pytest.raises(BatchError, match="different lengths"):
        StepBatch(**bad)
    with pytest.raises(TypeError, match=r"StepBatch.state: expected an integer dtype"):
        StepBatch(**{**cols, "state": np.asarray(cols["state"], dtype=np.float64)})
    with pytest.raises(TypeError, match=r"StepBatch.success: expected bool"):
        StepBatch(**{**cols, "success": [0.0, 1.0, 0.0, 1.0]})
    with pytest.raises(TypeError, match=r"StepBatch.invalid: expected bool \(or 0/1\), row 1 holds 2"):
        StepBatch(**{**cols, "invalid": [0, 2, 0, 0]})
    with pytest.raises(TypeError, match="expected numbers"):
        StepBatch(**{**cols, "group": ["a", "b", "c", "d"]})
    with pytest.raises(ValueError, match="1-d"):
        StepBatch(**{**cols, "traj": np.zeros((4, 1), dtype=np.int64)})
    with pytest.raises(BatchError, match=r"row 2: missing key"):
        StepBatch.from_rows(rows_ok()[:2] + [{"group": 0}])
    with pytest.raises(BatchError, match=r"unknown key"):
        StepBatch.from_rows([{**rows_ok()[0], "action": 3}])
    # 0/1 integers are accepted for the bool fields
    ok = StepBatch(**{**cols, "success": [0, 1, 0, 1], "invalid": [1, 0, 0, 0]})
    assert ok.success.dtype == torch.bool
