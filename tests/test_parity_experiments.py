"""experiments/convention_testbed.py (credit conventions paired by seed) and experiments/parity_check.py (the
old configs and the reference presets against the recipe's credit): smoke runs."""

import json
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("scipy")

ROOT = Path(__file__).resolve().parents[1]


def _module(name: str):
    """The script's functions (its ``__main__`` block does not run)."""
    return SimpleNamespace(**runpy.run_path(str(ROOT / "experiments" / f"{name}.py"), run_name=name))


def test_convention_testbed_pairs_the_conventions_by_seed_and_resumes(tmp_path, capsys):
    mod = _module("convention_testbed")
    args = ["--out", str(tmp_path), "--seeds", "0", "1", "--methods", "graphgpo", "--tasks", "4", "--groups", "2",
            "--group-size", "3", "--iterations", "2", "--horizon", "10", "--eval-episodes", "1"]
    assert mod.main(args) == 0
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert sorted((r["seed"], r["convention"]) for r in records) == sorted(
        (s, c) for s in (0, 1) for c in ("default", "trajectory-penalty", "per-trajectory"))
    # a seed's first iteration is played before any update: the same under every convention
    for seed in (0, 1):
        assert len({json.dumps(r["curve"][0]) for r in records if r["seed"] == seed}) == 1
    text = (tmp_path / "table.md").read_text()
    assert "| graphgpo: trajectory-penalty - default |" in text
    assert "| graphgpo: per-trajectory - trajectory-penalty |" in text
    # a second call with the same flags finds every run recorded
    capsys.readouterr()
    assert mod.main(args) == 0
    assert "[seed" not in capsys.readouterr().out
    assert len((tmp_path / "records.jsonl").read_text().splitlines()) == 6
    with pytest.raises(SystemExit) as stop:
        mod.main(args + ["--overrides", '{"episode_penalty": "trip"}'])
    assert stop.value.code == 2


def test_parity_check_before_and_after():
    mod = _module("parity_check")
    result = mod.measure(2)
    for method in ("grpo", "gigpo", "graphgpo"):
        after = result["methods"][method]["after: graphgpo_reproduction"]
        before = result["methods"][method]["before: alfworld, gamma_G 0.1"]
        assert after["max_diff_groups_of_2+"] < 1e-9 and after["misordered"] == 0 and after["tied_of_those"] == 0
        assert before["max_diff_groups_of_2+"] > 0.1
    assert "| graphgpo | after: graphgpo_reproduction |" in mod.table(result)
