"""The `milegpo` command: demo, replay, generate-games (train / eval: tests/job/test_pipeline.py)."""

import json

from milegpo.cli import main
from milegpo.credit import StepBatch


def test_demo_prints_methods_diagnostics_and_writes_plot(tmp_path, capsys):
    batch_file = tmp_path / "batch.npz"
    assert main(["demo", "--groups", "2", "--group-size", "4", "--horizon", "8", "--plots", str(tmp_path),
                 "--save", str(batch_file)]) == 0
    out = capsys.readouterr().out
    for word in ("grpo", "gigpo", "graphgpo", "milegpo", "tie_correction_rate", "shared_state_coverage"):
        assert word in out
    assert (tmp_path / "advantages_by_method.png").stat().st_size > 1000
    assert len(StepBatch.load(batch_file)) > 0
    assert main(["replay", str(batch_file), "--preset", "webshop", "--variant", "rcs", "--rows", "0"]) == 0
    assert "preset webshop, variant rcs" in capsys.readouterr().out


def test_generate_household_games(tmp_path, capsys):
    path = tmp_path / "games.jsonl"
    assert main(["generate-games", "household", str(path), "--split", "ood", "--n", "3"]) == 0
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 3 and all(r["split"] == "ood" and r["walkthrough"] for r in rows)
