"""Where MileGPOTrainer's episodes come from: one rollout source per kind of environment, behind one interface.

- :class:`WorldSource`: the text worlds of :mod:`milegpo.envs` (household, ALFWorld, TextWorld, WebShop, a
  registered kind), played by :class:`~milegpo.rollout.EpisodeRunner` in an environment pool; its tasks are
  :class:`~milegpo.envs.Task` lists and its datasets index them (``task_index``, ``task_id``).
- :class:`ToolSource`: an environment class in TRL's tool-calling protocol (GRPOTrainer's ``environment_factory``),
  played by :class:`~milegpo.rollout.tools.ToolEpisodeRunner`; its tasks are the dataset rows.

Each source owns its runner, its datasets and its evaluation sets. The trainer builds one with
:func:`rollout_source` (before any model is loaded: bad input is refused there), hands GRPOTrainer what
:meth:`RolloutSource.trl_arguments` says, then calls :meth:`RolloutSource.start` and, per iteration,
:meth:`RolloutSource.play` (a batch of task groups -> a :class:`~milegpo.rollout.Rollout`: the StepBatch's rows
and their tokens) and :meth:`RolloutSource.iteration_counts` (per-iteration counts the trainer sums over processes
and logs through :meth:`RolloutSource.count_metrics`); :meth:`RolloutSource.eval_splits` for evaluation,
:meth:`RolloutSource.close` at the end.
"""

from __future__ import annotations

import ast
import inspect
import math
import os
import sys
import warnings
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from datasets import Dataset
from trl.trainer.utils import is_async_callable

import milegpo.trl_seam as trl_seam  # isort: skip
from ..envs import Task
from ..envs.pool import env_workers, make_pool
from ..rollout import EpisodeRunner, Rollout, make_tasks
from ..rollout.tool_protocol import inspect_environment, tool_state_anchor
from ..rollout.tools import ToolEpisodeRunner, ToolRollout
from ..usage import RunError
from .config import MileGPOConfig
from .saved_policy import reload_tokenizer, saved_task_settings


class MainGuardError(RunError):
    """A script that builds the trainer at its top level while the environment pool needs worker processes."""


def environment_reward(completions, **kwargs):
    """Placeholder reward source: MileGPO's rewards come from the environments.

    GRPOTrainer refuses to start without a reward function; MileGPOTrainer never calls this one
    (episodes are scored by :func:`milegpo.credit.estimate`)."""
    raise RuntimeError("environment_reward is a placeholder; MileGPOTrainer scores episodes with milegpo.credit")


class RolloutSource:
    """The interface the trainer plays through (see the module docstring)."""

    #: the trainer's dataset of task groups (one row per group) and its evaluation datasets, for GRPOTrainer
    train_dataset: Dataset
    eval_dataset: Any = None
    #: the episode runner (:meth:`start` makes it)
    runner: Any = None

    def trl_arguments(self) -> dict[str, Any]:
        """GRPOTrainer's arguments this source decides (its datasets, the reward functions, ...)."""
        raise NotImplementedError

    def start(self, trainer) -> None:
        """Make the runner, once GRPOTrainer is built (its tokenizer, chat template, reward functions)."""
        raise NotImplementedError

    def signature_columns(self) -> list[str] | None:
        """The dataset columns the dataloader keeps (None: GRPOTrainer's)."""
        return None

    def tasks(self, inputs: list[dict[str, Any]]) -> list:
        """A dataloader batch (this process's task groups) as what :meth:`play` plays."""
        raise NotImplementedError

    def play(self, tasks: Sequence, group_size: int, trainer) -> Rollout:
        """``group_size`` episodes of every task with the trainer's policy (every process calls it)."""
        raise NotImplementedError

    def eval_splits(self, eval_dataset=None) -> dict[str, list]:
        """The evaluation splits, ``{name: tasks}``: this source's own (``eval_dataset`` None) or those given."""
        raise NotImplementedError

    def iteration_counts(self, rollout: Rollout) -> dict[str, float]:
        """Additive counts of one process's iteration (same keys on every process); the trainer sums them over
        processes and logs :meth:`count_metrics` of the sums."""
        return {}

    def count_metrics(self, totals: Mapping[str, float]) -> dict[str, float]:
        """The metrics of an iteration's summed :meth:`iteration_counts`."""
        return {}

    @property
    def state_similarity(self):
        """The near-duplicate rule the runner sketched the states with (None: exact keys)."""
        return self.runner.state_similarity

    def close(self) -> None:
        """Release what the source started (a pool's workers)."""


