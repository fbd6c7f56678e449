"""Ground-truth credit quality (milegpo.evidence.quality): the AUCs on hand-made batches with known answers,
the bootstrap, and the command end to end on small labelled batches."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from milegpo.credit import SINK, StepBatch, presets
from milegpo.evidence.quality import (METRICS, LabelledBatch, credit_quality, percentile_interval,
                                    quality_of_advantages, step_labels)


def hand_batch():
    """Two groups. Group 0: three trajectories through state 7 (rows 0, 2, 4) and state 8 (rows 1, 3);
    group 1: two one-step trajectories from state 9. Labels: good rows 0, 3, 5."""
    rows = [
        dict(group=0, traj=0, t=0, state=7, next_state=8, success=True, reward=0.0, invalid=False),
        dict(group=0, traj=0, t=1, state=8, next_state=SINK, success=True, reward=10.0, invalid=False),
        dict(group=0, traj=1, t=0, state=7, next_state=8, success=False, reward=0.0, invalid=True),
        dict(group=0, traj=1, t=1, state=8, next_state=5, success=False, reward=0.0, invalid=False),
        dict(group=0, traj=2, t=0, state=7, next_state=6, success=False, reward=0.0, invalid=False),
        dict(group=1, traj=3, t=0, state=9, next_state=SINK, success=True, reward=10.0, invalid=False),
        dict(group=1, traj=4, t=0, state=9, next_state=4, success=False, reward=0.0, invalid=False),
    ]
    good = np.array([True, False, False, True, False, True, False])
    n = len(rows)
    return LabelledBatch(StepBatch.from_rows(rows), good, np.zeros(n, np.int64), np.zeros(n, np.int64), "hand", 0)


def report_for(advantages: dict, a_graph=None, batch=None):
    batch = batch or hand_batch()
    a_graph = np.zeros(len(batch.good)) if a_graph is None else a_graph
    return quality_of_advantages([batch], [advantages], [a_graph], n_resamples=200, reference=None)


def test_copying_the_labels_scores_one_a_constant_one_half_the_reverse_zero():
    good = hand_batch().good.astype(np.float64)
    rep = report_for({"labels": good, "constant": np.zeros(7), "reverse": -good})["methods"]
    for k in METRICS:
        assert rep["labels"][k] == 1.0 and rep["constant"][k] == 0.5 and rep["reverse"][k] == 0.0, k
        assert rep["labels"]["ci"][k] == [1.0, 1.0] and rep["constant"]["ci"][k] == [0.5, 0.5]


def test_pair_counts_and_a_partial_ordering_by_hand():
    # same-state pairs with one good, one bad: state 7: (0, 2), (0, 4); state 8: (3, 1); state 9: (5, 6) -> 4
    # group pairs: group 0 has good {0, 3} x bad {1, 2, 4} = 6, group 1 has 1 -> 7
    adv = np.array([1.0, 0.0, 1.0, 2.0, 0.5, -1.0, 3.0])
    rep = report_for({"m": adv})["methods"]["m"]
    assert rep["pairs"]["same_state_auc"] == 4 and rep["pairs"]["group_auc"] == 7
    # (0, 2) tie 1/2, (0, 4) win, (3, 1) win, (5, 6) loss -> 2.5 / 4
    assert rep["same_state_auc"] == pytest.approx(2.5 / 4)
    # group 0: 0 vs 1 win, 0 vs 2 tie, 0 vs 4 win, 3 vs 1, 2, 4 wins -> 5.5 of 6; group 1: loss -> 5.5 / 7
    assert rep["group_auc"] == pytest.approx(5.5 / 7)
    assert rep["per_batch"]["same_state_auc"] == [pytest.approx(2.5 / 4)]


def test_tied_pairs_are_the_same_state_pairs_graphgpo_ties():
    # A^G ties rows 0 and 2 (state 7) and rows 5 and 6 (state 9) only
    a_graph = np.array([0.3, 0.0, 0.3, 1.0, -0.5, 0.7, 0.7 + 1e-9])
    adv = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 2.0, 1.0])
    rep = report_for({"m": adv}, a_graph)["methods"]["m"]
    assert rep["pairs"]["tied_pair_accuracy"] == 2
    assert rep["tied_pair_accuracy"] == 1.0  # both tied pairs ordered right by this method


def test_the_tie_share_is_pooled_over_same_state_pairs_with_an_interval_inside_0_1():
    # same-state pairs, any labels: state 7 (0, 2), (0, 4), (2, 4); state 8 (1, 3); state 9 (5, 6): 5, of which
    # A^G ties (0, 2) and (5, 6)
    a_graph = np.array([0.3, 0.0, 0.3, 1.0, -0.5, 0.7, 0.7 + 1e-9])
    ties = report_for({"m": np.zeros(7)}, a_graph)["ties"]
    assert (ties["tied_pairs"], ties["same_state_pairs"]) == (2, 5) and ties["tie_share"] == pytest.approx(0.4)
    # two batches far apart (all tied, none tied): pooled, the bootstrap over groups stays in [0, 1] (a
    # t-interval over the two batches' shares would not)
    batches = [hand_batch(), hand_batch()]
    rep = quality_of_advantages(batches, [{"m": np.zeros(7)}] * 2, [np.zeros(7), np.arange(7.0)], n_resamples=300,
                                reference=None)
    lo, hi = rep["ties"]["ci"]
    assert rep["ties"]["tie_share"] == pytest.approx(0.5) and 0.0 <= lo < 0.5 < hi <= 1.0


def test_a_metric_without_pairs_is_nan_and_the_interval_too():
    batch = hand_batch()
    batch.good[:] = True
    rep = report_for({"m": np.zeros(7)}, batch=batch)["methods"]["m"]
    assert all(np.isnan(rep[k]) for k in METRICS) and np.isnan(rep["ci"]["group_auc"]).all()
    assert percentile_interval(np.array([np.nan])) == [pytest.approx(np.nan, nan_ok=True)] * 2


def test_bootstrap_interval_covers_the_pooled_value_and_differences_are_paired():
    rng = np.random.default_rng(0)
    rows, good = [], []
    for g in range(12):
        for k in range(4):
            for t in range(3):
                rows.append(dict(group=g, traj=g * 4 + k, t=t, state=t, next_state=t + 1 if t < 2 else 100 + k,
                                 success=False, reward=0.0, invalid=False))
                good.append(bool(rng.random() < 0.5))
    good = np.array(good)
    n = len(good)
    lb = LabelledBatch(StepBatch.from_rows(rows), good, np.zeros(n, np.int64), np.zeros(n, np.int64))
    noisy = good + rng.normal(0, 0.8, n)
    rep = quality_of_advantages([lb], [{"noisy": noisy, "graphgpo": np.zeros(n)}], [np.zeros(n)], n_resamples=500)
    m = rep["methods"]["noisy"]
    for k in ("same_state_auc", "group_auc"):
        lo, hi = m["ci"][k]
        assert lo < m[k] < hi and 0.5 < m[k] < 1.0
        d = m["minus_graphgpo"][k]
        assert d["value"] == pytest.approx(m[k] - 0.5) and d["ci"][0] < d["value"] < d["ci"][1]
    assert rep["labels"]["groups"] == 12 and rep["labels"]["rows"] == n


def test_step_labels_and_errors():
    before = np.array([4, 4, 3, 2, 1 << 30])
    after = np.array([3, 4, 2, 1, (1 << 30) - 1])
    invalid = np.array([False, False, True, False, False])
    assert step_labels(before, after, invalid).tolist() == [True, False, False, True, False]
    with pytest.raises(ValueError, match="one shape"):
        step_labels(before, after[:2], invalid)
    with pytest.raises(ValueError, match="LabelledBatch.good must have shape"):
        LabelledBatch(hand_batch().batch, np.zeros(3, bool), np.zeros(7, np.int64), np.zeros(7, np.int64))
    with pytest.raises(ValueError, match="one of each per batch"):
        quality_of_advantages([hand_batch()], [], [])


def test_every_method_on_labelled_household_batches():
    from milegpo.evidence.quality import quality_tasks
    from milegpo.evidence.labelled import play_mixed_expert

    tasks = quality_tasks("household", "train", 3, 0, 20)
    assert [t.task_type for t in tasks] == ["pick_and_place_simple", "look_at_obj_in_light",
                                            "pick_clean_then_place_in_recep"]
    lb = play_mixed_expert(tasks, 4, seed=0, epsilon=(0.2, 0.9))
    assert lb.source == "expert-epsilon" and 0.0 < lb.good.mean() < 1.0
    # the world's milestones reach the batch (issue 47): every winning step is one, and only a few steps are
    b = lb.batch
    won_last = b.success & (b.next_state == SINK)
    assert bool(b.milestone[won_last].all()) and won_last.any() and 0 < int(b.milestone.sum()) < len(b) // 2
    rep = credit_quality([lb], presets.ALFWORLD, backend="torch", n_resamples=100)
    assert set(rep["methods"]) == {"grpo", "gigpo", "gigpo-verl", "graphgpo", "milegpo-md", "milegpo-rcs",
                                   "milegpo-full", "hgpo", "g2po", "beacon"}  # the registry's (issues 42, 47)
    for m, entry in rep["methods"].items():
        for k in METRICS:
            assert 0.0 <= entry[k] <= 1.0 or np.isnan(entry[k])
        if m.startswith("milegpo"):
            assert "tie_correction_rate" in entry["diagnostics"]
        # the paper's mechanism figures, per batch too (their spread over seeds)
        assert set(entry["diagnostics_per_batch"]) == set(entry["diagnostics"])
        assert entry["diagnostics_per_batch"]["shared_state_coverage"] == [entry["diagnostics"]["shared_state_coverage"]]
    assert "tie_share" in rep["methods"]["graphgpo"]["diagnostics_per_batch"]
    # the pooled tie share is the diagnostics' of the one batch
    assert rep["ties"]["tie_share"] == pytest.approx(rep["methods"]["graphgpo"]["diagnostics"]["tie_share"])


def test_the_command_writes_the_json_and_the_plot(tmp_path):
    from milegpo.cli import main

    assert main(["credit-quality", "--out", str(tmp_path), "--seeds", "0", "1", "--groups", "2", "--group-size", "3",
                 "--horizon", "12", "--resamples", "50", "--backend", "torch"]) == 0
    rep = json.loads((tmp_path / "credit_quality.json").read_text())
    full = rep["methods"]["milegpo-full"]
    assert set(METRICS) <= set(full) and set(full["ci"]) == set(METRICS)
    assert rep["settings"]["seeds"] == [0, 1] and rep["labels"]["batches"] == 2
    assert set(rep["sources"]) == {"expert-epsilon"}
    assert (tmp_path / "credit_quality.png").stat().st_size > 1000


def test_near_duplicate_states_of_a_labelled_batch_merge_and_keep_rows_and_labels():
    from milegpo.evidence.quality import aliased_share, distinct_states, with_similar_states
    from milegpo.state_sketches import StateSimilarity

    lb = hand_batch()
    with pytest.raises(ValueError, match="'hand' seed 0 has no observation texts"):
        with_similar_states(lb, StateSimilarity(0.7))
    # 6 differs from 7 in one number (bigram Jaccard 0.84); 9 and 4 (another group) the same; the rest apart
    room = "you are in the kitchen . on the counter 1 you see a mug {} , a plate 2 and a fork 3 ."
    lb.texts = {7: room.format(1), 6: room.format(5), 8: "you are in the garden .", 5: "the door is locked .",
                9: room.format(1), 4: room.format(5)}
    merged = with_similar_states(lb, StateSimilarity(0.7))
    assert merged.batch.state.tolist() == [6, 8, 6, 8, 6, 4, 4]
    assert merged.batch.next_state.tolist() == [8, SINK, 8, 5, 6, SINK, 4]
    assert (merged.good == lb.good).all() and merged.batch.reward.tolist() == lb.batch.reward.tolist()
    # rows' states: (0, 7), (0, 8), (1, 9) -> (0, 6), (0, 8), (1, 4): 6 and 4 take 7's and 9's place
    assert distinct_states([lb]) == distinct_states([merged]) == 3 and distinct_states([lb, merged]) == 6
    assert with_similar_states(lb, StateSimilarity(0.9)).batch.state.tolist() == lb.batch.state.tolist()
    # same-state pairs: state 7 / 6: (0, 2), (0, 4), (2, 4); 8: (1, 3); 9 / 4: (5, 6); steps-to-win differ in two
    lb.steps_before[:] = [3, 2, 3, 2, 5, 1, 1]
    assert aliased_share([lb]) == pytest.approx(2 / 5) == aliased_share([merged])


def test_the_command_scores_every_method_with_exact_and_with_merged_states(tmp_path, capsys):
    from milegpo.cli import main

    assert main(["credit-quality", "--out", str(tmp_path), "--state-similarity", "1.5"]) == 2
    assert "threshold must be in (0, 1], got 1.5" in capsys.readouterr().err
    assert not (tmp_path / "credit_quality.json").exists()
    assert main(["credit-quality", "--out", str(tmp_path), "--seeds", "0", "--groups", "3", "--group-size", "4",
                 "--horizon", "15", "--resamples", "50", "--backend", "torch", "--state-similarity", "1.0",
                 "0.6"]) == 0
    rep = json.loads((tmp_path / "credit_quality.json").read_text())
    assert rep["settings"]["state_similarity"] == [1.0, 0.6] and set(rep["state_similarity"]) == {"1.0", "0.6"}
    same, loose = rep["state_similarity"]["1.0"], rep["state_similarity"]["0.6"]
    # Jaccard 1 merges only texts of one shingle set: nearly the exact keys; 0.6 merges more
    assert rep["states"]["distinct"] >= same["states"]["distinct"] > loose["states"]["distinct"]
    assert all(0.0 <= r["states"]["aliased_share"] <= 1.0 for r in (rep, same, loose))
    assert rep["states"]["anchor"] == rep["settings"]["state_anchor"] == "tracked+actions"
    assert loose["methods"]["milegpo-full"]["diagnostics"]["shared_state_coverage"] >= \
        rep["methods"]["milegpo-full"]["diagnostics"]["shared_state_coverage"]
    for m, paired in loose["against_exact"].items():
        assert paired["group_auc"]["exact"] == pytest.approx(rep["methods"][m]["group_auc"])
        assert paired["group_auc"]["merged"] == pytest.approx(loose["methods"][m]["group_auc"])  # the same pairs
        assert paired["group_auc"]["value"] == pytest.approx(paired["group_auc"]["merged"] -
                                                             paired["group_auc"]["exact"])
    # GRPO ignores states: merging changes nothing of it
    assert loose["against_exact"]["grpo"]["group_auc"]["value"] == 0.0
    assert loose["methods"]["grpo"]["group_auc"] == rep["methods"]["grpo"]["group_auc"]


def test_replayed_trajectories_get_the_labels_of_the_played_ones():
    from milegpo.evidence.quality import quality_tasks
    from milegpo.envs import HouseholdEnv
    from milegpo.evidence.labelled import mixed_expert, play_episode, replay_labels

    env, rng = HouseholdEnv(), random.Random(0)
    tasks = quality_tasks("household", "train", 2, 1, 15)
    played = [play_episode(env, t, mixed_expert(env, rng, 0.5), label=True) for t in tasks]
    again = replay_labels(played, [p.action for p in played], [p.state for p in played])
    for a, b in zip(played, again):
        assert (a.steps_before, a.steps_after, a.invalid, a.next_state) == (b.steps_before, b.steps_after, b.invalid,
                                                                           b.next_state)
    with pytest.raises(ValueError, match="trajectory 1 .* reached another state at step 0"):
        replay_labels(played, [p.action for p in played], [played[0].state, [1] + played[1].state[1:]])


@pytest.mark.slow
def test_a_saved_policy_is_played_by_the_trainer_and_labelled_by_replay(tmp_path):
    from milegpo.evidence.quality import quality_tasks
    from milegpo.evidence.labelled import play_checkpoint
    from milegpo.job.policy import make_model, make_tokenizer

    tok = make_tokenizer(n_tasks=4)
    make_model(tok, hidden=32).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    tasks = quality_tasks("household", "train", 2, 0, 4)
    lb = play_checkpoint(str(tmp_path), tasks, 2, seed=0, flags=["--max_completion_length", "8"])
    assert lb.source == "checkpoint" and len(lb.batch) == 16  # 2 groups x 2 episodes x horizon 4
    # an untrained policy writes no <action> block: every step invalid, so bad, and the world did nothing
    assert lb.batch.invalid.all() and not lb.good.any() and (lb.steps_before == lb.steps_after).all()


#: a small embedded WebShop catalog (tests/envs/webshop/conftest.py's)
WEBSHOP_SMALL = {"catalog_size": 300, "catalog_seed": 0, "test_goals": 40}


def test_webshop_labels_on_hand_played_episodes(private_webshop_cache):
    """Goal 1 of the small catalog has one winning purchase: product B0SAQKH8GT in colour "sky blue", on the first
    results page of the shopping expert's query, so steps-to-win starts at 4 (search, open, select, buy). A step
    is good when it lowers that by one: the search, going back to the results from a wrong product, opening the
    winner, selecting its colour, buying; opening a wrong product, an invalid action and a purchase that scores
    below 1.0 are bad."""
    from milegpo.envs.webshop import WebShopEnv, webshop_tasks
    from milegpo.envs.webshop.expert import search_query
    from milegpo.evidence.labelled import labelled_batch, play_episode

    task = webshop_tasks("test", None, **WEBSHOP_SMALL)[1]
    env = WebShopEnv()
    _, admissible, info = env.reset(task)
    assert env.world.winners(env.goal_index) == [("B0SAQKH8GT", {"color": "sky blue"})]
    query = f"search[{search_query(info['goal'])}]"
    assert admissible == ["search[<your query>]"] and env.playable_actions(admissible) == [query]
    env.step(query)
    other = next(a for a in env.admissible if a.startswith("click[b0") and a != "click[b0saqkh8gt]")

    def replay(actions):
        return play_episode(env, task, lambda obs, adm, t: actions[t], label=True)

    detour = replay([query, other, "click[< prev]", "look around", "click[b0saqkh8gt]", "click[sky blue]",
                     "click[buy now]"])
    assert detour.won and detour.steps_before == [4, 3, 4, 3, 3, 2, 1] and detour.steps_after == [3, 4, 3, 3, 2, 1, 0]
    careless = replay([query, "click[b0saqkh8gt]", "click[buy now]"])  # no colour selected: the score is below 1.0
    assert not careless.won and 0.0 < careless.score < 1.0
    lb = labelled_batch([[detour, careless]], "hand", 0)
    assert lb.good.tolist() == [True, False, True, False, True, True, True] + [True, True, False]
    assert lb.batch.invalid.numpy().tolist() == [False] * 3 + [True] + [False] * 6


def test_the_command_on_webshop_and_its_one_line_mistakes(tmp_path, capsys, private_webshop_cache):
    from milegpo.cli import main

    assert main(["credit-quality", "--env", "webshop", "--out", str(tmp_path), "--seeds", "0", "--groups", "2",
                 "--group-size", "3", "--resamples", "50", "--backend", "torch"]) == 0
    rep = json.loads((tmp_path / "credit_quality.json").read_text())
    settings = rep["settings"]
    assert (settings["expert"], settings["preset"], settings["horizon"]) == ("search", "webshop", 30)
    assert rep["labels"]["rows"] > 0 and 0.0 < rep["labels"]["good_share"] < 1.0
    capsys.readouterr()
    # the small catalog's train split has 206 goals, fewer than the 1,000 the quality batches start from
    assert main(["credit-quality", "--env", "webshop", "--env-options", json.dumps(WEBSHOP_SMALL),
                 "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "milegpo credit-quality:" in err and "from goal 1000 on" in err
    assert main(["credit-quality", "--env", "webshop", "--expert", "oracle", "--out", str(tmp_path)]) == 2
    assert "the webshop world's experts are ['search']" in capsys.readouterr().err


def test_a_task_set_too_small_for_the_batches_is_one_line_not_an_index_error(capsys, monkeypatch):
    """A fixed task set (ALFWorld's games) with no task at a batch's index: the command says which index of which
    split, exit 2 (was an IndexError traceback from quality_tasks)."""
    import milegpo.rollout
    from milegpo.cli import main
    from milegpo.evidence.quality import quality_tasks

    assert len(quality_tasks("household", "train", 2, 0, None)) == 2
    real = milegpo.rollout.make_tasks
    monkeypatch.setattr(milegpo.rollout, "make_tasks", lambda env, split, n, task_type, horizon, start=0, options=None:
                        real(env, split, n, task_type, horizon, start=start, options=options) if start < 100_003 else [])
    assert main(["credit-quality", "--groups", "4", "--seeds", "0"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "env 'household', split 'train' has no task of type '" in err and "at index 100003 (batch seed 0, group 3" in err
