"""Tiny text games for the registry and adapter tests, at module level so pool workers can import them.

- :class:`KeyDoor`: a gymnasium 1.x ``Env`` with text observations and actions (three rooms: take the key in one,
  open the door in another); ``list_actions`` puts the admissible actions in ``info``, else actions are free
  text and an unknown one is reported in ``info["invalid"]``. :func:`key_door_expert` plays it from the text.
- :class:`Corridor`: a :class:`~milegpo.envs.TextEnv` (walk right ``length`` times), for the registry.
- Broken variants: :class:`NumericObs` (reset returns an array), :class:`RaisesOnStep`, :class:`OldGymStep`
  (gym 0.21's 4-tuple), :class:`NaNReward`, :class:`HangsOnStep`, :class:`NoneReset` (reset returns None),
  :class:`RaisesInInit`, :class:`FailsOnSecondStep`, :class:`NotAnEnv`; TextEnv subclasses :class:`NaNCorridor` and :class:`ShortStepCorridor`.
"""

from __future__ import annotations

import random
import time

import gymnasium
import numpy as np

from milegpo.envs import EnvKind, Task, TextEnv


class KeyDoor(gymnasium.Env):
    """The hall joins a left room and a right room; the key lies in one of them (by seed), the door is in the
    other. Win: ``open door`` while holding the key (reward 1, terminated). ``break door`` loses (terminated,
    reward 0)."""

    metadata = {"render_modes": []}

    def __init__(self, list_actions: bool = True) -> None:
        self.list_actions = list_actions
        self.action_space = gymnasium.spaces.Text(max_length=64)
        self.observation_space = gymnasium.spaces.Text(max_length=512)
        self.room, self.key_room, self.holding, self.escaped = "hall", "left", False, False

    def _actions(self) -> list[str]:
        if self.room == "hall":
            return ["go left", "go right", "look"]
        actions = ["go back", "look"]
        if self.room == self.key_room and not self.holding:
            actions.append("take key")
        if self.room != self.key_room:
            actions += ["open door", "break door"]
        return actions

    def _obs(self) -> str:
        if self.room == "hall":
            return "You are in the hall. Doors lead left and right."
        parts = [f"You are in the {self.room} room."]
        if self.room == self.key_room and not self.holding:
            parts.append("A key lies on the floor.")
        if self.room != self.key_room:
            parts.append("A locked door is here.")
        return " ".join(parts)

    def _info(self, **extra) -> dict:
        info = {"state_context": f"holding: {'key' if self.holding else 'nothing'}", **extra}
        if self.list_actions:
            info["admissible_actions"] = self._actions()
        return info

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.key_room = "left" if random.Random(seed).random() < 0.5 else "right"
        self.room, self.holding, self.escaped = "hall", False, False
        return self._obs(), self._info(goal="open the locked door")

    def steps_to_win(self) -> int:
        """Fewest actions to a win from here (the planner a credit-quality label asks)."""
        if self.escaped:
            return 0
        if self.holding:
            return {"hall": 2, self.key_room: 3}.get(self.room, 1)
        return {"hall": 5, self.key_room: 4}.get(self.room, 6)

    def step(self, action):
        if action not in self._actions():
            return "Nothing happens.", 0.0, False, False, self._info(invalid=True)
        if action in ("go left", "go right"):
            self.room = action[3:]
        elif action == "go back":
            self.room = "hall"
        elif action == "take key":
            self.holding = True
            return "You take the key.", 0.0, False, False, self._info()
        elif action == "open door":
            if self.holding:
                self.escaped = True
                return "The door opens. You are free!", 1.0, True, False, self._info()
            return "The door is locked.", 0.0, False, False, self._info()
        elif action == "break door":
            return "You break your shoulder.", 0.0, True, False, self._info()
        return self._obs(), 0.0, False, False, self._info()


def key_door_expert(observation: str, holding: bool) -> str:
    """The winning action from what the agent sees: fetch the key, then open the door."""
    if observation.startswith("You are in the hall"):
        return "go left" if not holding else "go right"
    if "A key lies" in observation:
        return "take key"
    if "You take the key" in observation:
        return "go back"
    if "A locked door" in observation:
        return "open door" if holding else "go back"
    return "look"


class FreeKeyDoor(KeyDoor):
    """:class:`KeyDoor` without admissible actions in its info: free-text actions."""

    def __init__(self) -> None:
        super().__init__(list_actions=False)


class NumericObs(KeyDoor):
    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3), {}


class RaisesOnStep(KeyDoor):
    def step(self, action):
        if action == "go right":
            raise RuntimeError("the right room caught fire")
        return super().step(action)


class OldGymStep(KeyDoor):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated or truncated, info


class FailsOnSecondStep(KeyDoor):
    """The second step of every episode raises, whatever the action."""

    def reset(self, *, seed=None, options=None):
        self.taken = 0
        return super().reset(seed=seed, options=options)

    def step(self, action):
        self.taken += 1
        if self.taken == 2:
            raise RuntimeError("the floor gave way")
        return super().step(action)


class ReportsErrors(KeyDoor):
    """A game whose own info says ``error`` at every step (its business, not a failure)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {**info, "error": "nothing to report, but a key named so"}


class NaNReward(KeyDoor):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, float("nan"), terminated, truncated, info


class HangsOnStep(KeyDoor):
    """``go right`` never returns (an hour)."""

    def step(self, action):
        if action == "go right":
            time.sleep(3600)
        return super().step(action)


class NoneReset(KeyDoor):
    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)


class RaisesInInit(KeyDoor):
    def __init__(self) -> None:
        raise RuntimeError("no licence for the door engine")


class NotAnEnv:
    """Has a reset but no step."""

    def reset(self, seed=None):
        return "hi", {}


class Corridor(TextEnv):
    """Walk right ``task.option('length', 3)`` times to win; ``wait`` does nothing."""

    step_in_workers = True

    def _reset(self, task: Task):
        self.pos, self.length = 0, int(task.option("length", 3))
        return self._obs(), ["walk right", "wait"], {"goal": "reach the end of the corridor"}

    def _obs(self) -> str:
        return f"You stand at step {self.pos} of the corridor."

    def _step(self, action: str):
        if action == "walk right":
            self.pos += 1
        won = self.pos >= self.length
        return ("You reached the end." if won else self._obs()), (10.0 if won else 0.0), won, \
            ([] if won else ["walk right", "wait"]), {}


class NaNCorridor(Corridor):
    """Its reward is NaN at every step (a TextEnv subclass: the base class checks what ``_step`` returns)."""

    def _step(self, action: str):
        obs, _, won, admissible, info = super()._step(action)
        return obs, float("nan"), won, admissible, info


class ShortStepCorridor(Corridor):
    """Its ``_step`` returns 4 values."""

    def _step(self, action: str):
        return super()._step(action)[:4]


def corridor_tasks(split: str, n: int, *, start: int = 0, task_type: str = "", horizon: int = 10,
                   length: int = 3) -> list[Task]:
    """``n`` corridors of ``length`` steps (splits ``short`` and ``long``: long ones are twice as long)."""
    if split not in ("short", "long"):
        raise ValueError(f"corridor split must be 'short' or 'long', got {split!r}")
    k = length * (2 if split == "long" else 1)
    return [Task(f"corridor/{split}/{i}", env="corridor", seed=i, split=split, horizon=horizon,
                 options=(("length", k),)) for i in range(start, start + n)]


#: an entry point's object may be an EnvKind too: the corridor with its own tasks and splits
CORRIDOR_SPEC = EnvKind("corridor", Corridor, tasks=corridor_tasks, splits=("short", "long"), eval_splits=("long",))
