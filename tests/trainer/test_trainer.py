"""End-to-end MileGPOTrainer runs on CPU with a warm-started tiny Qwen2 (built in the session)."""

import json
import math
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from milegpo.trainer.config import MileGPOConfig
from milegpo.job.policy import reload_tokenizer
from milegpo.credit import StepBatch, estimate
from milegpo.trainer import MileGPOTrainer
from milegpo_kernels import interpreter_on
from warm_checkpoints import easy_tasks

torch.set_num_threads(1)


class RecordingTrainer(MileGPOTrainer):
    """Keeps, per iteration, the recorded StepBatch and every chunk the loss saw."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.records = []

    def play_iteration(self, inputs):
        out = super().play_iteration(inputs)
        self.records.append({**self.last_iteration, "micro_steps": out["micro_steps"]})
        return out


def make_args(tmp_path, **kw):
    base = dict(output_dir=str(tmp_path / "out"), report_to="none", bf16=False, use_cpu=True, max_steps=2,
                groups_per_iteration=2, group_size=4, horizon=6, num_train_tasks=4, max_completion_length=16,
                per_device_train_batch_size=8, num_eval_tasks=4, gradient_checkpointing=False, logging_steps=1,
                save_strategy="no", learning_rate=1e-3, temperature=1.0, dataloader_num_workers=0, seed=0)
    base.update(kw)
    return MileGPOConfig(**base)


def tasks():
    return easy_tasks("train", 4), {"id": easy_tasks("id", 4), "ood": easy_tasks("ood", 4)}


def assert_trained_on_estimate(trainer, args, method):
    """Every recorded iteration trained each row once, on the advantage the reference estimator gives
    the recorded StepBatch; some advantage is non-zero."""
    any_nonzero = False
    for rec in trainer.records:
        batch = rec["batch"]
        assert isinstance(batch, StepBatch) and len(batch) == len(rec["rollout"].rows)
        # the advantages the loss used are the ones `estimate` returns for the recorded StepBatch
        expected = estimate(batch, method, args.credit_config(), args.credit_variant, "reference").advantages
        expected = expected[rec["local"]].numpy()
        seen = []
        for chunks in rec["micro_steps"]:
            for ch in chunks:
                real = ch["row_index"] >= 0
                idx = ch["row_index"][real].tolist()
                np.testing.assert_allclose(ch["advantages"][real].cpu().numpy(), expected[idx].astype(np.float32),
                                           rtol=1e-6, atol=1e-6)
                assert (ch["advantages"][~real] == 0).all() and (ch["completion_mask"][~real] == 0).all()
                seen += idx
        assert sorted(seen) == list(range(len(batch)))  # every row trained on, once
        any_nonzero |= bool(np.abs(expected).max() > 0)
    assert any_nonzero, "all advantages were zero: the warm start did not give mixed outcomes"


@pytest.mark.slow
@pytest.mark.parametrize("method", ["milegpo", "gigpo"])
def test_two_iterations_train_on_estimate_advantages(tmp_path, warm_checkpoint, method):
    tok = reload_tokenizer(warm_checkpoint)  # AutoTokenizer would re-tokenize the tiny vocabulary (main_job)
    train, evals = tasks()
    args = make_args(tmp_path, credit_method=method)
    trainer = RecordingTrainer(warm_checkpoint, args=args, processing_class=tok, train_tasks=train, eval_tasks=evals)
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()
    assert trainer.state.global_step == 2 and len(trainer.records) == 2

    changed = [k for k, v in trainer.model.named_parameters() if not torch.equal(v.detach(), before[k])]
    assert changed, "no weight changed after two iterations"
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 2 and all(np.isfinite(losses))

    assert_trained_on_estimate(trainer, args, method)

    log = trainer.state.log_history[0]
    for key in ("episode/success_rate", "episode/episode_length", "episode/invalid_action_rate",
                "episode/success/look_at_obj_in_light", "rows/iteration", "credit/shared_state_coverage"):
        assert key in log, key
    metrics = trainer.evaluate()
    for key in ("eval_id_success_rate", "eval_ood_success_rate", "eval_id_minus_ood"):
        assert key in metrics
    assert metrics["eval_id_minus_ood"] == pytest.approx(metrics["eval_id_success_rate"]
                                                         - metrics["eval_ood_success_rate"])


@pytest.mark.slow
def test_checkpoint_and_resume(tmp_path, warm_checkpoint):
    tok = reload_tokenizer(warm_checkpoint)  # AutoTokenizer would re-tokenize the tiny vocabulary (main_job)
    train, evals = tasks()
    args = make_args(tmp_path, save_strategy="steps", save_steps=1, max_steps=2, beta=0.0, horizon=3)
    MileGPOTrainer(warm_checkpoint, args=args, processing_class=tok, train_tasks=train, eval_tasks=evals).train()
    ckpt = tmp_path / "out" / "checkpoint-2"
    assert (ckpt / "trainer_state.json").exists() and (ckpt / "optimizer.pt").exists()
    args = make_args(tmp_path, save_strategy="no", max_steps=3, beta=0.0, horizon=3)
    trainer = MileGPOTrainer(warm_checkpoint, args=args, processing_class=tok, train_tasks=train, eval_tasks=evals)
    trainer.train(resume_from_checkpoint=str(ckpt))
    assert trainer.state.global_step == 3
    assert [h["step"] for h in trainer.state.log_history if "loss" in h] == [1, 2, 3]


def torchrun(out, n_processes: int, model: str, *script_args: str) -> list[dict]:
    """torchrun_script.py under ``torchrun --nproc_per_node n_processes`` (gloo, CPU) with the policy at
    ``model``; each process's JSON record, in rank order."""
    script = os.path.join(os.path.dirname(__file__), "torchrun_script.py")
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MILEGPO_OUT": str(out), "MILEGPO_MODEL": model}
    with socket.socket() as s:  # a free port: other test runs may share the machine
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={n_processes}", f"--master_port={port}",
           script, *script_args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return [json.load(open(out / f"rank{r}.json")) for r in range(n_processes)]


