"""The TRL trainer of milegpo: :class:`MileGPOTrainer` (TRL's GRPOTrainer playing multi-step episodes
with MileGPO credit), its config :class:`MileGPOConfig`, and what they need.

- :mod:`.config`: :class:`MileGPOConfig` (GRPOConfig plus the agent, environment and credit settings);
- :mod:`.milegpo_trainer`: the trainer (its docstring: how an iteration runs, which hooks it overrides);
- :mod:`.sources`: where the episodes come from: the text worlds and their pool, or TRL's
  ``environment_factory`` protocol with its tool runner (one rollout source per mode, one interface);
- :mod:`.trl_mirror`: the pieces of GRPOTrainer's math the trainer reproduces, tested against TRL's own methods
  (every private TRL name goes through :mod:`milegpo.trl_seam`, pinned to the TRL release it was checked against);
- :mod:`.engines`: what DDP, FSDP2 and DeepSpeed ZeRO-2/3 need of the chunked micro-steps, and the
  combinations refused at start;
- :mod:`.vllm_sync`: the colocated vLLM weight sync through vLLM's in-place reload (vLLM on CPU);
- :mod:`.tensorboard`: ``report_to="tensorboard"`` without a warning per n/a metric and iteration.

The names are imported when first asked for (as TRL's own package does): the config alone does not load the
trainer's models and generation code.
"""

from __future__ import annotations

import importlib

#: public name -> the module of this package that defines it
_LAZY = {
    "MileGPOConfig": "config",
    "ConfigError": "config",
    "MileGPOTrainer": "milegpo_trainer",
    "credit_device": "milegpo_trainer",
    "environment_reward": "milegpo_trainer",
    "TOKEN_NORMALISED_LOSSES": "trl_mirror",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["MileGPOTrainer", "MileGPOConfig", "ConfigError", "environment_reward", "credit_device",
           "TOKEN_NORMALISED_LOSSES"]
