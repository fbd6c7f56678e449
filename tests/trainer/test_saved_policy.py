"""A policy saved by ``milegpo train``, loaded through the Python API: the same tokenizer, the same task settings
and the same play as ``milegpo eval`` (issue 20)."""

import json
import shutil

import pytest
import torch

from milegpo.trainer.config import ConfigError, MileGPOConfig
from milegpo.job import eval_summary, parse, reload_tokenizer, run_eval
from milegpo.trainer.saved_policy import PRE_ANCHOR_SETTINGS
from milegpo.job.policy import saved_task_settings
from milegpo.trainer import MileGPOTrainer

torch.set_num_threads(1)

#: what `milegpo train` writes beside the policy (milegpo.job.arguments.TASK_FIELDS); the warm checkpoint learned
#: these games: the easy task type, horizon 6, the alfworld prompt
SETTINGS = {"env": "household", "task_type": "look_at_obj_in_light", "horizon": 6, "env_options": None,
            "prompt_style": "alfworld", "history_length": 2, "max_completion_length": 16}
SMALL_RUN = dict(num_eval_tasks=4, seed=0, groups_per_iteration=2, group_size=2, num_train_tasks=4)


@pytest.fixture
def saved_policy(tmp_path, warm_checkpoint):
    policy = tmp_path / "final"
    shutil.copytree(warm_checkpoint, policy)
    (policy / "milegpo_task.json").write_text(json.dumps(SETTINGS))
    return policy


@pytest.mark.slow
def test_the_api_plays_a_saved_policy_as_milegpo_eval(tmp_path, saved_policy, capsys):
    from transformers import AutoTokenizer

    # `milegpo eval --model_name_or_path <policy>`: its games come from milegpo_task.json
    flags = [f"--{k}={v}" for k, v in SMALL_RUN.items()]
    job, cfg = parse(["--model_name_or_path", str(saved_policy), "--output_dir", str(tmp_path / "cli"),
                      "--report_to", "none", *flags], prog="milegpo eval")
    by_cli = run_eval(job, cfg)
    capsys.readouterr()
    # the README's way: a MileGPOConfig of the run's own settings and the policy's path, nothing else
    args = MileGPOConfig(output_dir=str(tmp_path / "api"), report_to="none", **SMALL_RUN)
    trainer = MileGPOTrainer(str(saved_policy), args=args)
    assert args.task_type == "" and args.horizon == 50  # the caller's config is left as it was
    assert {k: getattr(trainer.args, k) for k in SETTINGS} == SETTINGS and trainer.args.task_settings_applied
    assert all(t.task_type == "look_at_obj_in_light" and t.horizon == 6 for v in trainer.eval_tasks.values() for t in v)
    # the tokenizer saved with the policy, read faithfully (AutoTokenizer would split the tiny vocabulary)
    prompt = "You are in the middle of a room. go to desk 1 take alarmclock 1 from desk 1"
    assert trainer.processing_class.tokenize(prompt) == reload_tokenizer(str(saved_policy)).tokenize(prompt)
    assert AutoTokenizer.from_pretrained(saved_policy).tokenize(prompt) != trainer.processing_class.tokenize(prompt)
    by_api = eval_summary(trainer.evaluate(), list(trainer.eval_tasks))
    assert by_api == by_cli  # the same success (and invalid-action rate, episode length) on the same tasks and seed
    # it plays: mostly admissible actions (this briefly warm-started policy rarely wins within 6 steps)
    assert by_api["id_invalid_action_rate"] < 0.9 and set(by_api) >= {"id_success_rate", "ood_success_rate", "gap"}


def test_saved_settings_fill_only_fields_left_at_their_defaults(tmp_path, saved_policy):
    base = dict(output_dir=str(tmp_path), report_to="none")
    settings = saved_task_settings(saved_policy)
    # a file written before state anchors names neither anchor field: its policy was trained on observation keys
    # without the context line, and plays so (issue 31)
    assert settings == {**PRE_ANCHOR_SETTINGS, **SETTINGS} and saved_task_settings(tmp_path) == {}  # a folder without
    mine = MileGPOConfig(**base, horizon=9, prompt_style="compact").with_task_settings(settings)
    assert (mine.horizon, mine.prompt_style, mine.task_type, mine.max_completion_length) == (
        9, "compact", "look_at_obj_in_light", 16)  # what the caller set wins, as a flag does
    # saved settings apply to the env they were saved for only
    other = MileGPOConfig(**base, env="alfworld")
    assert other.with_task_settings(settings) is other
    shop = MileGPOConfig(**base).with_task_settings({"env": "webshop", "horizon": 15, "prompt_style": "webshop"})
    assert (shop.env, shop.eval_splits, shop.horizon) == ("webshop", ["test"], 15)  # the env's own splits follow
    with pytest.raises(ConfigError, match=r"saved task settings name no MileGPOConfig field: \['colour'\]"):
        MileGPOConfig(**base).with_task_settings({"colour": "red"})
    with pytest.raises(ConfigError, match=r"MileGPOConfig.task_type='cook': not a task type of env 'household'"):
        MileGPOConfig(**base).with_task_settings({"task_type": "cook"})  # checked again
    # the command line already decided (its flags win over the saved settings): the trainer keeps its config
    _, cfg = parse(["--model_name_or_path", str(saved_policy), "--output_dir", str(tmp_path), "--prompt_style",
                    "compact", "--report_to", "none"], prog="milegpo eval")
    assert cfg.prompt_style == "compact" and cfg.task_settings_applied and cfg.with_task_settings(settings) is cfg
    (saved_policy / "milegpo_task.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"milegpo_task.json: not valid JSON"):
        saved_task_settings(saved_policy)
