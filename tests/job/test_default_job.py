"""The default job (`milegpo train` with no flags but the output folder) learns: issue 50.

One seed of the embedded default run, as a user runs it first, with fewer evaluation games (8 per split instead of
the default's, so that it fits CI: the evaluations are not what is checked here). What is checked is the honest
signal that reinforcement learning works, not a fixed figure: the training success of the last iterations is above
the first iteration's (and above the first ten's). And the console carries no warning a user cannot act on.
"""

import json
import re
import warnings

import pytest
import torch

from milegpo.cli import main
from milegpo.job import TINY_DEFAULTS
from milegpo.job.pipeline import TRL_DEPRECATION_WARNINGS


@pytest.mark.slow
def test_default_job_raises_training_success_without_unactionable_warnings(tmp_path, capsys):
    torch.set_num_threads(1)
    out = tmp_path / "run"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["train", "--output_dir", str(out), "--num_eval_tasks", "8"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["iterations"] == TINY_DEFAULTS["max_steps"] and summary["sft_examples"] > 0
    success = [h["success_rate"] for h in summary["history"]]
    assert len(success) == TINY_DEFAULTS["max_steps"]
    last = sum(success[-10:]) / 10
    assert last > success[0] and last > sum(success[:10]) / 10, success
    shown = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    assert not [m for m in shown if any(re.search(p, m) for p in TRL_DEPRECATION_WARNINGS)], shown
    text = capsys.readouterr()
    assert "is_gradient_checkpointing" not in text.err + text.out
