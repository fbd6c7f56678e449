"""experiments/sw_world.py: the cached ScienceWorld of the learning testbed (restricted action set, replayed
transitions) on a hand-made cache (no engine), and once against the real engine (slow, needs the JVM)."""

import json
import runpy
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from milegpo.envs.base import Task, state_key

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"
sys.path.insert(0, str(EXPERIMENTS))

import sw_world  # noqa: E402

TASK = Task(task_id="scienceworld/find-plant/train/0/easy", env="scienceworld", seed=0, task_type="find-plant",
            split="train", horizon=6, options=(("simplifications", "easy"),))


def _edge(obs, to, reward=0.0, won=False, lost=False, milestone=False, score=0.0, location="kitchen"):
    return {"obs": obs, "to": to, "reward": reward, "won": won, "lost": lost, "milestone": milestone,
            "score": score, "engine_score": int(100 * score), "location": location, "inventory": "nothing"}


def hand_cache() -> sw_world.TransitionCache:
    """A world of two states: A (kitchen) -> B (greenhouse, a milestone) -> won; a wrong focus loses."""
    c = sw_world.TransitionCache()
    k = sw_world.task_key(TASK)
    pa, pb = c.prompt_id(["look around", "OBJ is one of: sink"]), c.prompt_id(["look around", "OBJ is one of: pot"])
    c.roots[k] = {**_edge("This room is called the kitchen.", "A"), "goal": "find a plant", "game_id": "g"}
    c.states[k] = {"A": {"expert": "teleport to greenhouse", "prompt": pa,
                         "cands": sorted(["teleport to greenhouse", "focus on sink", "open oven", "look around"])},
                   "B": {"expert": "focus on pea plant", "prompt": pb,
                         "cands": sorted(["focus on pea plant", "teleport to kitchen", "look around", "open pot"])},
                   "W": {"expert": None, "prompt": pb, "cands": []}, "L": {"expert": None, "prompt": pa, "cands": []}}
    c.edges[k] = {"A\x1fteleport to greenhouse": _edge("You teleport to the greenhouse.", "B", milestone=True,
                                                       score=0.5, location="greenhouse"),
                  "A\x1ffocus on sink": _edge("You focus on the sink.", "L", lost=True),
                  "A\x1fopen oven": _edge("The oven is now open.", "A"),
                  "A\x1flook around": _edge("This room is called the kitchen.", "A"),
                  "B\x1ffocus on pea plant": _edge("You focus on the pea plant.", "W", reward=10.0, won=True,
                                                   milestone=True, score=1.0, location="greenhouse"),
                  "B\x1fteleport to kitchen": _edge("You teleport to the kitchen.", "A"),
                  "B\x1flook around": _edge("This room is called the greenhouse.", "B", score=0.5,
                                            location="greenhouse"),
                  "B\x1fopen pot": _edge("The pot is now open.", "B", score=0.5, location="greenhouse")}
    return c


class NoEngine(sw_world.CachedScienceWorld):
    def _engine(self):
        raise AssertionError("the cached world called the engine for a transition the cache holds")


def test_the_cache_replays_what_it_holds_and_never_the_engine():
    env = NoEngine(hand_cache())
    obs, admissible, info = env.reset(TASK)
    assert obs == "This room is called the kitchen." and info["goal"] == "find a plant"
    assert admissible == sorted(["teleport to greenhouse", "focus on sink", "open oven", "look around"])
    assert env.expert("oracle")() == "teleport to greenhouse"
    # the state key is the real world's: observation, context line, the templates and objects in view
    ctx = "Location: kitchen. Inventory: nothing. Focus: none. Score: 0."
    assert info["state_context"] == ctx
    assert info["state_key"] == state_key(info["state_text"]) and "OBJ is one of: sink" in info["state_text"]
    obs, reward, term, trunc, info = env.step("open oven")
    assert (obs, reward, term, info["milestone"], info["invalid"]) == ("The oven is now open.", 0.0, False, False, False)
    obs, reward, term, trunc, info = env.step("teleport to greenhouse")
    assert obs == "You teleport to the greenhouse." and info["milestone"] and info["score"] == 0.5
    assert env.tracker.context() == "Location: greenhouse. Inventory: nothing. Focus: none. Score: 50."
    assert "OBJ is one of: pot" in info["state_text"]
    obs, reward, term, trunc, info = env.step("focus on pea plant")
    assert reward == 10.0 and info["won"] and term and env.cache.hits == 4 and env.cache.misses == 0


