"""Train an LLM agent on ALFWorld-like text games with MileGPO credit assignment.

    # one process, the embedded household world (no install needed)
    python examples/train_alfworld.py --model_name_or_path Qwen/Qwen2.5-1.5B-Instruct --output_dir runs/milegpo

    # 8 GPUs, vLLM colocated, GiGPO baseline, ALFWorld games
    accelerate launch --num_processes 8 examples/train_alfworld.py --model_name_or_path Qwen/Qwen2.5-1.5B-Instruct \
        --env alfworld --use_vllm --vllm_mode colocate --credit_method gigpo --output_dir runs/gigpo \
        --eval_strategy steps --eval_steps 5 --report_to wandb

Every MileGPOConfig / GRPOConfig field is a flag (``--help``); ``--config recipe.yaml`` reads them from a file.
"""

from dataclasses import dataclass, field

from trl import TrlParser

from milegpo.trainer.config import MileGPOConfig
from milegpo.trainer import MileGPOTrainer


@dataclass
class ScriptArguments:
    model_name_or_path: str = field(default="Qwen/Qwen2.5-1.5B-Instruct", metadata={"help": "Policy model."})


def main():
    parser = TrlParser((ScriptArguments, MileGPOConfig))
    script_args, training_args = parser.parse_args_and_config()
    trainer = MileGPOTrainer(model=script_args.model_name_or_path, args=training_args)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.save_model(training_args.output_dir)
    if training_args.eval_splits and training_args.num_eval_tasks:
        trainer.evaluate()
    trainer.close()  # stops the environment workers


if __name__ == "__main__":
    main()
