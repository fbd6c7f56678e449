"""The job end to end through the CLI: `milegpo train` (a shortened default run), `milegpo replay` on its
saved batches, `milegpo eval`."""

import json
import re

import pytest
import torch

from milegpo.cli import main

SHORT = ["--sft_epochs", "1", "--sft_tasks", "4", "--max_steps", "1", "--groups_per_iteration", "2",
         "--group_size", "2", "--horizon", "4", "--num_train_tasks", "4", "--num_eval_tasks", "2",
         "--max_completion_length", "10"]


@pytest.mark.slow
def test_train_short_default_run_prints_summary_and_writes_plots(tmp_path, capsys):
    torch.set_num_threads(1)
    out = tmp_path / "run"
    assert main(["train", "--output_dir", str(out), *SHORT]) == 0
    text = capsys.readouterr().out
    for phrase in ("MileGPO run summary", "SFT warm start:", "before RL (after SFT)", "after RL", "id success",
                   "ood success", "gap", "RL changed it by", "train success (mean of the first / last iteration", "per iteration (median): rollout",
                   "evaluating the warm-started policy on id (2 tasks), ood (2 tasks)"):
        assert phrase in text, phrase
    # one readable line per iteration, no metrics dict; every metric in metrics.jsonl
    assert "{'loss'" not in text and "'train_runtime'" not in text
    assert re.search(r"iteration 1/1: success \d+\.\d%, reward -?\d\.\d+, invalid .* credit [\d.]+ ms", text), text
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["phase"] for r in logged] == sorted(r["phase"] for r in logged)[::-1]  # sft first, then rl
    sft, rl = [r for r in logged if r["phase"] == "sft"], [r for r in logged if r["phase"] == "rl"]
    assert any("train_runtime" in r for r in sft) and any("train_runtime" in r for r in rl)
    assert "eval_id_success_rate" in rl[0] and rl[1]["step"] == 1 and "credit/tie_share" in rl[1]
    for png in ("training.png", "credit_diagnostics.png", "advantages_by_method.png"):
        assert (out / "plots" / png).stat().st_size > 1000, png
    summary = json.loads((out / "summary.json").read_text())
    assert summary["iterations"] == 1 and summary["splits"] == ["id", "ood"]
    for when in ("before", "after"):
        assert 0.0 <= summary[when]["id_success_rate"] <= 1.0 and "gap" in summary[when]
    assert summary["sft_examples"] > 0 and len(summary["history"]) == 1
    t = summary["time_per_iteration"]
    assert 0 < t["credit"] < t["rollout"] and 0 < t["generate"] <= t["rollout"]
    assert len(summary["batches"]) == 1 and (out / "batches" / "iter_0001.npz").exists()
    assert (out / "final" / "config.json").exists() and (out / "sft" / "tokenizer.json").exists()
    # the saved policy records its games and prompt: `milegpo eval` of it plays those by default
    from milegpo.job import TINY_DEFAULTS, parse

    _, ev = parse(["--model_name_or_path", str(out / "final"), "--output_dir", str(tmp_path / "ev0")],
                  prog="milegpo eval")
    assert (ev.prompt_style, ev.env_options, ev.horizon) == (TINY_DEFAULTS["prompt_style"],
                                                             TINY_DEFAULTS["env_options"], 4)
    _, ev = parse(["--model_name_or_path", str(out / "final"), "--output_dir", str(tmp_path / "ev0"),
                   "--prompt_style", "alfworld"], prog="milegpo eval")
    assert ev.prompt_style == "alfworld"  # flags still win
    # go on training the saved policy: the path of a real model (no tiny defaults), on the saved games
    more = tmp_path / "more"
    assert main(["train", "--model_name_or_path", str(out / "final"), "--output_dir", str(more), "--sft_epochs", "0",
                 "--max_steps", "1", "--groups_per_iteration", "2", "--group_size", "2", "--num_train_tasks", "4",
                 "--num_eval_tasks", "2", "--eval_before", "false", "--learning_rate", "1e-4", "--report_to", "none",
                 "--save_strategy", "no"]) == 0
    text = capsys.readouterr().out
    assert "no SFT warm start (--sft_epochs 0)" in text and "SFT warm start:" not in text
    resumed = json.loads((more / "summary.json").read_text())
    assert resumed["policy"] == str(out / "final") and resumed["iterations"] == 1
    assert json.loads((more / "final" / "milegpo_task.json").read_text())["prompt_style"] == "compact"

    # replay a run's folder of per-iteration StepBatches
    assert main(["replay", str(out / "batches"), "--plots", str(tmp_path / "replay"), "--rows", "0"]) == 0
    text = capsys.readouterr().out
    assert "credit diagnostics per iteration" in text and "graphgpo" in text
    assert (tmp_path / "replay" / "credit_diagnostics.png").exists()

    # evaluate the saved policy
    assert main(["eval", "--model_name_or_path", str(out / "final"), "--output_dir", str(tmp_path / "ev"),
                 "--task_type", "look_at_obj_in_light", "--horizon", "4", "--num_eval_tasks", "2",
                 "--num_train_tasks", "4", "--groups_per_iteration", "2", "--group_size", "2",
                 "--max_completion_length", "10", "--report_to", "none", "--use_cpu", "true"]) == 0
    assert "gap id - ood" in capsys.readouterr().out
    # with its saved settings alone, `milegpo eval` plays the evaluation `milegpo train` printed at its end:
    # same tasks, episodes, temperature and seed, the same numbers
    assert main(["eval", "--model_name_or_path", str(out / "final"), "--output_dir", str(tmp_path / "ev2")]) == 0
    table = capsys.readouterr().out.strip().splitlines()
    after = summary["after"]
    for row, split in zip(table[1:3], ("id", "ood")):
        name, tasks, success, invalid, length = row.split()
        assert (name, int(tasks)) == (split, 2)
        assert success == f"{100 * after[split + '_success_rate']:.1f}%"
        assert invalid == f"{100 * after[split + '_invalid_action_rate']:.1f}%"
        assert float(length) == round(after[split + "_episode_length"], 2)