def test_an_action_outside_the_candidates_is_the_engines_unknown_action_and_changes_nothing():
    env = NoEngine(hand_cache())
    _, admissible, first = env.reset(TASK)
    obs, reward, _, _, info = env.step("<invalid>")
    assert obs == sw_world.UNKNOWN_ACTION and info["invalid"] and reward == 0.0
    assert info["admissible_actions"] == admissible and env.expert_action() == "teleport to greenhouse"
    assert info["state_context"] == first["state_context"]
    obs, _, term, _, info = env.step("focus on sink")  # a wrong focus: lost, not won
    assert term and info["lost"] and not info["won"]


def test_a_wrong_observation_in_the_cache_is_what_the_world_replays():
    """The world reads the cache and nothing else: an edit of an edge's observation is what the episode sees (so the
    comparison with the engine in the slow test below is what guards the cache's contents)."""
    cache = hand_cache()
    cache.edges[sw_world.task_key(TASK)]["A\x1fopen oven"]["obs"] = "The oven is now closed."
    env = NoEngine(cache)
    env.reset(TASK)
    assert env.step("open oven")[0] == "The oven is now closed."


def test_expert_wins_follows_the_cached_expert_and_sees_a_loop():
    cache = hand_cache()
    assert sw_world.expert_wins(cache) == {"won": 1, "tasks": 1}
    # the expert's action in B leads back to B (as "look around" did when states were keyed by what is visible)
    cache.edges[sw_world.task_key(TASK)]["B\x1ffocus on pea plant"] = _edge("You look around.", "B")
    assert sw_world.expert_wins(cache) == {"won": 0, "tasks": 1}


def test_candidates_are_the_experts_and_k_listed_ones_the_same_for_every_call():
    listed = [f"move thing {i} to box" for i in range(50)] + ["focus on pea plant"]
    a = sw_world.candidates(TASK, "fp1", "focus on pea plant", listed, k=3)
    assert "focus on pea plant" in a and len(a) == 4 and a == sorted(a) and set(a) <= set(listed)
    assert a == sw_world.candidates(TASK, "fp1", "focus on pea plant", list(reversed(listed)), k=3)
    others = {tuple(sw_world.candidates(TASK, f"fp{i}", "focus on pea plant", listed, k=3)) for i in range(20)}
    assert len(others) > 1  # drawn per state, not one fixed set
    # an expert's action the list spells otherwise is still offered
    assert "focus on the pea plant" in sw_world.candidates(TASK, "fp1", "focus on the pea plant", listed, k=3)


def test_save_load_merge_and_conflicts(tmp_path):
    c = hand_cache()
    path = c.save(tmp_path / "a.json.gz")
    loaded = sw_world.TransitionCache.load([path])
    assert loaded.to_dict() == c.to_dict() and not loaded.conflicts
    other = hand_cache()
    other.edges[sw_world.task_key(TASK)]["A\x1fopen oven"]["obs"] = "The oven is on fire."
    both = sw_world.TransitionCache.load([path, other.save(tmp_path / "b.json.gz")])
    assert len(both.conflicts) == 1 and "open oven" in both.conflicts[0]
    # the conflict says which field differs and both answers (kept / dropped)
    assert "obs: 'The oven is now open.' / 'The oven is on fire.'" in both.conflicts[0]
    assert both.edges[sw_world.task_key(TASK)]["A\x1fopen oven"]["obs"] == "The oven is now open."
    assert "listing order" not in both.conflicts[0]
    # the same things listed in another order (the engine's order varies between JVMs) are told apart
    doors = "You also see: A door to the kitchen (that is open), A door to the bedroom (that is open)."
    swapped = "You also see: A door to the bedroom (that is open), A door to the kitchen (that is open)."
    assert sw_world._listed_alike(doors, swapped) and not sw_world._listed_alike(doors, "You also see: a chair.")
    other.edges[sw_world.task_key(TASK)]["A\x1fopen oven"]["obs"] = "In it: a pot, a cup"
    c.edges[sw_world.task_key(TASK)]["A\x1fopen oven"]["obs"] = "In it: a cup, a pot"
    order = sw_world.TransitionCache()
    order.merge(c.to_dict(), "a")
    order.merge(other.to_dict(), "b")
    assert len(order.conflicts) == 1 and "(listing order only: obs:" in order.conflicts[0]
    # a folder's merge removes the parts, so it keeps every conflict in a log beside the merged cache
    folder = tmp_path / "world"
    folder.mkdir()
    for name in ("a.json.gz", "b.json.gz"):
        (tmp_path / name).rename(folder / name)
    said = []
    assert sw_world.merge_folder(folder, say=said.append) == 1
    assert sorted(p.name for p in folder.iterdir()) == sorted([sw_world.CONFLICTS, sw_world.MERGED])
    log = (folder / sw_world.CONFLICTS).read_text().splitlines()
    assert log[0].startswith("# merge of 2 parts") and len(log) == 2
    assert log[1] == f"{folder / 'b.json.gz'}: {both.conflicts[0].split(': ', 1)[1]}"
    assert any("1 conflicting edges" in line for line in said)


