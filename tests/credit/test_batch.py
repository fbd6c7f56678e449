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


# ---------------------------------------------------------------- from_rows takes each value as it is (issue 20)
@pytest.mark.parametrize("row, field, value, pattern", [
    (1, "group", 0.6, r"row 1: field 'group' is 0.6 \(float\); expected an integer"),  # was rounded into group 0
    (2, "t", 1.9, r"row 2: field 't' is 1.9 \(float\); expected an integer"),  # became t=1
    (0, "state", float(2**53 + 2), r"row 0: field 'state' is 9007199254740994.0 \(float\)"),  # float keys merge
    (3, "next_state", 2.0, r"row 3: field 'next_state' is 2.0 \(float\)"),  # even a whole float: never rounded
    (0, "traj", "0", r"row 0: field 'traj' is '0' \(str\); expected an integer"),
    (1, "group", True, r"row 1: field 'group' is True \(bool\); expected an integer"),
    (2, "state", np.float64(3.0), r"row 2: field 'state' is np.float64\(3.0\) \(float64\)"),
    (0, "state", 2**63, r"row 0: field 'state' is 9223372036854775808, outside int64"),
    (1, "state", np.uint64(2**64 - 1), r"row 1: field 'state' is 18446744073709551615, outside int64"),
    (1, "reward", "1.0", r"row 1: field 'reward' is '1.0' \(str\); expected a real number"),
    (1, "reward", True, r"row 1: field 'reward' is True \(bool\); expected a real number"),
    (2, "success", 0.0, r"row 2: field 'success' is 0.0 \(float\); expected a bool"),
    (0, "invalid", "no", r"row 0: field 'invalid' is 'no' \(str\); expected a bool"),
])
def test_from_rows_refuses_values_that_are_not_exactly_their_kind(row, field, value, pattern):
    from milegpo.credit import BatchTypeError

    rows = rows_ok()
    rows[row] = {**rows[row], field: value}
    with pytest.raises(BatchTypeError, match=pattern) as info:
        StepBatch.from_rows(rows)
    assert isinstance(info.value, BatchError) and isinstance(info.value, TypeError)


def test_from_rows_takes_numpy_scalars_as_their_values():
    rows = [{**r, "group": np.int32(r["group"]), "state": np.int64(r["state"]), "success": np.bool_(r["success"]),
             "reward": np.float32(r["reward"]), "invalid": int(r["invalid"])} for r in rows_ok()]
    assert StepBatch.from_rows(rows).rows() == StepBatch.from_rows(rows_ok()).rows()
    big = [{**r, "group": np.uint64(2**63 - 2)} for r in rows_ok()]
    assert int(StepBatch.from_rows(big).group[0]) == 2**63 - 2  # exact, not through a float


# ---------------------------------------------------------------- rewards bounded where they enter (issue 20)
def _two_trajectories(rewards_a, rewards_b):
    """One group: trajectory 0 fails with ``rewards_a``, trajectory 1 wins with ``rewards_b`` (its last step)."""
    rows = []
    for traj, (rewards, won) in enumerate(((rewards_a, False), (rewards_b, True))):
        for t, r in enumerate(rewards):
            last = t == len(rewards) - 1
            rows.append(dict(group=0, traj=traj, t=t, state=10 * traj + t + 1,
                             next_state=SINK if (won and last) else 10 * traj + t + 2, success=won, reward=r))
    return rows


@pytest.mark.parametrize("rewards_a, rewards_b, pattern", [
    ([0.0, 1e155], [1.0], r"row 1 \(traj 0, t 1\): reward is 1e\+155, expected \|reward\| <= 1e\+12"),
    ([0.0], [-3e12], r"row 1 \(traj 1, t 0\): reward is -3e\+12"),
    ([1e308, 1e308], [1.0], r"row 0 .*reward is 1e\+308"),  # their sum is inf
    ([6e11, -6e11], [1.0], r"row 0 \(traj 0, t 0\): the sum of \|reward\| over trajectory 0's rows is 1.2e\+12, "
                          r"expected at most 1e\+12"),
])
def test_huge_rewards_are_refused(rewards_a, rewards_b, pattern):
    rows = _two_trajectories(rewards_a, rewards_b)
    with pytest.raises(BatchError, match=pattern):
        StepBatch.from_rows(rows)
    cols = {k: [r.get(k, False) for r in rows] for k in ("group", "traj", "t", "state", "next_state", "success",
                                                         "reward", "invalid")}
    with pytest.raises(BatchError, match=pattern):  # the constructor: the same validation
        StepBatch(**cols)


