"""gymnasium text environments played as :class:`~milegpo.envs.TextEnv`: no wrapper for the user to write.

A gymnasium (1.x) ``Env`` whose observations and actions are text trains as it is::

    milegpo.envs.register("maze", MazeEnv)            # a gymnasium.Env class (or --env mypkg.maze:MazeEnv)
    # or: gymnasium.register(id="Maze-v0", entry_point=...); --env gym:Maze-v0

:class:`GymTextEnv` plays it:

- ``reset(task)`` calls ``env.reset(seed=task.seed, options=dict(task.options) or None)``, which must return
  ``(observation: str, info: dict)``;
- ``step(action)`` calls ``env.step(action)`` with the action text, which must return gymnasium 1.x's
  ``(observation: str, reward: float, terminated, truncated, info)``;
- admissible actions: ``info["admissible_actions"]`` (or ``info["admissible_commands"]``, TextWorld's name), a
  list of str, when the environment gives them; the rollout then parses the policy's action against them and an
  action outside them is invalid. Without them the action is free text: valid unless ``info["invalid"]`` says so;
- milestones: ``info["milestone"]`` (a bool; absent: False) when the step completed one of the environment's
  verifiable subgoals (what BEACON's credit reads);
- success: ``info["won"]`` (or ``"success"`` / ``"is_success"``) when the environment reports it, else
  ``terminated and reward > 0``; a termination that is no success ends the episode lost; ``truncated`` ends it
  truncated (as the task's horizon does);
- the goal a prompt shows: ``info["goal"]`` at reset ("" when absent); the game id (equal across a task group):
  ``info["game_id"]`` at reset, else the task id;
- state anchor: the run's (default ``tracked+actions``: the observation plus the sorted admissible actions, and
  the environment's ``info["state_context"]`` when it puts a str there: what its observation does not show but
  tells states apart, e.g. the inventory). A ``state_anchor`` callable or dotted path (``MileGPOConfig``) keys
  any other way. An environment that defines ``steps_to_win()`` (its planner) has it asked where milegpo labels
  steps (``TextEnv.steps_to_win``).

What does not fit is a clear error where it arrives: a reset or step that returns another shape, an observation
that is not a str, a reward that is not a finite number, admissible actions that are not a list (or tuple) of
str, a ``terminated`` / ``truncated`` / ``info["won"]`` / ``info["invalid"]`` / ``info["milestone"]`` that is not a
bool (or 0 / 1). Such an error, or an exception inside ``step``, is an environment failure: the pool ends that
episode truncated with the error's one line, and the run stops there unless ``MileGPOConfig.env_errors="skip"``
(then it is counted).
"""

from __future__ import annotations

from typing import Any

from .anchors import StateTracker
from .base import Task, TextEnv, finite_reward, step_flag  # step_flag: re-exported

#: the info keys a gymnasium text environment may list its admissible actions under, first found wins
ADMISSIBLE_KEYS = ("admissible_actions", "admissible_commands")
#: the info keys that report success, first found wins (else ``terminated and reward > 0``)
SUCCESS_KEYS = ("won", "success", "is_success")


class _ContextTracker(StateTracker):
    """Reads the context line the environment itself reports in ``info["state_context"]`` (a str)."""

    def __init__(self, owner: str) -> None:
        self.owner, self.line = owner, ""

    def _read(self, info: dict) -> None:
        line = info.get("state_context", "")
        if not isinstance(line, str):
            raise TypeError(f"{self.owner}: info['state_context'] is a {type(line).__name__}, expected the str "
                            "that tells states apart beside the observation")
        self.line = line

    def reset(self, observation: str, info: dict) -> None:
        self._read(info)

    def update(self, action: str, observation: str, invalid: bool, info: dict) -> None:
        self._read(info)

    def context(self) -> str:
        return self.line


