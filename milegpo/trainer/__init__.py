"""The TRL trainer of milegpo: :class:`MileGPOTrainer` (TRL's GRPOTrainer playing multi-step episodes
with MileGPO credit) and what it needs.

- :mod:`.milegpo_trainer`: the trainer (its docstring: how an iteration runs, which hooks it overrides);
- :mod:`.trl_mirror`: the pieces of GRPOTrainer's private logic the trainer reproduces, pinned to the
  TRL version they were compared against;
- :mod:`.engines`: what DDP, FSDP2 and DeepSpeed ZeRO-2/3 need of the chunked micro-steps, and the
  combinations refused at start;
- :mod:`.vllm_sync`: the colocated vLLM weight sync through vLLM's in-place reload (vLLM on CPU);
- :mod:`.tensorboard`: ``report_to="tensorboard"`` without a warning per n/a metric and iteration.
"""

from .milegpo_trainer import MileGPOTrainer, credit_device, environment_reward
from .trl_mirror import TOKEN_NORMALISED_LOSSES

__all__ = ["MileGPOTrainer", "environment_reward", "credit_device", "TOKEN_NORMALISED_LOSSES"]
