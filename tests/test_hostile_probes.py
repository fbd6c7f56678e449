"""The hostile probes of issue 44, one class at a time: each input was accepted (a run that did something else
than asked, exit 0) or ended in a traceback; each is now refused where it enters in one line naming the setting,
the value and what is allowed, or handled. notes/robustness.md lists every probe (input -> before -> after).

Over 700 lines: one section per class of probe, in the order of notes/robustness.md's table, so that a probe and
its row there are found by the same number; each section is short, and splitting them would scatter that table."""

import json
import re

import pytest

from .usage_errors import one_line_error


@pytest.fixture(autouse=True)
def no_run(monkeypatch):
    """A refusal that fails to refuse must not train: the run and the evaluation are replaced by a failure."""
    import milegpo.job

    def reached(*args, **kwargs):
        raise AssertionError("the probe was not refused: it reached the run")

    monkeypatch.setattr(milegpo.job, "run_train", reached)
    monkeypatch.setattr(milegpo.job, "run_eval", reached)


def _saved(tmp_path, name, settings):
    from milegpo.job import TASK_SETTINGS

    d = tmp_path / name
    d.mkdir()
    (d / TASK_SETTINGS).write_text(json.dumps(settings))
    (d / "config.json").write_text('{"model_type": "qwen2"}')  # a saved model's folder (parse refuses one without it)
    return str(d)


# ---------------------------------------------------------------- 1. flag spellings
SHOP = {"env": "webshop", "task_type": "", "horizon": 7, "prompt_style": "compact",
        "env_options": {"catalog_size": 300, "test_goals": 40}, "history_length": 1, "max_completion_length": 24,
        "num_train_tasks": 64, "num_eval_tasks": 40}


@pytest.mark.parametrize("spelling", [["--model_name_or_path", "{}"], ["--model-name-or-path", "{}"],
                                      ["--model-name-or-path={}"], ["--model_name_or_path={}"]])
def test_a_saved_policy_is_read_whatever_the_flags_spelling(tmp_path, private_webshop_cache, spelling):
    from milegpo.job import parse

    shop = _saved(tmp_path, "shop", SHOP)
    _, cfg = parse([a.format(shop) for a in spelling], prog="milegpo eval")
    assert (cfg.env, cfg.horizon, cfg.env_options) == ("webshop", 7, SHOP["env_options"])  # was: the household world


@pytest.mark.parametrize("flag", ["--env_options", "--env-options"])
def test_env_options_merge_into_the_tiny_defaults_whatever_the_spelling(tmp_path, private_webshop_cache, flag):
    from milegpo.job import ENV_DEFAULTS, parse

    tiny = ENV_DEFAULTS["webshop"]["tiny"]["env_options"]
    for argv in ([flag, '{"show_attrs": true}'], [f"{flag}=" + '{"show_attrs": true}']):
        _, cfg = parse(["--env", "webshop", *argv, "--output-dir", str(tmp_path)])
        assert cfg.env_options == {**tiny, "show_attrs": True}  # was: the defaults' options dropped


def test_a_flag_given_in_either_spelling_wins_over_the_config_file(tmp_path):
    from milegpo.job import parse

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("group_size: 2.5\n")  # would be refused if read: a flag given means it is not
    _, cfg = parse(["--config", str(recipe), "--group-size", "4", "--output-dir", str(tmp_path / "run")])
    assert cfg.group_size == 4


@pytest.mark.parametrize("argv, message", [
    (["demo", "--group_size", "1"], r"^milegpo demo: error: --group-size 1: must be >= 2$"),
    (["credit-quality", "--env_options", "[1]"], r"^milegpo credit-quality: error: --env-options \[1\]: expected a JSON "
                                                 r"object"),
    (["credit-quality", "--group_size", "1"], r"^milegpo credit-quality: error: --group-size 1: must be >= 2$"),
    (["generate-games", "household", "g.jsonl", "--task_type", "fly"], r"--task-type 'fly': not a household task"),
])
def test_the_other_commands_take_both_spellings_too(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)  # was: "unknown flag --env_options; did you mean --env_options"
    line = one_line_error(capsys, argv)
    assert re.search(message, line), line


def test_canonical_flags_rewrites_only_known_flag_names():
    from milegpo.job.arguments import canonical_flags

    known = {"env_options", "model_name_or_path"}
    assert canonical_flags(["--env-options", "--x-y", "--model-name-or-path=a-b", "-h", "--", "a-b"], known) == \
        ["--env_options", "--x-y", "--model_name_or_path=a-b", "-h", "--", "a-b"]


# ---------------------------------------------------------------- 2. a broken user anchor
def raising_anchor(observation, context, admissible):
    """A user's anchor that raises on every call."""
    raise RuntimeError("my anchor is broken")


def number_anchor(observation, context, admissible):
    """A user's anchor that returns no str."""
    return len(observation)


def step_raising_anchor(observation, context, admissible):
    """A user's anchor that keys the first observation and raises on every later one (a step's answer)."""
    if observation.startswith("-= Welcome") or "You are in the middle of a room" in observation:
        return observation
    raise KeyError("no such room")


