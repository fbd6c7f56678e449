"""HGPO (issue 42): every backend against an implementation written here from the specification (HGPO's paper
and official recipe as docs/algorithm.md "HGPO" states them; it imports nothing of milegpo.credit.hgpo), the
specification's worked examples with their intermediate values, and the limiting cases (history 0 against
GiGPO's step term)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from milegpo.credit import SINK, StepBatch, estimate, presets
from milegpo.credit.synthetic import random_batch
from milegpo_kernels import interpreter_on

from .batches import make_batch

BACKENDS = ["reference", "torch"] + (["triton"] if interpreter_on() or torch.cuda.is_available() else [])
TOL = 1e-9


# ------------------------------------------------------------------ the independent implementation
def spec_hgpo(batch: StepBatch, cfg) -> np.ndarray:
    """HGPO by the specification, straight from the rows: numpy statistics, powers by ``**``, contexts as
    tuples of the trajectory's states, every group's statistics computed once per member."""
    rows = batch.rows()
    by_traj: dict = {}
    for i, r in enumerate(rows):
        by_traj.setdefault((r["group"], r["traj"]), []).append(i)
    for key in by_traj:
        by_traj[key].sort(key=lambda i: rows[i]["t"])
    p, gamma = cfg.invalid_penalty, cfg.gamma
    ret = np.zeros(len(rows))
    contexts: dict = {}  # (group, m, tuple) -> rows
    for (group, _), idx in by_traj.items():
        rewards = [rows[i]["reward"] - (p if cfg.hgpo_penalty == "reward" and rows[i]["invalid"] else 0.0)
                   for i in idx]
        states = [rows[i]["state"] for i in idx]
        for t, i in enumerate(idx):
            ret[i] = sum(gamma ** (j - t) * rewards[j] for j in range(t, len(idx)))
            if cfg.hgpo_penalty == "return" and rows[i]["invalid"]:
                ret[i] -= p
            for m in range(1, min(int(cfg.hgpo_history) + 1, t + 1) + 1):
                contexts.setdefault((group, m, tuple(states[t - m + 1:t + 1])), []).append(i)
    items = [[] for _ in rows]
    if cfg.hgpo_base_group:
        for i, e in enumerate(spec_episode_term(rows, by_traj, cfg)):
            items[i].append((1.0, e))
    for (_, m, _), members in contexts.items():
        if len(members) < 2:
            continue
        x = ret[members]
        if x.max() - x.min() <= 1e-12 * max(abs(x.max()), abs(x.min()), 1.0):
            continue
        dev = x - x.mean()
        if cfg.norm == "mean_std":
            dev = dev / (x.std(ddof=0 if cfg.hgpo_std == "population" else 1) + cfg.norm_eps)
        for i, a in zip(members, dev):
            items[i].append((float(m + cfg.hgpo_weight_shift), float(a)))
    out = np.zeros(len(rows))
    for i, its in enumerate(items):
        kept = [(length ** cfg.hgpo_alpha, a) for length, a in its if a != 0.0]
        total = sum(w for w, _ in kept) + cfg.hgpo_weight_eps
        out[i] = sum(w / total * a for w, a in kept)
    return out


def spec_episode_term(rows: list, by_traj: dict, cfg) -> np.ndarray:
    """GRPO's term, "row" convention: Z = the trajectory's summed reward minus p on the invalid row, normalised
    over the task group's rows (sample std; one row: mean 0, std 1)."""
    z = np.zeros(len(rows))
    for idx in by_traj.values():
        total = sum(rows[i]["reward"] for i in idx)
        for i in idx:
            z[i] = total - (cfg.invalid_penalty if rows[i]["invalid"] else 0.0)
    out = np.zeros(len(rows))
    groups: dict = {}
    for i, r in enumerate(rows):
        groups.setdefault(r["group"], []).append(i)
    for members in groups.values():
        x = z[members]
        if len(members) == 1:
            out[members] = x / (1 + cfg.norm_eps) if cfg.norm == "mean_std" else x
            continue
        if x.max() - x.min() <= 1e-12 * max(abs(x.max()), abs(x.min()), 1.0):
            continue
        dev = x - x.mean()
        out[members] = dev / (x.std(ddof=1) + cfg.norm_eps) if cfg.norm == "mean_std" else dev
    return out


