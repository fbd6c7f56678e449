"""vLLM server mode end to end: two MileGPO iterations against a local ``trl vllm-serve``, and a check that the
trained weights reached the server (its log-probabilities of fixed sequences change, to the trainer's).

Needs two CUDA GPUs and vLLM: TRL 1.16 sends the weights to the server over NCCL, and NCCL takes no two ranks
on one GPU ("Duplicate GPU detected"), so the server and the trainer run on different GPUs. Run by
``scripts/gpu_check.sh`` (step ``server``) as

    CUDA_VISIBLE_DEVICES=0 python scripts/vllm_server_check.py --server-gpu 1 --out DIR

(the trainer on the one GPU it sees, the server started on physical GPU ``--server-gpu``). The model is the
test suite's warm-started tiny Qwen2 (``tests/trainer/warm_checkpoints.py``, head_dim 64 for vLLM), built under
``DIR``; nothing is downloaded. Prints ``SERVER_*`` lines; exit 0 when the weights reached the server, 1 when
they did not, 2 when it cannot run here (no vLLM, no second GPU). Not run in CI (no GPU there).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "trainer"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: str, gpu: str, port: int, log: Path) -> subprocess.Popen:
    """``trl vllm-serve`` (TRL's script: ``vllm serve`` with the NCCL weight transfer, dev mode on) on ``gpu``."""
    command = [sys.executable, "-m", "trl.scripts.vllm_serve", "--model", model, "--host", "127.0.0.1",
               "--port", str(port), "--gpu_memory_utilization", "0.3", "--max_model_len", "2048",
               "--dtype", "bfloat16", "--enforce_eager", "true"]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpu}
    print("SERVER_COMMAND", " ".join(command), flush=True)
    # same process group as this script: gpu_check.sh's `timeout` stops both
    return subprocess.Popen(command, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def wait_for_server(server: subprocess.Popen, base_url: str, log: Path, timeout_s: float):
    """TRL's client of the server at ``base_url`` once it answers ``/health``; a RuntimeError naming its log
    when it exits first or does not answer within ``timeout_s``."""
    import requests
    from trl.generation.vllm_client import VLLMClient

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with code {server.returncode} before answering; its log: {log}")
        try:
            if requests.get(f"{base_url}/health", timeout=5).status_code == 200:
                return VLLMClient(base_url=base_url)
        except requests.exceptions.RequestException:
            pass
        time.sleep(2)
    raise RuntimeError(f"the server did not answer {base_url}/health within {timeout_s:.0f} s; its log: {log}")


def stop_server(server: subprocess.Popen) -> None:
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def probe_sequences(tokenizer, n: int = 4):
    """(token ids of prompt + expert completion, prompt length) of ``n`` expert steps of the easy household
    tasks: fixed sequences whose log-probabilities the server and the trainer both give."""
    from warm_checkpoints import easy_tasks, expert_episodes

    pairs = expert_episodes(easy_tasks("train", 2))[:n]
    sequences, prompt_lengths = [], []
    for prompt, completion in pairs:
        ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                            tokenize=True, return_dict=True)["input_ids"]
        ids = list(ids[0]) if ids and isinstance(ids[0], list) else list(ids)
        sequences.append(ids + tokenizer(completion)["input_ids"] + [tokenizer.eos_token_id])
        prompt_lengths.append(len(ids))
    return sequences, prompt_lengths


def server_logprobs(client, sequences, prompt_lengths) -> list[float]:
    """The server's log-probability of every completion token of ``sequences`` (flat)."""
    out = client.get_sequence_logprobs(sequences, prompt_lengths, top_logprobs=1)
    values = [lp[0] for seq in out["actual_logprobs"] for lp in seq]
    if not all(math.isfinite(v) for v in values):
        raise RuntimeError(f"the server gave no log-probability for some prompt token: {values}")
    return values


def trainer_logprobs(model, sequences, prompt_lengths) -> list[float]:
    """The trainer's model's log-probabilities of the same tokens (float32, no autocast)."""
    import torch

    values = []
    with torch.no_grad():
        for ids, start in zip(sequences, prompt_lengths):
            x = torch.tensor([ids], device=model.device)
            logp = torch.log_softmax(model(input_ids=x).logits.float()[0, :-1], dim=-1)
            values += logp[torch.arange(start - 1, len(ids) - 1), x[0, start:]].tolist()
    return values


