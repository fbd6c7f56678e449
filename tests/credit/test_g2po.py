"""G2PO (issue 42): every backend against an implementation written here from the specification (G2PO's paper and
official code as docs/algorithm.md "G2PO" states them; it imports nothing of milegpo.credit.g2po), the
specification's worked examples with their intermediate values, and the limiting cases (w = 0 against GRPO)."""

from __future__ import annotations

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
def norm(x: np.ndarray, cfg) -> np.ndarray:
    """Norm of one set: (x - mean) / (sample std + eps) or x - mean; one value or equal values: 0."""
    if len(x) < 2 or x.max() - x.min() <= 1e-12 * max(abs(x.max()), abs(x.min()), 1.0):
        return np.zeros(len(x))
    dev = x - x.mean()
    return dev / (x.std(ddof=1) + cfg.norm_eps) if cfg.norm == "mean_std" else dev


def spec_g2po(batch: StepBatch, cfg) -> dict:
    """G2PO by the specification, from the rows: per task group a dict of nodes, numpy statistics, powers by
    ``**``. Returns {"A", "V", "Vp", "nc", "ec", "ep"}, each (N,)."""
    rows = batch.rows()
    n = len(rows)
    p = cfg.invalid_penalty
    by_group: dict = {}
    for i, r in enumerate(rows):
        by_group.setdefault(r["group"], {}).setdefault(r["traj"], []).append(i)
    out = {k: np.zeros(n) for k in ("A", "V", "Vp", "nc", "ec", "ep")}
    for trajs in by_group.values():
        trajs = [sorted(idx, key=lambda i: rows[i]["t"]) for idx in trajs.values()]
        v = {}
        for idx in trajs:
            total = sum(rows[i]["reward"] for i in idx)
            for t, i in enumerate(idx):
                v[i] = cfg.g2po_gamma ** (len(idx) - t) * total
        visits: dict = {}
        for i in v:
            visits.setdefault(rows[i]["state"], []).append(v[i])
        value = {s: float(np.mean(vals)) for s, vals in visits.items()}
        for idx in trajs:
            for a, b in zip(idx, idx[1:]):
                out["Vp"][a] = value[rows[b]["state"]]
            last = rows[idx[-1]]
            if last["success"]:
                out["Vp"][idx[-1]] = cfg.g2po_success_value
            elif cfg.g2po_failure_next == "node" and last["next_state"] in value:
                out["Vp"][idx[-1]] = value[last["next_state"]]
            else:
                out["Vp"][idx[-1]] = cfg.g2po_failure_value
        members = [i for idx in trajs for i in idx]
        for i in members:
            out["V"][i] = value[rows[i]["state"]]
        by_node: dict = {}
        for i in members:
            by_node.setdefault(rows[i]["state"], []).append(i)
        for idx in by_node.values():
            x = np.array([out["Vp"][i] - (p if cfg.g2po_penalty == "return" and rows[i]["invalid"] else 0.0) for i in idx])
            out["nc"][idx] = norm(x, cfg)
        out["ec"][members] = norm(out["Vp"][members] - out["V"][members], cfg)
        if cfg.g2po_episode == "row":
            z = np.array([sum(rows[j]["reward"] for j in idx) - (p if rows[i]["invalid"] else 0.0)
                          for idx in trajs for i in idx])
            ep = norm(z, cfg) if len(z) > 1 else (z / (1 + cfg.norm_eps) if cfg.norm == "mean_std" else z)
            out["ep"][members] = ep
        else:
            totals = norm(np.array([sum(rows[i]["reward"] for i in idx) for idx in trajs]), cfg)
            for idx, a in zip(trajs, totals):
                out["ep"][idx] = a
    out["A"] = out["ep"] + cfg.g2po_w * (out["nc"] + out["ec"])
    return out


