"""MileGPOTrainer: TRL's GRPOTrainer, playing multi-step text-game episodes with per-step MileGPO credit.

One training iteration (docs/architecture.md, "Data flow of one training iteration"):

1. the dataloader hands each process its ``groups_per_iteration / world_size`` tasks (whole groups);
2. the rollout source (:class:`~milegpo.rollout.EpisodeRunner` for the text worlds,
   :class:`~milegpo.rollout.tools.ToolEpisodeRunner` for an ``environment_factory``) plays ``group_size``
   episodes of each, one batched generation per step through TRL's own backend (vLLM colocate / server when
   ``use_vllm``, transformers ``generate`` otherwise); every step is one row;
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
:func:`~milegpo.trl_seam.micro_step_bookkeeping`.

Where the episodes come from is the trainer's rollout source (:mod:`milegpo.trainer.sources`): the text
worlds with their pool, or TRL's ``environment_factory`` protocol with its tool runner. Each owns its runner, its
datasets and its evaluation sets; the trainer plays through it, credits the rows and trains on them.

What has to reproduce TRL's math lives in :mod:`milegpo.trainer.trl_mirror` (tested against TRL's own methods):
the old / reference log-probs condition, the vLLM importance-sampling ratio, the token-normalised loss divisor of
the fused loss, and the metric names. Every private name of TRL the trainer touches goes through
:mod:`milegpo.trl_seam`, the one module that names them: GRPOTrainer's state (the micro-step counter, the
buffered iteration, the metrics), its generation backends and log-probs, and the private hooks overridden for
MileGPO, which its base class :class:`~milegpo.trl_seam.GRPOHooks` hands to the public-named methods here:
``signature_columns`` and ``train_sampler`` (each process gets whole task groups), ``play_iteration`` (episodes +
credit instead of single-turn generation + reward functions), ``prepared_chunk`` (a chunk is ready as built;
anything else is refused). Overridden directly: ``get_train_dataloader``, ``training_step`` (play when due, then
``Trainer.training_step`` per chunk), ``compute_loss`` (chunk weight for row-averaged loss types; the fused loss)
and ``evaluate`` (ID / OOD success and their gap).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import tempfile
import time
import warnings
from typing import Any, Sequence

import numpy as np
import torch
import trl
from accelerate.utils import gather_object
from trl.trainer.utils import RepeatSampler, pad

from .config import MileGPOConfig
from .sources import RolloutSource, environment_reward, rollout_source
from ..credit import (CreditResult, SketchTable, StepBatch, diagnostic_parts, diagnostics_from_parts,
                      estimate_merged, merge_diagnostic_parts)
from ..envs import Task
from ..rollout import Rollout, episode_metrics
from .tensorboard import use_tensorboard_scalars
from .trl_mirror import TOKEN_NORMALISED_LOSSES

# the modules, so that each use reads trl_mirror.<piece> (``from . import trl_mirror`` would import the package)
import milegpo.trainer.constrained as constrained  # isort: skip
import milegpo.trainer.engines as engines  # isort: skip
import milegpo.trainer.trl_mirror as trl_mirror  # isort: skip
import milegpo.trl_seam as trl_seam  # isort: skip


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


@contextlib.contextmanager
def _reference_from(model, args, peft_config):
    """Inside the block an in-memory ``model`` (``config.name_or_path`` empty) has a folder TRL can build the
    reference model from: with ``beta > 0`` GRPOTrainer loads the reference from the policy's name, which such a
    model does not have. The folder is a copy of the model as it is now, saved in a temporary folder that is gone
    after the block (the reference is loaded by then); the name is restored."""
    config = getattr(model, "config", None)
    if (args.beta == 0.0 or peft_config is not None or isinstance(model, (str, os.PathLike)) or config is None
            or getattr(config, "name_or_path", "") or not callable(getattr(model, "save_pretrained", None))):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="milegpo-reference-") as folder:
        model.save_pretrained(folder)
        config.name_or_path = folder
        try:
            yield
        finally:
            config.name_or_path = ""


class MileGPOTrainer(trl_seam.GRPOHooks):
    """GRPOTrainer for multi-step text-game agents with MileGPO (or GRPO / GiGPO / GraphGPO) credit.

    The arguments are GRPOTrainer's, in its order (``MileGPOTrainer(model, reward_funcs, args=...)``), then
    milegpo's own keywords. ``tools`` / ``rollout_func`` (GRPOTrainer's) and model reward functions are refused.

    Args:
        model: a model id / path or a ``PreTrainedModel`` (as GRPOTrainer). An in-memory model (one with no
            ``name_or_path``) with ``beta > 0`` gets a copy of itself as the reference model (GRPOTrainer would
            load the reference from that empty name). A policy folder saved by
            ``milegpo train`` (``milegpo_run/final``) is loaded as ``milegpo eval`` loads it: its tokenizer
            faithfully (:func:`milegpo.trainer.saved_policy.reload_tokenizer`, unless ``processing_class`` is given) and
            its ``milegpo_task.json`` in the fields ``args`` leaves at their defaults
            (:meth:`MileGPOConfig.with_task_settings`; ``self.args`` is that copy).
        reward_funcs: with ``environment_factory``, plain functions summed with ``get_reward``; each is called
            once per finished episode (lists of one episode), not once per generation batch as in GRPOTrainer (a
            reward that normalises over its batch sees one episode; a warning says so at start).
        args: a :class:`~milegpo.trainer.config.MileGPOConfig`.
        processing_class: the tokenizer (left padding); a chat template makes prompts conversational.
        train_tasks: the training Tasks (default: ``make_tasks(args.env, args.train_split, args.num_train_tasks)``).
        eval_tasks: ``{split: [Task]}`` (default: ``args.num_eval_tasks`` tasks of each of ``args.eval_splits``).
        pool: the environment pool (default: :func:`~milegpo.envs.make_pool` with ``args.num_env_workers``:
            an :class:`EnvPool` for worlds whose steps cost more than a round trip to a worker, else a
            :class:`SequentialPool`); it must hold ``groups_per_process * group_size`` slots. A pool the
            trainer made is its own: :meth:`close` stops its workers (a pool passed in stays the caller's).
        callbacks, optimizers, quantization_config, peft_config: as GRPOTrainer.
        environment_factory: an environment class in TRL's tool-calling protocol (GRPOTrainer's argument of that
            name: ``reset(**row) -> str | None``, public methods = tools, optional ``get_reward() -> float``),
            played by :class:`~milegpo.rollout.tools.ToolEpisodeRunner`: each assistant turn is one row, its
            tokens get that turn's advantage. Then ``train_dataset`` (its rows are the task groups, ``reset``'s
            arguments), ``eval_dataset`` (a Dataset or ``{split: Dataset}``) and ``reward_funcs`` are GRPOTrainer's,
            and ``train_tasks`` / ``eval_tasks`` / ``pool`` are not taken. ``args.horizon`` is the turn budget (not
            GRPOConfig's ``max_tool_calling_iterations``), ``args.success_threshold`` decides success,
            ``args.tool_timeout`` bounds a tool call.

    The episodes come from ``self.source`` (:mod:`milegpo.trainer.sources`); ``runner``, ``train_tasks`` and
    ``eval_tasks`` are its.

    After each iteration ``self.last_iteration`` holds this process's part of it: ``batch`` (the StepBatch
    of its rows, group / trajectory ids those of the whole iteration), ``result`` (its CreditResult: the
    whole batch's credit on these rows), ``rollout`` (its :class:`~milegpo.rollout.Rollout`), ``local``
    (the slice of these rows in the whole batch, the processes' rows in rank order) and, for the whole
    iteration, ``diagnostics`` (``milegpo.credit.diagnostics`` of the whole batch, merged from every
    process's counts). With one process ``batch`` is the whole batch. :meth:`gather_iteration_batch`
    gathers the whole StepBatch (a collective: every process calls it; the job does on the iterations it
    saves).
    """

    def __init__(self, model, reward_funcs=None, args: MileGPOConfig | None = None, train_dataset=None,
                 eval_dataset=None, processing_class=None, reward_processing_classes=None, callbacks=None,
                 optimizers=(None, None), quantization_config=None, peft_config=None, tools=None, rollout_func=None,
                 environment_factory=None, *, train_tasks: Sequence[Task] | None = None,
                 eval_tasks: dict[str, Sequence[Task]] | None = None, pool=None):
        if isinstance(reward_funcs, MileGPOConfig):
            raise TypeError("MileGPOTrainer takes GRPOTrainer's argument order (model, reward_funcs, args, ...): "
                            "pass the config as args=")
        if not isinstance(args, MileGPOConfig):
            raise TypeError(f"MileGPOTrainer needs a MileGPOConfig as args, got {type(args).__name__}")
        refused = [name for name, value in (("tools", tools), ("rollout_func", rollout_func),
                                            ("reward_processing_classes", reward_processing_classes))
                   if value is not None]
        if refused:
            raise TypeError(f"MileGPOTrainer does not take GRPOTrainer's {', '.join(refused)}: tools come from an "
                            "environment_factory class, episodes from its rollout source, rewards from the "
                            "environments and plain reward functions")
        unchecked = trl_seam.trl_version_mismatch(trl.__version__)
        if unchecked:
            warnings.warn(unchecked, stacklevel=2)
        source, args, processing_class = rollout_source(
            model, args, processing_class, train_tasks=train_tasks, eval_tasks=eval_tasks, pool=pool,
            train_dataset=train_dataset, eval_dataset=eval_dataset, environment_factory=environment_factory,
            reward_funcs=reward_funcs)
        self.source: RolloutSource = source
        with _reference_from(model, args, peft_config):
            super().__init__(model=model, args=args, processing_class=processing_class, callbacks=callbacks,
                             optimizers=optimizers, quantization_config=quantization_config, peft_config=peft_config,
                             **source.trl_arguments())
        engines.check_engine(self)  # DDP / FSDP2 / DeepSpeed ZeRO-2/3: what they need (milegpo/trainer/engines.py)
        use_tensorboard_scalars(self.callback_handler)  # report_to tensorboard: n/a metrics left out, not warned
        self.credit_cfg = args.credit_config()
        self.vllm_weight_sync = None
        if self.use_vllm:  # vLLM on CPU repacks its weights: sync them through its in-place reload
            from .vllm_sync import install_weight_sync

            self.vllm_weight_sync = install_weight_sync(self.vllm_generation)
        source.start(self)
        self.last_iteration: dict[str, Any] | None = None

    @property
    def runner(self):
        """The rollout source's episode runner."""
        return self.source.runner

    @property
    def train_tasks(self) -> list:
        """The training tasks of the text worlds (an ``environment_factory`` run: none, its rows are the tasks)."""
        return getattr(self.source, "train_tasks", [])

    @property
    def eval_tasks(self) -> dict[str, list]:
        """The evaluation splits, ``{name: tasks}`` (an ``environment_factory`` run: its eval_dataset's rows)."""
        return self.source.eval_splits()

    def close(self) -> None:
        """Stop the environment workers of the pool this trainer made (a pool passed in is left open); the
        trainer cannot play episodes afterwards. Call it when done (the job does); a pool left open holds its
        workers until it is collected or the interpreter exits (:class:`~milegpo.envs.EnvPool` closes then)."""
        self.source.close()

    # ------------------------------------------------------------------ data plumbing
    def signature_columns(self) -> list[str] | None:
        return self.source.signature_columns()

    def train_sampler(self, dataset=None):
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
        return trl_seam.dataloader(self, self.train_dataset, "Training", self.args.groups_per_process,
                                   self.train_sampler, is_training=True)

    # ------------------------------------------------------------------ generation
    def sync_any(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any process (an all-reduce; every process calls it at the same point)."""
        if self.accelerator.num_processes == 1:
            return flag
        t = torch.tensor([1 if flag else 0], device=self.accelerator.device)
        return bool(self.accelerator.reduce(t, reduction="sum").item() > 0)

    def generate_texts(self, prompts: list, admissible: list[list[str]] | None = None,
                       query_words: list[tuple[str, ...] | None] | None = None):
        """One batched generation call through TRL's backend: (prompt_ids, completion_ids, logprobs, texts).

        admissible: per prompt, the actions its ``<action>`` block is constrained to (``constrain_actions``;
        :mod:`milegpo.trainer.constrained`): vLLM's structured outputs, one regex per prompt
        (:func:`~milegpo.trl_seam.guided_vllm_generate`), or transformers' ``generate`` with a
        ``prefix_allowed_tokens_fn`` (``constrained_sampling='sequence'``: with a
        :class:`~milegpo.trainer.constrained.SequenceScorer` of the model at the sampling temperature); None:
        unconstrained. query_words: per prompt, the words a template's query is made of (``constrain_query``: its
        goal's words), None: free queries."""
        prompt_ids = trl_seam.tokenize_prompts(self, prompts)
        words = query_words if query_words is not None else [None] * len(prompts)
        tokenizer = trl_seam.tokenizer(self)
        if admissible is not None and self.use_vllm:
            completion_ids, logprobs = trl_seam.guided_vllm_generate(
                self, prompt_ids, [constrained.action_regex(a, w) if a else None for a, w in zip(admissible, words)])
        elif admissible is not None:
            model = self.accelerator.unwrap_model(self.model_wrapped)
            scorer = constrained.SequenceScorer(model, self.generation_config.temperature) \
                if self.args.constrained_sampling == "sequence" else None
            allowed = constrained.allowed_tokens_fn(tokenizer, self.eos_token_ids, admissible,
                                                    self.generation_config.max_new_tokens, words, scorer, prompt_ids)
            with _generate_with(model, prefix_allowed_tokens_fn=allowed):
                completion_ids, logprobs = trl_seam.generate_single_turn(self, prompt_ids)
        else:
            completion_ids, logprobs = trl_seam.generate_single_turn(self, prompt_ids)
        completion_ids = [list(map(int, c)) for c in completion_ids]
        texts = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        return prompt_ids, completion_ids, logprobs, texts

    def generate_ids(self, prompt_ids: list[list[int]]):
        """One batched generation call from token ids through TRL's backend (vLLM or transformers), as
        GRPOTrainer's tool loop calls it: (completion_ids, logprobs)."""
        completion_ids, logprobs = trl_seam.generate_single_turn(self, [list(p) for p in prompt_ids])
        return [list(map(int, c)) for c in completion_ids], logprobs

    def play(self, tasks: Sequence, group_size: int, temperature: float | None = None) -> Rollout:
        """Play ``group_size`` episodes of each task with the current policy (every process calls it). With
        ``environment_factory`` the tasks are dataset rows (dicts) and the episodes are tool-calling ones
        (:class:`~milegpo.rollout.tools.ToolEpisodeRunner`)."""
        with trl_seam.sampling_temperature(self, temperature):
            return self.source.play(tasks, group_size, self)

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
        similarity = self.source.state_similarity  # the rule the runner sketched with; None: exact keys
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
    def play_iteration(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        """Play this process's task groups, score every step with MileGPO credit, build the chunked rows
        (GRPOTrainer's ``_generate_and_score_completions``: ``{"micro_steps": [[chunk, ...], ...]}``)."""
        mode = "train" if self.model.training else "eval"
        device = self.accelerator.device
        t0 = time.perf_counter()
        rollout = self.play(self.source.tasks(inputs), self.args.group_size)
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
        pad_id = trl_seam.tokenizer(self).pad_token_id
        n_real = len(idx)
        n_pad = max(pad_to or 0, 1) - n_real if n_real < max(pad_to or 0, 1) else 0
        if n_pad:
            short = min(range(len(rows)), key=lambda i: len(rows[i].prompt_ids) + len(rows[i].completion_ids))
            idx = list(idx) + [short] * n_pad
        real = torch.tensor([True] * n_real + [False] * n_pad)
        sel = [rows[i] for i in idx]
        prompt_ids = pad([torch.tensor(r.prompt_ids) for r in sel], padding_value=pad_id,
                         padding_side="left", pad_to_multiple_of=self.pad_to_multiple_of).to(device)
        prompt_mask = pad([torch.ones(len(r.prompt_ids), dtype=torch.long) for r in sel], padding_value=0,
                          padding_side="left", pad_to_multiple_of=self.pad_to_multiple_of).to(device)
        completion = [r.completion_ids or [pad_id] for r in sel]
        completion_ids = pad([torch.tensor(c) for c in completion], padding_value=pad_id,
                             padding_side="right", pad_to_multiple_of=self.pad_to_multiple_of).to(device)
        completion_mask = pad([torch.tensor([1] * len(r.completion_ids) or [0]) for r in sel], padding_value=0,
                              padding_side="right", pad_to_multiple_of=self.pad_to_multiple_of).to(device)
        if self.mask_truncated_completions:
            eos_and_pad = [*self.eos_token_ids, pad_id]
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
                chunk["old_per_token_logps"] = trl_seam.per_token_logps(self, self.model, input_ids, attention_mask,
                                                                        keep, batch_size)
            if self.beta != 0.0:
                chunk["ref_per_token_logps"] = trl_seam.reference_logps(self, input_ids, attention_mask, keep,
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
                trl_seam.metrics(self, "train")[trl_mirror.SAMPLING_LOGP_DIFFERENCE].append(
                    self.accelerator.gather(gap.reshape(1)).nanmean().item())
        return chunk

    def _log_iteration(self, mode, rollout: Rollout, summaries, credit_parts: dict[str, float],
                       credit_diagnostics: dict[str, float], world_rows, rollout_s: float, credit_s: float) -> None:
        """The iteration's metrics, each over the whole iteration (every process): episodes, rows, the
        advantages (from ``credit_parts``, merged over processes) and the credit diagnostics (of those parts),
        lengths, times (the slowest process's)."""
        m = trl_seam.metrics(self, mode)
        for k, v in episode_metrics(summaries, prefix="episode/").items():
            m[k].append(v)
        if self.args.constrain_actions:  # the actions were constrained to the admissible ones (reported when on)
            m["constrain_actions"].append(1.0)
        if self.args.constrain_query:  # the queries were made of the goal's words (reported when on)
            m["constrain_query"].append(1.0)
        if self.args.constrained_sampling == "sequence":  # actions drawn whole (config: needs constrain_actions)
            m["constrained_sampling_sequence"].append(1.0)
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
        eos_and_pad = set([*self.eos_token_ids, trl_seam.tokenizer(self).pad_token_id])
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
        counts = self.source.iteration_counts(rollout)  # the source's own counts (tool calls...), summed
        if counts:
            names = sorted(counts)
            totals = torch.tensor([counts[k] for k in names], dtype=torch.float64, device=self.accelerator.device)
            if self.accelerator.num_processes > 1:
                totals = self.accelerator.gather(totals.unsqueeze(0)).sum(0)
            for k, v in self.source.count_metrics(dict(zip(names, totals.tolist()))).items():
                m[k].append(float(v))
        if mode == "train":
            self.state.num_input_tokens_seen += int(tot[7])
        m[trl_mirror.NUM_TOKENS] = [self.state.num_input_tokens_seen]

    # ------------------------------------------------------------------ training
    def training_step(self, model, inputs, num_items_in_batch=None):
        """One micro-step: play an iteration when one is due (``inputs``: this process's task rows), then
        transformers' own ``Trainer.training_step`` on each chunk of the micro-step; gradients are
        synchronised on the last chunk only. Returns the micro-step's loss (the sum of its chunks')."""
        with trl_seam.micro_step_bookkeeping(self):
            # the iteration is played in training mode, as GRPOTrainer plays it inside Trainer.training_step
            model.train()
            if hasattr(self.optimizer, "train") and callable(self.optimizer.train):
                self.optimizer.train()
            if trl_seam.generation_due(self):
                trl_seam.buffer_iteration(self, self.play_iteration(inputs)["micro_steps"])
            chunks = trl_seam.buffered_micro_step(self)
            total = None
            for i, chunk in enumerate(chunks):
                last = i == len(chunks) - 1
                with contextlib.nullcontext() if last else trl_seam.no_gradient_sync(self, model):
                    # transformers' Trainer.training_step: GRPOTrainer's adds only the counters kept above
                    loss = super(trl.GRPOTrainer, self).training_step(model, chunk, num_items_in_batch)
                total = loss if total is None else total + loss
        return total

    def prepared_chunk(self, inputs):
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
        if trl_seam.entropy_bonus_enabled(self):
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
        m = trl_seam.metrics(self, mode)
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

        eval_dataset: None (the rollout source's evaluation sets), ``{split: [Task]}`` or ``[Task]`` (with
        ``environment_factory``: ``{split: Dataset}``, a Dataset or a list of rows)."""
        splits = self.source.eval_splits(eval_dataset)
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
            if self.args.constrained_sampling == "sequence":
                metrics[f"{metric_key_prefix}_constrained_sampling_sequence"] = 1.0
            metrics[f"{metric_key_prefix}_runtime"] = time.perf_counter() - start
            self.log(metrics)
        finally:
            if was_training:
                self.model.train()
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics


__all__ = ["MileGPOTrainer", "environment_reward", "TOKEN_NORMALISED_LOSSES"]
