"""milegpo: MileGPO credit assignment, Triton kernels and a TRL trainer for LLM agents."""

from __future__ import annotations

__version__ = "0.1.0"

_LAZY = {
    "MileGPOTrainer": ("milegpo.trainer", "MileGPOTrainer"),
    "MileGPOConfig": ("milegpo.trainer.config", "MileGPOConfig"),
}


def __getattr__(name):  # TRL is heavy: import the trainer only when asked for
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'milegpo' has no attribute {name!r}")


__all__ = ["MileGPOTrainer", "MileGPOConfig", "__version__"]
