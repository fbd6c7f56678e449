"""Milestone truth (milegpo.evidence.milestones): the AUC on hand-built batches whose answer is worked out by hand,
every step score on every backend, the tie rule against the pairwise one, and the command's report."""

from __future__ import annotations

import json

import numpy as np
import pytest

from milegpo.credit import SINK, StepBatch, presets
from milegpo.evidence.milestones import (REFERENCE, SCORES_BY_KEY, STEP_SCORES, format_milestone_truth,
                                         group_max_normalised, milestone_pair_scores, milestone_sides,
                                         milestone_truth, step_scores)
from milegpo.evidence.quality import estimate_all
from milegpo.evidence.ranking import ordered_share, ranked_above


def hand_rows():
    """One task group, K = 3 (K+ = 2). States 1..5, g the sink:

    - T0 (won):  1 -> 2 (milestone) -> 3 -> g (milestone, the win)
    - T1 (won):  1 -> 4 -> 2 (milestone) -> g (milestone, the win)
    - T2 (lost): 1 -> 4 -> 5 -> 5 (truncated; 5 revisited)

    Hop distances to g: d(2) = d(3) = 1, d(1) = d(4) = 2, d(5) infinite. Coverage m: 1, 2 -> 1; 3, 4 -> 1/2; 5 -> 0.
    5 is a trap (never on a success, revisited: S- = 1 * (1 - 1/3) + 0.25 * 1 * 1 = 11/12 >= 0.10).
    Intermediate milestone rows: T0 t0 and T1 t1 (both enter 2); other rows (not into g): T0 t1, T1 t0, T2 t0, t1,
    t2: 2 x 5 = 10 pairs. The two winning rows are left out."""
    spec = [(0, True, [(1, 2, True), (2, 3, False), (3, SINK, True)]),
            (1, True, [(1, 4, False), (4, 2, True), (2, SINK, True)]),
            (2, False, [(1, 4, False), (4, 5, False), (5, 5, False)])]
    rows = []
    for traj, won, steps in spec:
        for t, (state, next_state, milestone) in enumerate(steps):
            rows.append(dict(group=0, traj=traj, t=t, state=state, next_state=next_state, success=won,
                             reward=10.0 if next_state == SINK else 0.0, invalid=False, milestone=milestone))
    return rows


def hand_batch():
    return StepBatch.from_rows(hand_rows())


def test_the_sides_leave_the_winning_steps_out():
    positive, negative = milestone_sides(hand_batch())
    assert positive.tolist() == [True, False, False, False, True, False, False, False, False]
    assert negative.tolist() == [False, True, False, True, False, False, True, True, True]


def test_copying_the_milestones_scores_one_a_constant_one_half_the_reverse_zero_the_win_nothing():
    batch = hand_batch()
    flags = batch.milestone.numpy().astype(np.float64)
    win_only = (batch.next_state.numpy() == SINK).astype(np.float64)  # high on the winning rows only: left out
    scores = {"copy": flags, "constant": np.zeros(9), "reverse": -flags, "win_only": win_only}
    rep = milestone_truth([batch], [scores], n_resamples=100, reference="constant")
    got = {k: v["milestone_auc"] for k, v in rep["scores"].items()}
    assert got == {"copy": 1.0, "constant": 0.5, "reverse": 0.0, "win_only": 0.5}
    assert rep["scores"]["copy"]["pairs"] == 10 and rep["scores"]["copy"]["ci"] == [1.0, 1.0]
    assert rep["scores"]["copy"]["minus_constant"]["value"] == 0.5 and "minus_constant" not in rep["scores"]["constant"]
    assert rep["labels"] == {"batches": 1, "rows": 9, "milestone_rows": 4, "winning_rows": 2,
                             "intermediate_milestones": 2, "groups": 1, "groups_with_pairs": 1}


def hand_scores(backend):
    return step_scores(estimate_all(hand_batch(), presets.ALFWORLD, backend))


