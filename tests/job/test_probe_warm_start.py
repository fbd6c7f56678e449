"""scripts/probe_warm_start.py: per-verb scores of a (here: very short) warm start."""

import importlib.util
from pathlib import Path

import torch

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "probe_warm_start.py"


def test_probe_reports_scores_by_the_experts_verb(capsys):
    spec = importlib.util.spec_from_file_location("probe_warm_start", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    threads = torch.get_num_threads()
    try:
        res = mod.main(["--epochs", "0.2", "--sft_tasks", "8", "--hidden", "32", "--probe_steps", "12", "--games", "2"])
    finally:
        torch.set_num_threads(threads)
    assert res["sft_examples"] > 0 and 0.0 <= res["valid"] <= 1.0 and 0.0 <= res["match"] <= res["valid"]
    steps = [v.split("/") for v in res["match_by_verb"].values()]
    assert sum(int(total) for _, total in steps) == 12 and {"go", "take"} <= set(res["match_by_verb"])
    assert set(res["wins"]) == {"greedy", "T=0.4"} and res["wins"]["greedy"].endswith("/2")
    assert '"match_by_verb"' in capsys.readouterr().out
