"""The job behind ``milegpo train`` / ``milegpo eval``: warm start, evaluate, train, evaluate, report.

Pipeline of :func:`run_train`:

1. the policy (:func:`~milegpo.job.policy.load_policy`): ``--model_name_or_path`` (any causal LM with a chat
   template), or, when it is not given, the embedded default: a WordLevel tokenizer and a tiny Qwen2 built
   on the spot;
2. a supervised warm start with TRL's ``SFTTrainer`` on expert walkthroughs of training tasks
   (:func:`~milegpo.job.policy.warm_start`; ``--sft_epochs 0`` skips it and writes nothing), saved to
   ``<output_dir>/sft``;
3. evaluation on ``eval_splits`` (household: ID and OOD; WebShop: test): success, invalid-action rate, the gap
   between the first two splits, and WebShop's score;
4. MileGPO iterations (:class:`~milegpo.trainer.MileGPOTrainer`); every iteration's StepBatch is saved
   to ``<output_dir>/batches/iter_NNNN.npz`` (``milegpo replay`` reads them back); one line per iteration
   on the console, every logged metric in ``<output_dir>/metrics.jsonl`` (:mod:`milegpo.job.console`);
5. evaluation again, ``summary.json``, the plots (PNG) under ``<output_dir>/plots`` and a printed summary
   (:mod:`milegpo.job.report`).

The output folder belongs to this run (:func:`milegpo.job.rundir.claim_output_dir`): a folder holding an earlier
run is refused unless the run resumes from one of its checkpoints (the log and batches are cut back to the
checkpoint's step; the warm start is not run again, its policy is ``<output_dir>/sft``) or
``--overwrite_output_dir`` says to replace it, and a second live run on it is refused.

The flags are :func:`milegpo.job.flags.parse`'s.
"""

from __future__ import annotations

import contextlib
import json
import time
import warnings
from pathlib import Path
from typing import Any

from ..credit import get_method
from ..files import write_text
from ..usage import UsageError
from ..trainer.saved_policy import recorded_task_settings
from .arguments import TASK_SETTINGS, JobArguments
from .console import METRICS_FILE, use_iteration_console
from .policy import load_policy, reload_tokenizer, warm_start
from .rundir import claim_output_dir, logged_evaluation_before
from .report import eval_line, eval_summary, eval_tasks_text, format_eval, format_summary, time_split, \
    training_ends, training_history, write_plots, write_summary


def _batch_saver(directory: Path | None):
    """A TrainerCallback that saves every iteration's StepBatch and keeps per-iteration credit diagnostics.

    Under several processes each holds only its own rows (the trainer computes credit per process); on
    the iterations it saves, every process calls ``trainer.gather_iteration_batch()`` (a collective) and
    process 0 writes the whole batch; the diagnostics are the trainer's, merged over processes."""
    from transformers import TrainerCallback

    class BatchSaver(TrainerCallback):
        def __init__(self):
            self.trainer = None
            self.seen = None
            self.files: list[str] = []
            self.diagnostics: list[dict] = []

        def on_step_end(self, args, state, control, **kwargs):
            it = getattr(self.trainer, "last_iteration", None)
            if it is None or it is self.seen:
                return
            self.seen = it
            d = {k: v for k, v in it["diagnostics"].items() if isinstance(v, (int, float))}
            d["iteration"] = state.global_step
            self.diagnostics.append(d)
            if directory is None:
                return
            batch = self.trainer.gather_iteration_batch()  # every process: a collective
            if state.is_world_process_zero:
                directory.mkdir(parents=True, exist_ok=True)
                path = directory / f"iter_{state.global_step:04d}.npz"
                batch.save(path)  # whole or absent (a temporary file renamed over it)
                self.files.append(str(path))

    return BatchSaver()


def _saved_batches(directory: Path, saved_now: list[str]) -> list[str]:
    """Every iteration's saved StepBatch of the run, in order: this session's and, for a resumed run, those saved
    before the checkpoint."""
    files = {str(directory / p.name) for p in directory.glob("iter_*.npz")} if directory.is_dir() else set()
    return sorted(files | set(saved_now))


def make_trainer(policy, tok, cfg, callbacks=()):
    """A :class:`~milegpo.trainer.MileGPOTrainer` of ``policy``: the folder it is saved in, or the model itself."""
    from ..trainer import MileGPOTrainer

    return MileGPOTrainer(policy, args=cfg, processing_class=tok, callbacks=list(callbacks))


#: transformers' FutureWarnings for its deprecated aliases that TRL itself calls around every generation
#: (trl/models/utils.py: ``unwrap_model_for_generation`` / ``disable_gradient_checkpointing`` read
#: ``is_gradient_checkpointing`` and, when checkpointing is on, call ``gradient_checkpointing_disable`` /
#: ``_enable``): the newest TRL (1.16) on every transformers since the rename (5.2x) warns mid-run, and nothing a
#: user of ``milegpo train`` sets changes it (milegpo's own code and config use ``activation_checkpointing``).
TRL_DEPRECATION_WARNINGS = (r"`is_gradient_checkpointing` is deprecated",
                            r"`gradient_checkpointing_enable` is deprecated",
                            r"`gradient_checkpointing_disable` is deprecated")


