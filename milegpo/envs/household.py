"""The embedded household world: an ALFWorld-like text game family in pure Python.

Needs no install; a step costs microseconds. It is the default world of the project
(tests, the CPU training run) and mirrors ALFWorld's interface:

- one room (kitchen, living room, bedroom or bathroom) with numbered receptacles
  ("cabinet 3", "countertop 1"), some openable (closed at the start: their contents
  show only once opened), objects in them ("apple 1", "mug 2");
- six task types, ALFWorld's: ``pick_and_place_simple``, ``look_at_obj_in_light``,
  ``pick_clean_then_place_in_recep``, ``pick_heat_then_place_in_recep``,
  ``pick_cool_then_place_in_recep``, ``pick_two_obj_and_place``; the goal sentence
  ends the first observation ("Your task is to: put a hot egg in diningtable.");
- ALFWorld's commands: ``go to R``, ``open R``, ``close R``, ``take O from R``,
  ``move O to R``, ``clean O with R``, ``heat O with R``, ``cool O with R``,
  ``use desklamp N``, ``examine X``, ``inventory``, ``look``; one object in hand;
- the admissible actions are listed after every step; any other action answers
  "Nothing happens." and changes nothing; reward 10 on the winning step, else 0.

Games are generated from ``(split, seed)`` (and optionally a forced task type):
``train`` and ``id`` (in-distribution, ALFWorld's valid_seen) draw from the same
48 seen layouts and the seen object types, with disjoint games; ``ood`` (valid_unseen)
draws from 16 unseen layouts and adds object types never seen in train/id (the goal
object is an unseen type in ~59% of OOD games). An expert (:meth:`HouseholdEnv.expert_action`)
re-plans from the current state, so it also finishes episodes that started badly.
``household_tasks(..., max_receptacles=k)`` (task option ``("max_receptacles", k)``, k >= 4) plays the same
families in rooms of at most k receptacles (each room keeps its appliances and a lamp stand) with fewer
objects: shorter searches, for small policies (``MileGPOConfig.env_options='{"max_receptacles": 4}'``).

    >>> from milegpo.envs import HouseholdEnv, household_tasks
    >>> env = HouseholdEnv(); task = household_tasks("train", 1)[0]
    >>> obs, actions, info = env.reset(task)
    >>> while not env.done: obs, r, done, won, info = env.step(env.expert_action())
"""

from __future__ import annotations

import copy
import dataclasses
import random
import time
from dataclasses import dataclass, field
from functools import lru_cache

from .base import DEFAULT_HORIZON, NOTHING_HAPPENS, TASK_TYPES, EnvError, Task, TextEnv, stable_seed

SPLITS = ("train", "id", "ood")
_PROP = {"pick_clean_then_place_in_recep": "clean", "pick_heat_then_place_in_recep": "hot",
         "pick_cool_then_place_in_recep": "cool"}
_ROLE_OF_PROP = {"clean": "clean", "hot": "heat", "cool": "cool"}

# receptacle type -> (openable, "in" or "on", role: appliance verb or "")
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
class _Room:
    receptacles: tuple  # (type, min count, max count)
    objects: dict  # type -> (where it may lie, properties it can take: subset of {"clean","hot","cool"})
    unseen: tuple  # object types that only OOD games hold
    task_types: tuple
    lamp_on: tuple = ()  # receptacle types a desklamp may stand on