def rollout_source(model, args: MileGPOConfig, processing_class, *, train_tasks=None, eval_tasks=None, pool=None,
                   train_dataset=None, eval_dataset=None, environment_factory=None,
                   reward_funcs=None) -> tuple[RolloutSource, MileGPOConfig, Any]:
    """The source for these arguments: a :class:`ToolSource` with ``environment_factory`` (``train_dataset`` /
    ``reward_funcs`` belong to it), else a :class:`WorldSource`. Returns (source, args, processing_class): a saved
    policy folder brings its own task settings and tokenizer (:class:`WorldSource`)."""
    if environment_factory is not None or train_dataset is not None or reward_funcs is not None:
        if environment_factory is None:
            raise ValueError("MileGPOTrainer: train_dataset / reward_funcs go with environment_factory (TRL's "
                             "tool-calling protocol); the built-in worlds take train_tasks")
        given = [name for name, value in (("train_tasks", train_tasks), ("eval_tasks", eval_tasks), ("pool", pool))
                 if value is not None]
        if given:
            raise ValueError(f"MileGPOTrainer: {', '.join(given)} belong to the built-in worlds; with "
                             f"environment_factory the dataset rows are the tasks (train_dataset / eval_dataset)")
        return ToolSource(args, environment_factory, train_dataset, eval_dataset, reward_funcs), args, processing_class
    if eval_dataset is not None:
        raise ValueError("MileGPOTrainer: eval_dataset goes with environment_factory; the built-in worlds take "
                         "eval_tasks")
    if isinstance(model, (str, os.PathLike)) and os.path.isdir(model):  # a saved policy: as `milegpo eval`
        args = args.with_task_settings(saved_task_settings(model))
        processing_class = reload_tokenizer(str(model)) if processing_class is None else processing_class
    return WorldSource(args, train_tasks, eval_tasks, pool), args, processing_class


# ---------------------------------------------------------------------------------------------- the text worlds
def _task_dataset(tasks: Sequence[Task]) -> Dataset:
    return Dataset.from_dict({"task_index": list(range(len(tasks))), "task_id": [t.task_id for t in tasks]})


class WorldSource(RolloutSource):
    """The text worlds: tasks from ``args`` (or given), an environment pool (made at :meth:`start`, or given: a
    pool passed in stays the caller's), :class:`~milegpo.rollout.EpisodeRunner`."""

    def __init__(self, args: MileGPOConfig, train_tasks=None, eval_tasks=None, pool=None):
        self.args = args
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
                                  stacklevel=4)
        self.train_tasks = list(train_tasks)
        self.eval_tasks = {k: list(v) for k, v in eval_tasks.items()}
        if len(self.train_tasks) < args.groups_per_iteration:
            raise ValueError(f"{len(self.train_tasks)} training tasks, fewer than groups_per_iteration "
                             f"({args.groups_per_iteration})")
        self.train_dataset = _task_dataset(self.train_tasks)
        self.eval_dataset = {s: _task_dataset(v) for s, v in self.eval_tasks.items()} or None
        self.n_slots = args.groups_per_process * args.group_size
        self.pool, self.owns_pool = pool, pool is None
        if pool is None:
            self.kinds = {t.env for t in self.train_tasks} | {t.env for v in self.eval_tasks.values() for t in v}
            check_main_guard(env_workers(args.num_env_workers, self.n_slots, self.kinds))

    def trl_arguments(self) -> dict[str, Any]:
        return {"reward_funcs": environment_reward, "train_dataset": self.train_dataset,
                "eval_dataset": self.eval_dataset}

    def start(self, trainer) -> None:
        args = self.args
        if self.pool is None:
            self.pool = make_pool(self.n_slots, args.num_env_workers, self.kinds, step_timeout=args.env_step_timeout)
        if self.pool.n < self.n_slots:
            raise ValueError(f"the environment pool has {self.pool.n} slots; an iteration needs {self.n_slots} "
                             f"(groups_per_process x group_size)")
        conversational = getattr(trl_seam.tokenizer(trainer), "chat_template", None) is not None
        self.runner = EpisodeRunner(self.pool, conversational=conversational, history_length=args.history_length,
                                    horizon=args.horizon, require_think=args.require_think,
                                    prompt_style=args.prompt_style, state_similarity=args.state_similarity_params(),
                                    state_anchor=args.state_anchor, show_state_context=args.show_state_context,
                                    parts=args.rollout_parts, constrain_actions=args.constrain_actions,
                                    constrain_query=args.constrain_query, env_errors=args.env_errors)

    def signature_columns(self) -> list[str]:
        return ["task_index", "task_id"]

    def tasks(self, inputs):
        return [self.train_tasks[int(x["task_index"])] for x in inputs]

    def play(self, tasks, group_size, trainer) -> Rollout:
        return self.runner.run(tasks, group_size, trainer.generate_texts, trainer.sync_any)

    def eval_splits(self, eval_dataset=None) -> dict[str, list]:
        if eval_dataset is None:
            splits = self.eval_tasks
        elif isinstance(eval_dataset, dict):
            splits = {k: list(v) for k, v in eval_dataset.items()}
        else:
            splits = {"custom": list(eval_dataset)}
        for name, tasks in splits.items():
            if not all(isinstance(t, Task) for t in tasks):
                raise TypeError(f"evaluate: split {name!r} must be a list of milegpo.envs.Task")
        return splits

    def close(self) -> None:
        if self.owns_pool and self.runner is not None:
            self.runner.close()


