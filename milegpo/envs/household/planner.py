"""The household world's planner: the optimal number of actions that win from the hidden state.

:func:`steps_to_win` backs :meth:`~milegpo.envs.household.env.HouseholdEnv.steps_to_win` (the :class:`~milegpo.envs.TextEnv` hook for
ground-truth step labels, :mod:`milegpo.evidence.quality`). It knows every object's place, as ALFWorld's
planner does, and answers the length of a shortest winning action sequence from the current state; no
agent ever sees it.

It is a breadth-first search over an abstraction of the state that keeps every shortest plan:

- only the goal's objects matter (the objects of the target type; any other held object is "junk",
  whose only use is to be put down); of an object only its place and whether it has the goal's property
  (clean / hot / cool) matter, so objects of the target type are interchangeable;
- only the receptacles a shortest plan can use are kept (the *relevant* ones): the current location, the
  places of the goal's objects, the lamp stand, one receptacle of the appliance the goal needs (the
  current location when it is one: applying needs no open door) and the destinations that hold no goal
  object reduced to the best one (the current location if it is one, else an open one if any, else a
  closed one): two such destinations differ only in being open, and an open one does whatever a closed
  one does one ``open`` sooner. Junk is put down where the plan takes an object next (that receptacle
  is open by then), so no other receptacle is ever worth a step;
- actions that never shorten a plan are left out: ``close``, ``examine``, ``look``, ``inventory``,
  taking junk, and applying an appliance the goal does not need (cooling only removes "hot").

Every move costs one step, as in the game (``go to R`` from anywhere, ``open``, ``take``, ``move``,
``clean / heat / cool``, ``use``); a state that is won is 0 steps from winning. The search of one state
visits a few hundred abstract states; answers are cached per (game, abstract state).
"""

from __future__ import annotations

from collections import deque
from functools import lru_cache

from ..base import UNWINNABLE
from .generator import RECEPTACLES, ROLE_OF_PROP, type_of

#: what an abstract state holds in hand: nothing, junk, or a goal object (with its property: True / False)
_EMPTY, _JUNK = None, "junk"


def _openable(receptacle: str) -> bool:
    return RECEPTACLES[type_of(receptacle)][0]


def steps_to_win(env) -> int:
    """The fewest actions that win ``env``'s game from its current hidden state (0 when it is won).

    env: a :class:`~milegpo.envs.HouseholdEnv` after ``reset``. Returns an int, :data:`UNWINNABLE` when no
    sequence of actions wins (the generator makes no such game)."""
    game, s = env.game, env.s
    if game is None:
        raise ValueError("household steps_to_win: the environment has no game (call reset first)")
    target = game.target_type

    def good(obj: str) -> bool:
        return not game.prop or game.prop in s.props.get(obj, ())
    goal_objects = [(r, good(o)) for r, objs in s.contents.items() for o in objs if type_of(o) == target]
    if not s.holding:
        hold = _EMPTY
    elif type_of(s.holding) == target:
        hold = good(s.holding)
    else:
        hold = _JUNK
    places = {r for r, _ in goal_objects}
    relevant = set(places)
    if s.location:
        relevant.add(s.location)
    lamp_stand = ""
    if game.task_type == "look_at_obj_in_light":
        lamp_stand = next(r for r, objs in s.contents.items() if game.lamp in objs)
        relevant.add(lamp_stand)
    appliances: tuple[str, ...] = ()
    if game.prop:
        verb = ROLE_OF_PROP[game.prop]
        appliances = tuple(r for r in game.receptacles if RECEPTACLES[type_of(r)][2] == verb)
        relevant.add(s.location if s.location in appliances else appliances[0])
    dests = tuple(r for r in game.receptacles if type_of(r) == game.dest_type)
    free = [r for r in dests if r not in places]
    if free and s.location not in free:
        is_open = [r for r in free if not _openable(r) or r in s.opened]
        relevant.add((is_open or free)[0])
    kept = tuple(r for r in game.receptacles if r in relevant)
    opened = frozenset(r for r in kept if _openable(r) and r in s.opened)
    start = (s.location, hold, opened, tuple(sorted(goal_objects)), bool(s.lamp_on))
    need = 2 if game.task_type == "pick_two_obj_and_place" else 1
    rules = (game.task_type == "look_at_obj_in_light", lamp_stand, bool(game.prop), appliances,
             frozenset(dests), need)
    return _search(kept, rules, start)


def _won(state, rules) -> bool:
    """The game's win test on an abstract state (``HouseholdEnv._won``)."""
    loc, hold, _, objects, lamp_on = state
    look, lamp_stand, _, _, dests, need = rules
    if look:
        return hold not in (_EMPTY, _JUNK) and lamp_on and loc == lamp_stand
    counts: dict[str, int] = {}
    for place, ok in objects:
        if ok and place in dests:
            counts[place] = counts.get(place, 0) + 1
    return any(c >= need for c in counts.values())


def _moves(state, kept, rules):
    """The abstract states one useful action away (see the module docstring for what is left out)."""
    loc, hold, opened, objects, lamp_on = state
    look, lamp_stand, needs_prop, appliances, _, _ = rules
    for r in kept:
        if r != loc:
            yield (r, hold, opened, objects, lamp_on)
    if not loc:
        return
    here_open = not _openable(loc) or loc in opened
    if not here_open:
        yield (loc, hold, opened | {loc}, objects, lamp_on)
    elif hold is _EMPTY:
        for i, (place, ok) in enumerate(objects):
            if place == loc and (i == 0 or objects[i - 1] != (place, ok)):
                yield (loc, ok, opened, objects[:i] + objects[i + 1:], lamp_on)
    elif hold is _JUNK:
        yield (loc, _EMPTY, opened, objects, lamp_on)
    else:
        yield (loc, _EMPTY, opened, tuple(sorted(objects + ((loc, hold),))), lamp_on)
    if needs_prop and hold not in (_EMPTY, _JUNK) and not hold and loc in appliances:
        yield (loc, True, opened, objects, lamp_on)
    if look and loc == lamp_stand and not lamp_on:
        yield (loc, hold, opened, objects, True)


@lru_cache(maxsize=200_000)
def _search(kept: tuple, rules: tuple, start: tuple) -> int:
    """Breadth-first search from ``start`` to the nearest won abstract state: its depth."""
    if _won(start, rules):
        return 0
    depth = {start: 0}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        d = depth[state] + 1
        for nxt in _moves(state, kept, rules):
            if nxt in depth:
                continue
            if _won(nxt, rules):
                return d
            depth[nxt] = d
            queue.append(nxt)
    return UNWINNABLE


__all__ = ["steps_to_win"]
