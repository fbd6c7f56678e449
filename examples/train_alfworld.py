"""Train an LLM agent on ALFWorld-like text games with MileGPO credit assignment.

    # one process, the embedded household world (no install needed)
    python examples/train_alfworld.py --model_name_or_path Qwen/Qwen2.5-1.5B-Instruct --output_dir runs/milegpo

    # the paper's recipe (README.md, "Reproduce the paper"), on the paper's 2 GPUs
    accelerate launch --config_file examples/accelerate/2gpu.yaml examples/train_alfworld.py \
        --config examples/recipes/alfworld/milegpo_full.yaml --output_dir runs/alfworld_milegpo_full

    # 8 GPUs, vLLM colocated, GiGPO baseline, ALFWorld games
    accelerate launch --num_processes 8 examples/train_alfworld.py --model_name_or_path Qwen/Qwen2.5-1.5B-Instruct \
        --env alfworld --use_vllm --vllm_mode colocate --credit_method gigpo --output_dir runs/gigpo \
        --eval_strategy steps --eval_steps 5 --report_to tensorboard

Every MileGPOConfig / GRPOConfig field is a flag (``--help``); ``--config recipe.yaml`` reads them from a file
(flags given win over it). ``examples/train_webshop.py`` is the same script with WebShop's defaults.
"""

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from milegpo.job.flags import check_query_goals, check_run_environment, check_tasks, check_user_anchor
from milegpo.job.parser import MileGPOParser  # TrlParser that reads `env: alfworld` in a --config recipe
from milegpo.trainer.config import MileGPOConfig
from milegpo.trainer import MileGPOTrainer
from milegpo.usage import UsageError


@dataclass
class ScriptArguments:
    model_name_or_path: str = field(default="Qwen/Qwen2.5-1.5B-Instruct", metadata={"help": "Policy model."})


def parse_args(argv: Sequence[str] | None = None, defaults: dict[str, Any] | None = None):
    """(ScriptArguments, MileGPOConfig) of the command line ``argv`` (default ``sys.argv[1:]``); ``defaults``
    replace MileGPOConfig's before the ``--config`` file and the flags are read."""
    parser = MileGPOParser((ScriptArguments, MileGPOConfig))
    if defaults:
        parser.set_defaults(**defaults)
    return parser.parse_args_and_config(None if argv is None else list(argv))


def main(argv: Sequence[str] | None = None, defaults: dict[str, Any] | None = None) -> None:
    script_args, training_args = parse_args(argv, defaults)
    try:  # what the run needs from this machine (vLLM, the Hub, TensorBoard's folder, the games), before any model
        check_run_environment(script_args.model_name_or_path, training_args)
        for check in (check_tasks, check_user_anchor, check_query_goals):  # the games, a user's anchor, the goals
            check(training_args, train=training_args.max_steps != 0)
    except UsageError as e:
        raise SystemExit(f"{Path(sys.argv[0]).name}: error: {e}") from None
    trainer = MileGPOTrainer(model=script_args.model_name_or_path, args=training_args)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.save_model(training_args.output_dir)
    if training_args.eval_splits and training_args.num_eval_tasks:
        trainer.evaluate()
    trainer.close()  # stops the environment workers
    # under torchrun / accelerate launch: the process group goes down while the interpreter is whole (a gloo
    # group left to the interpreter's exit can abort a process: pytorch/pytorch#190489); nothing single-process
    trainer.accelerator.end_training()


if __name__ == "__main__":
    main()