def test_the_testbed_plays_the_cached_world_every_method_on_the_same_candidates(tmp_path, monkeypatch):
    pytest.importorskip("scipy")
    mod = SimpleNamespace(**runpy.run_path(str(EXPERIMENTS / "credit_testbed.py"), run_name="credit_testbed"))
    hand_cache().save(tmp_path / "world" / "hand.json.gz")
    import milegpo.evidence.quality as quality

    monkeypatch.setattr(quality, "quality_tasks", lambda env, split, n, seed, horizon, options=None: [TASK] * n)
    monkeypatch.setattr(sw_world.CachedScienceWorld, "_engine", NoEngine._engine)
    settings = mod.settings_of(mod.parser().parse_args(
        ["--env", "scienceworld", "--world-cache", str(tmp_path / "world"), "--distractors", "3", "--tasks", "1",
         "--groups", "1", "--group-size", "4", "--iterations", "3", "--horizon", "6", "--eval-episodes", "2",
         "--policy-sees", "context"]), mod.parser())
    assert settings["world_cache"] == str(tmp_path / "world") and settings["distractors"] == 3
    tables = {}
    for method in ("graphgpo", "milegpo-full"):
        record = mod.run(0, method, settings)
        assert len(record["curve"]) == 3 and record["curve"][0]["success"] > 0
        work = record["world"]  # the run's own share of the process's cached world: all of it read from the cache
        assert work["hits"] > 0 and set(work.values()) - {work["hits"]} == {0}
        tables[method] = record
    # paired: the first iteration (before any update) is the same episode stream for both methods
    assert json.dumps(tables["graphgpo"]["curve"][0]) == json.dumps(tables["milegpo-full"]["curve"][0])
    assert "RESTRICTED action set" in mod.table([tables["graphgpo"], tables["milegpo-full"]], settings)


def test_the_testbed_refuses_a_world_cache_for_another_world(capsys):
    mod = SimpleNamespace(**runpy.run_path(str(EXPERIMENTS / "credit_testbed.py"), run_name="credit_testbed"))
    p = mod.parser()
    with pytest.raises(SystemExit) as e:
        mod.settings_of(p.parse_args(["--env", "household", "--world-cache", "x"]), p)
    assert e.value.code == 2 and "--world-cache is ScienceWorld's" in capsys.readouterr().err


def _engine_or_skip():
    pytest.importorskip("scienceworld")
    from milegpo.envs.scienceworld.tasks import check_runtime

    try:
        check_runtime()
    except Exception as e:  # noqa: BLE001 - no Java here
        pytest.skip(str(e))


