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

    from milegpo.trainer.config import MileGPOConfig
    from milegpo.job import ANY_KIND_TINY, ENV_DEFAULTS, TINY_RUN, JobArguments

    fields = {f.name for f in dataclasses.fields(MileGPOConfig)} | {f.name for f in dataclasses.fields(JobArguments)}
    for env, rows in ENV_DEFAULTS.items():
        assert set(rows) == {"run", "tiny"}, env
        for row in rows.values():
            assert set(row) <= fields, (env, set(row) - fields)
    assert set(TINY_RUN) <= fields and set(ANY_KIND_TINY) <= fields


def test_scienceworld_picks_its_preset_so_beacon_reads_its_scienceworld_script():
    from milegpo.evidence.quality import default_preset
    from milegpo.job import parse

    for argv in (["--env", "scienceworld"], ["--env", "scienceworld", "--model_name_or_path", "some/model"]):
        assert parse(argv)[1].credit_preset == "scienceworld", argv
    _, cfg = parse(["--env", "scienceworld", "--credit_method", "beacon"])
    assert (cfg.credit_config().beacon_gamma, cfg.credit_config().beacon_weight) == (0.95, 1.0)
    assert parse(["--env", "scienceworld", "--credit_preset", "alfworld"])[1].credit_preset == "alfworld"
    assert default_preset("scienceworld") == "scienceworld" and default_preset("household") == "alfworld"


def test_webshop_picks_its_preset_prompt_horizon_and_split_unless_flags_say_otherwise():
    from milegpo.envs.webshop.env import DEFAULT_WEBSHOP_HORIZON
    from milegpo.job import ENV_DEFAULTS, parse

    tiny = ENV_DEFAULTS["webshop"]["tiny"]
    job, cfg = parse(["--env", "webshop"])
    assert (cfg.credit_preset, cfg.eval_splits) == ("webshop", ["test"])
    # the tiny policy: the compact prompt with one step of history (a real model gets verl-agent's, below)
    assert (cfg.prompt_style, cfg.history_length) == ("compact", 1) == (tiny["prompt_style"], tiny["history_length"])
    assert (cfg.horizon, cfg.num_train_tasks, cfg.max_completion_length) == (
        tiny["horizon"], tiny["num_train_tasks"], tiny["max_completion_length"])
    assert cfg.task_type == "" and cfg.env_options == tiny["env_options"]  # nothing of the household tiny run
    assert job.sft_epochs == tiny["sft_epochs"] and job.tiny_hidden == 128
    # the tiny run: the goals that ask no option, actions constrained to the page's, the query to the goal's words
    assert cfg.env_options["max_goal_options"] == 0 and cfg.constrain_actions and cfg.constrain_query
    _, cfg = parse(["--env=webshop", "--horizon", "5", "--prompt_style", "compact", "--credit_preset", "alfworld",
                    "--eval_splits", "train", "test"])
    assert (cfg.horizon, cfg.prompt_style, cfg.credit_preset, cfg.eval_splits) == (5, "compact", "alfworld",
                                                                                   ["train", "test"])
    # a real model: WebShop's own horizon, the paper's recipe otherwise
    _, cfg = parse(["--env", "webshop", "--model_name_or_path", "some/model"])
    assert (cfg.horizon, cfg.eval_splits, cfg.credit_preset, cfg.max_steps) == (
        DEFAULT_WEBSHOP_HORIZON, ["test"], "webshop", 300)
    assert (cfg.prompt_style, cfg.history_length) == ("webshop", 2)
    assert not cfg.constrain_actions and not cfg.constrain_query and not cfg.env_options


