"""The main job behind ``milegpo train`` / ``milegpo eval``: warm start, evaluate, train, evaluate, plot.

Pipeline of :func:`run_train`:

1. the policy: ``--model_name_or_path`` (any causal LM with a chat template), or, when it is not given,
   the embedded default: a WordLevel tokenizer and a tiny Qwen2 built on the spot (:mod:`milegpo.tiny`);
2. a supervised warm start with TRL's ``SFTTrainer`` on expert walkthroughs of training tasks
   (``--sft_epochs 0`` skips it), saved to ``<output_dir>/sft``;
3. evaluation on the ID and OOD splits (success, invalid-action rate, the gap);
4. MileGPO iterations (:class:`~milegpo.trainer.MileGPOTrainer`); every iteration's StepBatch is saved
   to ``<output_dir>/batches/iter_NNNN.npz`` (``milegpo replay`` reads them back);
5. evaluation again, ``summary.json``, the plots (PNG) under ``<output_dir>/plots`` and a printed summary.

Every MileGPOConfig / GRPOConfig field is a flag. Without ``--model_name_or_path`` the defaults change to
:data:`TINY_DEFAULTS` (a CPU-sized run of a few minutes); flags given on the command line still win.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

#: defaults of the embedded run (no --model_name_or_path): the household world's shortest task type in rooms
#: of 4 receptacles, the compact prompt, a tiny Qwen2 (hidden 128) warm-started for 24 epochs, 4 groups x 4
#: episodes per iteration; sized to finish in a few minutes on 2 CPU cores (notes/main_job.md: why each).
TINY_DEFAULTS: dict[str, Any] = dict(
    env_options={"max_receptacles": 4}, prompt_style="compact", tiny_hidden=128, sft_epochs=24.0,
    sft_learning_rate=3e-3,
    output_dir="milegpo_run", task_type="look_at_obj_in_light", horizon=8, num_train_tasks=64,
    groups_per_iteration=4, group_size=4, max_steps=50, learning_rate=3e-4, max_completion_length=16,
    per_device_train_batch_size=64, num_eval_tasks=48, eval_group_size=1, temperature=1.0, beta=0.01,
    logging_steps=1, save_strategy="no", report_to="none", bf16=False, seed=0, dataloader_num_workers=0,
    gradient_checkpointing=False,
)


@dataclass
class JobArguments:
    """Arguments of the job around the trainer (the trainer's own are MileGPOConfig's)."""

    model_name_or_path: str | None = field(default=None, metadata={
        "help": "Policy model (hub id or path). Not given: a tiny Qwen2 and tokenizer built on the spot."})
    sft_epochs: float = field(default=3.0, metadata={"help": "Epochs of the SFT warm start (0: none)."})
    sft_tasks: int = field(default=64, metadata={"help": "Training tasks whose expert walkthroughs the warm "
                                                         "start learns (seeds after the RL training tasks)."})
    sft_learning_rate: float = field(default=5e-3, metadata={"help": "Learning rate of the warm start "
                                                                     "(tiny model: 5e-3; real models: ~1e-5)."})
    sft_batch_size: int = field(default=16, metadata={"help": "Examples per SFT step."})
    sft_explore: float = field(default=0.2, metadata={"help": "Share of random actions while recording the "
                                                              "walkthroughs (labels stay the expert's)."})
    sft_expert: str = field(default="search", metadata={
        "help": "Whose walkthroughs: 'search' (acts on what it has seen) or 'oracle' (knows every object's place)."})
    tiny_hidden: int = field(default=64, metadata={"help": "Hidden size of the tiny model."})
    tiny_layers: int = field(default=2, metadata={"help": "Layers of the tiny model."})
    eval_before: bool = field(default=True, metadata={"help": "Evaluate the warm-started policy before RL."})
    save_batches: bool = field(default=True, metadata={"help": "Save every iteration's StepBatch (.npz)."})
    plots: bool = field(default=True, metadata={"help": "Write the PNG plots."})
    threads: int = field(default=0, metadata={"help": "torch CPU threads (0: leave torch's default)."})


#: the file beside a saved policy that records the games and prompt it was trained with (`milegpo eval` and
#: `milegpo train --model_name_or_path` of that policy take them as defaults)
TASK_SETTINGS = "milegpo_task.json"
_TASK_FIELDS = ("env", "task_type", "horizon", "env_options", "prompt_style", "history_length",
                "max_completion_length")


def _flag_value(argv: Sequence[str], flag: str) -> str | None:
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def build_parser(prog: str = "milegpo train"):
    from trl import TrlParser

    from .config import MileGPOConfig

    return TrlParser((JobArguments, MileGPOConfig), prog=prog)


def parse(argv: Sequence[str] | None = None, prog: str = "milegpo train"):
    """(JobArguments, MileGPOConfig) from command-line flags (``--config file.yaml`` works too)."""
    import torch

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(prog)
    defaults: dict[str, Any] = {}
    model_path = _flag_value(argv, "--model_name_or_path")
    if model_path is None:
        defaults.update(TINY_DEFAULTS)
    elif (Path(model_path) / TASK_SETTINGS).is_file():
        # a policy saved by `milegpo train` plays (and goes on training on) the games it was trained on
        defaults.update(json.loads((Path(model_path) / TASK_SETTINGS).read_text()))
    if not torch.cuda.is_available():  # GRPOConfig defaults to bf16 on an accelerator
        defaults.update(use_cpu=True, bf16=False)
    parser.set_defaults(**defaults)
    job, cfg = parser.parse_args_and_config(args=argv)
    return job, cfg


# ---------------------------------------------------------------------------------------------- policy
def load_policy(job: JobArguments, cfg) -> tuple[Any, Any, bool]:
    """(model, tokenizer, tiny?): the given model, or a tiny Qwen2 + tokenizer built on the spot."""
    if job.model_name_or_path:
        from transformers import AutoModelForCausalLM

        tok = reload_tokenizer(job.model_name_or_path)  # a saved tiny policy's tokenizer too
        model = AutoModelForCausalLM.from_pretrained(job.model_name_or_path, **(cfg.model_init_kwargs or {}))
        return model, tok, False
    from .tiny import make_model, make_tokenizer

    household_options = (cfg.env_options or {}) if cfg.env == "household" else {}
    tok = make_tokenizer(max_receptacles=int(household_options.get("max_receptacles", 0)))
    return make_model(tok, hidden=job.tiny_hidden, layers=job.tiny_layers, seed=cfg.seed), tok, True


def sft_tasks(job: JobArguments, cfg):
    """Warm-start tasks: training-split seeds after the RL training tasks (disjoint from them and from ID/OOD)."""
    from .rollout import make_tasks

    return make_tasks(cfg.env, cfg.train_split, job.sft_tasks, cfg.task_type, cfg.horizon, start=cfg.num_train_tasks,
                      options=cfg.env_options)


def warm_start(job: JobArguments, cfg, model, tok, out_dir: Path, quiet: bool = False):
    """SFT warm start (TRL SFTTrainer) if ``job.sft_epochs > 0``; the policy is saved to ``out_dir``."""
    from .tiny import sft_warm_start

    info: dict[str, Any] = {"sft_epochs": job.sft_epochs}
    if job.sft_epochs > 0:
        t0 = time.perf_counter()
        model, loss, n = sft_warm_start(model, tok, sft_tasks(job, cfg), str(out_dir / "sft_trainer"),
                                        epochs=job.sft_epochs, batch_size=job.sft_batch_size,
                                        learning_rate=job.sft_learning_rate, history_length=cfg.history_length,
                                        explore=job.sft_explore, seed=cfg.seed, use_cpu=cfg.use_cpu,
                                        expert=job.sft_expert, prompt_style=cfg.prompt_style,
                                        disable_tqdm=quiet or cfg.disable_tqdm)
        info.update(sft_examples=n, sft_loss=loss, sft_s=time.perf_counter() - t0)
    # GRPOTrainer loads its reference model from the policy's path: the warm-started policy lives on disk
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return str(out_dir), info


def reload_tokenizer(path: str):
    """The tokenizer saved at ``path``, loaded faithfully.

    Two transformers 5.24 pitfalls with a tokenizer built from a ``tokenizers.Tokenizer`` (the tiny one):
    ``AutoTokenizer.from_pretrained`` of it (``tokenizer_class: TokenizersBackend``) re-tokenizes text into
    single characters (the policy would see other prompts than in the warm start), and the in-memory object
    drops ``add_tokens`` tokens (``<action>``...) in ``batch_decode(skip_special_tokens=True)`` (the rollout's
    decode). ``PreTrainedTokenizerFast.from_pretrained`` reads ``tokenizer.json`` as it is and has neither."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    cls = AutoTokenizer
    config = Path(path) / "tokenizer_config.json"
    if config.exists() and json.loads(config.read_text()).get("tokenizer_class") in ("TokenizersBackend",
                                                                                    "PreTrainedTokenizerFast"):
        cls = PreTrainedTokenizerFast
    tok = cls.from_pretrained(path, padding_side="left")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


