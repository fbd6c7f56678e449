"""experiments/regime.py: a tiny cell run end to end (credit-quality, the testbed in two parts of seeds) and its
table; a cell that changes one setting of another inherits the rest."""

import json
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("scipy")

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "regime.py"


def _module():
    return SimpleNamespace(**runpy.run_path(str(SCRIPT), run_name="regime"))


def test_a_tiny_cell_runs_in_parts_and_tables(tmp_path, monkeypatch, capsys):
    mod = _module()
    tiny = {"env": "household", "options": {"max_receptacles": 4}, "horizon": 10, "iterations": 2, "tasks": 4,
            "groups": 2, "group_size": 3, "quality_groups": 2, "quality_group_size": 3}
    mod.CELLS.clear()
    mod.CELLS.update({"tiny": tiny, "tiny_eta1": {"base": "tiny", "overrides": {"eta": 1.0}}})
    mod.run_cell.__globals__["QUALITY_SEEDS"] = 1
    assert mod.cell_settings("tiny_eta1") == {**mod.BASE, **tiny, "overrides": {"eta": 1.0}}
    assert mod.main(["run", "tiny", "--out", str(tmp_path), "--seeds", "0", "1"]) == 0
    assert mod.main(["run", "tiny", "--out", str(tmp_path), "--seeds", "2"]) == 0
    assert (tmp_path / "tiny" / "quality" / "credit_quality.json").is_file()
    assert mod.main(["table", "--out", str(tmp_path)]) == 0
    figures = json.loads((tmp_path / "regime.json").read_text())
    assert [f["cell"] for f in figures] == ["tiny"]
    f = figures[0]
    assert {m: v["seeds"] for m, v in f["methods"].items()} == {"graphgpo": 3, "milegpo-full": 3, "beacon": 3}
    assert f["paired"]["milegpo-full - graphgpo"]["final_success"]["n"] == 3
    assert 0.0 <= f["expert"]["tie_share"][0] <= 1.0 and "milegpo_s_pcc" in f["expert"]["truth"]
    assert set(f["learner"]) == {"graphgpo", "milegpo-full"}
    assert 0.0 <= f["learner"]["graphgpo"]["tie_share_first"][0] <= 1.0
    assert "| tiny | 10 | 4 |" in (tmp_path / "table.md").read_text()
    assert list(f["methods"]) == sorted(f["methods"])  # the same file from run to run, whatever the hash seed
    # a named cell's table is printed, the files (every cell's) left as they are
    (tmp_path / "table.md").write_text("every cell")
    assert "Not run (nothing on disk, not in the table): tiny_eta1." in capsys.readouterr().out  # every cell's
    assert mod.main(["table", "tiny", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "table.md").read_text() == "every cell"
    assert "Not run" not in capsys.readouterr().out  # the cells not asked for are not called absent
    # interim looks: the pair's tests over seeds 0 to n-1, each with Holm's verdict over every cell's tests on disk
    rows = mod.interim_looks("tiny", tmp_path)
    assert [r["seeds"] for r in rows] == [2, 3] and rows[-1]["tests"] == 2
    assert rows[-1]["final_success"]["diff"] == f["paired"]["milegpo-full - graphgpo"]["final_success"]["diff"]
    assert rows[0]["train_success"]["n"] == 2 and isinstance(rows[0]["train_success"]["holm"], bool)
    assert mod.main(["looks", "tiny", "--out", str(tmp_path), "--at", "3"]) == 0
    assert "| 3 | " in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:  # seeds 0 to 3 were not all run: one line, no traceback
        mod.main(["looks", "tiny", "--out", str(tmp_path), "--at", "4"])
    assert exit_.value.code == 2 and "they ran seeds 0 to 2, asked at 4" in capsys.readouterr().err
    # the tie share is the pooled one with its interval over groups, not a t-interval over a few batches'
    # shares (two batches at 86% and 95% gave ScienceWorld's long cell 90.4 [29.8, 151.0])
    qpath = tmp_path / "tiny" / "quality" / "credit_quality.json"
    q = json.loads(qpath.read_text())
    q["methods"]["milegpo-full"]["diagnostics_per_batch"]["tie_share"] = [0.856, 0.952]
    qpath.write_text(json.dumps(q))
    share, lo, hi = mod.cell_figures("tiny", tmp_path)["expert"]["tie_share"]
    assert [share, lo, hi] == [q["ties"]["tie_share"], *q["ties"]["ci"]] and 0.0 <= lo <= share <= hi <= 1.0
    # a success rate's interval over seeds stays inside [0, 1] near its bound (a t-interval: 99.8 [99.4, 100.1])
    mean, lo, hi = mod.bounded_mean_ci([1.0] * 18 + [0.96, 0.98])
    assert mean == pytest.approx(0.997) and lo < mean and hi <= 1.0
    with pytest.raises(SystemExit):
        mod.main(["run", "no_such_cell", "--out", str(tmp_path)])
    # the milestone-truth table across worlds reads the same report: a row per step score, a column per world
    truth = SimpleNamespace(**runpy.run_path(str(SCRIPT.parent / "milestone_truth_table.py"), run_name="truth"))
    assert truth.main([f"tiny={qpath}", f"again={qpath}", "--out", str(tmp_path / "truth.md")]) == 0
    md = (tmp_path / "truth.md").read_text()
    assert "| method (result read) | score | tiny | again |" in md and "| milegpo-full | `milegpo_s_pcc` |" in md
    assert "(told)" in md.split("`beacon_segment_reward`")[1].splitlines()[0]
    with pytest.raises(SystemExit) as exit_:
        truth.main([f"tiny={tmp_path / 'nothing.json'}"])
    assert exit_.value.code == 2


def test_holm_steps_down_and_the_scienceworld_cells_play_the_cached_world(tmp_path):
    mod = _module()
    # m = 3: 0.01 <= 0.05 / 3 passes; 0.03 > 0.05 / 2 stops the rest, 0.04 included
    assert mod.holm({"a": 0.01, "b": 0.04, "c": 0.03}) == {"a": True, "c": False, "b": False}
    assert mod.holm({"a": 0.01, "b": 0.02}) == {"a": True, "b": True}
    for cell in ("scienceworld_short", "scienceworld_long"):
        args = mod.testbed_args(mod.cell_settings(cell), tmp_path, [0], mod.METHODS)
        assert args[args.index("--world-cache") + 1] == f"experiments/results/regime/{cell}/world"
        assert args[args.index("--distractors") + 1] == "3"
    assert "--fixed-tasks" in mod.testbed_args(mod.cell_settings("scienceworld_long"), tmp_path, [0], mod.METHODS)
    assert "--fixed-tasks" not in mod.testbed_args(mod.cell_settings("scienceworld_short"), tmp_path, [0], mod.METHODS)
    # the harder short cells change one setting each and keep their own world cache (the landed short cell's
    # cache stays as it is)
    for cell, flag, value in (("scienceworld_short_prior1", "--prior", "1.0"),
                              ("scienceworld_short_d10", "--distractors", "10")):
        args = mod.testbed_args(mod.cell_settings(cell), tmp_path, [0], mod.METHODS)
        assert args[args.index(flag) + 1] == value
        assert args[args.index("--world-cache") + 1] == f"experiments/results/regime/{cell}/world"
        own, base = mod.cell_settings(cell), mod.cell_settings("scienceworld_short")
        assert {k for k in own if own[k] != base.get(k)} - {"note"} == {flag[2:], "world_cache"}