def _is_main_test(test: ast.expr) -> bool:
    """Whether ``test`` holds a comparison of ``__name__`` with ``"__main__"`` (``__name__ == "__main__"`` either way
    round, or as a part: ``... and __name__ == "__main__"``)."""
    for node in ast.walk(test):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if (any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
                    and any(isinstance(c, ast.Constant) and c.value == "__main__" for s in sides for c in ast.walk(s))):
                return True
    return False


def check_main_guard(workers: int) -> None:
    """Refuse, in one line, a pool with worker processes started from a script's top level outside
    ``if __name__ == "__main__":``: multiprocessing starts each worker by importing the script again (spawn /
    forkserver), which would build the trainer again in every worker (four screens of multiprocessing errors, then
    a dead pool). Nothing is checked without workers, or when the main module is no file (a notebook, ``-c``)."""
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if not workers or not main_file or not os.path.isfile(main_file):
        return
    frame = inspect.currentframe()
    while frame is not None and not (frame.f_code.co_name == "<module>"
                                     and frame.f_globals.get("__name__") in ("__main__", "__mp_main__")):
        frame = frame.f_back
    if frame is None or os.path.abspath(frame.f_code.co_filename) != os.path.abspath(main_file):
        return
    line = frame.f_lineno
    try:
        with open(main_file, encoding="utf-8") as f:
            tree = ast.parse(f.read(), main_file)
    except (OSError, SyntaxError, ValueError):
        return
    if any(isinstance(node, ast.If) and _is_main_test(node.test) and node.lineno <= line <= node.end_lineno
           for node in ast.walk(tree)):
        return
    raise MainGuardError(
        f"{main_file}:{line} builds the trainer at the script's top level, and its environment pool starts "
        f"{workers} worker process(es) by importing the script again: put the script's code under "
        "`if __name__ == \"__main__\":` (or set num_env_workers=0: no workers)")