# ---------------------------------------------------------------------------------------------- training
def _batch_saver(directory: Path | None):
    """A TrainerCallback that saves every iteration's StepBatch and keeps per-iteration credit diagnostics."""
    from transformers import TrainerCallback

    from .credit import diagnostics

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
            d = {k: v for k, v in diagnostics(it["result"]).items() if isinstance(v, (int, float))}
            d["iteration"] = state.global_step
            self.diagnostics.append(d)
            if directory is not None and state.is_world_process_zero:
                directory.mkdir(parents=True, exist_ok=True)
                path = directory / f"iter_{state.global_step:04d}.npz"
                it["batch"].save(path)
                self.files.append(str(path))

    return BatchSaver()


def make_trainer(policy_path: str, tok, cfg, callbacks=()):
    from .trainer import MileGPOTrainer

    return MileGPOTrainer(policy_path, cfg, processing_class=tok, callbacks=list(callbacks))


def eval_summary(metrics: dict[str, float], splits: Sequence[str]) -> dict[str, float]:
    out = {}
    for s in splits:
        for k in ("success_rate", "invalid_action_rate", "episode_length"):
            if f"eval_{s}_{k}" in metrics:
                out[f"{s}_{k}"] = float(metrics[f"eval_{s}_{k}"])
    if len(splits) >= 2:
        out["gap"] = float(metrics.get(f"eval_{splits[0]}_minus_{splits[1]}", float("nan")))
    return out


