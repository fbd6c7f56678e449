"""ScienceWorld for the learning testbed: the real engine's transitions, cached, over a restricted action set.

The tabular testbed (``experiments/credit_testbed.py``) cannot learn on ScienceWorld as the engine offers it: a
step costs 0.1-0.5 s (the valid list), a run ~35 min for 4,000 episodes of ~10 steps, and its prior (logit 2 on
the expert's action) among 300-3,800 listed actions gives that action 0.2-2.4% a step, so it almost never wins
(``notes/milestone_truth.md``). This world keeps the engine's outcomes and restricts the choice:

- **Restricted action set (a stated simplification, not ScienceWorld's own action space)**: in every state the
  admissible actions are the gold expert's action (``ScienceWorldEnv.expert_action``: the engine's gold sequence,
  walking back after a detour) and :data:`DISTRACTORS` other actions of the engine's valid list, drawn by a hash
  of (task, state) (:func:`candidates`): the same for every method and seed, so methods stay paired. A text that
  is none of them is invalid (the engine's "No known action matches that input."), a no-op, as the real engine
  answers an unknown action (checked by :func:`check_transitions`).
- **Cached transitions**: a state is the engine's visible state and the expert's progress (:func:`fingerprint`:
  the free look at the room, the inventory, the score, the completed subgoals, the tracker's context line, the
  gold expert's place in its sequence and its room); an edge (state, action) holds
  what the engine answered (observation, reward, won / lost, milestone, score, the tracker's fields) and the state
  it reached. Edges and states are made by the engine on first visit (the world restarts a live engine and
  replays the state's witness path, quietly where the expert's place after it is known: kept on the state's record
  or found from its key; then steps), and read from the cache afterwards. A state no replay reaches (the engine is
  not deterministic everywhere) ends the episode there, truncated (:data:`UNREACHABLE`, counted in the cache's
  ``divergences``). Two histories that reach one visible state share
  it: a hidden difference (an object left in another room) is not seen. :func:`check_transitions` measures that
  (replays histories in fresh engines and compares); ``notes/milestone_truth.md`` has the figures.
- **The thermal key** (a cache made with ``fingerprint="thermal"``: the long cell's): the state is also the
  engine's whole world (:func:`world_digest` of its object tree, temperatures to the whole degree). On the thermal
  task types (boil, melt, freeze) a substance heats or cools with every tick while nothing visible changes, and
  the visible key merged states the engine plays apart (an episode of cached edges the engine would have ended:
  ``notes/milestone_truth.md``, "Not done"). More states, more engine steps; the short cells keep the visible key.

The state keys the credit sees are the real world's (observation, the tracker's context line, the templates and
objects in view: ``tracked+actions`` as ``ScienceWorldEnv`` keys them); the policy's table sees the candidates.

    python experiments/sw_world.py check find-non-living-thing lifespan-longest-lived   # transitions deterministic?
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import json
import random
import re
import sys
import time
from pathlib import Path

from milegpo.envs.base import EnvError, Task, TextEnv
from milegpo.envs.scienceworld.actions import UNKNOWN_ACTION, sorted_listing
from milegpo.envs.scienceworld.tracker import ScienceWorldTracker
from milegpo.files import atomic_write

#: other listed actions beside the expert's in every state (the same for every method and seed)
DISTRACTORS = 3
#: how a cache keys its states: what is visible and the expert's progress (:func:`fingerprint`), or that and the
#: engine's whole world state (:func:`world_digest`: temperatures included, for the thermal task types)
FINGERPRINTS = ("visible", "thermal")
#: how many times the cached world replays a history to reach a state before it takes what the engine gives
SYNC_TRIES = 3
#: the kinds of witness replay a TransitionCache counts (``TransitionCache.replays``)
REPLAY_KINDS = ("quiet", "matched", "stepped", "actions")
#: the answer (and the state) of an action in a state the engine cannot be brought to (``CachedScienceWorld._sync``):
#: the episode ends there, truncated
UNREACHABLE = "(the engine cannot reach this state: the episode ends here)"
#: the fields of an edge (what the engine answered to an action in a state), besides its target state ``to``
EDGE_FIELDS = ("obs", "reward", "won", "lost", "milestone", "score", "engine_score", "location", "inventory")


def task_key(task: Task) -> str:
    """What a cache is kept per: task type, variation, simplifications, reward."""
    return "|".join((task.task_type, str(task.seed), str(task.option("simplifications", "")),
                     str(task.option("reward", "win"))))


def fingerprint(look: str, inventory: str, engine_score: int, subgoals, context: str, expert: str = "") -> str:
    """The state: what is visible (the room's look, listings sorted: the engine's order changes from load to load;
    the inventory, the score, the subgoals done, the tracker's context line) and the gold expert's progress
    (``expert``: its place in the gold sequence and the room it is in), hashed. Without the expert's progress a
    gold step that changes nothing visible (``look around``, 1 in 10 gold steps) would lead back to the state it
    left, whose expert action is that step again: the expert would loop."""
    text = "\x1e".join((sorted_listing(look), inventory, str(engine_score), "\x1f".join(subgoals), context, expert))
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def world_digest(tree: dict) -> str:
    """The engine's whole world state (``getObjectTree``: every object, where it is, its properties), as a digest
    that two loads of one variation agree on: the object ids dropped (they change from load to load), each
    object's contents sorted, a temperature rounded to whole degrees (the engine's heat exchange differs in the
    fourth decimal from one load to the next: measured on boil, melt, freeze and change-the-state-of-matter-of).
    What the visible fingerprint misses on the thermal task types: a substance heating on a stove changes
    nothing visible until it changes state, and the engine's outcome depends on it."""
    def canon(node: dict) -> str:
        props = {k: v for k, v in node.items() if k not in ("uuid", "contents")}
        material = props.get("propMaterial")
        if material and material.get("temperatureC") is not None:
            props["propMaterial"] = {**material, "temperatureC": round(float(material["temperatureC"]))}
        wired = props.get("propElectricalConnection")
        if wired and wired.get("connectedTo"):  # what it is wired to, without the objects' ids
            props["propElectricalConnection"] = {**wired, "connectedTo": sorted(
                _OBJECT_ID.sub("#", json.dumps(c, sort_keys=True)) for c in wired["connectedTo"])}
        kids = sorted(canon(child) for child in (node.get("contents") or {}).values())
        return "(" + json.dumps(props, sort_keys=True) + "".join(kids) + ")"

    return hashlib.sha1(canon(tree).encode()).hexdigest()[:16]


