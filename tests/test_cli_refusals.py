"""Every flag of every ``milegpo`` command is checked where it enters, before any work: one line on stderr, exit 2
(issue 36). Values from ``--config`` YAML pass the same checks; output paths that cannot be written are found at
the start. Each case here was a probe that was accepted (exit 0) or ended in a traceback."""

import json
import os
import re

import pytest

from .usage_errors import one_line_error


#: a folder that no one may write, root included (a chmod 555 folder is writable by root)
UNWRITABLE = "/proc/milegpo-no-such-folder"


@pytest.mark.parametrize("argv, message", [
    # the job's own flags (JobArguments), as MileGPOConfig checks its fields
    (["train", "--sft_epochs", "-1"], r"^milegpo train: error: JobArguments.sft_epochs=-1.0: must be >= 0 \(0: no "
                                      r"warm start\)$"),
    (["train", "--sft_explore", "1.5"], r"JobArguments.sft_explore=1.5: must be <= 1"),
    (["train", "--sft_explore", "-0.1"], r"JobArguments.sft_explore=-0.1: must be >= 0"),
    (["train", "--sft_tasks", "0"], r"JobArguments.sft_tasks=0: must be >= 1"),
    (["train", "--sft_batch_size", "0"], r"JobArguments.sft_batch_size=0: must be >= 1"),
    (["train", "--sft_learning_rate", "nan"], r"JobArguments.sft_learning_rate=nan: must be >= 0"),
    (["train", "--threads", "-1"], r"JobArguments.threads=-1: must be >= 0 \(0: torch's default\)"),
    (["train", "--tiny_hidden", "12"], r"JobArguments.tiny_hidden=12: must be a multiple of 8"),
    (["train", "--tiny_layers", "0"], r"JobArguments.tiny_layers=0: must be >= 1"),
    (["train", "--sft_expert", "bogus"], r"^milegpo train: error: --sft_expert 'bogus': the household world's experts "
                                         r"are oracle, search"),
    (["train", "--env", "webshop", "--sft_expert", "oracle"], r"the webshop world's experts are search"),
    # MileGPOConfig / GRPOConfig fields
    (["train", "--temperature", "-1"], r"^milegpo train: error: MileGPOConfig.temperature=-1.0: must be > 0"),
    (["train", "--temperature", "0"], r"MileGPOConfig.temperature=0.0: must be > 0"),
    (["train", "--top_p", "0"], r"MileGPOConfig.top_p=0.0: must be in \(0, 1\]"),
    (["eval", "--model_name_or_path", "x", "--eval_temperature", "0"], r"^milegpo eval: error: "
                                                                       r"MileGPOConfig.eval_temperature=0.0"),
    # a missing policy or checkpoint
    (["eval"], r"^milegpo eval: error: give --model_name_or_path"),
    (["train", "--resume_from_checkpoint", "/nope"], r"^milegpo train: error: --resume_from_checkpoint /nope: no "
                                                     r"such checkpoint folder"),
    # output paths
    (["train", "--output_dir", UNWRITABLE + "/run"], r"^milegpo train: error: --output_dir .*: /proc is not writable"),
    # credit-quality
    (["credit-quality", "--groups", "0"], r"^milegpo credit-quality: error: --groups 0: must be >= 1$"),
    (["credit-quality", "--group-size", "1"], r"^milegpo credit-quality: error: --group-size 1: must be >= 2$"),
    (["credit-quality", "--invalid-share", "2"], r"--invalid-share 2.0: must be >= 0 and <= 1$"),
    (["credit-quality", "--resamples", "0"], r"--resamples 0: must be >= 1$"),
    (["credit-quality", "--epsilon", "2", "3"], r"--epsilon LO 2.0: must be >= 0 and <= 1$"),
    (["credit-quality", "--epsilon", "0.9", "0.1"], r"--epsilon 0.9 0.1: LO must be <= HI$"),
    (["credit-quality", "--horizon", "0"], r"--horizon 0: must be >= 1$"),
    (["credit-quality", "--temperature", "0"], r"--temperature 0.0: must be > 0$"),
    (["credit-quality", "--checkpoint-seeds", "0"], r"--checkpoint-seeds 0: must be >= 1$"),
    (["credit-quality", "--similarity-shingle", "0"], r"--similarity-shingle 0: must be >= 1$"),
    (["credit-quality", "--seeds", "0", "0"], r"--seeds 0 0: a seed given twice"),
    (["credit-quality", "--checkpoint", "/nope"], r"^milegpo credit-quality: error: --checkpoint /nope: no such "
                                                  r"folder"),
    (["credit-quality", "--out", UNWRITABLE], r"^milegpo credit-quality: error: --out .*: /proc is not writable"),
    # generate-games
    (["generate-games", "household", "g.jsonl", "--n", "0"], r"^milegpo generate-games household OUT.jsonl: error: "
                                                             r"--n 0: must be >= 1$"),
    (["generate-games", "household", "g.jsonl", "--horizon", "0"], r"--horizon 0: must be >= 1$"),
    (["generate-games", "household", "g.jsonl", "--task-type", "fly"], r"--task-type 'fly': not a household task"),
    (["generate-games", "household", UNWRITABLE + "/g.jsonl"], r"OUT.jsonl .*: /proc is not writable"),
    (["generate-games", "webshop", UNWRITABLE], r"^milegpo generate-games webshop DIR: error: DIR .*: /proc is not "
                                                r"writable"),
    (["generate-games", "alfworld", UNWRITABLE, "--train", "1"], r"^milegpo generate-games alfworld: error: "
                                                                 r"OUT_DIR .*: /proc is not writable"),
    (["generate-games", "alfworld", "games", "--train", "-1", "--id", "1"], r"--train -1: must be >= 0$"),
    (["generate-games", "alfworld", "games"], r"ask for at least one game"),
    # demo and replay
    (["demo", "--groups", "0"], r"^milegpo demo: error: --groups 0: must be >= 1$"),
    (["demo", "--group-size", "1"], r"^milegpo demo: error: --group-size 1: must be >= 2$"),
    (["demo", "--horizon", "0"], r"^milegpo demo: error: --horizon 0: must be >= 1$"),
    (["demo", "--rows", "-1"], r"^milegpo demo: error: --rows -1: must be >= 0$"),
    (["demo", "--save", UNWRITABLE + "/b.npz"], r"^milegpo demo: error: --save .*: /proc is not writable"),
    (["demo", "--plots", UNWRITABLE], r"^milegpo demo: error: --plots .*: /proc is not writable"),
    (["replay", "b.npz", "--plots", UNWRITABLE], r"^milegpo replay: error: --plots .*: /proc is not writable"),
    (["replay", "b.npz", "--rows", "-2"], r"^milegpo replay: error: --rows -2: must be >= 0$"),
])
def test_every_flag_is_refused_in_one_line(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)  # relative outputs (g.jsonl, games) land here, if anything were written
    line = one_line_error(capsys, argv)
    assert re.search(message, line), line
    assert os.listdir(tmp_path) == []  # refused before any work: nothing written