def training_history(log_history: list[dict]) -> list[dict]:
    """Per-iteration rows for :func:`milegpo.plots.plot_training` from the trainer's log history."""
    rows = []
    for h in log_history:
        if "episode/success_rate" not in h:
            continue
        rows.append({"iteration": h.get("step"), "success_rate": h["episode/success_rate"],
                     "invalid_rate": h.get("episode/invalid_action_rate"),
                     "episode_length": h.get("episode/episode_length"), "loss": h.get("loss"),
                     "rows": h.get("rows/iteration"), "adv_abs_mean": h.get("advantages/abs_mean"),
                     **{f"{k}_s": h.get(f"time/{k}_s") for k in ("rollout", "generate", "env", "credit")}})
    return rows


def time_split(history: list[dict]) -> dict[str, float] | None:
    """Median seconds per iteration of the rollout (generation, environments) and of the credit
    estimate, over the iterations that logged them; None if none did."""
    import statistics

    out = {}
    for k in ("rollout", "generate", "env", "credit"):
        xs = [h[f"{k}_s"] for h in history if h.get(f"{k}_s") is not None]
        if not xs:
            return None
        out[k] = statistics.median(xs)
    return out


def run_train(job: JobArguments, cfg, quiet: bool = False) -> dict[str, Any]:
    """The whole job; returns the summary (also written to ``<output_dir>/summary.json``)."""
    import torch

    if job.threads:
        torch.set_num_threads(job.threads)
    t_start = time.perf_counter()
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))

    say(f"[milegpo] policy: {job.model_name_or_path or 'tiny Qwen2 built on the spot'}; env {cfg.env}"
        f"{' / ' + cfg.task_type if cfg.task_type else ''}, horizon {cfg.horizon}; credit {cfg.credit_method}"
        f"{'/' + cfg.credit_variant if cfg.credit_method == 'milegpo' else ''}")
    model, tok, tiny = load_policy(job, cfg)
    say(f"[milegpo] SFT warm start: {job.sft_epochs:g} epochs on expert walkthroughs of {job.sft_tasks} tasks")
    policy_path, sft_info = warm_start(job, cfg, model, tok, out / "sft", quiet=quiet)
    del model
    tok = reload_tokenizer(policy_path)

    saver = _batch_saver(out / "batches" if job.save_batches else None)
    trainer = make_trainer(policy_path, tok, cfg, callbacks=[saver])
    saver.trainer = trainer
    splits = list(trainer.eval_tasks)
    before = {}
    if job.eval_before and splits:
        say(f"[milegpo] evaluating the warm-started policy on {', '.join(f'{s} ({len(v)} tasks)' for s, v in trainer.eval_tasks.items())}")
        before = eval_summary(trainer.evaluate(metric_key_prefix="eval"), splits)
        say("[milegpo] before RL: " + _eval_line(before, splits))
    say(f"[milegpo] training: {cfg.max_steps} iterations of {cfg.groups_per_iteration} groups x {cfg.group_size} "
        f"episodes")
    t0 = time.perf_counter()
    trainer.train(resume_from_checkpoint=cfg.resume_from_checkpoint)
    train_s = time.perf_counter() - t0
    after = eval_summary(trainer.evaluate(), splits) if splits else {}
    if after:
        say("[milegpo] after RL: " + _eval_line(after, splits))
    trainer.save_model(str(out / "final"))
    tok.save_pretrained(str(out / "final"))
    (out / "final" / TASK_SETTINGS).write_text(json.dumps({k: getattr(cfg, k) for k in _TASK_FIELDS}, indent=1))

    history = training_history(trainer.state.log_history)
    summary: dict[str, Any] = {
        "policy": job.model_name_or_path or "tiny", "env": cfg.env, "task_type": cfg.task_type,
        "credit_method": cfg.credit_method, "credit_variant": cfg.credit_variant, "iterations": cfg.max_steps,
        "groups_per_iteration": cfg.groups_per_iteration, "group_size": cfg.group_size, "horizon": cfg.horizon,
        "splits": splits, "before": before, "after": after, **sft_info, "train_s": train_s,
        "train_success_first": history[0]["success_rate"] if history else float("nan"),
        "train_success_last": history[-1]["success_rate"] if history else float("nan"),
        "history": history, "time_per_iteration": time_split(history), "diagnostics": saver.diagnostics,
        "batches": saver.files, "output_dir": str(out),
    }
    if job.plots:
        summary["plots"] = [str(p) for p in write_plots(out / "plots", history, saver.diagnostics, before, after,
                                                        splits, saver.files, cfg)]
    summary["total_s"] = time.perf_counter() - t_start
    with open(out / "summary.json", "w") as f:
        json.dump(_jsonable(summary), f, indent=1)
    if not quiet:
        print(format_summary(summary))
    return summary


