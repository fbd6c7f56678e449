"""PNG plots a user would rather look at than read (matplotlib, headless): the job's
(:func:`milegpo.job.report.write_plots`) and ``milegpo demo`` / ``milegpo replay``'s.

- :func:`plot_training` : success rate (and score, where the world scores episodes) and invalid-action
  rate per iteration (and each evaluation split's success where logged), from a list of per-iteration
  metric dicts.
- :func:`plot_credit_diagnostics` : tie-correction rate, candidate-support partition
  and PCC evidence per iteration (keys of :func:`milegpo.credit.diagnostics`).
- :func:`plot_advantages` : advantage distributions by method for one rollout batch.

Every function returns the path it wrote. Missing keys are skipped, not invented.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _series(history: Sequence[Mapping], key: str):
    xs, ys = [], []
    for i, h in enumerate(history):
        v = h.get(key)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        xs.append(h.get("iteration", i + 1))
        ys.append(float(v))
    return xs, ys


def rolling_mean(ys: Sequence[float], window: int) -> list[float]:
    """Mean of the last ``window`` values at every point (fewer at the start)."""
    out, total = [], 0.0
    for i, y in enumerate(ys):
        total += y
        if i >= window:
            total -= ys[i - window]
        out.append(total / min(i + 1, window))
    return out


def _with_trend(ax, xs, ys, color, label, marker="o"):
    """The per-iteration values faint, and their rolling mean (a tenth of the run, >= 3) on top, when
    there are enough iterations for one (an iteration's 16 episodes make a noisy rate)."""
    window = max(3, len(ys) // 10)
    if len(ys) < 2 * window:
        ax.plot(xs, ys, marker=marker, color=color, label=label)
        return
    ax.plot(xs, ys, marker=marker, ms=3, lw=0.8, alpha=0.35, color=color)
    ax.plot(xs, rolling_mean(ys, window), lw=2.2, color=color, label=f"{label} (mean of {window})")


def plot_training(history: Sequence[Mapping], path, title: str = "MileGPO training") -> Path:
    """history: one dict per iteration with some of ``success_rate``, ``score`` (0-100, drawn / 100),
    ``invalid_rate``, ``eval_<split>_success`` (e.g. ``eval_id_success``, ``eval_ood_success``,
    ``eval_test_success``), ``episode_length``, ``iteration``."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    xs, ys = _series(history, "success_rate")
    if xs:
        _with_trend(axes[0], xs, ys, "tab:blue", "train success")
    xs, ys = _series(history, "score")
    if xs:
        _with_trend(axes[0], xs, [y / 100 for y in ys], "tab:purple", "train score / 100", marker="^")
    evals = list(dict.fromkeys(k for h in history for k in h if k.startswith("eval_") and k.endswith("_success")))
    for key, color in zip(evals, ("tab:orange", "tab:green", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")):
        split = key[len("eval_"):-len("_success")]
        label = f"eval {split.upper() if split in ('id', 'ood') else split} success"
        xs, ys = _series(history, key)
        if xs:
            axes[0].plot(xs, ys, marker="o", color=color, label=label)
    axes[0].set_ylim(-0.02, 1.02)
    axes[0].set_xlabel("iteration")
    axes[0].set_ylabel("success rate")
    axes[0].legend(loc="best", fontsize=8)
    xs, ys = _series(history, "invalid_rate")
    if xs:
        _with_trend(axes[1], xs, ys, "tab:red", "invalid-action rate")
    xs, ys = _series(history, "episode_length")
    if xs:
        ax2 = axes[1].twinx()
        _with_trend(ax2, xs, ys, "tab:gray", "episode length", marker="s")
        ax2.set_ylabel("episode length (steps)")
        handles = [h for ax in (axes[1], ax2) for h in ax.get_legend_handles_labels()[0]]
        axes[1].legend(handles, [h.get_label() for h in handles], loc="best", fontsize=8)
    axes[1].set_ylim(-0.02, 1.02)
    axes[1].set_xlabel("iteration")
    axes[1].set_ylabel("invalid-action rate")
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


def plot_credit_diagnostics(history: Sequence[Mapping], path, title: str = "MileGPO credit diagnostics") -> Path:
    """history: per-iteration diagnostics dicts (optionally with ``iteration``)."""
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    xs, ys = _series(history, "tie_correction_rate")
    axes[0].plot(xs, ys, marker="o")
    axes[0].set_title("tie-correction rate")
    axes[0].set_ylim(-0.02, 1.02)
    bottoms = None
    for key, label in (("support_local", "local evidence"), ("support_coverage", "coverage only"),
                       ("support_weak", "weak")):
        xs, ys = _series(history, key)
        if not xs:
            continue
        if bottoms is None:
            bottoms = [0.0] * len(ys)
        axes[1].bar(xs, ys, bottom=bottoms, label=label)
        bottoms = [b + y for b, y in zip(bottoms, ys)]
    axes[1].set_title("candidate support (milestones)")
    axes[1].legend(fontsize=8)
    for key, label in (("pcc_progress_share", "positive progress"), ("pcc_branch_share", "positive branch contrast"),
                       ("shared_state_coverage", "shared-state coverage"), ("tie_share", "tie share")):
        xs, ys = _series(history, key)
        if xs:
            axes[2].plot(xs, ys, marker="o", label=label)
    axes[2].set_title("PCC evidence and ties")
    axes[2].set_ylim(-0.02, 1.02)
    axes[2].legend(fontsize=8)
    for ax in axes:
        ax.set_xlabel("iteration")
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


def plot_advantages(results: Mapping[str, object], path, title: str = "advantages by method") -> Path:
    """results: {label: CreditResult}; histograms of the per-step advantages, split by outcome."""
    plt = _plt()
    n = len(results)
    fig, axes = plt.subplots(1, n, figsize=(3.3 * n, 3.2), sharey=True, squeeze=False)
    for ax, (label, r) in zip(axes[0], results.items()):
        adv = r.advantages.detach().cpu().numpy()
        ok = r.batch.success.cpu().numpy()
        bins = 30
        ax.hist(adv[ok], bins=bins, alpha=0.6, label="successful episodes", color="tab:green")
        ax.hist(adv[~ok], bins=bins, alpha=0.6, label="failed episodes", color="tab:red")
        ax.set_title(label)
        ax.set_xlabel("advantage")
    axes[0][0].set_ylabel("steps")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


def _save(fig, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