@pytest.mark.slow
def test_the_expert_wins_through_the_cached_world_and_its_replay():
    """The gold expert alone wins find-non-living-thing through the cached world (its gold path has a ``look around``,
    which changes nothing visible: keyed by what is visible alone, the state after it was the state before it and
    the expert looped on it), and the cache alone replays the win."""
    _engine_or_skip()
    from milegpo.envs.scienceworld import scienceworld_tasks

    task = scienceworld_tasks("train", 1, start=0, task_type="find-non-living-thing", horizon=15,
                              simplifications="easy")[0]
    made = sw_world.CachedScienceWorld()
    made.reset(task)
    while not made.done:
        made.step(made.expert_action())
    made.close()
    assert made.won and made.steps <= 8
    again = NoEngine(made.cache)
    again.reset(task)
    while not again.done:
        again.step(again.expert_action())
    assert again.won and again.steps == made.steps and sw_world.expert_wins(made.cache) == {"won": 1, "tasks": 1}


@pytest.mark.slow
def test_the_cached_world_replays_the_engines_observations():
    """Engine play through the cached world (cache empty: every step is the engine's), then the same actions from
    the cache alone and directly through ScienceWorldEnv: observations, rewards, keys and candidates equal."""
    _engine_or_skip()
    from milegpo.envs.scienceworld import ScienceWorldEnv, scienceworld_tasks

    task = scienceworld_tasks("train", 1, start=0, task_type="lifespan-longest-lived", horizon=8,
                              simplifications="easy")[0]
    rng = np.random.default_rng(0)
    made = sw_world.CachedScienceWorld()
    obs, cands, info = made.reset(task)
    played, seen = [], [(obs, info["state_key"], tuple(cands))]
    while not made.done:
        a = cands[int(rng.integers(len(cands)))] if rng.random() < 0.4 else made.expert_action()
        obs, reward, _, _, info = made.step(a)
        cands = info["admissible_actions"]
        played.append(a)
        seen.append((obs, info["state_key"], tuple(cands), reward, info["milestone"]))
    made.close()
    assert made.cache.misses >= len(played) and made.cache.hits == 0
    again = NoEngine(made.cache)
    obs, cands, info = again.reset(task)
    replay = [(obs, info["state_key"], tuple(cands))]
    for a in played:
        obs, reward, _, _, info = again.step(a)
        replay.append((obs, info["state_key"], tuple(info["admissible_actions"]), reward, info["milestone"]))
    assert replay == seen
    real = ScienceWorldEnv()
    try:
        obs, _, info = real.reset(task)
        direct = [(obs, info["state_key"])]
        for a in played:
            obs, reward, _, _, info = real.step(a)
            direct.append((obs, info["state_key"]))
    finally:
        real.close()
    assert direct == [s[:2] for s in seen]


@pytest.mark.slow
def test_a_witness_without_its_walk_is_replayed_quietly_the_experts_place_found_from_the_key():
    """States recorded by play through the cached world, their walks then dropped (an older cache's records): the
    live engine brought to each by its witness quietly, the expert's place found from the state's key; the state
    reached (its key), the same expert action, the walk kept on the record."""
    _engine_or_skip()
    from milegpo.envs.scienceworld import scienceworld_tasks

    task = scienceworld_tasks("train", 1, start=0, task_type="find-non-living-thing", horizon=10,
                              simplifications="easy")[0]
    env = sw_world.CachedScienceWorld()
    rng = np.random.default_rng(1)
    try:
        for _ in range(4):
            _, cands, _ = env.reset(task)
            while not env.done:
                env.step(cands[int(rng.integers(len(cands)))] if rng.random() < 0.3 else env.expert_action())
                cands = env.admissible
        states = env.cache.states[sw_world.task_key(task)]
        deep = [fp for fp, rec in states.items() if rec["expert"] and len(rec["path"]) >= 3]
        assert len(deep) >= 3
        for fp in deep:
            states[fp].pop("walk")
        env.reset(task)
        for fp in deep:
            env._state, env._live_at = fp, None
            env._sync()
            assert env._live_fingerprint() == fp and env._real.expert_action() == states[fp]["expert"]
            assert states[fp]["walk"] == {**env._real.walk_state(), "cursor": states[fp]["walk"]["cursor"]}
        assert env.cache.replays["matched"] == len(deep) and env.cache.replays["stepped"] == 0
    finally:
        env.close()