def test_household_defaults_are_unchanged():
    from milegpo.job import TINY_DEFAULTS, parse

    job, cfg = parse([])
    assert (cfg.env, cfg.credit_preset, cfg.eval_splits) == ("household", "alfworld", ["id", "ood"])
    expected = {k: v for k, v in TINY_DEFAULTS.items() if k != "report_to"}  # "none" is parsed to []
    assert {k: getattr(cfg, k) if hasattr(cfg, k) else getattr(job, k) for k in expected} == expected
    assert cfg.constrain_actions and not cfg.constrain_query  # the tiny run writes admissible actions only (issue 50)
    _, cfg = parse(["--model_name_or_path", "some/model"])
    assert (cfg.horizon, cfg.prompt_style, cfg.env_options, cfg.eval_splits) == (50, "alfworld", None, ["id", "ood"])
    assert not cfg.constrain_actions  # a real model writes its actions freely unless told


def test_the_tiny_runs_sequence_rule_gives_way_to_vllm_only_when_not_asked_for():
    """The household tiny run draws each action whole (`sequence`), which vLLM cannot: with `--use_vllm true` (a
    flag or the YAML's) its default is `token`; `sequence` asked for beside vLLM is refused in one line."""
    import pytest

    from milegpo.job import parse
    from milegpo.usage import UsageError

    assert parse([])[1].constrained_sampling == "sequence"
    for argv in (["--use_vllm", "true"], ["--use_vllm=True"], ["--use-vllm", "1"]):
        assert parse(argv)[1].constrained_sampling == "token", argv
    assert parse(["--use_vllm", "false"])[1].constrained_sampling == "sequence"
    with pytest.raises(UsageError, match="constrained_sampling='sequence': is not available with use_vllm"):
        parse(["--use_vllm", "true", "--constrained_sampling", "sequence"])


def _saved(tmp_path, name, settings):
    import json

    from milegpo.job import TASK_SETTINGS

    d = tmp_path / name
    d.mkdir()
    (d / TASK_SETTINGS).write_text(json.dumps(settings))
    (d / "config.json").write_text('{"model_type": "qwen2"}')  # a saved model's folder (parse refuses one without it)
    return str(d)


def test_a_saved_policys_settings_apply_to_its_own_env_only(tmp_path):
    from milegpo.job import parse

    shop = _saved(tmp_path, "shop", {"env": "webshop", "task_type": "", "horizon": 7, "prompt_style": "compact",
                                     "env_options": {"catalog_size": 300, "test_goals": 40}, "history_length": 1,
                                     "max_completion_length": 24, "num_train_tasks": 64, "num_eval_tasks": 40})
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


def test_a_saved_policys_sequence_rule_gives_way_to_vllm_and_says_so(tmp_path, capsys):
    """A policy saved by the default job records `constrained_sampling: sequence`; going on with vLLM it draws token
    by token, with a one-line note (its own figures were drawn whole); `sequence` asked for is still refused."""
    import pytest

    from milegpo.job import parse
    from milegpo.usage import UsageError

    policy = _saved(tmp_path, "final", {"env": "household", "constrain_actions": True,
                                        "constrained_sampling": "sequence"})
    assert parse(["--model_name_or_path", policy])[1].constrained_sampling == "sequence"
    assert capsys.readouterr().err == ""
    assert parse(["--model_name_or_path", policy, "--use_vllm", "true"])[1].constrained_sampling == "token"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and policy in err and "vLLM draws token by token" in err, err
    assert parse(["--model_name_or_path", policy, "--use_vllm", "true", "--constrained_sampling", "token"]
                 )[1].constrained_sampling == "token"
    assert capsys.readouterr().err == ""
    with pytest.raises(UsageError, match="constrained_sampling='sequence': is not available with use_vllm"):
        parse(["--model_name_or_path", policy, "--use_vllm", "true", "--constrained_sampling", "sequence"])


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


# ---------------------------------------------------------------- --help (issue 20)
def _help(capsys, *argv):
    import pytest

    from milegpo.cli import main

    with pytest.raises(SystemExit) as done:
        main(list(argv))
    assert done.value.code == 0
    return capsys.readouterr().out