WEBSHOP_SHORT = ["--env", "webshop", "--env_options", '{"catalog_size": 300, "test_goals": 40}', "--sft_epochs", "1",
                 "--sft_tasks", "4", "--max_steps", "2", "--groups_per_iteration", "2", "--group_size", "2",
                 "--horizon", "4", "--num_train_tasks", "4", "--num_eval_tasks", "2", "--max_completion_length", "12",
                 "--tiny_hidden", "32"]


@pytest.mark.slow
def test_train_short_webshop_run_reports_score_and_diagnostics(tmp_path, capsys, private_webshop_cache):
    """`milegpo train --env webshop`: the household job's summary, plots and batches, WebShop's split and score."""
    from milegpo.credit import StepBatch

    torch.set_num_threads(1)
    out = tmp_path / "shop"
    assert main(["train", "--output_dir", str(out), *WEBSHOP_SHORT, "--constrain_actions", "false",
                 "--constrain_query", "false"]) == 0  # free actions (the tiny defaults constrain them: below)
    text = capsys.readouterr().out
    for phrase in ("env webshop", "credit milegpo/full", "SFT warm start:", "before RL (after SFT)", "after RL",
                   "test success", "test score", "test invalid", "RL changed it by", "per iteration (median)"):
        assert phrase in text, phrase
    assert re.search(r"train success \(mean of the first / last iteration, fresh games each\): [\d.]+% -> [\d.]+%, "
                     r"score [\d.]+ -> [\d.]+", text), text
    assert not re.search(r"\bood\b|\bgap\b", text)  # one split: no OOD column, no gap ("food" may be a product)
    for png in ("training.png", "credit_diagnostics.png", "advantages_by_method.png"):
        assert (out / "plots" / png).stat().st_size > 1000, png
    summary = json.loads((out / "summary.json").read_text())
    assert summary["env"] == "webshop" and summary["splits"] == ["test"] and summary["horizon"] == 4
    for when in ("before", "after"):
        assert 0.0 <= summary[when]["test_success_rate"] <= 1.0 and 0.0 <= summary[when]["test_score"] <= 100.0
    assert len(summary["history"]) == 2 and all(0.0 <= h["score"] <= 100.0 for h in summary["history"])
    # the credit diagnostics were computed on the WebShop batches that were saved
    assert len(summary["diagnostics"]) == 2 and len(summary["batches"]) == 2
    for d, path in zip(summary["diagnostics"], summary["batches"]):
        assert d["rows"] == len(StepBatch.load(path)) > 0
    settings = json.loads((out / "final" / "milegpo_task.json").read_text())
    assert settings["env"] == "webshop" and settings["env_options"] == {"catalog_size": 300, "test_goals": 40,
                                                                        "max_goal_options": 0}  # the tiny default
    assert (settings["prompt_style"], settings["history_length"], settings["num_train_tasks"]) == ("compact", 1, 4)
    assert main(["replay", str(out / "batches"), "--preset", "webshop", "--rows", "0"]) == 0
    assert "preset webshop" in capsys.readouterr().out
    # `milegpo eval` of the saved policy: its catalog, prompt and horizon, WebShop's test split and score
    assert main(["eval", "--model_name_or_path", str(out / "final"), "--output_dir", str(tmp_path / "ev"),
                 "--num_eval_tasks", "2", "--groups_per_iteration", "2", "--group_size", "2",
                 "--report_to", "none"]) == 0
    table = capsys.readouterr().out.strip().splitlines()
    assert table[0].split() == ["split", "tasks", "success", "score", "invalid", "length"]
    assert table[1].split()[:2] == ["test", "2"] and len(table) == 2


@pytest.mark.slow
@pytest.mark.parametrize("query", [False, True])
def test_train_short_webshop_run_with_constrained_actions_writes_no_invalid_action(tmp_path, capsys,
                                                                                  private_webshop_cache, query):
    """`--constrain_actions true` (and `--constrain_query true`): every action of training and evaluation is
    admissible (a page's ASINs and buttons, a search where the search box is), the metrics say the switches were
    on, and the saved policy keeps them."""
    torch.set_num_threads(1)
    out = tmp_path / "shop"
    assert main(["train", "--output_dir", str(out), *WEBSHOP_SHORT, "--constrain_actions", "true",
                 "--constrain_query", str(query).lower()]) == 0
    said = capsys.readouterr().out
    assert "actions constrained to the admissible ones" in said and ("queries to the goal words" in said) == query
    summary = json.loads((out / "summary.json").read_text())
    assert summary["constrain_actions"] is True and summary["constrain_query"] is query
    for when in ("before", "after"):
        assert summary[when]["test_invalid_action_rate"] == 0.0
    assert all(h["invalid_rate"] == 0.0 for h in summary["history"]), summary["history"]
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any(entry.get("constrain_actions") == 1.0 for entry in logged)
    assert any(entry.get("constrain_query") == 1.0 for entry in logged) == query
    assert any(entry.get("eval_constrain_query") == 1.0 for entry in logged) == query
    settings = json.loads((out / "final" / "milegpo_task.json").read_text())
    assert settings["constrain_actions"] is True and settings["constrain_query"] is query
