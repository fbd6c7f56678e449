"""A user's own environment on the command line (issue 48): a broken one is one line before any model is built,
a failing one stops the run in one line, and the embedded tiny policy plays any text environment."""

import re

import pytest

pytest.importorskip("gymnasium")

from ..usage_errors import one_line_error  # noqa: E402

GAMES = "tests.envs.text_games"


@pytest.fixture
def no_model(monkeypatch):
    """A refusal that fails to refuse must not build a model: the policy loader and the trainer fail if reached."""
    import milegpo.job.pipeline as pipeline

    def reached(*args, **kwargs):
        raise AssertionError("a model was built: the broken environment was not refused first")

    monkeypatch.setattr(pipeline, "load_policy", reached)
    monkeypatch.setattr(pipeline, "make_trainer", reached)


def _model_folder(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "qwen2"}')
    return str(model)


@pytest.mark.parametrize("kind, message", [
    ("gym:CartPole-v1", r"the reset of task 'gym:CartPole-v1/(train|test)/0' failed: TypeError: CartPole-v1.reset returned "
                        r"a ndarray observation, expected str"),
    (f"{GAMES}:NoneReset", r"the reset of task '.*NoneReset/(train|test)/0' failed: TypeError: NoneReset.reset returned "
                           r"NoneType None, expected gymnasium's \(observation, info\)"),
    (f"{GAMES}:RaisesInInit", r"the reset of task .* failed: RuntimeError: no licence for the door engine"),
    (f"{GAMES}:ShortStepCorridor", None),  # resets fine (its steps fail: at run time, test_gym)
])
@pytest.mark.parametrize("command", ["train", "eval"])
def test_a_broken_environment_at_the_first_reset_is_one_line_before_any_model(capsys, tmp_path, no_model, kind,
                                                                              message, command):
    """Issue 48.2: each was a traceback on the command line, after the model was built."""
    argv = [command, "--env", kind, "--model_name_or_path", _model_folder(tmp_path), "--output_dir",
            str(tmp_path / "run"), "--num_eval_tasks", "2", "--num_train_tasks", "4", "--groups_per_iteration", "2"]
    if command == "train":
        argv += ["--sft_epochs", "0"]
    if message is None:
        with pytest.raises(AssertionError, match="a model was built"):
            from milegpo.cli import main

            main(argv)
        return
    line = one_line_error(capsys, argv)
    assert line.startswith(f"milegpo {command}: error: --env {kind}: ") and re.search(message, line), line


def test_a_world_without_an_expert_trains_with_the_tiny_policy_and_no_warm_start(capsys, tmp_path):
    """Issue 48.9: "--env mypkg:Env" without a model stopped with "the embedded tiny policy has a tokenizer for
    household, webshop only". Now its defaults are the tiny run's, with no warm start (it has no expert to imitate);
    asking for one is a one-line refusal that says why."""
    from milegpo.job import ANY_KIND_TINY, parse

    kind = f"{GAMES}:KeyDoor"
    job, cfg = parse(["--env", kind, "--output_dir", str(tmp_path / "run")])
    assert job.model_name_or_path is None and job.sft_epochs == 0
    assert {name: getattr(cfg, name) for name in ANY_KIND_TINY} == ANY_KIND_TINY
    line = one_line_error(capsys, ["train", "--env", kind, "--sft_epochs", "3", "--output_dir", str(tmp_path / "r")])
    assert line == (f"milegpo train: error: --sft_expert 'search': the {kind} world's experts are none "
                    "(--sft_epochs 0: no warm start)")
    job, _ = parse(["--env", "household", "--output_dir", str(tmp_path / "run")])
    assert job.sft_epochs == 24.0  # a world with an expert keeps its warm start


