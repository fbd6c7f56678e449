"""experiments/state_similarity.py: a smoke run (every setting's row in the tables, the JSON), and the tables
gathered again from the saved reports."""

import json
import runpy
from pathlib import Path
from types import SimpleNamespace

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "state_similarity.py"


def test_smoke_run_writes_the_tables_of_exact_and_merged_keys(tmp_path):
    mod = SimpleNamespace(**runpy.run_path(str(SCRIPT), run_name="state_similarity"))
    args = ["--out", str(tmp_path), "--envs", "household", "--seeds", "0", "--groups", "2", "--group-size", "3",
            "--horizon", "12", "--resamples", "50", "--thresholds", "0.8", "0.6"]
    assert mod.main(args) == 0
    summary = json.loads((tmp_path / "table.json").read_text())
    keys = summary["household"]["keys"]
    assert list(keys) == ["exact", "similarity 0.8", "similarity 0.6"]
    assert keys["exact"]["states"] >= keys["similarity 0.6"]["states"] > 0
    assert "against_exact" in keys["similarity 0.6"] and "against_exact" not in keys["exact"]
    table = (tmp_path / "table.md").read_text()
    assert table.count("| household | similarity 0.6 |") == 5  # diagnostics, two AUCs, two paired differences
    assert table.count("| household | exact |") == 3
    assert mod.main(args[:4] + ["--table-only"]) == 0
    assert (tmp_path / "table.md").read_text() == table