def write_plots(directory: Path, history, diags, before, after, splits, batch_files, cfg) -> list[Path]:
    """training.png, credit_diagnostics.png, advantages_by_method.png (last saved iteration)."""
    from .plots import plot_credit_diagnostics, plot_training

    rows = [dict(h) for h in history]
    if len(splits) >= 2:
        a, b = splits[0], splits[1]
        if before:
            rows.insert(0, {"iteration": 0, f"eval_{a}_success": before.get(f"{a}_success_rate"),
                            f"eval_{b}_success": before.get(f"{b}_success_rate"),
                            "eval_id_success": before.get(f"{a}_success_rate"),
                            "eval_ood_success": before.get(f"{b}_success_rate")})
        if after and rows:
            last = rows[-1]
            last["eval_id_success"] = after.get(f"{a}_success_rate")
            last["eval_ood_success"] = after.get(f"{b}_success_rate")
    paths = [plot_training(rows, directory / "training.png",
                           title=f"{cfg.credit_method} training: {cfg.groups_per_iteration} groups x {cfg.group_size}"
                                 f" episodes per iteration (eval {' / '.join(splits[:2])} at start and end)")]
    if diags:
        paths.append(plot_credit_diagnostics(diags, directory / "credit_diagnostics.png"))
    if batch_files:
        paths.append(advantages_plot(batch_files[-1], directory / "advantages_by_method.png", cfg))
    return paths


def advantages_plot(batch_file: str, path: Path, cfg):
    """Advantage histograms of every method (and the MileGPO ablations) on one saved StepBatch."""
    from .credit import StepBatch, estimate
    from .plots import plot_advantages

    batch = StepBatch.load(batch_file)
    ccfg = cfg.credit_config()
    results = {m: estimate(batch, m, ccfg, backend=cfg.credit_backend) for m in ("grpo", "gigpo", "graphgpo")}
    for v in ("md", "rcs", "full"):
        results[f"milegpo-{v}"] = estimate(batch, "milegpo", ccfg, variant=v, backend=cfg.credit_backend)
    return plot_advantages(results, path, title=f"advantages by method on {Path(batch_file).name} "
                                                f"({len(batch)} steps)")


def _eval_line(d: dict, splits) -> str:
    parts = [f"{s} success {_pct(d.get(s + '_success_rate')).strip()} (invalid actions "
             f"{_pct(d.get(s + '_invalid_action_rate')).strip()})" for s in splits]
    if "gap" in d and not math.isnan(d["gap"]):
        parts.append(f"gap {100 * d['gap']:+.1f} points")
    return ", ".join(parts)


