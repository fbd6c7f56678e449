"""ScienceWorld on its engine through milegpo's TextEnv: wins, failures, invalid actions, milestones, the state
anchor, the gold expert, errors.

Needs the ``scienceworld`` package (skipped without it) and Java. One engine (JVM) serves the module; a reset
costs 0.05-0.5 s, a step 30-400 ms (the valid-action list), so the episodes here are short task types.
"""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("scienceworld")

from milegpo.envs import EnvError, make_env, state_key  # noqa: E402
from milegpo.envs.anchors import anchor_text  # noqa: E402
from milegpo.envs.scienceworld import ScienceWorldEnv, completed_subgoals, goal_text, scienceworld_tasks  # noqa: E402
from milegpo.envs.scienceworld.actions import OBJECTS_PREFIX, REFUSED_ANSWER, UNKNOWN_ACTION  # noqa: E402
from milegpo.envs.scienceworld.engine import process_engine  # noqa: E402
from milegpo.rollout import parse_action  # noqa: E402


@pytest.fixture(scope="module")
def env():
    world = make_env("scienceworld")
    yield world
    world.close()


def task(task_type: str, split: str = "train", **kwargs):
    return scienceworld_tasks(split, 1, task_type=task_type, **kwargs)[0]


def play_expert(env, t, rewards=None):
    """Play ``t`` by the gold expert; returns (actions, infos of the steps); the rewards go to ``rewards``."""
    env.reset(t)
    actions, infos = [], []
    while not env.done:
        actions.append(env.expert_action())
        _, reward, _, _, info = env.step(actions[-1])
        infos.append(info)
        if rewards is not None:
            rewards.append(reward)
    return actions, infos


def test_reset_shows_the_room_the_goal_and_the_actions(env):
    obs, admissible, info = env.reset(task("find-animal"))
    assert obs.startswith("This room is called the hallway.") and info["location"] == "hallway"
    assert info["goal"] == "find a(n) animal. First, focus on the thing. Then, move it to the red box in the kitchen."
    assert info["game_id"] == "scienceworld-find-animal-0" and info["task_type"] == "find-animal"
    assert admissible == sorted(set(admissible)) and len(admissible) > 300 and "open door to kitchen" in admissible
    assert "reset task" not in admissible  # refused: the trainer resets episodes
    shown = info["prompt_actions"]
    assert "move OBJ to OBJ" in shown and shown[-1].startswith(OBJECTS_PREFIX) and "kitchen" in shown[-1]
    assert len(shown) < 40 and "reset task" not in shown
    assert (info["score"], info["engine_score"], info["milestone"], info["subgoals"]) == (0.0, 0, False, [])
    assert info["state_context"] == "Location: hallway. Inventory: an orange. Focus: none. Score: 0."


def test_gold_wins_with_milestones_on_the_score_rises(env):
    actions, infos = play_expert(env, task("find-animal"))
    assert env.won and infos[-1]["won"] and infos[-1]["score"] == 1.0 and infos[-1]["engine_score"] == 100
    scores = [0] + [i["engine_score"] for i in infos]
    milestones = [i["milestone"] for i in infos]
    assert milestones == [after > before for before, after in zip(scores, scores[1:])] and sum(milestones) >= 4
    # a step completes a subgoal exactly when the engine's goal progress gains a true line
    subgoals = [[]] + [i["subgoals"] for i in infos]
    assert milestones == [len(after) > len(before) for before, after in zip(subgoals, subgoals[1:])]
    assert any(s.startswith("sequential 0: focus on") for s in subgoals[-1])
    assert [i["invalid"] for i in infos] == [False] * len(infos)
    assert env.last_obs.startswith("You move the") and infos[-1]["lost"] is False


def test_win_reward_and_score_reward(env):
    rewards: list[float] = []
    play_expert(env, task("lifespan-longest-lived"), rewards)
    assert env.won and rewards == [0.0] * (len(rewards) - 1) + [10.0]
    env.reset(task("lifespan-longest-lived", reward="score"))
    total = 0.0
    while not env.done:
        _, reward, _, _, info = env.step(env.expert_action())
        total += reward
    assert env.won and total == pytest.approx(10.0)