_ROOMS = {
    "kitchen": _Room(
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
    "livingroom": _Room(
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
    "bedroom": _Room(
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
    "bathroom": _Room(
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
_ROOM_NAMES = tuple(_ROOMS)
#: object types held out of train / id (in every room): only OOD games hold them
UNSEEN_TYPES = frozenset(t for room in _ROOMS.values() for t in room.unseen)
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
    return sorted(set(RECEPTACLES) | {o for room in _ROOMS.values() for o in room.objects} | {"desklamp"})


def _rtype(name: str) -> str:
    return name.rsplit(" ", 1)[0]


@lru_cache(maxsize=None)
def _layout(layout: int, max_receptacles: int = 0) -> tuple[str, tuple[str, ...]]:
    """(room, receptacle instance names) of layout number ``layout``; unseen layouts never equal a seen one.

    ``max_receptacles`` (0: no limit) keeps that many of the room's receptacles (:func:`_shrink`)."""
    seen = layout < N_SEEN_LAYOUTS
    room = _ROOM_NAMES[layout % len(_ROOM_NAMES)]
    spec = _ROOMS[room]
    signatures = set() if seen else {_layout(i, max_receptacles)[1] for i in range(N_SEEN_LAYOUTS)}
    for attempt in range(1000):
        rng = random.Random(stable_seed("household-layout", layout, attempt))
        names = []
        for rtype, lo, hi in spec.receptacles:
            names += [f"{rtype} {i}" for i in range(1, rng.randint(lo, hi) + 1)]
        if spec.lamp_on and not any(_rtype(n) in spec.lamp_on for n in names):
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
    for wanted in ([n for n in names if _rtype(n) in lamp_on],
                   *([n for n in names if RECEPTACLES[_rtype(n)][2] == role] for role in ("clean", "heat", "cool"))):
        if wanted:
            keep.add(names.index(rng.choice(wanted)))
    assert len(keep) < k, (k, keep)  # MIN_RECEPTACLES leaves room for one more than the kitchen's 3 appliances
    keep.update(rng.sample([i for i in range(len(names)) if i not in keep], k - len(keep)))
    counts: dict[str, int] = {}
    out = []
    for i in sorted(keep):
        rtype = _rtype(names[i])
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
        spec = _ROOMS[room]
        if task_type not in spec.task_types:
            continue
        game = _try_game(rng, split, layout, room, receps, spec, task_type, max_receptacles)
        if game is not None:
            return game
    raise AssertionError(f"household: no game for split={split!r} seed={seed} task_type={task_type!r}")  # pragma: no cover


def _try_game(rng, split, layout, room, receps, spec: _Room, ttype: str, max_receptacles: int) -> Game | None:
    prop = _PROP.get(ttype, "")
    rtypes = {_rtype(r) for r in receps}
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
    role = _ROLE_OF_PROP.get(prop, "")
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
        where = [r for r in receps if _rtype(r) in spec.objects[otype][0] and _rtype(r) != avoid]
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
            if _rtype(r) == y and any(o.rsplit(" ", 1)[0] == x for o in contents[r]):
                return None
    lamp = ""
    if spec.lamp_on:
        stands = [r for r in receps if _rtype(r) in spec.lamp_on]
        lamp = "desklamp 1"
        contents[rng.choice(stands)].append(lamp)
    for r in receps:
        rng.shuffle(contents[r])
    return Game(room=room, layout=layout, task_type=ttype, goal_text=_goal_sentence(rng, ttype, x, y), target_type=x,
                dest_type=y, prop=prop, receptacles=list(receps), contents=contents, lamp=lamp)


def _listing(items: list[str]) -> str:
    if not items:
        return "nothing"
    items = [f"a {i}" for i in items]
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + f", and {items[-1]}"


@dataclass
class _State:
    location: str = ""  # "" = the middle of the room
    holding: str = ""
    opened: set = field(default_factory=set)
    props: dict = field(default_factory=dict)  # object -> set of "clean" / "hot" / "cool"
    lamp_on: bool = False
    contents: dict = field(default_factory=dict)


class HouseholdEnv(TextEnv):
    """The embedded ALFWorld-like world (see the module docstring). Task fields used: seed, split, task_type.

    Task option ``("step_delay_s", x)`` makes every step sleep x seconds: a stand-in for a slow
    engine in pool tests and benchmarks (the game is unchanged).
    """

    kind = "household"

    def __init__(self) -> None:
        super().__init__()
        self.game: Game | None = None
        self.s = _State()
        self._delay = 0.0
        self._seen: dict[str, list[str]] = {}  # what an agent has observed: receptacle -> contents seen there

    # ------------------------------------------------------------------ helpers
    def _otype(self, obj: str) -> str:
        return obj.rsplit(" ", 1)[0]

    def _is_open(self, r: str) -> bool:
        return not RECEPTACLES[_rtype(r)][0] or r in self.s.opened

    def _where(self, obj: str) -> str:
        for r, objs in self.s.contents.items():
            if obj in objs:
                return r
        return ""

    def _describe(self, r: str) -> str:
        prep = RECEPTACLES[_rtype(r)][1]
        if not self._is_open(r):
            return f"The {r} is closed."
        items = _listing(self.s.contents[r])
        if RECEPTACLES[_rtype(r)][0]:
            return f"The {r} is open. In it, you see {items}."
        return f"{'On' if prep == 'on' else 'In'} the {r}, you see {items}."

    def _room_view(self) -> str:
        return f"You are in the middle of a room. Looking quickly around you, you see {_listing(self.game.receptacles)}."

    def _good(self, obj: str) -> bool:
        g = self.game
        return self._otype(obj) == g.target_type and (not g.prop or g.prop in self.s.props.get(obj, ()))

    def _won(self) -> bool:
        g, s = self.game, self.s
        if g.task_type == "look_at_obj_in_light":
            return bool(s.holding) and self._otype(s.holding) == g.target_type and s.lamp_on and \
                bool(s.location) and g.lamp in s.contents[s.location]
        need = 2 if g.task_type == "pick_two_obj_and_place" else 1
        return any(_rtype(r) == g.dest_type and sum(self._good(o) for o in objs) >= need
                   for r, objs in s.contents.items())

    def admissible_actions(self) -> list[str]:
        g, s = self.game, self.s
        acts = [f"go to {r}" for r in g.receptacles if r != s.location]
        acts += ["inventory", "look"]
        if s.holding:
            acts.append(f"examine {s.holding}")
        r = s.location
        if r:
            rt = _rtype(r)
            openable, _, role = RECEPTACLES[rt]
            acts.append(f"examine {r}")
            if openable:
                acts.append(f"close {r}" if r in s.opened else f"open {r}")
            if self._is_open(r):
                if not s.holding:
                    acts += [f"take {o} from {r}" for o in s.contents[r] if not o.startswith("desklamp")]
                else:
                    acts.append(f"move {s.holding} to {r}")
            if s.holding and role:
                acts.append(f"{role} {s.holding} with {r}")
            if g.lamp and g.lamp in s.contents[r]:
                acts.append(f"use {g.lamp}")
        return sorted(acts)

    # ------------------------------------------------------------------ protocol hooks
    def _reset(self, task: Task):
        if task.seed is None:
            raise EnvError(f"household task {task.task_id!r} has no seed")
        self._delay = float(task.option("step_delay_s", 0.0))
        self.game = generate_game(task.split, int(task.seed), task.task_type, int(task.option("max_receptacles", 0)))
        self.s = _State(contents=copy.deepcopy(self.game.contents))
        self._seen = {}
        obs = f"{self._room_view()}\n\nYour task is to: {self.game.goal_text}"
        return obs, self.admissible_actions(), {"goal": self.game.goal_text, "game_id": self.game.game_id,
                                                "task_type": self.game.task_type, "room": self.game.room}

    def _step(self, action: str):
        if self._delay:
            time.sleep(self._delay)
        if action not in self.admissible:
            return NOTHING_HAPPENS, 0.0, False, self.admissible, {}
        s = self.s
        words = action.split(" ")
        verb = words[0]
        if action == "inventory":
            obs = f"You are carrying: a {s.holding}." if s.holding else "You are not carrying anything."
        elif action == "look":
            obs = self._room_view() if not s.location else f"You are facing the {s.location}. {self._describe(s.location)}"
        elif verb == "go":
            s.location = action[len("go to "):]
            obs = f"You arrive at {s.location}. {self._describe(s.location)}"
        elif verb == "open":
            s.opened.add(s.location)
            obs = f"You open the {s.location}. {self._describe(s.location)}"
        elif verb == "close":
            s.opened.discard(s.location)
            obs = f"You close the {s.location}."
        elif verb == "examine":
            what = action[len("examine "):]
            obs = f"There's nothing special about {what}." if what == s.holding else self._describe(what)
        elif verb == "take":
            obj = action[len("take "):].rsplit(" from ", 1)[0]
            s.contents[s.location].remove(obj)
            s.holding = obj
            obs = f"You pick up the {obj} from the {s.location}."
        elif verb == "move":
            obj = s.holding
            s.contents[s.location].append(obj)
            s.holding = ""
            obs = f"You move the {obj} to the {s.location}."
        elif verb in ("clean", "heat", "cool"):
            props = s.props.setdefault(s.holding, set())
            if verb == "clean":
                props.add("clean")
            elif verb == "heat":
                props.discard("cool"), props.add("hot")
            else:
                props.discard("hot"), props.add("cool")
            obs = f"You {verb} the {s.holding} using the {s.location}."
        elif verb == "use":
            s.lamp_on = True
            obs = f"You turn on the {self.game.lamp}."
        else:  # pragma: no cover - every admissible verb is handled above
            raise AssertionError(action)
        if s.location and self._is_open(s.location):  # the observation showed what is there now
            self._seen[s.location] = list(s.contents[s.location])
        won = self._won()
        return obs, (10.0 if won else 0.0), won, self.admissible_actions(), {}

    # ------------------------------------------------------------------ experts
    def expert_action(self) -> str | None:
        """The oracle expert's next action, re-planned from the current state (None when done).

        It knows where every object is (ALFWorld's expert plans with the game's full state): its first
        action goes straight to the receptacle holding the goal object, which no observation has shown."""
        return self._plan(search=False)

    def search_action(self) -> str | None:
        """The searching expert's next action (None when done): it acts on what has been observed only.

        Objects are looked for in receptacles where their type may lie (common knowledge, not the game's
        placement), in the room's listing order, opening closed ones to look in; a goal object or the
        desklamp seen earlier is gone back to. Otherwise it plans as the oracle (destination and appliances
        are named by the goal and the room's listing)."""
        return self._plan(search=True)

    def _plan(self, search: bool) -> str | None:
        if self.game is None or self.done:
            return None
        g, s = self.game, self.s
        fetch = self._search if search else self._fetch
        if s.holding and self._otype(s.holding) != g.target_type:
            return self._put_down()
        if g.task_type == "look_at_obj_in_light":
            if not s.holding:
                return fetch(lambda o: self._otype(o) == g.target_type)
            lamp = (lambda o: o == g.lamp)
            if search and not self._known(lamp):
                return self._search(lamp, take=False)
            lamp_at = next(r for r, objs in s.contents.items() if g.lamp in objs)
            return f"go to {lamp_at}" if s.location != lamp_at else f"use {g.lamp}"
        dests = [r for r in g.receptacles if _rtype(r) == g.dest_type]
        two = g.task_type == "pick_two_obj_and_place"
        target = max(dests, key=lambda r: sum(self._good(o) for o in s.contents[r])) if two else dests[0]
        if s.holding:
            if g.prop and not self._good(s.holding):
                role = _ROLE_OF_PROP[g.prop]
                app = next(r for r in g.receptacles if RECEPTACLES[_rtype(r)][2] == role)
                return f"go to {app}" if s.location != app else f"{role} {s.holding} with {app}"
            if s.location != target:
                return f"go to {target}"
            return f"move {s.holding} to {target}" if self._is_open(target) else f"open {target}"
        placed = set(s.contents[target]) if two else {o for r in dests for o in s.contents[r]}
        return fetch(lambda o: self._otype(o) == g.target_type and not (o in placed and self._good(o)))

    def _fetch(self, wanted) -> str:
        s = self.s
        here = [o for o in s.contents.get(s.location, []) if wanted(o)] if s.location else []
        if here:
            return f"take {here[0]} from {s.location}" if self._is_open(s.location) else f"open {s.location}"
        for r in self.game.receptacles:
            if any(wanted(o) for o in s.contents[r]):
                return f"go to {r}"
        raise AssertionError(f"household expert: no object left for goal {self.game.goal_text!r}")  # pragma: no cover

    def _known(self, wanted) -> list[str]:
        return [r for r in self.game.receptacles if any(wanted(o) for o in self._seen.get(r, ()))]

    def _search(self, wanted, take: bool = True) -> str:
        """Next action towards an object matching ``wanted`` using only observed contents."""
        s, g = self.s, self.game
        here = s.location
        if take and here and self._is_open(here):
            objs = [o for o in s.contents[here] if wanted(o) and o != g.lamp]
            if objs:
                return f"take {objs[0]} from {here}"
        known = [r for r in self._known(wanted) if r != here]
        if known:
            return f"go to {known[0]}"
        if here and here not in self._seen:
            return f"open {here}"  # a closed receptacle: look in it
        spec = _ROOMS[g.room]
        # where such a thing may lie (the goal object's type comes from this room's object table)
        likely = spec.objects[g.target_type][0] if take else spec.lamp_on
        todo = [r for r in g.receptacles if r not in self._seen and r != here]
        todo = [r for r in todo if _rtype(r) in likely] or todo
        if todo:
            return f"go to {todo[0]}"
        return self._fetch(wanted)  # everything looked at (objects moved since): fall back to the state

    def steps_to_win(self) -> int:
        """The fewest actions that win from the hidden state (:mod:`milegpo.envs.household_planner`)."""
        from milegpo.envs.household_planner import steps_to_win

        return steps_to_win(self)

    def _put_down(self) -> str:
        s = self.s
        if s.location:
            return f"move {s.holding} to {s.location}" if self._is_open(s.location) else f"open {s.location}"
        return f"go to {self.game.receptacles[0]}"

    def walkthrough(self, task: Task, expert: str = "oracle") -> list[str]:
        """An expert's actions from the start of ``task`` to a win (plays a private copy of the env).
        expert: ``oracle`` (:meth:`expert_action`) or ``search`` (:meth:`search_action`)."""
        if expert not in ("oracle", "search"):
            raise ValueError(f"walkthrough: expert must be 'oracle' or 'search', got {expert!r}")
        env = HouseholdEnv()
        game_options = tuple((k, v) for k, v in task.options if k != "step_delay_s")
        env.reset(dataclasses.replace(task, horizon=10_000, options=game_options))
        act = env.expert_action if expert == "oracle" else env.search_action
        actions = []
        while not env.done:
            a = act()
            actions.append(a)
            env.step(a)
        return actions


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


__all__ = ["HouseholdEnv", "household_tasks", "generate_game", "Game", "TASK_TYPES", "SPLITS", "RECEPTACLES",
           "N_SEEN_LAYOUTS", "N_UNSEEN_LAYOUTS", "UNSEEN_TYPES", "MIN_RECEPTACLES", "household_words"]
