"""The ScienceWorld state tracker: where the agent is, what it carries, what it focused on, and the task's score.

ScienceWorld's observation is the answer to the last action ("The door is now open.", "You move the metal pot
to the stove."), which says little of the state: the same answer comes back in very different situations. The
engine reports more with every step, at no move's cost (its free actions ``look`` and ``inventory``, and the
score): the tracker keeps, from those and from the agent's own actions,

- ``location``: the room the engine's look names ("This room is called the kitchen.");
- ``inventory``: the engine's inventory text, whitespace collapsed ("an orange, a thermometer, currently reading
  a temperature of 10 degrees celsius");
- ``focus``: what the agent focused on, as the engine's answer to ``focus on X`` names it ("You focus on the
  water."; a task's focus is the commitment the engine scores, and a wrong one fails the task);
- ``score``: the engine's task score, 0-100 (its progress through the task's subgoals; the agent is told it).

Its context line (shown after the observation when the prompt shows context; keyed by the ``tracked`` anchors)::

    Location: kitchen. Inventory: an orange, a thermometer, currently reading a temperature of 10 degrees celsius.
    Focus: water. Score: 25.

A step whose info has none of these leaves them as they were; an action the tracker cannot read changes nothing.
"""

from __future__ import annotations

import re

from ..anchors import StateTracker

_ROOM = re.compile(r"This room is called the ([^.]+)\.")
_FOCUS = re.compile(r"^You focus on (?:the )?(.+?)\.?$", re.IGNORECASE)
_INVENTORY_HEAD = re.compile(r"^In your inventory, you see:\s*", re.IGNORECASE)


def room_of(look: str) -> str | None:
    """The room the engine's look text names, None when it names none."""
    found = _ROOM.search(look or "")
    return found.group(1).strip() if found else None


def inventory_text(inventory: str) -> str:
    """The engine's inventory text as one line: its heading dropped, items sorted (the engine's order changes from
    load to load) and joined by ", " ("nothing" if empty)."""
    body = _INVENTORY_HEAD.sub("", (inventory or "").strip())
    items = sorted(" ".join(line.split()) for line in body.splitlines() if line.strip())
    return ", ".join(items) or "nothing"


class ScienceWorldTracker(StateTracker):
    """The ScienceWorld tracker (see the module docstring); it reads ``info["location"]``, ``info["inventory"]``
    and ``info["engine_score"]`` of each step."""

    def reset(self, observation: str, info: dict) -> None:
        self.location = str(info.get("location") or "unknown")
        self.inventory = str(info.get("inventory") or "nothing")
        self.focus = "none"
        self.score = int(info.get("engine_score", 0))

    def update(self, action: str, observation: str, invalid: bool, info: dict) -> None:
        if info.get("location"):
            self.location = str(info["location"])
        if info.get("inventory"):
            self.inventory = str(info["inventory"])
        if "engine_score" in info:
            self.score = int(info["engine_score"])
        found = _FOCUS.match(" ".join(observation.split()))
        if found is not None and not invalid and action.lower().startswith("focus"):
            self.focus = found.group(1)

    def context(self) -> str:
        return f"Location: {self.location}. Inventory: {self.inventory}. Focus: {self.focus}. Score: {self.score}."


__all__ = ["ScienceWorldTracker", "room_of", "inventory_text"]