@pytest.mark.parametrize("anchor, message", [
    (".my_anchors:key", r"state_anchor '\.my_anchors:key': not a dotted path \(a relative path names no package\)"),
    ("my..anchors:key", r"state_anchor 'my\.\.anchors:key': not a dotted path; a dotted path to a callable is"),
    ("my.anchors:", r"state_anchor 'my\.anchors:': not a dotted path"),
    ("my anchors.key", r"not a dotted path"),
    ("no_such_module_44:key", r"cannot import it \(no module named 'no_such_module_44'\)"),
    ("tests.test_hostile_probes:no_such_anchor", r"module 'tests\.test_hostile_probes' has no attribute 'no_such_anchor'"),
    ("tests.test_hostile_probes:raising_anchor", r"^milegpo train: error: --state_anchor tests\.test_hostile_probes:"
                                                 r"raising_anchor: state_anchor tests\.test_hostile_probes:"
                                                 r"raising_anchor raised RuntimeError: my anchor is broken at the "
                                                 r"reset of task '.*'$"),
    ("tests.test_hostile_probes:number_anchor", r"--state_anchor tests\.test_hostile_probes:number_anchor: "
                                                r"state_anchor .* returned a int \(\d+\), expected the str its state "
                                                r"key hashes, at the reset of task"),
    ("tests.test_hostile_probes:step_raising_anchor", r"raised KeyError: 'no such room' at step 1 of task"),
])
def test_a_broken_anchor_is_refused_before_any_model_is_built(capsys, tmp_path, anchor, message):
    line = one_line_error(capsys, ["train", "--state_anchor", anchor, "--output_dir", str(tmp_path / "run")])
    assert re.search(message, line), line
    assert line.startswith("milegpo train: error: ") and not (tmp_path / "run").exists()


def test_an_anchor_module_that_raises_on_import_is_refused(capsys, tmp_path, monkeypatch):
    (tmp_path / "anchors_that_break_44.py").write_text("raise RuntimeError('import-time failure')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    line = one_line_error(capsys, ["train", "--state_anchor", "anchors_that_break_44:key", "--output_dir",
                                   str(tmp_path / "run")])
    assert re.search(r"state_anchor 'anchors_that_break_44:key': cannot import it \(RuntimeError: import-time "
                     r"failure\)", line), line


@pytest.mark.parametrize("workers", [0, 2])
def test_an_anchor_failing_mid_run_stops_the_pool_naming_anchor_and_step(workers):
    from milegpo.envs import household_tasks
    from milegpo.envs.anchors import AnchorError
    from milegpo.envs.pool import EnvPool, SequentialPool

    tasks = household_tasks("train", 2)
    with (SequentialPool(2) if workers == 0 else EnvPool(2, num_workers=workers)) as pool:
        firsts = pool.reset(tasks, state_anchor=f"{__name__}:step_raising_anchor")
        with pytest.raises(AnchorError, match=r"^state_anchor tests\.test_hostile_probes:step_raising_anchor raised "
                                              r"KeyError: 'no such room' at step 1 of task '.*'$"):
            pool.step([admissible[0] for _, admissible, _ in firsts])  # was: every episode truncated, run exit 0
        with pytest.raises(AnchorError, match=r"raised RuntimeError: my anchor is broken at the reset of task"):
            pool.reset(tasks, state_anchor=f"{__name__}:raising_anchor")  # was: EnvError with a traceback inside


def test_the_pool_still_tells_a_dead_worker_from_a_failing_anchor():
    import os
    import signal

    from milegpo.envs import household_tasks
    from milegpo.envs.pool import EnvPool

    tasks = household_tasks("train", 2)
    with EnvPool(2, num_workers=2) as pool:
        firsts = pool.reset(tasks, state_anchor=f"{__name__}:step_raising_anchor")
        os.kill(pool.pids[0], signal.SIGKILL)
        outs = pool.step_async({0: firsts[0][1][0]}).result()  # the dead worker's slot: a truncated episode
        assert outs[0].info["truncated"] and "died" in outs[0].info["error"]


def test_milegpo_says_in_one_line_that_an_anchor_stopped_the_run(capsys, monkeypatch):
    import milegpo.job
    from milegpo.envs.anchors import AnchorError

    def run_train(job, cfg):  # the run, at the step where the anchor fails
        raise AnchorError("state_anchor my.anchors:key raised KeyError: 'x' at step 4 of task 'train-7'")

    monkeypatch.setattr(milegpo.job, "run_train", run_train)
    line = one_line_error(capsys, ["train", "--max_steps", "1"], code=1)
    assert line == ("milegpo train: error: state_anchor my.anchors:key raised KeyError: 'x' at step 4 of task "
                    "'train-7' (the run stopped there)")


# ---------------------------------------------------------------- 3. --credit_overrides
@pytest.mark.parametrize("overrides, message", [
    ('{"invalid_penalty": 0.5}', r"MileGPOConfig.credit_overrides=\{'invalid_penalty': 0.5\}: key 'invalid_penalty' "
                                 r"is set by invalid_action_penalty \(which would replace it\): give "
                                 r"invalid_action_penalty 0.5 instead$"),
    ('{"eta": 0.5, "eta": 0.7}', r"MileGPOConfig.credit_overrides='\{\"eta\": 0.5, \"eta\": 0.7\}': key 'eta' given "
                                 r"twice \(0.5, then 0.7\): give it once$"),
    ('{"graph_distance_offset": 1.0}', r"CreditConfig.graph_distance_offset must be an int, got float 1.0$"),
    ('{"min_node_support": 2.0}', r"CreditConfig.min_node_support must be an int, got float 2.0$"),
    ('{"kappa_bc": 1.0}', r"CreditConfig.kappa_bc must be an int, got float 1.0$"),
    ('{"c": 1' + "0" * 400 + '}', r"CreditConfig.c must be finite as a float \(\|x\| <= 1.798e\+308\), got "
                                  r"100000000000\.\.\. \(401 digits\)$"),
    ('{"eta": -1' + "0" * 400 + '}', r"CreditConfig.eta must be finite as a float"),
    ('{"min_trap_visits": 1' + "0" * 400 + '}', r"CreditConfig.min_trap_visits must be a whole number in "
                                                r"\[1, 2147483647\]"),
])
def test_credit_overrides_are_refused_at_the_door(capsys, tmp_path, overrides, message):
    line = one_line_error(capsys, ["train", "--credit_overrides", overrides, "--output_dir", str(tmp_path / "run")])
    assert line.startswith("milegpo train: error: MileGPOConfig.credit_overrides=") and re.search(message, line), line