class GymTextEnv(TextEnv):
    """A gymnasium ``Env`` with text observations and actions, as a :class:`TextEnv` (see the module docstring).

    env: a gymnasium-style class or zero-argument factory (called on first reset, in the process that plays it),
    or an instance; env_id: a gymnasium registry id instead (``gymnasium.make(env_id, **env_kwargs)``), or its
    ``gymnasium.EnvSpec`` (what the registry's ``gym:<id>`` kinds carry: it pickles, so a pool worker makes the
    environment from it without the id being registered there); env_kwargs: the class's / ``make``'s keyword
    arguments."""

    experts = {}
    has_score = False
    step_in_workers = True
    kind = "gym"

    def __init__(self, env: Any = None, *, env_id: Any = None, **env_kwargs: Any) -> None:
        super().__init__()
        if (env is None) == (env_id is None):
            raise ValueError("GymTextEnv: give env (a gymnasium Env class, factory or instance) or env_id "
                             "(a gymnasium registry id), exactly one")
        self._source, self._env_id, self._env_kwargs = env, env_id, env_kwargs
        # an instance is played as it is; a class or factory is called on the first reset
        self.env: Any = env if env is not None and not isinstance(env, type) and hasattr(env, "step") else None
        self._free_text = True
        self._name = getattr(env_id, "id", env_id) or getattr(env, "__qualname__", type(env).__name__)

    def _make(self) -> Any:
        if self._env_id is not None:
            import gymnasium

            return gymnasium.make(self._env_id, **self._env_kwargs)
        made = self._source(**self._env_kwargs)
        for method in ("reset", "step"):
            if not callable(getattr(made, method, None)):
                raise TypeError(f"GymTextEnv: {self._name}() made a {type(made).__name__} without {method}()")
        return made

    def make_tracker(self) -> StateTracker:
        return _ContextTracker(self._name)

    def _text(self, obs: Any, where: str) -> str:
        if not isinstance(obs, str):
            raise TypeError(f"{self._name}.{where} returned a {type(obs).__name__} observation, expected str "
                            "(milegpo trains text environments: observations and actions are text)")
        return obs

    def _admissible(self, info: dict, where: str) -> list[str]:
        for key in ADMISSIBLE_KEYS:
            if key in info:
                actions = info[key]
                # a generator was consumed by the check (an empty list: every action invalid), a dict gave its keys
                if not isinstance(actions, (list, tuple)) or not all(isinstance(a, str) for a in actions):
                    raise TypeError(f"{self._name}.{where}: info[{key!r}] must be a list of str, got {actions!r:.120}")
                self._free_text = False
                return list(actions)
        self._free_text = True
        return []

    def _info(self, info: Any, where: str) -> dict:
        if not isinstance(info, dict):
            raise TypeError(f"{self._name}.{where} returned a {type(info).__name__} info, expected a dict")
        return info

    def _reset(self, task: Task) -> tuple[str, list[str], dict]:
        if self.env is None:
            self.env = self._make()
        out = self.env.reset(seed=task.seed, options=dict(task.options) or None)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError(f"{self._name}.reset returned {type(out).__name__} {out!r:.80}, expected gymnasium's "
                            "(observation, info)")
        obs, info = self._text(out[0], "reset"), self._info(out[1], "reset")
        admissible = self._admissible(info, "reset")
        goal = info.get("goal", "")
        return obs, admissible, {**info, "goal": goal if isinstance(goal, str) else str(goal),
                                 "game_id": str(info.get("game_id", task.task_id))}

    def _invalid(self, action: str) -> bool | None:
        # free text: the environment says (info["invalid"]) after the step
        return None if self._free_text else super()._invalid(action)

    def _step(self, action: str) -> tuple[str, float, bool, list[str], dict]:
        out = self.env.step(action)
        if not (isinstance(out, tuple) and len(out) == 5):
            raise TypeError(f"{self._name}.step returned a {len(out) if isinstance(out, tuple) else type(out).__name__}"
                            f"{'-tuple' if isinstance(out, tuple) else ''}, expected gymnasium 1.x's (observation, "
                            "reward, terminated, truncated, info)")
        obs, reward, terminated, truncated, info = out
        obs, info = self._text(obs, "step"), dict(self._info(info, "step"))
        reward = finite_reward(reward, f"{self._name}.step")
        admissible = self._admissible(info, "step")
        key = next((k for k in SUCCESS_KEYS if k in info and info[k] is not None), None)
        terminated, truncated = self._flag(terminated, "terminated"), self._flag(truncated, "truncated")
        won = self._flag(info[key], f"info[{key!r}]") if key else terminated and float(reward) > 0
        info["lost"] = terminated and not won
        info["truncated"] = truncated and not terminated
        info["invalid"] = self._flag(info.get("invalid", False), "info['invalid']")
        info["milestone"] = self._flag(info.get("milestone", False), "info['milestone']")
        return obs, float(reward), won, admissible, info

    def _flag(self, value: Any, what: str) -> bool:
        return step_flag(value, f"{self._name}.step returned {what}")

    def steps_to_win(self) -> int | None:
        """The environment's own planner, when it defines ``steps_to_win()`` (on the env or, under gymnasium's
        wrappers, its ``unwrapped``): what the credit-quality labels and the aliasing diagnostic ask; None else."""
        env = getattr(self.env, "unwrapped", self.env)
        planner = getattr(env, "steps_to_win", None)
        return planner() if callable(planner) else None

    def close(self) -> None:
        if self.env is not None and callable(getattr(self.env, "close", None)):
            self.env.close()


__all__ = ["GymTextEnv", "ADMISSIBLE_KEYS", "SUCCESS_KEYS", "step_flag"]
