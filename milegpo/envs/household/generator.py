"""The household game generator: rooms, layouts, games and goal sentences from ``(split, seed)``.

The world's content is a table (:data:`ROOMS`): four rooms (kitchen, living room, bedroom, bathroom), each
with its receptacle types and counts, the object types that may lie in each receptacle type and the
properties they can take (clean / hot / cool), its object types held out of train / id, and its task types.
:func:`generate_game` draws one :class:`Game` (layout, initial placement, goal) from ``(split, seed)``
(and optionally a forced task type), deterministically: ``train`` and ``id`` (in-distribution, ALFWorld's
valid_seen) draw from the same 48 seen layouts and the seen object types, with disjoint games; ``ood``
(valid_unseen) draws from 16 unseen layouts and adds object types never seen in train/id (the goal object
is an unseen type in ~59% of OOD games). ``max_receptacles=k`` (k >= 4) plays the same families in rooms
of at most k receptacles (each room keeps its appliances and a lamp stand) with fewer objects.
:func:`household_tasks` lists the games of a split as :class:`~milegpo.envs.Task` s; the environment that
plays them is :class:`milegpo.envs.household.HouseholdEnv`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from ..base import DEFAULT_HORIZON, TASK_TYPES, Task, stable_seed

SPLITS = ("train", "id", "ood")
_PROP = {"pick_clean_then_place_in_recep": "clean", "pick_heat_then_place_in_recep": "hot",
         "pick_cool_then_place_in_recep": "cool"}
#: a goal property -> the appliance verb that gives it (the role of the receptacle that does)
ROLE_OF_PROP = {"clean": "clean", "hot": "heat", "cool": "cool"}

#: receptacle type -> (openable, "in" or "on", role: appliance verb or "")
RECEPTACLES = {
    "cabinet": (True, "in", ""), "drawer": (True, "in", ""), "fridge": (True, "in", "cool"),
    "microwave": (True, "in", "heat"), "safe": (True, "in", ""), "sinkbasin": (False, "in", "clean"),
    "countertop": (False, "on", ""), "stoveburner": (False, "on", ""), "diningtable": (False, "on", ""),
    "shelf": (False, "on", ""), "garbagecan": (False, "in", ""), "coffeemachine": (False, "on", ""),
    "toaster": (False, "on", ""), "sofa": (False, "on", ""), "armchair": (False, "on", ""),
    "coffeetable": (False, "on", ""), "sidetable": (False, "on", ""), "tvstand": (False, "on", ""),
    "dresser": (False, "on", ""), "bed": (False, "on", ""), "desk": (False, "on", ""),
    "laundryhamper": (False, "in", ""), "toilet": (False, "on", ""), "bathtubbasin": (False, "in", ""),
    "towelholder": (False, "on", ""), "handtowelholder": (False, "on", ""), "toiletpaperhanger": (False, "on", ""),
}

_SURF = ("countertop", "diningtable", "shelf", "coffeetable", "sidetable", "tvstand", "dresser", "desk")
_FOOD_AT = ("countertop", "diningtable", "fridge", "microwave", "garbagecan", "sinkbasin")
_DISH_AT = ("countertop", "diningtable", "cabinet", "shelf", "sinkbasin", "microwave", "fridge")
_SMALL_AT = _SURF + ("drawer", "cabinet", "safe", "garbagecan", "bed", "sofa", "armchair")
_BIG_AT = _SURF + ("bed", "sofa", "armchair")
_BATH_AT = ("countertop", "cabinet", "shelf", "toilet", "garbagecan", "drawer", "bathtubbasin", "sinkbasin")
_CLOTH_AT = ("countertop", "cabinet", "shelf", "towelholder", "handtowelholder", "bathtubbasin", "drawer")


@dataclass(frozen=True)
class Room:
    """What a room may hold: its receptacle types, object types and task types."""

    receptacles: tuple  # (type, min count, max count)
    objects: dict  # type -> (where it may lie, properties it can take: subset of {"clean","hot","cool"})
    unseen: tuple  # object types that only OOD games hold
    task_types: tuple
    lamp_on: tuple = ()  # receptacle types a desklamp may stand on


#: room name -> what it may hold
ROOMS = {
    "kitchen": Room(
        receptacles=(("cabinet", 2, 6), ("drawer", 1, 4), ("countertop", 1, 3), ("fridge", 1, 1), ("microwave", 1, 1),
                     ("sinkbasin", 1, 1), ("stoveburner", 2, 4), ("diningtable", 0, 1), ("shelf", 0, 2),
                     ("garbagecan", 1, 1), ("coffeemachine", 0, 1), ("toaster", 0, 1)),
        objects={**{f: (_FOOD_AT, ("clean", "hot", "cool")) for f in ("apple", "lettuce", "potato", "tomato")},
                 **{f: (_FOOD_AT, ("hot", "cool")) for f in ("bread", "egg")},
                 **{d: (_DISH_AT, ("clean", "hot", "cool")) for d in ("mug", "cup", "bowl", "plate")},
                 **{c: (("stoveburner", "countertop", "cabinet"), ("clean", "cool")) for c in ("pan", "pot", "kettle")},
                 **{u: (("drawer", "countertop", "diningtable", "sinkbasin"), ("clean",))
                    for u in ("knife", "fork", "spoon", "spatula", "ladle", "butterknife")},
                 **{m: (("countertop", "cabinet", "shelf", "diningtable", "drawer"), ())
                    for m in ("saltshaker", "peppershaker", "soapbottle", "spraybottle")},
                 "dishsponge": (("countertop", "cabinet", "sinkbasin", "drawer"), ("clean",)),
                 "winebottle": (("countertop", "fridge", "cabinet", "diningtable", "shelf"), ("cool",))},
        unseen=("potato", "ladle", "kettle", "peppershaker"),
        task_types=("pick_and_place_simple", "pick_clean_then_place_in_recep", "pick_heat_then_place_in_recep",
                    "pick_cool_then_place_in_recep", "pick_two_obj_and_place"),
    ),
    "livingroom": Room(
        receptacles=(("sofa", 1, 1), ("armchair", 0, 2), ("coffeetable", 1, 1), ("sidetable", 1, 2), ("tvstand", 0, 1),
                     ("shelf", 1, 4), ("drawer", 0, 4), ("cabinet", 0, 3), ("garbagecan", 1, 1), ("dresser", 0, 1),
                     ("diningtable", 0, 1)),
        objects={**{s: (_SMALL_AT, ()) for s in ("remotecontrol", "keychain", "creditcard", "watch", "cellphone",
                                                   "candle", "statue", "vase", "tissuebox", "newspaper", "book")},
                 **{b: (_BIG_AT, ()) for b in ("pillow", "laptop", "box", "plate")}},
        unseen=("statue", "watch", "candle"),
        task_types=("pick_and_place_simple", "look_at_obj_in_light", "pick_two_obj_and_place"),
        lamp_on=("sidetable", "dresser"),
    ),
    "bedroom": Room(
        receptacles=(("bed", 1, 1), ("desk", 1, 1), ("dresser", 0, 1), ("drawer", 1, 5), ("shelf", 0, 4),
                     ("sidetable", 0, 2), ("garbagecan", 1, 1), ("safe", 0, 1), ("laundryhamper", 0, 1),
                     ("armchair", 0, 1)),
        objects={**{s: (_SMALL_AT, ()) for s in ("book", "pen", "pencil", "cellphone", "alarmclock", "keychain",
                                                   "creditcard", "cd", "mug", "bowl", "tissuebox")},
                 **{b: (_BIG_AT, ()) for b in ("laptop", "pillow", "baseballbat", "basketball", "teddybear")}},
        unseen=("alarmclock", "cd", "teddybear"),
        task_types=("pick_and_place_simple", "look_at_obj_in_light", "pick_two_obj_and_place"),
        lamp_on=("desk", "sidetable", "dresser"),
    ),
    "bathroom": Room(
        receptacles=(("toilet", 1, 1), ("sinkbasin", 1, 2), ("bathtubbasin", 0, 1), ("countertop", 1, 1),
                     ("cabinet", 1, 4), ("drawer", 0, 4), ("shelf", 0, 3), ("towelholder", 0, 1),
                     ("handtowelholder", 0, 1), ("garbagecan", 1, 1), ("toiletpaperhanger", 0, 1)),
        objects={**{s: (_BATH_AT, ("clean",)) for s in ("soapbar", "dishsponge", "scrubbrush")},
                 **{s: (_BATH_AT, ()) for s in ("soapbottle", "spraybottle", "candle", "toiletpaper", "tissuebox",
                                                  "plunger")},
                 **{c: (_CLOTH_AT, ("clean",)) for c in ("cloth", "towel", "handtowel")}},
        unseen=("plunger", "scrubbrush", "handtowel"),
        task_types=("pick_and_place_simple", "pick_clean_then_place_in_recep", "pick_two_obj_and_place"),
    ),
}
_ROOM_NAMES = tuple(ROOMS)
#: object types held out of train / id (in every room): only OOD games hold them
UNSEEN_TYPES = frozenset(t for room in ROOMS.values() for t in room.unseen)
N_SEEN_LAYOUTS = 48
N_UNSEEN_LAYOUTS = 16
#: the smallest room ``max_receptacles`` may ask for (a kitchen keeps its 3 appliances; with 3 receptacles an
#: unseen kitchen could not differ from a seen one)
MIN_RECEPTACLES = 4


@dataclass
class Game:
    """One generated game: the layout, the initial placement and the goal. Mutable state lives in the env."""

    room: str
    layout: int
    task_type: str
    goal_text: str
    target_type: str  # X
    dest_type: str  # Y ("" for look_at_obj_in_light)
    prop: str  # "", "clean", "hot", "cool"
    receptacles: list  # instance names in listing order
    contents: dict  # receptacle -> [object names]
    lamp: str = ""  # desklamp object name ("" if none)

    @property
    def game_id(self) -> str:
        body = repr((self.room, self.layout, self.task_type, self.goal_text, sorted(self.contents.items())))
        return f"household-{stable_seed(body):016x}"


def household_words() -> list[str]:
    """Every receptacle and object type name of the world (a vocabulary for tokenizers built on the spot)."""
    return sorted(set(RECEPTACLES) | {o for room in ROOMS.values() for o in room.objects} | {"desklamp"})


def type_of(name: str) -> str:
    """The type of a receptacle or object instance name: ``"cabinet 3"`` -> ``"cabinet"``."""
    return name.rsplit(" ", 1)[0]


@lru_cache(maxsize=None)
def _layout(layout: int, max_receptacles: int = 0) -> tuple[str, tuple[str, ...]]:
    """(room, receptacle instance names) of layout number ``layout``; unseen layouts never equal a seen one.

    ``max_receptacles`` (0: no limit) keeps that many of the room's receptacles (:func:`_shrink`)."""
    seen = layout < N_SEEN_LAYOUTS
    room = _ROOM_NAMES[layout % len(_ROOM_NAMES)]
    spec = ROOMS[room]
    signatures = set() if seen else {_layout(i, max_receptacles)[1] for i in range(N_SEEN_LAYOUTS)}
    for attempt in range(1000):
        rng = random.Random(stable_seed("household-layout", layout, attempt))
        names = []
        for rtype, lo, hi in spec.receptacles:
            names += [f"{rtype} {i}" for i in range(1, rng.randint(lo, hi) + 1)]
        if spec.lamp_on and not any(type_of(n) in spec.lamp_on for n in names):
            names.append(f"{spec.lamp_on[0]} 1")
        if max_receptacles and len(names) > max_receptacles:
            names = _shrink(rng, names, max_receptacles, spec.lamp_on)
        key = tuple(names)
        if key not in signatures:
            return room, key
    raise AssertionError(f"layout {layout}: no unseen layout found")  # pragma: no cover


