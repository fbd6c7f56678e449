"""What a run reports: evaluation and training summaries, the printed tables, ``summary.json`` and the plots.

- :func:`eval_summary` / :func:`training_history` / :func:`training_ends` / :func:`time_split`: the numbers,
  from the trainer's evaluation metrics and log history;
- :func:`format_summary` (the end-of-run summary), :func:`eval_line` (one progress line), :func:`eval_tasks_text`,
  :func:`format_eval` (``milegpo eval``'s table): the text;
- :func:`write_summary`: ``summary.json`` (NaN written as null);
- :func:`write_plots`: the run's PNG plots, drawn by :mod:`milegpo.job.plots` (:func:`advantages_plot`:
  every credit method on one saved StepBatch).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..credit import get_method


# ---------------------------------------------------------------------------------------------- numbers
def eval_summary(metrics: dict[str, float], splits: Sequence[str]) -> dict[str, float]:
    """``{split}_success_rate``, ``_invalid_action_rate``, ``_episode_length`` (and ``_score`` where the world
    scores episodes) per split, and the ``gap`` (first split minus second), out of the trainer's ``evaluate()``
    metrics."""
    out = {}
    for s in splits:
        for k in ("success_rate", "invalid_action_rate", "episode_length", "score"):
            if f"eval_{s}_{k}" in metrics:
                out[f"{s}_{k}"] = float(metrics[f"eval_{s}_{k}"])
    if len(splits) >= 2:
        out["gap"] = float(metrics.get(f"eval_{splits[0]}_minus_{splits[1]}", float("nan")))
    return out


def training_history(log_history: list[dict]) -> list[dict]:
    """Per-iteration rows for :func:`milegpo.job.plots.plot_training` from the trainer's log history
    (``score``: only where the world scores episodes)."""
    rows = []
    for h in log_history:
        if "episode/success_rate" not in h:
            continue
        rows.append({"iteration": h.get("step"), "success_rate": h["episode/success_rate"],
                     "invalid_rate": h.get("episode/invalid_action_rate"),
                     "episode_length": h.get("episode/episode_length"), "loss": h.get("loss"),
                     "rows": h.get("rows/iteration"), "adv_abs_mean": h.get("advantages/abs_mean"),
                     **{f"{k}_s": h.get(f"time/{k}_s") for k in ("rollout", "generate", "env", "credit")},
                     **({"score": h["episode/score"]} if "episode/score" in h else {})})
    return rows


def training_ends(history: list[dict], window: int = 10) -> dict[str, float]:
    """The training success (and score, where the world scores episodes) of the first and the last iterations:
    ``train_success_first`` / ``_last`` (one iteration each) and the means over the first and the last
    ``train_window`` iterations (``window``, at most half of the run, at least one). One iteration of a few groups
    on fresh games is a noisy reading; the means are what the summary prints."""
    nan = float("nan")
    if not history:
        return {"train_success_first": nan, "train_success_last": nan}
    k = max(1, min(window, len(history) // 2))
    out = {"train_window": k}
    keys = ("success", "score") if "score" in history[0] else ("success",)
    for key in keys:
        col = "success_rate" if key == "success" else "score"
        xs = [h[col] for h in history]
        out.update({f"train_{key}_first": xs[0], f"train_{key}_last": xs[-1],
                    f"train_{key}_first_mean": sum(xs[:k]) / k, f"train_{key}_last_mean": sum(xs[-k:]) / k})
    return out


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


# ---------------------------------------------------------------------------------------------- text
def _pct(x) -> str:
    return "  n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:5.1f}%"


def _scored(splits: Sequence[str], *summaries: Mapping) -> bool:
    """Whether any of the :func:`eval_summary` dicts has a score (the world scores episodes: WebShop)."""
    return any(f"{s}_score" in d for d in summaries for s in splits)


def eval_line(d: dict, splits) -> str:
    """One line of an :func:`eval_summary`: success (and score) and invalid-action rate per split, and the gap."""
    parts = [f"{s} success {_pct(d.get(s + '_success_rate')).strip()}"
             + (f", score {d[s + '_score']:.1f}" if s + "_score" in d else "")
             + f" (invalid actions {_pct(d.get(s + '_invalid_action_rate')).strip()})" for s in splits]
    if "gap" in d and not math.isnan(d["gap"]):
        parts.append(f"gap {100 * d['gap']:+.1f} points")
    return ", ".join(parts)


def eval_tasks_text(eval_tasks: Mapping[str, Sequence], asked: int) -> str:
    """``id (48 tasks), ood (48 tasks)``: the tasks of each evaluation split, and how many were asked where a
    split holds fewer (``id (1 task of 4 asked: the split holds no more)``)."""
    parts = []
    for split, tasks in eval_tasks.items():
        n = len(tasks)
        short = f" of {asked} asked: the split holds no more" if n < asked else ""
        parts.append(f"{split} ({n} task{'' if n == 1 else 's'}{short})")
    return ", ".join(parts)


def format_eval(res: dict[str, float], eval_tasks: Mapping[str, Sequence]) -> str:
    """``milegpo eval``'s table: tasks, success, invalid-action rate and episode length per split, and the gap."""
    splits = list(eval_tasks)
    scored = _scored(splits, res)
    lines = [f"\n{'split':<8} {'tasks':>6} {'success':>9}" + (f" {'score':>7}" if scored else "")
             + f" {'invalid':>9} {'length':>7}"]
    for s in splits:
        lines.append(f"{s:<8} {len(eval_tasks[s]):>6} {_pct(res.get(s + '_success_rate')):>9}"
                     + (f" {res.get(s + '_score', float('nan')):>7.1f}" if scored else "")
                     + f" {_pct(res.get(s + '_invalid_action_rate')):>9} "
                     f"{res.get(s + '_episode_length', float('nan')):>7.2f}")
    if "gap" in res:
        lines.append(f"gap {splits[0]} - {splits[1]}: {100 * res['gap']:+.1f} points")
    return "\n".join(lines)


