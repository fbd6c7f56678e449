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


def test_paper_mechanism_tables_the_figures_per_seed(tmp_path):
    # experiments/paper_mechanism.py: every world, anchor and reading played once (2 seeds, tiny batches), the
    # figures read back from credit_quality.json's per-batch diagnostics; a second call plays nothing
    mod = _module("paper_mechanism")
    out = tmp_path / "mech"
    assert mod.main(["--out", str(out), "--seeds", "2", "--groups", "2", "--group-size", "3"]) == 0
    figures = json.loads((out / "figures.json").read_text())
    assert len(figures["mechanism"]) == 8 and figures["testbed"] == {}
    for row in figures["mechanism"].values():
        assert row["seeds"] == 2 and len(row["shared-state coverage"]["per_seed"]) == 2
        assert 0.0 <= row["shared-state coverage"]["mean"] <= 1.0
    assert set(figures["paired"]) == {f"{w} / {a}" for w in ("household", "webshop")
                                      for a in ("tracked+actions", "observation")}
    # md's potentials read no score the reading changes: exactly the same credit order under both
    for where in figures["paired"].values():
        assert where["milegpo-md: paper - spec"]["same_state_auc"]["diff"] == 0.0
    text = (out / "table.md").read_text()
    assert "| paper, webshop | | 73.9 | 72.7 | 17.0 | 26.5 |" in text
    stamp = (out / "household_observation_alfworld_paper" / "credit_quality.json").stat().st_mtime
    assert mod.main(["--out", str(out), "--seeds", "2", "--groups", "2", "--group-size", "3"]) == 0
    assert (out / "household_observation_alfworld_paper" / "credit_quality.json").stat().st_mtime == stamp
