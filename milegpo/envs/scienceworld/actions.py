"""ScienceWorld's action language: what the prompt shows, and a text's spelling in the valid-action list.

The engine parses free text (a template such as ``move OBJ to OBJ`` with any of an object's referents: "battery
anode", "anode in battery" and "anode" name one object) and lists, each step, its *valid* action-object
combinations: one spelling per action, 1,000-3,000 strings (62% of them ``connect X to Y`` in a kitchen). The
gold action sequences speak the engine's full language: 20-30% of their steps are not spelled as the list spells
them ("examine X" for "look at X", "drop X" for "put down X", "pour X in Y" for "pour X into Y", another referent
of the same object, "0" to answer the engine's question when a text names two objects).

- :func:`prompt_actions`: what a prompt shows in place of the list (a prompt cannot hold 3,000 actions): the
  action templates and the objects in view, as BEACON's ScienceWorld prompt shows them (the engine's
  ``get_possible_actions`` and ``get_possible_objects``).
- :func:`listed_spelling`: the list's spelling of an action written otherwise (same template, same objects), when
  exactly one entry is that action; the gold expert speaks the list's language through it where it can.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from typing import Iterable, Sequence

#: the text the engine answers when no template matches an input (an invalid action)
UNKNOWN_ACTION = "No known action matches that input."
#: the engine's question when a text names more than one object; the environment answers it with the first
AMBIGUOUS = "Ambiguous request"
#: an action the environment refuses without sending: the engine would restart the task mid-episode (episodes
#: are reset by the trainer); it is not listed and answers :data:`REFUSED_ANSWER`
REFUSED_ACTIONS = ("reset task",)
REFUSED_ANSWER = "The task cannot be reset from inside an episode."
#: how the engine's templates are also written (observed in its gold sequences), as the list spells them:
#: a written frame -> the listed frame (``OBJ`` marks an object)
FRAME_ALIASES = {"examine OBJ": "look at OBJ", "drop OBJ": "put down OBJ", "pour OBJ in OBJ": "pour OBJ into OBJ"}
#: the entry of :func:`prompt_actions` that lists the objects, after the templates
OBJECTS_PREFIX = "OBJ is one of: "


def prompt_actions(templates: Iterable[str], objects: Iterable[str]) -> list[str]:
    """What a prompt shows for the actions of a step: the engine's action templates (``"move OBJ to OBJ"``),
    sorted, without :data:`REFUSED_ACTIONS`, then one entry naming the objects in view (sorted, each once)::

        ['activate OBJ', ..., 'wait1', 'OBJ is one of: agent | air | apple | ... | table']
    """
    shown = sorted({t for t in templates if t not in REFUSED_ACTIONS})
    names = sorted({o for o in objects if o})
    return shown + [OBJECTS_PREFIX + " | ".join(names)] if names else shown


def sorted_listing(text: str) -> str:
    """``text`` with the items of each listing in sorted order: an item is a tab-indented line with the more deeply
    indented lines under it, a listing the items between two unindented lines; nothing else changes.

    The engine lists objects in the order of its object hash, which changes from one load of a variation to the
    next (two loads of variation 1 of most task types: three wood cups of paint in another order); sorted, one
    state reads one way, in every simulation of a task group."""
    out: list[str] = []
    items: list[list[str]] = []
    for line in text.split("\n"):
        if not line.startswith("\t"):
            out += [row for item in sorted(items) for row in item]
            items = []
            out.append(line)
        elif line.startswith("\t\t") and items:
            items[-1].append(line)
        else:
            items.append([line])
    out += [row for item in sorted(items) for row in item]
    return "\n".join(out)


def listed_actions(valid: Iterable[str]) -> list[str]:
    """The admissible actions of a step: the engine's valid list, sorted, each once, without
    :data:`REFUSED_ACTIONS`."""
    return sorted(set(valid) - set(REFUSED_ACTIONS))


def frame_of(action: str, referents: Sequence[str]) -> str | None:
    """The template frame of a listed ``action`` whose objects the list names by ``referents`` (in order): each
    referent replaced by ``OBJ`` (``"move apple to table"``, ``["apple", "table"]`` -> ``"move OBJ to OBJ"``);
    None when the referents are not in it in that order."""
    out, at = [], 0
    for referent in referents:
        found = action.find(referent, at)
        if found < 0 or (found > 0 and action[found - 1] != " "):
            return None
        out.append(action[at:found] + "OBJ")
        at = found + len(referent)
    return "".join(out) + action[at:]


def _splits(text: str, literals: Sequence[str]) -> Iterable[list[str]]:
    """Every way ``text`` reads as ``literals[0] OBJ literals[1] OBJ ... literals[-1]``: the objects' texts."""
    head, rest = literals[0], literals[1:]
    if not text.startswith(head):
        return
    text = text[len(head):]
    if not rest:
        return
    if len(rest) == 1:
        tail = rest[0]
        if text.endswith(tail) and len(text) > len(tail):
            yield [text[:len(text) - len(tail)] if tail else text]
        return
    middle = rest[0]
    for found in re.finditer(re.escape(middle), text):
        if found.start() == 0:
            continue
        for more in _splits(text[found.start():], rest):
            yield [text[:found.start()], *more]


