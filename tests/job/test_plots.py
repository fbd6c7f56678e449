"""The PNG plots (milegpo.job.plots)."""

from milegpo.job.plots import plot_credit_diagnostics, plot_training


def test_training_and_diagnostics_plots(tmp_path):
    history = [{"iteration": i, "success_rate": 0.1 * i, "invalid_rate": 0.5 / i, "episode_length": 20 - i,
                "eval_id_success": 0.1 * i, "tie_correction_rate": float("nan") if i == 1 else 0.2,
                "support_local": 3, "support_coverage": 1, "support_weak": 2, "pcc_progress_share": 0.4,
                "pcc_branch_share": 0.3} for i in range(1, 5)]
    assert plot_training(history, tmp_path / "t.png").stat().st_size > 1000
    assert plot_credit_diagnostics(history, tmp_path / "d.png").stat().st_size > 1000


def test_long_training_plot_draws_rolling_means(tmp_path, monkeypatch):
    from milegpo.job import plots

    assert plots.rolling_mean([1.0, 2.0, 3.0, 4.0], 2) == [1.0, 1.5, 2.5, 3.5]
    assert plots.rolling_mean([], 3) == []
    drawn = []
    real = plots._with_trend

    def spy(ax, xs, ys, *args, **kwargs):
        drawn.append(len(ys))
        return real(ax, xs, ys, *args, **kwargs)

    monkeypatch.setattr(plots, "_with_trend", spy)
    history = [{"iteration": i, "success_rate": (i % 3) / 3, "invalid_rate": 0.5, "episode_length": 8 - i % 2}
               for i in range(1, 51)]
    assert plot_training(history, tmp_path / "t.png").stat().st_size > 1000
    assert drawn == [50, 50, 50]
