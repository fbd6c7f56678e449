"""The embedded household world: an ALFWorld-like text game family in pure Python.

Needs no install; a step costs microseconds. It is the default world of the project
(tests, the CPU training run) and mirrors ALFWorld's interface and package shape
(:mod:`milegpo.envs.alfworld`: the environment, and the game generator in ``generator.py``):

- one room (kitchen, living room, bedroom or bathroom) with numbered receptacles
  ("cabinet 3", "countertop 1"), some openable (closed at the start: their contents
  show only once opened), objects in them ("apple 1", "mug 2");
- six task types, ALFWorld's: ``pick_and_place_simple``, ``look_at_obj_in_light``,
  ``pick_clean_then_place_in_recep``, ``pick_heat_then_place_in_recep``,
  ``pick_cool_then_place_in_recep``, ``pick_two_obj_and_place``; the goal sentence
  ends the first observation ("Your task is to: put a hot egg in diningtable.");
- :mod:`~milegpo.envs.household.generator`: games generated from ``(split, seed)``
  (:func:`generate_game`, :func:`household_tasks`): ``train`` / ``id`` share the seen layouts and
  object types, ``ood`` has unseen layouts and object types;
- :mod:`~milegpo.envs.household.env`: :class:`HouseholdEnv`, which plays them with ALFWorld's
  commands and admissible-action lists, and its two re-planning experts.

``household_tasks(..., max_receptacles=k)`` (task option ``("max_receptacles", k)``, k >= 4) plays the same
families in rooms of at most k receptacles (each room keeps its appliances and a lamp stand) with fewer
objects: shorter searches, for small policies (``MileGPOConfig.env_options='{"max_receptacles": 4}'``).

    >>> from milegpo.envs import HouseholdEnv, household_tasks
    >>> env = HouseholdEnv(); task = household_tasks("train", 1)[0]
    >>> obs, actions, info = env.reset(task)
    >>> while not env.done: obs, r, terminated, truncated, info = env.step(env.expert_action())
"""

from __future__ import annotations

from .env import HouseholdEnv
from .generator import (MIN_RECEPTACLES, N_SEEN_LAYOUTS, N_UNSEEN_LAYOUTS, RECEPTACLES, SPLITS, TASK_TYPES,
                        UNSEEN_TYPES, EVAL_SPLITS, Game, generate_game, household_tasks, household_words)

__all__ = ["HouseholdEnv", "household_tasks", "generate_game", "Game", "TASK_TYPES", "SPLITS", "EVAL_SPLITS", "RECEPTACLES",
           "N_SEEN_LAYOUTS", "N_UNSEEN_LAYOUTS", "UNSEEN_TYPES", "MIN_RECEPTACLES", "household_words"]