# ------------------------------------------------------------------ batches
def batches(small: bool = False) -> dict:
    """Random and adversarial batches: tiny state spaces (revisits, self-loops, invalid loops), all-won and
    all-lost groups, one-step and one-row groups, partial rewards on failures, long trajectories."""
    out = {
        "adversarial": make_batch(11, n_groups=3, k=5, horizon=9, n_states=4),
        "one-step": make_batch(12, n_groups=2, k=4, horizon=1, n_states=3, one_step=True),
        "singleton-groups": random_batch(3, [1, 4, 1], 8, seed=15, n_states=5, invalid_p=0.3),
        "all-won": random_batch(2, 4, 6, seed=16, n_states=4, outcome="success"),
        "all-lost": random_batch(2, 4, 6, seed=17, n_states=4, outcome="fail"),
    }
    partial = random_batch(2, 5, 7, seed=18, n_states=5).as_dict()  # WebShop-style scores on some failures
    partial["reward"] = torch.where(~partial["success"] & (partial["t"] == 0) & (partial["traj"] % 2 == 0), 2.5,
                                    partial["reward"])
    out["partial-rewards"] = StepBatch(**partial)
    if not small:
        out["random"] = random_batch(6, 8, 25, seed=19)
        out["revisits"] = make_batch(20, n_groups=4, k=8, horizon=30, n_states=3)
    return out