def test_done_is_not_won_a_failed_focus_ends_the_episode_lost(env):
    env.reset(task("boil"))
    obs, reward, terminated, truncated, info = env.step("focus on orange")
    assert obs == "You focus on the orange."
    assert terminated and not truncated and not info["won"] and info["lost"] and env.done and not env.won
    assert info["engine_score"] == -100 and info["score"] == 0.0 and reward == 0.0
    assert info["state_context"].endswith("Focus: orange. Score: -100.")
    with pytest.raises(EnvError, match="is done"):
        env.step("look around")


def test_invalid_and_refused_actions(env):
    _, admissible, first = env.reset(task("boil"))
    for action in ("fly to the moon", "", "0"):
        obs, reward, terminated, truncated, info = env.step(action)
        assert obs == UNKNOWN_ACTION and info["invalid"] and not (terminated or truncated) and reward == 0.0
        assert info["moves"] == first["moves"] and info["engine_score"] == 0
    obs, _, terminated, _, info = env.step("reset task")
    assert obs == REFUSED_ANSWER and info["invalid"] and not terminated and info["moves"] == first["moves"]
    # spelled otherwise than the list, the engine still reads it: valid (the engine decides)
    obs, _, _, _, info = env.step("examine orange")
    assert "examine orange" not in admissible and not info["invalid"] and "orange" in obs


def test_an_ambiguous_text_is_answered_with_the_first_option_in_one_step(env):
    env.reset(task("boil"))
    obs, _, _, _, info = env.step("open door")
    assert info["ambiguous"].startswith("Ambiguous request") and obs == "The door is now open."
    assert info["step"] == 1 and not info["invalid"]


def test_horizon_truncates_a_partial_score_is_not_a_win(env):
    env.reset(dataclasses.replace(task("find-animal"), horizon=6))  # its gold path wins in 10
    while not env.done:
        _, reward, terminated, truncated, info = env.step(env.expert_action())
    assert truncated and not terminated and not info["won"] and not info["lost"] and info["truncated"]
    assert 0 < info["engine_score"] < 100 and info["score"] == info["engine_score"] / 100 and reward == 0.0


def test_state_key_is_tracked_plus_actions(env):
    obs, admissible, info = env.reset(task("boil"))
    # the actions keyed: the templates and objects in view (the list's spellings follow the engine's object order)
    expected = anchor_text("tracked+actions", obs, info["state_context"], info["prompt_actions"])
    assert info["state_text"] == expected and info["state_key"] == state_key(expected)
    same = env.step("look around")[4]
    assert same["state_key"] == info["state_key"]  # "look around" costs no move and changes nothing
    env.step("open door to kitchen")
    env.step("go to kitchen")
    env.step("pick up thermometer")
    _, _, _, _, here = env.step("go to hallway")
    assert here["location"] == "hallway" and "thermometer" in here["state_context"]
    back = env.step("look around")[4]
    assert back["state_key"] != info["state_key"]  # the same room, a thermometer in the inventory
    # the observation alone does not tell these apart; the tracked context does
    env.set_state_anchor("observation")
    o1 = env.reset(task("boil"))[2]
    env.set_state_anchor("tracked+actions")
    assert o1["state_key"] == state_key(obs)


def test_a_group_reads_one_state_one_way(env):
    """Two loads of one variation list its objects in two orders (the engine's object hash order) and spell them
    by other referents in the valid list; observations and keys do not depend on it."""
    t = task("chemistry-mix", start=1)  # variation 1: the art studio, three wood cups of paint
    other = ScienceWorldEnv()
    try:
        keys = set()
        for world, before in ((env, "melt"), (other, "boil"), (env, "freeze"), (other, "find-plant")):
            world.reset(task(before))  # another load in between: the engine's objects get other hashes
            obs, _, info = world.reset(t)
            keys.add((obs, info["state_key"]))
            keys.add((world.step("look around")[0], world.step("open door to hallway")[4]["state_key"]))
        assert len(keys) == 2
    finally:
        other.close()


