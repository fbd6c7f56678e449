"""Fused log-prob gather + clipped GRPO policy loss (TRL 1.16), forward and backward.

``naive`` holds the math (and the plain full-logits torch path), ``fused`` the Triton
kernels, their torch twins and the public :func:`fused_policy_loss`.
"""

from .fused import FusedPolicyLossFunction, fused_policy_loss
from .naive import LOSS_TYPES, PolicyLossStats, clipped_token_loss, naive_policy_loss, token_weights

__all__ = [
    "LOSS_TYPES",
    "FusedPolicyLossFunction",
    "PolicyLossStats",
    "clipped_token_loss",
    "fused_policy_loss",
    "naive_policy_loss",
    "token_weights",
]
