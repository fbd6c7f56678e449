"""The plain-Python reference backend (the oracle) against hand-computed numbers and the spec's properties."""

from __future__ import annotations

import math
from itertools import combinations

import pytest
import torch

from milegpo.credit import METHODS, SINK, StepBatch, presets
from milegpo.credit.reference import (
    estimate_reference, hop_distances_to, normalize_segment, potential, rollout_graph, group_trajectories,
    max_normalize, milestone_scores,
)
from milegpo.credit.result import BOOL_KEYS, INT_KEYS
from milegpo.credit.synthetic import paths_batch, random_batch

#: the hand-computed values below are the spec's reading of eqs. 5, 14 and 16 (spec section 12); the properties of
#: appendix B run on the defaults (the paper's reading) and on these
ALF, WEB = presets.ALFWORLD_SPEC, presets.WEBSHOP_SPEC
BOTH_READINGS = dict(argvalues=[presets.ALFWORLD, presets.WEBSHOP, ALF, WEB],
                     ids=["alfworld", "webshop", "alfworld_spec", "webshop_spec"])
EPS = 1e-6
G = SINK
A, B, C, D, E = 1, 2, 3, -4, 5

# ---------------------------------------------------------------------------------------------
# (1) A tiny group, 2 successes and 2 failures, by hand (ALFWorld preset).
#   tau0 (success): A -> B -> C -> g
#   tau1 (success): A -> B -> B -> C -> g     (t=1 is an invalid action: self-loop at B)
#   tau2 (failure): A -> D -> D               (self-loop at D, truncated)
#   tau3 (failure): A -> B -> E
# Rows in this order: 0-2 tau0, 3-6 tau1, 7-8 tau2, 9-10 tau3.
# Edges: (A,B) (B,C) (C,g) (B,B) (A,D) (D,D) (B,E).  d(.,g): C 1, B 2, A 3, D/E inf.
# K = 4, K+ = 2, p_q+ = 0.5, p_q- = 0.5, K- = 2.
# ---------------------------------------------------------------------------------------------
HAND_PATHS = [(7, [A, B, C, G]), (7, [A, B, B, C, G]), (7, [A, D, D]), (7, [A, B, E])]


def hand_batch():
    return paths_batch(HAND_PATHS, invalid={1: [1]})


def by_key(result, name):
    return dict(zip(result.nodes["key"].tolist(), result.nodes[name].tolist()))


def approx(x):
    return pytest.approx(x, rel=1e-12, abs=1e-12)


def test_hand_graph_return_and_counts():
    r = estimate_reference(hand_batch(), "milegpo", ALF, "rcs")
    # r^G = 10 * 0.2^d(s_{t+1}, g): next_state B -> d 2 -> 0.4, C -> 2.0, g -> 10, D/E -> 0
    assert r.rows["r_graph"].tolist() == approx([0.4, 2.0, 10, 0.4, 0.4, 2.0, 10, 0, 0, 0.4, 0])
    assert r.nodes["key"].tolist() == [D, A, B, C, E, G]          # sorted by signed key, g = int64 max last
    assert r.nodes["group"].tolist() == [7] * 6
    assert by_key(r, "is_sink") == {D: False, A: False, B: False, C: False, E: False, G: True}
    assert by_key(r, "dist") == {D: -1, A: 3, B: 2, C: 1, E: -1, G: 0}
    assert by_key(r, "n_traj") == {D: 1, A: 4, B: 3, C: 2, E: 1, G: 2}
    assert by_key(r, "n_pos") == {D: 0, A: 2, B: 2, C: 2, E: 0, G: 2}
    # visits (states, plus the last next_state): tau1 visits B twice, tau2 visits D twice
    assert by_key(r, "n_revisit") == {D: 1, A: 0, B: 1, C: 0, E: 0, G: 0}
    assert r.rows["node"].tolist() == [1, 2, 3, 1, 2, 2, 3, 1, 0, 1, 2]
    assert r.rows["next_node"].tolist() == [2, 3, 5, 2, 2, 3, 5, 0, 0, 2, 4]
    # Z: successes 10, tau1's invalid row 10 - 0.1, failures 0
    assert r.rows["episode_score"].tolist() == approx([10, 10, 10, 10, 9.9, 10, 10, 0, 0, 0, 0])