CONFIGS = {
    "alfworld": presets.ALFWORLD,
    "webshop": presets.WEBSHOP,
    "paper": presets.ALFWORLD.replace(g2po_episode="trajectory", g2po_penalty="none"),
    "failure-node-w0.8": presets.WEBSHOP.replace(g2po_failure_next="node", g2po_w=0.8, g2po_gamma=0.9),
    "values": presets.ALFWORLD.replace(g2po_success_value=7.0, g2po_failure_value=-1.0, g2po_episode="trajectory"),
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_agrees_with_the_specification(backend):
    small = backend == "triton" and not torch.cuda.is_available()
    device = "cuda" if backend == "triton" and torch.cuda.is_available() else "cpu"
    configs = {k: CONFIGS[k] for k in ("alfworld", "failure-node-w0.8")} if small else CONFIGS
    for bname, batch in batches(small).items():
        for cname, cfg in configs.items():
            got = estimate(batch.to(device), "g2po", cfg, backend=backend)
            want = spec_g2po(batch, cfg)
            for key, name in (("advantages", "A"), ("node_value", "V"), ("next_value", "Vp"), ("a_nc", "nc"),
                              ("a_ec", "ec"), ("a_ep", "ep")):
                value = got.advantages if key == "advantages" else got.rows[key]
                np.testing.assert_allclose(value.cpu().numpy(), want[name], rtol=TOL, atol=TOL,
                                           err_msg=f"{bname}/{cname}/{key}")


def test_the_gpu_layout_and_the_intermediates_agree_with_the_reference():
    from milegpo.credit.vectorized import estimate_vectorized

    batch = batches()["revisits"]
    for cfg in CONFIGS.values():
        ref = estimate(batch, "g2po", cfg, backend="reference")
        got = estimate_vectorized(batch, "g2po", cfg, "full", backend="torch", static_shapes=True)
        torch.testing.assert_close(got.advantages, ref.advantages, rtol=TOL, atol=TOL)
        for key in ref.rows:
            torch.testing.assert_close(got.rows[key], ref.rows[key], rtol=TOL, atol=TOL, msg=key)


# ------------------------------------------------------------------ the worked examples
A, B, C, D, E = 201, 202, 203, 204, 205


def example_batch(paths: list, invalid: dict, rewards: dict | None = None) -> StepBatch:
    rows = []
    for tr, seq in enumerate(paths):
        won = seq[-1] == SINK
        for t in range(len(seq) - 1):
            reward = (rewards or {}).get((tr, t), 10.0 if won and t == len(seq) - 2 else 0.0)
            rows.append(dict(group=0, traj=tr, t=t, state=seq[t], next_state=seq[t + 1], success=won, reward=reward,
                             invalid=t in invalid.get(tr, ())))
    return StepBatch.from_rows(rows)


EXAMPLE_1 = example_batch([[A, B, C, SINK], [A, D, B, C, SINK], [A, B, B, E]], {2: (1,)})
EXAMPLE_2 = example_batch([[A, B, A, B, SINK], [A, B, SINK], [A, C, E], [A, A, C, C]], {3: (0,)}, {(2, 1): 2.5})


@pytest.mark.parametrize("backend", BACKENDS)
def test_worked_example_1_alfworld_script(backend):
    r = estimate(EXAMPLE_1, "g2po", presets.ALFWORLD, backend=backend)
    close = dict(rtol=0, atol=1e-8)
    np.testing.assert_allclose(r.rows["visit_value"].numpy(),
                               [8.57375, 9.025, 9.5, 8.1450625, 8.57375, 9.025, 9.5, 0, 0, 0], **close)
    np.testing.assert_allclose(r.rows["node_value"].numpy(), [5.5729375, 4.5125, 9.5, 5.5729375, 8.57375, 4.5125,
                                                              9.5, 5.5729375, 4.5125, 4.5125], **close)
    np.testing.assert_allclose(r.rows["next_value"].numpy(),
                               [4.5125, 9.5, 10, 8.57375, 4.5125, 9.5, 10, 4.5125, 4.5125, 0], **close)
    np.testing.assert_allclose(r.rows["a_nc"].numpy(), [-0.577350023, 0.796231217, 0, 1.154700046, 0, 0.796231217,
                                                        0, -0.577350023, -0.314535211, -1.277927224], **close)
    np.testing.assert_allclose(r.rows["a_ec"].numpy(), [
        -0.422341559, 1.417191663, 0.052279189, 0.812923240, -1.335064994, 1.417191663, 0.052279189, -0.422341559,
        -0.099800195, -1.472316638], **close)
    np.testing.assert_allclose(r.rows["a_ep"].numpy(), [0.621049083] * 7 + [-1.442236907, -1.462869766, -1.442236907],
                               **close)
    np.testing.assert_allclose(r.advantages.numpy(), [
        -0.378642499, 2.834471963, 0.673328272, 2.588672368, -0.714015911, 2.834471963, 0.673328272, -2.441928489,
        -1.877205172, -4.192480768], **close)
    paper = estimate(EXAMPLE_1, "g2po", presets.ALFWORLD.replace(g2po_episode="trajectory", g2po_penalty="none"),
                     backend=backend)
    np.testing.assert_allclose(paper.advantages.numpy(), [
        -0.422341413, 2.787083702, 0.629629359, 2.544973455, -0.757714825, 2.787083702, 0.629629359, -2.154391920,
        -1.553327796, -3.913273453], **close)


@pytest.mark.parametrize("backend", BACKENDS)
def test_worked_example_2_webshop_script_loop_partial_reward_known_final_state(backend):
    r = estimate(EXAMPLE_2, "g2po", presets.WEBSHOP, backend=backend)
    close = dict(rtol=0, atol=1e-8)
    np.testing.assert_allclose(r.rows["node_value"].numpy()[[0, 1, 7]], [4.741885417, 9.19125, 1.1875], **close)
    np.testing.assert_allclose(r.rows["a_nc"].numpy(), [
        3.426144097, -3.505409722, 3.426144097, 1.752704861, 3.426144097, 1.752704861, -4.577605903, 0,
        -1.123220486, -4.577605903, 0], **close)
    np.testing.assert_allclose(r.rows["a_ec"].numpy(), [
        4.355504735, -4.543224432, 4.355504735, 0.714890152, 4.355504735, 0.714890152, -3.648245265, -1.281359848,
        -0.093859848, -3.648245265, -1.281359848], **close)
    np.testing.assert_allclose(r.rows["a_ep"].numpy(), [4.1] * 6 + [-3.4, -3.4, -6.0, -5.9, -5.9], **close)
    np.testing.assert_allclose(r.advantages.numpy(), [
        11.881648832, -3.948634154, 11.881648832, 6.567595013, 11.881648832, 6.567595013, -11.625851168,
        -4.681359848, -7.217080335, -14.125851168, -7.181359848], **close)
    node = estimate(EXAMPLE_2, "g2po", presets.WEBSHOP.replace(g2po_failure_next="node"), backend=backend)
    np.testing.assert_allclose(node.advantages.numpy(), [
        11.773694287, -4.056588699, 11.773694287, 6.459640467, 11.773694287, 6.459640467, -11.733805713,
        -5.383064394, -7.325034880, -14.233805713, -5.508064394], **close)


# ------------------------------------------------------------------ limiting cases and properties
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("preset", ["alfworld", "webshop"])
def test_w_zero_is_grpo(backend, preset):
    base = presets.ALFWORLD if preset == "alfworld" else presets.WEBSHOP
    cfg = base.replace(g2po_w=0.0)
    small = backend == "triton" and not torch.cuda.is_available()
    for batch in batches(small).values():
        g2po = estimate(batch, "g2po", cfg, backend=backend).advantages
        grpo = estimate(batch, "grpo", base, backend=backend).advantages
        # exactly A_EP + 0; the Triton segment sums' atomics may round two runs differently in the last bit
        torch.testing.assert_close(g2po, grpo, rtol=0, atol=1e-12)


def test_mean_mode_terms_sum_to_zero_per_group():
    for batch in batches().values():
        r = estimate(batch, "g2po", presets.WEBSHOP, backend="torch")
        grpo = estimate(batch, "grpo", presets.WEBSHOP, backend="torch").advantages
        groups, inverse = torch.unique(batch.group, return_inverse=True)
        sums = torch.zeros(len(groups), dtype=torch.float64).index_add_(0, inverse, r.advantages - grpo)
        torch.testing.assert_close(sums, torch.zeros_like(sums), rtol=0, atol=1e-9)


def test_row_order_and_one_row_groups():
    batch = batches()["random"]
    cfg = presets.ALFWORLD
    a = estimate(batch, "g2po", cfg, backend="torch").advantages
    perm = torch.randperm(len(batch), generator=torch.Generator().manual_seed(1))
    b = estimate(StepBatch(**{k: v[perm] for k, v in batch.as_dict().items()}), "g2po", cfg, backend="torch")
    torch.testing.assert_close(b.advantages, a[perm], rtol=0, atol=1e-12)
    one = estimate(example_batch([[A, SINK]], {}), "g2po", cfg, backend="torch")
    assert torch.isfinite(one.advantages).all() and one.rows["a_ec"].item() == 0.0


def test_config_checks():
    from milegpo.credit import CreditConfig

    cfg = presets.ALFWORLD
    assert (cfg.g2po_w, cfg.g2po_gamma, cfg.g2po_success_value, cfg.g2po_failure_value, cfg.g2po_episode,
            cfg.g2po_penalty, cfg.g2po_failure_next) == (1.0, 0.95, 10.0, 0.0, "row", "return", "zero")
    with pytest.raises(ValueError, match=r"g2po_gamma must be in \[0, 1\]"):
        CreditConfig(g2po_gamma=1.5)
    with pytest.raises(ValueError, match="g2po_w must be >= 0"):
        CreditConfig(g2po_w=-1.0)
    with pytest.raises(ValueError, match=r"g2po_episode must be one of \('row', 'trajectory'\)"):
        CreditConfig(g2po_episode="traj")
    with pytest.raises(ValueError, match=r"g2po_penalty must be one of \('none', 'return'\), got 'reward'"):
        CreditConfig(g2po_penalty="reward")


@pytest.mark.skipif("triton" not in BACKENDS, reason="needs a GPU or TRITON_INTERPRET=1")
def test_gpu_layout_pipeline_reads_nothing_on_the_host():
    # the Triton pipeline at the GPU's static layout makes none of the ops that would sync or copy from the host
    from milegpo.credit.vectorized import credit_tables
    from milegpo_kernels.inputs import host_checks
    from milegpo_kernels.testing import no_host_reads

    batch = batches(small=True)["adversarial"]
    for config in CONFIGS.values():
        with host_checks(False), no_host_reads("g2po"):  # raises naming the host reads
            tables = credit_tables(batch, "g2po", config, "full", "triton", static_shapes=True)
            adv = tables.result(batch, "g2po", config, "full", "triton").advantages
        torch.testing.assert_close(adv, estimate(batch, "g2po", config, backend="reference").advantages,
                                   rtol=TOL, atol=TOL)