def test_env_options_given_twice_are_refused(capsys, tmp_path):
    line = one_line_error(capsys, ["train", "--env_options", '{"max_receptacles": 3, "max_receptacles": 4}',
                                   "--output_dir", str(tmp_path / "run")])
    assert line.endswith("key 'max_receptacles' given twice (3, then 4): give it once"), line


def test_the_credit_config_takes_what_its_fields_mean():
    from milegpo.credit import CreditConfig

    assert CreditConfig(c=10 ** 300, graph_distance_offset=1, eta=1).c == 10 ** 300  # an int in a float field: fine
    with pytest.raises(TypeError, match=r"CreditConfig.graph_distance_offset must be an int, got float 1.0"):
        CreditConfig(graph_distance_offset=1.0)
    with pytest.raises(ValueError, match=r"CreditConfig.c must be finite as a float"):
        CreditConfig(c=10 ** 400)


# ---------------------------------------------------------------- 8. env options and the output folder
@pytest.mark.parametrize("options, message", [
    ('{"test_goals": -5}', r"WebShop test_goals must be an int >= 0 \(the first test_goals goals are the test split, "
                           r"the rest train; verl-agent's 500\), got -5$"),
])
def test_webshop_test_goals_below_zero_is_refused(capsys, tmp_path, private_webshop_cache, options, message):
    line = one_line_error(capsys, ["train", "--env", "webshop", "--env_options", options,
                                   "--output_dir", str(tmp_path / "run")])
    assert line.startswith("milegpo train: error: the train tasks of --env webshop") and re.search(message, line), line


def test_overwrite_removes_the_earlier_runs_model_card_and_tensorboard_logs(tmp_path):
    from milegpo.job.rundir import claim_output_dir

    (tmp_path / "metrics.jsonl").write_text("{}\n")
    (tmp_path / "README.md").write_text("---\ntags:\n- generated_from_trainer\n- trl\n- grpo\n---\n# old run\n")
    (tmp_path / "runs" / "Dec01_host").mkdir(parents=True)
    (tmp_path / "runs" / "Dec01_host" / "events.out.tfevents.1.host").write_bytes(b"old")
    (tmp_path / "notes.txt").write_text("mine")
    claim_output_dir(tmp_path, overwrite=True).release()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".milegpo.lock", "notes.txt"]  # was: README.md, runs stayed


def test_overwrite_leaves_a_users_own_readme_and_runs_folder(tmp_path):
    from milegpo.job.rundir import claim_output_dir

    (tmp_path / "metrics.jsonl").write_text("{}\n")
    (tmp_path / "README.md").write_text("# what I am trying in this folder\n")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "plan.txt").write_text("mine")
    claim_output_dir(tmp_path, overwrite=True).release()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".milegpo.lock", "README.md", "runs"]


# ---------------------------------------------------------------- 4. saved policies
@pytest.mark.parametrize("change, message", [
    ({"horizon": 2.5}, r"milegpo_task.json: horizon 2.5: expected an integer$"),
    ({"horizon": True}, r"milegpo_task.json: horizon true: expected an integer$"),
    ({"constrain_actions": "false"}, r"milegpo_task.json: constrain_actions \"false\": expected true or false$"),
    ({"show_state_context": 0}, r"show_state_context 0: expected true or false$"),
    ({"env_options": [1]}, r"env_options \[1\]: expected a JSON object or null$"),
    ({"max_completion_length": "16"}, r"max_completion_length \"16\": expected an integer or null$"),
    ({"eval_temperature": "hot"}, r"eval_temperature \"hot\": expected a number$"),
    ({"colour": "red"}, r"milegpo_task.json: unknown field\(s\) 'colour'; a saved policy's task settings are env, "),
])
def test_a_saved_policys_task_file_is_checked_field_by_field(capsys, tmp_path, change, message):
    policy = _saved(tmp_path, "policy", {"env": "household", "horizon": 6, **change})
    line = one_line_error(capsys, ["eval", "--model_name_or_path", policy, "--output_dir", str(tmp_path / "run")])
    assert line.startswith(f"milegpo eval: error: {policy}/milegpo_task.json: ") and re.search(message, line), line


@pytest.mark.parametrize("field, value", [("show_state_context", "false"), ("constrain_actions", "False"),
                                          ("require_think", 1), ("state_similarity_verify", "no"),
                                          ("use_fused_loss", "true"), ("horizon", 2.5), ("group_size", True),
                                          ("max_completion_length", 16.0), ("eval_temperature", "1")])
def test_a_config_field_of_another_type_is_refused(tmp_path, field, value):
    from milegpo.trainer.config import ConfigError, MileGPOConfig

    with pytest.raises(ConfigError, match=rf"^MileGPOConfig.{field}={re.escape(repr(value))}: expected an? "):
        MileGPOConfig(output_dir=str(tmp_path), report_to="none", **{field: value})
    base = MileGPOConfig(output_dir=str(tmp_path), report_to="none")
    if field in ("show_state_context", "constrain_actions", "horizon", "max_completion_length", "eval_temperature"):
        with pytest.raises(ConfigError, match=rf"^MileGPOConfig.{field}={re.escape(repr(value))}: expected"):
            base.with_task_settings({field: value})  # was: kept, the string "false" acting as True