@pytest.mark.slow
@pytest.mark.parametrize("task_type", ["boil", "melt"])
def test_a_restart_is_the_reset_of_the_loaded_task(task_type):
    """ScienceWorldEnv.restart (the task loaded again without making its gold path: what the cached world's replays
    start from) gives the world reset gives: the expert's walk from each, the same observations, keys, whole engine
    states (world_digest: temperatures included) and expert actions; the gold path kept."""
    _engine_or_skip()
    from milegpo.envs.scienceworld import ScienceWorldEnv, scienceworld_tasks

    task = scienceworld_tasks("train", 1, start=0, task_type=task_type, simplifications="easy", horizon=60)[0]
    env = ScienceWorldEnv()
    env.expert("oracle")
    try:
        walks = []
        for start in ("reset", "restart", "restart", "reset"):
            first = env.reset(task) if start == "reset" else env.restart()
            gold = env._gold
            seen = [(first[0], first[2]["state_key"], sw_world.world_digest(env._sim.getObjectTree()))]
            for _ in range(14):
                action = env.expert_action()
                obs, _, _, _, info = env.step(action)
                seen.append((action, obs, info["state_key"], sw_world.world_digest(env._sim.getObjectTree())))
            walks.append(seen)
            assert env._gold is gold
        assert walks[1] == walks[0] and walks[2] == walks[0] and walks[3] == walks[0]
    finally:
        env.close()


class EndingEngine:
    """A stand-in for the live engine: replaying one of the action sequences of ``ends`` ends its episode (a
    witness path whose replay diverged into a won or lost state), any other sequence does not."""

    def __init__(self, ends, first=None):
        self.ends, self.replays = {tuple(e) for e in ends}, []
        self.first = first  # only the first ``first`` replays end on ``ends`` (None: all): not deterministic
        self.place = True  # the cached world finds the expert's place after a quiet replay (World._place_expert)

    @property
    def done(self):
        return tuple(self.replays[-1]) in self.ends and (self.first is None or len(self.replays) <= self.first)

    def reset(self, task):
        self.replays.append([])

    def expert_action(self):
        return "teleport to greenhouse"

    def step(self, action):
        assert not self.done, "the cached world stepped an engine whose episode is over"
        self.replays[-1].append(action)
        return "The pot is now open.", 0.0, False, False, {"won": False, "lost": False, "milestone": False,
                                                          "score": 0.5, "engine_score": 50, "location": "greenhouse",
                                                          "inventory": "nothing"}

    def walk_state(self):
        return {"cursor": len(self.replays[-1]), "gold_room": "greenhouse", "doors": {}, "focus": "none"}

    def replay(self, actions, walk=None):
        played = 0
        for action in actions:
            if self.done:
                break
            self.replays[-1].append(action)
            played += 1
        return played


def _engine_world(ends, first=None):
    """The hand cache without the edge (B, open pot), B's witness path through the oven; an engine that ends on
    ``ends`` (its first ``first`` replays)."""
    cache = hand_cache()
    key = sw_world.task_key(TASK)
    cache.states[key]["B"]["path"] = ["open oven", "teleport to greenhouse"]
    del cache.edges[key]["B\x1fopen pot"]
    engine = EndingEngine(ends, first)

    class World(sw_world.CachedScienceWorld):
        def _engine(self):
            return engine

        def _live_fingerprint(self):
            return self._state

        def _state_of(self, edge):
            edge["to"] = "B"
            return "B"

        def _place_expert(self, target):
            return self._engine().place

    return World(cache), engine


def test_a_witness_replay_that_ends_the_engines_episode_is_replaced_by_the_episodes_own_actions():
    env, engine = _engine_world(ends=[["open oven", "teleport to greenhouse"]])
    env.reset(TASK)
    env.step("look around")  # offered, in the cache: the episode's own history, the engine untouched
    env.step("teleport to greenhouse")
    obs, _, term, _, info = env.step("open pot")  # not in the cache: the engine, brought to B
    assert obs == "The pot is now open." and not term and engine.replays == [
        ["open oven", "teleport to greenhouse"]] * sw_world.SYNC_TRIES + [  # the witness: every replay ended it
        ["look around", "teleport to greenhouse", "open pot"]]  # the episode's own actions, then the new one
    key = sw_world.task_key(TASK)
    assert env.cache.divergences == [f"{key} ended by the replay of ['open oven', 'teleport to greenhouse']"] * 3 + [
        f"{key}: replayed the episode's own ['look around', 'teleport to greenhouse']"]
    env.step("<invalid>")  # not offered: no move, not in the history
    assert env._history == ["look around", "teleport to greenhouse", "open pot"]