def test_help_shows_milegpos_flags_first_in_groups_and_points_to_the_rest(capsys):
    raw = _help(capsys, "train", "--help")
    text = " ".join(raw.split())  # argparse wraps lines
    order = ["job (milegpo train", "--model_name_or_path MODEL", "--sft_learning_rate", "environment and tasks:", "--env ENV",
             "rollout:", "--group_size", "credit:", "--credit_method", "evaluation:", "--num_eval_tasks",
             "training (GRPOConfig", "--max_steps", "TRL / transformers flags:", "milegpo train --help-all lists them"]
    positions = [text.index(phrase) for phrase in order]
    assert positions == sorted(positions), [p for p, _ in sorted(zip(order, positions), key=lambda x: x[1])]
    assert len(raw.splitlines()) < 400 and "--lr_scheduler_type {" not in raw
    assert "--gradient_accumulation_steps" in text.split("TRL / transformers flags:")[1]  # named in the pointer
    full = _help(capsys, "train", "--help-all")
    assert len(full.splitlines()) > 800 and full.index("--env ENV") < full.index("--lr_scheduler_type {")
    assert "milegpo eval --help-all" in " ".join(_help(capsys, "eval", "--help").split())


def test_every_flag_of_milegpos_own_is_in_one_help_group():
    import dataclasses

    from milegpo.trainer.config import MileGPOConfig
    from milegpo.job.arguments import HELP_GROUPS, JobArguments

    grouped = [name for names in HELP_GROUPS.values() for name in names]
    assert len(grouped) == len(set(grouped))
    fields = {f.name for f in dataclasses.fields(MileGPOConfig)}
    assert set(grouped) <= fields
    own = {f.name for f in dataclasses.fields(MileGPOConfig)} & set(MileGPOConfig.__dict__["__annotations__"])
    own -= {"gradient_checkpointing"}  # the deprecated alias: with the rest
    assert own - set(grouped) == set(), "a MileGPOConfig field of milegpo's own outside the help groups"
    assert not set(grouped) & {f.name for f in dataclasses.fields(JobArguments)}


def _default_claims():
    """(flag, who, value) for every help text of milegpo's own flags that names a default value: ``(paper: X)``,
    ``tiny model: X``, ``a real model: X``, ``default: X``, ``ALFWorld X``, ``WebShop X``."""
    import dataclasses
    import re

    from milegpo.trainer.config import MileGPOConfig
    from milegpo.job.arguments import JobArguments

    own = set(MileGPOConfig.__dict__["__annotations__"])
    fields = list(dataclasses.fields(JobArguments)) + [f for f in dataclasses.fields(MileGPOConfig) if f.name in own]
    claim = re.compile(r"(paper|tiny model|real model|default|ALFWorld|WebShop):? ~?(-?[0-9][0-9.e+-]*)", re.I)
    for f in fields:
        for who, value in claim.findall(f.metadata.get("help", "")):
            yield f.name, who.lower(), value.rstrip(".")


def test_every_help_text_that_names_a_default_names_the_real_one():
    import dataclasses

    from milegpo.trainer.config import MileGPOConfig
    from milegpo.job import env_defaults
    from milegpo.job.arguments import JobArguments

    declared = {f.name: f.default for cls in (JobArguments, MileGPOConfig) for f in dataclasses.fields(cls)}
    checked = set()
    for name, who, value in _default_claims():
        if who == "tiny model":  # the embedded tiny run (no --model_name_or_path)
            real = env_defaults("household", tiny=True).get(name, declared[name])
        elif who == "webshop":
            real = env_defaults("webshop", tiny=False).get(name, declared[name])
        else:  # paper / a real model / default / ALFWorld: the dataclass's own default
            real = declared[name]
        assert float(value) == float(real), f"--{name}: its help says {who} {value}, the default is {real}"
        checked.add(name)
    assert {"sft_learning_rate", "max_steps", "learning_rate", "beta", "horizon"} <= checked  # the claims exist