@contextlib.contextmanager
def _quiet_trl_deprecations():
    """Inside the block, exactly :data:`TRL_DEPRECATION_WARNINGS` are not shown (every other warning is)."""
    with warnings.catch_warnings():
        for message in TRL_DEPRECATION_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=FutureWarning)
        yield


def _set_threads(job: JobArguments) -> None:
    """torch's CPU threads as ``--threads`` says (0: torch's default)."""
    import torch

    if job.threads:
        torch.set_num_threads(job.threads)


def run_train(job: JobArguments, cfg, quiet: bool = False) -> dict[str, Any]:
    """The whole job; returns the summary (also written to ``<output_dir>/summary.json``). The output folder is
    claimed first (:func:`~milegpo.job.rundir.claim_output_dir`: a one-line UsageError when it holds an earlier
    run or a live one) and held until the job ends."""
    _set_threads(job)
    t_start = time.perf_counter()
    out = Path(cfg.output_dir)
    try:
        lock = claim_output_dir(out, cfg.resume_from_checkpoint, overwrite=job.overwrite_output_dir)
    except UsageError as e:
        raise UsageError(f"milegpo train: error: {e}") from None
    try:
        with _quiet_trl_deprecations():
            return _train(job, cfg, out, t_start, quiet)
    finally:
        lock.release()


#: the flags of a short run (:func:`short_run_line`): each is named where the run's own value is larger
SHORT_RUN: dict[str, int] = dict(max_steps=5, groups_per_iteration=2, group_size=4, horizon=10, num_eval_tasks=8,
                                 max_completion_length=32)


def short_run_line(job: JobArguments, cfg) -> str | None:
    """The console line that sizes a run on a CPU (or of the embedded tiny policy) and names the flags of a short one
    (:data:`SHORT_RUN`, those below the run's own values); None on an accelerator with a model of the user's, or when
    the run is that short already. A model's defaults (horizon 50, 16 x 8 episodes, 48 evaluation tasks, 512
    tokens a step) take hours on a CPU."""
    import torch

    cpu = bool(cfg.use_cpu) or not torch.cuda.is_available()
    if job.model_name_or_path and not cpu:
        return None
    shorter = {name: value for name, value in SHORT_RUN.items()
               if isinstance(getattr(cfg, name), int) and getattr(cfg, name) > value}
    if not shorter:
        return None
    tokens = cfg.max_completion_length if cfg.max_completion_length is not None else "any number of"
    where = "on a CPU" if cpu else "with the tiny policy"
    return (f"[milegpo] {where}: {cfg.max_steps} iterations of {cfg.groups_per_iteration} x {cfg.group_size} episodes "
            f"of up to {cfg.horizon} steps, {tokens} tokens a step, {cfg.num_eval_tasks} evaluation tasks a split; a "
            f"short run to try things: " + " ".join(f"--{name} {value}" for name, value in shorter.items()))


def _warm_start_line(job: JobArguments, cfg) -> str:
    from ..envs import env_class

    if job.sft_epochs > 0:
        return (f"[milegpo] SFT warm start: {job.sft_epochs:g} epochs on expert walkthroughs of {job.sft_tasks} "
                "tasks")
    if not env_class(cfg.env).experts:
        return (f"[milegpo] no SFT warm start: the {cfg.env} world has no expert to imitate (TextEnv.experts); RL "
                "starts from the policy as it is")
    return "[milegpo] no SFT warm start (--sft_epochs 0): RL starts from the policy as it is"


