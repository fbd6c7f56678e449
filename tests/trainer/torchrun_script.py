"""Run by test_trainer.py under `torchrun --nproc_per_node=2` (gloo, CPU): two iterations with unequal rows.

Tasks 0-1 (process 0) last 1 step, tasks 2-3 (process 1) up to 5 steps, so the processes hold different
numbers of rows and must still take the same number of forward/backward chunks."""

import dataclasses
import json
import os
import sys
import tempfile
import warnings

import torch

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(__file__))

from warm_checkpoints import easy_tasks, make_model, make_tokenizer  # noqa: E402

from milegpo.config import MileGPOConfig  # noqa: E402
from milegpo.credit import estimate  # noqa: E402
from milegpo.trainer import MileGPOTrainer  # noqa: E402


class Counting(MileGPOTrainer):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.loss_calls, self.rows, self.batch_rows, self.match = 0, [], [], True

    def compute_loss(self, model, inputs, **kw):
        self.loss_calls += 1
        return super().compute_loss(model, inputs, **kw)

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        it = self.last_iteration
        self.rows.append(len(it["rollout"].rows))
        self.batch_rows.append(len(it["batch"]))
        exp = estimate(it["batch"], self.args.credit_method, self.args.credit_config(), self.args.credit_variant,
                       "reference").advantages[it["local"]]
        for chunks in out["micro_steps"]:
            for ch in chunks:
                real = ch["row_index"] >= 0
                idx = ch["row_index"][real].tolist()
                self.match &= bool(torch.allclose(ch["advantages"][real].double(), exp[idx], atol=1e-6))
                self.match &= bool((ch["advantages"][~real] == 0).all())
        return out


def main():
    torch.set_num_threads(1)
    out = os.environ["MILEGPO_OUT"]
    tok = make_tokenizer()
    model = make_model(tok, seed=0)
    tasks = easy_tasks("train", 4)
    tasks = [dataclasses.replace(t, horizon=1 if i < 2 else 5) for i, t in enumerate(tasks)]
    args = MileGPOConfig(output_dir=os.path.join(out, "run"), report_to="none", bf16=False, use_cpu=True,
                         ddp_backend="gloo", max_steps=2, groups_per_iteration=4, group_size=2, horizon=5,
                         num_train_tasks=4, max_completion_length=8, per_device_train_batch_size=4,
                         gradient_checkpointing=False, logging_steps=1, save_strategy="no", learning_rate=1e-3,
                         beta=0.0, shuffle_dataset=False, num_eval_tasks=0, seed=0)
    trainer = Counting(model, args, processing_class=tok, train_tasks=tasks, eval_tasks={})
    trainer.train()
    rank = trainer.accelerator.process_index
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"global_step": trainer.state.global_step, "rows": trainer.rows, "batch_rows": trainer.batch_rows,
                   "loss_calls": trainer.loss_calls, "advantages_match": trainer.match}, f)


if __name__ == "__main__":
    main()