def test_a_state_no_replay_reaches_without_ending_ends_the_episode_there_truncated():
    """Every replay of both histories ends the engine's episode, the episode's own before its last action (the
    engine is not stepped once it has ended): the state is unreachable; the episode ends there, truncated (not won,
    not lost), counted, and the cache answers so from then on without the engine."""
    env, engine = _engine_world(ends=[["open oven", "teleport to greenhouse"], ["look around"]])
    env.reset(TASK)
    env.step("look around")
    env.step("teleport to greenhouse")
    obs, reward, term, trunc, info = env.step("open pot")
    assert (obs, reward, term, trunc) == (sw_world.UNREACHABLE, 0.0, False, True) and env.done and not env.won
    assert info["score"] == 0.5 and not info["lost"] and not info["milestone"] and info["admissible_actions"] == []
    assert engine.replays == [["open oven", "teleport to greenhouse"]] * 3 + [["look around"]] * 3
    assert env.cache.divergences[-1].startswith(f"{sw_world.task_key(TASK)} {sw_world.UNREACHABLE}: state 'B'")
    env.reset(TASK)
    env.step("teleport to greenhouse")
    assert env.step("open pot")[:4] == (sw_world.UNREACHABLE, 0.0, False, True) and len(engine.replays) == 6


def test_a_replay_that_misses_its_state_is_tried_again():
    """The engine ends the witness's first replay only (a text whose first option changed with the reset): the
    second reaches the state, and the world goes on from there; the miss counted."""
    env, engine = _engine_world(ends=[["open oven", "teleport to greenhouse"]], first=1)
    env.reset(TASK)
    env.step("teleport to greenhouse")
    obs, *_ = env.step("open pot")
    assert obs == "The pot is now open." and engine.replays == [["open oven", "teleport to greenhouse"],
                                                                 ["open oven", "teleport to greenhouse", "open pot"]]
    assert env.cache.divergences == [f"{sw_world.task_key(TASK)} ended by the replay of ['open oven', "
                                     "'teleport to greenhouse']"]


# ------------------------------------------------------------------ the thermal key (the long, thermal task types)
class QuietEngine(EndingEngine):
    """The stand-in engine with a quiet replay: it records what it was asked to replay, and with which walk."""

    def __init__(self):
        super().__init__(ends=[])
        self.quiet = []

    def replay(self, actions, walk=None):
        self.quiet.append((list(actions), walk))
        return super().replay(actions, walk)


@pytest.mark.parametrize("kept, place", [(True, None), (False, True), (False, False)])
def test_a_witness_is_replayed_quietly_where_the_experts_place_is_known(kept, place):
    """The witness of B replayed to answer (B, open pot): quietly (the engine's replay, no step or expert question
    per action) with the walk B's record keeps, or without one (a record of an older cache) where the expert's
    place is found from B's key; step by step where it is not. Then B's record keeps the walk the engine is in:
    the next replay of B takes it."""
    walk = {"cursor": 3, "gold_room": "greenhouse", "doors": {"kitchen": {"greenhouse": True}}, "focus": "none"}
    witness = ["open oven", "teleport to greenhouse"]
    env, _ = _engine_world(ends=[])
    engine = QuietEngine()
    engine.place = place
    env._engine = lambda: engine
    record = env.cache.states[sw_world.task_key(TASK)]["B"]
    if kept:
        record["walk"] = walk
    env.reset(TASK)
    env.step("teleport to greenhouse")
    obs, *_ = env.step("open pot")
    assert obs == "The pot is now open." and env._live_path == witness + ["open pot"]
    assert engine.quiet == [(witness, walk if kept else None)]  # tried quietly in every case
    assert engine.replays == [witness + ["open pot"]] if kept or place else [witness, witness + ["open pot"]]
    assert env.cache.replays == {"quiet": int(kept or place), "matched": int(bool(place)),
                                 "stepped": int(not (kept or place)), "actions": 2 * (1 + (not (kept or place)))}
    kept_walk = walk if kept else {"cursor": 2, "gold_room": "greenhouse", "doors": {}, "focus": "none"}
    assert record["walk"] == kept_walk
    del env.cache.edges[sw_world.task_key(TASK)]["B\x1flook around"]
    env.reset(TASK)
    env.step("teleport to greenhouse")
    env.step("look around")  # B again, the engine elsewhere (after open pot): replayed with the kept walk
    assert engine.quiet[-1] == (witness, kept_walk) and engine.replays[-1] == witness + ["look around"]


