"""The household / ALFWorld state tracker: what the agent holds, has processed and has moved.

The public GraphGPO recipe's ALFWorld wrapper follows, from the actions and observations alone (no hidden
engine state), four fields reset at every episode start; this is that tracker for both worlds (their action
grammar is the same):

- ``location``: "middle of a room", then the target of the last ``go to X`` whose observation mentions X;
- ``holding``: "nothing", then X after ``take X [from Y]`` whose observation mentions X; back to "nothing"
  after ``put X in/on Y``, ``place X in/on Y``, ``move X to Y`` or ``drop X`` whose observation mentions X;
- per object its processing (heated / cooled / cleaned / sliced), set by ``heat|cool|clean|slice X with Y``
  when the observation holds the verb;
- per object the agent has held, where it was first taken from and where it was last put down.

An observation that says "Nothing happens" changes nothing, and so does an action the tracker cannot read
(a language model's garbage), a ``take`` while holding something, or a ``put`` of what is not held: the
tracker never raises. Its context line, shown after the observation (the recipe's wording)::

    Location: countertop 1. Items in hand (status): apple 1(heated). History moving list by you: mug 1(cleaned)
    from sinkbasin 1 move to coffeemachine 1.
"""

from __future__ import annotations

import re

from ..anchors import StateTracker

#: the processing verbs and the flag each sets, in the context line's order
PROCESSING = {"heat": "heated", "cool": "cooled", "clean": "cleaned", "slice": "sliced"}

_GO = re.compile(r"^go to (.+)$")
_TAKE = re.compile(r"^(?:take|pick up) (.+?)(?: from (.+))?$")
_PUT = re.compile(r"^(?:put|place) (.+?) (?:in/on|into|onto|in|on) (.+)$")
_MOVE = re.compile(r"^move (.+?) to (.+)$")
_DROP = re.compile(r"^drop (.+)$")
_PROCESS = re.compile(r"^(heat|cool|clean|slice) (.+?) with (.+)$")


def _mentions(observation: str, name: str) -> bool:
    return bool(name) and name.lower() in observation.lower()


class HouseholdTracker(StateTracker):
    """The household / ALFWorld tracker (see the module docstring)."""

    def reset(self, observation: str, info: dict) -> None:
        self.location = "middle of a room"
        self.holding = "nothing"
        self.processed: dict[str, list[str]] = {}  # object -> its flags, in PROCESSING order
        self.moves: dict[str, list[str | None]] = {}  # object -> [first taken from, last put down at (None: held)]

    def update(self, action: str, observation: str, invalid: bool, info: dict) -> None:
        if "nothing happens" in observation.lower():
            return
        command = " ".join(action.lower().split())
        if (found := _GO.match(command)) is not None:
            if _mentions(observation, found.group(1)):
                self.location = found.group(1)
        elif (found := _TAKE.match(command)) is not None:
            obj = found.group(1)
            if self.holding == "nothing" and _mentions(observation, obj):
                self.holding = obj
                self.moves.setdefault(obj, [found.group(2) or self.location, None])[1] = None
        elif (found := _PUT.match(command) or _MOVE.match(command)) is not None:
            self._put_down(found.group(1), found.group(2), observation)
        elif (found := _DROP.match(command)) is not None:
            self._put_down(found.group(1), self.location, observation)
        elif (found := _PROCESS.match(command)) is not None:
            verb, obj = found.group(1), found.group(2)
            if verb in observation.lower():
                flags = self.processed.setdefault(obj, [])
                if PROCESSING[verb] not in flags:
                    flags.append(PROCESSING[verb])
                    flags.sort(key=list(PROCESSING.values()).index)

    def _put_down(self, obj: str, where: str, observation: str) -> None:
        if self.holding == obj and _mentions(observation, obj):
            self.holding = "nothing"
            self.moves.setdefault(obj, [self.location, None])[1] = where

    def _status(self, obj: str) -> str:
        return f"{obj}({', '.join(self.processed.get(obj, [])) or 'unprocessed'})"

    def context(self) -> str:
        hand = "nothing" if self.holding == "nothing" else self._status(self.holding)
        line = f"Location: {self.location}. Items in hand (status): {hand}."
        history = [f"{self._status(obj)} from {origin} move to {dest}" for obj, (origin, dest) in self.moves.items()
                   if dest is not None]
        history += [self._status(obj) for obj in self.processed if obj not in self.moves]
        if history:
            line += f" History moving list by you: {'; '.join(history)}."
        return line


__all__ = ["HouseholdTracker", "PROCESSING"]
