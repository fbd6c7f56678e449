"""`milegpo train` end to end (a shortened default run), `milegpo replay` on its saved batches, `milegpo eval`."""

import json

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
                   "ood success", "gap", "train success: first iteration", "per iteration (median): rollout"):
        assert phrase in text, phrase
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
    from milegpo.main_job import TINY_DEFAULTS, parse

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
    capsys.readouterr()
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


def test_train_flags_are_the_config_fields():
    from milegpo.main_job import TINY_DEFAULTS, parse

    job, cfg = parse(["--credit_method", "gigpo", "--horizon", "5", "--sft_epochs", "0"])
    assert cfg.credit_method == "gigpo" and cfg.horizon == 5 and job.sft_epochs == 0
    assert job.model_name_or_path is None and cfg.task_type == TINY_DEFAULTS["task_type"]  # embedded defaults
    job, cfg = parse(["--model_name_or_path", "some/model", "--output_dir", "x"])
    assert cfg.task_type == "" and cfg.max_steps == 300  # a real model keeps the paper's recipe


def test_generate_household_games(tmp_path, capsys):
    path = tmp_path / "games.jsonl"
    assert main(["generate-games", "household", str(path), "--split", "ood", "--n", "3"]) == 0
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 3 and all(r["split"] == "ood" and r["walkthrough"] for r in rows)


def test_tiny_tokenizer_reloads_faithfully(tmp_path):
    """The rollout must see the tokens the warm start saw, and decode keeps <action> tags."""
    from milegpo.main_job import reload_tokenizer
    from milegpo.tiny import completion_text, easy_tasks, expert_pairs, make_tokenizer

    tok = make_tokenizer(n_tasks=8)
    tok.save_pretrained(tmp_path)
    back = reload_tokenizer(str(tmp_path))
    prompt, completion = expert_pairs(easy_tasks("train", 1))[0]
    msgs = [{"role": "user", "content": prompt}]
    ids = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
    assert back.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True,
                                    return_dict=True)["input_ids"] == ids
    comp = back(completion_text("inventory"))["input_ids"] + [back.eos_token_id]
    text = back.batch_decode([comp], skip_special_tokens=True)[0]
    assert "<action>" in text and "inventory" in text


def test_tiny_model_starts_action_phrases_from_their_words():
    from milegpo.tiny import easy_tasks, expert_pairs, make_model, make_tokenizer

    tok = make_tokenizer(n_tasks=8)
    emb = make_model(tok).get_input_embeddings().weight
    phrase = "go to sidetable 1"
    pid = tok.convert_tokens_to_ids(phrase)
    assert pid != tok.unk_token_id
    words = tok.convert_tokens_to_ids(phrase.split())
    torch.testing.assert_close(emb[pid], emb[words].mean(0))
    # the warm start's labels come from the searching expert by default, the oracle on request
    tasks = easy_tasks("train", 3)
    assert expert_pairs(tasks) == expert_pairs(tasks, expert="search")
    assert expert_pairs(tasks, expert="oracle") != expert_pairs(tasks)
    with pytest.raises(ValueError, match="expert must be 'search' or 'oracle'"):
        expert_pairs(tasks, expert="cheat")