def test_asking_for_the_expert_loads_gold_paths_with_the_task(env):
    fresh = ScienceWorldEnv()
    try:
        act = fresh.expert("oracle")
        fresh.reset(task("find-plant"))
        assert fresh._gold  # loaded with the task: no reload at the first expert step
        while not fresh.done:
            fresh.step(act())
        assert fresh.won
        with pytest.raises(ValueError, match="expert must be 'oracle'"):
            fresh.expert("search")
    finally:
        fresh.close()


def test_same_task_again_replays_the_same_world(env):
    t = task("find-living-thing")
    first = env.reset(t)
    actions, infos = play_expert(env, t)  # generates the gold path on first use: the simulation keeps it
    again = env.reset(t)  # the loaded task is reset (its gold path kept), not loaded again
    assert again[0] == first[0] and again[2]["state_key"] == first[2]["state_key"]
    replay = [env.step(a)[4] for a in actions]
    assert env.won and [i["state_key"] for i in replay] == [i["state_key"] for i in infos]


def test_expert_asked_mid_episode_replays_onto_a_gold_load(env):
    t = task("lifespan-shortest-lived")
    env.reset(dataclasses.replace(t, options=(("reward", "score"),)))  # another task id: a fresh load, no gold
    env.reset(t)
    env.step("look around")
    env.step("inventory")
    before = env.last_obs
    gold = env.gold_sequence()  # loads the gold path and replays the two actions
    assert gold and env.last_obs == before
    while not env.done:
        env.step(env.expert_action())
    assert env.won


def test_expert_walks_back_after_a_detour(env):
    env.reset(task("find-animal"))
    first = env.expert_action()
    env.step(first)  # on the gold path: a door opened
    env.step("open door to kitchen")  # off it: to another room
    _, _, _, _, info = env.step("go to kitchen")
    assert info["location"] == "kitchen"
    walked = []
    while not env.done and len(walked) < 30:
        walked.append(env.expert_action())
        env.step(walked[-1])
    assert env.won and walked[0] == "go to hallway"


def test_gold_actions_mostly_spelled_as_listed(env):
    env.reset(task("boil"))
    listed = played = 0
    while not env.done:
        action = env.expert_action()
        listed += action in env.admissible
        played += 1
        env.step(action)
    assert env.won and listed >= 0.8 * played


def test_the_valid_list_is_the_librarys_read_once_a_step(env):
    """The valid list as one JSON answer (engine.Simulation) holds what the library's per-entry list holds, in every
    state of a walk; the answer is asked again after a step, not before."""
    env.reset(task("boil"))
    sim = env._sim
    for _ in range(4):
        library = list(sim.server.getValidActionObjectCombinations())
        ours = sim.get_valid_action_object_combinations()
        assert sorted(ours) == sorted(library) and len(ours) == len(library)
        assert sim.valid_with_templates() is sim.valid_with_templates()  # kept within the step
        kept = sim.valid_with_templates()
        env.step(env.expert_action())
        assert sim.valid_with_templates() is not kept


def _whole_state(world):
    """Everything of an episode's state a later step or expert question reads."""
    info = world._last_info
    return (world.last_obs, sorted(world._sim.look().splitlines()), world.tracker.context(), world.admissible,
            info["subgoals"], info["prompt_actions"], info["location"], info["inventory"], world._engine_score,
            world._cursor, world._gold_room, {room: dict(doors) for room, doors in world._doors.items()}, world.done,
            world.won, world.steps)


