"""The flags of ``milegpo train`` / ``milegpo eval``: :class:`JobArguments` and every MileGPOConfig field.

:func:`parse` reads them with TRL's ``TrlParser`` (``--config recipe.yaml`` works too). Without
``--model_name_or_path`` the defaults change to :data:`TINY_DEFAULTS` (a CPU-sized run of a few minutes);
a policy saved by ``milegpo train`` carries :data:`TASK_SETTINGS` (its games and prompt), which become the
defaults when it is given. Flags given on the command line always win.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

#: defaults of the embedded run (no --model_name_or_path): the household world's shortest task type in rooms
#: of 4 receptacles, the compact prompt, a tiny Qwen2 (hidden 128) warm-started for 24 epochs, 4 groups x 4
#: episodes per iteration; sized to finish in a few minutes on 2 CPU cores (notes/main_job.md: why each).
TINY_DEFAULTS: dict[str, Any] = dict(
    env_options={"max_receptacles": 4}, prompt_style="compact", tiny_hidden=128, sft_epochs=24.0,
    sft_learning_rate=3e-3,
    output_dir="milegpo_run", task_type="look_at_obj_in_light", horizon=8, num_train_tasks=64,
    groups_per_iteration=4, group_size=4, max_steps=50, learning_rate=3e-4, max_completion_length=16,
    per_device_train_batch_size=64, num_eval_tasks=48, eval_group_size=1, temperature=1.0, beta=0.01,
    logging_steps=1, save_strategy="no", report_to="none", bf16=False, seed=0, dataloader_num_workers=0,
    gradient_checkpointing=False,
)


@dataclass
class JobArguments:
    """Arguments of the job around the trainer (the trainer's own are MileGPOConfig's)."""

    model_name_or_path: str | None = field(default=None, metadata={
        "help": "Policy model (hub id or path). Not given: a tiny Qwen2 and tokenizer built on the spot."})
    sft_epochs: float = field(default=3.0, metadata={"help": "Epochs of the SFT warm start (0: none)."})
    sft_tasks: int = field(default=64, metadata={"help": "Training tasks whose expert walkthroughs the warm "
                                                         "start learns (seeds after the RL training tasks)."})
    sft_learning_rate: float = field(default=5e-3, metadata={"help": "Learning rate of the warm start "
                                                                     "(tiny model: 5e-3; real models: ~1e-5)."})
    sft_batch_size: int = field(default=16, metadata={"help": "Examples per SFT step."})
    sft_explore: float = field(default=0.2, metadata={"help": "Share of random actions while recording the "
                                                              "walkthroughs (labels stay the expert's)."})
    sft_expert: str = field(default="search", metadata={
        "help": "Whose walkthroughs: 'search' (acts on what it has seen) or 'oracle' (knows every object's place)."})
    tiny_hidden: int = field(default=64, metadata={"help": "Hidden size of the tiny model."})
    tiny_layers: int = field(default=2, metadata={"help": "Layers of the tiny model."})
    eval_before: bool = field(default=True, metadata={"help": "Evaluate the warm-started policy before RL."})
    save_batches: bool = field(default=True, metadata={"help": "Save every iteration's StepBatch (.npz)."})
    plots: bool = field(default=True, metadata={"help": "Write the PNG plots."})
    threads: int = field(default=0, metadata={"help": "torch CPU threads (0: leave torch's default)."})


#: the file beside a saved policy that records the games and prompt it was trained with (`milegpo eval` and
#: `milegpo train --model_name_or_path` of that policy take them as defaults)
TASK_SETTINGS = "milegpo_task.json"
#: the MileGPOConfig fields :data:`TASK_SETTINGS` records
TASK_FIELDS = ("env", "task_type", "horizon", "env_options", "prompt_style", "history_length",
               "max_completion_length")


def _flag_value(argv: Sequence[str], flag: str) -> str | None:
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def build_parser(prog: str = "milegpo train"):
    from trl import TrlParser

    from ..config import MileGPOConfig

    return TrlParser((JobArguments, MileGPOConfig), prog=prog)


def parse(argv: Sequence[str] | None = None, prog: str = "milegpo train"):
    """(JobArguments, MileGPOConfig) from command-line flags (``--config file.yaml`` works too)."""
    import torch

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(prog)
    defaults: dict[str, Any] = {}
    model_path = _flag_value(argv, "--model_name_or_path")
    if model_path is None:
        defaults.update(TINY_DEFAULTS)
    elif (Path(model_path) / TASK_SETTINGS).is_file():
        # a policy saved by `milegpo train` plays (and goes on training on) the games it was trained on
        defaults.update(json.loads((Path(model_path) / TASK_SETTINGS).read_text()))
    if not torch.cuda.is_available():  # GRPOConfig defaults to bf16 on an accelerator
        defaults.update(use_cpu=True, bf16=False)
    parser.set_defaults(**defaults)
    job, cfg = parser.parse_args_and_config(args=argv)
    return job, cfg


__all__ = ["JobArguments", "TINY_DEFAULTS", "TASK_SETTINGS", "TASK_FIELDS", "build_parser", "parse"]