def test_output_paths_that_are_files_are_refused(capsys, tmp_path):
    file = tmp_path / "a_file"
    file.write_text("not a folder")
    for argv, prog in ((["train", "--output_dir", str(file)], "milegpo train"),
                       (["credit-quality", "--out", str(file)], "milegpo credit-quality"),
                       (["demo", "--plots", str(file)], "milegpo demo"),
                       (["generate-games", "webshop", str(file)], "milegpo generate-games webshop DIR")):
        line = one_line_error(capsys, argv)
        assert line.startswith(f"{prog}: error: ") and line.endswith(f"{file}: a file, not a folder"), line
    line = one_line_error(capsys, ["demo", "--save", str(tmp_path)])
    assert line == f"milegpo demo: error: --save {tmp_path}: a folder, not a file"
    line = one_line_error(capsys, ["generate-games", "household", str(tmp_path)])
    assert line.endswith(f"OUT.jsonl {tmp_path}: a folder, not a file")
    assert file.read_text() == "not a folder"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a chmod 555 folder (UNWRITABLE covers root)")
def test_a_read_only_folder_is_refused(capsys, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        line = one_line_error(capsys, ["credit-quality", "--out", str(folder / "q")])
        assert line.endswith(f"{folder} is not writable (Permission denied)"), line
    finally:
        folder.chmod(0o755)


# ---------------------------------------------------------------- --config YAML gets the flags' checks
@pytest.mark.parametrize("text, message", [
    ("group_size: 2.5\n", r"^milegpo train: error: argument --group_size/--group-size: invalid int value: '2.5' "
                          r"\(from --config .*recipe.yaml\)$"),
    ("group_size: 1\n", r"MileGPOConfig.group_size=1: must be >= 2.* \(from --config .*recipe.yaml\)$"),
    ("sft_epochs: -2\n", r"JobArguments.sft_epochs=-2.0: must be >= 0.* \(from --config"),
    ("max_steps: [1\n", r"^milegpo train: error: --config .*recipe.yaml: not valid YAML at line 2, column 1: "),
    ("max_steps: 1\n  group_size: 3\n", r"--config .*recipe.yaml: not valid YAML at line 2"),
    ("- 1\n- 2\n", r"--config .*recipe.yaml: expected a YAML mapping of flag names to values, got list$"),
    ("grup_size: 3\n", r"--config .*recipe.yaml: unknown key --grup_size; did you mean --group_size"),
    ("env: atari\n", r"MileGPOConfig.env='atari': not an environment kind.* \(from --config"),
    ("env_options: {max_receptacles: x}\n", r"MileGPOConfig.env_options="),
    ("plots: maybe\n", r"argument --plots: .*maybe.* \(from --config"),
])
def test_config_values_get_the_same_checks_as_flags(capsys, tmp_path, text, message):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(text)
    line = one_line_error(capsys, ["train", "--config", str(recipe), "--output_dir", str(tmp_path / "run")])
    assert re.search(message, line), line
    assert not (tmp_path / "run").exists()


def test_config_values_become_the_flags_and_a_flag_given_wins(tmp_path):
    from milegpo.job import parse

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("env: webshop\ngroup_size: 3\neval_splits: [test]\nplots: false\nnum_eval_tasks: 10\n"
                      "env_options: {catalog_size: 300, test_goals: 40, max_goal_options: null}\n"
                      "max_completion_length: null\n"
                      "sft_epochs: 0\n")
    job, cfg = parse(["--config", str(recipe), "--output_dir", str(tmp_path / "run")])
    assert (cfg.env, cfg.group_size, cfg.eval_splits, job.plots) == ("webshop", 3, ["test"], False)
    assert cfg.env_options == {"catalog_size": 300, "test_goals": 40} and cfg.max_completion_length is None
    assert cfg.credit_preset == "webshop"  # the env read from the file picks its defaults
    job, cfg = parse(["--config", str(recipe), "--group_size", "5", "--output_dir", str(tmp_path / "run")])
    assert cfg.group_size == 5
    recipe.write_text("group_size: 2.5\n")  # a flag given wins: the file's value of it is not read
    _, cfg = parse([f"--config={recipe}", "--group_size", "4", "--output_dir", str(tmp_path / "run")])
    assert cfg.group_size == 4
    recipe.write_text("env: {MILEGPO_TEST_VARIABLE: seen}\n")  # TRL's mapping of environment variables
    parse(["--config", str(recipe), "--output_dir", str(tmp_path / "run")])
    assert os.environ.pop("MILEGPO_TEST_VARIABLE") == "seen"


# ---------------------------------------------------------------- a model folder or checkpoint that is not one
@pytest.mark.parametrize("content, message", [
    ('{"model_type": "qwen2", ', r"config.json is not valid JSON"),
    ("[1, 2]", r"config.json holds a JSON list, not a model configuration"),
    ('{"hidden_size": 8}', r"config.json names no model_type, not one transformers knows"),
    ('{"model_type": "no-such-model"}', r"config.json names model_type 'no-such-model', not one transformers knows"),
])
def test_a_junk_config_json_in_the_model_folder_is_refused(capsys, tmp_path, content, message):
    (tmp_path / "config.json").write_text(content)
    for command in ("train", "eval"):
        line = one_line_error(capsys, [command, "--model_name_or_path", str(tmp_path),
                                        "--output_dir", str(tmp_path / "run")])
        assert line.startswith(f"milegpo {command}: error: --model_name_or_path {tmp_path}: ")
        assert re.search(message, line), line
    line = one_line_error(capsys, ["credit-quality", "--checkpoint", str(tmp_path), "--out", str(tmp_path / "q")])
    assert line.startswith(f"milegpo credit-quality: error: --checkpoint {tmp_path}: ") and "train" not in line


def _checkpoint(folder, step=2, weights=b""):
    from safetensors.torch import save_file
    import torch

    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": []}))
    save_file({"w": torch.arange(1000, dtype=torch.float32)}, str(folder / "model.safetensors"))
    return folder


def test_a_missing_or_torn_checkpoint_is_refused_before_any_model_is_built(capsys, tmp_path):
    from milegpo.job.flags import checkpoint_step

    whole = _checkpoint(tmp_path / "whole", step=3)
    assert checkpoint_step(whole) == 3
    cases = {}
    cases["a file"] = tmp_path / "file"
    cases["a file"].write_text("x")
    cases["no trainer state"] = _checkpoint(tmp_path / "nostate")
    (cases["no trainer state"] / "trainer_state.json").unlink()
    cases["torn trainer state"] = _checkpoint(tmp_path / "tornstate")
    (cases["torn trainer state"] / "trainer_state.json").write_text('{"global_step": 2, "log_hi')
    cases["no weights"] = _checkpoint(tmp_path / "noweights")
    (cases["no weights"] / "model.safetensors").unlink()
    cases["torn weights"] = _checkpoint(tmp_path / "tornweights")
    weights = cases["torn weights"] / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:2000])
    expected = {"a file": "a file, not checkpoint folder", "no trainer state": "no trainer_state.json",
                "torn trainer state": "trainer_state.json is torn", "no weights": "no model weights",
                "torn weights": "model.safetensors is torn or unreadable"}
    for name, folder in cases.items():
        line = one_line_error(capsys, ["train", "--resume_from_checkpoint", str(folder),
                                        "--output_dir", str(tmp_path / "run")])
        assert line.startswith(f"milegpo train: error: --resume_from_checkpoint {folder}: "), line
        assert expected[name] in line, (name, line)
    assert not (tmp_path / "run").exists()  # refused at the flags: no model, no folder


