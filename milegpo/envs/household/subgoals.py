"""The household / ALFWorld milestones: the subgoals of each task type, and which step completes each.

A milestone step (``info["milestone"]``, the StepBatch's ``milestone`` field) is a step that completes one of the
task's verifiable subgoals for the first time in the episode. The subgoals come from the task's own structure
(its type, its object X and its destination Y), in the order every solution passes them:

=================================  ==================================================================
task type                          subgoals
=================================  ==================================================================
``pick_and_place_simple``          found X, took X, placed X in Y (the win)
``look_at_obj_in_light``           found X, took X, looked at X under the lit lamp (the win)
``pick_clean_then_place_in_recep`` found X, took X, cleaned the held X, placed it in Y (the win)
``pick_heat_then_place_in_recep``  found X, took X, heated the held X, placed it in Y (the win)
``pick_cool_then_place_in_recep``  found X, took X, cooled the held X, placed it in Y (the win)
``pick_two_obj_and_place``         found X, took an X, placed an X in a Y, took another X while one
                                   lies in a Y, placed the second (the win)
=================================  ==================================================================

- *found X*: an observation shows an object of type X (``"apple 2"``; the goal sentence names the type
  without a number, so it never counts);
- *took* / *cleaned, heated, cooled* / *placed*: what :class:`~milegpo.envs.household.tracker.HouseholdTracker`
  reads from the actions and their observations (the object in hand, its processing, where it was put
  down): the same reading on both worlds, no hidden engine state;
- the last subgoal is the world's own win (``won`` of the step), so a milestone never claims a win the world
  does not grant (a heated object cooled again is not placed *hot*).

The subgoals form a chain: the progress of a step is the furthest subgoal whose condition holds after it (a
later one implies the earlier ones: holding a heated X means X was found and taken), and a step is a milestone
when its progress exceeds the furthest reached before in the episode. So each subgoal counts once, a subgoal
undone and done again (X put down and taken again) is no second milestone, and a step that completes two at
once (a ``take`` whose observation is also the first to show X) is one milestone step. An expert's walkthrough
has one milestone step per subgoal of its task type but for such merges (tests/envs/household/test_subgoals.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .tracker import HouseholdTracker

#: the processing a task type asks of its object, as the tracker's flag ("" where none)
PROCESSING_OF_TASK = {"pick_clean_then_place_in_recep": "cleaned", "pick_heat_then_place_in_recep": "heated",
                      "pick_cool_then_place_in_recep": "cooled"}
#: the subgoals of each task type, in order (the last is the win)
SUBGOALS = {
    "pick_and_place_simple": ("found", "taken", "won"),
    "look_at_obj_in_light": ("found", "taken", "won"),
    "pick_clean_then_place_in_recep": ("found", "taken", "processed", "won"),
    "pick_heat_then_place_in_recep": ("found", "taken", "processed", "won"),
    "pick_cool_then_place_in_recep": ("found", "taken", "processed", "won"),
    "pick_two_obj_and_place": ("found", "taken", "placed one", "taken second", "won"),
}


def _type_of(name: str) -> str:
    """``"cabinet 3"`` -> ``"cabinet"`` (the instance number dropped)."""
    return name.rsplit(" ", 1)[0] if name.rsplit(" ", 1)[-1].isdigit() else name


@dataclass(frozen=True)
class HouseholdGoal:
    """What a household / ALFWorld task asks: its type, the object type X and the destination type Y (lower
    case, as the worlds name instances: ``"apple"``, ``"diningtable"``; Y is "" for ``look_at_obj_in_light``)."""

    task_type: str
    target: str
    dest: str = ""

    def __post_init__(self) -> None:
        if self.task_type not in SUBGOALS:
            raise ValueError(f"HouseholdGoal: task_type must be one of {sorted(SUBGOALS)}, got {self.task_type!r}")


class HouseholdSubgoals:
    """The milestone reader of one episode (see the module docstring): :meth:`update` after every step."""

    def __init__(self, goal: HouseholdGoal) -> None:
        self.goal = goal
        self.chain = SUBGOALS[goal.task_type]
        self.tracker = HouseholdTracker()
        self.tracker.reset("", {})
        self.seen = False
        self.reached = 0  # subgoals of the chain reached so far (the progress of the best step)
        self._shown = re.compile(rf"\b{re.escape(goal.target)} \d+\b")

    def update(self, action: str, observation: str, won: bool) -> bool:
        """Feed one step (the action as the world read it, its observation, whether it won); True when it
        completed a subgoal not reached before in the episode."""
        self.tracker.update(action, observation, False, {})
        if "nothing happens" not in observation.lower() and self._shown.search(observation.lower()):
            self.seen = True
        progress = self.progress(won)
        milestone = progress > self.reached
        self.reached = max(self.reached, progress)
        return milestone

    def progress(self, won: bool) -> int:
        """The number of the chain's subgoals that hold now: the furthest one whose condition holds, counted
        from 1."""
        for k in range(len(self.chain), 0, -1):
            if self._holds(self.chain[k - 1], won):
                return k
        return 0

    def _holds(self, subgoal: str, won: bool) -> bool:
        held = self.tracker.holding
        holding_x = held != "nothing" and _type_of(held) == self.goal.target
        if subgoal == "won":
            return won
        if subgoal == "found":
            return self.seen
        if subgoal == "taken":
            return holding_x
        if subgoal == "processed":
            return holding_x and PROCESSING_OF_TASK[self.goal.task_type] in self.tracker.processed.get(held, [])
        placed = [obj for obj, (_, dest) in self.tracker.moves.items()
                  if dest is not None and _type_of(obj) == self.goal.target and _type_of(dest) == self.goal.dest]
        if subgoal == "placed one":
            return bool(placed)
        if subgoal == "taken second":
            return bool(placed) and holding_x and held not in placed
        raise AssertionError(subgoal)  # pragma: no cover - SUBGOALS names only the subgoals above


__all__ = ["HouseholdGoal", "HouseholdSubgoals", "SUBGOALS", "PROCESSING_OF_TASK"]
