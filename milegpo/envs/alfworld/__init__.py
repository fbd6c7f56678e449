"""ALFWorld through its own engine (TextWorld's PDDL environment + ALFWorld's wrappers).

Needs the optional ``alfworld`` package (see notes/envs.md for the lean install). Games
are ``game.tw-pddl`` files in ALFWorld's tree ``json_2.1.1/<split>/<task>/<trial>/``
(``traj_data.json`` beside each): the official ones under ``$ALFWORLD_DATA`` when
present, or ones written offline by :func:`generate` (``python -m milegpo.envs.alfworld``).

- :func:`alfworld_tasks` lists the solvable games of a split as Tasks: ``train``,
  ``id`` (ALFWorld's valid_seen) or ``ood`` (valid_unseen); like ALFWorld's loader it
  skips movable-receptacle and sliced tasks and games not marked ``solvable``.
- :class:`AlfworldEnv` plays one: reward 10 on the winning step, horizon 50 (the Task's),
  "help" removed from the admissible actions, invalid actions answer "Nothing happens.";
  ``info["milestone"]`` on a step that completes one of the task's subgoals, read as in the household world
  (:mod:`milegpo.envs.household.subgoals`) from the task's ``pddl_params`` in ``traj_data.json`` (none
  without that file).
  ``info["task_type"]`` on reset feeds :func:`milegpo.envs.success_by_task_type`.
  Its expert is the game's walkthrough while the episode follows it; with the Task
  option ``("expert", True)`` it is ALFWorld's handcoded expert, re-planned every step
  (slower: it needs the game's facts every step), with its move/put bookkeeping fixed
  (:func:`~milegpo.envs.alfworld.generator.patch_expert_move_tracking`).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ..base import DEFAULT_HORIZON, UNWINNABLE, EnvError, Task, TextEnv
from ..household.subgoals import SUBGOALS, HouseholdGoal, HouseholdSubgoals
from ..household.tracker import HouseholdTracker
from .generator import TASK_TYPES, generate, patch_expert_move_tracking

#: our split names -> ALFWorld's folder names
SPLIT_DIRS = {"train": "train", "id": "valid_seen", "ood": "valid_unseen",
              "valid_seen": "valid_seen", "valid_unseen": "valid_unseen"}
_OUR_SPLIT = {"train": "train", "valid_seen": "id", "valid_unseen": "ood"}
#: the splits alfworld_tasks takes (ours and ALFWorld's names) and those evaluated by default (milegpo.envs.task_space)
SPLITS = tuple(SPLIT_DIRS)
EVAL_SPLITS = ("id", "ood")


def data_root(data_dir: str | os.PathLike | None = None) -> Path:
    """``data_dir``, else ``$ALFWORLD_DATA``, else ALFWorld's default ``~/.cache/alfworld``."""
    root = data_dir or os.environ.get("ALFWORLD_DATA") or os.path.expanduser("~/.cache/alfworld")
    return Path(os.path.expandvars(str(root)))


def alfworld_tasks(split: str = "train", n: int | None = None, start: int = 0, task_type: str = "",
                   horizon: int = DEFAULT_HORIZON, data_dir: str | os.PathLike | None = None,
                   task_types: list[str] | tuple[str, ...] | None = None) -> list[Task]:
    """Solvable games of ``split`` under ``<data_dir>/json_2.1.1/<split dir>/`` as Tasks (sorted by path).

    n: at most that many (None: all), after skipping the first ``start``; task_type / task_types:
    keep only these task types; data_dir: default ``$ALFWORLD_DATA``.
    """
    if split not in SPLIT_DIRS:
        raise ValueError(f"ALFWorld split must be one of {sorted(SPLIT_DIRS)}, got {split!r}")
    base = data_root(data_dir) / "json_2.1.1" / SPLIT_DIRS[split]
    if not base.is_dir():
        raise EnvError(f"no ALFWorld games at {base}: set $ALFWORLD_DATA, or write games with "
                       f"`python -m milegpo.envs.alfworld DIR --train N` and pass data_dir=DIR")
    wanted = set(task_types or ([task_type] if task_type else TASK_TYPES))
    tasks: list[Task] = []
    skipped = 0
    for traj_path in sorted(base.glob("**/traj_data.json")):
        folder = traj_path.parent
        if "movable" in str(folder) or "Sliced" in str(folder):
            continue
        game = folder / "game.tw-pddl"
        if not game.exists():
            continue
        traj = json.loads(traj_path.read_text())
        if traj.get("task_type") not in wanted:
            continue
        try:
            solvable = json.loads(game.read_text()).get("solvable")
        except json.JSONDecodeError:
            continue
        if not solvable:
            continue
        if skipped < start:
            skipped += 1
            continue
        rel = folder.relative_to(base.parent)
        tasks.append(Task(task_id=f"alfworld/{rel.as_posix()}", env="alfworld", game_file=str(game),
                          task_type=traj["task_type"], split=_OUR_SPLIT[SPLIT_DIRS[split]], horizon=horizon))
        if n is not None and len(tasks) >= n:
            break
    return tasks


def task_goal(traj_data: dict) -> HouseholdGoal | None:
    """The :class:`~milegpo.envs.household.subgoals.HouseholdGoal` of a game from its ``traj_data.json``
    (``task_type`` and ``pddl_params``' ``object_target`` / ``parent_target``, lower-cased as the game names
    instances), or None where it does not say (no milestones then)."""
    params = traj_data.get("pddl_params") or {}
    task_type, target = traj_data.get("task_type", ""), str(params.get("object_target") or "").lower()
    if task_type not in SUBGOALS or not target:
        return None
    return HouseholdGoal(task_type, target, str(params.get("parent_target") or "").lower())


