"""What a run reports (milegpo.job.report): WebShop's score beside the success rate, none for the household world."""

import math

from milegpo.job.report import eval_line, eval_summary, format_eval, format_summary, training_ends, training_history


def _summary(splits, before, after, history):
    return {"policy": "tiny", "env": "x", "task_type": "", "credit_method": "milegpo", "credit_variant": "full",
            "iterations": 1, "groups_per_iteration": 2, "group_size": 2, "horizon": 8, "splits": splits,
            "before": before, "after": after, "train_s": 1.0, "total_s": 2.0, "output_dir": "run",
            **training_ends(history)}


def test_webshop_score_is_reported_beside_success():
    metrics = {"eval_test_success_rate": 0.25, "eval_test_score": 61.5, "eval_test_invalid_action_rate": 0.1,
               "eval_test_episode_length": 6.0, "eval_runtime": 3.0}
    d = eval_summary(metrics, ["test"])
    assert d == {"test_success_rate": 0.25, "test_score": 61.5, "test_invalid_action_rate": 0.1,
                 "test_episode_length": 6.0}
    assert eval_line(d, ["test"]) == "test success 25.0%, score 61.5 (invalid actions 10.0%)"
    table = format_eval(d, {"test": [object()] * 4})
    assert "score" in table.splitlines()[1] and "61.5" in table
    history = training_history([{"step": 1, "episode/success_rate": 0.5, "episode/score": 70.0},
                                {"step": 2, "episode/success_rate": 0.75, "episode/score": 80.0}])
    assert [h["score"] for h in history] == [70.0, 80.0]
    text = format_summary(_summary(["test"], d, {**d, "test_score": 66.0}, history))
    header, before, after = text.splitlines()[5:8]
    assert header.split() == ["test", "success", "test", "score", "test", "invalid"]
    assert before.split()[-3:] == ["25.0%", "61.5", "10.0%"] and after.split()[-2] == "66.0"
    assert "train success (mean of the first / last iteration, fresh games each): 50.0% -> 75.0%, score 70.0 -> 80.0" \
        in text
    assert text.splitlines()[8].split() == ["RL", "changed", "it", "by", "+0.0", "pts", "+4.5", "pts"]


def test_household_reports_no_score_at_all():
    metrics = {"eval_id_success_rate": 0.5, "eval_ood_success_rate": 0.25, "eval_id_minus_ood": 0.25,
               "eval_id_invalid_action_rate": 0.2, "eval_ood_invalid_action_rate": 0.3}
    d = eval_summary(metrics, ["id", "ood"])
    assert not any("score" in k for k in d) and math.isclose(d["gap"], 0.25)
    history = training_history([{"step": 1, "episode/success_rate": 0.5}])
    assert "score" not in history[0]
    text = format_summary(_summary(["id", "ood"], d, d, history))
    text += eval_line(d, ["id", "ood"]) + format_eval(d, {"id": [1], "ood": [1]})
    assert "score" not in text and "n/a" not in text


def test_the_summary_names_a_warm_start_only_when_one_ran():
    d = {"id_success_rate": 0.5, "ood_success_rate": 0.25, "gap": 0.25}
    history = [{"success_rate": 0.5}]
    no_sft = format_summary({**_summary(["id", "ood"], d, d, history), "sft_epochs": 0.0})
    assert "before RL (no SFT)" in no_sft and "SFT warm start" not in no_sft and "after SFT" not in no_sft
    sft = format_summary({**_summary(["id", "ood"], d, d, history), "sft_epochs": 2.0, "sft_examples": 10,
                          "sft_loss": 0.5, "sft_s": 3.0})
    assert "before RL (after SFT)" in sft and "SFT warm start: 10 expert steps, 2 epochs" in sft


def test_the_evaluation_tasks_say_where_a_split_holds_fewer_than_asked():
    from milegpo.job.report import eval_tasks_text

    assert eval_tasks_text({"id": [1] * 4, "ood": [1] * 4}, 4) == "id (4 tasks), ood (4 tasks)"
    assert eval_tasks_text({"id": [1], "ood": [1] * 3}, 4) == ("id (1 task of 4 asked: the split holds no more), "
                                                              "ood (3 tasks of 4 asked: the split holds no more)")


def test_the_summary_leads_with_the_evaluation_change_and_averages_the_training_ends():
    """One iteration of a few groups on fresh games is a noisy reading (the default's seed 0 wins 100% of its
    first iteration, 71.9% of its last, and gains +2.7 points on the evaluation games): the summary prints what RL
    changed on the evaluation games and the training success averaged over the first and the last ten iterations."""
    xs = [1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5] + [0.25] * 20 + [0.75] * 9 + [0.0]
    history = [{"success_rate": x} for x in xs]
    ends = training_ends(history)
    assert ends["train_window"] == 10 and ends["train_success_first"] == 1.0 and ends["train_success_last"] == 0.0
    assert math.isclose(ends["train_success_first_mean"], 0.55) and math.isclose(ends["train_success_last_mean"], 0.675)
    assert training_ends(history[:3])["train_window"] == 1 and training_ends(history[:7])["train_window"] == 3
    assert math.isnan(training_ends([])["train_success_first"])
    before = {"id_success_rate": 0.72, "ood_success_rate": 0.193, "gap": 0.527}
    after = {"id_success_rate": 0.747, "ood_success_rate": 0.243, "gap": 0.504}
    text = format_summary(_summary(["id", "ood"], before, after, history))
    assert "train success (mean of the first / last 10 iterations, fresh games each): 55.0% -> 67.5%" in text
    change = next(line for line in text.splitlines() if line.startswith("RL changed it by"))
    assert change.split()[4:] == ["+2.7", "pts", "+5.0", "pts"]
    assert "RL changed it by" not in format_summary(_summary(["id", "ood"], before, {}, history))
    assert "train success: n/a (no iteration ran)" in format_summary(_summary(["id", "ood"], before, after, []))
