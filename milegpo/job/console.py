"""What ``milegpo train`` prints while it trains: one readable line per iteration under the progress bar, and
every logged metric in the run's log file.

:class:`IterationConsole` takes the place of transformers' ``ProgressCallback`` (or ``PrinterCallback`` under
``--disable_tqdm``), which print each iteration's whole metrics dict (~50 entries), in the RL trainer and in the
warm start's SFTTrainer. It keeps the bar, writes :func:`iteration_line` (:func:`sft_line`) under it, and
appends every ``logs`` dict the trainers log (warm-start steps, iterations, evaluations, the end-of-training
summaries) as one JSON line to ``<output_dir>/metrics.jsonl``. TRL's ``report_to`` backends
(wandb, tensorboard...) get the full metrics as before: they are other callbacks.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

from transformers.trainer_callback import PrinterCallback, ProgressCallback

from ..files import append_line

#: the file in ``output_dir`` that holds every logged metrics dict, one JSON object a line
METRICS_FILE = "metrics.jsonl"


def _number(logs: Mapping[str, Any], key: str) -> float | None:
    value = logs.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


def iteration_line(logs: Mapping[str, Any], step: int, max_steps: int) -> str | None:
    """One line of an iteration's logged metrics: training success (and score, where the world scores
    episodes), mean episode reward, invalid-action rate, episode length, loss, KL, the episodes whose environment
    failed (where there were any: ``env_errors="skip"``), credit and rollout time;
    None for a logs dict that is no training iteration's (an evaluation, the end-of-training summary)."""
    success = _number(logs, "episode/success_rate")
    if success is None:
        return None
    parts = [f"success {100 * success:.1f}%"]
    for key, text in (("episode/score", "score {:.1f}"), ("episode/return", "reward {:.3f}"),
                      ("episode/invalid_action_rate", "invalid {:.1%}"), ("episode/episode_length", "length {:.1f}"),
                      ("loss", "loss {:.4g}"), ("kl", "kl {:.3g}")):
        value = _number(logs, key)
        if value is not None:
            parts.append(text.format(value))
    failed = _number(logs, "episode/env_errors")
    if failed:  # only with env_errors="skip" (else the run stopped at the first): the episodes whose environment failed
        parts.append(f"env errors {failed:g}")
    credit, rollout = _number(logs, "time/credit_s"), _number(logs, "time/rollout_s")
    if credit is not None:
        parts.append(f"credit {1e3 * credit:.1f} ms")
    if rollout is not None:
        parts.append(f"rollout {rollout:.2f} s")
    return f"iteration {step}/{max_steps}: " + ", ".join(parts)


def sft_line(logs: Mapping[str, Any], step: int, max_steps: int) -> str | None:
    """One line of a warm-start (SFTTrainer) log: loss, token accuracy, learning rate; None for the end-of-training
    summary."""
    loss = _number(logs, "loss")
    if loss is None:
        return None
    parts = [f"loss {loss:.4g}"]
    for key, text in (("mean_token_accuracy", "token accuracy {:.1%}"), ("learning_rate", "lr {:.2g}"),
                      ("epoch", "epoch {:.2f}")):
        value = _number(logs, key)
        if value is not None:
            parts.append(text.format(value))
    return f"SFT step {step}/{max_steps}: " + ", ".join(parts)


def _jsonable(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    try:
        return float(value)  # a 0-d tensor or numpy scalar
    except (TypeError, ValueError):
        return str(value)


class IterationConsole(ProgressCallback):
    """The progress bar (none under ``disable_tqdm``), one ``line`` (:func:`iteration_line`; the warm start's:
    :func:`sft_line`) per logged step, and every logs dict appended to ``log_file`` as JSON (NaN as null) with
    its ``phase`` and the step it was logged at.

    log_file: the JSON-lines file (None: none written); appended to, each line whole or not at all
    (:func:`milegpo.files.append_line`; :func:`milegpo.job.run_train` starts in a folder without an earlier run's
    log, or one cut back to the checkpoint it resumes from)."""

    def __init__(self, log_file: str | Path | None, show_bar: bool = True, line=iteration_line, phase: str = "rl"):
        super().__init__()
        self.log_file = Path(log_file) if log_file is not None else None
        self.show_bar = show_bar
        self.line = line
        self.phase = phase
        self.max_steps = 0

    def on_train_begin(self, args, state, control, **kwargs):
        self.max_steps = state.max_steps
        self.current_step = 0
        if self.show_bar:
            super().on_train_begin(args, state, control, **kwargs)

    def on_step_end(self, args, state, control, **kwargs):
        if self.training_bar is not None:
            super().on_step_end(args, state, control, **kwargs)

    def on_train_end(self, args, state, control, **kwargs):
        if self.training_bar is not None:
            super().on_train_end(args, state, control, **kwargs)

    def close_bar(self) -> None:
        """Close the progress bar if it is still open (a run that stopped on an error): what is printed next starts
        a line of its own."""
        if getattr(self, "training_bar", None) is not None:
            self.training_bar.close()
            self.training_bar = None

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        if self.log_file is not None:
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
            row = {"phase": self.phase, "step": state.global_step, **{k: _jsonable(v) for k, v in logs.items()}}
            append_line(self.log_file, json.dumps(row))  # the line whole or absent
        line = self.line(logs, state.global_step, self.max_steps or state.max_steps)
        if line is None:
            return
        if self.training_bar is not None:
            self.training_bar.write(line)
        else:
            print(line, flush=True)


def use_iteration_console(trainer, log_file: str | Path | None, line=iteration_line,
                          phase: str = "rl") -> IterationConsole:
    """Put an :class:`IterationConsole` in place of ``trainer``'s ``ProgressCallback`` / ``PrinterCallback``."""
    for cls in (ProgressCallback, PrinterCallback):
        trainer.remove_callback(cls)
    console = IterationConsole(log_file, show_bar=not trainer.args.disable_tqdm, line=line, phase=phase)
    trainer.add_callback(console)
    return console


__all__ = ["IterationConsole", "iteration_line", "sft_line", "use_iteration_console", "METRICS_FILE"]