@pytest.mark.slow
@pytest.mark.parametrize("n_processes", [2, 3])
def test_torchrun_each_process_credits_only_its_own_groups(tmp_path, warm_checkpoint, n_processes):
    """2 and 3 gloo processes, 2 groups x 2 episodes each, tasks of horizon 1 / 5 / 3 per process: every
    process estimates credit once per iteration, on its own rows only (process 0: 2 x 2 one-step episodes = 4
    rows whatever the number of processes), trains on the advantages a one-process estimate of the whole
    batch gives its rows, logs the whole batch's credit diagnostics and advantage statistics, and runs as
    many forward/backward chunks as the others."""
    res = torchrun(tmp_path, n_processes, warm_checkpoint, "credit")
    assert all(r["global_step"] == 2 for r in res)
    for it in range(2):
        parts = [r["iterations"][it] for r in res]
        rows = [p["local_rows"] for p in parts]
        assert len(set(rows)) > 1, "the test needs unequal row counts per process"
        starts = np.cumsum([0, *rows])
        for rank, part in enumerate(parts):
            assert part["whole_rows"] == sum(rows)
            assert part["local"] == [int(starts[rank]), int(starts[rank + 1])]  # rank order in the whole batch
            assert part["credit_rows"] == [part["local_rows"]]  # one estimate, of this process's rows only
            assert part["advantages_match"]
        assert parts[0]["credit_rows"] == [2 * 2 * 1]  # does not grow with the number of processes
    assert len({r["loss_calls"] for r in res}) == 1  # the same number of forward/backward chunks
    for r in res:
        assert r["logged_iterations"] == 2 and r["metric_mismatches"] == []
        assert {"credit/tie_share", "credit/traps", "credit/adv_std", "advantages/std"} <= set(r["credit_keys"])
    assert res[0]["nonzero_advantages"] > 0, "all advantages were zero: the comparison would be empty"


@pytest.mark.slow
@pytest.mark.parametrize("method", ["hgpo", "g2po", "beacon"])
def test_torchrun_field_methods_credit_only_each_process_s_groups(tmp_path, warm_checkpoint, method):
    """HGPO's history groups, G2PO's node values and BEACON's segments never cross a task group (issues 42, 47):
    under 2 gloo processes each process estimates its own rows once per iteration and trains on what one estimate
    of the whole batch gives them, as for the paper's methods (test_torchrun_each_process_credits_only_its_own_groups);
    the household's milestones reach the gathered batch (BEACON's segments are not all one)."""
    res = torchrun(tmp_path, 2, warm_checkpoint, "credit", method)
    assert all(r["global_step"] == 2 for r in res)
    for it in range(2):
        parts = [r["iterations"][it] for r in res]
        for part in parts:
            assert part["credit_rows"] == [part["local_rows"]] and part["advantages_match"]
            assert part["milestones"] > 0
        assert sum(p["local_rows"] for p in parts) == parts[0]["whole_rows"]
    for r in res:
        assert r["logged_iterations"] == 2 and r["metric_mismatches"] == []
    assert res[0]["nonzero_advantages"] > 0, "all advantages were zero: the comparison would be empty"