def test_a_merge_keeps_the_witness_that_has_a_walk():
    """Two parts hold state B, one with a witness and its walk: the merge keeps that witness and its walk together,
    whichever part came first; a state both parts keep walks of keeps the first's."""
    key = sw_world.task_key(TASK)
    old, new = hand_cache(), hand_cache()
    old.states[key]["B"]["path"] = ["open oven", "teleport to greenhouse"]
    new.states[key]["B"].update(path=["teleport to greenhouse"], walk={"cursor": 1, "gold_room": "greenhouse",
                                                                       "doors": {}, "focus": "none"})
    for first, second in ((old, new), (new, old)):
        merged = sw_world.TransitionCache()
        merged.merge(json.loads(json.dumps(first.to_dict())))
        merged.merge(json.loads(json.dumps(second.to_dict())))
        b = merged.states[key]["B"]
        assert b["path"] == ["teleport to greenhouse"] and b["walk"]["cursor"] == 1 and not merged.conflicts
    other = hand_cache()
    other.states[key]["B"].update(path=["look around", "teleport to greenhouse"], walk={"cursor": 2})
    merged = sw_world.TransitionCache()
    merged.merge(json.loads(json.dumps(new.to_dict())))
    merged.merge(json.loads(json.dumps(other.to_dict())))
    assert merged.states[key]["B"]["walk"]["cursor"] == 1


def _tree(pot_id="101", water_id="102", pot_temp=10.00012, order=("pot", "oven"), wired=("terminal 1-201",)):
    """A small object tree as the engine gives it (``getObjectTree``): ids in the contents' keys and fields."""
    pot = {"uuid": pot_id, "name": "pot", "propMaterial": {"substanceName": "metal", "temperatureC": pot_temp},
           "propElectricalConnection": None,
           "contents": {f"water-{water_id}": {"uuid": water_id, "name": "water", "contents": {},
                                              "propMaterial": {"substanceName": "water", "temperatureC": pot_temp}}}}
    oven = {"uuid": "103", "name": "oven", "propMaterial": None, "contents": {},
            "propElectricalConnection": {"connectedTo": list(wired)}}
    kids = {"pot": (f"pot-{pot_id}", pot), "oven": ("oven-103", oven)}
    return {"uuid": "100", "name": "kitchen", "propMaterial": None,
            "contents": dict(kids[name] for name in order)}


def test_the_world_digest_ignores_ids_and_order_and_sees_a_temperature():
    base = sw_world.world_digest(_tree())
    # another load: other ids, other order, the fourth decimal of a temperature (the engine's heat exchange)
    assert sw_world.world_digest(_tree(pot_id="9101", water_id="9102", pot_temp=10.0003, order=("oven", "pot"),
                                       wired=("terminal 1-9201",))) == base
    assert sw_world.world_digest(_tree(pot_temp=12.0)) != base  # heated by two degrees: another state
    assert sw_world.world_digest(_tree(wired=())) != base  # unwired: another state


def _live(temp):
    """A stand-in for the live engine's fields the fingerprint reads."""
    sim = SimpleNamespace(look=lambda: "This room is called the kitchen.", getObjectTree=lambda: _tree(pot_temp=temp))
    tracker = SimpleNamespace(inventory="a thermometer", score=0.25, context=lambda: "in kitchen")
    return SimpleNamespace(_sim=sim, tracker=tracker, _last_info={"subgoals": ["focus"]}, _cursor=7, _gold_room="kitchen")