def test_hand_milestone_and_trap_scores():
    r = estimate_reference(hand_batch(), "milegpo", ALF, "rcs")
    # S+ = {A, B, C}.  l+ = max(p+ - 0.5, 0): A 0, B 2/3 - 1/2 = 1/6, C 1/2.  m: A 1, B 1, C 1.
    # deg (no self-loops, edges to g count): A out {B, D} = 2; B in {A} out {C, E} = 3; C in {B} out {g} = 2
    # C(v) = deg / 3: A 2/3, B 1, C 2/3.  S0+ = l+ + m + 0.25 C:
    #   A = 0 + 1 + 1/6 = 7/6;  B = 1/6 + 1 + 1/4 = 17/12;  C = 1/2 + 1 + 1/6 = 5/3
    assert by_key(r, "is_milestone") == {D: False, A: True, B: True, C: True, E: False, G: False}
    s0 = by_key(r, "s0_pos")
    assert [s0[A], s0[B], s0[C], s0[D], s0[E], s0[G]] == approx([7 / 6, 17 / 12, 5 / 3, 0, 0, 0])
    assert by_key(r, "coverage") == approx({D: 0, A: 1, B: 1, C: 1, E: 0, G: 1})
    # traps: D (|T-| = 1 < 2 but n_re = 1): l- = max(1 - 0.5, 0) = 0.5, f- = 1/2, L = 1/1
    #   S- = 0.5 + 0.25 * 0.5 * 1 = 0.625 >= 0.10.  E: |T-| = 1, n_re = 0 -> fails the pre-conditions.
    assert by_key(r, "s_neg") == approx({D: 0.625, A: 0, B: 0, C: 0, E: 0, G: 0})
    assert by_key(r, "is_trap") == {D: True, A: False, B: False, C: False, E: False, G: False}


def test_hand_potentials_and_shaping_rcs():
    r = estimate_reference(hand_batch(), "milegpo", ALF, "rcs")
    # S0+bar = S0+ / (5/3): A 0.7, B 0.85, C 1.  Phi_R+(s) = max_v S0+bar(v) 0.2^d(s,v):
    #   A = max(0.7, 0.85*0.2, 1*0.04) = 0.7;  B = max(0.85, 0.2) = 0.85;  C = 1;  D, E, g = 0
    # S-bar(D) = 1: Phi_R-: D 1, A 0.2 (A -> D), others 0
    assert by_key(r, "phi_pos") == approx({D: 0, A: 0.7, B: 0.85, C: 1, E: 0, G: 0})
    assert by_key(r, "phi_neg") == approx({D: 1, A: 0.2, B: 0, C: 0, E: 0, G: 0})
    # delta+ = max(Phi+(s') - Phi+(s), 0): A->B 0.15, B->C 0.15, else 0
    # delta- = max(0.25 Phi-(s') - 0.25 Phi-(s), 0): A->D 0.25 - 0.05 = 0.2, else 0
    dp = [0.15, 0.15, 0, 0.15, 0, 0.15, 0, 0, 0, 0.15, 0]
    dn = [0, 0, 0, 0, 0, 0, 0, 0.2, 0, 0, 0]
    assert r.rows["delta_pos"].tolist() == approx(dp)
    assert r.rows["delta_neg"].tolist() == approx(dn)
    # r^M = r^G + 10 * 0.25 * (delta+ - delta-)
    rg = [0.4, 2.0, 10, 0.4, 0.4, 2.0, 10, 0, 0, 0.4, 0]
    assert r.rows["r_shaped"].tolist() == approx([g + 2.5 * (p - n) for g, p, n in zip(rg, dp, dn)])
    # r_shaped: tau0 = 0.775, 2.375, 10; tau2 t0 = -0.5
    assert r.rows["r_shaped"][[0, 1, 7]].tolist() == approx([0.775, 2.375, -0.5])


def test_hand_uniform_potential_md():
    r = estimate_reference(hand_batch(), "milegpo", ALF, "md")
    # Phi+ = max over S+ = {A, B, C} of 0.2^d: 1 on A, B, C; D, E, g reach no milestone -> 0
    # Phi- over S- = {D}: D 1, A 0.2
    assert by_key(r, "phi_pos") == approx({D: 0, A: 1, B: 1, C: 1, E: 0, G: 0})
    assert by_key(r, "phi_neg") == approx({D: 1, A: 0.2, B: 0, C: 0, E: 0, G: 0})
    assert r.rows["delta_pos"].tolist() == [0.0] * 11
    assert r.rows["delta_neg"].tolist() == approx([0, 0, 0, 0, 0, 0, 0, 0.2, 0, 0, 0])