# ------------------------------------------------------------------ batches
def batches(small: bool = False) -> dict:
    """Random and adversarial batches: tiny state spaces (revisits, self-loops, invalid loops), all-won and
    all-lost groups, one-step and one-trajectory groups, partial rewards, long trajectories."""
    out = {
        "adversarial": make_batch(1, n_groups=3, k=5, horizon=9, n_states=4),
        "one-step": make_batch(2, n_groups=2, k=4, horizon=1, n_states=3, one_step=True),
        "singleton-groups": random_batch(3, [1, 4, 1], 8, seed=5, n_states=5, invalid_p=0.3),
        "all-won": random_batch(2, 4, 6, seed=6, n_states=4, outcome="success"),
        "partial-rewards": random_batch(2, 5, 7, seed=7, n_states=5, win_reward=3.5),
    }
    if not small:
        out["random"] = random_batch(6, 8, 25, seed=8)
        out["revisits"] = make_batch(9, n_groups=4, k=8, horizon=30, n_states=3)
    return out


CONFIGS = {
    "alfworld": presets.ALFWORLD,
    "webshop": presets.WEBSHOP,
    "paper": presets.ALFWORLD.replace(hgpo_weight_shift=0),
    "k4-alpha2-base": presets.ALFWORLD.replace(hgpo_history=4, hgpo_alpha=2.0, hgpo_base_group=True),
    "k0-sample-reward": presets.WEBSHOP.replace(hgpo_history=0, hgpo_std="sample", hgpo_penalty="reward",
                                                hgpo_base_group=True),
    "k1-alpha0-none": presets.ALFWORLD.replace(hgpo_history=1, hgpo_alpha=0.0, hgpo_penalty="none"),
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_agrees_with_the_specification(backend):
    small = backend == "triton" and not torch.cuda.is_available()
    device = "cuda" if backend == "triton" and torch.cuda.is_available() else "cpu"
    configs = {k: CONFIGS[k] for k in ("alfworld", "k4-alpha2-base")} if small else CONFIGS
    for bname, batch in batches(small).items():
        for cname, cfg in configs.items():
            got = estimate(batch.to(device), "hgpo", cfg, backend=backend).advantages.cpu().numpy()
            np.testing.assert_allclose(got, spec_hgpo(batch, cfg), rtol=TOL, atol=TOL, err_msg=f"{bname}/{cname}")


def test_the_gpu_layout_and_the_intermediates_agree_with_the_reference():
    from milegpo.credit.vectorized import estimate_vectorized

    batch = batches()["revisits"]
    for cfg in CONFIGS.values():
        ref = estimate(batch, "hgpo", cfg, backend="reference")
        got = estimate_vectorized(batch, "hgpo", cfg, "full", backend="torch", static_shapes=True)
        torch.testing.assert_close(got.advantages, ref.advantages, rtol=TOL, atol=TOL)
        for key in ref.rows:
            torch.testing.assert_close(got.rows[key], ref.rows[key], rtol=TOL, atol=TOL, msg=key)


# ------------------------------------------------------------------ the worked examples
A, B, C, D, E = 101, 102, 103, 104, 105


def example_batch(paths: list, invalid: dict) -> StepBatch:
    rows = []
    for tr, seq in enumerate(paths):
        won = seq[-1] == SINK
        for t in range(len(seq) - 1):
            rows.append(dict(group=0, traj=tr, t=t, state=seq[t], next_state=seq[t + 1], success=won,
                             reward=10.0 if won and t == len(seq) - 2 else 0.0, invalid=t in invalid.get(tr, ())))
    return StepBatch.from_rows(rows)


EXAMPLE_1 = example_batch([[A, B, C, SINK], [A, D, C, SINK], [A, B, C, E], [A, D, D, C]], {3: (1,)})
EXAMPLE_2 = example_batch([[A, D, A, B, SINK], [A, B, SINK], [A, B, SINK], [A, C, C, B, E]], {3: (1,)})


@pytest.mark.parametrize("backend", BACKENDS)
def test_worked_example_1_alfworld_scripts(backend):
    r = estimate(EXAMPLE_1, "hgpo", presets.ALFWORLD, backend=backend)
    close = dict(rtol=0, atol=1e-8)
    np.testing.assert_allclose(r.rows["step_return"].numpy(),
                               [9.025, 9.5, 10, 9.025, 9.5, 10, 0, 0, 0, 0, -0.1, 0], **close)
    np.testing.assert_allclose(r.rows["depth1_adv"].numpy(), [
        0.999999778, 0.999999789, 0.707106631, 0.999999778, 1.414155103, 0.707106631,
        -0.999999778, -0.999999789, -1.414213262, -0.999999778, -0.718183482, -0.695971621], **close)
    np.testing.assert_allclose(r.advantages.numpy(), [
        0.999999278, 0.999999589, 0.934912325, 0.999999278, 1.165661683, 0.707106278,
        -0.999999278, -0.999999589, -1.092047115, -0.999999278, -0.887273090, -0.695971273], **close)
    paper = estimate(EXAMPLE_1, "hgpo", presets.ALFWORLD.replace(hgpo_weight_shift=0), backend=backend)
    np.testing.assert_allclose(paper.advantages.numpy(), [
        0.999998778, 0.999999456, 0.951184113, 0.999998778, 1.138051183, 0.707105924,
        -0.999998778, -0.999999456, -1.069035199, -0.999998778, -0.906060720, -0.695970926], **close)


def test_worked_example_1_groups_and_weights():
    from milegpo.credit.hgpo import history_groups, level_advantages, level_weight, weighted_levels
    from milegpo.credit.reference import group_trajectories

    rows = EXAMPLE_1.rows()
    (trajs,) = group_trajectories(rows).values()
    many = lambda depth: sorted(g for g in history_groups(trajs, rows, depth) if len(g) > 1)  # noqa: E731
    assert many(1) == [[0, 3, 6, 9], [1, 7], [2, 5, 8], [4, 10, 11]]  # A, B, C, D
    assert many(2) == [[1, 7], [2, 8], [4, 10]]  # (A, B), (B, C), (A, D)
    assert many(3) == [[2, 8]]  # (A, B, C)
    cfg = presets.ALFWORLD
    np.testing.assert_allclose(level_advantages([10.0, 10.0, 0.0], cfg), [0.707106631, 0.707106631, -1.414213262],
                               atol=1e-9)
    assert [level_weight(m, cfg) for m in (1, 2, 3)] == [2.0, 3.0, 4.0]
    assert weighted_levels([(1, 1.0)], cfg) == pytest.approx(2 / (2 + 1e-6), abs=1e-15)
    assert weighted_levels([(1, 0.0), (2, 1.0)], cfg) == pytest.approx(3 / (3 + 1e-6), abs=1e-15)


@pytest.mark.parametrize("backend", BACKENDS)
def test_worked_example_2_webshop_scripts_revisits_and_the_base_group(backend):
    r = estimate(EXAMPLE_2, "hgpo", presets.WEBSHOP, backend=backend)
    close = dict(rtol=0, atol=1e-8)
    np.testing.assert_allclose(r.rows["step_return"].numpy(),
                               [8.57375, 9.025, 9.5, 10, 9.5, 10, 9.5, 10, 0, -0.1, 0, 0], **close)
    np.testing.assert_allclose(r.rows["depth1_adv"].numpy(), [
        1.159, 0, 2.08525, 2.5, 2.08525, 2.5, 2.08525, 2.5, -7.41475, -0.05, 0.05, -7.5], **close)
    np.testing.assert_allclose(r.advantages.numpy(), [
        1.158999421, 0, 2.085248957, 2.49999875, 2.085248957, 2.49999875, 2.085248957, 2.49999875,
        -7.414746293, -0.049999975, 0.049999975, -7.49999625], **close)
    base = estimate(EXAMPLE_2, "hgpo", presets.WEBSHOP.replace(hgpo_base_group=True), backend=backend)
    np.testing.assert_allclose(base.rows["episode_adv"].numpy()[[0, 8, 9]], [3.341666667, -6.658333333, -6.758333333],
                               **close)
    np.testing.assert_allclose(base.advantages.numpy(), [
        1.886554927, 3.341663325, 2.504054721, 2.780554629, 2.504054721, 2.780554629, 2.504054721, 2.780554629,
        -7.162608724, -2.286110349, -2.186110382, -7.219442038], **close)


# ------------------------------------------------------------------ limiting cases and properties
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("preset", ["alfworld", "webshop"])
def test_history_zero_is_gigpo_step_term(backend, preset):
    # K = 0, sample std, no penalty on the step return: 2 / (2 + 1e-6) x (GiGPO - GRPO); with the penalty after
    # discounting: the same against verl-agent's GiGPO (gigpo-verl)
    base = presets.ALFWORLD if preset == "alfworld" else presets.WEBSHOP
    small = backend == "triton" and not torch.cuda.is_available()
    for batch in batches(small).values():
        for penalty, gigpo_cfg in (("none", base), ("return", base.replace(step_penalty="return"))):
            cfg = base.replace(hgpo_history=0, hgpo_std="sample", hgpo_penalty=penalty)
            hgpo = estimate(batch, "hgpo", cfg, backend=backend).advantages
            gigpo = estimate(batch, "gigpo", gigpo_cfg, backend=backend).advantages
            grpo = estimate(batch, "grpo", base, backend=backend).advantages
            torch.testing.assert_close(hgpo, 2 / (2 + 1e-6) * (gigpo - grpo), rtol=TOL, atol=TOL)


def test_history_zero_alpha_zero_base_group_is_the_mean_of_the_nonzero_terms():
    for batch in batches().values():
        cfg = presets.ALFWORLD.replace(hgpo_history=0, hgpo_alpha=0.0, hgpo_base_group=True, hgpo_std="sample",
                                       hgpo_penalty="none")
        hgpo = estimate(batch, "hgpo", cfg, backend="torch").advantages
        grpo = estimate(batch, "grpo", presets.ALFWORLD, backend="torch").advantages
        gigpo = estimate(batch, "gigpo", presets.ALFWORLD, backend="torch")
        # the step term's zeros are exact (one-row or equal groups); GiGPO - GRPO can leave a 1e-16 residue
        step = torch.where(gigpo.rows["step_adv"] == 0, 0.0, gigpo.advantages - grpo)
        count = (grpo != 0).double() + (step != 0).double()
        torch.testing.assert_close(hgpo, (grpo + step) / (count + 1e-6), rtol=TOL, atol=TOL)


def test_penalty_on_the_reward_is_lowering_the_invalid_rewards():
    batch = batches()["adversarial"]
    cols = batch.as_dict()
    cols["reward"] = torch.where(cols["invalid"], cols["reward"] - 0.1, cols["reward"])
    lowered = StepBatch(**cols)
    cfg = presets.ALFWORLD
    a = estimate(batch, "hgpo", cfg.replace(hgpo_penalty="reward"), backend="torch").advantages
    b = estimate(lowered, "hgpo", cfg.replace(hgpo_penalty="none"), backend="torch").advantages
    torch.testing.assert_close(a, b, rtol=TOL, atol=TOL)


def test_nesting_weights_and_short_histories():
    from milegpo.credit.hgpo import history_contexts, history_groups
    from milegpo.credit.reference import group_trajectories

    batch = batches()["revisits"]
    rows = batch.rows()
    for trajs in group_trajectories(rows).values():
        for tr in trajs:
            for depth in (1, 2, 3):
                assert len(history_contexts(tr, rows, depth)) == max(len(tr) - depth + 1, 0)
        for depth in (2, 3):
            outer = {i: tuple(g) for g in history_groups(trajs, rows, depth - 1) for i in g}
            for g in history_groups(trajs, rows, depth):
                assert all(set(g) <= set(outer[i]) for i in g)


def test_row_order_and_identical_trajectories():
    batch = batches()["random"]
    cfg = presets.ALFWORLD
    a = estimate(batch, "hgpo", cfg, backend="torch").advantages
    perm = torch.randperm(len(batch), generator=torch.Generator().manual_seed(0))
    b = estimate(StepBatch(**{k: v[perm] for k, v in batch.as_dict().items()}), "hgpo", cfg, backend="torch")
    torch.testing.assert_close(b.advantages, a[perm], rtol=0, atol=1e-12)
    same = example_batch([[A, B, C, SINK]] * 4, {})
    assert torch.equal(estimate(same, "hgpo", cfg, backend="torch").advantages, torch.zeros(12, dtype=torch.float64))


def test_config_checks():
    from milegpo.credit import CreditConfig

    assert (presets.ALFWORLD.hgpo_history, presets.ALFWORLD.hgpo_alpha, presets.ALFWORLD.hgpo_std,
            presets.ALFWORLD.hgpo_weight_shift, presets.ALFWORLD.hgpo_base_group,
            presets.ALFWORLD.hgpo_penalty) == (2, 1.0, "population", 1, False, "return")
    assert presets.WEBSHOP.norm == "mean" and presets.WEBSHOP.hgpo_history == 2
    with pytest.raises(ValueError, match=r"hgpo_history must be a whole number in \[0, 64\]"):
        CreditConfig(hgpo_history=-1)
    with pytest.raises(ValueError, match="hgpo_weight_shift must be 0 or 1, got 2"):
        CreditConfig(hgpo_weight_shift=2)
    with pytest.raises(ValueError, match=r"hgpo_std must be one of \('population', 'sample'\)"):
        CreditConfig(hgpo_std="biased")
    with pytest.raises(TypeError, match="hgpo_base_group must be a bool"):
        CreditConfig(hgpo_base_group=1)
    assert not math.isnan(estimate(example_batch([[A, SINK]], {}), "hgpo", backend="torch").advantages[0])


@pytest.mark.skipif("triton" not in BACKENDS, reason="needs a GPU or TRITON_INTERPRET=1")
def test_gpu_layout_pipeline_reads_nothing_on_the_host():
    # the Triton pipeline at the GPU's static layout makes none of the ops that would sync or copy from the host
    from milegpo.credit.vectorized import credit_tables
    from milegpo_kernels.inputs import host_checks
    from milegpo_kernels.testing import no_host_reads

    batch = batches(small=True)["adversarial"]
    for config in CONFIGS.values():
        with host_checks(False), no_host_reads("hgpo"):  # raises naming the host reads
            tables = credit_tables(batch, "hgpo", config, "full", "triton", static_shapes=True)
            adv = tables.result(batch, "hgpo", config, "full", "triton").advantages
        torch.testing.assert_close(adv, estimate(batch, "hgpo", config, backend="reference").advantages,
                                   rtol=TOL, atol=TOL)


# ------------------------------------------------------------------ a history past the longest episode (issue 48.6)
def test_a_history_past_the_longest_episode_stops_at_it(monkeypatch):
    # hgpo_history 64 on episodes of at most 9 steps formed 65 depths, 56 of them one-row groups (7x the time,
    # 5x the memory for the same advantages); both estimators now stop at the longest episode
    from milegpo.credit import hgpo

    batch = batches()["adversarial"]
    longest = int(batch.t.max()) + 1
    depths = {"torch": [], "reference": []}
    context_ids, history_groups = hgpo.context_ids, hgpo.history_groups
    monkeypatch.setattr(hgpo, "context_ids", lambda rows, t, count: depths["torch"].append(count) or
                        context_ids(rows, t, count))
    monkeypatch.setattr(hgpo, "history_groups", lambda trajs, rows, depth: depths["reference"].append(depth) or
                        history_groups(trajs, rows, depth))
    config = presets.ALFWORLD.replace(hgpo_history=64)
    estimate(batch, "hgpo", config, backend="torch")
    estimate(batch, "hgpo", config, backend="reference")
    assert depths["torch"] == [longest] and max(depths["reference"]) == longest < 65
    assert hgpo.depth_count(config, longest) == longest and hgpo.depth_count(presets.ALFWORLD, longest) == 3


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("history, base_group", [(64, False), (12, True), (5, False)])
def test_the_capped_history_gives_the_uncapped_numbers(backend, history, base_group, monkeypatch):
    # the same advantages and rows, to the bit, as forming all K + 1 depths (the cap switched off here); on Triton
    # to the last bit but one: its segment sums' atomics add in an order that depends on the segments' layout,
    # which the number of depths changes (two runs of one layout agree to the bit)
    from milegpo.credit import hgpo

    small = backend == "triton" and not torch.cuda.is_available()
    config = presets.ALFWORLD.replace(hgpo_history=history, hgpo_base_group=base_group)
    for name, batch in batches(small).items():
        capped = estimate(batch, "hgpo", config, backend=backend)
        with monkeypatch.context() as m:
            m.setattr(hgpo, "depth_count", lambda config, longest: int(config.hgpo_history) + 1)
            uncapped = estimate(batch, "hgpo", config, backend=backend)
        for key in ("advantages", *capped.rows):
            got = capped.advantages if key == "advantages" else capped.rows[key]
            want = uncapped.advantages if key == "advantages" else uncapped.rows[key]
            if backend == "triton":
                torch.testing.assert_close(got, want, rtol=0, atol=1e-12, msg=f"{name} {key}")
            else:
                assert torch.equal(got, want), (name, key)
