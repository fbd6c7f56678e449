"""What MileGPOTrainer needs from the engine that wraps or shards the policy: DDP, FSDP (accelerate's
FSDP2 plugin) or DeepSpeed ZeRO-2 / ZeRO-3, all through accelerate; and what it refuses at start.

A MileGPO micro-step is several chunks, one backward each (``MileGPOTrainer.training_step``); the
chunks before a micro-step's last run with accelerate's ``sync_gradients`` off and under
``accelerator.no_sync``. What that does per engine:

- **DDP**: ``DistributedDataParallel.no_sync``: gradients accumulate locally and are all-reduced on the
  last chunk's backward.
- **FSDP2**: accelerate's ``no_sync`` is ``set_requires_gradient_sync(False)``: no reduce-scatter on
  those backwards (unsharded gradients accumulate), one on the last chunk's. A model transformers sharded
  itself at load time (``from_pretrained(distributed_config=...)``, not wrapped by accelerate) gets
  transformers' own equivalent, ``Trainer._defer_fsdp_gradient_reduction``, as in transformers' loop.
- **DeepSpeed ZeRO-2 / ZeRO-3**: accelerate's ``no_sync`` does nothing for ZeRO >= 2 (DeepSpeed forbids
  it: gradients are partitioned); every backward reduce-scatters its gradients into the partition, which
  sums the chunks as DeepSpeed sums micro-batches. accelerate's ``DeepSpeedEngineWrapper.backward(loss,
  sync_gradients)`` sets the engine's accumulation boundary from ``sync_gradients`` and calls
  ``engine.step()`` only on it, so the engine steps once per optimizer step, whatever the number of
  chunks. An older accelerate (before 1.8) steps the engine on every backward, which would make every
  chunk an optimizer step: :func:`check_engine` refuses it.

Every process runs the same number of forward / backward passes with the same shapes (the trainer pads
chunks), which FSDP and ZeRO-3 need too: their forwards gather weights collectively.

Generation. ZeRO-3: TRL's ``unwrap_model_for_generation`` gathers the weights for ``generate``
(``ds3_gather_for_generation``, TRL's default). FSDP2: every decoding step's forward gathers the sharded
weights, so a process whose sequences are done must keep stepping until every process's are. transformers'
``generate`` does both (``synced_gpus``) under ZeRO-3 and for FSDP-managed modules (torch's
``fully_shard`` marks them ``_is_fsdp_managed_module``); the episode loop is lock-step across processes
(``EpisodeRunner``), so every process calls ``generate`` equally often.

The fused loss (``use_fused_loss``) reads the LM head's weight outside the model's forward: under ZeRO-3
and FSDP that weight is a shard there, so TRL's loss is used (``use_fused_loss=True`` is refused).
"""

from __future__ import annotations

import inspect

from ..trl_seam import distributed_backend


def weight_sharding(trainer) -> str | None:
    """What shards the policy's weights outside its forward ("DeepSpeed ZeRO-3", "FSDP"), or None."""
    dist = distributed_backend(trainer)  # TRL's: the engine, read once from accelerator.state
    if dist.is_zero3:
        return "DeepSpeed ZeRO-3"
    if dist.is_fsdp:
        return "FSDP"
    return None


def deepspeed_steps_on_boundary_only() -> bool:
    """Whether accelerate's DeepSpeed wrapper steps the engine only on an accumulation boundary
    (``DeepSpeedEngineWrapper.backward`` takes ``sync_gradients``: accelerate >= 1.8)."""
    from accelerate.utils.deepspeed import DeepSpeedEngineWrapper

    return "sync_gradients" in inspect.signature(DeepSpeedEngineWrapper.backward).parameters


def check_engine(trainer) -> None:
    """Refuse, at start, an engine combination that would train wrong (ValueError naming it and what to do)."""
    import accelerate

    if trainer.is_deepspeed_enabled and not deepspeed_steps_on_boundary_only():
        raise ValueError(
            f"MileGPOTrainer with DeepSpeed needs accelerate >= 1.8 (installed: {accelerate.__version__}): this "
            "accelerate steps the DeepSpeed engine on every backward, and a MileGPO micro-step runs one backward "
            "per chunk, so every chunk would be an optimizer step. Upgrade accelerate.")
    sharding = weight_sharding(trainer)
    if sharding is not None and trainer.args.use_fused_loss:
        raise ValueError(
            f"use_fused_loss=True does not support {sharding}: the fused loss reads the LM head's weight outside "
            "the model's forward, where it is a shard; set use_fused_loss=False (or leave it unset: TRL's loss)")


__all__ = ["check_engine", "deepspeed_steps_on_boundary_only", "weight_sharding"]