@pytest.mark.parametrize("method", ["grpo", "gigpo", "graphgpo", "milegpo"])
def test_rewards_at_the_limit_give_finite_advantages_on_every_backend(method):
    from milegpo.credit import REWARD_LIMIT, presets

    # 1e155 zeroed the group's advantages (its variance overflowed); at the bound every statistic stays finite
    batch = StepBatch.from_rows(_two_trajectories([REWARD_LIMIT / 2, -REWARD_LIMIT / 2], [REWARD_LIMIT]))
    for config in (presets.ALFWORLD, presets.WEBSHOP):  # mean_std and mean (advantages keep the rewards' scale)
        results = {b: estimate(batch, method, config, backend=b).advantages for b in ("reference", "torch", "triton")}
        for backend, adv in results.items():
            assert torch.isfinite(adv).all() and adv.abs().max() > 0, (backend, adv)
            assert torch.isfinite(adv.float()).all() and torch.isfinite(adv.float().square().sum())  # the loss's fp32
        ref = results["reference"]
        for backend in ("torch", "triton"):
            torch.testing.assert_close(results[backend], ref, rtol=1e-12, atol=1e-12 * float(ref.abs().max()))


# ---------------------------------------------------------------- StepBatch files (issue 20)
def test_save_and_load_name_the_npz_file_as_numpy_does(tmp_path):
    b = StepBatch.from_rows(rows_ok())
    assert b.save(tmp_path / "x") == tmp_path / "x.npz" and (tmp_path / "x.npz").is_file()
    assert StepBatch.load(tmp_path / "x").rows() == b.rows()  # load("x") finds what save("x") wrote
    assert StepBatch.load(str(tmp_path / "x.npz")).rows() == b.rows()
    assert b.save(tmp_path / "y.npz") == tmp_path / "y.npz"
    with pytest.raises(FileNotFoundError, match=r"nope: no such StepBatch file \(nor .*nope.npz\)"):
        StepBatch.load(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match=r"gone.npz: no such StepBatch file$"):
        StepBatch.load(tmp_path / "gone.npz")