def test_a_webshop_policy_records_its_data_folder_and_eval_refuses_it_gone(capsys, tmp_path, monkeypatch,
                                                                         private_webshop_cache):
    import shutil

    from milegpo.envs.webshop import write_catalog
    from milegpo.job import parse
    from milegpo.trainer.saved_policy import recorded_task_settings

    shop = write_catalog(tmp_path / "shop", 300, 0)
    monkeypatch.setenv("WEBSHOP_DATA", str(shop))
    _, cfg = parse(["--env", "webshop", "--env_options", '{"catalog_size": null, "test_goals": 20}',
                    "--num_eval_tasks", "4", "--num_train_tasks", "8", "--groups_per_iteration", "4", "--output_dir",
                    str(tmp_path / "run")])
    settings = recorded_task_settings(cfg)
    assert settings["env_options"] == {"test_goals": 20, "max_goal_options": 0, "data_dir": str(shop.resolve())}
    policy = _saved(tmp_path, "policy", settings)
    _, played = parse(["--model_name_or_path", policy, "--output_dir", str(tmp_path / "eval")], prog="milegpo eval")
    assert played.env_options["data_dir"] == str(shop.resolve())
    shutil.rmtree(shop)
    monkeypatch.delenv("WEBSHOP_DATA")
    monkeypatch.setattr("milegpo.envs.webshop.env._WORLDS", {})  # milegpo eval is another process: nothing loaded
    line = one_line_error(capsys, ["eval", "--model_name_or_path", policy, "--output_dir", str(tmp_path / "eval")])
    assert re.search(rf"^milegpo eval: error: the test tasks of --env webshop .*: WebShop data directory "
                     rf"{re.escape(str(shop.resolve()))} does not exist", line), line  # was: the embedded shop, exit 0


# ---------------------------------------------------------------- 5. constrained decoding
@pytest.fixture(scope="module")
def household_tokenizer():
    from milegpo.job.policy import make_tokenizer

    return make_tokenizer(16, env="household", options={"max_receptacles": 4})


@pytest.mark.parametrize("action, message", [
    ("go to zebra 1", r"cannot spell the admissible action 'go to zebra 1' \(its tokens decode to 'go to <unk> 1'"),
    ("Go to desk 1", r"cannot spell the admissible action 'Go to desk 1' \(its tokens decode to '<unk> to desk 1'"),
    ("frobnicate[<x>]", r"cannot spell the prefix of the admissible action 'frobnicate\[<x>\]', 'frobnicate\['"),
])
def test_an_action_the_tokenizer_cannot_spell_is_a_clear_error(household_tokenizer, action, message):
    from milegpo.trainer.constrained import ConstraintError, allowed_tokens_fn

    tok = household_tokenizer
    with pytest.raises(ConstraintError, match=message):  # was: constrained into another, inadmissible action
        allowed_tokens_fn(tok, [tok.eos_token_id], [["go to desk 1", action]], 32)
    allowed_tokens_fn(tok, [tok.eos_token_id], [["go to desk 1", "take apple 1 from desk 1"]], 32)  # spelled: fine


def test_a_600_token_action_builds_its_trie_without_recursion(household_tokenizer):
    from milegpo.trainer.constrained import Vocabulary, allowed_tokens_fn

    tok = household_tokenizer
    long_action = "take apple 1 from desk 1 " * 100 + "and 1"
    n = len(tok(long_action, add_special_tokens=False)["input_ids"])
    assert n >= 600
    trie = Vocabulary(tok, [tok.eos_token_id]).trie([long_action, "go to desk 1"])  # was: RecursionError
    assert trie.need == n + len(tok("</action>", add_special_tokens=False)["input_ids"]) + 1
    fn = allowed_tokens_fn(tok, [tok.eos_token_id], [[long_action]], n + 8)
    prompt = tok("<|user|> go <|assistant|>", add_special_tokens=False)["input_ids"]
    assert fn(0, prompt) != []  # the row's first step under the constraint


@pytest.mark.parametrize("budget", ["1", "2", "3"])
def test_a_budget_below_any_constrained_action_is_refused_at_the_door(capsys, tmp_path, budget):
    line = one_line_error(capsys, ["train", "--constrain_actions", "true", "--max_completion_length", budget,
                                   "--output_dir", str(tmp_path / "run")])
    assert line == (f"milegpo train: error: MileGPOConfig.max_completion_length={budget}: must be >= 4 with "
                    "constrain_actions (<action>, an action of one token or more, </action> and EOS; the longest "
                    "admissible action needs more)")


def test_a_budget_too_small_for_the_longest_action_is_one_line_mid_run(capsys, monkeypatch, household_tokenizer):
    import milegpo.job
    from milegpo.trainer.constrained import allowed_tokens_fn

    tok = household_tokenizer

    def run_train(job, cfg):  # the first constrained generation of the run
        allowed_tokens_fn(tok, [tok.eos_token_id], [["take apple 1 from desk 1"]], 5)

    monkeypatch.setattr(milegpo.job, "run_train", run_train)
    line = one_line_error(capsys, ["train", "--max_steps", "1"], code=1)
    assert re.search(r"^milegpo train: error: constrain_actions: max_completion_length=5 tokens cannot hold <action> "
                     r"and the longest admissible action .* \(the run stopped there\)$", line), line


def test_a_webshop_goal_without_a_query_word_is_refused_at_the_door(capsys, tmp_path, private_webshop_cache):
    from milegpo.envs.webshop import write_catalog

    shop = write_catalog(tmp_path / "shop", 40, 0)
    human = json.loads((shop / "items_human_ins.json").read_text())
    products = json.loads((shop / "items_shuffle_1000.json").read_text())
    asin = next(iter(human))
    human[asin][0]["instruction"] = "[x] <y>"  # no word a query can use ...
    for product in products:
        if product["asin"] == asin:
            product["pricing"] = "$995.00"  # ... and no price limit, whose words would be
    (shop / "items_human_ins.json").write_text(json.dumps(human))
    (shop / "items_shuffle_1000.json").write_text(json.dumps(products))
    options = json.dumps({"data_dir": str(shop), "test_goals": 38})
    line = one_line_error(capsys, ["eval", "--model_name_or_path", "Qwen/Qwen2.5-0.5B-Instruct", "--env", "webshop",
                                   "--env_options", options, "--constrain_actions", "true", "--constrain_query",
                                   "true", "--num_eval_tasks", "38", "--output_dir", str(tmp_path / "run")])
    assert re.search(r"^milegpo eval: error: --constrain_query: the goal of task webshop/\w+/test/\d+ \('\[x\] <y>'\) "
                     r"has no word a query could use .* give --constrain_query false", line), line