def _shrink(rng: random.Random, names: list[str], k: int, lamp_on: tuple) -> list[str]:
    """``k`` of ``names`` in listing order, renumbered per type. Kept whatever else is drawn: one desklamp
    stand (if ``lamp_on``) and one receptacle of each appliance role (clean / heat / cool) the room has,
    so that every task type of the room stays playable."""
    keep = set()
    for wanted in ([n for n in names if type_of(n) in lamp_on],
                   *([n for n in names if RECEPTACLES[type_of(n)][2] == role] for role in ("clean", "heat", "cool"))):
        if wanted:
            keep.add(names.index(rng.choice(wanted)))
    assert len(keep) < k, (k, keep)  # MIN_RECEPTACLES leaves room for one more than the kitchen's 3 appliances
    keep.update(rng.sample([i for i in range(len(names)) if i not in keep], k - len(keep)))
    counts: dict[str, int] = {}
    out = []
    for i in sorted(keep):
        rtype = type_of(names[i])
        counts[rtype] = counts.get(rtype, 0) + 1
        out.append(f"{rtype} {counts[rtype]}")
    return out


def _layouts_for(split: str) -> range:
    if split in ("train", "id"):
        return range(N_SEEN_LAYOUTS)
    if split == "ood":
        return range(N_SEEN_LAYOUTS, N_SEEN_LAYOUTS + N_UNSEEN_LAYOUTS)
    raise ValueError(f"household split must be one of {SPLITS}, got {split!r}")


