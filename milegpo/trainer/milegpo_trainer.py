"""MileGPOTrainer: TRL's GRPOTrainer, playing multi-step text-game episodes with per-step MileGPO credit.

One training iteration (docs/architecture.md, "Data flow of one training iteration"):

1. the dataloader hands each process its ``groups_per_iteration / world_size`` tasks (whole groups);
2. :class:`~milegpo.rollout.EpisodeRunner` plays ``group_size`` episodes of each, one batched
   generation per step through TRL's own backend (``_generate_single_turn``: vLLM colocate /
   server when ``use_vllm``, transformers ``generate`` otherwise); every step is one row;
3. each process runs :func:`milegpo.credit.estimate` on its own rows only (a
   :class:`~milegpo.credit.StepBatch` of its groups, group / trajectory ids offset by rank): credit is
   group-local and every group is on one process, so each row gets the advantage one process
   estimating the whole batch would give it (``tests/credit/test_group_locality.py``); the credit
   diagnostics are merged from every process's counts (:func:`~milegpo.credit.merge_diagnostic_parts`),
   so the logged ``credit/*`` numbers are the whole batch's; no rows travel between processes;
4. the rows are split into ``steps_per_generation`` micro-steps and each micro-step into chunks of
   at most ``per_device_train_batch_size`` rows; every process runs the same number of chunks of the
   same number of rows (a process with fewer rows tops its chunks up with zero-weight padding rows),
   so DDP/FSDP never deadlock; TRL's loss and optimizer do the update.

How a micro-step trains. transformers' training loop calls ``training_step`` once per micro-step
(inside its own no-sync context where the micro-step is not the last of an optimizer step), and
GRPOTrainer's ``training_step`` is transformers' one plus two counters. A MileGPO micro-step is a
variable number of chunks (an iteration has as many rows as its episodes had steps), so
:meth:`MileGPOTrainer.training_step` is the one hook overridden here: it plays the iteration when one
is due, then calls transformers' own ``Trainer.training_step`` once per chunk, so every chunk gets
what that method does (context-parallel buffers, ``torch_empty_cache_steps``, the LOMO learning rate,
the multi-GPU mean, the loss scaling rule ``loss_is_scaled_for_ga`` (True: TRL's loss scales itself),
DeepSpeed's ``scale_wrt_gas=False``, ``accelerator.backward``). The chunks before a micro-step's last
run under ``accelerator.no_sync`` with accelerate's ``sync_gradients`` off (no gradient all-reduce,
no DeepSpeed boundary or engine step; :mod:`milegpo.trainer.engines`: DDP, FSDP2, ZeRO-2/3); the last
chunk runs in the loop's own context. Narrower hooks cannot do this:
``compute_loss`` returns one loss for one backward, and ``_prepare_inputs`` one batch. GRPOTrainer's
two counters (the micro-step count that decides when to play, and ``step_time``) are kept by
:func:`~milegpo.trainer.trl_mirror.micro_step_bookkeeping`.

What has to reproduce TRL's private logic lives in :mod:`milegpo.trainer.trl_mirror` (pinned to the
TRL version it was compared against, tested against TRL's own methods): the buffering of an
iteration's micro-steps, the old / reference log-probs, the vLLM importance-sampling ratio, the
token-normalised loss divisor of the fused loss, and the metric names.

Hooks overridden (all documented Trainer / GRPOTrainer hooks):
``_set_signature_columns_if_needed``, ``get_train_dataloader``, ``_get_train_sampler`` (each process
gets whole task groups), ``_generate_and_score_completions`` (episodes + credit instead of
single-turn generation + reward functions; with ``environment_factory`` the tool-calling episodes of
:mod:`milegpo.rollout.tools`), ``training_step`` (play when due, then
``Trainer.training_step`` per chunk), ``_prepare_inputs`` (a chunk is ready as built; anything else
is refused), ``compute_loss`` (chunk weight for row-averaged loss types; the fused loss) and
``evaluate`` (ID / OOD success and their gap).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import time
import warnings
from typing import Any, Sequence

import numpy as np
import torch
import trl
from accelerate.utils import gather_object
from datasets import Dataset
from transformers.integrations.fsdp import is_fsdp_managed_module
from trl import GRPOTrainer
from trl.trainer.utils import RepeatSampler, is_async_callable, pad

from .config import MileGPOConfig
from .saved_policy import reload_tokenizer, saved_task_settings
from ..credit import (CreditResult, SketchTable, StepBatch, diagnostic_parts, diagnostics_from_parts,
                      estimate_merged, merge_diagnostic_parts)
from ..envs import Task
from ..envs.pool import make_pool
from ..rollout import EpisodeRunner, Rollout, episode_metrics, make_tasks
from ..rollout.tools import ToolEpisodeRunner, ToolRollout, inspect_environment, tool_state_anchor
from .tensorboard import use_tensorboard_scalars
from .trl_mirror import TOKEN_NORMALISED_LOSSES

# the modules, so that each use reads trl_mirror.<piece> (``from . import trl_mirror`` would import the package)
import milegpo.trainer.constrained as constrained  # isort: skip
import milegpo.trainer.engines as engines  # isort: skip
import milegpo.trainer.trl_mirror as trl_mirror  # isort: skip


def environment_reward(completions, **kwargs):
    """Placeholder reward source: MileGPO's rewards come from the environments.

    GRPOTrainer refuses to start without a reward function; MileGPOTrainer never calls this one
    (episodes are scored by :func:`milegpo.credit.estimate`)."""
    raise RuntimeError("environment_reward is a placeholder; MileGPOTrainer scores episodes with milegpo.credit")


@contextlib.contextmanager
def _generate_with(model, **generate_kwargs):
    """Inside the block, ``model.generate`` takes ``generate_kwargs`` too (TRL's ``_generate_single_turn`` calls
    ``generate`` of the unwrapped model with input ids and a generation config only; a callable such as
    ``prefix_allowed_tokens_fn`` has no place in either). ``model``: the module TRL's
    ``unwrap_model_for_generation`` yields (``accelerator.unwrap_model`` of the wrapped model)."""
    model.generate = functools.partial(type(model).generate, model, **generate_kwargs)
    try:
        yield
    finally:
        del model.generate  # the class's method again


def credit_device(setting: str, accelerator_device, backend: str) -> torch.device:
    """Where :meth:`MileGPOTrainer._local_credit` computes credit (``MileGPOConfig.credit_device``)."""
    if setting != "auto":
        return torch.device(setting)
    accelerator_device = torch.device(accelerator_device)
    if accelerator_device.type == "cuda" and backend != "reference":
        return accelerator_device
    return torch.device("cpu")


class MileGPOTrainer(GRPOTrainer):
    """GRPOTrainer for multi-step text-game agents with MileGPO (or GRPO / GiGPO / GraphGPO) credit.

    Args:
        model: a model id / path or a ``PreTrainedModel`` (as GRPOTrainer). A policy folder saved by
            ``milegpo train`` (``milegpo_run/final``) is loaded as ``milegpo eval`` loads it: its tokenizer
            faithfully (:func:`milegpo.trainer.saved_policy.reload_tokenizer`, unless ``processing_class`` is given) and
            its ``milegpo_task.json`` in the fields ``args`` leaves at their defaults
            (:meth:`MileGPOConfig.with_task_settings`; ``self.args`` is that copy).
        args: a :class:`~milegpo.trainer.config.MileGPOConfig`.
        processing_class: the tokenizer (left padding); a chat template makes prompts conversational.
        train_tasks: the training Tasks (default: ``make_tasks(args.env, args.train_split, args.num_train_tasks)``).
        eval_tasks: ``{split: [Task]}`` (default: ``args.num_eval_tasks`` tasks of each of ``args.eval_splits``).
        pool: the environment pool (default: :func:`~milegpo.envs.make_pool` with ``args.num_env_workers``:
            an :class:`EnvPool` for worlds whose steps cost more than a round trip to a worker, else a
            :class:`SequentialPool`); it must hold ``groups_per_process * group_size`` slots. A pool the
            trainer made is its own: :meth:`close` stops its workers (a pool passed in stays the caller's).
        callbacks, optimizers, peft_config: as GRPOTrainer.
        environment_factory: an environment class in TRL's tool-calling protocol (GRPOTrainer's argument of that
            name: ``reset(**row) -> str | None``, public methods = tools, optional ``get_reward() -> float``),
            played by :class:`~milegpo.rollout.tools.ToolEpisodeRunner`: each assistant turn is one row, its
            tokens get that turn's advantage. Then ``train_dataset`` (its rows are the task groups, ``reset``'s
            arguments), ``eval_dataset`` (a Dataset or ``{split: Dataset}``) and ``reward_funcs`` (plain
            functions, summed with ``get_reward`` as GRPOTrainer sums them) are GRPOTrainer's, and ``train_tasks``
            / ``eval_tasks`` / ``pool`` are not taken. ``args.horizon`` is the turn budget,
            ``args.success_threshold`` decides success, ``args.tool_timeout`` bounds a tool call.

    After each iteration ``self.last_iteration`` holds this process's part of it: ``batch`` (the StepBatch
    of its rows, group / trajectory ids those of the whole iteration), ``result`` (its CreditResult: the
    whole batch's credit on these rows), ``rollout`` (its :class:`~milegpo.rollout.Rollout`), ``local``
    (the slice of these rows in the whole batch, the processes' rows in rank order) and, for the whole
    iteration, ``diagnostics`` (``milegpo.credit.diagnostics`` of the whole batch, merged from every
    process's counts). With one process ``batch`` is the whole batch. :meth:`gather_iteration_batch`
    gathers the whole StepBatch (a collective: every process calls it; the job does on the iterations it
    saves).
    """

    _tag_names = ["trl", "grpo", "milegpo"]
    _name = "MileGPO"

    def __init__(self, model, args: MileGPOConfig, processing_class=None, train_tasks: Sequence[Task] | None = None,
                 eval_tasks: dict[str, Sequence[Task]] | None = None, pool=None, callbacks=None,
                 optimizers=(None, None), peft_config=None, *, train_dataset=None, eval_dataset=None,
                 environment_factory=None, reward_funcs=None):
        if not isinstance(args, MileGPOConfig):
            raise TypeError(f"MileGPOTrainer needs a MileGPOConfig, got {type(args).__name__}")
        unchecked = trl_mirror.trl_version_mismatch(trl.__version__)
        if unchecked:
            warnings.warn(unchecked, stacklevel=2)
        self.environment_factory = environment_factory
        if environment_factory is not None or train_dataset is not None or reward_funcs is not None:
            self._init_environment_factory(model, args, processing_class, train_tasks, eval_tasks, pool, callbacks,
                                           optimizers, peft_config, train_dataset, eval_dataset, environment_factory,
                                           reward_funcs)
            return
        if eval_dataset is not None:
            raise ValueError("MileGPOTrainer: eval_dataset goes with environment_factory; the built-in worlds take "
                             "eval_tasks")
        if isinstance(model, (str, os.PathLike)) and os.path.isdir(model):  # a saved policy: as `milegpo eval`
            args = args.with_task_settings(saved_task_settings(model))
            processing_class = reload_tokenizer(str(model)) if processing_class is None else processing_class
        if train_tasks is None:
            train_tasks = make_tasks(args.env, args.train_split, args.num_train_tasks, args.task_type, args.horizon,
                                     options=args.env_options)
        if eval_tasks is None:
            eval_tasks = {s: make_tasks(args.env, s, args.num_eval_tasks, args.task_type, args.horizon,
                                        options=args.env_options)
                          for s in args.eval_splits} if args.num_eval_tasks else {}
            for split, tasks in eval_tasks.items():  # a world with fewer games (ALFWorld's files): say so
                if len(tasks) < args.num_eval_tasks:
                    warnings.warn(f"evaluation split {split!r} of env {args.env!r}: {len(tasks)} tasks, "
                                  f"num_eval_tasks={args.num_eval_tasks} asked (the split holds no more)",
                                  stacklevel=2)
        self.train_tasks = list(train_tasks)
        self.eval_tasks = {k: list(v) for k, v in eval_tasks.items()}
        if len(self.train_tasks) < args.groups_per_iteration:
            raise ValueError(f"{len(self.train_tasks)} training tasks, fewer than groups_per_iteration "
                             f"({args.groups_per_iteration})")
        train_dataset = Dataset.from_dict({"task_index": list(range(len(self.train_tasks))),
                                           "task_id": [t.task_id for t in self.train_tasks]})
        eval_dataset = {s: Dataset.from_dict({"task_index": list(range(len(v))), "task_id": [t.task_id for t in v]})
                        for s, v in self.eval_tasks.items()} or None
        super().__init__(model=model, reward_funcs=environment_reward, args=args, train_dataset=train_dataset,
                         eval_dataset=eval_dataset, processing_class=processing_class, callbacks=callbacks,
                         optimizers=optimizers, peft_config=peft_config)
        engines.check_engine(self)  # DDP / FSDP2 / DeepSpeed ZeRO-2/3: what they need (milegpo/trainer/engines.py)
        use_tensorboard_scalars(self.callback_handler)  # report_to tensorboard: n/a metrics left out, not warned
        self.credit_cfg = args.credit_config()
        self.vllm_weight_sync = None
        if self.use_vllm:  # vLLM on CPU repacks its weights: sync them through its in-place reload
            from .vllm_sync import install_weight_sync

            self.vllm_weight_sync = install_weight_sync(self.vllm_generation)
        n_slots = args.groups_per_process * args.group_size
        self._owns_pool = pool is None
        if pool is None:
            kinds = {t.env for t in self.train_tasks} | {t.env for v in self.eval_tasks.values() for t in v}
            pool = make_pool(n_slots, args.num_env_workers, kinds, step_timeout=args.env_step_timeout)
        if pool.n < n_slots:
            raise ValueError(f"the environment pool has {pool.n} slots; an iteration needs {n_slots} "
                             f"(groups_per_process x group_size)")
        conversational = getattr(self._tokenizer, "chat_template", None) is not None
        self.runner = EpisodeRunner(pool, conversational=conversational, history_length=args.history_length,
                                    horizon=args.horizon, require_think=args.require_think,
                                    prompt_style=args.prompt_style, state_similarity=args.state_similarity_params(),
                                    state_anchor=args.state_anchor, show_state_context=args.show_state_context,
                                    parts=args.rollout_parts, constrain_actions=args.constrain_actions,
                                    constrain_query=args.constrain_query, env_errors=args.env_errors)
        self.last_iteration: dict[str, Any] | None = None

    def _init_environment_factory(self, model, args, processing_class, train_tasks, eval_tasks, pool, callbacks,
                                  optimizers, peft_config, train_dataset, eval_dataset, environment_factory,
                                  reward_funcs) -> None:
        """``MileGPOTrainer(model, args, train_dataset=ds, environment_factory=MyEnv)``: TRL's tool-calling protocol
        (:mod:`milegpo.rollout.tools`) with step credit; GRPOTrainer's own setup of the environment (its tools'
        schema, response parser, prefix-preserving chat template) and reward functions."""
        if environment_factory is None:
            raise ValueError("MileGPOTrainer: train_dataset / reward_funcs go with environment_factory (TRL's "
                             "tool-calling protocol); the built-in worlds take train_tasks")
        if isinstance(environment_factory, dict):
            raise TypeError("MileGPOTrainer takes one environment class as environment_factory; a dict of "
                            "environments (TRL's multi-environment routing) is not supported")
        given = [name for name, value in (("train_tasks", train_tasks), ("eval_tasks", eval_tasks), ("pool", pool))
                 if value is not None]
        if given:
            raise ValueError(f"MileGPOTrainer: {', '.join(given)} belong to the built-in worlds; with "
                             f"environment_factory the dataset rows are the tasks (train_dataset / eval_dataset)")
        if train_dataset is None:
            raise ValueError("MileGPOTrainer: environment_factory needs a train_dataset (its rows are reset(**row)'s "
                             "arguments; a row per task group)")
        if len(train_dataset) < args.groups_per_iteration:
            raise ValueError(f"train_dataset has {len(train_dataset)} rows, fewer than groups_per_iteration "
                             f"({args.groups_per_iteration}): a row is one task group")
        _, probe = inspect_environment(environment_factory)  # a clear error for a class that breaks the protocol
        state_anchor = tool_state_anchor(args.state_anchor)
        if reward_funcs is not None and not isinstance(reward_funcs, list):
            reward_funcs = [reward_funcs]
        for func in reward_funcs or []:
            if isinstance(func, (str, torch.nn.Module)) or is_async_callable(func) or not callable(func):
                raise TypeError(f"MileGPOTrainer with environment_factory: reward_funcs must be plain (sync) "
                                f"functions, got {func!r:.80}")
        self._user_reward_funcs = list(reward_funcs or [])
        if isinstance(eval_dataset, Dataset):
            eval_dataset = {"eval": eval_dataset}
        self.train_tasks, self.eval_tasks = [], {}
        super().__init__(model=model, reward_funcs=reward_funcs, args=args, train_dataset=train_dataset,
                         eval_dataset=eval_dataset, processing_class=processing_class, callbacks=callbacks,
                         optimizers=optimizers, peft_config=peft_config, environment_factory=environment_factory)
        engines.check_engine(self)
        use_tensorboard_scalars(self.callback_handler)
        self.credit_cfg = args.credit_config()
        self.vllm_weight_sync = None
        if self.use_vllm:
            from .vllm_sync import install_weight_sync

            self.vllm_weight_sync = install_weight_sync(self.vllm_generation)
        self._owns_pool = False
        max_positions = getattr(self.model.config, "max_position_embeddings", None)
        max_context = max_positions - (self.max_completion_length or 0) if max_positions else None
        self.runner = ToolEpisodeRunner(
            environment_factory, self.processing_class, horizon=args.horizon,
            success_threshold=args.success_threshold, tool_timeout=args.tool_timeout,
            state_anchor=state_anchor, chat_template=self.chat_template,
            chat_template_kwargs=self.chat_template_kwargs,
            score=self._score_episode if self._user_reward_funcs else None, max_context=max_context,
            state_similarity=args.state_similarity_params(), probe=probe)
        self.last_iteration = None

    def _score_episode(self, env, row, prompt, completion, completion_ids) -> float:
        """The reward functions' weighted sum for one finished episode, called as GRPOTrainer calls them (the row's
        columns as one-element lists, ``environments=[env]``, ``trainer_state``); a None is NaN and left out of the
        sum (GRPOTrainer's nansum); anything but a real number is an error naming the function."""
        kwargs = {k: [v] for k, v in row.items() if k not in ("prompt", "completion", "completion_ids")}
        kwargs.update(trainer_state=self.state, log_extra=self._log_completion_extra, log_metric=self._log_metric,
                      environments=[env])
        total, seen = 0.0, False
        for i, func in enumerate(self._user_reward_funcs):
            values = func(prompts=[prompt], completions=[completion], completion_ids=[completion_ids], **kwargs)
            name = self.reward_func_names[i]
            if not isinstance(values, (list, tuple)) or len(values) != 1:
                raise ValueError(f"reward function {name!r} returned {values!r:.80}; expected a list of one reward "
                                 f"(one per completion)")
            value = values[0]
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise TypeError(f"reward function {name!r} returned {value!r:.80} ({type(value).__name__}); expected "
                                f"a float or None")
            if math.isnan(float(value)):
                continue
            total += float(self.reward_weights[i]) * float(value)
            seen = True
        return total if seen else float("nan")

    def close(self) -> None:
        """Stop the environment workers of the pool this trainer made (a pool passed in is left open); the
        trainer cannot play episodes afterwards. Call it when done (the job does); a pool left open holds its
        workers until it is collected or the interpreter exits (:class:`~milegpo.envs.EnvPool` closes then)."""
        if self._owns_pool:
            self.runner.close()

    # ------------------------------------------------------------------ data plumbing
    def _set_signature_columns_if_needed(self):
        if self.environment_factory is not None:  # the rows are reset's arguments: GRPOTrainer's columns
            return super()._set_signature_columns_if_needed()
        if self._signature_columns is None:
            self._signature_columns = ["task_index", "task_id"]

    def _get_train_sampler(self, dataset=None):
        # One "prompt" is one task group: the sampler draws groups_per_iteration distinct tasks per iteration
        # (no repeat inside the iteration: the episode loop plays group_size episodes of each) and repeats the
        # draw for the steps_per_generation x num_iterations micro-steps that reuse the iteration's rows.
        return RepeatSampler(
            data_source=dataset if dataset is not None else self.train_dataset,
            mini_repeat_count=1,
            batch_size=self.args.groups_per_iteration,
            repeat_count=self.num_iterations * self.args.steps_per_generation,
            shuffle=self.shuffle_dataset,
            seed=self.args.seed,
        )

    def get_train_dataloader(self):
        # batches of groups_per_process tasks: accelerate hands consecutive batches to consecutive processes,
        # so each process owns whole groups of every iteration.
        return self._get_dataloader(dataset=self.train_dataset, description="Training",
                                    batch_size=self.args.groups_per_process, sampler_fn=self._get_train_sampler,
                                    is_training=True)

    # ------------------------------------------------------------------ generation
    def _sync_any(self, flag: bool) -> bool:
        if self.accelerator.num_processes == 1:
            return flag
        t = torch.tensor([1 if flag else 0], device=self.accelerator.device)
        return bool(self.accelerator.reduce(t, reduction="sum").item() > 0)

    def _generate_batch(self, prompts: list, admissible: list[list[str]] | None = None,
                        query_words: list[tuple[str, ...] | None] | None = None):
        """One batched generation call through TRL's backend: (prompt_ids, completion_ids, logprobs, texts).

        admissible: per prompt, the actions its ``<action>`` block is constrained to (``constrain_actions``;
        :mod:`milegpo.trainer.constrained`): vLLM's structured outputs, one regex per prompt
        (:func:`~milegpo.trainer.trl_mirror.guided_vllm_generate`), or transformers' ``generate`` with a
        ``prefix_allowed_tokens_fn``; None: unconstrained. query_words: per prompt, the words a template's query
        is made of (``constrain_query``: its goal's words), None: free queries."""
        prompt_ids, _, _ = self._tokenize_prompts(prompts)
        prompt_ids = [list(p) for p in prompt_ids]
        words = query_words if query_words is not None else [None] * len(prompts)
        if admissible is not None and self.use_vllm:
            completion_ids, logprobs = trl_mirror.guided_vllm_generate(
                self, prompt_ids, [constrained.action_regex(a, w) if a else None for a, w in zip(admissible, words)])
        elif admissible is not None:
            allowed = constrained.allowed_tokens_fn(self._tokenizer, self.eos_token_ids, admissible,
                                                    self.generation_config.max_new_tokens, words)
            with _generate_with(self.accelerator.unwrap_model(self.model_wrapped), prefix_allowed_tokens_fn=allowed):
                completion_ids, logprobs = self._generate_single_turn(prompt_ids, None, {}, 1)
        else:
            completion_ids, logprobs = self._generate_single_turn(prompt_ids, None, {}, 1)
        completion_ids = [list(map(int, c)) for c in completion_ids]
        texts = self._tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        return prompt_ids, completion_ids, logprobs, texts

    @contextlib.contextmanager
    def _temperature(self, temperature: float | None):
        """Sample at ``temperature`` inside the block (transformers and vLLM backends)."""
        if temperature is None:
            yield
            return
        saved = []
        if getattr(self, "vllm_generation", None) is not None and self.use_vllm:
            saved.append((self.vllm_generation, "temperature", self.vllm_generation.temperature))
            self.vllm_generation.temperature = temperature
        if getattr(self, "generation_config", None) is not None:
            saved.append((self, "generation_config", self.generation_config))
            self.generation_config = self.generation_config.__class__(
                **{**self.generation_config.to_dict(), "temperature": temperature})
        if getattr(self, "generation_kwargs", None) is not None:
            saved.append((self, "generation_kwargs", self.generation_kwargs))
            self.generation_kwargs = {**self.generation_kwargs, "temperature": temperature}
        try:
            yield
        finally:
            for obj, name, value in saved:
                setattr(obj, name, value)

    def play(self, tasks: Sequence, group_size: int, temperature: float | None = None) -> Rollout:
        """Play ``group_size`` episodes of each task with the current policy (every process calls it). With
        ``environment_factory`` the tasks are dataset rows (dicts) and the episodes are tool-calling ones
        (:class:`~milegpo.rollout.tools.ToolEpisodeRunner`)."""
        with self._temperature(temperature):
            if self.environment_factory is not None:
                return self.runner.run(tasks, group_size, self._generate_ids, self._sync_any)
            return self.runner.run(tasks, group_size, self._generate_batch, self._sync_any)

    def _generate_ids(self, prompt_ids: list[list[int]]):
        """One batched generation call from token ids through TRL's backend (vLLM or transformers), as
        GRPOTrainer's tool loop calls it: (completion_ids, logprobs)."""
        completion_ids, logprobs = self._generate_single_turn([list(p) for p in prompt_ids], None, {}, 1)
        return [list(map(int, c)) for c in completion_ids], logprobs

    # ------------------------------------------------------------------ credit
    def _local_credit(self, rollout: Rollout) -> tuple[StepBatch, CreditResult]:
        """This process's rows as a StepBatch and their credit, estimated here on these rows only.

        The group / trajectory ids are offset by rank, so they are the ids of the whole iteration (groups
        of rank r are ``r * groups_per_process + i``). Every task group is on one process and credit is
        group-local (normalisations per group and per (group, state), one graph per group, every
        max-normalisation inside the group; ``tests/credit/test_group_locality.py``), so these are the
        advantages an estimate of the whole batch gives these rows, bit for bit on the torch and reference
        backends."""
        rank, groups = self.accelerator.process_index, self.args.groups_per_process
        batch = rollout.step_batch(group_offset=rank * groups, traj_offset=rank * groups * self.args.group_size)
        device = credit_device(self.args.credit_device, self.accelerator.device, self.args.credit_backend)
        # on a GPU the batch travels with its row order: the pipeline runs there without a row sort
        credit_batch = batch if device.type == "cpu" else batch.to(device)
        # near-duplicate observations of a group become one state (group-local, like the credit)
        similarity = self.runner.state_similarity  # the rule the runner sketched with; None: exact keys
        table = SketchTable.from_sketches(rollout.sketches) if similarity is not None else None
        seen, results = estimate_merged(credit_batch, {"credit": (self.args.credit_method, self.args.credit_variant,
                                                                  self.credit_cfg)},
                                        self.args.credit_backend, similarity, table)
        if similarity is not None:
            batch = seen.to("cpu")  # the states credit saw (saved for replay)
        return batch, results["credit"]

    def _iteration_summaries(self, rollout: Rollout, result: CreditResult):
        """Every process's episode summaries (rank order) and the credit diagnostics' parts merged over
        every process (:func:`~milegpo.credit.merge_diagnostic_parts`): one gather of small objects."""
        mine = (rollout.episode_summaries(), diagnostic_parts(result))
        every = gather_object([mine]) if self.accelerator.num_processes > 1 else [mine]
        summaries = [s for episodes, _ in every for s in episodes]
        return summaries, merge_diagnostic_parts([parts for _, parts in every])

    def gather_iteration_batch(self) -> StepBatch:
        """The whole last iteration's StepBatch: every process's rows in rank order (this process's are
        ``last_iteration["local"]``). A collective under several processes: every process must call it at
        the same point (the job's batch saver does, on the iterations it saves); training never needs it."""
        if self.last_iteration is None:
            raise RuntimeError("gather_iteration_batch: no iteration has been played yet")
        batch = self.last_iteration["batch"]
        if self.accelerator.num_processes == 1:
            return batch
        parts = gather_object([batch.to_numpy()])
        return StepBatch(**{k: np.concatenate([p[k] for p in parts]) for k in parts[0]})

    # ------------------------------------------------------------------ one iteration
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        """Play this process's task groups, score every step with MileGPO credit, build the chunked rows."""
        mode = "train" if self.model.training else "eval"
        device = self.accelerator.device
        t0 = time.perf_counter()
        if self.environment_factory is not None:
            tasks = list(inputs)  # the dataset rows: reset(**row)
        else:
            tasks = [self.train_tasks[int(x["task_index"])] for x in inputs]
        rollout = self.play(tasks, self.args.group_size)
        t1 = time.perf_counter()
        batch, result = self._local_credit(rollout)
        adv = result.advantages.detach().cpu().to(torch.float64)
        t2 = time.perf_counter()

        rows = rollout.rows
        n_rows = len(rows)
        world_rows = self.accelerator.gather(torch.tensor([n_rows], device=device)).cpu()
        start = int(world_rows[:self.accelerator.process_index].sum())
        summaries, credit_parts = self._iteration_summaries(rollout, result)
        self.last_iteration = {"batch": batch, "result": result, "local": slice(start, start + n_rows),
                               "rollout": rollout, "diagnostics": diagnostics_from_parts(credit_parts)}
        spg = self.args.steps_per_generation
        per_chunk = self.args.per_device_train_batch_size
        n_chunks = max(1, math.ceil(int(world_rows.max()) / spg / per_chunk))
        order = torch.randperm(n_rows).tolist() if self.shuffle_dataset else list(range(n_rows))
        tokens = torch.tensor([float(len(r.completion_ids)) for r in rows] or [0.0], device=device)
        num_items = self.accelerator.reduce(tokens.sum(), reduction="sum") if self.accelerator.num_processes > 1 \
            else tokens.sum()

        # Every process runs spg x n_chunks chunks of `chunk_rows` rows (real rows, then zero-weight padding rows):
        # TRL's loss gathers per-row metrics across processes, so chunk k must have the same shape everywhere.
        chunk_rows = math.ceil(int(world_rows.max()) / spg / n_chunks)
        pad_to = chunk_rows if self.accelerator.num_processes > 1 else None
        micro_steps = []
        for slice_rows in np.array_split(np.array(order, dtype=np.int64), spg):
            chunks = []
            for chunk_rows_idx in np.array_split(slice_rows, n_chunks):
                chunks.append(self._build_chunk(rows, adv, chunk_rows_idx.tolist(), num_items, len(slice_rows),
                                                pad_to))
            micro_steps.append(chunks)

        self._log_iteration(mode, rollout, summaries, credit_parts, self.last_iteration["diagnostics"], world_rows,
                            t1 - t0, t2 - t1)
        return {"micro_steps": micro_steps}

    def _build_chunk(self, rows, adv: torch.Tensor, idx: list[int], num_items, slice_rows: int,
                     pad_to: int | None) -> dict[str, Any]:
        """Padded tensors of rows ``idx``, topped up to ``pad_to`` rows (at least one) with zero-weight copies of
        the shortest row: completion mask 0, advantage 0, row_index -1."""
        device = self.accelerator.device
        if not rows:
            raise RuntimeError("a process played no step at all; every process must own at least one group")
        n_real = len(idx)
        n_pad = max(pad_to or 0, 1) - n_real if n_real < max(pad_to or 0, 1) else 0
        if n_pad:
            short = min(range(len(rows)), key=lambda i: len(rows[i].prompt_ids) + len(rows[i].completion_ids))
            idx = list(idx) + [short] * n_pad
        real = torch.tensor([True] * n_real + [False] * n_pad)
        sel = [rows[i] for i in idx]
        prompt_ids = pad([torch.tensor(r.prompt_ids) for r in sel], padding_value=self._tokenizer.pad_token_id,
                         padding_side="left", pad_to_multiple_of=self.pad_to_multiple_of).to(device)
        prompt_mask = pad([torch.ones(len(r.prompt_ids), dtype=torch.long) for r in sel], padding_value=0,
                          padding_side="left", pad_to_multiple_of=self.pad_to_multiple_of).to(device)
        completion = [r.completion_ids or [self._tokenizer.pad_token_id] for r in sel]
        completion_ids = pad([torch.tensor(c) for c in completion], padding_value=self._tokenizer.pad_token_id,
                             padding_side="right", pad_to_multiple_of=self.pad_to_multiple_of).to(device)
        completion_mask = pad([torch.tensor([1] * len(r.completion_ids) or [0]) for r in sel], padding_value=0,
                              padding_side="right", pad_to_multiple_of=self.pad_to_multiple_of).to(device)
        if self.mask_truncated_completions:
            eos_and_pad = [*self.eos_token_ids, self._tokenizer.pad_token_id]
            trunc = torch.tensor([bool(r.completion_ids) and r.completion_ids[-1] not in eos_and_pad for r in sel],
                                 device=device)
            completion_mask = completion_mask * (~trunc).unsqueeze(1).long()
        completion_mask = completion_mask * real.to(device).unsqueeze(1).long()
        advantages = torch.where(real, adv[idx].to(torch.float32), torch.zeros(())).to(device)
        chunk: dict[str, Any] = {
            "prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
            "completion_mask": completion_mask, "advantages": advantages, "num_items_in_batch": num_items,
            "row_index": torch.where(real, torch.tensor(idx, dtype=torch.long), -1),
            # row-averaged loss types average over the chunk's rows; this turns it into the slice's row mean
            "loss_weight": len(idx) / max(slice_rows, 1) if n_real else 0.0,
        }
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
        keep = completion_ids.size(1)
        batch_size = self.args.per_device_train_batch_size
        with torch.no_grad():
            if trl_mirror.needs_old_logps(self):
                old, _, _ = self._get_per_token_logps_and_entropies(self.model, input_ids, attention_mask, keep,
                                                                    batch_size=batch_size)
                chunk["old_per_token_logps"] = old
            if self.beta != 0.0:
                chunk["ref_per_token_logps"] = trl_mirror.reference_logps(self, input_ids, attention_mask, keep,
                                                                          batch_size)
        if all(r.logprobs is not None for r in sel):
            lp = pad([torch.tensor([float("nan") if x is None else x for x in (r.logprobs or [0.0])])
                      for r in sel], padding_value=0.0, padding_side="right",
                     pad_to_multiple_of=self.pad_to_multiple_of).to(device)
            chunk["sampling_per_token_logps"] = lp
            if self.use_vllm and self.vllm_importance_sampling_correction:
                chunk["importance_sampling_ratio"] = trl_mirror.vllm_importance_sampling_ratio(
                    chunk["old_per_token_logps"], lp, completion_mask, self.vllm_importance_sampling_mode,
                    self.vllm_importance_sampling_clip_min, self.vllm_importance_sampling_clip_max)
            if "old_per_token_logps" in chunk:  # trainer vs sampler log-prob gap (TRL's metric), equal shapes per rank
                gap = trl_mirror.sampling_logp_difference(chunk["old_per_token_logps"], lp, completion_mask)
                self._metrics["train"][trl_mirror.SAMPLING_LOGP_DIFFERENCE].append(
                    self.accelerator.gather(gap.reshape(1)).nanmean().item())
        return chunk

    def _log_iteration(self, mode, rollout: Rollout, summaries, credit_parts: dict[str, float],
                       credit_diagnostics: dict[str, float], world_rows, rollout_s: float, credit_s: float) -> None:
        """The iteration's metrics, each over the whole iteration (every process): episodes, rows, the
        advantages (from ``credit_parts``, merged over processes) and the credit diagnostics (of those parts),
        lengths, times (the slowest process's)."""
        m = self._metrics[mode]
        for k, v in episode_metrics(summaries, prefix="episode/").items():
            m[k].append(v)
        if self.args.constrain_actions:  # the actions were constrained to the admissible ones (reported when on)
            m["constrain_actions"].append(1.0)
        if self.args.constrain_query:  # the queries were made of the goal's words (reported when on)
            m["constrain_query"].append(1.0)
        m["rows/iteration"].append(float(world_rows.sum()))
        m["rows/per_process_max"].append(float(world_rows.max()))
        m["rows/per_process_min"].append(float(world_rows.min()))
        n = credit_parts["rows"]
        m["advantages/mean"].append(credit_parts["adv_sum"] / n if n else 0.0)
        m["advantages/std"].append(math.sqrt(credit_parts["adv_m2"] / (n - 1)) if n > 1 else 0.0)  # unbiased
        m["advantages/abs_mean"].append(credit_parts["adv_abs_sum"] / n if n else 0.0)
        m["advantages/zero_share"].append(credit_parts["adv_zeros"] / n if n else 0.0)
        for k, v in credit_diagnostics.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                m[f"credit/{k}"].append(float(v))
        lengths = torch.tensor([float(len(r.completion_ids)) for r in rollout.rows] or [0.0])
        eos_and_pad = set([*self.eos_token_ids, self._tokenizer.pad_token_id])
        clipped = torch.tensor([float(bool(r.completion_ids) and r.completion_ids[-1] not in eos_and_pad)
                                for r in rollout.rows] or [0.0])
        seen = float(sum(len(r.prompt_ids) + len(r.completion_ids) for r in rollout.rows))
        # the distinct states (the state anchor's keys) of this process's groups, for states/distinct_per_group
        group_states = {(r.group, r.state) for r in rollout.rows}
        groups = {r.group for r in rollout.rows}
        stats = torch.tensor([float(lengths.sum()), float(len(rollout.rows)), float(clipped.sum()), rollout_s,
                              credit_s, rollout.generate_s, rollout.env_s, seen, float(len(group_states)),
                              float(len(groups))], dtype=torch.float64, device=self.accelerator.device)
        if self.accelerator.num_processes > 1:
            stats = self.accelerator.gather(stats.unsqueeze(0))
            tot, mx = stats.sum(0), stats.max(0).values
        else:
            tot = mx = stats
        m[trl_mirror.MEAN_LENGTH].append(float(tot[0] / max(float(tot[1]), 1.0)))
        m[trl_mirror.CLIPPED_RATIO].append(float(tot[2] / max(float(tot[1]), 1.0)))
        m["time/rollout_s"].append(float(mx[3]))
        m["time/credit_s"].append(float(mx[4]))
        m["time/generate_s"].append(float(mx[5]))
        m["time/env_s"].append(float(mx[6]))
        m["states/distinct_per_group"].append(float(tot[8] / max(float(tot[9]), 1.0)))
        if isinstance(rollout, ToolRollout):  # GRPOTrainer's tool metrics, per episode / per call
            counts = torch.tensor([float(rollout.tool_calls), float(rollout.tool_failures),
                                   float(rollout.tool_timeouts), float(len(rollout.episodes))], dtype=torch.float64,
                                  device=self.accelerator.device)
            if self.accelerator.num_processes > 1:
                counts = self.accelerator.gather(counts.unsqueeze(0)).sum(0)
            m["tools/call_frequency"].append(float(counts[0] / max(float(counts[3]), 1.0)))
            m["tools/failure_frequency"].append(float(counts[1] / counts[0]) if counts[0] > 0 else 0.0)
            m["tools/timeouts"].append(float(counts[2]))
        if mode == "train":
            self.state.num_input_tokens_seen += int(tot[7])
        m[trl_mirror.NUM_TOKENS] = [self.state.num_input_tokens_seen]

    # ------------------------------------------------------------------ training
    def training_step(self, model, inputs, num_items_in_batch=None):
        """One micro-step: play an iteration when one is due (``inputs``: this process's task rows), then
        transformers' own ``Trainer.training_step`` on each chunk of the micro-step; gradients are
        synchronised on the last chunk only. Returns the micro-step's loss (the sum of its chunks')."""
        with trl_mirror.micro_step_bookkeeping(self):
            # the iteration is played in training mode, as GRPOTrainer plays it inside Trainer.training_step
            model.train()
            if hasattr(self.optimizer, "train") and callable(self.optimizer.train):
                self.optimizer.train()
            if trl_mirror.generation_due(self):
                self._buffered_inputs = self._generate_and_score_completions(inputs)["micro_steps"]
            chunks = trl_mirror.buffered_micro_step(self)
            total = None
            for i, chunk in enumerate(chunks):
                with contextlib.nullcontext() if i == len(chunks) - 1 else self._no_gradient_sync(model):
                    # transformers' Trainer.training_step: GRPOTrainer's adds only the counters kept above
                    loss = super(GRPOTrainer, self).training_step(model, chunk, num_items_in_batch)
                total = loss if total is None else total + loss
        return total

    @contextlib.contextmanager
    def _no_gradient_sync(self, model):
        """A chunk before the last of its micro-step: the model's gradient reduction deferred
        (``accelerator.no_sync``: DDP / FSDP; transformers' own deferral for a model it sharded at load time,
        as its loop does) and accelerate's ``sync_gradients`` off, so that the backward is not an
        accumulation boundary (DeepSpeed does not step on it). :mod:`milegpo.trainer.engines`: per engine."""
        state = self.accelerator.gradient_state
        synced = state.sync_gradients
        state._set_sync_gradients(False)
        if getattr(self, "is_distributed_loading_by_transformers", False) and is_fsdp_managed_module(self.model):
            deferred = self._defer_fsdp_gradient_reduction()  # Trainer's: accelerate did not wrap this model
        else:
            deferred = self.accelerator.no_sync(model)
        try:
            with deferred:
                yield
        finally:
            state._set_sync_gradients(synced)

    def _prepare_inputs(self, inputs):
        """``Trainer.training_step``'s input hook: a chunk comes ready from :meth:`_build_chunk` (on the
        accelerator device, its floats kept in float32 as GRPOTrainer keeps them) and is used as is."""
        if not (isinstance(inputs, dict) and "completion_ids" in inputs and "advantages" in inputs):
            raise RuntimeError("MileGPOTrainer trains on the chunks of its iterations (training_step) and evaluates "
                               "with evaluate() (episodes), not with prediction_step")
        return inputs

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """TRL's GRPO loss of one chunk (or the fused kernel's, same math); row-averaged loss types are weighted
        by the chunk's share of rows."""
        if return_outputs:
            raise ValueError("MileGPOTrainer does not support returning outputs")
        if self._fused_loss_on(inputs):
            loss = self._fused_loss(model, inputs)
        else:
            loss = super().compute_loss(model, inputs)
        if self.loss_type in TOKEN_NORMALISED_LOSSES:
            return loss  # normalised by the iteration's token count already; empty chunks have no tokens
        return loss * inputs["loss_weight"]

    def _fused_loss_on(self, inputs) -> bool:
        """Whether this chunk's loss goes through milegpo_kernels.fused_policy_loss (see MileGPOConfig)."""
        wanted = self.args.use_fused_loss
        if wanted is None:
            wanted = self.accelerator.device.type == "cuda"
        if not wanted:
            return False
        unsupported = []
        if self.loss_type not in ("grpo", "bnpo", "dr_grpo", "dapo"):
            unsupported.append(f"loss_type={self.loss_type}")
        if self.importance_sampling_level != "token":
            unsupported.append("sequence-level importance sampling")
        if self.off_policy_mask_threshold is not None or self.top_entropy_quantile < 1.0:
            unsupported.append("off-policy / entropy masks")
        if self._entropy_bonus_enabled:
            unsupported.append("an entropy bonus")
        if "importance_sampling_ratio" in inputs:
            unsupported.append("vLLM importance-sampling correction")
        sharding = engines.weight_sharding(self)
        if sharding is not None:
            unsupported.append(f"{sharding} (the LM head's weight is a shard outside the forward)")
        if unsupported:
            if self.args.use_fused_loss:
                raise ValueError(f"use_fused_loss=True does not support {', '.join(unsupported)}; "
                                 "set use_fused_loss=False to use TRL's loss")
            return False
        return True

    def _fused_loss(self, model, inputs):
        """The GRPO loss from the last hidden states and the LM head with milegpo_kernels.fused_policy_loss:
        log-probs, ratio, clip, k3 KL and the loss type's normaliser without (B, T, V) logits; TRL's scaling
        for gradient accumulation on top, and TRL's metrics (KL, clip ratios, entropy)."""
        from milegpo_kernels import fused_policy_loss

        prompt_ids, prompt_mask = inputs["prompt_ids"], inputs["prompt_mask"]
        completion_ids, completion_mask = inputs["completion_ids"], inputs["completion_mask"]
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
        keep = completion_ids.size(1)
        unwrapped = self.accelerator.unwrap_model(model)
        # the decoder's last hidden states through the (possibly DDP-wrapped) model: the LM head is not applied
        out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True, logits_to_keep=1,
                    use_cache=False)
        hidden = out.hidden_states[-1][:, -keep - 1:-1, :]  # the positions that predict the completion tokens
        head = unwrapped.get_output_embeddings()
        mode = "train" if self.model.training else "eval"
        num_items = None
        if self.loss_type == "dapo":  # TRL's divisor: the generation batch's tokens, per accumulation window
            num_items = trl_mirror.token_loss_normalizer(
                inputs["num_items_in_batch"], self.accelerator.num_processes, self.current_gradient_accumulation_steps,
                self.args.steps_per_generation, training=mode == "train")
        loss, stats = fused_policy_loss(
            hidden, head.weight, completion_ids, completion_mask, inputs["advantages"],
            inputs.get("old_per_token_logps"), inputs.get("ref_per_token_logps") if self.beta != 0.0 else None,
            bias=head.bias, temperature=self.temperature, epsilon_low=self.epsilon_low,
            epsilon_high=self.epsilon_high, delta=self.args.delta, beta=self.beta, loss_type=self.loss_type,
            num_items_in_batch=num_items, max_completion_length=self.max_completion_length,
            bias_correction_kl=self.args.use_bias_correction_kl)
        if self.loss_type != "dapo":
            loss = loss / trl_mirror.accumulation_divisor(self.current_gradient_accumulation_steps, mode == "train")
        m = self._metrics[mode]
        gather = self.accelerator.gather
        if self.beta != 0.0:
            m[trl_mirror.KL].append(gather(stats.kl.reshape(1)).nanmean().item())
        m[trl_mirror.ENTROPY].append(gather(stats.entropy.reshape(1)).nanmean().item())
        m[trl_mirror.CLIP_LOW].append(gather(stats.clip_low.reshape(1)).nanmean().item())
        m[trl_mirror.CLIP_HIGH].append(gather(stats.clip_high.reshape(1)).nanmean().item())
        m[trl_mirror.CLIP_REGION].append(gather(stats.clip_region.reshape(1)).nanmean().item())
        return loss

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval") -> dict[str, float]:
        """Play ``eval_group_size`` episodes of every evaluation task at ``eval_temperature`` and log
        ``<prefix>_<split>_success_rate`` (and per task type, length, invalid rate, and ``_score``, the mean
        score x 100, where the world scores episodes: WebShop) plus the gap between the first two splits
        (``<prefix>_<a>_minus_<b>``, the paper's ID-OOD gap).

        Each split's episodes sample from torch's generator seeded with ``args.seed`` (forked: training's
        random stream is left as it was), so the same policy, tasks and seed give the same result, whether
        ``milegpo train`` evaluates it after training or ``milegpo eval`` loads it from disk.

        eval_dataset: None (the trainer's ``eval_tasks``), ``{split: [Task]}`` or ``[Task]``."""
        if self.environment_factory is not None:  # dataset rows: the eval_dataset given at init, or these
            if eval_dataset is None:
                eval_dataset = self.eval_dataset or {}
            splits = ({k: list(v) for k, v in eval_dataset.items()} if isinstance(eval_dataset, dict)
                      else {"eval": list(eval_dataset)})
            for name, rows in splits.items():
                if not all(isinstance(r, dict) for r in rows):
                    raise TypeError(f"evaluate: split {name!r} must be dataset rows (dicts) for environment_factory")
        elif eval_dataset is None:
            splits = self.eval_tasks
        elif isinstance(eval_dataset, dict):
            splits = {k: list(v) for k, v in eval_dataset.items()}
        else:
            splits = {"custom": list(eval_dataset)}
        for name, tasks in splits.items():
            if self.environment_factory is None and not all(isinstance(t, Task) for t in tasks):
                raise TypeError(f"evaluate: split {name!r} must be a list of milegpo.envs.Task")
        was_training = self.model.training
        self.model.eval()
        rank, world = self.accelerator.process_index, self.accelerator.num_processes
        metrics: dict[str, float] = {}
        start = time.perf_counter()
        try:
            for split, tasks in splits.items():
                mine = list(tasks)[rank::world]
                cuda = [self.accelerator.device] if self.accelerator.device.type == "cuda" else []
                with torch.random.fork_rng(devices=cuda):
                    torch.manual_seed(self.args.seed)
                    rollout = self.play(mine, self.args.eval_group_size, temperature=self.args.eval_temperature)
                summaries = rollout.episode_summaries()
                if world > 1:
                    summaries = gather_object(summaries)
                for k, v in episode_metrics(summaries).items():
                    metrics[f"{metric_key_prefix}_{split}_{k.replace('/', '_')}"] = v
            names = list(splits)
            if len(names) >= 2:
                a, b = names[0], names[1]
                metrics[f"{metric_key_prefix}_{a}_minus_{b}"] = (metrics.get(f"{metric_key_prefix}_{a}_success_rate",
                                                                             float("nan"))
                                                                 - metrics.get(f"{metric_key_prefix}_{b}_success_rate",
                                                                               float("nan")))
            if self.args.constrain_actions:
                metrics[f"{metric_key_prefix}_constrain_actions"] = 1.0
            if self.args.constrain_query:
                metrics[f"{metric_key_prefix}_constrain_query"] = 1.0
            metrics[f"{metric_key_prefix}_runtime"] = time.perf_counter() - start
            self.log(metrics)
        finally:
            if was_training:
                self.model.train()
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics


__all__ = ["MileGPOTrainer", "environment_reward", "TOKEN_NORMALISED_LOSSES"]
