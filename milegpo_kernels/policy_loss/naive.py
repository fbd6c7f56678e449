"""Clipped policy loss of TRL 1.16's ``GRPOTrainer._compute_loss``, in plain torch.

This module holds the math once: :func:`token_weights` (each loss type's normaliser),
:func:`clipped_token_loss` (ratio, two-sided clip, k3 KL per token) and
:func:`naive_policy_loss`, which builds the full ``(B, T, V)`` logits and runs both
through autograd. ``naive_policy_loss`` is the plain torch path (and the oracle of the
fused kernels); it accepts float64. Only token-level importance sampling is covered.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")


class PolicyLossStats(NamedTuple):
    """Logged quantities, each a 0-dim fp32 tensor, means over the tokens with mask != 0.

    ``kl`` is the mean k3 KL (times the ratio when ``bias_correction_kl``; 0 when
    ``beta == 0``); ``entropy`` the mean entropy of ``softmax(logits / temperature)``;
    ``clip_low`` / ``clip_high`` / ``clip_region`` TRL's ``clip_ratio/{low,high,region}_mean``.
    """

    kl: torch.Tensor
    entropy: torch.Tensor
    clip_low: torch.Tensor
    clip_high: torch.Tensor
    clip_region: torch.Tensor


def check_inputs(hidden, weight, completion_ids, completion_mask, advantages, old_logps, ref_logps,
                 bias, temperature, beta, loss_type):
    """Validate shapes of the public arguments; raise naming the offending one."""
    if hidden.dim() != 3:
        raise ValueError(f"hidden must be (B, T, H), got shape {tuple(hidden.shape)}")
    B, T, H = hidden.shape
    if weight.dim() != 2 or weight.shape[1] != H:
        raise ValueError(f"weight must be (V, {H}), got shape {tuple(weight.shape)}")
    if tuple(completion_ids.shape) != (B, T) or completion_ids.dtype.is_floating_point:
        raise ValueError(f"completion_ids must be ({B}, {T}) integer, got {completion_ids.dtype} "
                         f"{tuple(completion_ids.shape)}")
    if tuple(completion_mask.shape) != (B, T):
        raise ValueError(f"completion_mask must be ({B}, {T}), got shape {tuple(completion_mask.shape)}")
    if tuple(advantages.shape) not in ((B,), (B, T)):
        raise ValueError(f"advantages must be ({B},) or ({B}, {T}), got shape {tuple(advantages.shape)}")
    for name, x in (("old_logps", old_logps), ("ref_logps", ref_logps)):
        if x is not None and tuple(x.shape) != (B, T):
            raise ValueError(f"{name} must be ({B}, {T}), got shape {tuple(x.shape)}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"bias must be ({weight.shape[0]},), got shape {tuple(bias.shape)}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if beta != 0.0 and ref_logps is None:
        raise ValueError("beta != 0 needs ref_logps (B, T)")
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")


def token_weights(completion_mask, loss_type: str, num_items_in_batch=None, max_completion_length=None):
    """Per-token weight ``mask / normaliser`` of each loss type: (B, T) float.

    ``loss = sum_t per_token_loss_t * weight_t`` reproduces TRL 1.16 with one process and
    no gradient accumulation: ``grpo`` divides each row by its token count and averages
    rows; ``bnpo`` divides by the batch token count; ``dr_grpo`` by
    ``B * max_completion_length`` (default T); ``dapo`` by ``num_items_in_batch``
    (default the batch token count), clamped to >= 1.
    """
    mask = completion_mask if completion_mask.dtype.is_floating_point else completion_mask.float()
    B, T = mask.shape
    if loss_type == "grpo":
        return mask / mask.sum(-1, keepdim=True).clamp(min=1.0) / B
    if loss_type == "bnpo":
        return mask / mask.sum().clamp(min=1.0)
    if loss_type == "dr_grpo":
        return mask / (B * (T if max_completion_length is None else max_completion_length))
    if loss_type == "dapo":
        n = mask.sum() if num_items_in_batch is None else torch.as_tensor(num_items_in_batch, device=mask.device)
        return mask / n.to(mask.dtype).clamp(min=1.0)
    raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")


def clipped_token_loss(logps, old_logps, ref_logps, advantages, *, epsilon_low=0.2, epsilon_high=0.2,
                       delta=None, beta=0.0, bias_correction_kl=True):
    """Per-token clipped policy loss of TRL 1.16 (token-level importance sampling).

    ``logps``, ``old_logps``, ``ref_logps``, ``advantages``: broadcastable float tensors
    (``old_logps=None`` means on-policy: ``logps.detach()``). Returns
    ``(per_token_loss, per_token_kl, coef_1)``::

        coef_1 = exp(logps - old);  coef_2 = clamp(coef_1, 1 - eps_low, 1 + eps_high)
        loss   = -min(min(coef_1, delta) * A, coef_2 * A) + beta * kl
        kl     = (exp(ref - logps) - (ref - logps) - 1) * (coef_1 if bias_correction_kl)
    """
    old = logps.detach() if old_logps is None else old_logps
    coef_1 = torch.exp(logps - old)
    per_token_kl = None
    if beta != 0.0:
        d = ref_logps - logps
        per_token_kl = torch.exp(d) - d - 1
        if bias_correction_kl:
            per_token_kl = per_token_kl * coef_1
    coef_2 = torch.clamp(coef_1, 1 - epsilon_low, 1 + epsilon_high)
    c1 = coef_1 if delta is None else torch.clamp(coef_1, max=delta)
    per_token_loss = -torch.min(c1 * advantages, coef_2 * advantages)
    if beta != 0.0:
        per_token_loss = per_token_loss + beta * per_token_kl
    return per_token_loss, per_token_kl, coef_1


def loss_stats(per_token_kl, entropy, coef_1, advantages, mask, epsilon_low, epsilon_high) -> PolicyLossStats:
    """Masked means logged by TRL (``global_masked_mean`` on one process), fp32."""
    m = mask.float()
    n = m.sum().clamp(min=1.0)

    def mean(x):
        return ((x.float() * m).sum() / n).detach()

    low = (coef_1 < 1 - epsilon_low) & (advantages < 0)
    high = (coef_1 > 1 + epsilon_high) & (advantages > 0)
    kl = mean(per_token_kl) if per_token_kl is not None else torch.zeros((), device=m.device)
    return PolicyLossStats(kl, mean(entropy), mean(low), mean(high), mean(low | high))


def naive_policy_loss(hidden, weight, completion_ids, completion_mask, advantages, old_logps=None,
                      ref_logps=None, *, bias=None, temperature=1.0, epsilon_low=0.2, epsilon_high=0.2,
                      delta=None, beta=0.0, loss_type="dapo", num_items_in_batch=None,
                      max_completion_length=None, bias_correction_kl=True):
    """Plain torch path: full (B, T, V) logits, ``log_softmax``, gather, loss; autograd backward.

    Same signature and result as :func:`milegpo_kernels.fused_policy_loss`. Logits are
    computed in the inputs' dtype and the log-softmax in fp32 (fp64 for fp64 inputs).
    """
    check_inputs(hidden, weight, completion_ids, completion_mask, advantages, old_logps, ref_logps,
                 bias, temperature, beta, loss_type)
    acc = torch.float64 if hidden.dtype == torch.float64 else torch.float32
    logits = hidden @ weight.t()
    if bias is not None:
        logits = logits + bias
    logp_all = torch.log_softmax(logits.to(acc) / temperature, dim=-1)
    logps = logp_all.gather(-1, completion_ids.long().unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    adv = advantages.to(acc)
    adv = adv.unsqueeze(1) if adv.dim() == 1 else adv
    old = None if old_logps is None else old_logps.to(acc)
    ref = None if ref_logps is None else ref_logps.to(acc)
    ptl, kl, coef_1 = clipped_token_loss(logps, old, ref, adv, epsilon_low=epsilon_low,
                                         epsilon_high=epsilon_high, delta=delta, beta=beta,
                                         bias_correction_kl=bias_correction_kl)
    w = token_weights(completion_mask.to(acc), loss_type, num_items_in_batch, max_completion_length)
    loss = (ptl * w).sum()
    return loss, loss_stats(kl, entropy, coef_1.detach(), adv, completion_mask != 0, epsilon_low, epsilon_high)
