"""milegpo.evidence.seed_stats: intervals over seeds, paired tests and the seeds a difference needs."""

import math

import pytest

pytest.importorskip("scipy")

from milegpo.evidence.seed_stats import mean_ci, paired_test, seeds_for  # noqa: E402


def test_mean_ci_is_the_t_interval():
    mean, lo, hi = mean_ci([1.0, 2.0, 3.0])
    # t(0.975, 2) = 4.3027, sd 1, n 3: half width 4.3027 / sqrt(3)
    assert mean == 2.0 and hi - mean == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6) and lo == 4.0 - hi
    assert math.isnan(mean_ci([1.0])[1]) and mean_ci([float("nan"), 2.0, 4.0])[0] == 3.0


def test_paired_test_and_seeds_for_known_values():
    r = paired_test([1, 2, 3, 4], [0, 2, 2, 3])
    assert r["diff"] == 0.75 and r["sd"] == 0.5 and r["t_p"] == pytest.approx(0.0577, abs=1e-4)
    assert paired_test([1, 2], [1, 2])["t_p"] == 1.0  # no difference at all
    # Cohen's d = 1 needs 10 pairs, d = 0.5 needs 34 (80% power, two-sided 5%: the textbook values)
    assert seeds_for(1.0, 1.0) == 10 and seeds_for(0.5, 1.0) == 34 and seeds_for(0.02, 0.0) == 2