def _train(job: JobArguments, cfg, out: Path, t_start: float, quiet: bool) -> dict[str, Any]:
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))

    say(f"[milegpo] policy: {job.model_name_or_path or 'tiny Qwen2 built on the spot'}; env {cfg.env}"
        f"{' / ' + cfg.task_type if cfg.task_type else ''}, horizon {cfg.horizon}; credit "
        f"{get_method(cfg.credit_method).display_name(cfg.credit_variant)}"
        f"{'; actions constrained to the admissible ones' if cfg.constrain_actions else ''}"
        f"{', each drawn whole' if cfg.constrained_sampling == 'sequence' else ''}"
        f"{', queries to the goal words' if cfg.constrain_query else ''}")
    short = short_run_line(job, cfg)
    if short:
        say(short)
    # without a warm start nothing is written before RL (a failed run leaves no sft/ to block the next one): the
    # policy goes to the trainer as loaded, in memory (its reference model a copy of it)
    resumed = bool(cfg.resume_from_checkpoint) and (job.sft_epochs == 0 or (out / "sft" / "config.json").is_file())
    if resumed:  # the warm start of the run it resumes: its policy is also the reference model's
        say(f"[milegpo] resuming from {cfg.resume_from_checkpoint}: the "
            f"{'warm-started policy of ' + str(out / 'sft') if job.sft_epochs > 0 else 'policy as loaded'}, the "
            "log and batches cut back to the checkpoint's step")
        sft_info = {"sft_epochs": job.sft_epochs, "resumed_from": str(cfg.resume_from_checkpoint)}
    if job.sft_epochs == 0:
        if not resumed:
            say(_warm_start_line(job, cfg))
            sft_info = {"sft_epochs": job.sft_epochs}
        policy, tok, _ = load_policy(job, cfg)
    elif resumed:
        policy = str(out / "sft")
        tok = reload_tokenizer(policy)
    else:
        model, tok, _ = load_policy(job, cfg)
        say(_warm_start_line(job, cfg))
        policy, sft_info = warm_start(job, cfg, model, tok, out / "sft", quiet=quiet, log_file=out / METRICS_FILE)
        del model
        tok = reload_tokenizer(policy)

    saver = _batch_saver(out / "batches" if job.save_batches else None)
    trainer = make_trainer(policy, tok, cfg, callbacks=[saver])
    console = None
    try:  # the trainer's environment workers stop at the end, whatever happens
        saver.trainer = trainer
        console = use_iteration_console(trainer, out / METRICS_FILE)
        splits = list(trainer.eval_tasks)
        before = {}
        logged_before = logged_evaluation_before(out) if resumed else None
        if logged_before is not None:  # evaluated before the run it resumes: reported, not logged again
            before = eval_summary(logged_before, splits)
            say("[milegpo] before RL (logged by the run it resumes): " + eval_line(before, splits))
        elif job.eval_before and splits and not resumed:
            which = "warm-started policy" if "sft_examples" in sft_info else "policy"
            say(f"[milegpo] evaluating the {which} on {eval_tasks_text(trainer.eval_tasks, cfg.num_eval_tasks)}")
            before = eval_summary(trainer.evaluate(metric_key_prefix="eval"), splits)
            say("[milegpo] before RL: " + eval_line(before, splits))
        say(f"[milegpo] training: {cfg.max_steps} iterations of {cfg.groups_per_iteration} groups x {cfg.group_size} "
            f"episodes (every logged metric: {out / METRICS_FILE})")
        t0 = time.perf_counter()
        trainer.train(resume_from_checkpoint=cfg.resume_from_checkpoint)
        train_s = time.perf_counter() - t0
        after = eval_summary(trainer.evaluate(), splits) if splits else {}
    finally:
        if console is not None:  # a run stopped by an error: its line is not printed after the bar's
            console.close_bar()
        trainer.close()
    if after:
        say("[milegpo] after RL: " + eval_line(after, splits))
    trainer.save_model(str(out / "final"))
    tok.save_pretrained(str(out / "final"))
    write_text(out / "final" / TASK_SETTINGS, json.dumps(recorded_task_settings(cfg), indent=1))

    history = training_history(trainer.state.log_history)
    summary: dict[str, Any] = {
        "policy": job.model_name_or_path or "tiny", "env": cfg.env, "task_type": cfg.task_type,
        "credit_method": cfg.credit_method, "credit_variant": cfg.credit_variant, "iterations": cfg.max_steps,
        "groups_per_iteration": cfg.groups_per_iteration, "group_size": cfg.group_size, "horizon": cfg.horizon,
        "constrain_actions": cfg.constrain_actions, "constrain_query": cfg.constrain_query,
        "constrained_sampling": cfg.constrained_sampling, "splits": splits,
        "before": before, "after": after, **sft_info,
        "train_s": train_s,
        **training_ends(history),
        "history": history, "time_per_iteration": time_split(history), "diagnostics": saver.diagnostics,
        "batches": _saved_batches(out / "batches", saver.files), "output_dir": str(out),
    }
    if job.plots:
        summary["plots"] = [str(p) for p in write_plots(out / "plots", history, saver.diagnostics, before, after,
                                                        splits, summary["batches"], cfg)]
    summary["total_s"] = time.perf_counter() - t_start
    write_summary(summary, out / "summary.json")
    if not quiet:
        print(format_summary(summary))
    return summary


def run_eval(job: JobArguments, cfg) -> dict[str, float]:
    """Evaluate a policy (``--model_name_or_path``, e.g. ``<output_dir>/final``) on ``cfg.eval_splits``.

    A policy saved by ``milegpo train`` has :data:`~milegpo.job.arguments.TASK_SETTINGS` beside it: its
    environment, task type, horizon, env options and prompt style are then the defaults (flags given still win)."""
    if not job.model_name_or_path:
        raise UsageError("milegpo eval: error: give --model_name_or_path (e.g. milegpo_run/final): the policy to "
                         "evaluate")
    _set_threads(job)
    tok = reload_tokenizer(job.model_name_or_path)
    trainer = make_trainer(job.model_name_or_path, tok, cfg)
    try:
        with _quiet_trl_deprecations():
            res = eval_summary(trainer.evaluate(), list(trainer.eval_tasks))
    finally:
        trainer.close()
    print(format_eval(res, trainer.eval_tasks))
    return res


__all__ = ["run_train", "run_eval", "make_trainer", "short_run_line", "SHORT_RUN"]
