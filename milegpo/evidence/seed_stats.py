"""Statistics over seeds for the method comparisons (experiments/credit_testbed.py, compare_methods.py).

One number per (method, seed) run; seeds pair the methods (same tasks, same start, same random stream).
:func:`mean_ci` (mean and t-interval over seeds), :func:`paired_test` (mean difference with its t-interval,
paired t-test and Wilcoxon signed-rank p-values), :func:`seeds_for` (seeds a paired t-test needs to detect a
difference, from the measured seed-to-seed spread). Needs scipy (the ``experiments`` extra).
"""

from __future__ import annotations

import math

import numpy as np


def mean_ci(xs, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and the t-interval of the mean over seeds: (mean, lo, hi); NaN for fewer than two values."""
    from scipy import stats

    xs = np.asarray([x for x in xs if x is not None and not math.isnan(x)], dtype=np.float64)
    if xs.size < 2:
        m = float(xs.mean()) if xs.size else float("nan")
        return m, float("nan"), float("nan")
    half = stats.t.ppf(0.5 + level / 2, xs.size - 1) * xs.std(ddof=1) / math.sqrt(xs.size)
    return float(xs.mean()), float(xs.mean() - half), float(xs.mean() + half)


def paired_test(a, b) -> dict:
    """Paired comparison of two methods over the seeds both ran: mean difference a - b with its 95%
    t-interval, the paired t-test's and Wilcoxon signed-rank test's two-sided p-values."""
    from scipy import stats

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    d = a - b
    m, lo, hi = mean_ci(d)
    out = {"n": int(d.size), "diff": m, "ci": [lo, hi], "sd": float(d.std(ddof=1)) if d.size > 1 else float("nan")}
    if d.size > 1 and np.any(d != 0):
        out["t_p"] = float(stats.ttest_rel(a, b).pvalue)
        out["wilcoxon_p"] = float(stats.wilcoxon(d).pvalue)
    else:
        out["t_p"] = out["wilcoxon_p"] = 1.0 if d.size > 1 else float("nan")
    return out


def seeds_for(delta: float, sd: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Seeds a two-sided paired t-test needs to detect a mean difference ``delta`` with ``power``, when the
    per-seed differences have standard deviation ``sd``: the smallest n whose noncentral-t power reaches it
    (searched upward from the normal approximation, which never exceeds it)."""
    from scipy import stats

    if not sd > 0 or not delta > 0:
        return 2
    normal = ((stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)) * sd / delta) ** 2
    n = max(2, int(normal))
    while n < 10_000_000:
        crit = stats.t.ppf(1 - alpha / 2, n - 1)
        nc = delta / sd * math.sqrt(n)
        if stats.nct.sf(crit, n - 1, nc) + stats.nct.cdf(-crit, n - 1, nc) >= power:
            return n
        n += 1
    return n


__all__ = ["mean_ci", "paired_test", "seeds_for"]