def _points(before: Mapping, after: Mapping, key: str, scale: float) -> str:
    """``after - before`` of ``key`` in points (``+2.7 pts``), ``n/a`` where either lacks it."""
    a, b = after.get(key), before.get(key)
    if a is None or b is None or math.isnan(a) or math.isnan(b):
        return "n/a"
    return f"{scale * (a - b):+.1f} pts"


def _train_line(s: Mapping) -> str:
    """``train success (mean of the first / last 10 iterations, fresh games each): 84.1% -> 79.3%``, from
    :func:`training_ends`'s means (and the score's, where the world scores episodes)."""
    if "train_window" not in s:
        return "train success: n/a (no iteration ran)"
    k = s["train_window"]
    when = "the first / last iteration" if k == 1 else f"the first / last {k} iterations"
    line = (f"train success (mean of {when}, fresh games each): "
            f"{_pct(s['train_success_first_mean']).strip()} -> {_pct(s['train_success_last_mean']).strip()}")
    if "train_score_first_mean" in s:
        line += f", score {s['train_score_first_mean']:.1f} -> {s['train_score_last_mean']:.1f}"
    return line


def format_summary(s: dict[str, Any]) -> str:
    """The printed end-of-run summary of :func:`milegpo.job.run_train`'s summary dict."""
    lines = ["", "=" * 72, "MileGPO run summary", "=" * 72,
             f"policy {s['policy']}; env {s['env']}{' / ' + s['task_type'] if s['task_type'] else ''}; credit "
             f"{get_method(s['credit_method']).display_name(s['credit_variant'])}; "
             f"{s['iterations']} iterations of {s['groups_per_iteration']} x {s['group_size']} episodes, horizon "
             f"{s['horizon']}"]
    if "sft_examples" in s:
        lines.append(f"SFT warm start: {s['sft_examples']} expert steps, {s['sft_epochs']:g} epochs, final loss "
                     f"{s['sft_loss']:.3f} ({s['sft_s']:.0f} s)")
    splits = s["splits"]
    if splits:
        scored = [sp for sp in splits if _scored([sp], s["before"], s["after"])]
        lines.append(f"{'':<22}" + "".join(f"{sp + ' success':>14}" for sp in splits)
                     + "".join(f"{sp + ' score':>14}" for sp in scored)
                     + "".join(f"{sp + ' invalid':>14}" for sp in splits) + (f"{'gap':>11}" if len(splits) > 1 else ""))
        before = "before RL (after SFT)" if "sft_examples" in s else "before RL (no SFT)"
        for name, d in ((before, s["before"]), ("after RL", s["after"])):
            if not d:
                continue
            gap = f"{100 * d['gap']:>+7.1f} pts" if "gap" in d and not math.isnan(d["gap"]) else ""
            lines.append(f"{name:<22}" + "".join(f"{_pct(d.get(sp + '_success_rate')):>14}" for sp in splits)
                         + "".join(f"{d.get(sp + '_score', float('nan')):>14.1f}" for sp in scored)
                         + "".join(f"{_pct(d.get(sp + '_invalid_action_rate')):>14}" for sp in splits) + gap)
        if s["before"] and s["after"]:  # what RL did on the evaluation games: the run's headline
            lines.append(f"{'RL changed it by':<22}"
                         + "".join(f"{_points(s['before'], s['after'], sp + '_success_rate', 100):>14}"
                                   for sp in splits)
                         + "".join(f"{_points(s['before'], s['after'], sp + '_score', 1):>14}" for sp in scored))
    lines.append(_train_line(s) + f"; training {s['train_s']:.0f} s, total {s['total_s']:.0f} s")
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


