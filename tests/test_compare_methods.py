"""experiments/compare_methods.py: the table and plot from stored records (the runs themselves are the main job's)."""

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "compare_methods.py"


def _module():
    spec = importlib.util.spec_from_file_location("compare_methods", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _record(method, seed, id_after, train):
    split = {"id_success_rate": 0.25, "ood_success_rate": 0.0, "gap": 0.25, "id_invalid_action_rate": 0.5,
             "ood_invalid_action_rate": 0.75}
    return {"method": method, "seed": seed, "before": split, "after": {**split, "id_success_rate": id_after},
            "splits": ["id", "ood"], "train_success": train, "train_invalid": [0.5] * len(train), "seconds": 10.0,
            "iterations": len(train), "groups_per_iteration": 4, "group_size": 4, "horizon": 8, "num_eval_tasks": 48,
            "task_type": "look_at_obj_in_light", "policy": "tiny"}


def test_table_is_the_mean_over_seeds_and_table_only_rewrites_it(tmp_path):
    mod = _module()
    records = [_record("grpo", 0, 0.5, [0.0, 0.5]), _record("grpo", 1, 0.25, [0.5, 1.0]),
               _record("milegpo-full", 0, 0.75, [0.25, 0.25]), _record("milegpo-full", 1, float("nan"), [0.25, 0.75])]
    (tmp_path / "results.json").write_text(json.dumps(records))
    (tmp_path / "table.md").write_text("old\n\nCommand: `python experiments/compare_methods.py ...`; total 1 s.\n")
    assert mod.main(["--out", str(tmp_path), "--table-only"]) == 0
    text = (tmp_path / "table.md").read_text()
    assert "seeds [0, 1]" in text and "2 iterations x 4 groups x 4 episodes" in text
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in text.splitlines() if line.startswith("| ")}
    assert rows["grpo"][1:5] == ["50.0", "75.0", "50.0", "37.5"]  # train all / last / invalid, id success
    assert rows["milegpo-full"][4] == "75.0"  # NaN (a seed without the number) is left out of the mean
    assert rows["(SFT start, before RL)"][4] == "25.0"
    assert text.rstrip().endswith("total 1 s.")  # the command line of the run survives
    assert (tmp_path / "compare.png").stat().st_size > 1000
    with pytest.raises(SystemExit):
        mod.main(["--out", str(tmp_path), "--jobs", "0", "--seeds", "0"])


def test_intervals_paired_differences_and_the_power_statement():
    mod = _module()
    # id success after RL per seed: grpo 0.20, 0.30, 0.40; milegpo-full 0.25, 0.30, 0.50 (paired: +5, 0, +10)
    records = [_record("grpo", s, v, [0.5]) for s, v in enumerate((0.2, 0.3, 0.4))]
    records += [_record("milegpo-full", s, v, [0.5]) for s, v in enumerate((0.25, 0.3, 0.5))]
    iv = mod.intervals(records)
    mean, lo, hi = iv["methods"]["grpo"]["id"]
    assert mean == pytest.approx(0.3) and lo < 0.2 and hi > 0.4
    d = iv["paired"]["milegpo-full - grpo"]["id"]
    assert d["diff"] == pytest.approx(0.05) and d["sd"] == pytest.approx(0.05) and d["n"] == 3
    assert d["ci"][0] < 0 < d["ci"][1]
    # sd 5 points, 2-point difference: a paired t-test at 80% power needs 52 seeds (noncentral t)
    assert d["seeds_for_2_points"] == 52 and iv["seeds_for_2_points"] == 52
    text = mod.intervals_table(records)
    assert "| milegpo-full - grpo | +5.0 [" in text and "needs about 52 seeds" in text