def listed_spelling(text: str, valid: Sequence[dict], referents: dict, shown: dict | None = None) -> str | None:
    """The valid list's spelling of the action ``text``: the one listed entry of the same template whose objects
    ``text`` names by some referent of each; None when no entry, or more than one, is that action.

    valid: the engine's valid actions with their templates and objects (``getValidActionObjectCombinationsJSON``:
    ``{"action", "template_id", "obj_ids"}``); referents: object id -> ``{"referents": [...]}`` for every object
    (``getAllObjectIdsTypesReferentsLUTJSON``); shown: object id -> the referent the list uses for it
    (``getPossibleObjectReferentLUTJSON``: it qualifies a name by its container, "orange in bowl"). A template's
    frame is the most common one its listed entries show, and :data:`FRAME_ALIASES` add the other ways the engine
    reads a frame. An object named "X in Y" / "X on Y" that is no referent is read as X."""
    text = " ".join(text.split())
    if any(entry["action"] == text for entry in valid):
        return text
    names: dict[str, set[int]] = {}
    for obj_id, entry in referents.items():
        for name in entry.get("referents", ()):
            names.setdefault(" ".join(str(name).split()), set()).add(int(obj_id))
    for obj_id, name in (shown or {}).items():
        names.setdefault(" ".join(str(name).split()), set()).add(int(obj_id))
    frames = template_frames(valid, names)
    for written, listed in FRAME_ALIASES.items():
        if listed in frames:
            frames.setdefault(written, frames[listed])
    found: set[str] = set()
    for frame, template in frames.items():
        for objects in _splits(text, frame.split("OBJ")):
            ids = [object_ids(o.strip(), names) for o in objects]
            if all(ids):
                found.update(e["action"] for e in valid if e["template_id"] == template
                             and len(e["obj_ids"]) == len(ids)
                             and all(int(i) in allowed for i, allowed in zip(e["obj_ids"], ids)))
    return found.pop() if len(found) == 1 else None


def object_ids(name: str, names: dict[str, set[int]]) -> set[int]:
    """The objects ``name`` may be: those it is a referent of, else, for "X in Y" / "X on Y", those X names (the
    first such X that names any, shortest X first)."""
    if name in names:
        return names[name]
    for found in re.finditer(r" (?:in|on) ", name):
        ids = names.get(name[:found.start()])
        if ids:
            return ids
    return set()


def template_frames(valid: Sequence[dict], names: dict[str, set[int]]) -> dict[str, int]:
    """Frame -> template id: for each template with objects, the frame most of its listed entries show (each
    entry's objects replaced by ``OBJ``, by the longest referent of each found in it; an entry that names an object
    by a qualified name, "eat orange in inventory", shows a wrong frame, the others outvote it)."""
    referents_of: dict[int, list[str]] = {}
    for name, ids in names.items():
        for obj_id in ids:
            referents_of.setdefault(obj_id, []).append(name)
    votes: dict[int, Counter] = {}
    for entry in valid:
        ids = [int(i) for i in entry["obj_ids"]]
        if not ids:
            continue
        options = [sorted((n for n in referents_of.get(i, ()) if n in entry["action"]), key=len, reverse=True)
                   for i in ids]
        for choice in itertools.product(*options):
            frame = frame_of(entry["action"], choice)
            if frame is not None:
                votes.setdefault(entry["template_id"], Counter())[frame] += 1
                break
    return {count.most_common(1)[0][0]: template for template, count in votes.items()}


__all__ = ["prompt_actions", "listed_actions", "sorted_listing", "listed_spelling", "object_ids", "template_frames",
           "frame_of", "UNKNOWN_ACTION", "AMBIGUOUS", "REFUSED_ACTIONS", "REFUSED_ANSWER", "FRAME_ALIASES",
           "OBJECTS_PREFIX"]
