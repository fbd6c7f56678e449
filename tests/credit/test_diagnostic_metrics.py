"""Credit diagnostics (spec section 11) on hand-built batches."""

import math

import numpy as np

from milegpo.credit import SINK, diagnostics, estimate, presets
from milegpo.credit.diagnostic_metrics import same_state_pairs
from milegpo.credit.synthetic import paths_batch, random_batch


def test_same_state_pairs_enumerates_every_unordered_pair():
    group = np.array([0, 0, 1, 0, 1, 0])
    state = np.array([5, 5, 5, 6, 5, 5])
    i, j = same_state_pairs(group, state)
    got = sorted(tuple(sorted(p)) for p in zip(i.tolist(), j.tolist()))
    # (0, 5): rows 0, 1, 5 -> 3 pairs; (1, 5): rows 2, 4 -> 1 pair; (0, 6): one row -> none
    assert got == [(0, 1), (0, 5), (1, 5), (2, 4)]
    e = same_state_pairs(np.array([1]), np.array([1]))
    assert e[0].shape == (0,)


def test_tie_correction_and_support_by_hand():
    # group 0, K = 4. From the start state 1 two branches lead to states 2 and 3, both two hops
    # from g (2 -> 4 -> g, 3 -> 5 -> g): every row leaving 1 has r^G = c * gamma^2 = 0.4, a tie.
    # Trajectories via 2 always succeed (2 and 4 are milestones with lift); via 3 one succeeds and
    # one fails at the dead end 6 -> 6 (a trap: a failed revisit).
    paths = [
        (0, [1, 2, 4, SINK]),
        (0, [1, 2, 4, SINK]),
        (0, [1, 3, 5, SINK]),
        (0, [1, 3, 6, 6]),
    ]
    batch = paths_batch(paths)
    r = estimate(batch, "milegpo", presets.ALFWORLD, "full")
    d = diagnostics(r)
    # rows at state 1: t=0 of the four trajectories, all with r^G = 0.4 -> A^G = 0 for all (tied);
    # opposite-outcome pairs: (0,3), (1,3), (2,3) -> 3 tie pairs
    assert d["tie_pairs"] == 3
    rm = r.rows["r_shaped"].numpy()
    first_rows = [0, 3, 6, 9]
    assert np.allclose(r.rows["r_graph"].numpy()[first_rows], 0.4)
    expected = sum(rm[w] > rm[9] for w in (0, 3, 6))  # row 9: the failed trajectory's first step
    assert d["tie_corrected"] == expected and d["tie_correction_rate"] == expected / 3
    assert d["tie_corrected"] >= 2  # the branch through the reliable milestone 2 is preferred
    # candidates: nodes visited by a success other than g: 1, 2, 3, 4, 5
    assert d["candidates"] == 5
    assert d["support_local"] + d["support_coverage"] + d["support_weak"] == d["candidates"]
    assert math.isclose(d["support_local_share"] + d["support_coverage_share"] + d["support_weak_share"], 1.0)
    assert d["traps"] == 1  # node 6
    # shared-state coverage: rows whose state is visited by > 1 trajectory: state 1 (4 rows), 2 (2), 4 (2),
    # 3 (2) -> 10 of 12 rows (5 and 6 are visited by one trajectory each)
    assert math.isclose(d["shared_state_coverage"], 10 / 12)


def test_no_pairs_gives_nan_and_baselines_have_fewer_fields():
    batch = paths_batch([(0, [1, 2, SINK]), (1, [3, 4, 4])])
    d = diagnostics(estimate(batch, "milegpo"))
    assert d["tie_pairs"] == 0 and math.isnan(d["tie_correction_rate"])
    g = diagnostics(estimate(random_batch(n_groups=2, seed=3), "grpo"))
    assert "tie_share" not in g and "candidates" not in g and 0.0 <= g["shared_state_coverage"] <= 1.0
