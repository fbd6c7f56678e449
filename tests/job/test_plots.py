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


def _figures(monkeypatch):
    """The figures the plots draw (kept open for the test, then saved as usual)."""
    from milegpo.job import plots

    drawn = []

    def keep(fig, path):
        drawn.append(fig)
        fig.savefig(path)
        return plots.Path(path)

    monkeypatch.setattr(plots, "save_figure", keep)
    return drawn


def _history(n=6):
    return [{"iteration": i, "success_rate": 0.1 * (i % 4), "invalid_rate": 0.5, "episode_length": 8}
            for i in range(1, n + 1)]


def test_evaluations_are_markers_not_a_line(tmp_path, monkeypatch):
    drawn = _figures(monkeypatch)
    rows = [{"iteration": 0, "eval_id_success": 0.3, "eval_ood_success": 0.1}, *_history()]
    rows[-1].update(eval_id_success=0.4, eval_ood_success=0.2)
    plot_training(rows, tmp_path / "t.png")
    ax = drawn[0].axes[0]
    evals = [line for line in ax.get_lines() if line.get_label().startswith("eval")]
    assert sorted(line.get_label() for line in evals) == ["eval ID success", "eval OOD success"]
    for line in evals:
        assert line.get_linestyle() == "None" and line.get_marker() not in (None, "None", "")
        assert list(line.get_xdata()) == [0, 6]  # before RL and after RL, each its own point
    assert {t.get_text() for t in ax.texts} >= {"30%", "40%", "10%", "20%"}  # each evaluation's value beside it
    assert "not a trend" in ax.get_xlabel() and "before RL" in ax.get_xlabel()


def test_every_panel_has_a_legend_and_a_caption(tmp_path, monkeypatch):
    drawn = _figures(monkeypatch)
    rows = [{**h, "tie_correction_rate": 0.5, "support_local": 2, "support_coverage": 1, "support_weak": 1,
             "pcc_progress_share": 0.4, "pcc_branch_share": 0.2, "shared_state_coverage": 0.8, "tie_share": 0.3}
            for h in _history()]
    plot_training(rows, tmp_path / "t.png")
    plot_credit_diagnostics(rows, tmp_path / "d.png")
    for fig in drawn:
        for ax in fig.axes:
            if ax.get_ylabel() == "episode length (steps)":  # the twin axis of the invalid-action panel
                continue
            assert ax.get_legend() is not None, ax.get_title()
            caption = ax.get_xlabel().split("\n", 1)
            assert caption[0] == "iteration" and len(caption[1]) > 60, ax.get_title()


def test_undefined_diagnostics_are_said_in_their_panel(tmp_path, monkeypatch):
    drawn = _figures(monkeypatch)
    nan = float("nan")
    rows = [{"iteration": i, "tie_correction_rate": nan if i < 3 else 0.5, "support_local": 0, "support_coverage": 0,
             "support_weak": 0, "pcc_progress_share": nan, "pcc_branch_share": nan, "tie_share": 0.4,
             "shared_state_coverage": 0.9} for i in range(1, 5)]
    plot_credit_diagnostics(rows, tmp_path / "d.png")
    texts = [" ".join(t.get_text() for t in ax.texts) for ax in drawn[0].axes]
    assert "rate: n/a at 2 of 4 iterations (no tied pairs)" in texts[0]
    assert "no candidate milestones at any iteration" in texts[1]
    assert "positive progress: n/a at 4 of 4 iterations (no candidate milestones)" in texts[2]
    assert "tie share" not in texts[2]  # defined everywhere: nothing to say
    # and a single undefined iteration is named
    rows[1]["tie_correction_rate"] = 0.5
    drawn.clear()
    plot_credit_diagnostics(rows, tmp_path / "d.png")
    assert "rate: n/a at iteration 1 (no tied pairs)" in drawn[0].axes[0].texts[0].get_text()


def test_the_advantages_plot_is_a_grid_readable_when_scaled(tmp_path, monkeypatch):
    from milegpo.credit import estimate, presets
    from milegpo.credit.synthetic import random_batch
    from milegpo.job.plots import plot_advantages

    drawn = _figures(monkeypatch)
    batch = random_batch(n_groups=3, group_size=4, horizon=5, seed=0)
    cfg = presets.get_preset("alfworld")
    results = {m: estimate(batch, m, cfg) for m in ("grpo", "gigpo", "graphgpo")}
    results.update({f"milegpo-{v}": estimate(batch, "milegpo", cfg, variant=v) for v in ("md", "rcs", "full")})
    plot_advantages(results, tmp_path / "a.png")
    fig = drawn[0]
    width, height = fig.get_size_inches()
    assert width <= 11 and width / height < 2.2  # 3 x 2 panels, not 6 in a row 20 inches wide
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in shown] == list(results)
    assert all(ax.get_legend() is not None for ax in shown)
    assert "successful episodes (green)" in fig.get_supxlabel()
