"""estimate: its argument checks, the vectorised estimator against the plain-Python reference, and the
spec's properties."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from milegpo.credit import METHODS, SINK, StepBatch, estimate, presets
from milegpo.credit.result import BOOL_KEYS, INT_KEYS

from ..properties import examples
from .batches import make_batch, rows_ok

CASES = [(m, "full") for m in METHODS if m != "milegpo"] + [("milegpo", v) for v in ("md", "rcs", "full")]
PRESETS = {"alfworld": presets.ALFWORLD, "webshop": presets.WEBSHOP}
ATOL = RTOL = 1e-9


def assert_same(a, b, what):
    if a.dtype == torch.bool or b.dtype == torch.bool or a.dtype == torch.int64:
        assert torch.equal(a.cpu(), b.cpu()), f"{what}: {a} != {b}"
    else:
        torch.testing.assert_close(a.cpu(), b.cpu(), atol=ATOL, rtol=RTOL, msg=lambda m: f"{what}: {m}")


def compare(batch: StepBatch, backend: str = "torch", cases=CASES, presets_=PRESETS, static_shapes=None,
            **estimate_kw) -> None:
    """Every method / variant / preset of ``backend`` against the reference. ``static_shapes=True``
    runs the GPU layout (arrays at their static bounds, padding slots) on CPU; ``estimate_kw``
    go to :func:`estimate` (e.g. ``cuda_graph=True``)."""
    from milegpo.credit.vectorized import estimate_vectorized

    for pname, cfg in presets_.items():
        for method, variant in cases:
            ref = estimate(batch.to("cpu"), method, cfg, variant, backend="reference")
            if static_shapes is None:
                got = estimate(batch, method, cfg, variant, backend=backend, **estimate_kw)
            else:
                got = estimate_vectorized(batch, method, cfg, variant, backend=backend, static_shapes=static_shapes)
            tag = f"{method}/{variant}/{pname}"
            assert got.advantages.dtype == torch.float64
            assert_same(got.advantages, ref.advantages, f"{tag} advantages")
            assert set(got.rows) == set(ref.rows), tag
            for k in ref.rows:
                assert_same(got.rows[k], ref.rows[k], f"{tag} rows[{k}]")
            assert set(got.nodes) == set(ref.nodes), tag
            for k in ref.nodes:
                r, g = ref.nodes[k], got.nodes[k]
                if k in BOOL_KEYS:
                    g, r = g.bool(), r.bool()
                elif k in INT_KEYS:
                    g, r = g.long(), r.long()
                assert_same(g, r, f"{tag} nodes[{k}]")


def test_estimate_argument_errors():
    b = StepBatch.from_rows(rows_ok())
    with pytest.raises(ValueError, match="unknown credit method 'ppo'"):
        estimate(b, "ppo")
    with pytest.raises(ValueError, match="unknown MileGPO variant 'half'"):
        estimate(b, "milegpo", variant="half")
    with pytest.raises(ValueError, match="unknown credit backend 'jax'"):
        estimate(b, "milegpo", backend="jax")
    with pytest.raises(TypeError, match="config must be a CreditConfig"):
        estimate(b, "milegpo", {"eta": 1.0})
    with pytest.raises(TypeError, match="batch must be a StepBatch"):
        estimate(rows_ok(), "milegpo")


@settings(max_examples=examples(30))
@given(seed=st.integers(0, 2**32 - 1), n_groups=st.integers(1, 5), k=st.integers(1, 16),
       horizon=st.integers(1, 50), n_states=st.integers(1, 12), mode=st.sampled_from(["mixed", "all_success",
                                                                                        "all_fail"]),
       p_self=st.sampled_from([0.0, 0.2, 0.6]), p_invalid=st.sampled_from([0.0, 0.15, 0.5]))
def test_torch_matches_reference_random(seed, n_groups, k, horizon, n_states, mode, p_self, p_invalid):
    batch = make_batch(seed, n_groups=n_groups, k=k, horizon=horizon, n_states=n_states, mode=mode,
                       p_self=p_self, p_invalid=p_invalid)
    compare(batch)


@pytest.mark.parametrize("kind", ["singletons", "one_step", "one_state", "big_groups"])
def test_torch_matches_reference_edge_cases(kind):
    if kind == "singletons":  # groups of one trajectory
        batch = make_batch(1, n_groups=6, k=1, horizon=10)
    elif kind == "one_step":  # every trajectory one step long
        batch = make_batch(2, n_groups=3, k=8, horizon=5, one_step=True)
    elif kind == "one_state":  # every step a self-loop on one state
        batch = make_batch(3, n_groups=2, k=8, horizon=12, n_states=1)
    else:
        batch = make_batch(4, n_groups=2, k=16, horizon=50, n_states=30)
    compare(batch)


@pytest.mark.parametrize("seed", range(3))
def test_static_shapes_layout_matches_reference(seed):
    # the layout the GPU path uses: per-node arrays of 2N slots, per-edge / per-group of N
    compare(make_batch(seed, n_groups=3, k=6, horizon=15, n_states=5), static_shapes=True)


def test_synthetic_batches_match_reference():
    from milegpo.credit.synthetic import random_batch

    for seed in range(3):
        compare(random_batch(n_groups=3, group_size=8, horizon=20, seed=seed))


def test_permutation_invariance():
    batch = make_batch(7, n_groups=4, k=8, horizon=30, shuffle=False)
    perm = torch.from_numpy(np.random.default_rng(0).permutation(len(batch)))
    shuffled = StepBatch(**{k: v[perm] for k, v in batch.as_dict().items()})
    for method, variant in CASES:
        a = estimate(batch, method, presets.ALFWORLD, variant, backend="torch")
        b = estimate(shuffled, method, presets.ALFWORLD, variant, backend="torch")
        torch.testing.assert_close(b.advantages, a.advantages[perm], atol=1e-12, rtol=0)
        for k in a.rows:
            if k not in ("node", "next_node"):
                torch.testing.assert_close(b.rows[k], a.rows[k][perm], atol=1e-12, rtol=0)


def test_group_credit_independent_of_other_groups():
    a = make_batch(8, n_groups=2, k=6, horizon=20)
    b = make_batch(9, n_groups=3, k=6, horizon=20)
    # disjoint group and trajectory ids
    b_cols = b.as_dict()
    b_cols["group"] = b_cols["group"] + 10_000
    b_cols["traj"] = b_cols["traj"] + 10_000_000
    b = StepBatch(**b_cols)
    both = StepBatch.concat([a, b])
    for method, variant in CASES:
        for cfg in PRESETS.values():
            alone = estimate(a, method, cfg, variant, backend="torch").advantages
            joint = estimate(both, method, cfg, variant, backend="torch").advantages[: len(a)]
            torch.testing.assert_close(joint, alone, atol=1e-12, rtol=0)


def test_equal_values_give_exact_zero():
    # six identical successful trajectories: every normalisation group holds equal values
    rows = []
    for tr in range(6):
        for t, (s, ns) in enumerate([(11, 12), (12, 13), (13, SINK)]):
            rows.append(dict(group=0, traj=tr, t=t, state=s, next_state=ns, success=True,
                             reward=9.025 if ns == SINK else 0.0, invalid=False))
    batch = StepBatch.from_rows(rows)
    for backend in ("reference", "torch"):
        for method, variant in CASES:
            for cfg in PRESETS.values():
                r = estimate(batch, method, cfg, variant, backend=backend)
                zeros = torch.zeros(len(batch), dtype=torch.float64)
                if method == "g2po":
                    # G2PO's edge-centric term is not a normalisation of equal values here: V' - V(s) grows along
                    # the trajectory (g2po.md section 10); its node-centric and episode terms are
                    assert torch.equal(r.rows["a_nc"], zeros) and torch.equal(r.rows["a_ep"], zeros), backend
                    assert not torch.equal(r.rows["a_ec"], zeros), backend
                    continue
                assert torch.equal(r.advantages, zeros), (backend, method)


@pytest.mark.parametrize("seed", range(4))
def test_spec_properties(seed):
    batch = make_batch(100 + seed, n_groups=4, k=8, horizon=30, n_states=8)
    for cfg in PRESETS.values():
        # property 1: eta = 0 gives exactly GraphGPO
        g = estimate(batch, "graphgpo", cfg, backend="torch")
        for variant in ("md", "rcs", "full"):
            m0 = estimate(batch, "milegpo", cfg.replace(eta=0.0), variant, backend="torch")
            assert torch.equal(m0.advantages, g.advantages)
            # property 2: the shaping stays inside [-c lambda w-, c lambda w+]
            m = estimate(batch, "milegpo", cfg, variant, backend="torch")
            diff = m.rows["r_shaped"] - m.rows["r_graph"]
            assert diff.min() >= -cfg.c * cfg.lam * cfg.w_neg - 1e-12
            assert diff.max() <= cfg.c * cfg.lam * cfg.w_pos + 1e-12
            # property 3: rows of one (group, state) tied under A^G are ordered by A^mix
            step = m.advantages - cfg.w_ep * m.rows["episode_adv"]
            node = m.rows["node"]
            same = node[:, None] == node[None, :]
            tied = same & ((m.rows["a_graph"][:, None] - m.rows["a_graph"][None, :]).abs() <= 1e-12)
            mix_gt = (m.rows["a_mix"][:, None] - m.rows["a_mix"][None, :]) > 1e-9
            assert bool((step[:, None] > step[None, :])[tied & mix_gt].all())
    assert (presets.ALFWORLD.c, presets.ALFWORLD.lam, presets.ALFWORLD.w_neg, presets.ALFWORLD.w_pos) == (
        10.0, 0.25, 0.25, 1.0)  # bounds [-0.625, 2.5]


def test_input_dtypes_do_not_change_credit():
    batch = make_batch(11, n_groups=2, k=4, horizon=10)
    cols = batch.as_dict()
    cols32 = {**cols, "reward": cols["reward"].float(), "t": cols["t"].int()}
    b32 = StepBatch(**cols32)
    a = estimate(batch, "milegpo", backend="torch").advantages
    b = estimate(b32, "milegpo", backend="torch").advantages
    assert b.dtype == torch.float64
    torch.testing.assert_close(a, b, atol=1e-6, rtol=0)  # float32 rewards lose bits before the cast


def test_equal_branch_margins_are_zero_on_every_backend():
    # three branches of node 100 at p+ = 3/7 each: c~ is a float residue, not a margin (reference.branch_contrast)
    from milegpo.credit.synthetic import paths_batch

    paths = []
    for x in (1, 2, 3):
        paths += [(0, [100, x, SINK])] * 3 + [(0, [100, x])] * 4
    batch = paths_batch(paths, shuffle_seed=0)
    compare(batch)
    r = estimate(batch, "milegpo", presets.WEBSHOP, backend="torch")
    assert r.nodes["b"].tolist() == [0.0] * 5