_OBJECT_ID = re.compile(r"\d{3,}")  # an object's id (the engine numbers objects from the thousands)
_LISTED = re.compile(r"[,:.\n]\s*")  # what separates the things an answer lists


def _listed_alike(a, b) -> bool:
    """Two answers that list the same things in another order (the engine's listing order is not the same from one
    JVM to the next: the hallway's six doors come in several orders for one state)."""
    return isinstance(a, str) and isinstance(b, str) and sorted(_LISTED.split(a)) == sorted(_LISTED.split(b))


def _short(value, n: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= n else text[:n] + "..."


def candidates(task: Task, state: str, expert: str, listed, k: int = DISTRACTORS) -> list[str]:
    """The state's admissible actions: the expert's and ``k`` others of the engine's ``listed`` actions, drawn by a
    hash of (task, state), so every method and seed gets the same; sorted (the expert's place says nothing)."""
    others = sorted(set(listed) - {expert})
    rng = random.Random(int(hashlib.sha1(f"{task_key(task)}#{state}".encode()).hexdigest()[:12], 16))
    return sorted([expert] + rng.sample(others, min(k, len(others))))


class TransitionCache:
    """States and edges per task: ``roots[task] = edge`` (the reset), ``states[task][fp] = {"cands", "expert", "prompt",
    "path", "walk"}`` (``path``: the witness, the actions that first reached it; ``walk``: the expert's place after
    them, absent in states recorded before it was kept), ``edges[task][fp + "\\x1f" + action] = edge``; prompts
    (templates and objects in view) interned. ``misses`` counts the engine steps made, ``hits`` the edges read.
    ``fingerprint`` says how its states are keyed (:data:`FINGERPRINTS`): caches keyed differently cannot be merged."""

    def __init__(self, fingerprint: str = "visible") -> None:
        if fingerprint not in FINGERPRINTS:
            raise ValueError(f"fingerprint must be one of {list(FINGERPRINTS)}, got {fingerprint!r}")
        self.fingerprint = fingerprint
        self.roots: dict[str, dict] = {}
        self.states: dict[str, dict] = {}
        self.edges: dict[str, dict] = {}
        self.prompts: list[list[str]] = []
        self._prompt_ids: dict[tuple, int] = {}
        self.hits = self.misses = 0
        #: witness replays made (not saved): quietly (``quiet``: the valid list read at the end alone), of them
        #: ``matched`` with the expert's place found from the state's key (the record kept no walk), or step by step
        #: (``stepped``); the engine actions they played (``actions``)
        self.replays = dict.fromkeys(REPLAY_KINDS, 0)
        self.conflicts: list[str] = []
        #: witness replays that did not reach their state (saved: the engine was not deterministic there)
        self.divergences: list[str] = []

    def prompt_id(self, prompt) -> int:
        key = tuple(prompt)
        if key not in self._prompt_ids:
            self._prompt_ids[key] = len(self.prompts)
            self.prompts.append(list(prompt))
        return self._prompt_ids[key]

    def to_dict(self) -> dict:
        return {"fingerprint": self.fingerprint, "roots": self.roots, "states": self.states, "edges": self.edges,
                "prompts": self.prompts, "divergences": self.divergences}

    def save(self, path: Path) -> Path:
        """Write the cache (gzip JSON) at ``path``, whole or not at all (another process may be reading the folder)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path, "wb") as raw, gzip.open(raw, "wt") as f:
            json.dump(self.to_dict(), f, separators=(",", ":"))
        return path

    def merge(self, data: dict, where: str = "") -> None:
        """Add a saved cache's states and edges; an edge saved with another outcome is a conflict (kept: the
        first), listed in :attr:`conflicts` (the engine was not deterministic there, or a merge of states was wrong).
        A cache whose states are keyed otherwise is refused (its keys would never meet these)."""
        theirs = data.get("fingerprint", "visible")  # the caches saved before the thermal key: visible
        if theirs != self.fingerprint:
            raise ValueError(f"{where or 'the cache'} keys its states by the {theirs} fingerprint, this one by the "
                             f"{self.fingerprint}: keep their folders apart")
        remap = [self.prompt_id(p) for p in data["prompts"]]
        self.divergences += [d for d in data.get("divergences", []) if d not in self.divergences]
        for task, edge in data["roots"].items():
            self._add_edge(self.roots, task, edge, f"{where}: reset of {task}")
        for task, states in data["states"].items():
            mine = self.states.setdefault(task, {})
            for fp, s in states.items():
                kept = mine.setdefault(fp, {**s, "prompt": remap[s["prompt"]]})
                if "walk" in s and "walk" not in kept:  # a witness with its walk (replayed quietly): the two together
                    kept.update(path=s["path"], walk=s["walk"])
        for task, edges in data["edges"].items():
            mine = self.edges.setdefault(task, {})
            for key, edge in edges.items():
                self._add_edge(mine, key, edge, f"{where}: {task} {key.split(chr(31))[-1]!r}")

    def _add_edge(self, table: dict, key: str, edge: dict, what: str) -> None:
        old = table.setdefault(key, edge)
        if old is edge:
            return
        differ = [k for k in EDGE_FIELDS if old[k] != edge[k]]
        if differ:  # what differs, kept / dropped, so that a conflict can be looked into after the parts are gone
            order = all(_listed_alike(old[k], edge[k]) for k in differ)
            self.conflicts.append(what + (" (listing order only: " if order else " (") + "; ".join(
                f"{k}: {_short(old[k])} / {_short(edge[k])}" for k in differ) + ")")

    @classmethod
    def load(cls, paths, fingerprint: str | None = None) -> "TransitionCache":
        """The parts at ``paths`` merged; keyed by ``fingerprint`` (None: as the first part is; visible with no
        part); a part keyed otherwise is refused (ValueError)."""
        cache = None
        for path in paths:
            with gzip.open(path, "rt") as f:
                data = json.load(f)
            if cache is None:
                cache = cls(fingerprint or data.get("fingerprint", "visible"))
            cache.merge(data, str(path))
            del data  # before the next part is read (each part is a whole cache: 13.9 -> 9.8 GB with 3)
        return cache if cache is not None else cls(fingerprint or "visible")

    def sizes(self) -> dict:
        return {"tasks": len(self.roots), "states": sum(map(len, self.states.values())),
                "edges": sum(map(len, self.edges.values())), "prompts": len(self.prompts),
                "divergences": len(self.divergences)}


def expert_wins(cache: TransitionCache, steps: int = 200) -> dict:
    """How many of the cache's tasks the expert wins by the cached edges alone (its action in every state, from the
    reset; a state left out of the cache or a return to a state seen counts as not won)."""
    won = 0
    for task, root in cache.roots.items():
        states, edges, fp, seen = cache.states.get(task, {}), cache.edges.get(task, {}), root["to"], set()
        for _ in range(steps):
            state = states.get(fp)
            edge = edges.get(f"{fp}\x1f{state['expert']}") if state and state["expert"] else None
            if edge is None or fp in seen:
                break
            seen.add(fp)
            if edge["won"]:
                won += 1
                break
            fp = edge["to"]
    return {"won": won, "tasks": len(cache.roots)}


class CachedScienceWorld(TextEnv):
    """ScienceWorld over the restricted action set, replaying :class:`TransitionCache` (see the module docstring);
    the engine (a :class:`~milegpo.envs.scienceworld.ScienceWorldEnv`, made on first need) only for what the cache
    does not hold."""

    kind = "scienceworld"
    experts = {"oracle": "expert_action"}
    has_score = True
    step_in_workers = False

    def __init__(self, cache: TransitionCache | None = None, distractors: int = DISTRACTORS) -> None:
        super().__init__()
        self.cache = cache if cache is not None else TransitionCache()
        self.distractors = distractors
        self._real = None
        self._key = ""
        self._state = ""  # the fingerprint of the state the episode is in
        self._live_at: str | None = None  # the state the live engine is in (None: not known)
        self._live_path: list[str] = []  # the actions the live engine played since its reset
        self._history: list[str] = []  # the episode's own actions that moved it (offered ones), since its reset
        self._last: dict = {}  # the tracker's fields of the last edge

    # ------------------------------------------------------------------ the engine, when the cache has no answer
    def _engine(self):
        if self._real is None:
            from milegpo.envs.scienceworld import ScienceWorldEnv

            self._real = ScienceWorldEnv()
            self._real.expert("oracle")  # load gold paths with the task
        return self._real

    def _sync(self) -> bool:
        """Bring the live engine to the state the episode is in: nothing when it is there, else a reset and the
        state's witness path (the actions that first reached it): quietly where the expert's place after it is known
        (the record's ``walk``, or found from the state's key), else step by step, the expert asked before every
        action so that its gold cursor follows as it did; the walk kept on the record from then on. Not the
        episode's own actions: two histories that reach one state share it, and only the witness is known to reach
        exactly it. The engine is not deterministic everywhere (a text naming two objects is answered with the first
        option, and which is first changes from one reset to the next; a temperature can round the other way): a
        replay that ends elsewhere or ends the engine's episode is counted in ``cache.divergences`` and tried again,
        :data:`SYNC_TRIES` times in all. Ending elsewhere every time, the state's transitions are the engine's from
        where it is. Ending the episode every time (a divergence into a won or lost state: the engine cannot answer
        from there), the episode's own actions, which reached the state in this episode, are tried as often. False
        if those end it as well (the state is :data:`UNREACHABLE`: a cached edge on the way was made by an engine
        that had diverged, or the fingerprint merges engine states that differ in what it does not hold; seen on
        the long, thermal task types, where a text naming two substances is answered by the first option: the
        focus that a replay's engine fails on), counted in ``cache.divergences``."""
        if self._live_at == self._state:
            return True
        record = self.cache.states[self._key][self._state]
        path = record["path"]
        real, reached = self._reach(path, record.get("walk"))
        if reached and "walk" not in record:
            record["walk"] = real.walk_state()  # kept: no search for the expert's place next time
        if real.done:
            self.cache.divergences.append(f"{self._key}: replayed the episode's own {self._history}")
            real, _ = self._reach(self._history, None)
            if real.done:
                self.cache.divergences.append(
                    f"{self._key} {UNREACHABLE}: state {self._state!r}, neither its witness path {path} nor the "
                    f"episode's own actions {self._history} reach it without ending the engine's episode "
                    f"({SYNC_TRIES} tries each; the own actions end it after {len(self._live_path)})")
                return False
        self._live_at = self._state
        return True

    def _reach(self, actions: list[str], walk: dict | None):
        """The live engine after ``actions`` (:meth:`_replay`), tried up to :data:`SYNC_TRIES` times until it is in
        the episode's state with its episode going on; each miss counted in ``cache.divergences``. Returns the
        engine and whether it got there."""
        for _ in range(SYNC_TRIES):
            real = self._replay(actions, walk, self._state)
            if not real.done and self._live_fingerprint() == self._state:
                return real, True
            self.cache.divergences.append(f"{self._key} {'ended by the replay of' if real.done else 'after'} "
                                          f"{actions}")
        return real, False

    def _replay(self, actions: list[str], walk: dict | None = None, target: str | None = None):
        """The live engine reset to the task and played ``actions``, up to the end of its episode if one ends it
        first; returns the engine (``_live_path``: the actions it played). Quietly (:meth:`ScienceWorldEnv.replay`:
        the valid list read once, at the end) where the expert's place after them is known: ``walk`` (the state's
        record keeps it: :meth:`ScienceWorldEnv.walk_state` after the witness path) or found from the key of the
        state ``target`` they reach (:meth:`_place_expert`; records made before walks were kept); else (the
        episode's own actions, or no place matches the key) each action a step, the expert asked before each (its
        gold cursor follows as it did)."""
        real = self._engine()
        self._restart(real)
        if walk is not None or target is not None:
            played = real.replay(actions, walk)
            self._live_path = list(actions[:played])
            self.cache.replays["actions"] += played
            matched = walk is None and played == len(actions) and self._place_expert(target)
            if walk is not None or matched or played < len(actions):  # (ended early: as steps would have)
                self.cache.replays["quiet"] += 1
                self.cache.replays["matched"] += int(matched)
                return real
            self._restart(real)  # no place of the expert gives the key: step by step
        self.cache.replays["stepped"] += 1
        self._live_path = []
        for action in actions:
            if real.done:
                break
            real.expert_action()
            real.step(action)
            self._live_path.append(action)
        self.cache.replays["actions"] += len(self._live_path)
        return real

    def _restart(self, real) -> None:
        """The live engine at the start of the episode's task: its restart where it plays the task (a load without
        making the gold path again, ~14 times cheaper than its reset: :meth:`ScienceWorldEnv.restart`), else a reset."""
        task = self._unbounded(self.task)
        if getattr(real, "task", None) == task and getattr(real, "_gold", None) is not None:
            real.restart()
        else:
            real.reset(task)

    def _place_expert(self, target: str) -> bool:
        """Give the live engine the expert's place (gold cursor, gold path's room) whose key is ``target``'s
        visible part (every cursor of the gold sequence in every room of the doors seen: a few hundred hashes);
        False when none is (the replay did not reach the state)."""
        real = self._real
        want, seen, places = target.split(":")[0], self._visible_parts(), len(real.gold_sequence()) + 1
        for room in sorted(real._doors):
            for cursor in range(places):
                if fingerprint(*seen, f"{cursor}@{room}") == want:
                    real.set_walk({"cursor": cursor, "gold_room": room})
                    return True
        return False

    @staticmethod
    def _unbounded(task: Task) -> Task:
        """The task for the live engine: no horizon of its own (a witness path may be longer than the episode
        that reaches its state by another way; the cached world's episode keeps the task's horizon)."""
        return dataclasses.replace(task, horizon=10_000)

    def _visible_parts(self) -> tuple:
        """What :func:`fingerprint` keys of the live engine's state but the expert's place."""
        real = self._real
        return real._sim.look(), real.tracker.inventory, real.tracker.score, real._last_info["subgoals"], \
            real.tracker.context()

    def _live_fingerprint(self) -> str:
        """The live engine's state as the cache keys it (:attr:`TransitionCache.fingerprint`)."""
        real = self._real
        fp = fingerprint(*self._visible_parts(), f"{real._cursor}@{real._gold_room}")
        if self.cache.fingerprint == "thermal":
            try:
                tree = real._sim.getObjectTree()
            except Exception as e:  # noqa: BLE001 - py4j / a JVM that died
                raise EnvError(f"ScienceWorld's engine failed giving its object tree: {e}") from None
            fp = f"{fp}:{world_digest(tree)}"
        return fp

    def _state_of(self, edge: dict) -> str:
        """Record the state the live engine is in (its candidates: the expert's action asked now; its witness path:
        the live engine's actions) as ``edge``'s target; returns its fingerprint."""
        real = self._real
        fp = self._live_fingerprint()
        states = self.cache.states.setdefault(self._key, {})
        if fp not in states:
            prompt = self.cache.prompt_id(real._last_info["prompt_actions"])
            if real.done:
                states[fp] = {"expert": None, "cands": [], "prompt": prompt, "path": list(self._live_path)}
            else:
                walk = real.walk_state()  # before the expert is asked: it may step its cursor past needless actions
                expert = real.expert_action()
                # drawn by the visible part of the key: a state that differs in temperature alone offers the same
                # distractors (and the policy, which sees no temperature, the same choice)
                states[fp] = {"expert": expert, "cands": candidates(self.task, fp.split(":")[0], expert,
                                                                    real.admissible, self.distractors),
                              "prompt": prompt, "path": list(self._live_path), "walk": walk}
        edge["to"] = fp
        return fp

    @staticmethod
    def _edge(obs: str, reward: float, won: bool, info: dict) -> dict:
        return {"obs": obs, "reward": float(reward), "won": bool(won), "lost": bool(info.get("lost", False)),
                "milestone": bool(info.get("milestone", False)), "score": float(info["score"]),
                "engine_score": int(info["engine_score"]), "location": info.get("location", ""),
                "inventory": info.get("inventory", "")}

    # ------------------------------------------------------------------ protocol hooks
    def make_tracker(self):
        return ScienceWorldTracker()

    def _anchor_info(self, obs: str, admissible):
        """Keyed as ``ScienceWorldEnv`` keys (the templates and objects in view for the actions)."""
        prompt = self.cache.prompts[self.cache.states[self._key][self._state]["prompt"]]
        return super()._anchor_info(obs, prompt)

    def _reset(self, task: Task):
        self._key, self._live_at, self._history = task_key(task), None, []
        root = self.cache.roots.get(self._key)
        if root is None:
            self.cache.misses += 1
            real = self._engine()
            obs, _, info = real.reset(self._unbounded(task))
            root = self._edge(obs, 0.0, False, info)
            root.update(goal=info["goal"], game_id=info["game_id"])
            self.task = task  # _state_of draws the candidates by the task
            self._live_path = []
            self._live_at = self._state_of(root)
            self.cache.roots[self._key] = root
        else:
            self.cache.hits += 1
        self._state = root["to"]
        self._last = root
        info = {k: root[k] for k in ("score", "engine_score", "location", "inventory", "goal", "game_id")}
        return root["obs"], list(self.cache.states[self._key][self._state]["cands"]), {**info, "milestone": False}

    def _invalid(self, action: str) -> bool | None:
        return None

    def _step(self, action: str):
        here = self.cache.states[self._key][self._state]
        if action not in here["cands"]:  # not offered: the engine's answer to an unknown action, nothing changes
            info = {k: self._last[k] for k in ("score", "engine_score", "location", "inventory")}
            return UNKNOWN_ACTION, 0.0, False, list(here["cands"]), {**info, "invalid": True, "milestone": False}
        edges = self.cache.edges.setdefault(self._key, {})
        edge = edges.get(f"{self._state}\x1f{action}")
        if edge is None:
            self.cache.misses += 1
            if self._sync():
                real = self._engine()
                real.expert_action()  # the expert's cursor follows as in the witness's episode
                obs, reward, _, _, info = real.step(action)
                self._live_path.append(action)
                edge = self._edge(obs, reward, info["won"], info)
                self._live_at = self._state_of(edge)
            else:  # the engine cannot answer from this state: the episode ends here, truncated, as it will again
                edge = {**{k: self._last[k] for k in ("score", "engine_score", "location", "inventory")},
                        "obs": UNREACHABLE, "reward": 0.0, "won": False, "lost": False, "milestone": False,
                        "truncated": True, "to": UNREACHABLE}
                self.cache.states[self._key].setdefault(UNREACHABLE, {"expert": None, "cands": [],
                                                                      "prompt": here["prompt"], "path": []})
            edges[f"{self._state}\x1f{action}"] = edge
        else:
            self.cache.hits += 1  # the live engine stays where it is (_live_at)
        self._state = edge["to"]
        self._last = edge
        self._history.append(action)
        info = {k: edge[k] for k in ("score", "engine_score", "location", "inventory", "lost", "milestone")}
        info["invalid"] = edge["obs"].strip() == UNKNOWN_ACTION
        info["truncated"] = bool(edge.get("truncated", False))
        cands = self.cache.states[self._key][self._state]["cands"]
        return edge["obs"], edge["reward"], edge["won"], list(cands), info

    def expert_action(self) -> str | None:
        if self.done or self.task is None:
            return None
        return self.cache.states[self._key][self._state]["expert"]

    def close(self) -> None:
        if self._real is not None:
            self._real.close()
            self._real = None


# ------------------------------------------------------------------------------------------ determinism check
def _play(env, task: Task, actions) -> list[tuple]:
    """(observation, engine score, sorted look, inventory) after the reset and after every action of ``actions``."""
    obs, _, info = env.reset(task)
    out = [(obs, info["engine_score"], sorted_listing(env._sim.look()), info["inventory"])]
    for a in actions:
        if env.done:
            break
        obs, _, _, _, info = env.step(a)
        out.append((obs, info["engine_score"], sorted_listing(env._sim.look()), info["inventory"]))
    return out


def random_history(env, task: Task, steps: int, rng: random.Random, gold_share: float = 0.5) -> list[str]:
    """A history of ``steps`` actions: the gold expert's at rate ``gold_share``, else a listed action (uniform), and
    an unknown action now and then (``<invalid>``); played in ``env`` to make it."""
    env.expert("oracle")
    env.reset(task)
    actions = []
    for _ in range(steps):
        if env.done:
            break
        r = rng.random()
        a = env.expert_action() if r < gold_share else ("<invalid>" if r > 0.95 else rng.choice(env.admissible))
        actions.append(a)
        env.step(a)
    return actions


def check_transitions(task_types, histories: int = 2, steps: int = 12, seed: int = 0, say=print) -> dict:
    """Replay random histories of each task type (variation 0 and 1 of train, ``easy``) three times: in the engine
    that made them (right after, the task reloaded), in a fresh engine of another process, and in that engine again
    after loading other task types; and once with every unknown action left out. Returns per type the number of
    histories, steps and steps whose (observation, score, look, inventory) differed."""
    import multiprocessing
    from milegpo.envs.scienceworld import ScienceWorldEnv, scienceworld_tasks

    rng = random.Random(seed)
    made = []
    env = ScienceWorldEnv()
    for t in task_types:
        for v in range(histories):
            task = scienceworld_tasks("train", 1, start=v, task_type=t, simplifications="easy")[0]
            actions = random_history(env, task, steps, rng)
            made.append((task, actions, _play(env, task, actions)))
    env.close()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        fresh = pool.apply(_replay_all, ([(t, a) for t, a, _ in made],))
    out: dict = {}
    for (task, actions, first), (again, after_others, no_invalid) in zip(made, fresh):
        o = out.setdefault(task.task_type, {"histories": 0, "steps": 0, "differ_fresh": 0, "differ_used": 0,
                                            "differ_without_invalid": 0, "invalid_actions": 0})
        o["histories"] += 1
        o["steps"] += len(first)
        for name, other in (("fresh", again), ("used", after_others)):
            for i, (x, y) in enumerate(zip(first, other)):
                if x != y and len(o.setdefault("examples", [])) < 6:
                    differ = [(f, a, b) for f, a, b in zip(("observation", "score", "look", "inventory"), x, y)
                              if a != b]
                    o["examples"].append({"engine": name, "variation": task.seed, "step": i,
                                          "action": actions[i - 1] if i else "(reset)",
                                          "fields": [f for f, _, _ in differ],
                                          "first": [str(a)[:300] for _, a, _ in differ],
                                          "other": [str(b)[:300] for _, _, b in differ]})
        o["differ_fresh"] += sum(x != y for x, y in zip(first, again)) + abs(len(first) - len(again))
        o["differ_used"] += sum(x != y for x, y in zip(first, after_others)) + abs(len(first) - len(after_others))
        kept = [i for i, a in enumerate(actions) if a != "<invalid>"]
        o["invalid_actions"] += len(actions) - len(kept)
        # without the unknown actions: the states after the kept actions must be those of the full history
        o["differ_without_invalid"] += sum(first[i + 1][1:] != no_invalid[j + 1][1:] for j, i in enumerate(kept)
                                           if i + 1 < len(first) and j + 1 < len(no_invalid))
    say(json.dumps(out, indent=1))
    return out


def _replay_all(items):
    from milegpo.envs.scienceworld import ScienceWorldEnv, scienceworld_tasks

    env = ScienceWorldEnv()
    results = []
    for task, actions in items:
        again = _play(env, task, actions)
        for other in ("boil", "grow-plant"):  # load other types in this engine, then replay once more
            env.reset(scienceworld_tasks("train", 1, task_type=other)[0])
        after = _play(env, task, actions)
        no_invalid = _play(env, task, [a for a in actions if a != "<invalid>"])
        results.append((again, after, no_invalid))
    env.close()
    return results


#: the merged world cache of a folder (what the testbed reads with the parts a later run adds)
MERGED = "cache.json.gz"
#: where a merge appends its conflicting edges (what each part said), since it removes the parts
CONFLICTS = "conflicts.log"


def merge_folder(folder: Path, say=print) -> int:
    """Read every part of ``folder``, write them as one :data:`MERGED`, remove the others; 1 if two parts disagree
    on an edge (the engine answered one action in one keyed state otherwise: the first 20 conflicts are said, all of
    them appended to :data:`CONFLICTS` in the folder)."""
    parts = sorted(folder.glob("*.json.gz"))
    cache = TransitionCache.load(parts)
    cache.save(folder / MERGED)
    for part in parts:
        if part.name != MERGED:
            part.unlink()
    say(f"{folder / MERGED}: {len(parts)} parts, {json.dumps(cache.sizes())}, the expert wins "
        f"{json.dumps(expert_wins(cache))} by the cached edges, "
        f"{(folder / MERGED).stat().st_size / 1e6:.2f} MB, {len(cache.conflicts)} conflicting edges")
    for c in cache.conflicts[:20]:
        say(f"  conflict: {c}")
    if cache.conflicts:  # every one, with the merge's date: the parts that disagreed are gone after it
        with open(folder / CONFLICTS, "a") as f:
            f.write(f"# merge of {len(parts)} parts, {time.strftime('%Y-%m-%d %H:%M:%S')}: "
                    f"{len(cache.conflicts)} conflicting edges (kept / dropped)\n")
            f.writelines(c + "\n" for c in cache.conflicts)
        say(f"  all of them: {folder / CONFLICTS}")
    return 1 if cache.conflicts else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="are the engine's transitions deterministic for these task types")
    c.add_argument("task_types", nargs="+")
    c.add_argument("--histories", type=int, default=2)
    c.add_argument("--steps", type=int, default=12)
    c.add_argument("--out", default=None, help="write the figures here (JSON)")
    m = sub.add_parser("merge", help="combine a world cache folder's parts into one file (the parts removed)")
    m.add_argument("folder")
    args = p.parse_args(argv)
    if args.command == "merge":
        return merge_folder(Path(args.folder))
    t0 = time.perf_counter()
    out = check_transitions(args.task_types, args.histories, args.steps)
    print(f"{time.perf_counter() - t0:.0f} s")
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