def write_summary(summary: dict[str, Any], path: Path) -> None:
    """``summary`` as JSON at ``path`` (NaN as null), written whole or not at all."""
    from ..files import atomic_write

    with atomic_write(path) as f:
        json.dump(_jsonable(summary), f, indent=1)


# ---------------------------------------------------------------------------------------------- plots
def write_plots(directory: Path, history, diags, before, after, splits, batch_files, cfg) -> list[Path]:
    """training.png, credit_diagnostics.png, advantages_by_method.png (last saved iteration)."""
    from .plots import plot_credit_diagnostics, plot_training

    rows = [dict(h) for h in history]
    shown = list(splits[:2])
    if before and shown:
        rows.insert(0, {"iteration": 0, **{f"eval_{sp}_success": before.get(f"{sp}_success_rate") for sp in shown}})
    if after and rows:
        rows[-1].update({f"eval_{sp}_success": after.get(f"{sp}_success_rate") for sp in shown})
    paths = [plot_training(rows, directory / "training.png",
                           title=f"{cfg.credit_method} training: {cfg.groups_per_iteration} groups x {cfg.group_size}"
                                 f" episodes per iteration (eval {' / '.join(splits[:2])} at start and end)")]
    if diags:
        paths.append(plot_credit_diagnostics(diags, directory / "credit_diagnostics.png"))
    if batch_files:
        paths.append(advantages_plot(batch_files[-1], directory / "advantages_by_method.png", cfg))
    return paths


def advantages_plot(batch_file: str, path: Path, cfg):
    """Advantage histograms of every method and variant (:func:`milegpo.credit.method_variants`: the MileGPO
    ablations too) on one saved StepBatch."""
    from ..credit import StepBatch, estimate, method_variants
    from .plots import plot_advantages

    batch = StepBatch.load(batch_file)
    ccfg = cfg.credit_config().as_preset()  # the run's config, each method reading its own fields of it
    results = {label: estimate(batch, method, ccfg, variant=variant, backend=cfg.credit_backend)
               for label, (method, variant, _) in method_variants(settings=False).items()}
    return plot_advantages(results, path, title=f"advantages by method on {Path(batch_file).name} "
                                                f"({len(batch)} steps)")


__all__ = ["eval_summary", "training_history", "training_ends", "time_split", "eval_line", "eval_tasks_text",
           "format_eval", "format_summary", "write_summary", "write_plots", "advantages_plot"]