@pytest.fixture(scope="module")
def ddp_one_chunk(tmp_path_factory, warm_checkpoint):
    """The reference update: 2 DDP processes, one optimizer step of 2 micro-steps of one chunk each."""
    out = tmp_path_factory.mktemp("ddp_one_chunk")
    return torchrun(out, 2, warm_checkpoint, "engine", "ddp", "256"), saved_weights(out / "final")


def saved_weights(path) -> dict[str, torch.Tensor]:
    return {k: v.detach() for k, v in AutoModelForCausalLM.from_pretrained(path).named_parameters()}


@pytest.mark.slow
@pytest.mark.parametrize("engine, distributed_type", [("fsdp2", "FSDP"), ("zero2", "DEEPSPEED"),
                                                      ("zero3", "DEEPSPEED")])
def test_engine_chunked_micro_steps_give_the_one_chunk_ddp_update(tmp_path, warm_checkpoint, ddp_one_chunk, engine,
                                                                    distributed_type):
    """FSDP2 and DeepSpeed ZeRO-2 / ZeRO-3 through accelerate, 2 gloo processes on CPU: one optimizer step
    (SGD) of 2 accumulated micro-steps of chunks of 3 rows syncs gradients on the last backward only, takes
    one optimizer step, and gives the weights of DDP with one chunk per micro-step (the same episodes: the
    same seed and weights). ZeRO-3 generates with gathered weights, FSDP2 with synced processes; the
    reference KL (beta 0.01) runs through each engine's reference model."""
    if engine.startswith("zero"):
        pytest.importorskip("deepspeed", reason="DeepSpeed is the optional extra milegpo[deepspeed]")
    reference, reference_weights = ddp_one_chunk
    res = torchrun(tmp_path, 2, warm_checkpoint, "engine", engine, "3")
    for ref, run in zip(reference, res):
        assert ref["backward_sync"] == [False, True] and ref["optimizer_steps"] == 1
        assert run["distributed_type"] == f"DistributedType.{distributed_type}"
        (chunks,) = run["chunks"]
        assert len(chunks) == 2 and min(chunks) > 1, "the test needs several chunks per micro-step"
        assert run["backward_sync"] == [False] * (sum(chunks) - 1) + [True]
        assert run["optimizer_steps"] == 1 and run["global_step"] == 1
        assert run["synced_generation"] == (engine == "fsdp2")  # transformers' generate syncs FSDP2 processes
        assert run["batch"] == ref["batch"], "the same seed and weights should play the same episodes"
    weights = saved_weights(tmp_path / "final")  # trainer.save_model: the weights gathered from the shards
    assert set(weights) == set(reference_weights)
    for name, value in reference_weights.items():
        torch.testing.assert_close(weights[name], value, rtol=1e-4, atol=1e-6, msg=lambda m: f"{name}: {m}")
    start = saved_weights(warm_checkpoint)
    assert any(not torch.equal(start[k], v) for k, v in reference_weights.items())  # the step moved the weights


@pytest.mark.slow
@pytest.mark.parametrize("loss_type", ["dapo", "grpo"])
def test_chunking_does_not_change_the_update(tmp_path, warm_checkpoint, loss_type):
    """One optimizer step with SGD: rows in one chunk of 256 give the weights of rows in chunks of 3, and of
    rows in 2 accumulated micro-steps (gradient_accumulation_steps=2) of chunks of 3."""
    tok = reload_tokenizer(warm_checkpoint)  # AutoTokenizer would re-tokenize the tiny vocabulary (main_job)
    train, evals = tasks()
    weights = []
    for chunk, ga in ((256, 1), (3, 1), (3, 2)):
        args = make_args(tmp_path / f"{chunk}-{ga}", per_device_train_batch_size=chunk, max_steps=1, beta=0.0,
                         optim="sgd", learning_rate=0.5, loss_type=loss_type, max_grad_norm=0.0, horizon=4,
                         gradient_accumulation_steps=ga)
        tr = RecordingTrainer(warm_checkpoint, args=args, processing_class=tok, train_tasks=train, eval_tasks=evals)
        tr.train()
        rec = tr.records[0]
        assert len(tr.records) == 1 and len(rec["micro_steps"]) == ga
        n_rows = len(rec["batch"])
        assert len(rec["micro_steps"][0]) == math.ceil(n_rows / ga / chunk)
        weights.append({k: v.detach().clone() for k, v in tr.model.named_parameters()})
    for other in weights[1:]:
        for k in weights[0]:
            torch.testing.assert_close(weights[0][k], other[k], rtol=1e-4, atol=1e-6)
    base = AutoModelForCausalLM.from_pretrained(warm_checkpoint)
    moved = any(not torch.equal(v, weights[0][k]) for k, v in base.named_parameters())
    assert moved