class AlfworldEnv(TextEnv):
    """One ALFWorld game at a time (Task.game_file = a ``game.tw-pddl``). Reloads only when the game changes."""

    kind = "alfworld"
    experts = {"oracle": "expert_action"}  # the game's own planner (it reads the full state)

    def __init__(self) -> None:
        super().__init__()
        import alfworld.agents.environment.alfred_tw_env  # noqa: F401 - fail early when the extra is missing

        self._env = None
        self._loaded: tuple[str, bool] | None = None
        self._state = None
        self._walkthrough: list[str] = []
        self._taken: list[str] = []
        self._expert_failed = False
        self._goal: HouseholdGoal | None = None
        self._subgoals: HouseholdSubgoals | None = None

    def make_tracker(self) -> HouseholdTracker:
        """The household tracker (the same action grammar): location, object in hand, processing, moves."""
        return HouseholdTracker()

    def _make(self, expert: bool):
        import textworld
        from alfworld.agents.environment.alfred_tw_env import (AlfredDemangler, AlfredExpert, AlfredExpertType,
                                                               AlfredInfos)
        from textworld.envs import PddlEnv

        env = PddlEnv(textworld.EnvInfos(admissible_commands=True, won=True, extras=["gamefile"]))
        env = AlfredInfos(AlfredDemangler(env, shuffle=False))
        if expert:
            env = AlfredExpert(env, expert_type=AlfredExpertType.HANDCODED)
        return env

    def _reset(self, task: Task):
        if not task.game_file:
            raise EnvError(f"alfworld task {task.task_id!r} has no game_file")
        path = Path(task.game_file)
        if not path.exists():
            raise EnvError(f"alfworld task {task.task_id!r}: {path} does not exist")
        expert = bool(task.option("expert", False))
        key = (str(path.resolve()), expert)
        if self._loaded != key:
            self.close()
            self._env = self._make(expert)
            self._env.load(str(path))
            self._loaded = key
            data = json.loads(path.read_text())
            self._walkthrough = list(data.get("walkthrough") or [])
            self._game_id = "alfworld-" + hashlib.blake2b(
                (data["pddl_problem"] + data["grammar"]).encode(), digest_size=8).hexdigest()
            traj = path.parent / "traj_data.json"
            meta = json.loads(traj.read_text()) if traj.exists() else {}
            self._task_type = meta.get("task_type", "")
            self._goal = task_goal(meta)
        gs = self._env.reset()
        if self._loaded[1]:
            patch_expert_move_tracking(self._env)
        self._state, self._taken, self._expert_failed = gs, [], False
        self._subgoals = None if self._goal is None else HouseholdSubgoals(self._goal)
        obs = gs.feedback
        goal = obs.split("Your task is to: ", 1)[1].strip() if "Your task is to: " in obs else ""
        return obs, self._admissible(gs), {"goal": goal, "game_id": self._game_id, "game_file": str(path),
                                           "task_type": self._task_type or task.task_type,
                                           "walkthrough": list(self._walkthrough)}

    @staticmethod
    def _admissible(gs) -> list[str]:
        return [a for a in (gs["admissible_commands"] or []) if a != "help"]

    def _step(self, action: str):
        try:
            gs, _, _ = self._env.step(action)
        except Exception:  # noqa: BLE001
            if not (self._loaded and self._loaded[1]):
                raise
            # the handcoded expert gave up (HandCodedAgentFailed) after the game had stepped:
            # keep the game's new state, the expert has no advice any more
            gs = self._env.state
            gs["extra.expert_plan"] = []
            self._expert_failed = True
        self._state = gs
        self._taken.append(action)
        won = bool(gs["won"])
        milestone = self._subgoals is not None and self._subgoals.update(action, gs.feedback, won)
        return gs.feedback, (10.0 if won else 0.0), won, self._admissible(gs), {"milestone": milestone}

    def expert_action(self) -> str | None:
        if self._state is None or self.done:
            return None
        if self._loaded and self._loaded[1]:
            plan = self._state.get("extra.expert_plan") or []
            return None if self._expert_failed or not plan else plan[0]
        k = len(self._taken)
        if self._taken == self._walkthrough[:k] and k < len(self._walkthrough):
            return self._walkthrough[k]
        return None

    def steps_to_win(self) -> int | None:
        """ALFWorld's own planner count: the length of the PDDL plan (fast-downward, the machinery of ALFWorld's
        planner expert and of TextWorld's ``policy_commands``) from the current state; not proven shortest.
        Asked only here, so that playing pays no planning."""
        if self._env is None or self._state is None:
            return None
        if self._state["won"]:
            return 0
        pddl = self._env.unwrapped
        plan = pddl._pddl_state.replan(pddl._entity_infos)
        return len(plan) if plan else UNWINNABLE

    def close(self) -> None:
        if self._env is not None:
            try:
                self._env.close()
            finally:
                self._env, self._loaded = None, None


__all__ = ["AlfworldEnv", "alfworld_tasks", "task_goal", "generate", "data_root", "TASK_TYPES", "SPLIT_DIRS", "SPLITS", "EVAL_SPLITS"]
