"""The default job (`milegpo train` with no flags but the output folder) learns: issue 50.

One seed of the embedded default run, as a user runs it first, with fewer evaluation games (8 per split instead of
the default's, so that it fits CI: the evaluations are not what is checked here). What is checked is the honest
signal that reinforcement learning works, not a fixed figure: the mean training success of the last ten iterations is
above the first iteration's. And the console carries no warning a user cannot act on.
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
    assert summary["constrain_actions"] is True  # the default writes admissible actions only (issue 50)
    success = [h["success_rate"] for h in summary["history"]]
    assert len(success) == TINY_DEFAULTS["max_steps"]
    assert sum(success[-10:]) / 10 > success[0], success  # the last ten iterations' mean, above the first's
    shown = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    assert not [m for m in shown if any(re.search(p, m) for p in TRL_DEPRECATION_WARNINGS)], shown
    text = capsys.readouterr()
    assert "is_gradient_checkpointing" not in text.err + text.out


def test_trl_deprecation_warnings_are_filtered_and_no_other():
    """TRL's generation helpers read transformers' deprecated `is_gradient_checkpointing` (and toggle the deprecated
    `gradient_checkpointing_*` when checkpointing is on): the job hides exactly those warnings, every other shows."""
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from trl.models.utils import disable_gradient_checkpointing

    from milegpo.job.pipeline import _quiet_trl_deprecations

    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=16, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1))
    model.activation_checkpointing_enable()

    def deprecations(quiet: bool) -> list[str]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with _quiet_trl_deprecations() if quiet else warnings.catch_warnings():
                with disable_gradient_checkpointing(model):  # what TRL runs around generation
                    pass
                warnings.warn("something else", FutureWarning)
        return [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]

    loud = deprecations(quiet=False)
    assert any("is_gradient_checkpointing" in m for m in loud) and any("gradient_checkpointing_enable" in m for m in loud)
    assert deprecations(quiet=True) == ["something else"]