# ---------------------------------------------------------------- 6. what a registered method returns
def _rows(terms):
    return [float(terms.episode_adv[i]) for i in range(len(terms.rows))]


def _one_more(x):
    import torch

    return torch.cat([x, x[:1]])


@pytest.mark.parametrize("name, reference, advantages, message", [
    ("short", lambda t: _rows(t)[:-1], lambda adv: adv[:-1],
     r"returned advantages of shape \(20,\) for a batch of 21 rows; expected \(21,\): one per row$"),
    ("long", lambda t: _rows(t) + [0.0], _one_more, r"returned advantages of shape \(22,\) for a batch of 21 rows"),
    ("integers", None, lambda adv: (adv > 0).long(), r"returned torch.int64 advantages; expected a floating dtype"),
    ("nan", lambda t: [float("nan")] + _rows(t)[1:], lambda adv: adv * float("nan"),
     r"returned a non-finite advantage \(nan\) at row \d+ of 21; every advantage must be finite$"),
    ("inf", lambda t: [float("inf")] + _rows(t)[1:], lambda adv: adv + float("inf"),
     r"returned a non-finite advantage \(inf\) at row \d+ of 21"),
    ("strings", lambda t: ["x"] * len(t.rows), None, r"returned advantages that are not a list of numbers"),
])
@pytest.mark.parametrize("backend", ["reference", "torch"])
def test_estimate_checks_what_a_registered_method_returns(name, reference, advantages, message, backend):
    import sys
    from pathlib import Path

    from milegpo.credit import CreditMethod, estimate, register, unregister
    from milegpo.credit.vectorized import MethodOutput

    sys.path.insert(0, str(Path(__file__).parent / "credit"))
    from batches import make_batch

    estimator = reference if backend == "reference" else advantages
    if estimator is None:
        pytest.skip(f"{name}: not a mistake the {backend} estimator can make")
    method = f"probe-{name}"
    register(CreditMethod(method, "a probe's estimator", reference or _rows,
                          lambda rows, values, config, variant: MethodOutput(
                              (advantages or (lambda a: a))(values["episode_adv"]), values),
                          row_keys=("episode_score", "episode_adv")))
    try:
        batch = make_batch(3, n_groups=2, k=4, horizon=5)
        assert len(batch) == 21
        with pytest.raises(ValueError, match=rf"^credit method '{method}' {message}"):
            estimate(batch, method, backend=backend)  # was: N-1 advantages passed on (reference), a stack error (torch)
        assert estimate(batch, "grpo", backend=backend).advantages.shape == (21,)  # the registered four still pass
    finally:
        unregister(method)


# ---------------------------------------------------------------- 7. what the run needs from this machine
def test_vllm_not_installed_is_one_line_before_any_model(capsys, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    line = one_line_error(capsys, ["train", "--use_vllm", "true", "--output_dir", str(tmp_path / "run")])
    assert line == ("milegpo train: error: --use_vllm true: vLLM is not installed here (pip install vllm, or "
                    "--use_vllm false: generation by transformers)")
    assert not (tmp_path / "run").exists()


def test_a_hub_id_with_the_hub_unreachable_is_one_line(capsys, tmp_path, monkeypatch):
    import socket

    def unreachable(address, timeout=None):
        raise OSError(-2, "Name or service not known")

    monkeypatch.setattr(socket, "create_connection", unreachable)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    for command in ("train", "eval"):
        line = one_line_error(capsys, [command, "--model_name_or_path", "Qwen/Qwen2.5-0.5B-Instruct", "--output_dir",
                                       str(tmp_path / "run"), "--num_train_tasks", "16"])
        assert re.search(rf"^milegpo {command}: error: --model_name_or_path Qwen/Qwen2.5-0.5B-Instruct: not a folder "
                         r"here and not in the Hugging Face cache \(.*\), and the Hub \(huggingface.co\) cannot be "
                         r"reached \(Name or service not known\)", line), line
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    line = one_line_error(capsys, ["eval", "--model_name_or_path", "Qwen/Qwen2.5-0.5B-Instruct"])
    assert line.endswith("and HF_HUB_OFFLINE is set (download it first, or give a saved model's folder)"), line


def test_a_hub_id_in_the_cache_needs_no_hub(tmp_path, monkeypatch):
    import socket

    from milegpo.job import parse
    from milegpo.job.flags import check_run_environment

    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: (_ for _ in ()).throw(OSError("no network")))
    monkeypatch.setattr("huggingface_hub.try_to_load_from_cache", lambda repo, name: "/cache/config.json")
    _, cfg = parse(["--model_name_or_path", "Qwen/Qwen2.5-0.5B-Instruct", "--output_dir", str(tmp_path / "run")],
                   prog="milegpo eval")
    check_run_environment("Qwen/Qwen2.5-0.5B-Instruct", cfg)  # no error


