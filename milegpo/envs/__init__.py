"""Environments: one text-game protocol, the embedded household world, TextWorld, ALFWorld, and pools.

- :class:`TextEnv` (``reset(task) -> (obs, admissible, info)``, ``step(action) -> (obs, reward,
  done, won, info)``), :class:`Task`, :func:`state_key` (signed 64-bit blake2b key of the
  canonical observation text, never :data:`SINK`); see :mod:`milegpo.envs.base`.
- :class:`HouseholdEnv` / :func:`household_tasks`: the pure-Python default world.
- :class:`TextWorldEnv` / :func:`textworld_tasks`: generated TextWorld games (needs ``textworld``).
- :class:`AlfworldEnv` / :func:`alfworld_tasks` / :func:`milegpo.envs.alfworld.generate`:
  real ALFWorld (needs ``alfworld``).
- :class:`~milegpo.envs.webshop.WebShopEnv` / :func:`webshop_tasks`: WebShop's text interface over its own
  data files or the embedded offline catalog (needs ``bm25s``, ``rapidfuzz``).
- :class:`EnvPool` (worker processes, crash/hang safe) and :class:`SequentialPool`
  (in-process), one API: ``reset(tasks)``, ``reset_group(task, n)``, ``step(actions)``.

Importing this package imports neither torch nor the optional engines.
"""

from __future__ import annotations

import importlib

from .base import (DEFAULT_HORIZON, NOTHING_HAPPENS, SINK, UNWINNABLE, EnvError, Task, TextEnv, canonical_state,
                   match_action, stable_seed, state_key, success_by_task_type)
from .household import HouseholdEnv, household_tasks

#: env kind (``Task.env``) -> "module:Class"; imported lazily so that optional engines stay optional.
ENV_KINDS = {
    "household": "milegpo.envs.household:HouseholdEnv",
    "textworld": "milegpo.envs.textworld_env:TextWorldEnv",
    "alfworld": "milegpo.envs.alfworld:AlfworldEnv",
    "webshop": "milegpo.envs.webshop:WebShopEnv",
}


def env_class(kind: str) -> type:
    """The TextEnv class that plays ``Task.env == kind``."""
    try:
        module, name = ENV_KINDS[kind].split(":")
    except KeyError:
        raise EnvError(f"unknown environment kind {kind!r}; known: {sorted(ENV_KINDS)}") from None
    return getattr(importlib.import_module(module), name)


def make_env(kind: str) -> TextEnv:
    """A fresh environment of ``kind`` (one instance plays any number of tasks of that kind)."""
    return env_class(kind)()


_LAZY = {
    "TextWorldEnv": "milegpo.envs.textworld_env", "textworld_tasks": "milegpo.envs.textworld_env",
    "AlfworldEnv": "milegpo.envs.alfworld", "alfworld_tasks": "milegpo.envs.alfworld",
    "WebShopEnv": "milegpo.envs.webshop", "webshop_tasks": "milegpo.envs.webshop",
    "EnvPool": "milegpo.envs.pool", "SequentialPool": "milegpo.envs.pool", "StepOut": "milegpo.envs.pool",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'milegpo.envs' has no attribute {name!r}")


__all__ = ["SINK", "UNWINNABLE", "NOTHING_HAPPENS", "DEFAULT_HORIZON", "Task", "TextEnv", "EnvError", "canonical_state",
           "state_key", "match_action",
           "stable_seed", "success_by_task_type", "HouseholdEnv", "household_tasks", "ENV_KINDS", "env_class", "make_env", *_LAZY]