@pytest.mark.slow
def test_every_chunk_goes_through_transformers_training_step(tmp_path, warm_checkpoint, monkeypatch):
    """transformers' own Trainer.training_step runs once per chunk, so its features apply to every chunk
    (here ``torch_empty_cache_steps``: the device cache is emptied after each chunk's loss); gradients sync
    on the last chunk of the optimizer step's last micro-step only."""
    import transformers

    calls, cleared = [], []
    inner = transformers.Trainer.training_step

    def recording(self, model, inputs, num_items_in_batch=None):
        calls.append((self._step, self.accelerator.sync_gradients))
        return inner(self, model, inputs, num_items_in_batch)

    monkeypatch.setattr(transformers.Trainer, "training_step", recording)
    monkeypatch.setattr(transformers.trainer, "clear_device_cache", lambda: cleared.append(1))
    tok = reload_tokenizer(warm_checkpoint)  # AutoTokenizer would re-tokenize the tiny vocabulary (main_job)
    train, evals = tasks()
    args = make_args(tmp_path, per_device_train_batch_size=3, gradient_accumulation_steps=2, max_steps=1, beta=0.0,
                     horizon=4, torch_empty_cache_steps=1)
    tr = RecordingTrainer(warm_checkpoint, args=args, processing_class=tok, train_tasks=train, eval_tasks=evals)
    tr.train()
    chunks = [len(m) for m in tr.records[0]["micro_steps"]]
    assert len(chunks) == 2 and min(chunks) > 1
    assert calls == [(step, step == 1 and i == n - 1) for step, n in enumerate(chunks) for i in range(n)]
    assert len(cleared) == sum(chunks)
    assert tr._step == 2 and "step_time" in tr.state.log_history[0]  # GRPOTrainer's counters, once per micro-step


@pytest.mark.slow
def test_evaluation_during_training(tmp_path, warm_checkpoint):
    tok = reload_tokenizer(warm_checkpoint)  # AutoTokenizer would re-tokenize the tiny vocabulary (main_job)
    train, evals = tasks()
    args = make_args(tmp_path, eval_strategy="steps", eval_steps=1, max_steps=2, beta=0.0, horizon=3,
                     per_device_eval_batch_size=8)
    tr = MileGPOTrainer(warm_checkpoint, args=args, processing_class=tok, train_tasks=train, eval_tasks=evals)
    tr.train()
    evals_logged = [h for h in tr.state.log_history if "eval_id_minus_ood" in h]
    assert [h["step"] for h in evals_logged] == [1, 2]
    assert all("eval_ood_invalid_action_rate" in h for h in evals_logged)


_ON_GPU = torch.cuda.is_available() and not interpreter_on()


@pytest.mark.gpu
@pytest.mark.skipif(not _ON_GPU, reason="needs CUDA with TRITON_INTERPRET=0")
@pytest.mark.parametrize("method", ["milegpo", "gigpo"])
def test_on_a_gpu_the_trainer_runs_triton_credit_and_the_fused_loss(tmp_path, warm_checkpoint, method,
                                                                     record_property):
    """The trainer's GPU defaults, end to end: the policy on CUDA, credit by the Triton kernels on the
    process's device (credit_device / credit_backend auto), the loss by the fused kernel; the
    advantages trained on are the reference estimator's. The iterations' rollout and credit times
    go to the junit xml (scripts/gpu_check.sh keeps it)."""
    tok = reload_tokenizer(warm_checkpoint)
    train, evals = tasks()
    args = make_args(tmp_path, use_cpu=False, credit_method=method)
    trainer = RecordingTrainer(warm_checkpoint, args=args, processing_class=tok, train_tasks=train, eval_tasks=evals)
    fused_calls = []
    fused = trainer._fused_loss
    trainer._fused_loss = lambda *a, **kw: fused_calls.append(1) or fused(*a, **kw)
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()
    assert trainer.state.global_step == 2 and fused_calls
    result = trainer.last_iteration["result"]
    assert result.backend == "triton" and result.advantages.device.type == "cuda"
    assert any(not torch.equal(v.detach(), before[k]) for k, v in trainer.model.named_parameters())
    assert all(np.isfinite(h["loss"]) for h in trainer.state.log_history if "loss" in h)
    assert_trained_on_estimate(trainer, args, method)
    for key in ("time/rollout_s", "time/generate_s", "time/credit_s"):
        record_property(key, [h[key] for h in trainer.state.log_history if key in h])