def _goal_sentence(rng: random.Random, task_type: str, x: str, y: str) -> str:
    prep = RECEPTACLES[y][1] if y else ""
    forms = {
        "pick_and_place_simple": [f"put a {x} {prep} {y}.", f"put some {x} {prep} {y}."],
        "look_at_obj_in_light": [f"look at {x} under the desklamp.", f"examine the {x} with the desklamp."],
        "pick_clean_then_place_in_recep": [f"put a clean {x} {prep} {y}.", f"clean some {x} and put it {prep} {y}."],
        "pick_heat_then_place_in_recep": [f"put a hot {x} {prep} {y}.", f"heat some {x} and put it {prep} {y}."],
        "pick_cool_then_place_in_recep": [f"put a cool {x} {prep} {y}.", f"cool some {x} and put it {prep} {y}."],
        "pick_two_obj_and_place": [f"put two {x} {prep} {y}.", f"find two {x} and put them {prep} {y}."],
    }[task_type]
    return rng.choice(forms)


def _check_room_size(max_receptacles: int) -> None:
    if max_receptacles < 0 or 0 < max_receptacles < MIN_RECEPTACLES:
        raise ValueError(f"household max_receptacles must be 0 (no limit) or >= {MIN_RECEPTACLES}, "
                         f"got {max_receptacles}")


