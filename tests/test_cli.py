"""The `milegpo` command: demo, replay, generate-games (train / eval: tests/job/test_pipeline.py)."""

import json

import pytest

from milegpo.cli import main
from milegpo.credit import StepBatch

from .usage_errors import one_line_error


def test_demo_prints_methods_diagnostics_and_writes_plot(tmp_path, capsys):
    batch_file = tmp_path / "batch.npz"
    assert main(["demo", "--groups", "2", "--group-size", "4", "--horizon", "8", "--plots", str(tmp_path),
                 "--save", str(batch_file)]) == 0
    out = capsys.readouterr().out
    for word in ("grpo", "gigpo", "graphgpo", "milegpo", "tie_correction_rate", "shared_state_coverage"):
        assert word in out
    assert (tmp_path / "advantages_by_method.png").stat().st_size > 1000
    assert len(StepBatch.load(batch_file)) > 0
    assert main(["replay", str(batch_file), "--preset", "webshop", "--variant", "rcs", "--rows", "0"]) == 0
    assert "preset webshop, variant rcs" in capsys.readouterr().out


def test_generate_household_games(tmp_path, capsys):
    path = tmp_path / "games.jsonl"
    assert main(["generate-games", "household", str(path), "--split", "ood", "--n", "3"]) == 0
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 3 and all(r["split"] == "ood" and r["walkthrough"] for r in rows)


# ---------------------------------------------------------------- mistakes end in one line (issue 20)
@pytest.mark.parametrize("argv, message", [
    (["train", "--iteratons", "5"], r"^milegpo train: error: unknown flag --iteratons; did you mean --max_steps "
                                    r"\(Training iterations \(paper: 300\)\)\? \(milegpo train --help lists them\)$"),
    (["train", "--lerning_rate", "1e-4", "--max_stepz", "3"], r"unknown flag --lerning_rate \(and --max_stepz\); "
                                                              r"did you mean --learning_rate \(Learning rate"),
    (["eval", "--model_name_or_path", "x", "--num-eval-taks", "3"], r"^milegpo eval: error: unknown flag "
                                                                    r"--num-eval-taks; did you mean --num_eval_tasks"),
    (["train", "--env", "atari"], r"^milegpo train: error: MileGPOConfig.env='atari': not an environment kind; "
                                  r"known: alfworld, household, scienceworld, textworld, webshop$"),
    (["train", "--model_name_or_path", "./no/such/model"], r"^milegpo train: error: --model_name_or_path "
                                                           r"./no/such/model: no such folder"),
    (["eval", "--model_name_or_path", "/tmp/milegpo-no-such-run/final"], r"--model_name_or_path "
                                                                         r"/tmp/milegpo-no-such-run/final: no such"),
    (["train", "--env_options", "{max_receptacles: 4}"], r"^milegpo train: error: MileGPOConfig.env_options="
                                                         r"'\{max_receptacles: 4\}': not valid JSON"),
    (["train", "--credit_overrides", '{"eta": }'], r"MileGPOConfig.credit_overrides='\{\"eta\": \}': not valid JSON"),
    (["train", "--max_steps", "many"], r"^milegpo train: error: argument --max_steps/--max-steps: invalid int value: "
                                       r"'many'$"),
    (["train", "--group_size", "1"], r"MileGPOConfig.group_size=1: must be >= 2"),
    (["train", "--num_train_tasks", "2"], r"^milegpo train: error: MileGPOConfig.num_train_tasks=2: must be >= "
                                          r"groups_per_iteration \(4\) to fill an iteration$"),
    (["train", "--config", "/no/such/recipe.yaml"], r"^milegpo train: error: /no/such/recipe.yaml: No such file"),
    (["train", "stray"], r"^milegpo train: error: unexpected argument\(s\) stray"),
    (["replay", "b.npz", "--rowz", "3"], r"^milegpo replay: error: unknown flag --rowz; did you mean --rows\?"),
    (["demo", "--grups", "3"], r"^milegpo demo: error: unknown flag --grups; did you mean --groups \(task groups\)\?"),
    (["demo", "--horizon", "x"], r"^milegpo demo: error: argument --horizon: invalid int value: 'x'"),
    (["replay"], r"^milegpo replay: error: the following arguments are required: batch"),
    (["frobnicate"], r"^milegpo: error: argument command: invalid choice: 'frobnicate'"),
])
def test_cli_mistakes_end_in_one_line_and_exit_2(capsys, tmp_path, monkeypatch, argv, message):
    import re

    monkeypatch.chdir(tmp_path)  # ./no/such/model is relative
    line = one_line_error(capsys, argv)
    assert re.search(message, line), line


def test_a_model_folder_without_config_is_refused(capsys, tmp_path):
    line = one_line_error(capsys, ["eval", "--model_name_or_path", str(tmp_path)])
    assert line.endswith(f"--model_name_or_path {tmp_path}: a folder without config.json, not a saved model (give a "
                         "folder that save_pretrained wrote, e.g. milegpo_run/final)")


def test_the_command_exits_2_without_a_traceback():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "milegpo.cli", "train", "--iteratons", "5"], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 2 and "Traceback" not in out.stderr and out.stdout == ""
    assert out.stderr.strip().splitlines()[-1].startswith("milegpo train: error: unknown flag --iteratons; did you "
                                                          "mean --max_steps")