@pytest.mark.parametrize("backend", ["reference", "torch"])
def test_the_step_scores_of_the_hand_batch_by_hand(backend):
    scores = hand_scores(backend)
    assert set(scores) == {s.key for s in STEP_SCORES}
    # rows: T0 t0..t2, T1 t0..t2, T2 t0..t2
    assert scores["milegpo_coverage"].tolist() == [1.0, 0.5, 0.0, 0.5, 1.0, 0.0, 0.5, 0.0, 0.0]  # g: no node score
    assert scores["graphgpo_hop_gain"].tolist() == [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert scores["graphgpo_return"] == pytest.approx([2.0, 2.0, 10.0, 0.4, 2.0, 10.0, 0.4, 0.0, 0.0])
    assert scores["milegpo_trap"].tolist() == [0.0] * 7 + [-1.0, -1.0]  # the trap 5, negated and max-normalised
    # BEACON (gamma 0.9 at the ALFWorld preset): 10 on a milestone, 9 one step before it, 0 without one
    assert scores["beacon_segment_reward"] == pytest.approx([10.0, 9.0, 10.0, 9.0, 10.0, 10.0, 0.0, 0.0, 0.0])
    rep = milestone_truth([hand_batch()], [scores], n_resamples=100)["scores"]
    # coverage: the milestones (1, 1) above every other (1/2, 1/2, 1/2, 0, 0); hop gain (1, 1) above five 0s
    assert rep["milegpo_coverage"]["milestone_auc"] == 1.0 and rep["graphgpo_hop_gain"]["milestone_auc"] == 1.0
    # r^G: (2, 2) against (2, 0.4, 0.4, 0, 0): each milestone wins 4 and ties 1 -> 9 / 10
    assert rep["graphgpo_return"]["milestone_auc"] == pytest.approx(0.9)
    # the trap score: (0, 0) against (0, 0, 0, -1, -1): 2 wins and 3 ties each -> 7 / 10
    assert rep["milegpo_trap"]["milestone_auc"] == pytest.approx(0.7)
    assert rep["beacon_segment_reward"]["milestone_auc"] == 1.0 and rep["beacon_segment_reward"]["told"]
    assert rep["milegpo_coverage"][f"minus_{REFERENCE}"]["value"] == pytest.approx(0.1)


def test_every_score_is_the_same_on_every_backend():
    from tests.credit.batches import make_batch

    batch = make_batch(3, n_groups=3, k=5, horizon=9)
    ref = step_scores(estimate_all(batch, presets.WEBSHOP, "reference"))
    torch_scores = step_scores(estimate_all(batch, presets.WEBSHOP, "torch"))
    assert set(ref) == set(torch_scores) == {s.key for s in STEP_SCORES}
    for key in ref:
        np.testing.assert_allclose(torch_scores[key], ref[key], rtol=0, atol=1e-9, err_msg=key)
    assert 0 < int(batch.milestone.sum()) < len(batch)


def test_node_scores_are_normalised_within_their_group():
    values = np.array([2.0, 1.0, 0.0, 0.0, 4.0, 3.0])
    group = np.array([0, 0, 0, 1, 2, 2])
    assert group_max_normalised(values, group).tolist() == [1.0, 0.5, 0.0, 0.0, 1.0, 0.75]


def test_ranked_above_is_the_pairwise_rule_summed():
    rng = np.random.default_rng(0)
    for _ in range(50):
        pos = rng.integers(0, 4, rng.integers(0, 6)).astype(np.float64)
        neg = rng.integers(0, 4, rng.integers(0, 8)).astype(np.float64)
        neg[: len(neg) // 2] += 1e-10  # ties within the tolerance
        values = np.concatenate([pos, neg])
        good, bad = np.meshgrid(np.arange(len(pos)), len(pos) + np.arange(len(neg)), indexing="ij")
        assert ranked_above(pos, neg) == pytest.approx(ordered_share(values, good.ravel(), bad.ravel()).sum())


def test_pairs_never_leave_their_group_and_the_bootstrap_is_over_groups():
    rows = hand_rows() + [dict(r, group=1, traj=r["traj"] + 3) for r in hand_rows()]
    batch = StepBatch.from_rows(rows)
    # a score that puts group 1's rows above group 0's but reverses the order inside each group
    inside = -batch.milestone.numpy().astype(np.float64)
    score = inside + 100.0 * batch.group.numpy()
    won, pairs = milestone_pair_scores(score, batch)
    assert pairs.tolist() == [10.0, 10.0] and won.tolist() == [0.0, 0.0]
    rep = milestone_truth([batch, hand_batch()], [{"s": score}, {"s": -hand_batch().milestone.numpy().astype(np.float64)}],
                          n_resamples=50)
    assert rep["scores"]["s"]["milestone_auc"] == 0.0 and rep["scores"]["s"]["per_batch"] == [0.0, 0.0]
    assert rep["labels"]["groups"] == 3 and rep["scores"]["s"]["pairs"] == 30


def test_no_milestones_give_nan_and_mismatched_inputs_are_named():
    rows = [dict(r, milestone=False) for r in hand_rows()]
    batch = StepBatch.from_rows(rows)
    rep = milestone_truth([batch], [{"s": np.arange(9.0)}], n_resamples=20)
    assert np.isnan(rep["scores"]["s"]["milestone_auc"]) and rep["labels"]["groups_with_pairs"] == 0
    assert "n/a" in format_milestone_truth(rep)
    with pytest.raises(ValueError, match="one of each per batch"):
        milestone_truth([batch], [])
    with pytest.raises(ValueError, match="score 's' of batch 0 has shape"):
        milestone_truth([batch], [{"s": np.zeros(3)}])


def test_every_score_names_a_registered_label_and_defines_itself():
    from milegpo.credit import method_variants

    for score in STEP_SCORES:
        assert score.label in method_variants() and score.definition, score.key
    assert SCORES_BY_KEY["beacon_segment_reward"].told and not SCORES_BY_KEY["milegpo_s_pcc"].told


def test_the_command_reports_milestone_truth_beside_the_same_state_ranking(tmp_path):
    from milegpo.cli import main

    assert main(["credit-quality", "--out", str(tmp_path), "--seeds", "0", "--groups", "3", "--group-size", "4",
                 "--horizon", "20", "--resamples", "50", "--backend", "torch"]) == 0
    rep = json.loads((tmp_path / "credit_quality.json").read_text())
    truth = rep["milestone_truth"]
    assert set(truth["scores"]) == {s.key for s in STEP_SCORES} and truth["reference"] == REFERENCE
    assert truth["labels"]["intermediate_milestones"] > 0
    assert truth["scores"]["beacon_segment_reward"]["milestone_auc"] > 0.95  # told the milestones
    assert rep["sources"]["expert-epsilon"]["milestone_truth"]["scores"]["milegpo_s_pcc"]["milestone_auc"] == \
        truth["scores"]["milegpo_s_pcc"]["milestone_auc"]  # one source: the same batches
    assert (tmp_path / "milestone_truth.png").stat().st_size > 1000


def test_a_world_without_a_planner_gets_milestone_truth_only(tmp_path, monkeypatch):
    """ScienceWorld's engine reports subgoals but no steps-to-win: its batches carry no step labels, the
    same-state figures have no pairs, and the milestone truth is measured all the same."""
    from milegpo.cli import main
    from milegpo.envs import HouseholdEnv
    from milegpo.evidence import labelled

    assert labelled.gives_steps_to_win(HouseholdEnv())
    monkeypatch.setattr(labelled, "gives_steps_to_win", lambda env: False)
    assert main(["credit-quality", "--out", str(tmp_path), "--seeds", "0", "--groups", "2", "--group-size", "4",
                 "--horizon", "20", "--resamples", "20", "--backend", "torch"]) == 0
    rep = json.loads((tmp_path / "credit_quality.json").read_text())
    assert rep["methods"]["graphgpo"]["same_state_auc"] is None and rep["labels"]["good_share"] == 0.0
    assert rep["states"]["aliased_share"] is None
    truth = rep["milestone_truth"]
    assert truth["labels"]["intermediate_milestones"] > 0 and truth["scores"]["beacon_segment_reward"]["milestone_auc"]