@lru_cache(maxsize=4096)
def generate_game(split: str, seed: int, task_type: str = "", max_receptacles: int = 0) -> Game:
    """The game of ``(split, seed)``; ``task_type`` forces the task type ("" draws one uniformly). Deterministic.

    ``max_receptacles`` (0: ALFWorld-sized rooms, 7-21 receptacles) shrinks every room to at most that
    many receptacles (>= 4) and scatters fewer other objects: shorter searches, for small policies."""
    layouts = _layouts_for(split)
    _check_room_size(max_receptacles)
    if not task_type:  # draw the type first, so that Task(seed) and Task(seed, its drawn type) are one game
        task_type = random.Random(stable_seed("household-type", split, seed)).choice(TASK_TYPES)
    if task_type not in TASK_TYPES:
        raise ValueError(f"household task_type must be one of {TASK_TYPES}, got {task_type!r}")
    rng = random.Random(stable_seed("household-game", split, seed, task_type))
    for _ in range(1000):
        layout = rng.choice(layouts)
        room, receps = _layout(layout, max_receptacles)
        spec = ROOMS[room]
        if task_type not in spec.task_types:
            continue
        game = _try_game(rng, split, layout, room, receps, spec, task_type, max_receptacles)
        if game is not None:
            return game
    raise AssertionError(f"household: no game for split={split!r} seed={seed} task_type={task_type!r}")  # pragma: no cover