def test_a_quiet_replay_reaches_the_state_the_steps_reached(env):
    """A walk of boil (the expert's actions, a detour into another room, the expert walking back) played step by step,
    the expert asked before each; then each prefix replayed quietly from a reset with the walk kept after it, or
    without it and the expert's place given after: the same state, then the same expert action and the same answer
    to it. An ambiguous text is answered within its step as a step answers it (which door is the first option
    differs from one reset to another: not compared). A replay the engine ends before its last action (a failed
    focus) stops there, the walk not taken (the focus followed: the engine's answer says it)."""
    t = task("boil")
    env.reset(t)
    played, walks, states = [], [], []
    for n in range(12):
        expert = env.expert_action()
        action = {2: "open door to hallway", 3: "go to hallway"}.get(n, expert)
        env.step(action)
        played.append(action)
        walks.append(env.walk_state())
        states.append(_whole_state(env))
    assert "go to kitchen" in played[4:]  # the expert walked back
    expert = env.expert_action()
    answer = env.step(expert)[0]
    for i in (0, 3, 4, 7, 11):
        env.reset(t)
        assert env.replay(played[:i + 1], walks[i]) == i + 1
        assert _whole_state(env) == states[i], f"after {played[:i + 1]}"
        env.reset(t)  # without the walk: all but the expert's place (left as the reset put it), which set_walk gives
        start = env._gold_room
        assert env.replay(played[:i + 1]) == i + 1
        assert (env._cursor, env._gold_room) == (0, start)
        env.set_walk({"cursor": walks[i]["cursor"], "gold_room": walks[i]["gold_room"]})
        assert _whole_state(env) == states[i], f"after {played[:i + 1]}, no walk"
    assert env.expert_action() == expert and env.step(expert)[0] == answer
    env.reset(t)
    assert env.replay(["open door"], walks[0]) == 1
    assert env._played[-2:] == ["open door", "0"] and env._last_info["ambiguous"].startswith("Ambiguous request")
    assert env.last_obs == "The door is now open." and not env._last_info["invalid"]
    env.reset(t)
    assert env.replay(["focus on orange", "look around"], walks[0]) == 1
    assert env.done and not env.won and env.tracker.focus == "orange" and env._engine_score == -100


def test_parse_matches_free_text_to_a_listed_action(env):
    _, admissible, _ = env.reset(task("boil"))
    parsed = parse_action("<action> Open Door to  KITCHEN </action>", admissible)
    assert parsed.valid and parsed.action == "open door to kitchen"


def test_out_of_range_variation_is_a_named_error(env):
    bad = dataclasses.replace(task("boil"), seed=30, task_id="scienceworld/boil/test/30")
    with pytest.raises(EnvError, match=r"boil has variations 0\.\.29"):
        env.reset(bad)
    with pytest.raises(EnvError, match="one of the 30 task types"):
        env.reset(dataclasses.replace(bad, task_type="boiling", seed=0))


def test_the_expert_leaves_out_doors_open_already(env):
    env.reset(task("find-non-living-thing", start=1, simplifications="easy"))  # doors open: openDoors
    played, listed = [], []
    while not env.done:
        played.append(env.expert_action())
        listed.append(played[-1] in env.admissible)
        env.step(played[-1])
    assert env.won and any(a.startswith("open door to") for a in env.gold_sequence())
    assert not any(a.startswith("open door to") for a in played) and all(listed)


def test_easy_simplification_opens_the_doors(env):
    obs, admissible, info = env.reset(task("boil", simplifications="easy"))
    assert "(that is open)" in obs and "teleport to kitchen" in admissible
    assert info["game_id"] == "scienceworld-boil-0-easy"


def test_one_engine_for_every_environment_of_the_process(env):
    env.reset(task("boil"))
    engine = process_engine()
    other = ScienceWorldEnv()
    try:
        other.reset(task("melt"))
        assert process_engine() is engine and other._sim.engine is engine
    finally:
        other.close()
    assert process_engine() is engine and not engine.closed  # still held by the module's env


def test_helpers():
    assert goal_text("Task Description:\nYour task is to boil water. First, focus on it.") == \
        "boil water. First, focus on it."
    progress = ("Sequential Subgoals:\n---\n0\ttrue\t  GoalFind\tfocus on substance\n1\tfalse\t  X\tliquid\n"
                "Unordered and Optional Subgoals:\n---\n0\ttrue\t GoalInRoom\tbe in same location as water\n")
    assert completed_subgoals(progress) == ["sequential 0: focus on substance",
                                            "optional 0: be in same location as water"]