@pytest.mark.parametrize("key", ["visible", "thermal"])
def test_the_thermal_key_parts_states_the_visible_key_merges(key):
    """A pot heating on the stove: nothing visible changes, the engine's world does."""
    env = sw_world.CachedScienceWorld(sw_world.TransitionCache(key))
    fps = []
    for temp in (10.0, 10.0001, 40.0):
        env._real = _live(temp)
        fps.append(env._live_fingerprint())
    env._real = None
    assert fps[0] == fps[1]  # the same world to the degree: one state under either key
    assert (fps[1] != fps[2]) == (key == "thermal")
    assert fps[0].split(":")[0] == sw_world.fingerprint("This room is called the kitchen.", "a thermometer", 0.25,
                                                        ["focus"], "in kitchen", "7@kitchen")


def test_caches_keyed_otherwise_are_refused(tmp_path):
    visible = hand_cache().save(tmp_path / "visible.json.gz")
    with pytest.raises(ValueError, match="keys its states by the visible fingerprint, this one by the thermal"):
        sw_world.TransitionCache.load([visible], "thermal")
    thermal = sw_world.TransitionCache("thermal")
    thermal.merge(json.loads(json.dumps(hand_cache().to_dict() | {"fingerprint": "thermal"})))
    path = thermal.save(tmp_path / "thermal.json.gz")
    assert sw_world.TransitionCache.load([path], "thermal").fingerprint == "thermal"
    assert sw_world.TransitionCache.load([path]).fingerprint == "thermal"  # as the parts are (the merge command)
    assert sw_world.TransitionCache.load([]).fingerprint == "visible"
    with pytest.raises(ValueError, match="thermal fingerprint, this one by the visible"):
        sw_world.TransitionCache.load([path], "visible")
    with pytest.raises(ValueError, match="visible fingerprint, this one by the thermal"):
        sw_world.TransitionCache.load([path, visible])
    with pytest.raises(ValueError, match="fingerprint must be one of"):
        sw_world.TransitionCache("hot")


def test_the_testbed_takes_the_thermal_key_for_the_cached_world_only(capsys):
    mod = SimpleNamespace(**runpy.run_path(str(EXPERIMENTS / "credit_testbed.py"), run_name="credit_testbed"))
    p = mod.parser()
    s = mod.settings_of(p.parse_args(["--env", "scienceworld", "--world-cache", "w", "--world-key", "thermal"]), p)
    assert s["world_key"] == "thermal" and "temperatures" in mod.restricted_words(s)
    assert "world_key" not in mod.settings_of(p.parse_args(["--env", "scienceworld", "--world-cache", "w"]), p)
    with pytest.raises(SystemExit) as e:
        mod.settings_of(p.parse_args(["--env", "scienceworld", "--world-key", "thermal"]), p)
    assert e.value.code == 2 and "--world-key is the cached world's" in capsys.readouterr().err


@pytest.mark.slow
def test_the_thermal_key_follows_the_engines_stove():
    """boil's gold path on the engine up to the stove, then waiting: nothing visible changes while the pot heats: the
    visible key stays, the thermal one moves; two loads of the variation agree on the thermal key at the reset."""
    _engine_or_skip()
    from milegpo.envs.scienceworld import scienceworld_tasks

    task = scienceworld_tasks("train", 1, start=0, task_type="boil", horizon=50, simplifications="easy")[0]
    env = sw_world.CachedScienceWorld(sw_world.TransitionCache("thermal"))
    try:
        real = env._engine()
        resets, keys = [], []
        for _ in range(2):
            real.reset(env._unbounded(task))
            resets.append(env._live_fingerprint())
        gold = real.gold_sequence()
        for action in gold[:gold.index("activate stove") + 1] + ["wait1", "wait1"]:
            real.expert_action()
            real.step(action)
            keys.append(env._live_fingerprint())
    finally:
        env.close()
    assert resets[0] == resets[1] and ":" in resets[0]
    heating = [k.split(":") for k in keys[-3:]]  # the stove on, then two ticks of waiting
    assert len({visible for visible, _ in heating}) == 1 and len({world for _, world in heating}) == 3