@pytest.mark.parametrize("where", ["file", "env_file", "read_only"])
def test_a_tensorboard_folder_that_cannot_be_written_is_one_line(capsys, tmp_path, monkeypatch, where):
    run = tmp_path / "run"
    if where == "file":
        run.mkdir()
        (run / "runs").write_text("not a folder")
        expected = f"TensorBoard's folder (--report_to tensorboard) {run / 'runs'}: a file, not a folder"
    elif where == "env_file":
        (tmp_path / "tb").write_text("not a folder")
        monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(tmp_path / "tb"))
        expected = f"$TENSORBOARD_LOGGING_DIR {tmp_path / 'tb'}: a file, not a folder"
    else:
        monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", "/proc/milegpo-no-such-folder/tb")
        expected = "$TENSORBOARD_LOGGING_DIR /proc/milegpo-no-such-folder/tb: /proc is not writable"
    line = one_line_error(capsys, ["train", "--report_to", "tensorboard", "--output_dir", str(run)])
    assert line.startswith(f"milegpo train: error: {expected}"), line


def test_the_recipe_script_says_what_is_missing_in_one_line(tmp_path, monkeypatch):
    """examples/train_alfworld.py (train_webshop.py runs it): no vLLM, an unreachable Hub, no ALFWorld games, a
    broken anchor: one line before the trainer (was: a traceback while the trainer was built)."""
    import importlib.util
    import socket
    from pathlib import Path

    from .test_recipes import load_module

    root = Path(__file__).parent.parent
    script = load_module(root / "examples" / "train_alfworld.py")
    built = []
    monkeypatch.setattr(script, "MileGPOTrainer", lambda *a, **k: built.append(1) or pytest.fail("trainer built"))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: (_ for _ in ()).throw(OSError("no network")))
    monkeypatch.setattr("huggingface_hub.try_to_load_from_cache", lambda repo, name: None)
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "no-games"))
    recipe = str(root / "examples" / "recipes" / "alfworld" / "gigpo.yaml")
    policy = _saved(tmp_path, "policy", {"env": "household"})
    for flags, said in (([], "--use_vllm true: vLLM is not installed here"),
                        (["--use_vllm", "false"], "--model_name_or_path Qwen/Qwen2.5-1.5B-Instruct: not a folder here"),
                        (["--use_vllm", "false", "--model_name_or_path", policy], "the train tasks of --env alfworld: "
                                                                                   "no ALFWorld games at"),
                        (["--use_vllm", "false", "--model_name_or_path", policy, "--env", "household", "--state_anchor",
                          "tests.test_hostile_probes:raising_anchor"], "raised RuntimeError: my anchor is broken")):
        with pytest.raises(SystemExit) as stopped:
            script.main(["--config", recipe, "--output_dir", str(tmp_path / "run"), "--report_to", "none", *flags])
        assert ": error: " in str(stopped.value)
        assert said in str(stopped.value) and "\n" not in str(stopped.value), str(stopped.value)
    assert not built


# ---------------------------------------------------------------- the new surfaces (2026-12-03)
def _eps_batch():
    from milegpo.credit.synthetic import random_batch

    return random_batch(4, 6, 30, seed=1)


@pytest.mark.parametrize("changes", [{"hgpo_weight_eps": 0.0}, {"hgpo_weight_eps": 0.0, "norm_eps": 0.0}])
def test_hgpo_torch_twin_equals_the_oracle_with_zero_eps(changes):
    import torch

    from milegpo.credit import CreditConfig, estimate

    batch, config = _eps_batch(), CreditConfig(**changes)
    ref = torch.as_tensor(estimate(batch, "hgpo", config=config, backend="reference").advantages, dtype=torch.float64)
    vec = torch.as_tensor(estimate(batch, "hgpo", config=config, backend="torch").advantages, dtype=torch.float64)
    assert torch.allclose(ref, vec, atol=1e-9)  # was: NaN on the torch twin (0 / 0 where no level is kept)


@pytest.mark.parametrize("changes, named", [({"hgpo_alpha": 1e300}, "hgpo_alpha"),
                                            ({"hgpo_alpha": 200.0, "hgpo_history": 64}, "hgpo_alpha"),
                                            ({"g2po_success_value": 1e308}, "g2po_success_value"),
                                            ({"g2po_failure_value": -1e200}, "g2po_failure_value"),
                                            ({"g2po_w": 1e308}, "g2po_w")])
def test_hgpo_g2po_numbers_that_overflow_are_refused_at_the_config(changes, named):
    from milegpo.credit import CreditConfig

    with pytest.raises(ValueError, match=f"CreditConfig.{named} must be at most"):
        CreditConfig(**changes)  # was: OverflowError, or NaN / inf advantages, at the first credit step
    CreditConfig(hgpo_alpha=100.0, g2po_w=1e100, g2po_success_value=-1e100)  # the neighbours pass


@pytest.mark.parametrize("argv, message", [
    (["--credit_method", "hgpo", "--credit_variant", "md"], r"credit_variant='md': credit method 'hgpo' has the "
                                                            r"variant\(s\) full only"),
    (["--credit_method", "gigpo", "--credit_variant", "rcs"], r"credit method 'gigpo' has the variant\(s\) full"),
    (["--credit_method", "g2po", "--credit_overrides", '{"hgpo_history": 3}'],
     r"credit method 'g2po' does not read hgpo_history \(read by hgpo\)"),
    (["--credit_overrides", '{"g2po_w": 2.0}'], r"credit method 'milegpo' does not read g2po_w \(read by g2po\)"),
    (["--credit_method", "hgpo", "--credit_overrides", '{"hgpo_alpha": 1e300}'], r"hgpo_alpha must be at most"),
    # issue 48.6: a switch of another method (was: accepted silently), one message naming the methods that read it
    (["--credit_method", "gigpo", "--credit_overrides", '{"degree_self_loops": false}'],
     r"credit method 'gigpo' does not read degree_self_loops \(read by milegpo\)"),
    (["--credit_method", "hgpo", "--credit_overrides", '{"evidence_self_loops": false}'],
     r"credit method 'hgpo' does not read evidence_self_loops \(read by milegpo\)"),
    (["--credit_method", "g2po", "--credit_overrides", '{"graph_penalty": "return"}'],
     r"credit method 'g2po' does not read graph_penalty \(read by graphgpo, milegpo\)"),
    (["--credit_method", "grpo", "--credit_overrides", '{"gamma": 0.9, "eta": 0.5}'],
     r"'grpo' does not read eta \(read by milegpo\); gamma \(read by gigpo, hgpo\)"),
])
def test_a_variant_or_override_the_method_does_not_read_is_refused(capsys, tmp_path, argv, message):
    line = one_line_error(capsys, ["train", *argv, "--output_dir", str(tmp_path / "run")])
    assert re.search(message, line), line  # was: accepted, the run was the method without the variant / override