def test_default_number_of_evaluation_tasks():
    """The embedded household run evaluates on 300 games per split (a success rate's standard error under 3 points,
    issue 50); a real model keeps MileGPOConfig's 48, in `milegpo train` and `milegpo eval` alike (a saved tiny
    policy records its 300 for `milegpo eval`: test_a_saved_policy_carries_its_evaluation_settings)."""
    from milegpo.job import TINY_DEFAULTS, parse
    from milegpo.trainer.config import MileGPOConfig

    _, train = parse([])
    _, real_train = parse(["--model_name_or_path", "some/model"])
    _, real = parse(["--model_name_or_path", "some/model"], prog="milegpo eval")
    assert train.num_eval_tasks == TINY_DEFAULTS["num_eval_tasks"] == 300
    assert real_train.num_eval_tasks == real.num_eval_tasks == MileGPOConfig.__dataclass_fields__[
        "num_eval_tasks"].default == 48


def test_our_defaults_set_no_deprecated_field():
    import warnings

    from milegpo.trainer.config import MileGPOConfig
    from milegpo.job import parse

    with warnings.catch_warnings():
        warnings.filterwarnings("error", category=FutureWarning)
        parse([])
        parse(["--model_name_or_path", "some/model"])
        cfg = MileGPOConfig(output_dir="unused")
    assert cfg.activation_checkpointing is True and cfg.gradient_checkpointing is True  # TRL's default, kept


def test_the_deprecated_checkpointing_alias_still_decides_or_is_refused():
    import pytest

    from milegpo.trainer.config import ConfigError, MileGPOConfig

    with pytest.warns(FutureWarning, match="activation_checkpointing"):  # the caller's own choice: transformers says
        cfg = MileGPOConfig(output_dir="unused", gradient_checkpointing=False)
    assert cfg.activation_checkpointing is False
    with pytest.raises(ConfigError, match="gradient_checkpointing=True: contradicts activation_checkpointing=False"):
        MileGPOConfig(output_dir="unused", gradient_checkpointing=True, activation_checkpointing=False)


def test_a_saved_policy_carries_its_evaluation_settings(tmp_path):
    from milegpo.job import EVAL_FIELDS, parse

    house = _saved(tmp_path, "house", {"env": "household", "num_eval_tasks": 4, "eval_group_size": 2,
                                       "eval_temperature": 0.7, "seed": 3})
    _, cfg = parse(["--model_name_or_path", house], prog="milegpo eval")
    assert {k: getattr(cfg, k) for k in EVAL_FIELDS} == {"num_eval_tasks": 4, "eval_group_size": 2,
                                                         "eval_temperature": 0.7, "seed": 3}
    _, cfg = parse(["--model_name_or_path", house, "--num_eval_tasks", "6", "--seed", "1"], prog="milegpo eval")
    assert (cfg.num_eval_tasks, cfg.seed) == (6, 1)  # flags win


def test_a_saved_policy_carries_its_state_anchor_and_an_old_one_plays_as_it_was_trained(tmp_path):
    """State anchors (issue 31): the task file records the anchor and the context switch; a file written before
    anchors existed names neither, and its policy was trained on observation keys without a context line."""
    from milegpo.job import TASK_FIELDS, parse

    assert {"state_anchor", "show_state_context"} <= set(TASK_FIELDS)
    _, cfg = parse([])
    assert (cfg.state_anchor, cfg.show_state_context) == ("tracked+actions", True)  # the defaults
    old = _saved(tmp_path, "old", {"env": "household", "horizon": 8})
    _, cfg = parse(["--model_name_or_path", old])
    assert (cfg.state_anchor, cfg.show_state_context) == ("observation", False)
    _, cfg = parse(["--model_name_or_path", old, "--state_anchor", "tracked", "--show_state_context", "true"])
    assert (cfg.state_anchor, cfg.show_state_context) == ("tracked", True)  # flags win
    new = _saved(tmp_path, "new", {"env": "household", "state_anchor": "observation+actions",
                                   "show_state_context": True})
    _, cfg = parse(["--model_name_or_path", new], prog="milegpo eval")
    assert (cfg.state_anchor, cfg.show_state_context) == ("observation+actions", True)