def test_hand_pcc_full():
    r = estimate_reference(hand_batch(), "milegpo", ALF, "full")
    # edge p+: (A,B) 2/3, (A,D) 0, (B,B) 1, (B,C) 1, (B,E) 0, (C,g) 1, (D,D) 0
    # c~ = p+ - sibling mean: (A,B) 2/3 - 0 = 2/3; (A,D) 0 - 2/3; (B,B) 1 - (1+0)/2 = 0.5;
    #   (B,C) 0.5; (B,E) 0 - 1 = -1; (C,g), (D,D) single branch 0.  max |c~| = 1 -> c = c~.
    # b: B <- (A,B) 2/3; C <- (B,C) 0.5; D <- (A,D) < 0 -> 0; E <- (B,E) < 0 -> 0; A no in-edge
    assert by_key(r, "b") == approx({D: 0, A: 0, B: 2 / 3, C: 0.5, E: 0, G: 0})
    # psi = dd + (p+(v) - 0.5) - l-(e):
    #   (A,B): dd 3-2 = 1, p+(B) - .5 = 1/6, l- = max(1/3 - 1, 0) = 0            -> 7/6
    #   (B,C): dd 1, p+(C) - .5 = 1/2, l- = max(0 - (0+1)/2, 0) = 0             -> 3/2
    #   (A,D): dd 0 (D inf), -1/2, l- = 1 - 1/3 = 2/3                             -> -7/6
    #   (B,E): dd 0, -1/2, l- = 1 - 0 = 1                                         -> -3/2
    # psi~: B 7/6, C 3/2 (g excluded); psi-bar = psi~ / 1.5: B 7/9, C 1
    assert by_key(r, "psi_bar") == approx({D: 0, A: 0, B: 7 / 9, C: 1, E: 0, G: 0})
    # retained: B, C (psi-bar > 0); A: psi-bar 0, m = 1 < 1.1, kappa_bc 0 -> not retained, rho = 0
    assert by_key(r, "retained") == {D: False, A: False, B: True, C: True, E: False, G: False}
    # S_pcc: B = 17/12 (1 + 2/3 + 7/9) = 17/12 * 22/9 = 187/54; C = 5/3 (1 + 0.5 + 1) = 25/6; A = 0
    assert by_key(r, "s_pcc") == approx({D: 0, A: 0, B: 187 / 54, C: 25 / 6, E: 0, G: 0})
    # S_pcc bar: B (187/54)/(25/6) = 187/225, C 1.  Phi+: A = max(187/225 * 0.2, 0.04) = 187/1125
    assert by_key(r, "phi_pos") == approx({D: 0, A: 187 / 1125, B: 187 / 225, C: 1, E: 0, G: 0})
    # delta+: A->B 187/225 - 187/1125 = 748/1125; B->C 1 - 187/225 = 38/225; delta- as in rcs
    dp = [748 / 1125, 38 / 225, 0, 748 / 1125, 0, 38 / 225, 0, 0, 0, 748 / 1125, 0]
    assert r.rows["delta_pos"].tolist() == approx(dp)
    rg = [0.4, 2.0, 10, 0.4, 0.4, 2.0, 10, 0, 0, 0.4, 0]
    dn = [0, 0, 0, 0, 0, 0, 0, 0.2, 0, 0, 0]
    assert r.rows["r_shaped"].tolist() == approx([g + 2.5 * (p - n) for g, p, n in zip(rg, dp, dn)])
    # b, psi_bar, retained, s_pcc are the same under every variant (diagnostics read them)
    for v in ("md", "rcs"):
        rv = estimate_reference(hand_batch(), "milegpo", ALF, v)
        for k in ("b", "psi_bar", "retained", "s_pcc", "s0_pos", "s_neg"):
            assert torch.equal(rv.nodes[k], r.nodes[k]), (v, k)


def test_branch_contrast_of_equal_branches_is_zero():
    # u = 100 has three branches, each taken by 7 trajectories of which 3 succeed: p+(e) = 3/7 for all,
    # so c~(e) = 3/7 - (3/7 + 3/7 + 3/7 - 3/7) / 2 = 0 mathematically, but +5.6e-17 in float64;
    # taken literally, eq. 13 would divide that residue by itself (max |c~|) and give b = 1.
    # Margins within threshold_tol are 0 (our decision, docs in reference.branch_contrast).
    paths = []
    for x in (1, 2, 3):
        paths += [(0, [100, x, G])] * 3 + [(0, [100, x])] * 4
    r = estimate_reference(paths_batch(paths), "milegpo", WEB, "full")
    assert r.nodes["b"].tolist() == [0.0] * 5


