"""MileGPOTrainer(use_fused_loss=True): the fused kernel's loss and gradients equal TRL's own loss on the
same training chunk (on CPU the kernel's torch twin runs; tests/kernels covers the Triton kernels)."""

import pytest
import torch

from milegpo.job.policy import reload_tokenizer

from test_trainer import RecordingTrainer, make_args, tasks


@pytest.mark.slow
@pytest.mark.parametrize("loss_type", ["dapo", "grpo"])
def test_fused_loss_equals_trl_loss_in_the_trainer(tmp_path, warm_checkpoint, loss_type):
    tok = reload_tokenizer(warm_checkpoint)  # AutoTokenizer would re-tokenize the tiny vocabulary (main_job)
    train, evals = tasks()
    args = make_args(tmp_path, max_steps=1, loss_type=loss_type, beta=0.04, use_fused_loss=False)
    trainer = RecordingTrainer(warm_checkpoint, args=args, processing_class=tok, train_tasks=train, eval_tasks=evals)
    trainer.train()
    chunk = trainer.records[0]["micro_steps"][0][0]
    assert "ref_per_token_logps" in chunk and int(chunk["completion_mask"].sum()) > 0
    model = trainer.model
    model.train()
    losses, grads, kls = {}, {}, {}
    for fused in (False, True):
        trainer.args.use_fused_loss = fused
        assert trainer._fused_loss_on(chunk) is fused
        model.zero_grad(set_to_none=True)
        trainer._metrics["train"].clear()
        loss = trainer.compute_loss(model, chunk)
        loss.backward()
        losses[fused] = loss.detach()
        grads[fused] = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
        kls[fused] = trainer._metrics["train"]["kl"][-1]
    torch.testing.assert_close(losses[True], losses[False], rtol=1e-5, atol=1e-6)
    assert grads[True].keys() == grads[False].keys() and grads[True]
    for name, g in grads[False].items():  # fp32; max abs error relative to the largest gradient entry
        scale = g.abs().max().clamp(min=1e-12)
        assert float((grads[True][name] - g).abs().max() / scale) < 1e-4, name
    assert kls[True] == pytest.approx(kls[False], rel=1e-4, abs=1e-7)


def test_fused_loss_refuses_settings_it_does_not_fuse(tmp_path):
    from milegpo.trainer.config import MileGPOConfig

    args = MileGPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", use_fused_loss=True,
                         loss_type="cispo")
    assert args.use_fused_loss is True  # the refusal happens per chunk in the trainer (needs a model): below

    class Stub:
        pass

    from milegpo.trainer import MileGPOTrainer

    stub = Stub()
    stub.args, stub.loss_type, stub.importance_sampling_level = args, "cispo", "token"
    stub.off_policy_mask_threshold, stub.top_entropy_quantile, stub._entropy_bonus_enabled = None, 1.0, False
    stub._dist = type("D", (), {"is_zero3": False, "is_fsdp": False})()  # TRL's DistributedBackend: no sharding
    with pytest.raises(ValueError, match="use_fused_loss=True does not support loss_type=cispo"):
        MileGPOTrainer._fused_loss_on(stub, {})
    args.use_fused_loss = None  # automatic: off on CPU, silently
    stub.accelerator = type("A", (), {"device": torch.device("cpu")})()
    assert MileGPOTrainer._fused_loss_on(stub, {}) is False
