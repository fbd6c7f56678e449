"""The pieces of TRL's ``GRPOTrainer`` math that MileGPOTrainer has to reproduce (checked against TRL 1.16).

MileGPOTrainer builds its own training chunks (one row per environment step, iterations of a
variable number of rows, several chunks per micro-step), so it cannot call the big private
methods of ``trl.trainer.grpo_trainer.GRPOTrainer`` that hold these pieces inline
(``_generate_and_score_completions``, ``_compute_loss``). Each function here is one such piece, on tensors
and public settings only, named for what it computes, and its docstring names the TRL method (and the
variable there) it mirrors. Everything else comes from TRL itself: the loss (``GRPOTrainer.compute_loss``),
the log-probs, the generation backends, the sampler, the padding, the logging, through
:mod:`milegpo.trl_seam` where the name is private (the micro-step bookkeeping and the reference
log-probs, which read GRPOTrainer's state, live there).

``tests/trainer/test_trl_mirror.py`` runs TRL's own methods on a tiny GRPOTrainer and compares
each piece with them on the same inputs, so a TRL release that changes one fails there
(:data:`milegpo.trl_seam.TESTED_TRL` is the release they were last compared against).
"""

from __future__ import annotations

import math

import torch

from ..trl_seam import STEP_TIME  # noqa: F401 - GRPOTrainer.training_step: seconds of one optimizer step

#: loss types that ``GRPOTrainer._compute_loss`` normalises by the token count of the whole generation
#: batch (``num_items_in_batch``, :func:`token_loss_normalizer`); every other loss type averages over the
#: rows of its micro-batch and is divided by the accumulation steps (:func:`accumulation_divisor`)
TOKEN_NORMALISED_LOSSES = ("dapo", "cispo", "vespo")

#: metric names MileGPOTrainer logs with TRL's meaning (GRPOTrainer logs them under the same names)
NUM_TOKENS = "num_tokens"  # GRPOTrainer._generate: prompt + completion tokens seen so far
MEAN_LENGTH = "completions/mean_length"  # GRPOTrainer._generate: mean completion length (tokens)
CLIPPED_RATIO = "completions/clipped_ratio"  # GRPOTrainer._generate: share of completions without EOS
SAMPLING_LOGP_DIFFERENCE = "sampling/sampling_logp_difference/mean"  # _generate_and_score_completions
#: GRPOTrainer._compute_loss: k3 KL to the reference, entropy, clip ratios (the fused loss logs these)
KL, ENTROPY = "kl", "entropy"
CLIP_LOW, CLIP_HIGH, CLIP_REGION = "clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean"


def needs_old_logps(trainer) -> bool:
    """Whether the rows need their old (behaviour-policy) log-probs computed before training: the
    micro-steps of an iteration span several optimizer steps (``gradient_accumulation_steps`` not a
    multiple of ``steps_per_generation x num_iterations``), or vLLM importance sampling is on.
    Otherwise the loss uses ``per_token_logps.detach()``.

    Mirrors ``GRPOTrainer._generate_and_score_completions`` (the ``old_per_token_logps`` condition)."""
    generate_every = trainer.args.steps_per_generation * trainer.num_iterations
    return trainer.args.gradient_accumulation_steps % generate_every != 0 or (
        trainer.use_vllm and trainer.vllm_importance_sampling_correction)


def vllm_importance_sampling_ratio(old_logps: torch.Tensor, sampling_logps: torch.Tensor, mask: torch.Tensor,
                                   mode: str, clip_min: float | None, clip_max: float | None) -> torch.Tensor:
    """The truncated / masked importance ratio trainer policy / sampler (vLLM) that corrects the loss
    for the sampler's numerical mismatch.

    old_logps, sampling_logps: (B, T) float, the trainer's and the sampler's per-token log-probs (NaN
    where the sampler gave none: ratio 1 there); mask: (B, T) the completion mask.
    mode: ``token_truncate`` / ``token_mask`` (per token, (B, T)) or ``sequence_truncate`` /
    ``sequence_mask`` (per row, (B, 1)); ``*_truncate`` clamps the ratio to [clip_min, clip_max],
    ``*_mask`` sets it to 0 outside.

    Mirrors ``GRPOTrainer._generate_and_score_completions`` (``vllm_importance_sampling_ratio``)."""
    diff = torch.nan_to_num((old_logps - sampling_logps) * mask, nan=0.0)
    if mode in ("sequence_mask", "sequence_truncate"):
        diff = diff.sum(dim=-1, keepdim=True)
    ratio = torch.exp(diff)
    if mode in ("sequence_truncate", "token_truncate"):
        return torch.clamp(ratio, min=clip_min, max=clip_max)
    if mode in ("sequence_mask", "token_mask"):
        low = clip_min if clip_min is not None else -math.inf
        high = clip_max if clip_max is not None else math.inf
        return ratio.masked_fill((ratio < low) | (ratio > high), 0.0)
    raise ValueError(f"Unknown vLLM importance sampling level: {mode}. Possible values are 'token_truncate', "
                     "'token_mask', 'sequence_truncate', and 'sequence_mask'.")


def sampling_logp_difference(old_logps: torch.Tensor, sampling_logps: torch.Tensor,
                             mask: torch.Tensor) -> torch.Tensor:
    """Mean |trainer log-prob - sampler log-prob| over the completion tokens the sampler scored (0 when
    none): () float, this process's value (the trainer logs its mean over processes).

    old_logps, sampling_logps: (B, T) float (NaN where the sampler gave no log-prob); mask: (B, T).

    Mirrors ``GRPOTrainer._generate_and_score_completions`` (``sampling/sampling_logp_difference/mean``)."""
    delta = torch.abs(old_logps - sampling_logps)
    delta = delta[mask.bool() & ~torch.isnan(delta)]
    return torch.mean(delta) if delta.numel() > 0 else torch.zeros((), device=old_logps.device)


def token_loss_normalizer(num_items_in_batch: torch.Tensor, num_processes: int, accumulation_steps: int,
                          steps_per_generation: int, training: bool) -> torch.Tensor:
    """The divisor of a token-normalised loss (:data:`TOKEN_NORMALISED_LOSSES`, verl's token mean):
    the generation batch's token count (all processes, at least 1), per process and rescaled to one
    accumulation window in training (``x accumulation_steps / steps_per_generation``).

    num_items_in_batch: () float, completion tokens of the whole generation batch over all processes.

    Mirrors ``GRPOTrainer._compute_loss`` (``loss_type in ["cispo", "dapo", "vespo"]``)."""
    normalizer = num_items_in_batch.clamp(min=1.0) / num_processes
    if training:  # in eval, the batch is neither split across steps nor accumulated
        normalizer = normalizer * accumulation_steps / steps_per_generation
    return normalizer


def accumulation_divisor(accumulation_steps: int, training: bool) -> float:
    """What a row-averaged loss (every type outside :data:`TOKEN_NORMALISED_LOSSES`) is divided by, so
    that the gradients accumulated over an optimizer step average its micro-steps.

    Mirrors ``GRPOTrainer._compute_loss`` (``normalizer = current_gradient_accumulation_steps``)."""
    return accumulation_steps if training else 1.0


__all__ = ["STEP_TIME", "TOKEN_NORMALISED_LOSSES", "accumulation_divisor", "needs_old_logps",
           "sampling_logp_difference", "token_loss_normalizer", "vllm_importance_sampling_ratio"]