def test_the_first_lines_name_a_short_run_on_a_cpu(tmp_path):
    """Issue 48.9: a model's defaults (horizon 50, 16 x 8 episodes, 48 evaluation tasks, 512 tokens a step) take hours
    on a CPU: the console's first lines size the run and give a short run's flags."""
    from milegpo.job import parse
    from milegpo.job.pipeline import short_run_line

    job, cfg = parse(["--output_dir", str(tmp_path / "run")])  # the tiny household run
    assert short_run_line(job, cfg) == (
        "[milegpo] on a CPU: 50 iterations of 4 x 8 episodes of up to 8 steps, 16 tokens a step, 300 evaluation tasks "
        "a split; a short run to try things: --max_steps 5 --groups_per_iteration 2 --group_size 4 --num_eval_tasks 8")
    job, cfg = parse(["--env", f"{GAMES}:KeyDoor", "--model_name_or_path", _model_folder(tmp_path), "--output_dir",
                      str(tmp_path / "run")])
    assert short_run_line(job, cfg).endswith(
        "a short run to try things: --max_steps 5 --groups_per_iteration 2 --group_size 4 --horizon 10 "
        "--num_eval_tasks 8 --max_completion_length 32")
    job, cfg = parse(["--max_steps", "2", "--groups_per_iteration", "2", "--group_size", "4", "--num_eval_tasks", "4",
                      "--output_dir", str(tmp_path / "run")])
    assert short_run_line(job, cfg) is None  # short already


def _run(capsys, argv):
    from milegpo.cli import main

    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.slow
def test_a_users_world_runs_offline_end_to_end_with_the_tiny_policy(capsys, tmp_path):
    kind = f"{GAMES}:KeyDoor"
    out_dir = tmp_path / "run"
    code, out, err = _run(capsys, ["train", "--env", kind, "--max_steps", "2", "--groups_per_iteration", "2",
                                   "--group_size", "2", "--num_train_tasks", "4", "--num_eval_tasks", "2",
                                   "--threads", "1", "--no_plots", "--output_dir", str(out_dir)])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"[milegpo] policy: tiny Qwen2 built on the spot; env {kind}, horizon 10")
    assert lines[1].startswith(f"[milegpo] no SFT warm start: the {kind} world has no expert to imitate")
    assert "a short run" not in out  # this one is short
    assert (out_dir / "summary.json").is_file() and (out_dir / "final" / "config.json").is_file()


@pytest.fixture
def key_door_model(tmp_path):
    """An untrained tiny policy of the key-and-door words, saved as a model folder (no tokenizer is made of the
    failing world itself: the failure under test is the rollout's)."""
    from milegpo.job.policy import make_model, make_tokenizer

    tok = make_tokenizer(env=f"{GAMES}:KeyDoor")
    folder = tmp_path / "key_door_model"
    make_model(tok, hidden=32).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


@pytest.mark.slow
def test_an_environment_that_fails_mid_run_stops_it_in_one_line_or_is_counted(capsys, tmp_path, key_door_model):
    """Issue 48.1 on the command line: a step that raises stopped nothing (every episode ended after one step, the
    run exited 0 with a saved policy and plots). Now: one line, exit 1; with --env_errors skip the run goes on and
    each iteration counts the failed episodes on the console and in metrics.jsonl."""
    import json

    kind = f"{GAMES}:FailsOnSecondStep"
    argv = ["train", "--env", kind, "--model_name_or_path", key_door_model, "--max_steps", "1",
            "--groups_per_iteration", "2", "--group_size", "4", "--num_train_tasks", "2", "--num_eval_tasks", "0",
            "--horizon", "6", "--max_completion_length", "8", "--threads", "1", "--no_plots"]
    code, out, err = _run(capsys, argv + ["--output_dir", str(tmp_path / "raise")])
    lines = [line for line in err.splitlines() if line.startswith("milegpo")]  # (the rest: progress bars)
    assert code == 1 and len(lines) == 1 and "Traceback" not in err, err
    assert re.match(rf"milegpo train: error: environment '{kind}': step 2 of task '{kind}/train/\d' raised "
                    r"RuntimeError: the floor gave way \(at text_games.py:\d+ in step\) \(\d of 8 episodes failed\); "
                    r"env_errors='skip' plays on and counts such episodes \(the run stopped there\)$", lines[0]), lines[0]
    assert not (tmp_path / "raise" / "final").exists()
    code, out, err = _run(capsys, argv + ["--output_dir", str(tmp_path / "skip"), "--env_errors", "skip"])
    assert code == 0, err
    logged = [json.loads(line) for line in (tmp_path / "skip" / "metrics.jsonl").read_text().splitlines()]
    failed = [row["episode/env_errors"] for row in logged if "episode/env_errors" in row]
    assert failed and failed[0] > 0 and f"env errors {failed[0]:g}" in out
