"""The flags of `milegpo train`: JobArguments + every MileGPOConfig field, and the embedded defaults."""


def test_train_flags_are_the_config_fields():
    from milegpo.job import TINY_DEFAULTS, parse

    job, cfg = parse(["--credit_method", "gigpo", "--horizon", "5", "--sft_epochs", "0"])
    assert cfg.credit_method == "gigpo" and cfg.horizon == 5 and job.sft_epochs == 0
    assert job.model_name_or_path is None and cfg.task_type == TINY_DEFAULTS["task_type"]  # embedded defaults
    job, cfg = parse(["--model_name_or_path", "some/model", "--output_dir", "x"])
    assert cfg.task_type == "" and cfg.max_steps == 300  # a real model keeps the paper's recipe


def test_env_defaults_are_one_table_of_real_fields():
    import dataclasses

    from milegpo.config import MileGPOConfig
    from milegpo.job import ENV_DEFAULTS, TINY_RUN, JobArguments

    fields = {f.name for f in dataclasses.fields(MileGPOConfig)} | {f.name for f in dataclasses.fields(JobArguments)}
    for env, rows in ENV_DEFAULTS.items():
        assert set(rows) == {"run", "tiny"}, env
        for row in rows.values():
            assert set(row) <= fields, (env, set(row) - fields)
    assert set(TINY_RUN) <= fields


def test_webshop_picks_its_preset_prompt_horizon_and_split_unless_flags_say_otherwise():
    from milegpo.envs.webshop.env import DEFAULT_WEBSHOP_HORIZON
    from milegpo.job import ENV_DEFAULTS, parse

    tiny = ENV_DEFAULTS["webshop"]["tiny"]
    job, cfg = parse(["--env", "webshop"])
    assert (cfg.credit_preset, cfg.prompt_style, cfg.eval_splits) == ("webshop", "webshop", ["test"])
    assert (cfg.horizon, cfg.num_train_tasks, cfg.max_completion_length) == (
        tiny["horizon"], tiny["num_train_tasks"], tiny["max_completion_length"])
    assert cfg.task_type == "" and cfg.env_options == tiny["env_options"]  # nothing of the household tiny run
    assert job.sft_epochs == tiny["sft_epochs"] and job.tiny_hidden == 128
    _, cfg = parse(["--env=webshop", "--horizon", "5", "--prompt_style", "compact", "--credit_preset", "alfworld",
                    "--eval_splits", "train", "test"])
    assert (cfg.horizon, cfg.prompt_style, cfg.credit_preset, cfg.eval_splits) == (5, "compact", "alfworld",
                                                                                   ["train", "test"])
    # a real model: WebShop's own horizon, the paper's recipe otherwise
    _, cfg = parse(["--env", "webshop", "--model_name_or_path", "some/model"])
    assert (cfg.horizon, cfg.eval_splits, cfg.credit_preset, cfg.max_steps) == (
        DEFAULT_WEBSHOP_HORIZON, ["test"], "webshop", 300)


def test_household_defaults_are_unchanged():
    from milegpo.job import TINY_DEFAULTS, parse

    job, cfg = parse([])
    assert (cfg.env, cfg.credit_preset, cfg.eval_splits) == ("household", "alfworld", ["id", "ood"])
    expected = {k: v for k, v in TINY_DEFAULTS.items() if k != "report_to"}  # "none" is parsed to []
    assert {k: getattr(cfg, k) if hasattr(cfg, k) else getattr(job, k) for k in expected} == expected
    _, cfg = parse(["--model_name_or_path", "some/model"])
    assert (cfg.horizon, cfg.prompt_style, cfg.env_options, cfg.eval_splits) == (50, "alfworld", None, ["id", "ood"])


def _saved(tmp_path, name, settings):
    import json

    from milegpo.job import TASK_SETTINGS

    d = tmp_path / name
    d.mkdir()
    (d / TASK_SETTINGS).write_text(json.dumps(settings))
    (d / "config.json").write_text("{}")  # a saved model's folder (parse refuses one without it)
    return str(d)


def test_a_saved_policys_settings_apply_to_its_own_env_only(tmp_path):
    from milegpo.job import parse

    shop = _saved(tmp_path, "shop", {"env": "webshop", "task_type": "", "horizon": 7, "prompt_style": "compact",
                                     "env_options": {"catalog_size": 300, "test_goals": 40}, "history_length": 1,
                                     "max_completion_length": 24})
    _, cfg = parse(["--model_name_or_path", shop])
    assert (cfg.env, cfg.horizon, cfg.prompt_style, cfg.history_length) == ("webshop", 7, "compact", 1)
    assert cfg.env_options == {"catalog_size": 300, "test_goals": 40}
    assert (cfg.eval_splits, cfg.credit_preset) == (["test"], "webshop")  # the env's row still applies
    _, cfg = parse(["--model_name_or_path", shop, "--horizon", "9"])
    assert cfg.horizon == 9  # flags win
    _, cfg = parse(["--model_name_or_path", shop, "--env", "household"])  # another env: none of its settings
    assert (cfg.horizon, cfg.prompt_style, cfg.env_options, cfg.eval_splits) == (50, "alfworld", None, ["id", "ood"])
    house = _saved(tmp_path, "house", {"env": "household", "task_type": "look_at_obj_in_light", "horizon": 8,
                                       "env_options": {"max_receptacles": 4}, "prompt_style": "compact"})
    _, cfg = parse(["--model_name_or_path", house, "--env", "webshop"])
    assert (cfg.task_type, cfg.env_options, cfg.prompt_style, cfg.horizon) == ("", None, "webshop", 30)
    _, cfg = parse(["--model_name_or_path", house])
    assert (cfg.env, cfg.task_type, cfg.env_options) == ("household", "look_at_obj_in_light", {"max_receptacles": 4})


def test_a_broken_saved_settings_file_is_an_error_naming_it(tmp_path):
    import pytest

    from milegpo.job import TASK_SETTINGS, parse

    d = tmp_path / "policy"
    d.mkdir()
    (d / TASK_SETTINGS).write_text("{not json")
    with pytest.raises(ValueError, match=f"{TASK_SETTINGS}: not valid JSON"):
        parse(["--model_name_or_path", str(d)])
    (d / TASK_SETTINGS).write_text("[1, 2]")
    with pytest.raises(ValueError, match="expected a JSON object"):
        parse(["--model_name_or_path", str(d)])
