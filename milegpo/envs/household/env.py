"""The household environment: plays a generated :class:`~milegpo.envs.household.generator.Game`.

ALFWorld's commands: ``go to R``, ``open R``, ``close R``, ``take O from R``, ``move O to R``,
``clean O with R``, ``heat O with R``, ``cool O with R``, ``use desklamp N``, ``examine X``, ``inventory``,
``look``; one object in hand. Closed receptacles show their contents only once opened. The admissible
actions are listed after every step; any other action answers "Nothing happens." and changes nothing;
reward 10 on the winning step, else 0; ``info["milestone"]`` on a step that completes one of the task's subgoals
(:mod:`milegpo.envs.household.subgoals`: found, took, processed, placed the object). Two experts re-plan from the current state, so they also finish
episodes that started badly: the oracle (:meth:`HouseholdEnv.expert_action`, knows every object's place)
and the searching expert (:meth:`HouseholdEnv.search_action`, acts on what it has observed).
"""

from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import dataclass, field

from ..base import NOTHING_HAPPENS, EnvError, Task, TextEnv
from .subgoals import HouseholdGoal, HouseholdSubgoals
from .tracker import HouseholdTracker
from .generator import RECEPTACLES, ROLE_OF_PROP, ROOMS, Game, generate_game, type_of


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
    """The embedded ALFWorld-like world (see :mod:`milegpo.envs.household`). Task fields used: seed, split, task_type.

    Task option ``("step_delay_s", x)`` makes every step sleep x seconds: a stand-in for a slow
    engine in pool tests and benchmarks (the game is unchanged).
    """

    kind = "household"
    #: a step costs ~35 us of CPU, a round trip to a pool worker more (~80 us in the caller alone; measured by
    #: bench/test_env_pool.py::test_step_vs_round_trip): num_env_workers="auto" steps this world in-process
    step_in_workers = False
    experts = {"search": "search_action", "oracle": "expert_action"}

    def __init__(self) -> None:
        super().__init__()
        self.game: Game | None = None
        self.s = _State()
        self._delay = 0.0
        self._seen: dict[str, list[str]] = {}  # what an agent has observed: receptacle -> contents seen there

    # ------------------------------------------------------------------ helpers
    def _is_open(self, r: str) -> bool:
        return not RECEPTACLES[type_of(r)][0] or r in self.s.opened

    def _where(self, obj: str) -> str:
        for r, objs in self.s.contents.items():
            if obj in objs:
                return r
        return ""

    def _describe(self, r: str) -> str:
        prep = RECEPTACLES[type_of(r)][1]
        if not self._is_open(r):
            return f"The {r} is closed."
        items = _listing(self.s.contents[r])
        if RECEPTACLES[type_of(r)][0]:
            return f"The {r} is open. In it, you see {items}."
        return f"{'On' if prep == 'on' else 'In'} the {r}, you see {items}."

    def _room_view(self) -> str:
        return f"You are in the middle of a room. Looking quickly around you, you see {_listing(self.game.receptacles)}."

    def _good(self, obj: str) -> bool:
        g = self.game
        return type_of(obj) == g.target_type and (not g.prop or g.prop in self.s.props.get(obj, ()))

    def _won(self) -> bool:
        g, s = self.game, self.s
        if g.task_type == "look_at_obj_in_light":
            return bool(s.holding) and type_of(s.holding) == g.target_type and s.lamp_on and \
                bool(s.location) and g.lamp in s.contents[s.location]
        need = 2 if g.task_type == "pick_two_obj_and_place" else 1
        return any(type_of(r) == g.dest_type and sum(self._good(o) for o in objs) >= need
                   for r, objs in s.contents.items())

    def admissible_actions(self) -> list[str]:
        g, s = self.game, self.s
        acts = [f"go to {r}" for r in g.receptacles if r != s.location]
        acts += ["inventory", "look"]
        if s.holding:
            acts.append(f"examine {s.holding}")
        r = s.location
        if r:
            rt = type_of(r)
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
    def make_tracker(self):
        """What the agent holds, has processed and moved (:class:`~milegpo.envs.household.tracker.HouseholdTracker`)."""
        return HouseholdTracker()

    def _reset(self, task: Task):
        if task.seed is None:
            raise EnvError(f"household task {task.task_id!r} has no seed")
        self._delay = float(task.option("step_delay_s", 0.0))
        self.game = generate_game(task.split, int(task.seed), task.task_type, int(task.option("max_receptacles", 0)))
        self.s = _State(contents=copy.deepcopy(self.game.contents))
        self._seen = {}
        self._subgoals = HouseholdSubgoals(HouseholdGoal(self.game.task_type, self.game.target_type,
                                                         self.game.dest_type))
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
        return obs, (10.0 if won else 0.0), won, self.admissible_actions(), {
            "milestone": self._subgoals.update(action, obs, won)}

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
        if s.holding and type_of(s.holding) != g.target_type:
            return self._put_down()
        if g.task_type == "look_at_obj_in_light":
            if not s.holding:
                return fetch(lambda o: type_of(o) == g.target_type)
            lamp = (lambda o: o == g.lamp)
            if search and not self._known(lamp):
                return self._search(lamp, take=False)
            lamp_at = next(r for r, objs in s.contents.items() if g.lamp in objs)
            return f"go to {lamp_at}" if s.location != lamp_at else f"use {g.lamp}"
        dests = [r for r in g.receptacles if type_of(r) == g.dest_type]
        two = g.task_type == "pick_two_obj_and_place"
        target = max(dests, key=lambda r: sum(self._good(o) for o in s.contents[r])) if two else dests[0]
        if s.holding:
            if g.prop and not self._good(s.holding):
                role = ROLE_OF_PROP[g.prop]
                app = next(r for r in g.receptacles if RECEPTACLES[type_of(r)][2] == role)
                return f"go to {app}" if s.location != app else f"{role} {s.holding} with {app}"
            if s.location != target:
                return f"go to {target}"
            return f"move {s.holding} to {target}" if self._is_open(target) else f"open {target}"
        placed = set(s.contents[target]) if two else {o for r in dests for o in s.contents[r]}
        return fetch(lambda o: type_of(o) == g.target_type and not (o in placed and self._good(o)))

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
        spec = ROOMS[g.room]
        # where such a thing may lie (the goal object's type comes from this room's object table)
        likely = spec.objects[g.target_type][0] if take else spec.lamp_on
        todo = [r for r in g.receptacles if r not in self._seen and r != here]
        todo = [r for r in todo if type_of(r) in likely] or todo
        if todo:
            return f"go to {todo[0]}"
        return self._fetch(wanted)  # everything looked at (objects moved since): fall back to the state

    def steps_to_win(self) -> int:
        """The fewest actions that win from the hidden state (:mod:`milegpo.envs.household.planner`)."""
        from .planner import steps_to_win

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
        act = env.expert(expert)
        actions = []
        while not env.done:
            a = act()
            actions.append(a)
            env.step(a)
        return actions


__all__ = ["HouseholdEnv"]