def _bad_files(tmp_path):
    """(file, what the error says) for every kind of file that holds no StepBatch."""
    import zipfile

    good = StepBatch.from_rows(rows_ok()).save(tmp_path / "good.npz")
    data = good.read_bytes()
    cases = []

    def write(name, content, pattern):
        path = tmp_path / name
        path.write_bytes(content)
        cases.append((path, pattern))

    write("empty.npz", b"", r"empty file \(0 bytes\), not a StepBatch .npz file")
    write("text.npz", b"group,traj,t\n0,0,0\n", r"not a .npz archive \(it starts with b'group,tr'\)")
    write("truncated.npz", data[: len(data) // 2], r"unreadable .npz archive, truncated or corrupt \(BadZipFile")
    write("cut_end.npz", data[:-30], r"unreadable .npz archive, truncated or corrupt")
    np.save(tmp_path / "array.npy", np.arange(4))
    cases.append((tmp_path / "array.npy", r"a single .npy array, not a StepBatch .npz archive"))
    np.savez(tmp_path / "other.npz", a=np.arange(3))
    cases.append((tmp_path / "other.npz", r"not a StepBatch file, missing arrays \['group', .*\] \(it holds \['a'\]\)"))
    with zipfile.ZipFile(tmp_path / "plain.zip", "w") as z:
        z.writestr("group.npy", "not an array")
    cases.append((tmp_path / "plain.zip", r"missing arrays"))
    cols = StepBatch.from_rows(rows_ok()).to_numpy()
    np.savez(tmp_path / "pickled.npz", **{**cols, "group": np.array([object()] * 4, dtype=object)})
    cases.append((tmp_path / "pickled.npz", r"unreadable .npz archive, truncated or corrupt \(ValueError: .*pickle"))
    np.savez(tmp_path / "float_ids.npz", **{**cols, "group": cols["group"].astype(np.float64)})
    cases.append((tmp_path / "float_ids.npz", r"StepBatch.group: expected an integer dtype"))
    np.savez(tmp_path / "broken_rows.npz", **{**cols, "t": np.array([1, 0, 0, 2])})
    cases.append((tmp_path / "broken_rows.npz", r"row 3 \(traj 0, t 2\): step indices"))
    (tmp_path / "folder.npz").mkdir()
    cases.append((tmp_path / "folder.npz", r"a folder, not a StepBatch .npz file"))
    return cases


def test_load_names_the_file_and_what_is_wrong(tmp_path):
    for path, pattern in _bad_files(tmp_path):
        with pytest.raises(BatchError, match=pattern) as info:
            StepBatch.load(path)
        assert str(info.value).startswith(f"{path}: "), str(info.value)


def test_load_of_bit_flipped_files_is_a_batch_error_or_the_same_batch(tmp_path):
    good = StepBatch.from_rows(rows_ok())
    data = good.save(tmp_path / "good.npz").read_bytes()
    outcomes = {"same": 0, "refused": 0}
    flipped = tmp_path / "flipped.npz"
    for position in range(len(data)):  # one bit of every byte: headers, compressed arrays, the zip directory
        corrupt = bytearray(data)
        corrupt[position] ^= 1 << (position % 8)
        flipped.write_bytes(bytes(corrupt))
        try:
            loaded = StepBatch.load(flipped)
        except BatchError as e:
            assert str(e).startswith(f"{flipped}: "), (position, str(e))
            outcomes["refused"] += 1
        else:  # a flip in a field the reader ignores (a timestamp): the same rows, never other ones
            assert loaded.rows() == good.rows(), position
            outcomes["same"] += 1
    assert outcomes["refused"] > 0.5 * len(data), outcomes


# ---------------------------------------------------------------- the milestone field (issue 47)
def _with_milestones(rows: list, flags: list) -> list:
    return [{**r, "milestone": m} for r, m in zip(rows, flags)]


def test_milestone_is_optional_and_all_false_when_absent():
    b = StepBatch.from_rows(rows_ok())
    assert b.milestone.dtype == torch.bool and not b.milestone.any() and b.milestone.shape == (4,)
    cols = {k: [r[k] for r in rows_ok()] for k in rows_ok()[0]}
    assert not StepBatch(**cols).milestone.any() and not StepBatch(**cols, milestone=None).milestone.any()
    assert [r["milestone"] for r in b.rows()] == [False] * 4
    assert not StepBatch.from_rows([]).milestone.shape[0]


def test_milestone_is_carried_by_every_copy():
    flags = [True, False, False, True]
    b = StepBatch.from_rows(_with_milestones(rows_ok(), flags))
    assert b.milestone.tolist() == flags and [r["milestone"] for r in b.rows()] == flags
    assert b.as_dict()["milestone"] is b.milestone and b.to_numpy()["milestone"].tolist() == flags
    assert b.to("cpu").milestone.tolist() == flags
    assert b.select(torch.tensor([3, 1])).milestone.tolist() == [True, False]
    other = StepBatch.from_rows([{**r, "traj": r["traj"] + 100} for r in rows_ok()])
    assert StepBatch.concat([b, other]).milestone.tolist() == flags + [False] * 4
    assert StepBatch(**b.as_dict(), validate=False).milestone.tolist() == flags
    assert StepBatch.from_rows(b.rows()).milestone.tolist() == flags


def test_milestone_is_validated_as_invalid_is():
    from milegpo.credit import BatchTypeError

    cols = {k: [r[k] for r in rows_ok()] for k in rows_ok()[0]}
    with pytest.raises(TypeError, match=r"StepBatch.milestone: expected bool \(or 0/1\), row 2 holds 3"):
        StepBatch(**cols, milestone=[0, 0, 3, 0])
    with pytest.raises(TypeError, match=r"StepBatch.milestone: expected bool, got torch.float64"):
        StepBatch(**cols, milestone=torch.zeros(4, dtype=torch.float64))
    with pytest.raises(BatchError, match="different lengths"):
        StepBatch(**cols, milestone=[True, False])
    with pytest.raises(BatchTypeError, match=r"row 1: field 'milestone' is 'yes' \(str\); expected a bool"):
        StepBatch.from_rows(_with_milestones(rows_ok(), [False, "yes", False, False]))
    with pytest.raises(BatchTypeError, match=r"row 0: field 'milestone' is 1.0 \(float\); expected a bool"):
        StepBatch.from_rows(_with_milestones(rows_ok(), [1.0, False, False, False]))
    assert StepBatch(**cols, milestone=[1, 0, 0, 1]).milestone.tolist() == [True, False, False, True]


def test_milestone_saved_and_loaded_and_an_older_file_loads_all_false(tmp_path):
    flags = [False, True, True, False]
    b = StepBatch.from_rows(_with_milestones(rows_ok(), flags))
    assert StepBatch.load(b.save(tmp_path / "b.npz")).milestone.tolist() == flags
    # a file written before the field existed: the eight arrays only
    old = {k: v for k, v in StepBatch.from_rows(rows_ok()).to_numpy().items() if k != "milestone"}
    np.savez_compressed(tmp_path / "old.npz", **old)
    loaded = StepBatch.load(tmp_path / "old.npz")
    assert loaded.milestone.tolist() == [False] * 4 and loaded.rows() == StepBatch.from_rows(rows_ok()).rows()
    np.savez(tmp_path / "bad.npz", **{**b.to_numpy(), "milestone": np.array([0.5, 0, 0, 0])})
    with pytest.raises(BatchError, match=r"bad.npz: StepBatch.milestone: expected bool"):
        StepBatch.load(tmp_path / "bad.npz")


def test_a_batch_without_milestones_gives_every_other_method_the_same_bytes():
    """Only BEACON reads ``milestone``: every other method's result on a batch with random flags is bit for bit
    its result without them, on the reference and the torch pipeline."""
    from milegpo.credit import METHODS

    from .batches import make_batch

    plain = make_batch(11, n_groups=3, k=4, horizon=6)
    flags = torch.from_numpy(np.random.default_rng(3).random(len(plain)) < 0.4)
    flagged = StepBatch(**{**plain.as_dict(), "milestone": flags})
    assert flagged.milestone.any()
    for method in METHODS:
        if method == "beacon":
            continue
        for backend in ("reference", "torch"):
            a, b = (estimate(x, method, backend=backend) for x in (plain, flagged))
            assert a.advantages.numpy().tobytes() == b.advantages.numpy().tobytes(), (method, backend)
            for k, v in a.rows.items():
                assert v.numpy().tobytes() == b.rows[k].numpy().tobytes(), (method, backend, k)