def test_hand_step_normalisation():
    r = estimate_reference(hand_batch(), "milegpo", ALF, "rcs")
    # (group, state A): rows 0, 3, 7, 9 with r^G 0.4, 0.4, 0, 0.4: mean 0.3,
    #   unbiased var = (3 * 0.1^2 + 0.3^2) / 3 = 0.04, std 0.2 -> (x - 0.3) / (0.2 + 1e-6)
    ag = r.rows["a_graph"]
    assert ag[[0, 3, 7, 9]].tolist() == pytest.approx([0.1 / 0.200001] * 2 + [-0.3 / 0.200001, 0.1 / 0.200001],
                                                      rel=1e-9)
    # state C: rows 2 and 6 both r^G 10 -> exactly 0; state D: one row (8) -> 0
    assert ag[[2, 6, 8]].tolist() == [0.0, 0.0, 0.0]
    # A = (A^G + 0.2 (A^mix - A^G)) + Norm_q(Z)
    adv = r.rows["a_graph"] + 0.2 * (r.rows["a_mix"] - r.rows["a_graph"]) + r.rows["episode_adv"]
    assert torch.allclose(r.advantages, adv, rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# (2) GiGPO against verl-agent semantics, by hand.
# group 0:  ta (success): s1 -> s2 -> g      rewards 0, 10
#           tb (success): s1 -> s3 -> s2 -> g rewards 0, 0, 10; t=1 invalid
#           tc (failure): s1 -> s3            reward 0 (one step)
# group 1:  td (success): s9 -> g             reward 10 (one row: a singleton episode group)
# R_t (gamma 0.95, backward): ta 9.5, 10; tb 9.025, 9.5, 10; tc 0; td 10
# Rows: 0-1 ta, 2-4 tb, 5 tc, 6 td.
# ---------------------------------------------------------------------------------------------
S1, S2, S3, S9 = 11, -12, 13, 19


def gigpo_batch():
    return paths_batch([(0, [S1, S2, G]), (0, [S1, S3, S2, G]), (0, [S1, S3]), (1, [S9, G])], invalid={1: [1]})


def test_gigpo_hand_mean_std():
    r = estimate_reference(gigpo_batch(), "gigpo", ALF, "full")
    assert r.rows["step_return"].tolist() == approx([9.5, 10, 9.025, 9.5, 10, 0, 10])
    # step group (0, s1): rows 0, 2, 5 = [9.5, 9.025, 0]: mean 18.525 / 3 = 6.175
    #   unbiased var = (3.325^2 + 2.85^2 + 6.175^2) / 2 = (11.055625 + 8.1225 + 38.130625) / 2 = 28.654375
    std = math.sqrt(28.654375)
    s1 = [(9.5 - 6.175) / (std + EPS), (9.025 - 6.175) / (std + EPS), (0 - 6.175) / (std + EPS)]
    step = r.rows["step_adv"]
    assert step[[0, 2, 5]].tolist() == pytest.approx(s1, rel=1e-12)
    # (0, s2): [10, 10] -> exactly 0; (0, s3): row 3 alone -> 0; (1, s9): alone -> 0
    assert step[[1, 4, 3, 6]].tolist() == [0.0, 0.0, 0.0, 0.0]
    # episode: all step rows of group 0: Z = [10, 10, 10, 9.9, 10, 0]: mean 49.9 / 6
    z = [10, 10, 10, 9.9, 10, 0]
    mean = 49.9 / 6
    std_z = math.sqrt(sum((x - mean) ** 2 for x in z) / 5)   # 4.0834...
    ep = [(x - mean) / (std_z + EPS) for x in z]
    # group 1 has one row: mean 0, std 1 -> 10 / (1 + 1e-6)
    ep.append(10 / (1 + EPS))
    assert r.rows["episode_adv"].tolist() == pytest.approx(ep, rel=1e-12)
    assert r.rows["episode_score"].tolist() == approx(z + [10])
    want = [e + s for e, s in zip(ep, [s1[0], 0, s1[1], 0, 0, s1[2], 0])]
    assert r.advantages.tolist() == pytest.approx(want, rel=1e-12)
    assert set(r.rows) == set(METHODS["gigpo"].row_keys) and r.nodes == {}


def test_gigpo_hand_mean_mode():
    r = estimate_reference(gigpo_batch(), "gigpo", WEB, "full")
    step = r.rows["step_adv"]
    assert step[[0, 2, 5]].tolist() == pytest.approx([9.5 - 6.175, 9.025 - 6.175, -6.175], rel=1e-12)
    assert step[[1, 3, 4, 6]].tolist() == [0.0] * 4
    mean = 49.9 / 6
    ep = [x - mean for x in [10, 10, 10, 9.9, 10, 0]] + [10.0]     # singleton group: mean 0
    assert r.rows["episode_adv"].tolist() == pytest.approx(ep, rel=1e-12)


def _verl_agent_norm(values, keys, mode, singleton):
    """Transliteration of verl-agent's episode_norm_reward / step_norm_reward in float64,
    plus the spec's exact-0 rule for all-equal segments."""
    out = torch.zeros(len(values), dtype=torch.float64)
    for k in set(keys):
        idx = [i for i, kk in enumerate(keys) if kk == k]
        x = torch.tensor([values[i] for i in idx], dtype=torch.float64)
        if len(idx) == 1:
            mean, std = (torch.tensor(0.0), torch.tensor(1.0)) if singleton == "unit" else (x.mean(), torch.tensor(1.0))
        else:
            mean, std = x.mean(), torch.std(x)
            if float(x.max() - x.min()) <= 1e-12 * max(abs(float(x.max())), abs(float(x.min())), 1.0):
                continue
        out[idx] = x - mean if mode == "mean" else (x - mean) / (std + EPS)
    return out


@pytest.mark.parametrize("config", [ALF, WEB], ids=["mean_std", "mean"])
@pytest.mark.parametrize("seed", [0, 1])
def test_gigpo_matches_verl_agent_transliteration(config, seed):
    b = random_batch(5, [8, 8, 1, 4, 6], 15, seed=seed)
    r = estimate_reference(b, "gigpo", config, "full")
    rows = b.rows()
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["traj"], rows[i]["t"]))
    ret = [0.0] * len(rows)
    running, prev = 0.0, None
    for i in reversed(order):
        if rows[i]["traj"] != prev:
            running, prev = 0.0, rows[i]["traj"]
        running = rows[i]["reward"] + 0.95 * running
        ret[i] = running
    z = r.rows["episode_score"].tolist()
    ep = _verl_agent_norm(z, [x["group"] for x in rows], config.norm, "unit")
    st = _verl_agent_norm(ret, [(x["group"], x["state"]) for x in rows], config.norm, "zero")
    assert torch.allclose(r.rows["step_return"], torch.tensor(ret, dtype=torch.float64), rtol=1e-12, atol=0)
    assert torch.allclose(r.advantages, ep + st, rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------------------------------------
# (3) equal values give exactly 0 (verl-agent float32 gives +-0.47 for six returns of 9.025)
# ---------------------------------------------------------------------------------------------
def test_six_equal_returns_give_exact_zero():
    assert normalize_segment([9.025] * 6, "mean_std", EPS, "zero") == [0.0] * 6
    assert normalize_segment([9.025] * 6, "mean", EPS, "zero") == [0.0] * 6
    assert normalize_segment([9.025] * 6, "mean_std", EPS, "unit") == [0.0] * 6
    # six identical successful trajectories s1 -> s2 -> s3 -> g: R_0 = 0.95 * 0.95 * 10 = 9.025
    b = paths_batch([(3, [S1, S2, S3, G])] * 6, shuffle_seed=4)
    r = estimate_reference(b, "gigpo", ALF, "full")
    rows = b.rows()
    first = [i for i, x in enumerate(rows) if x["t"] == 0]
    assert r.rows["step_return"][first].tolist() == approx([9.025] * 6)
    assert r.rows["step_adv"].tolist() == [0.0] * len(rows)
    assert r.rows["episode_adv"].tolist() == [0.0] * len(rows)
    assert r.advantages.tolist() == [0.0] * len(rows)
    for method in ("graphgpo", "milegpo"):
        assert estimate_reference(b, method, ALF, "full").advantages.tolist() == [0.0] * len(rows)


def test_singleton_normalisation_rules():
    # step group of one row -> 0; episode group of one row -> mean 0, std 1
    assert normalize_segment([3.5], "mean_std", EPS, "zero") == [0.0]
    assert normalize_segment([3.5], "mean_std", EPS, "unit") == [3.5 / (1 + EPS)]
    assert normalize_segment([3.5], "mean", EPS, "unit") == [3.5]


# ---------------------------------------------------------------------------------------------
# (4) properties of appendix B on random batches
# ---------------------------------------------------------------------------------------------
RANDOM = [dict(seed=s, n_states=n) for s, n in [(0, 12), (1, 20), (2, 8), (3, 30)]]


@pytest.mark.parametrize("kw", RANDOM, ids=lambda kw: f"seed{kw['seed']}")
@pytest.mark.parametrize("config", **BOTH_READINGS)
def test_property1_eta0_is_graphgpo(kw, config):
    b = random_batch(4, [8, 8, 1, 5], 25, **kw)
    g = estimate_reference(b, "graphgpo", config, "full")
    for variant in ("md", "rcs", "full"):
        m = estimate_reference(b, "milegpo", config.replace(eta=0.0), variant)
        assert torch.equal(m.advantages, g.advantages)
        assert torch.equal(m.rows["a_graph"], g.rows["a_graph"])


@pytest.mark.parametrize("kw", RANDOM, ids=lambda kw: f"seed{kw['seed']}")
@pytest.mark.parametrize("variant", ["md", "rcs", "full"])
def test_property2_shaping_bounds(kw, variant):
    b = random_batch(4, 8, 25, **kw)
    for config in (presets.ALFWORLD, presets.WEBSHOP, ALF, WEB, ALF.replace(lam=1.0, w_neg=1.0, gamma_phi=0.9)):
        r = estimate_reference(b, "milegpo", config, variant)
        diff = r.rows["r_shaped"] - r.rows["r_graph"]
        lo, hi = -config.c * config.lam * config.w_neg, config.c * config.lam * config.w_pos
        assert float(diff.min()) >= lo - 1e-12 and float(diff.max()) <= hi + 1e-12
        if config is ALF or config is presets.ALFWORLD:
            assert (lo, hi) == (-0.625, 2.5)
        assert float(r.nodes["phi_pos"].min()) >= 0 and float(r.nodes["phi_pos"].max()) <= 1 + 1e-12
        assert float(r.nodes["phi_neg"].min()) >= 0 and float(r.nodes["phi_neg"].max()) <= 1 + 1e-12


@pytest.mark.parametrize("config", **BOTH_READINGS)
def test_property3_ties_ordered_by_a_mix(config):
    checked = 0
    for kw in RANDOM:
        b = random_batch(4, 8, 25, **kw)
        r = estimate_reference(b, "milegpo", config, "full")
        rows = b.rows()
        segments = {}
        for i, x in enumerate(rows):
            segments.setdefault((x["group"], x["state"]), []).append(i)
        ag, am, ep, adv = (r.rows["a_graph"].tolist(), r.rows["a_mix"].tolist(), r.rows["episode_adv"].tolist(),
                           r.advantages.tolist())
        for idx in segments.values():
            for i, j in combinations(idx, 2):
                if ag[i] != ag[j] or abs(am[i] - am[j]) <= 1e-9:
                    continue
                # the step part w_step * (A^G + eta * A^res) is ordered by A^mix; so is A when Norm_q(Z) ties
                step_i, step_j = adv[i] - config.w_ep * ep[i], adv[j] - config.w_ep * ep[j]
                assert (step_i > step_j) == (am[i] > am[j])
                if ep[i] == ep[j]:
                    assert (adv[i] > adv[j]) == (am[i] > am[j])
                checked += 1
    assert checked > 0


# ---------------------------------------------------------------------------------------------
# (5) a group with no success
# ---------------------------------------------------------------------------------------------
def test_group_without_success():
    b = random_batch(3, 6, 20, seed=5, outcome=["fail", None, "fail"], n_states=10)
    r = estimate_reference(b, "milegpo", ALF, "full")
    rows = b.rows()
    gid = sorted({x["group"] for x in rows})
    failed = [g for g in gid if not any(x["success"] for x in rows if x["group"] == g)]
    assert len(failed) >= 2
    for g in failed:
        rmask = torch.tensor([x["group"] == g for x in rows])
        nmask = r.nodes["group"] == g
        assert r.rows["r_graph"][rmask].tolist() == [0.0] * int(rmask.sum())
        assert r.rows["a_graph"][rmask].tolist() == [0.0] * int(rmask.sum())
        assert r.rows["delta_pos"][rmask].tolist() == [0.0] * int(rmask.sum())
        assert not bool(r.nodes["is_sink"][nmask].any())
        assert (r.nodes["dist"][nmask] == -1).all()
        assert not bool(r.nodes["is_milestone"][nmask].any())
        assert r.nodes["phi_pos"][nmask].tolist() == [0.0] * int(nmask.sum())


# ---------------------------------------------------------------------------------------------
# contract: keys, dtypes, node order, input-order invariance, potentials as a max-times fixed point
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["grpo", "gigpo", "graphgpo", "milegpo"])
def test_result_keys_and_dtypes(method):
    b = random_batch(3, [4, 1, 6], 12, seed=7)
    r = estimate_reference(b, method, ALF, "full")
    assert r.backend == "reference" and r.advantages.dtype == torch.float64 and len(r) == len(b)
    assert tuple(r.rows) == METHODS[method].row_keys and tuple(r.nodes) == METHODS[method].node_keys
    for name, t in list(r.rows.items()) + list(r.nodes.items()):
        want = torch.int64 if name in INT_KEYS else torch.bool if name in BOOL_KEYS else torch.float64
        assert t.dtype == want, name
        assert t.shape[0] == (len(b) if name in r.rows else r.nodes["key"].shape[0])
    if method in ("graphgpo", "milegpo"):
        pairs = list(zip(r.nodes["group"].tolist(), r.nodes["key"].tolist()))
        assert pairs == sorted(pairs) and len(set(pairs)) == len(pairs)
        assert [pairs[i] for i in r.rows["node"].tolist()] == [(x["group"], x["state"]) for x in b.rows()]
        assert [pairs[i] for i in r.rows["next_node"].tolist()] == [(x["group"], x["next_state"]) for x in b.rows()]


