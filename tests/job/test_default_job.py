"""The default job (`milegpo train` with no flags but the output folder) learns: issue 50.

One seed of the embedded default run, as a user runs it first, evaluated on the in-distribution split only (its
300 games; the OOD split's evaluations are not what is checked here, and skipping them saves about a minute). What is
checked is the honest signal that reinforcement learning works, not a fixed figure: the policy after RL wins more of
those 300 games than the warm start did (both evaluations play the same games). Training success is no such signal
since the default trains on fresh games: one iteration's 32 episodes are one draw (the test's seed wins all 32 at
iteration 1, notes/main_job.md, seventeenth round). And the console carries no warning a user cannot act on.
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
def test_default_job_wins_more_held_out_games_after_rl_without_unactionable_warnings(tmp_path, capsys):
    torch.set_num_threads(1)
    out = tmp_path / "run"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["train", "--output_dir", str(out), "--eval_splits", "id"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["iterations"] == TINY_DEFAULTS["max_steps"] and summary["sft_examples"] > 0
    assert summary["constrain_actions"] is True  # the default writes admissible actions only (issue 50)
    assert summary["constrained_sampling"] == "sequence"  # each drawn by its whole probability (17th round)
    assert len(summary["history"]) == TINY_DEFAULTS["max_steps"]
    before, after = summary["before"]["id_success_rate"], summary["after"]["id_success_rate"]
    assert after > before, (before, after)  # RL wins more of the same 300 held-out games than the warm start
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