def test_closest_flag():
    from milegpo.usage import closest_flag

    flags = [("num_iterations", "Number of iterations per batch."), ("max_steps", "Training iterations (paper: 300)."),
             ("logging_steps", "Log every n iterations."), ("groups_per_iteration", "Task groups per iteration."),
             ("max_completion_length", "Tokens per step completion."), ("learning_rate", "Learning rate."),
             ("sft_learning_rate", "Learning rate of the warm start.")]
    own = {"max_steps", "logging_steps", "groups_per_iteration", "max_completion_length", "learning_rate",
           "sft_learning_rate"}
    # a help word: the own flag whose help starts with it, over TRL's num_iterations
    assert closest_flag("iteratons", flags, own) == "max_steps"
    assert closest_flag("iteratons", flags) == "num_iterations"  # without the preference: the name's word
    assert closest_flag("max_step", flags, own) == "max_steps"  # a typo of a name beats a help word ("step")
    assert closest_flag("lerning-rate", flags, own) == "learning_rate"
    assert closest_flag("xyzzy", flags, own) is None


# ---------------------------------------------------------------- replay reports each bad file (issue 20)
def test_replay_of_a_missing_or_corrupt_file_is_one_line(tmp_path, capsys):
    line = one_line_error(capsys, ["replay", str(tmp_path / "nope.npz")], code=1)
    assert line == f"milegpo replay: {tmp_path / 'nope.npz'}: no such StepBatch file"
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04 not really")
    line = one_line_error(capsys, ["replay", str(tmp_path / "bad.npz")], code=1)
    assert line.startswith(f"milegpo replay: {tmp_path / 'bad.npz'}: unreadable .npz archive, truncated or corrupt")


def test_replay_of_a_folder_reports_each_bad_file_and_goes_on(tmp_path, capsys):
    from milegpo.credit.synthetic import random_batch

    run = tmp_path / "batches"
    run.mkdir()
    for i in (1, 2, 4):
        random_batch(n_groups=2, group_size=3, horizon=5, seed=i).save(run / f"iter_{i:04d}")
    good = (run / "iter_0002.npz").read_bytes()
    (run / "iter_0003.npz").write_bytes(good[: len(good) // 3])  # truncated
    (run / "iter_0005.npz").write_bytes(b"")  # empty
    assert main(["replay", str(run), "--rows", "0"]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    skipped = [line for line in captured.err.splitlines() if line.startswith("milegpo replay: skipped ")]
    assert len(skipped) == 2 and str(run / "iter_0003.npz") in skipped[0] and "truncated or corrupt" in skipped[0]
    assert str(run / "iter_0005.npz") in skipped[1] and "empty file (0 bytes)" in skipped[1]
    assert "milegpo replay: 2 of 5 files could not be read: iter_0003.npz, iter_0005.npz" in captured.err
    table = captured.out.split("credit diagnostics per iteration")[1].split("last iteration")[0]
    rows = [line.split()[0] for line in table.strip().splitlines()[2:]]
    assert rows == ["1", "2", "4"]  # every readable file replayed, in order
    assert "last iteration (iter_0004.npz) by method" in captured.out and "graphgpo" in captured.out
    for name in ("iter_0001.npz", "iter_0002.npz", "iter_0004.npz"):
        (run / name).write_bytes(b"junk")
    assert main(["replay", str(run)]) == 1
    err = capsys.readouterr().err
    assert err.count("milegpo replay: skipped") == 5 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == f"milegpo replay: none of the 5 files in {run} could be read"


def test_replay_of_an_empty_batch(tmp_path, capsys):
    empty = StepBatch.from_rows([]).save(tmp_path / "empty")
    assert main(["replay", str(empty)]) == 0
    assert "batch: 0 steps (an empty StepBatch): no credit to show" in capsys.readouterr().out
    run = tmp_path / "run"
    run.mkdir()
    StepBatch.from_rows([]).save(run / "iter_0001")
    assert main(["replay", str(run), "--rows", "0"]) == 0
    assert "batch: 0 steps" in capsys.readouterr().out


def test_generate_webshop_catalog_is_played_with_data_dir(tmp_path, capsys, private_webshop_cache):
    from milegpo.envs.webshop import WebShopEnv, generate_catalog, webshop_tasks
    from milegpo.envs.webshop.data import HUMAN_FILE, REVIEWS_FILE, SMALL_FILES

    folder = tmp_path / "shop"
    assert main(["generate-games", "webshop", str(folder), "--size", "80", "--seed", "3"]) == 0
    text = capsys.readouterr().out
    assert f"wrote a WebShop catalog to {folder}: 80 products" in text and '"data_dir"' in text
    assert sorted(p.name for p in folder.iterdir()) == sorted([*SMALL_FILES, HUMAN_FILE, REVIEWS_FILE])
    for name, content in generate_catalog(80, 3).items():  # WebShop's files, as the generator makes them
        assert json.loads((folder / name).read_text()) == content
    tasks = webshop_tasks("test", 5, data_dir=folder, test_goals=5)
    assert all(dict(t.options)["data_dir"] == str(folder.resolve()) for t in tasks)
    won = 0
    for task in tasks:
        env = WebShopEnv()
        env.reset(task)
        while not env.done:
            env.step(env.expert_action())
        won += env.won
    assert won >= 3
    assert one_line_error(capsys, ["generate-games", "webshop", str(tmp_path / "tiny"), "--size", "5"]) == \
        "milegpo generate-games webshop DIR: error: --size 5: must be >= 10"


def test_preset_names_are_the_credit_presets(tmp_path, capsys):
    from milegpo.cli import PRESET_NAMES
    from milegpo.credit import presets

    assert PRESET_NAMES == tuple(presets.PRESETS)
    batch_file = tmp_path / "batch.npz"
    assert main(["demo", "--groups", "2", "--group-size", "3", "--horizon", "5", "--save", str(batch_file)]) == 0
    capsys.readouterr()
    assert main(["replay", str(batch_file), "--preset", "graphgpo_reference", "--rows", "0"]) == 0
    assert "preset graphgpo_reference" in capsys.readouterr().out