def greedy(client, sequences, prompt_lengths) -> list[list[int]]:
    prompts = [ids[:start] for ids, start in zip(sequences, prompt_lengths)]
    return client.generate(prompts, temperature=0.0, max_tokens=8, logprobs=None)["completion_ids"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-gpu", required=True, help="physical GPU index of the server (not the trainer's)")
    parser.add_argument("--out", required=True, type=Path, help="folder for the model, the logs and the run")
    parser.add_argument("--startup-timeout", type=float, default=240.0, help="seconds to wait for the server")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout`: run the finally below, stop the server

    import torch

    from trl.import_utils import is_vllm_available

    if not torch.cuda.is_available() or not is_vllm_available():
        print(f"SERVER_SKIPPED cuda={torch.cuda.is_available()} vllm={is_vllm_available()}")
        return 2
    trainer_gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if trainer_gpu.split(",")[0] == args.server_gpu:
        print(f"SERVER_SKIPPED the trainer's GPU is the server's ({args.server_gpu}): NCCL takes no two ranks on "
              "one GPU")
        return 2

    from warm_checkpoints import build_warm_checkpoint, easy_tasks

    from milegpo import MileGPOConfig
    from milegpo.job.policy import reload_tokenizer
    from milegpo.trainer import MileGPOTrainer
    args.out.mkdir(parents=True, exist_ok=True)
    model_dir = build_warm_checkpoint(str(args.out / "model"), hidden=128, heads=2, kv_heads=1)  # head_dim 64
    tokenizer = reload_tokenizer(model_dir)  # the tiny tokenizer as saved (AutoTokenizer decodes it unspaced)
    sequences, prompt_lengths = probe_sequences(tokenizer)
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    server = start_server(model_dir, args.server_gpu, port, args.out / "server.log")
    trainer = None
    try:
        client = wait_for_server(server, base_url, args.out / "server.log", args.startup_timeout)
        print("SERVER_UP_S", round(time.perf_counter() - started, 1), flush=True)
        before = server_logprobs(client, sequences, prompt_lengths)
        greedy_before = greedy(client, sequences, prompt_lengths)

        cfg = MileGPOConfig(output_dir=str(args.out / "run"), report_to="none", bf16=False, max_steps=2,
                            groups_per_iteration=2, group_size=4, horizon=4, num_train_tasks=4,
                            max_completion_length=16, per_device_train_batch_size=8, activation_checkpointing=False,
                            logging_steps=1, save_strategy="no", learning_rate=1e-2, beta=0.0, num_eval_tasks=2,
                            use_vllm=True, vllm_mode="server", vllm_server_base_url=base_url,
                            vllm_group_port=free_port(), num_env_workers=0)
        trainer = MileGPOTrainer(model_dir, args=cfg, processing_class=tokenizer,
                                 train_tasks=easy_tasks("train", 4, 4),
                                 eval_tasks={"id": easy_tasks("id", 2, 4), "ood": easy_tasks("ood", 2, 4)})
        t0 = time.perf_counter()
        trainer.train()
        print("SERVER_TRAIN_S", round(time.perf_counter() - t0, 1), "steps", trainer.state.global_step)
        rows = trainer.last_iteration["rollout"].rows
        print("SERVER_ROW_LOGPROBS", rows[0].logprobs is not None, "rows", len(rows))
        trainer.evaluate()  # a generation after the last optimizer step sends the final weights
        after = server_logprobs(client, sequences, prompt_lengths)
        greedy_after = greedy(client, sequences, prompt_lengths)
        trained = trainer_logprobs(trainer.model.eval(), sequences, prompt_lengths)
    finally:
        if trainer is not None:
            trainer.close()
        stop_server(server)

    moved = max(abs(a - b) for a, b in zip(after, before))
    synced = max(abs(a - t) for a, t in zip(after, trained))
    changed = sum(a != b for a, b in zip(greedy_after, greedy_before))
    print("SERVER_LOGPROB_MOVED", f"{moved:.4g}", "(server after training vs before)")
    print("SERVER_LOGPROB_SYNC_MAXDIFF", f"{synced:.4g}", "(server after training vs the trainer's model, bf16 vs fp32)")
    print("SERVER_GREEDY_CHANGED", f"{changed}/{len(greedy_after)}")
    reached = moved > 5 * synced and moved > 1e-2
    print("SERVER_WEIGHTS_REACHED", reached)
    return 0 if reached else 1


if __name__ == "__main__":
    sys.exit(main())