def _try_game(rng, split, layout, room, receps, spec: Room, ttype: str, max_receptacles: int) -> Game | None:
    prop = _PROP.get(ttype, "")
    rtypes = {type_of(r) for r in receps}
    types = [t for t in spec.objects if split == "ood" or t not in UNSEEN_TYPES]
    # goal object X
    cands = [t for t in types if (not prop or prop in spec.objects[t][1]) and any(w in rtypes for w in spec.objects[t][0])]
    if split == "ood":
        unseen = [t for t in cands if t in UNSEEN_TYPES]
        if unseen and rng.random() < 0.5:
            cands = unseen
    if not cands:
        return None
    x = rng.choice(cands)
    # destination Y: a receptacle type present where X may lie, not the appliance the task needs
    role = ROLE_OF_PROP.get(prop, "")
    if ttype == "look_at_obj_in_light":
        y = ""
    else:
        ys = sorted(t for t in spec.objects[x][0] if t in rtypes and not (role and RECEPTACLES[t][2] == role))
        if not ys:
            return None
        y = rng.choice(ys)
    contents = {r: [] for r in receps}
    counts: dict[str, int] = {}

    def place(otype: str, avoid: str = "") -> bool:
        where = [r for r in receps if type_of(r) in spec.objects[otype][0] and type_of(r) != avoid]
        if not where:
            return False
        counts[otype] = counts.get(otype, 0) + 1
        contents[rng.choice(where)].append(f"{otype} {counts[otype]}")
        return True

    n_x = 2 if ttype == "pick_two_obj_and_place" else 1
    for _ in range(n_x + rng.randint(0, 1)):
        # no X starts in Y, so the goal is never met at the start
        if not place(x, avoid=y if ttype in ("pick_and_place_simple", "pick_two_obj_and_place") else ""):
            return None
    for _ in range(rng.randint(max_receptacles // 2, max_receptacles) if max_receptacles else rng.randint(6, 12)):
        place(rng.choice(types))
    if ttype in ("pick_and_place_simple", "pick_two_obj_and_place"):
        for r in receps:  # distractor copies of X must not sit in Y either
            if type_of(r) == y and any(type_of(o) == x for o in contents[r]):
                return None
    lamp = ""
    if spec.lamp_on:
        stands = [r for r in receps if type_of(r) in spec.lamp_on]
        lamp = "desklamp 1"
        contents[rng.choice(stands)].append(lamp)
    for r in receps:
        rng.shuffle(contents[r])
    return Game(room=room, layout=layout, task_type=ttype, goal_text=_goal_sentence(rng, ttype, x, y), target_type=x,
                dest_type=y, prop=prop, receptacles=list(receps), contents=contents, lamp=lamp)


def household_tasks(split: str = "train", n: int = 100, start: int = 0, task_type: str = "",
                    horizon: int = DEFAULT_HORIZON, max_receptacles: int = 0) -> list[Task]:
    """``n`` household Tasks of ``split`` with seeds ``start .. start+n-1`` (games disjoint across splits).

    max_receptacles: 0 for ALFWorld-sized rooms, else rooms of at most that many receptacles (>= 4; the
    task carries it as the option ``("max_receptacles", k)``; see :func:`generate_game`)."""
    _layouts_for(split)
    _check_room_size(int(max_receptacles))
    options = (("max_receptacles", int(max_receptacles)),) if max_receptacles else ()
    suffix = f"/r{max_receptacles}" if max_receptacles else ""
    out = []
    for seed in range(start, start + n):
        game = generate_game(split, seed, task_type, int(max_receptacles))
        out.append(Task(task_id=f"household/{split}/{task_type or 'any'}/{seed}{suffix}", env="household", seed=seed,
                        task_type=task_type or game.task_type, split=split, horizon=horizon, options=options))
    return out


__all__ = ["generate_game", "household_tasks", "household_words", "type_of", "Game", "Room", "ROOMS", "TASK_TYPES",
           "SPLITS", "RECEPTACLES", "ROLE_OF_PROP", "N_SEEN_LAYOUTS", "N_UNSEEN_LAYOUTS", "UNSEEN_TYPES",
           "MIN_RECEPTACLES"]