def test_the_method_s_own_variant_and_overrides_pass(tmp_path):
    from milegpo.job import parse

    _, cfg = parse(["--credit_method", "hgpo", "--credit_overrides", '{"hgpo_history": 3}', "--output_dir",
                    str(tmp_path)])
    assert cfg.credit_config().hgpo_history == 3
    _, cfg = parse(["--credit_method", "milegpo", "--credit_variant", "md", "--output_dir", str(tmp_path)])
    assert cfg.credit_variant == "md"


@pytest.mark.parametrize("command", ["demo", "credit-quality"])
def test_preset_names_are_case_folded_in_every_command(command):
    from milegpo.cli import build_parser

    args = build_parser().parse_args([command, "--preset", "GIGPO_REFERENCE"])
    assert args.preset == "gigpo_reference"  # was: 'invalid choice' here while train's --credit_preset took it


def _gym_env(step_out, reset_info):
    from milegpo.envs.base import Task
    from milegpo.envs.gym import GymTextEnv

    class Probe:
        def reset(self, seed=None, options=None):
            return "start", dict(reset_info)

        def step(self, action):
            return step_out

    env = GymTextEnv(Probe)
    env.reset(Task(env="gym", task_id="t", seed=1, horizon=5))
    return env


@pytest.mark.parametrize("step_out, named", [
    (("x", 0.0, False, False, {"won": "false"}), r"info\['won'\] = str 'false', expected a bool"),
    (("x", 1.0, "False", False, {}), r"terminated = str 'False', expected a bool"),
    (("x", 0.0, False, "no", {}), r"truncated = str 'no', expected a bool"),
    (("x", 0.0, False, None, {}), r"truncated = NoneType None"),
    (("x", 0.0, False, False, {"invalid": "false"}), r"info\['invalid'\] = str 'false'"),
    (("x", 0.0, False, False, {"admissible_actions": (a for a in ["go"])}), r"admissible_actions'\] must be a list"),
    (("x", 0.0, False, False, {"admissible_actions": {"go": 1}}), r"admissible_actions'\] must be a list"),
    (("x", 0.0, False, False, {"admissible_actions": None}), r"admissible_actions'\] must be a list"),
])
def test_a_gym_step_of_the_wrong_types_is_named(step_out, named):
    env = _gym_env(step_out, {})
    with pytest.raises(TypeError, match=named):  # was: "false" read as True (a win, a truncation), a generator
        env.step("go")                           # consumed into no admissible action, None a bare TypeError


def test_a_gym_step_of_numpy_and_int_flags_plays():
    import numpy as np

    _, _, terminated, truncated, info = _gym_env(("x", np.float32(1.0), np.bool_(True), False, {}), {}).step("go")
    assert (terminated, truncated, info["won"]) == (True, False, True)
    _, _, terminated, _, info = _gym_env(("x", 0.0, False, False, {"won": 1}), {}).step("go")
    assert (terminated, info["won"]) == (True, True)
    with pytest.raises(TypeError, match=r"reset: info\['admissible_actions'\] must be a list"):
        _gym_env(("x", 0.0, False, False, {}), {"admissible_actions": (a for a in ["go"])})


@pytest.mark.parametrize("observation, done, named", [
    ({"won": "false"}, False, r"observation\['won'\] = str 'false', expected a bool"),
    ({}, "false", r"done = str 'false'"),
    ({"truncated": "no"}, False, r"observation\['truncated'\] = str 'no'"),
    ({"invalid": "false"}, False, r"observation\['invalid'\] = str 'false'"),
    ({"legal_actions": {"a": 1}}, False, r"observation\['legal_actions'\] must be a list of str"),
])
def test_an_openenv_step_of_the_wrong_types_is_named(observation, done, named):
    from types import SimpleNamespace

    from milegpo.envs.base import Task
    from milegpo.envs.openenv import OpenEnvTextEnv

    class Client:
        def reset(self, **kwargs):
            return SimpleNamespace(observation={"text": "start"}, reward=None, done=False)

        def step(self, action):
            return SimpleNamespace(observation={"text": "x", **observation}, reward=1.0, done=done)

    env = OpenEnvTextEnv(client=Client())
    env.reset(Task(env="probe", task_id="t", seed=1, horizon=5))
    with pytest.raises(TypeError, match=named):  # was: the str "false" read as True (a win, an end, an invalid
        env.step("go")                           # action), a dict's keys taken as the actions


@pytest.mark.parametrize("argv, message", [
    (["--env", "nosuch"], r"cannot serve --env nosuch at 127.0.0.1:8000: unknown environment kind 'nosuch'"),
    (["--port", "99999"], r"--port 99999: a port is 0..65535"),
    (["--port", "-1"], r"--port -1: a port is 0..65535"),
    (["--host", "no.such.host.invalid", "--port", "0"], r"cannot serve --env household at no.such.host.invalid:0"),
])
def test_the_openenv_server_s_misuse_is_one_line(capsys, argv, message):
    from milegpo.envs.openenv import main

    assert main(argv) == 2  # was: a traceback (UnknownKind, OverflowError, OSError)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(message, err[0]) and "Traceback" not in err[0], err


