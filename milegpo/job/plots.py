"""PNG plots a user would rather look at than read (matplotlib, headless): the job's
(:func:`milegpo.job.report.write_plots`) and ``milegpo demo`` / ``milegpo replay``'s.

- :func:`plot_training` : success rate (and score, where the world scores episodes) and invalid-action
  rate per iteration (and each evaluation split's success where logged), from a list of per-iteration
  metric dicts.
- :func:`plot_credit_diagnostics` : tie-correction rate, candidate-support partition
  and PCC evidence per iteration (keys of :func:`milegpo.credit.diagnostics`).
- :func:`plot_advantages` : advantage distributions by method for one rollout batch, in a grid.

Every function returns the path it wrote. Every panel has a legend or a caption saying what it shows;
evaluations are markers, not joined into a line; missing keys are skipped, not invented, and a diagnostic
that is undefined (NaN) at some iterations is said in its panel.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence


def pyplot():
    """matplotlib.pyplot on the headless Agg backend (the job's, the ground-truth tools' and the experiments'
    figures)."""
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


def _undefined(history: Sequence[Mapping], key: str) -> list:
    """The iterations whose ``key`` is there but undefined (NaN or None): a diagnostic with no case to count."""
    xs = []
    for i, h in enumerate(history):
        v = h.get(key, 0.0)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            xs.append(h.get("iteration", i + 1))
    return xs


#: why a credit diagnostic is undefined (NaN) at an iteration: the case it is a share of did not occur
UNDEFINED_BECAUSE = {"tie_correction_rate": "no tied pairs", "tie_share": "no same-state pairs",
                     "shared_state_coverage": "no rows", "pcc_progress_share": "no candidate milestones",
                     "pcc_branch_share": "no candidate milestones"}


def _note_undefined(ax, history, keys: Sequence[str], labels: Mapping[str, str]) -> list[str]:
    """Say in ``ax`` (lower left) at how many iterations each of ``keys`` is n/a, and why; returns the lines."""
    lines = []
    for key in keys:
        xs = _undefined(history, key)
        if xs:
            where = f"iteration {xs[0]}" if len(xs) == 1 else f"{len(xs)} of {len(history)} iterations"
            lines.append(f"{labels.get(key, key)}: n/a at {where} ({UNDEFINED_BECAUSE.get(key, 'undefined')})")
    if lines:
        ax.text(0.02, 0.03, "\n".join(lines), transform=ax.transAxes, fontsize=7, va="bottom", ha="left",
                color="dimgray", bbox=dict(facecolor="white", alpha=0.8, edgecolor="none"))
    return lines


def _caption(ax, xlabel: str, caption: str, width: int = 60) -> None:
    """An axis label with the panel's caption (what it shows) under it, wrapped to the panel's width."""
    import textwrap

    ax.set_xlabel(xlabel + "\n" + textwrap.fill(caption, width), fontsize=8)


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
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    xs, ys = _series(history, "success_rate")
    if xs:
        _with_trend(axes[0], xs, ys, "tab:blue", "train success")
    xs, ys = _series(history, "score")
    if xs:
        _with_trend(axes[0], xs, [y / 100 for y in ys], "tab:purple", "train score / 100", marker="^")
    evals = list(dict.fromkeys(k for h in history for k in h if k.startswith("eval_") and k.endswith("_success")))
    for key, color, marker in zip(evals, ("tab:orange", "tab:green", "tab:brown", "tab:pink", "tab:olive", "tab:cyan"),
                                  ("D", "s", "P", "X", "v", "*")):
        split = key[len("eval_"):-len("_success")]
        label = f"eval {split.upper() if split in ('id', 'ood') else split} success"
        xs, ys = _series(history, key)
        if xs:  # separate measurements (before and after RL): markers with their values, no line between them
            axes[0].plot(xs, ys, linestyle="none", marker=marker, ms=8, color=color, label=label)
            for x, y in zip(xs, ys):
                axes[0].annotate(f"{100 * y:.0f}%", (x, y), textcoords="offset points", xytext=(6, 4), fontsize=7,
                                 color=color)
    axes[0].set_ylim(-0.02, 1.02)
    _caption(axes[0], "iteration", "Training episodes' success per iteration (faint) and its rolling mean; "
                                   "large markers: separate evaluations of the policy (at 0: before RL, at the "
                                   "last iteration: after RL), not a trend.")
    axes[0].set_ylabel("success rate")
    axes[0].legend(loc="best", fontsize=8)
    xs_invalid, ys = _series(history, "invalid_rate")
    if xs_invalid:
        _with_trend(axes[1], xs_invalid, ys, "tab:red", "invalid-action rate")
    xs, ys = _series(history, "episode_length")
    if xs:
        ax2 = axes[1].twinx()
        _with_trend(ax2, xs, ys, "tab:gray", "episode length", marker="s")
        ax2.set_ylabel("episode length (steps)")
        handles = [h for ax in (axes[1], ax2) for h in ax.get_legend_handles_labels()[0]]
        axes[1].legend(handles, [h.get_label() for h in handles], loc="best", fontsize=8)
    elif xs_invalid:
        axes[1].legend(loc="best", fontsize=8)
    axes[1].set_ylim(-0.02, 1.02)
    _caption(axes[1], "iteration", "Share of the training episodes' steps whose action was not admissible "
                                   "(left axis) and mean episode length in steps (right axis), per iteration.")
    axes[1].set_ylabel("invalid-action rate")
    fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_credit_diagnostics(history: Sequence[Mapping], path, title: str = "MileGPO credit diagnostics") -> Path:
    """history: per-iteration diagnostics dicts (optionally with ``iteration``). A share that is undefined at an
    iteration (NaN: the case it counts did not occur, e.g. no tied pairs) is said in its panel
    (:data:`UNDEFINED_BECAUSE`), not drawn as a value."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.4))
    xs, ys = _series(history, "tie_correction_rate")
    if xs:
        axes[0].plot(xs, ys, marker="o", label="tie-correction rate")
        axes[0].legend(fontsize=8, loc="upper right")
    axes[0].set_title("tie-correction rate")
    axes[0].set_ylim(-0.02, 1.02)
    _note_undefined(axes[0], history, ["tie_correction_rate"], {"tie_correction_rate": "rate"})
    _caption(axes[0], "iteration", "Of the tied pairs (same state, opposite outcomes, equal GRPO advantage), the "
                                   "share where MileGPO's credit ranks the successful step higher.", 50)
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
    if bottoms is not None:
        axes[1].legend(fontsize=8)
        axes[1].set_ylim(bottom=0)
    if bottoms is None or max(bottoms) == 0:
        axes[1].text(0.5, 0.5, "no candidate milestones at any iteration", transform=axes[1].transAxes,
                     ha="center", color="dimgray")
    _caption(axes[1], "iteration", "Candidate milestones per iteration by their support: local evidence "
                                   "(progress or branch contrast > 0), state coverage only, or weak.", 50)
    shares = (("pcc_progress_share", "positive progress"), ("pcc_branch_share", "positive branch contrast"),
              ("shared_state_coverage", "shared-state coverage"), ("tie_share", "tie share"))
    for key, label in shares:
        xs, ys = _series(history, key)
        if xs:
            axes[2].plot(xs, ys, marker="o", label=label)
    axes[2].set_title("PCC evidence and ties")
    axes[2].set_ylim(-0.02, 1.02)
    if axes[2].get_legend_handles_labels()[0]:
        axes[2].legend(fontsize=8, loc="upper right")
    _note_undefined(axes[2], history, [k for k, _ in shares], dict(shares))
    _caption(axes[2], "iteration", "Shares of the candidates with positive progress / branch contrast (PCC), of "
                                   "the rows whose state another episode of the group visits, and of same-state "
                                   "pairs tied on GRPO's advantage.", 50)
    fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_advantages(results: Mapping[str, object], path, title: str = "advantages by method",
                    columns: int = 3) -> Path:
    """results: {label: CreditResult}; histograms of the per-step advantages, split by outcome, in a grid of
    ``columns`` panels a row (readable when scaled: a 6-method figure is 10 inches wide, not 20)."""
    import numpy as np

    plt = pyplot()
    n = len(results)
    cols = max(1, min(columns, n))
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.7 * rows + 0.9), squeeze=False, layout="constrained")
    for ax, (label, r) in zip(axes.flat, results.items()):
        adv = r.advantages.detach().cpu().numpy()
        ok = r.batch.success.cpu().numpy()
        finite = adv[np.isfinite(adv)]
        bins = np.histogram_bin_edges(finite, bins=30) if finite.size else 30
        ax.hist(adv[ok], bins=bins, alpha=0.6, label="successful episodes", color="tab:green")
        ax.hist(adv[~ok], bins=bins, alpha=0.6, label="failed episodes", color="tab:red")
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("advantage", fontsize=8)
        ax.set_ylabel("steps", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="upper left")
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    fig.suptitle(title)
    fig.supxlabel("Each panel: the per-step advantages one method gives the same batch, steps of successful "
                  "episodes (green) and of failed ones (red), on the same bins.", fontsize=8)
    return save_figure(fig, path)


def save_figure(fig, path) -> Path:
    """Write ``fig`` to ``path`` (its folders made), close it, return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
