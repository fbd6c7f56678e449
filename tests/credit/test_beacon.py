"""BEACON (issue 47): every backend against an implementation written here after the official code's structure
(``ZJU-REAL/BEACON`` ``migpo/core_migpo.py``: step rewards per trajectory uid, segment uids by counting the
trajectory's milestones before each row, a mean / std per uid, GiGPO's episode_norm_reward; numpy, ``**`` powers;
it imports nothing of milegpo.credit.beacon), the worked example of docs/methods/beacon.md section 3 by hand, and
the limiting cases (w = 0 is GRPO; no milestone; every step a milestone)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from milegpo.credit import SINK, StepBatch, estimate, presets
from milegpo.credit.synthetic import paths_batch, random_batch
from milegpo_kernels import interpreter_on

from .batches import make_rows

BACKENDS = ["reference", "torch"] + (["triton"] if interpreter_on() or torch.cuda.is_available() else [])
TOL = 1e-9


# ------------------------------------------------------------------ the independent implementation
def official_beacon(batch: StepBatch, cfg) -> dict:
    """BEACON as the official code computes it on its dynamic path, rows taken in (traj, t) order (as one rank
    holds them): returns {"adv", "step_reward", "segment", "segment_adv", "episode_adv"}, each (N,) in the batch's
    row order."""
    rows = batch.rows()
    n = len(rows)
    order = sorted(range(n), key=lambda i: (rows[i]["traj"], rows[i]["t"]))
    uid = np.array([rows[i]["traj"] for i in order])
    index = np.array([rows[i]["group"] for i in order])
    achieved = np.array([rows[i]["milestone"] for i in order], dtype=bool)
    invalid = np.array([rows[i]["invalid"] for i in order], dtype=float)
    remove_std = cfg.beacon_mode == "mean"

    # compute_migpo_step_rewards_dynamic: per trajectory, the reverse decay toward each milestone step, x 10
    step_rewards = np.zeros(n)
    for u in np.unique(uid):
        idx = np.where(uid == u)[0]
        start = 0
        for m in [k for k, i in enumerate(idx) if achieved[i]]:
            for k in range(start, m + 1):
                step_rewards[idx[k]] = (cfg.beacon_gamma ** (m - k)) * 10.0
            start = m + 1
    # the trainer's apply_invalid_action_penalty on step_rewards and on the episode score
    if cfg.beacon_penalty == "return":
        step_rewards = step_rewards - cfg.invalid_penalty * invalid
    totals = {u: sum(rows[i]["reward"] for i in order if rows[i]["traj"] == u) for u in np.unique(uid)}
    scores = np.array([totals[uid[k]] for k in range(n)]) - cfg.invalid_penalty * invalid

    # build_segment_groups_dynamic: the trajectory's milestones before the row
    segment = np.array([sum(1 for j in range(k) if uid[j] == uid[k] and achieved[j]) for k in range(n)])

    def norm(values: np.ndarray, keys: list, single_is_unit: bool) -> np.ndarray:
        out = np.zeros(n)
        for key in dict.fromkeys(keys):
            members = [k for k in range(n) if keys[k] == key]
            x = values[members]
            if len(members) == 1:  # mean 0 (episode) or the value itself (segment), std 1
                mean, std = (0.0 if single_is_unit else x[0]), 1.0
            else:
                mean, std = x.mean(), x.std(ddof=1)
                if x.max() - x.min() <= 1e-12 * max(abs(x.max()), abs(x.min()), 1.0):
                    continue  # equal values: exactly 0 (the library's convention)
            out[members] = (x - mean) if remove_std else (x - mean) / (std + cfg.norm_eps)
        return out

    segment_adv = norm(step_rewards, list(zip(index.tolist(), segment.tolist())), single_is_unit=False)
    episode_adv = norm(scores, index.tolist(), single_is_unit=True)
    adv = episode_adv + cfg.beacon_weight * segment_adv
    back = np.empty(n, dtype=np.int64)
    back[np.array(order)] = np.arange(n)
    return {"adv": adv[back], "step_reward": step_rewards[back], "segment": segment[back],
            "segment_adv": segment_adv[back], "episode_adv": episode_adv[back]}


# ------------------------------------------------------------------ batches
def with_milestones(rows: list, seed: int, p: float) -> StepBatch:
    """``rows`` (make_rows's) with milestone flags drawn at rate ``p`` by their own generator (every winning step
    one), rows shuffled."""
    rng = np.random.default_rng(seed)
    flags = rng.random(len(rows)) < p
    marked = [{**r, "milestone": bool(f) or r["next_state"] == SINK} for r, f in zip(rows, flags)]
    return StepBatch.from_rows([marked[i] for i in rng.permutation(len(marked))])


def batches(small: bool = False) -> dict:
    """Random and adversarial batches: revisits and invalid loops, one-step and one-trajectory groups, all-won and
    all-lost groups, milestones nowhere, everywhere, only on the last step, runs of consecutive milestones."""
    rng = np.random.default_rng

    def rows(seed, **kw):
        return make_rows(rng(seed), **kw)

    out = {
        "adversarial": with_milestones(rows(1, n_groups=3, k=5, horizon=9, n_states=4), 11, 0.3),
        "one-step": with_milestones(rows(2, n_groups=2, k=4, horizon=1, n_states=3, one_step=True), 12, 0.5),
        "every-step": with_milestones(rows(3, n_groups=2, k=3, horizon=6, n_states=4), 13, 1.0),
        "no-milestone": StepBatch.from_rows(rows(4, n_groups=2, k=4, horizon=6, n_states=4)),
        "singleton-groups": random_batch(3, [1, 4, 1], 8, seed=5, n_states=5, invalid_p=0.3),
        "all-won": random_batch(2, 4, 6, seed=6, n_states=4, outcome="success"),
        "partial-rewards": random_batch(2, 5, 7, seed=7, n_states=5, win_reward=3.5),
    }
    if not small:
        out["random"] = random_batch(6, 8, 25, seed=8)
        out["dense"] = with_milestones(rows(9, n_groups=4, k=8, horizon=30, n_states=3, p_invalid=0.4), 19, 0.6)
    return out


CONFIGS = {
    "beacon_alfworld": presets.BEACON_ALFWORLD,
    "beacon_webshop": presets.BEACON_WEBSHOP,
    "beacon_scienceworld": presets.BEACON_SCIENCEWORLD,
    "mean_std-no-step-penalty": presets.ALFWORLD.replace(beacon_mode="mean_std", beacon_penalty="none"),
    "gamma1-norm-differs": presets.WEBSHOP.replace(beacon_gamma=1.0, beacon_mode="mean_std", norm_eps=0.0),
    "gamma0-w3": presets.ALFWORLD.replace(beacon_gamma=0.0, beacon_weight=3.0, invalid_penalty=2.5),
}


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the no-milestone batch's warning (tested below)
        return fn(*args, **kwargs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_agrees_with_the_official_codes_structure(backend):
    small = backend == "triton" and not torch.cuda.is_available()
    device = "cuda" if backend == "triton" and torch.cuda.is_available() else "cpu"
    configs = {k: CONFIGS[k] for k in ("beacon_webshop", "mean_std-no-step-penalty")} if small else CONFIGS
    for bname, batch in batches(small).items():
        for cname, cfg in configs.items():
            got = _quiet(estimate, batch.to(device), "beacon", cfg, backend=backend)
            want = official_beacon(batch, cfg)
            where = f"{bname}/{cname}"
            np.testing.assert_allclose(got.advantages.cpu().numpy(), want["adv"], rtol=TOL, atol=TOL, err_msg=where)
            for key, theirs in (("segment_reward", "step_reward"), ("segment_adv", "segment_adv"),
                                ("episode_adv", "episode_adv")):
                np.testing.assert_allclose(got.rows[key].cpu().numpy(), want[theirs], rtol=TOL, atol=TOL,
                                           err_msg=f"{where}: {key}")
            assert got.rows["segment"].dtype == torch.int64
            assert got.rows["segment"].cpu().tolist() == want["segment"].tolist(), where


def test_the_gpu_layout_agrees_with_the_reference_and_row_order_does_not_matter():
    from milegpo.credit.vectorized import estimate_vectorized

    batch = batches()["dense"]
    perm = torch.randperm(len(batch), generator=torch.Generator().manual_seed(3))
    shuffled = batch.select(perm)
    for cfg in CONFIGS.values():
        ref = estimate(batch, "beacon", cfg, backend="reference")
        got = estimate_vectorized(batch, "beacon", cfg, "full", backend="torch", static_shapes=True)
        torch.testing.assert_close(got.advantages, ref.advantages, rtol=TOL, atol=TOL)
        for key in ref.rows:
            torch.testing.assert_close(got.rows[key], ref.rows[key], rtol=TOL, atol=TOL)
        again = estimate(shuffled, "beacon", cfg, backend="torch").advantages
        torch.testing.assert_close(again, ref.advantages[perm], rtol=TOL, atol=TOL)


# ------------------------------------------------------------------ the worked example (beacon.md section 3)
def example_batch() -> StepBatch:
    """One group: A (4 steps, milestones at steps 1 and 3, won, R = 10), B (3 steps, milestone at step 0, lost)."""
    return paths_batch([(0, [1, 2, 3, 4, SINK]), (0, [1, 5, 6, 7])], milestones={0: [1, 3], 1: [0]})


@pytest.mark.parametrize("backend", BACKENDS)
def test_worked_example(backend):
    """gamma 0.95, w 1, no invalid step, mean_norm (the WebShop script's): the hand-computed values."""
    res = estimate(example_batch(), "beacon", presets.BEACON_WEBSHOP, backend=backend)
    rows = {k: res.rows[k].tolist() for k in res.rows}
    assert rows["segment_reward"] == pytest.approx([9.5, 10.0, 9.5, 10.0, 10.0, 0.0, 0.0], abs=1e-12)
    assert rows["segment"] == [0, 0, 1, 1, 0, 1, 1]
    # segment 0: {9.5, 10, 10}, mean 9.8333; segment 1: {9.5, 10, 0, 0}, mean 4.875
    assert rows["segment_adv"] == pytest.approx([-1 / 3, 1 / 6, 4.625, 5.125, 1 / 6, -4.875, -4.875], abs=1e-12)
    # episode term over the 7 rows: mean 40 / 7
    assert rows["episode_adv"] == pytest.approx([30 / 7] * 4 + [-40 / 7] * 3, abs=1e-12)
    want = [3.9524, 4.4524, 8.9107, 9.4107, -5.5476, -10.5893, -10.5893]
    assert res.advantages.tolist() == pytest.approx(want, abs=5e-5)
    # B's first step completed a milestone: its segment term is positive, its advantage negative
    assert rows["segment_adv"][4] > 0 > res.advantages[4]


def test_worked_example_under_the_alfworld_script_and_an_invalid_step():
    """gamma 0.9, w 10, p 0.1 on B's step 1: r = 0 - 0.1 there, and Z of that row 0 - 0.1."""
    batch = paths_batch([(0, [1, 2, 3, 4, SINK]), (0, [1, 5, 6, 7])], milestones={0: [1, 3], 1: [0]},
                        invalid={1: [1]})
    res = estimate(batch, "beacon", presets.BEACON_ALFWORLD, backend="reference")
    r = [9.0, 10.0, 9.0, 10.0, 10.0, -0.1, 0.0]
    assert res.rows["segment_reward"].tolist() == pytest.approx(r, abs=1e-12)
    seg0, seg1 = (9.0 + 10.0 + 10.0) / 3, (9.0 + 10.0 - 0.1 + 0.0) / 4
    seg = [9.0 - seg0, 10.0 - seg0, 9.0 - seg1, 10.0 - seg1, 10.0 - seg0, -0.1 - seg1, 0.0 - seg1]
    z = [10.0] * 4 + [0.0, -0.1, 0.0]
    ep = [x - sum(z) / 7 for x in z]
    assert res.advantages.tolist() == pytest.approx([e + 10.0 * s for e, s in zip(ep, seg)], abs=1e-12)


# ------------------------------------------------------------------ limiting cases
@pytest.mark.parametrize("backend", BACKENDS)
def test_weight_zero_is_grpo_under_the_same_normalisation(backend):
    for bname, batch in batches(small=True).items():
        for mode in ("mean", "mean_std"):
            cfg = presets.ALFWORLD.replace(beacon_weight=0.0, beacon_mode=mode)
            got = _quiet(estimate, batch, "beacon", cfg, backend=backend).advantages
            want = estimate(batch, "grpo", presets.ALFWORLD.replace(norm=mode), backend=backend).advantages
            torch.testing.assert_close(got, want, rtol=TOL, atol=TOL, msg=f"{bname}/{mode}")


def test_no_milestone_is_one_segment_of_penalties_and_warns():
    """A batch without milestones (the field absent): every row in segment 0, r = -p on the invalid rows, so the
    segment term contrasts the invalid rows of each group; estimate warns once per call, naming the field."""
    batch = batches()["no-milestone"]
    assert batch.invalid.any() and not batch.milestone.any()
    for backend in ("reference", "torch"):
        with pytest.warns(UserWarning, match=r"beacon: no row of the batch is a milestone \(StepBatch.milestone is "
                                             r"all False\)"):
            res = estimate(batch, "beacon", presets.BEACON_ALFWORLD, backend=backend)
        assert res.rows["segment"].tolist() == [0] * len(batch)
        assert res.rows["segment_reward"].tolist() == (-0.1 * batch.invalid.double()).tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        estimate(batches()["adversarial"], "beacon", presets.BEACON_ALFWORLD, backend="torch")  # milestones: silent
        estimate(StepBatch.from_rows([]), "beacon", backend="torch")  # nothing to say of an empty batch
        quiet = presets.BEACON_ALFWORLD.replace(beacon_penalty="none")
        with pytest.warns(UserWarning):
            res = estimate(batch, "beacon", quiet, backend="torch")
    grpo = estimate(batch, "grpo", quiet.replace(norm="mean").as_preset(), backend="torch")
    torch.testing.assert_close(res.advantages, grpo.advantages, rtol=0, atol=0)  # no penalty: GRPO exactly


def test_every_step_a_milestone_gives_every_row_its_own_segment_index():
    batch = batches()["every-step"]
    res = estimate(batch, "beacon", presets.BEACON_ALFWORLD, backend="torch")
    assert res.rows["segment"].tolist() == batch.t.tolist()
    assert torch.equal(res.rows["segment_reward"] + 0.1 * batch.invalid.double(), torch.full((len(batch),), 10.0,
                                                                                           dtype=torch.float64))


def test_empty_batch_and_config_checks():
    from milegpo.credit import CreditConfig

    res = estimate(StepBatch.from_rows([]), "beacon", backend="torch")
    assert len(res) == 0 and res.rows["segment"].dtype == torch.int64 and set(res.rows) == {
        "episode_score", "episode_adv", "segment_reward", "segment", "segment_adv"}
    for field, value, pattern in (("beacon_gamma", 1.5, r"beacon_gamma must be in \[0, 1\]"),
                                  ("beacon_weight", -1.0, r"beacon_weight must be in \[0, "),
                                  ("beacon_mode", "mean_norm", r"beacon_mode must be one of \('mean', 'mean_std'\)")):
        with pytest.raises(ValueError, match=pattern):
            CreditConfig(**{field: value})
    with pytest.raises(ValueError, match=r"beacon_penalty must be one of \('none', 'return'\)"):
        CreditConfig(beacon_penalty="reward")
    # the official scripts' values in the presets (examples/migpo_trainer/run_*.sh)
    for preset, (gamma, w, p) in ((presets.BEACON_ALFWORLD, (0.9, 10.0, 0.1)), (presets.BEACON_WEBSHOP, (0.95, 1.0, 1.0)),
                                  (presets.BEACON_SCIENCEWORLD, (0.95, 1.0, 0.1))):
        assert (preset.beacon_gamma, preset.beacon_weight, preset.invalid_penalty, preset.beacon_mode) == (
            gamma, w, p, "mean")
    assert (presets.WEBSHOP.beacon_gamma, presets.WEBSHOP.beacon_weight) == (0.95, 1.0)
    assert (presets.ALFWORLD.beacon_gamma, presets.ALFWORLD.beacon_weight) == (0.9, 10.0)
    # ScienceWorld's preset: every other field ALFWorld's, BEACON's its ScienceWorld script's (also after a change)
    differ = {k for k, v in presets.SCIENCEWORLD.values().items() if v != presets.ALFWORLD.values()[k]}
    assert differ == {"beacon_gamma", "beacon_weight"}
    assert presets.SCIENCEWORLD == presets.BEACON_SCIENCEWORLD and presets.SCIENCEWORLD.world == "scienceworld"
    assert presets.SCIENCEWORLD.replace(eta=0.5).beacon_weight == 1.0


@pytest.mark.skipif("triton" not in BACKENDS, reason="needs a GPU or TRITON_INTERPRET=1")
def test_gpu_layout_pipeline_reads_nothing_on_the_host():
    from milegpo.credit.vectorized import credit_tables
    from milegpo_kernels.inputs import host_checks
    from milegpo_kernels.testing import no_host_reads

    batch = batches(small=True)["adversarial"]
    for config in (presets.BEACON_WEBSHOP, CONFIGS["gamma1-norm-differs"]):
        with host_checks(False), no_host_reads("beacon"):  # raises naming the host reads
            tables = credit_tables(batch, "beacon", config, "full", "triton", static_shapes=True)
            adv = tables.result(batch, "beacon", config, "full", "triton").advantages
        torch.testing.assert_close(adv, estimate(batch, "beacon", config, backend="reference").advantages,
                                   rtol=TOL, atol=TOL)