def _pct(x) -> str:
    return "  n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:5.1f}%"


def format_summary(s: dict[str, Any]) -> str:
    lines = ["", "=" * 72, "MileGPO run summary", "=" * 72,
             f"policy {s['policy']}; env {s['env']}{' / ' + s['task_type'] if s['task_type'] else ''}; credit "
             f"{s['credit_method']}{'/' + s['credit_variant'] if s['credit_method'] == 'milegpo' else ''}; "
             f"{s['iterations']} iterations of {s['groups_per_iteration']} x {s['group_size']} episodes, horizon "
             f"{s['horizon']}"]
    if "sft_examples" in s:
        lines.append(f"SFT warm start: {s['sft_examples']} expert steps, {s['sft_epochs']:g} epochs, final loss "
                     f"{s['sft_loss']:.3f} ({s['sft_s']:.0f} s)")
    splits = s["splits"]
    if splits:
        lines.append(f"{'':<22}" + "".join(f"{sp + ' success':>14}" for sp in splits)
                     + "".join(f"{sp + ' invalid':>14}" for sp in splits) + (f"{'gap':>11}" if len(splits) > 1 else ""))
        for name, d in (("before RL (after SFT)", s["before"]), ("after RL", s["after"])):
            if not d:
                continue
            gap = f"{100 * d['gap']:>+7.1f} pts" if "gap" in d and not math.isnan(d["gap"]) else ""
            lines.append(f"{name:<22}" + "".join(f"{_pct(d.get(sp + '_success_rate')):>14}" for sp in splits)
                         + "".join(f"{_pct(d.get(sp + '_invalid_action_rate')):>14}" for sp in splits) + gap)
    lines.append(f"train success: first iteration {_pct(s['train_success_first']).strip()}, last "
                 f"{_pct(s['train_success_last']).strip()}; training {s['train_s']:.0f} s, total {s['total_s']:.0f} s")
    t = s.get("time_per_iteration")
    if t:
        lines.append(f"per iteration (median): rollout {t['rollout']:.2f} s (generation {t['generate']:.2f} s, "
                     f"environments {t['env']:.2f} s), credit assignment {1e3 * t['credit']:.1f} ms "
                     f"({100 * t['credit'] / max(t['rollout'], 1e-9):.2f}% of the rollout)")
    if s.get("batches"):
        lines.append(f"StepBatches: {len(s['batches'])} files in {Path(s['batches'][0]).parent} "
                     f"(milegpo replay {Path(s['batches'][0]).parent})")
    for p in s.get("plots", []):
        lines.append(f"plot: {p}")
    lines.append(f"summary: {Path(s['output_dir']) / 'summary.json'}")
    return "\n".join(lines)


def _jsonable(x):
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and math.isnan(x):
        return None
    return x


# ---------------------------------------------------------------------------------------------- eval only
def run_eval(job: JobArguments, cfg) -> dict[str, float]:
    """Evaluate a policy (``--model_name_or_path``, e.g. ``<output_dir>/final``) on ``cfg.eval_splits``.

    A policy saved by ``milegpo train`` has :data:`TASK_SETTINGS` beside it: its environment, task type,
    horizon, env options and prompt style are then the defaults (flags given still win)."""
    if not job.model_name_or_path:
        raise SystemExit("milegpo eval: give --model_name_or_path (e.g. milegpo_run/final)")
    tok = reload_tokenizer(job.model_name_or_path)
    trainer = make_trainer(job.model_name_or_path, tok, cfg)
    splits = list(trainer.eval_tasks)
    res = eval_summary(trainer.evaluate(), splits)
    print(f"\n{'split':<8} {'tasks':>6} {'success':>9} {'invalid':>9} {'length':>7}")
    for s in splits:
        print(f"{s:<8} {len(trainer.eval_tasks[s]):>6} {_pct(res.get(s + '_success_rate')):>9} "
              f"{_pct(res.get(s + '_invalid_action_rate')):>9} {res.get(s + '_episode_length', float('nan')):>7.2f}")
    if "gap" in res:
        print(f"gap {splits[0]} - {splits[1]}: {100 * res['gap']:+.1f} points")
    return res


__all__ = ["JobArguments", "TINY_DEFAULTS", "parse", "run_train", "run_eval", "format_summary", "load_policy",
           "warm_start", "training_history", "eval_summary", "advantages_plot"]