# ---------------------------------------------------------------------------------------------- TRL's protocol
class ToolSource(RolloutSource):
    """An ``environment_factory`` class in TRL's tool-calling protocol: ``train_dataset``'s rows are the task groups
    (``reset(**row)``'s arguments), ``eval_dataset`` (a Dataset, or ``{split: Dataset}``) the evaluation sets, and
    ``reward_funcs`` (plain functions) are summed with ``get_reward`` as GRPOTrainer sums them, but called once per
    finished episode (a batch of one: ``environments=[env]``), where GRPOTrainer calls them once per generation
    batch; a reward that normalises over its batch sees one episode here (a warning says so)."""

    def __init__(self, args: MileGPOConfig, environment_factory, train_dataset, eval_dataset, reward_funcs):
        if isinstance(environment_factory, dict):
            raise TypeError("MileGPOTrainer takes one environment class as environment_factory; a dict of "
                            "environments (TRL's multi-environment routing) is not supported")
        if train_dataset is None:
            raise ValueError("MileGPOTrainer: environment_factory needs a train_dataset (its rows are reset(**row)'s "
                             "arguments; a row per task group)")
        if len(train_dataset) < args.groups_per_iteration:
            raise ValueError(f"train_dataset has {len(train_dataset)} rows, fewer than groups_per_iteration "
                             f"({args.groups_per_iteration}): a row is one task group")
        _, self.probe = inspect_environment(environment_factory)  # a clear error for a class that breaks the protocol
        self.state_anchor = tool_state_anchor(args.state_anchor)
        if reward_funcs is not None and not isinstance(reward_funcs, list):
            reward_funcs = [reward_funcs]
        for func in reward_funcs or []:
            if isinstance(func, (str, torch.nn.Module)) or is_async_callable(func) or not callable(func):
                raise TypeError(f"MileGPOTrainer with environment_factory: reward_funcs must be plain (sync) "
                                f"functions, got {func!r:.80}")
        self.reward_funcs = list(reward_funcs or [])
        if self.reward_funcs:
            warnings.warn("MileGPOTrainer calls each reward function once per finished episode (prompts, "
                          "completions and environments are lists of one), where GRPOTrainer calls it once per "
                          "generation batch: a reward that normalises over its batch sees one episode here",
                          stacklevel=4)
        self.args = args
        self.environment_factory = environment_factory
        self.train_dataset = train_dataset
        self.eval_dataset = {"eval": eval_dataset} if isinstance(eval_dataset, Dataset) else eval_dataset
        self.trainer = None

    def trl_arguments(self) -> dict[str, Any]:
        return {"reward_funcs": self.reward_funcs or None, "train_dataset": self.train_dataset,
                "eval_dataset": self.eval_dataset, "environment_factory": self.environment_factory}

    def start(self, trainer) -> None:
        args = self.args
        self.trainer = trainer
        max_positions = getattr(trainer.model.config, "max_position_embeddings", None)
        max_context = max_positions - (trainer.max_completion_length or 0) if max_positions else None
        self.runner = ToolEpisodeRunner(
            self.environment_factory, trainer.processing_class, horizon=args.horizon,
            success_threshold=args.success_threshold, tool_timeout=args.tool_timeout,
            state_anchor=self.state_anchor, chat_template=trainer.chat_template,
            chat_template_kwargs=trainer.chat_template_kwargs,
            score=self.score_episode if self.reward_funcs else None, max_context=max_context,
            state_similarity=args.state_similarity_params(), probe=self.probe)

    def tasks(self, inputs):
        return list(inputs)  # the dataset rows: reset(**row)

    def play(self, tasks, group_size, trainer) -> ToolRollout:
        return self.runner.run(tasks, group_size, trainer.generate_ids, trainer.sync_any)

    def eval_splits(self, eval_dataset=None) -> dict[str, list]:
        if eval_dataset is None:  # dataset rows: the eval_dataset given at init, or these
            eval_dataset = self.eval_dataset or {}
        splits = ({k: list(v) for k, v in eval_dataset.items()} if isinstance(eval_dataset, dict)
                  else {"eval": list(eval_dataset)})
        for name, rows in splits.items():
            if not all(isinstance(r, dict) for r in rows):
                raise TypeError(f"evaluate: split {name!r} must be dataset rows (dicts) for environment_factory")
        return splits

    def iteration_counts(self, rollout: ToolRollout) -> dict[str, float]:
        return {"tool_calls": float(rollout.tool_calls), "tool_failures": float(rollout.tool_failures),
                "tool_timeouts": float(rollout.tool_timeouts), "episodes": float(len(rollout.episodes))}

    def count_metrics(self, totals):
        """GRPOTrainer's tool metrics: calls per episode, failed calls per call; and the calls that hung."""
        calls = totals["tool_calls"]
        return {"tools/call_frequency": calls / max(totals["episodes"], 1.0),
                "tools/failure_frequency": totals["tool_failures"] / calls if calls > 0 else 0.0,
                "tools/timeouts": totals["tool_timeouts"]}

    def score_episode(self, env, row, prompt, completion, completion_ids) -> float:
        """The reward functions' weighted sum for one finished episode, called as GRPOTrainer calls them (the row's
        columns as one-element lists, ``environments=[env]``, ``trainer_state``); a None is NaN and left out of the
        sum (GRPOTrainer's nansum); anything but a real number, or a function that raises, is an error naming the
        function."""
        trainer = self.trainer
        kwargs = {k: [v] for k, v in row.items() if k not in ("prompt", "completion", "completion_ids")}
        kwargs.update(trainer_state=trainer.state, environments=[env], **trl_seam.reward_logging(trainer))
        total, seen = 0.0, False
        for i, func in enumerate(self.reward_funcs):
            name = trainer.reward_func_names[i]
            try:
                values = func(prompts=[prompt], completions=[completion], completion_ids=[completion_ids], **kwargs)
            except Exception as e:
                raise RunError(f"reward function {name!r} raised {type(e).__name__}: {e}"[:400]) from e
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
            total += float(trainer.reward_weights[i]) * float(value)
            seen = True
        return total if seen else float("nan")


__all__ = ["RolloutSource", "WorldSource", "ToolSource", "rollout_source", "environment_reward", "check_main_guard",
           "MainGuardError"]
