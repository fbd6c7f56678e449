"""milegpo.trainer.engines: the combinations MileGPOTrainer refuses at start, each with a message naming it.

The engines themselves run in test_trainer.py (torchrun, 2 gloo processes: DDP, FSDP2, ZeRO-2, ZeRO-3)."""

from types import SimpleNamespace

import pytest
from trl.distributed import DistributedBackend

import milegpo.trainer.engines as engines


def trainer_with(zero_stage=0, fsdp_version=None, use_fused_loss=None):
    """What check_engine reads of a trainer: TRL's DistributedBackend of an accelerator state, the flags."""
    state = SimpleNamespace(deepspeed_plugin=SimpleNamespace(zero_stage=zero_stage) if zero_stage else None,
                            fsdp_plugin=SimpleNamespace(fsdp_version=fsdp_version) if fsdp_version else None)
    return SimpleNamespace(_dist=DistributedBackend(SimpleNamespace(state=state)), is_deepspeed_enabled=bool(zero_stage),
                           args=SimpleNamespace(use_fused_loss=use_fused_loss))


def test_the_installed_accelerate_steps_deepspeed_on_boundaries_only():
    assert engines.deepspeed_steps_on_boundary_only()


def test_deepspeed_with_an_accelerate_that_steps_every_backward_is_refused(monkeypatch):
    monkeypatch.setattr(engines, "deepspeed_steps_on_boundary_only", lambda: False)
    with pytest.raises(ValueError, match="accelerate >= 1.8.*every chunk would be an optimizer step"):
        engines.check_engine(trainer_with(zero_stage=2))
    engines.check_engine(trainer_with())  # DDP does not need it


@pytest.mark.parametrize("zero_stage, fsdp_version, sharding", [(3, None, "DeepSpeed ZeRO-3"), (0, 2, "FSDP"),
                                                                (0, 1, "FSDP")])
def test_the_fused_loss_is_refused_where_the_lm_head_is_sharded(zero_stage, fsdp_version, sharding):
    assert engines.weight_sharding(trainer_with(zero_stage, fsdp_version)) == sharding
    with pytest.raises(ValueError, match=f"use_fused_loss=True does not support {sharding}"):
        engines.check_engine(trainer_with(zero_stage, fsdp_version, use_fused_loss=True))
    engines.check_engine(trainer_with(zero_stage, fsdp_version))  # unset: TRL's loss, no error


def test_zero2_keeps_whole_weights():
    assert engines.weight_sharding(trainer_with(zero_stage=2)) is None
    engines.check_engine(trainer_with(zero_stage=2, use_fused_loss=True))
