"""Environments: one text-game protocol, the embedded household world, TextWorld, ALFWorld, and pools.

- :class:`TextEnv` (``reset(task) -> (obs, admissible, info)``, ``step(action) -> (obs, reward,
  terminated, truncated, info)``, gymnasium's order; ``info["won"]``), :class:`Task`, :func:`state_key` (signed 64-bit blake2b key of the
  canonical observation text, never :data:`SINK`); see :mod:`milegpo.envs.base`.
- :class:`HouseholdEnv` / :func:`household_tasks`: the pure-Python default world.
- :class:`TextWorldEnv` / :func:`textworld_tasks`: generated TextWorld games (needs ``textworld``).
- :class:`AlfworldEnv` / :func:`alfworld_tasks` / :func:`milegpo.envs.alfworld.generate`:
  real ALFWorld (needs ``alfworld``).
- :class:`~milegpo.envs.webshop.WebShopEnv` / :func:`webshop_tasks`: WebShop's text interface over its own
  data files or the embedded offline catalog (needs ``bm25s``, ``rapidfuzz``).
- :class:`~milegpo.envs.scienceworld.ScienceWorldEnv` / :func:`scienceworld_tasks`: ScienceWorld on its own engine
  (needs ``scienceworld`` and a Java runtime; one JVM per process).
- :func:`register` / :class:`EnvKind` / :func:`get_kind`: the registry of environment kinds (entry points of group
  ``milegpo.envs``, dotted paths ``"package.module:Class"``, ``"gym:<id>"``); see :mod:`milegpo.envs.registry`.
- :class:`~milegpo.envs.gym.GymTextEnv`: a gymnasium text environment played as a TextEnv;
  :class:`~milegpo.envs.openenv.OpenEnvTextEnv`: an OpenEnv environment (a client, or a server URL).
- :class:`EnvPool` (worker processes, crash/hang safe) and :class:`SequentialPool`
  (in-process), one API: ``reset(tasks)``, ``reset_group(task, n)``, ``step(actions)``,
  ``step_async(actions).result()``; :func:`make_pool` picks one for a run (``num_workers="auto"``).

Importing this package imports neither torch nor the optional engines.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

from .base import (DEFAULT_HORIZON, NOTHING_HAPPENS, SINK, UNWINNABLE, EnvError, Task, TextEnv, canonical_state,
                   match_action, stable_seed, state_key, success_by_task_type)
from .household import HouseholdEnv, household_tasks

from .registry import (ENTRY_POINT_GROUP, GYM_PREFIX, EnvKind, get_kind, known_kinds, register, register_kind,
                       registered_kinds, reload_entry_points, seeded_tasks, unregister)

# the built-in worlds register through the same door as a user's (dotted paths: their engines stay unimported)
for _kind, _module, _env, _tasks in (
        ("household", "milegpo.envs.household", "HouseholdEnv", "household_tasks"),
        ("textworld", "milegpo.envs.textworld_env", "TextWorldEnv", "textworld_tasks"),
        ("alfworld", "milegpo.envs.alfworld", "AlfworldEnv", "alfworld_tasks"),
        ("webshop", "milegpo.envs.webshop", "WebShopEnv", "webshop_tasks"),
        ("scienceworld", "milegpo.envs.scienceworld", "ScienceWorldEnv", "scienceworld_tasks")):
    register(_kind, f"{_module}:{_env}", tasks=f"{_module}:{_tasks}", splits=f"{_module}:SPLITS",
             eval_splits=f"{_module}:EVAL_SPLITS", task_types=f"{_module}:TASK_TYPES", origin="milegpo")
del _kind, _module, _env, _tasks

#: the built-in kinds (the registry, :func:`known_kinds`, holds every kind)
BUILT_IN_KINDS = ("household", "textworld", "alfworld", "webshop", "scienceworld")


def env_class(kind: str) -> type:
    """The class that plays ``Task.env == kind`` (:func:`get_kind`: registered, an entry point, a dotted path,
    ``gym:<id>``); an unknown kind is an :class:`EnvError` listing the known ones."""
    return get_kind(kind).env_class()


class TaskSpace(NamedTuple):
    """What the task function of an environment kind takes, as its :class:`EnvKind` declares it.

    splits: every split it takes; eval_splits: the splits a run evaluates on by default; task_types: the task
    types it takes, or ``None`` where the env's data decides (WebShop: its catalog's goal categories; the task
    function names them when asked for another)."""

    splits: tuple[str, ...]
    eval_splits: tuple[str, ...]
    task_types: tuple[str, ...] | None


def task_space(kind: str) -> TaskSpace:
    """The :class:`TaskSpace` of environment kind ``kind`` (its module is imported, not its engine); an unknown
    kind is an :class:`EnvError` that lists the known ones."""
    return TaskSpace(*get_kind(kind).space())


def task_function(kind: str):
    """``tasks(split, n, **options) -> list[Task]`` of kind ``kind`` (its :class:`EnvKind`)."""
    return get_kind(kind).task_function()


def make_env(kind: str) -> TextEnv:
    """A fresh environment of ``kind`` (one instance plays any number of tasks of that kind)."""
    return get_kind(kind).make()


_LAZY = {
    "TextWorldEnv": "milegpo.envs.textworld_env", "textworld_tasks": "milegpo.envs.textworld_env",
    "AlfworldEnv": "milegpo.envs.alfworld", "alfworld_tasks": "milegpo.envs.alfworld",
    "WebShopEnv": "milegpo.envs.webshop", "webshop_tasks": "milegpo.envs.webshop",
    "ScienceWorldEnv": "milegpo.envs.scienceworld", "scienceworld_tasks": "milegpo.envs.scienceworld",
    "EnvPool": "milegpo.envs.pool", "SequentialPool": "milegpo.envs.pool", "StepOut": "milegpo.envs.pool",
    "PendingStep": "milegpo.envs.pool", "make_pool": "milegpo.envs.pool", "auto_env_workers": "milegpo.envs.pool",
    "GymTextEnv": "milegpo.envs.gym", "OpenEnvTextEnv": "milegpo.envs.openenv",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'milegpo.envs' has no attribute {name!r}")


__all__ = ["SINK", "UNWINNABLE", "NOTHING_HAPPENS", "DEFAULT_HORIZON", "Task", "TextEnv", "EnvError", "canonical_state",
           "state_key", "match_action",
           "stable_seed", "success_by_task_type", "HouseholdEnv", "household_tasks", "env_class", "make_env",
           "TaskSpace", "task_space", "task_function", "BUILT_IN_KINDS", "EnvKind", "register", "register_kind", "unregister",
           "get_kind", "known_kinds", "registered_kinds", "reload_entry_points", "seeded_tasks", "ENTRY_POINT_GROUP", "GYM_PREFIX", *_LAZY]