PROBE_ENVS = '''
from milegpo.envs.base import Task, TextEnv


class NeedsArg(TextEnv):
    def __init__(self, size):
        super().__init__()
        self.size = size

    def _reset(self, task):
        return "s", ["go"], {"goal": "", "game_id": "g"}

    def _step(self, action):
        return "s", 1.0, True, ["go"], {}


class Good(NeedsArg):
    def __init__(self):
        super().__init__(1)


def other_kind(split, n, *, start=0, task_type="", horizon=5, **options):
    return [Task(env="household", task_id=f"{split}-{i}", seed=i, horizon=horizon) for i in range(start, start + n)]


def fewer(split, n, *, start=0, task_type="", horizon=5, **options):
    return [Task(env="probe-fewer", task_id=f"{split}-{i}", seed=i, horizon=horizon) for i in range(max(0, n - 1))]


def text(split, n, **options):
    return "abc"
'''


@pytest.fixture
def probe_envs(tmp_path, monkeypatch):
    from milegpo.envs import register, unregister

    (tmp_path / "probe_envs_44.py").write_text(PROBE_ENVS)
    monkeypatch.syspath_prepend(str(tmp_path))
    kinds = {"probe-other": "other_kind", "probe-fewer": "fewer", "probe-text": "text"}
    for kind, fn in kinds.items():
        register(kind, "probe_envs_44:Good", tasks=f"probe_envs_44:{fn}")
    yield
    for kind in kinds:
        unregister(kind)


@pytest.mark.parametrize("kind, error, message", [
    ("probe-fewer", ValueError, r"returned 2 tasks for split 'train'; 3 were asked"),
    ("probe-text", TypeError, r"returned str 'abc' for split 'train'; expected a list of milegpo.envs.Task"),
])
def test_what_a_registered_task_function_returns_is_checked(probe_envs, kind, error, message):
    from milegpo.rollout import make_tasks

    with pytest.raises(error, match=message):  # was: 2 tasks for 3, 'a' 'b' 'c'
        make_tasks(kind, "train", 3)
    assert len(make_tasks("probe_envs_44:Good", "train", 3)) == 3
    # was: tasks of kind 'household' from the function registered for 'probe-other', played by household's class
    assert {t.env for t in make_tasks("probe-other", "train", 3)} == {"probe-other"}


@pytest.mark.parametrize("kwargs, message", [({"n": True}, r"n must be an int >= 0, got True"),
                                             ({"start": -1}, r"start must be an int >= 0, got -1"),
                                             ({"horizon": 2.5}, r"horizon must be an int >= 1 \(steps\), got 2.5"),
                                             ({"horizon": 0}, r"horizon must be an int >= 1 \(steps\), got 0")])
def test_seeded_tasks_refuse_what_they_kept(kwargs, message):
    from milegpo.envs.registry import seeded_tasks

    with pytest.raises(ValueError, match=message):  # was: kept in the Tasks (horizon 2.5, task 'k/train/-1')
        seeded_tasks("k", ("train",), "train", **{"n": 2, **kwargs})


def test_a_class_that_cannot_be_made_is_refused_before_the_run(capsys, tmp_path, probe_envs):
    from milegpo.envs import get_kind
    from milegpo.envs.base import EnvError

    with pytest.raises(EnvError, match=r"NeedsArg\(\*\*\{\}\) failed: .*missing 1 required positional argument"):
        get_kind("probe_envs_44:NeedsArg").make()  # was: a bare TypeError in the first rollout
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "qwen2"}')
    line = one_line_error(capsys, ["train", "--env", "probe_envs_44:NeedsArg", "--sft_epochs", "0", "--model_name_or_path", str(model),
                                   "--output_dir", str(tmp_path / "r")])
    assert re.search(r"--env probe_envs_44:NeedsArg: .*NeedsArg\(\*\*\{\}\) failed", line), line


@pytest.mark.parametrize("kwargs, message", [
    ({"tool_timeout": True}, r"tool_timeout must be a finite number of seconds > 0 or None \(no limit\), got True"),
    ({"tool_timeout": float("inf")}, r"tool_timeout must be a finite number .* got inf"),
    ({"success_threshold": float("nan")}, r"success_threshold must be a finite number, got nan"),
    ({"success_threshold": "0.5"}, r"success_threshold must be a finite number, got '0.5'"),
    ({"max_context": 0}, r"max_context must be an int >= 1 \(tokens\) or None, got 0"),
    ({"max_context": -5}, r"max_context must be an int >= 1"),
])
def test_a_tool_runner_s_settings_are_checked_where_they_enter(kwargs, message):
    from milegpo.rollout.tools import ToolEpisodeRunner

    class Env:
        def reset(self, **row):
            return None

        def move(self, direction: str) -> str:
            """Move.

            Args:
                direction: where.
            """
            return direction

        def get_reward(self) -> float:
            return 0.0

    # was: True a 1 s timeout, inf an OverflowError at the first tool call, NaN no success ever, "0.5" parsed,
    # max_context 0 every episode truncated after its first turn
    with pytest.raises(ValueError, match=message):
        ToolEpisodeRunner(Env, None, **kwargs)
    ToolEpisodeRunner(Env, None, tool_timeout=None, success_threshold=1, max_context=4096)


@pytest.mark.parametrize("name", [None, 5])
def test_a_preset_that_is_no_name_is_refused(tmp_path, name):
    from milegpo.credit.presets import get_preset
    from milegpo.trainer import MileGPOConfig
    from milegpo.trainer.config import ConfigError

    with pytest.raises(TypeError, match=r"a credit preset is named by a str"):
        get_preset(name)  # was: AttributeError 'NoneType' object has no attribute 'lower'
    with pytest.raises((ConfigError, ValueError), match=r"credit_preset=.*unknown credit preset"):
        MileGPOConfig(output_dir=str(tmp_path), credit_preset=name, report_to="none")