def test_input_order_invariance():
    b0 = random_batch(3, 6, 15, seed=11, shuffle=False)
    b1 = random_batch(3, 6, 15, seed=11, shuffle=True)
    r0 = estimate_reference(b0, "milegpo", WEB, "full")
    r1 = estimate_reference(b1, "milegpo", WEB, "full")
    k0 = {(x["traj"], x["t"]): i for i, x in enumerate(b0.rows())}
    perm = [k0[(x["traj"], x["t"])] for x in b1.rows()]
    assert len(b0) == len(b1) and sorted(perm) == list(range(len(b0)))
    for name in METHODS["milegpo"].row_keys:
        assert torch.allclose(r1.rows[name].double(), r0.rows[name][perm].double(), rtol=1e-12, atol=1e-12), name
    for name in METHODS["milegpo"].node_keys:
        assert torch.equal(r1.nodes[name], r0.nodes[name]), name


def test_potential_is_max_times_fixed_point():
    # Phi(s) = max(S(s) if candidate, omega * max over edges (s,u) of Phi(u)) (spec section 5)
    b = random_batch(3, 8, 30, seed=13, n_states=25)
    rows = b.rows()
    for group, trajs in group_trajectories(rows).items():
        graph = rollout_graph(group, trajs, rows)
        scores = max_normalize(milestone_scores(graph, ALF))
        phi = potential(graph, scores, 0.2)
        relaxed = {v: scores.get(v, 0.0) for v in graph.nodes}
        for _ in range(len(graph.nodes) + 1):
            relaxed = {v: max([relaxed[v]] + [0.2 * relaxed[u] for u in graph.succ[v]]) for v in graph.nodes}
        assert phi == pytest.approx(relaxed, rel=1e-12, abs=0)
        assert hop_distances_to(graph, SINK).get(SINK, 0) == 0


def test_estimate_dispatches_to_reference():
    from milegpo.credit import estimate

    r = estimate(hand_batch(), "milegpo", ALF, "full", backend="reference")
    assert r.backend == "reference" and torch.equal(r.advantages, estimate_reference(hand_batch(), "milegpo", ALF,
                                                                                        "full").advantages)


def test_empty_batch():
    b = StepBatch.from_rows([])
    for method in ("grpo", "gigpo", "graphgpo", "milegpo"):
        r = estimate_reference(b, method, ALF, "full")
        assert len(r) == 0 and tuple(r.rows) == METHODS[method].row_keys