# ---------------------------------------------------------------- --env_options
def test_env_options_merge_into_the_defaults(private_webshop_cache, tmp_path):
    from milegpo.job import ENV_DEFAULTS, parse

    tiny = ENV_DEFAULTS["webshop"]["tiny"]["env_options"]
    _, cfg = parse(["--env", "webshop", "--env_options", '{"show_attrs": true}', "--output_dir", str(tmp_path)])
    assert cfg.env_options == {**tiny, "show_attrs": True}  # the tiny catalog stays (was: 3,000 products)
    _, cfg = parse(["--env", "webshop", "--env_options",
                    '{"catalog_size": 1000, "test_goals": null, "max_goal_options": null}', "--output_dir", str(tmp_path)])
    assert cfg.env_options == {"catalog_size": 1000}  # a key given wins; null drops the default's
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("env: webshop\nenv_options: {search_anywhere: true}\n")
    _, cfg = parse(["--config", str(recipe), "--output_dir", str(tmp_path)])
    assert cfg.env_options == {**tiny, "search_anywhere": True}
    _, cfg = parse(["--env_options", "{}", "--output_dir", str(tmp_path)])
    assert cfg.env_options == ENV_DEFAULTS["household"]["tiny"]["env_options"]


@pytest.mark.parametrize("argv, message", [
    (["--env_options", '{"max_receptacles": "x"}'], r"env option 'max_receptacles'='x': expected integer"),
    (["--env_options", '{"max_receptacles": true}'], r"env option 'max_receptacles'=True: expected integer"),
    (["--env", "webshop", "--env_options", '{"catalog_size": "big"}'], r"'catalog_size'='big': expected integer"),
    (["--env", "webshop", "--env_options", '{"show_attrs": "yes"}'], r"'show_attrs'='yes': expected boolean"),
    (["--env", "webshop", "--env_options", '{"data_dir": 3}'], r"'data_dir'=3: expected string or path or null"),
    (["--env", "webshop", "--env_options", '{"data_dir": "/nope"}'], r"^milegpo train: error: the train tasks of "
                                                                     r"--env webshop .*: WebShop data directory /nope "
                                                                     r"does not exist"),
    (["--env", "webshop", "--num_eval_tasks", "55"], r"the test tasks of --env webshop .* / at most 0 goal options "
                                                     r"of .* has 54 goals; asked for 55"),
    (["--env", "webshop", "--task_type", "spaceships"], r"WebShop task_type \(a goal category\) must be one of"),
])
def test_env_options_are_checked_at_the_flags(capsys, tmp_path, private_webshop_cache, argv, message):
    line = one_line_error(capsys, ["train", *argv, "--output_dir", str(tmp_path / "run")])
    assert re.search(message, line), line
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------- probes of our own (notes/robustness.md)
@pytest.mark.parametrize("argv, message", [
    (["train", "--output_dir", ""], r"MileGPOConfig.output_dir='': a folder is needed"),
    (["train", "--save_strategy", "steps", "--save_steps", "0"], r"MileGPOConfig.save_steps=0.0: must be > 0 with "
                                                                 r"save_strategy='steps'"),
    (["train", "--seed", "-1"], r"MileGPOConfig.seed=-1: must be in \[0, 2\*\*32 - 1\]"),
    (["train", "--gradient_accumulation_steps", "0"], r"MileGPOConfig.gradient_accumulation_steps=0: must be >= 1"),
    (["train", "--num_iterations", "0"], r"MileGPOConfig.num_iterations=0: must be >= 1"),
    (["train", "--epsilon", "-1"], r"MileGPOConfig.epsilon=-1.0: must be >= 0"),
    (["train", "--weight_decay", "-1"], r"MileGPOConfig.weight_decay=-1.0: must be >= 0"),
    (["train", "--report_to", "no_such_tracker"], r"argument --report_to|MileGPOConfig.report_to"),
    (["train", "--group_size", "3", "--group-size", "4"], r"^milegpo train: error: --group_size given twice: give it "
                                                          r"once$"),
    (["demo", "--seed", "-1"], r"^milegpo demo: error: --seed -1: must be >= 0 and <= 4294967295$"),
    (["credit-quality", "--seeds", "-1"], r"--seeds -1: must be >= 0"),
    (["credit-quality", "--env-options", "[1]"], r"^milegpo credit-quality: error: --env-options \[1\]: expected a "
                                                 r"JSON object"),
    (["credit-quality", "--env-options", '{"max_receptacles": "x"}'], r"env option 'max_receptacles'='x': expected "
                                                                      r"integer"),
    (["credit-quality", "--env", "nowhere"], r"^milegpo credit-quality: error: unknown environment kind 'nowhere'"),
])
def test_probes_of_our_own_are_refused_in_one_line(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    line = one_line_error(capsys, argv)
    assert re.search(message, line), line
    assert os.listdir(tmp_path) == []


def test_a_yaml_key_given_twice_is_refused(capsys, tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("max_steps: 3\ngroup_size: 4\nmax_steps: 5\n")
    line = one_line_error(capsys, ["train", "--config", str(recipe)])
    assert line == f"milegpo train: error: --config {recipe}: not valid YAML at line 3, column 1: key 'max_steps' " \
                   "given twice"


def test_resume_and_overwrite_together_or_a_checkpoint_past_max_steps_is_refused(capsys, tmp_path):
    checkpoint = _checkpoint(tmp_path / "run" / "checkpoint-4", step=4)
    line = one_line_error(capsys, ["train", "--output_dir", str(tmp_path / "run"), "--resume_from_checkpoint",
                                    str(checkpoint), "--overwrite_output_dir"])
    assert line.endswith("--overwrite_output_dir and --resume_from_checkpoint: give one (replace the earlier run, or "
                         "go on with it)")
    line = one_line_error(capsys, ["train", "--output_dir", str(tmp_path / "run"), "--resume_from_checkpoint",
                                    str(checkpoint), "--max_steps", "4"])
    assert line.endswith(f"--resume_from_checkpoint {checkpoint}: saved at step 4, and --max_steps is 4: nothing left "
                         "to train (raise --max_steps)")


def test_the_warm_start_imitates_an_expert_the_world_has(capsys, tmp_path):
    from milegpo.job import parse

    job, _ = parse(["--env", "textworld", "--model_name_or_path", "Qwen/Qwen2.5-0.5B-Instruct", "--output_dir",
                    str(tmp_path / "run"), "--num_eval_tasks", "0", "--max_steps", "1", "--num_train_tasks", "16"])
    assert job.sft_expert == "oracle"  # the game's planner: TextWorld's only expert
    line = one_line_error(capsys, ["train", "--env", "textworld", "--output_dir", str(tmp_path / "run")])
    assert line.startswith("milegpo train: error: --env textworld: the embedded tiny policy has a tokenizer for "
                           "household, scienceworld, webshop only")
