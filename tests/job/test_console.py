"""The console of `milegpo train` (milegpo.job.console): one readable line per iteration, every metric in
metrics.jsonl."""

import json
from types import SimpleNamespace

from milegpo.job.console import IterationConsole, iteration_line, sft_line, use_iteration_console

ITERATION = {"loss": 0.0123, "grad_norm": 0.5, "episode/success_rate": 0.25, "episode/return": 0.2375,
             "episode/invalid_action_rate": 0.4, "episode/episode_length": 7.125, "kl": 0.002,
             "time/credit_s": 0.0073, "time/rollout_s": 0.65, "credit/tie_correction_rate": float("nan"),
             "advantages/abs_mean": 0.31}


def test_an_iteration_is_one_line_with_its_main_numbers():
    line = iteration_line(ITERATION, 3, 50)
    assert line == ("iteration 3/50: success 25.0%, reward 0.237, invalid 40.0%, length 7.1, loss 0.0123, "
                    "kl 0.002, credit 7.3 ms, rollout 0.65 s")
    assert "\n" not in line and len(line) < 160
    scored = iteration_line({**ITERATION, "episode/score": 41.25}, 3, 50)
    assert "success 25.0%, score 41.2, reward" in scored  # a world that scores episodes (WebShop)


def test_logs_that_are_no_iteration_print_nothing():
    assert iteration_line({"eval_id_success_rate": 0.5, "eval_runtime": 3.0}, 0, 50) is None
    assert iteration_line({"train_runtime": 4.4, "train_loss": 0.0, "epoch": 0.1}, 50, 50) is None


def _state(step, max_steps=2):
    return SimpleNamespace(is_world_process_zero=True, global_step=step, max_steps=max_steps)


def test_the_console_prints_one_line_and_logs_every_metric(tmp_path, capsys):
    log = tmp_path / "run" / "metrics.jsonl"
    console = IterationConsole(log, show_bar=False)
    args, control = SimpleNamespace(), SimpleNamespace()
    console.on_train_begin(args, _state(0), control)
    console.on_log(args, _state(0), control, logs={"eval_id_success_rate": 0.5})
    for step in (1, 2):
        console.on_step_end(args, _state(step), control)
        console.on_log(args, _state(step), control, logs=dict(ITERATION))
    console.on_log(args, _state(2), control, logs={"train_runtime": 4.4})
    console.on_train_end(args, _state(2), control)
    out = capsys.readouterr().out.splitlines()
    assert out == [iteration_line(ITERATION, 1, 2), iteration_line(ITERATION, 2, 2)]
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2, 2] and {r["phase"] for r in rows} == {"rl"}
    assert rows[0] == {"phase": "rl", "step": 0, "eval_id_success_rate": 0.5}
    assert set(ITERATION) <= set(rows[1]) and rows[1]["credit/tie_correction_rate"] is None  # NaN: null
    assert rows[1]["loss"] == ITERATION["loss"] and rows[3] == {"phase": "rl", "step": 2, "train_runtime": 4.4}


def test_the_warm_start_has_its_own_lines_in_the_same_log(tmp_path, capsys):
    log = tmp_path / "metrics.jsonl"
    console = IterationConsole(log, show_bar=False, line=sft_line, phase="sft")
    args, control = SimpleNamespace(), SimpleNamespace()
    console.on_train_begin(args, _state(0, 624), control)
    console.on_log(args, _state(10, 624), control, logs={"loss": 0.5254, "mean_token_accuracy": 0.8518,
                                                         "learning_rate": 0.003, "epoch": 1.538})
    console.on_log(args, _state(624, 624), control, logs={"train_runtime": 80.0, "train_loss": 0.3})
    assert capsys.readouterr().out.splitlines() == [
        "SFT step 10/624: loss 0.5254, token accuracy 85.2%, lr 0.003, epoch 1.54"]
    IterationConsole(log, show_bar=False).on_log(args, _state(1), control, logs=dict(ITERATION))
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["phase"], r["step"]) for r in rows] == [("sft", 10), ("sft", 624), ("rl", 1)]
    capsys.readouterr()


def test_the_bar_gets_the_lines_under_it(tmp_path, capsys):
    console = IterationConsole(None)
    args, control = SimpleNamespace(), SimpleNamespace()
    console.on_train_begin(args, _state(0, 1), control)
    console.on_step_end(args, _state(1, 1), control)
    console.on_log(args, _state(1, 1), control, logs=dict(ITERATION))
    console.on_train_end(args, _state(1, 1), control)
    captured = capsys.readouterr()
    assert iteration_line(ITERATION, 1, 1) in captured.out + captured.err
    assert "{'loss'" not in captured.out + captured.err


def test_it_takes_the_place_of_transformers_progress_printer():
    from transformers.trainer_callback import CallbackHandler, PrinterCallback, ProgressCallback

    for disable_tqdm, replaced in ((False, ProgressCallback), (True, PrinterCallback)):
        handler = CallbackHandler([replaced], None, None, None, None)
        trainer = SimpleNamespace(args=SimpleNamespace(disable_tqdm=disable_tqdm),
                                  remove_callback=handler.remove_callback, add_callback=handler.add_callback)
        console = use_iteration_console(trainer, None)
        assert handler.callbacks[-1] is console and console.show_bar is not disable_tqdm
        assert not any(type(cb) in (ProgressCallback, PrinterCallback) for cb in handler.callbacks)
