"""``milegpo train --env scienceworld`` end to end on the tiny embedded policy: its tokenizer built from the
world's texts, the gold expert's warm start, one iteration of rollouts in the pool's engines, the evaluation on dev
variations, the summary with ScienceWorld's score. About 4-6 minutes on 2 busy cores, most of it the tokenizer's
texts (some 90 resets and 40 short gold episodes)."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("scienceworld")

from milegpo.cli import main  # noqa: E402

SHORT = ["--env", "scienceworld", "--sft_epochs", "1", "--sft_tasks", "2", "--max_steps", "1",
         "--groups_per_iteration", "1", "--group_size", "2", "--horizon", "4", "--num_train_tasks", "2",
         "--num_eval_tasks", "2", "--max_completion_length", "16", "--tiny_hidden", "32"]


@pytest.mark.slow
def test_train_short_scienceworld_run(tmp_path, capsys):
    from milegpo.job import reload_tokenizer
    from milegpo.job.policy import completion_text
    from milegpo.rollout import parse_action

    torch.set_num_threads(1)
    out = tmp_path / "run"
    assert main(["train", "--output_dir", str(out), *SHORT]) == 0
    text = capsys.readouterr().out
    for phrase in ("env scienceworld / find-non-living-thing", "SFT warm start:", "before RL (after SFT)", "after RL",
                   "dev success", "dev score"):
        assert phrase in text, phrase
    summary = json.loads((out / "summary.json").read_text())
    assert summary["env"] == "scienceworld" and summary["splits"] == ["dev"] and summary["horizon"] == 4
    for when in ("before", "after"):
        assert 0.0 <= summary[when]["dev_success_rate"] <= 1.0 and 0.0 <= summary[when]["dev_score"] <= 100.0
    settings = json.loads((out / "final" / "milegpo_task.json").read_text())
    assert settings["env"] == "scienceworld" and settings["env_options"] == {"simplifications": "easy"}
    # the tokenizer writes back the gold actions of the run's task type as the world reads them
    tok = reload_tokenizer(str(out / "final"))
    for action in ("teleport to kitchen", "focus on counter", "move counter to red box", "open door to kitchen"):
        decoded = tok.decode(tok(completion_text(action))["input_ids"], skip_special_tokens=True)
        assert parse_action(decoded, [action]).valid, decoded
