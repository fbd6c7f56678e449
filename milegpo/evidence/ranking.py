"""What the ground-truth figures share: the tie rule of a ranked pair and the bootstrap over task groups.

:mod:`.quality` (good steps against bad ones) and :mod:`.milestones` (milestone steps against the others) both
score pairs of rows by the order a method's per-row value puts them in, pool the pairs of every batch, and give
a 95% percentile bootstrap interval over task groups: groups are resampled with replacement, the same resamples
for every method, so differences between methods get intervals too.
"""

from __future__ import annotations

import numpy as np

#: values closer than this are a tie (half a correctly ordered pair)
ADV_TIE_TOL = 1e-9


def ordered_share(values: np.ndarray, good_row: np.ndarray, bad_row: np.ndarray) -> np.ndarray:
    """Per pair 1 where the good row's value is higher, 1/2 on a tie (within :data:`ADV_TIE_TOL`), else 0.

    values: (N,) float64; good_row, bad_row: (P,) int64. Returns (P,) float64."""
    diff = values[good_row] - values[bad_row]
    return np.where(diff > ADV_TIE_TOL, 1.0, np.where(diff >= -ADV_TIE_TOL, 0.5, 0.0))


def ranked_above(positive: np.ndarray, negative: np.ndarray) -> float:
    """Of every (positive, negative) pair of values, how many the positive one wins, a tie (within
    :data:`ADV_TIE_TOL`) counting 1/2: :func:`ordered_share` summed over the full cross product, in
    O((P + Q) log Q) without forming the pairs (the Mann-Whitney U statistic with a tie tolerance).

    positive: (P,) float64; negative: (Q,) float64. Returns the sum (a multiple of 1/2, at most P * Q)."""
    if positive.size == 0 or negative.size == 0:
        return 0.0
    ordered = np.sort(negative)
    below = np.searchsorted(ordered, positive - ADV_TIE_TOL, side="left")  # negatives < value - tol: won
    up_to = np.searchsorted(ordered, positive + ADV_TIE_TOL, side="right")  # negatives <= value + tol
    return float(below.sum() + 0.5 * (up_to - below).sum())


def bootstrap_weights(n_units: int, n_resamples: int, seed: int) -> np.ndarray:
    """(n_resamples, n_units) float64: how often each unit is drawn in each resample (with replacement)."""
    rng = np.random.default_rng(seed)
    weights = np.zeros((n_resamples, n_units))
    if n_units:
        draws = rng.integers(0, n_units, size=(n_resamples, n_units))
        np.add.at(weights, (np.arange(n_resamples)[:, None], draws), 1.0)
    return weights


def bootstrap_ratios(num: np.ndarray, den: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per resample of :func:`bootstrap_weights` the pooled ratio sum(num) / sum(den) of the units drawn:
    (n_resamples,) float64, NaN where a resample drew no denominator. num, den: (n_units,) float64."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (weights @ num) / (weights @ den)


def pooled_ratio(num: np.ndarray, den: np.ndarray, weights: np.ndarray) -> tuple[float, list[float]]:
    """A share pooled over units (e.g. tied pairs of all same-state pairs, per task group) with its 95%
    percentile bootstrap interval over the units (``weights``: :func:`bootstrap_weights`): (value, [lo, hi]).
    A share of counts stays in [0, 1] and its interval too, however few the units (a t-interval over a few
    per-batch shares does not: two batches at 86% and 95% give [30%, 151%])."""
    return ratio(float(num.sum()), float(den.sum())), percentile_interval(bootstrap_ratios(num, den, weights))


def percentile_interval(samples: np.ndarray, level: float = 0.95) -> list[float]:
    """[lo, hi] of the finite ``samples`` (NaN, NaN when there are none)."""
    finite = samples[np.isfinite(samples)]
    if finite.size == 0:
        return [float("nan"), float("nan")]
    tail = 100 * (1 - level) / 2
    return [float(np.percentile(finite, tail)), float(np.percentile(finite, 100 - tail))]


def ratio(num: float, den: float) -> float:
    """num / den, NaN when den is 0 (a figure without pairs)."""
    return num / den if den else float("nan")


__all__ = ["ADV_TIE_TOL", "ordered_share", "ranked_above", "bootstrap_weights", "bootstrap_ratios", "pooled_ratio",
           "percentile_interval", "ratio"]
