"""The household environment: the experts, admissible actions, walkthroughs, observations, small rooms."""

from __future__ import annotations

import random

import pytest

from milegpo.envs import NOTHING_HAPPENS, HouseholdEnv, Task, household_tasks
from milegpo.envs.household import SPLITS, TASK_TYPES


def play_expert(env: HouseholdEnv, task: Task):
    obs, actions, info = env.reset(task)
    rewards, infos = [], []
    while not env.done:
        a = env.expert_action()
        assert a in env.admissible, f"{task.task_id}: expert action {a!r} not admissible"
        obs, r, terminated, truncated, info = env.step(a)
        rewards.append(r)
        infos.append(info)
    return rewards, infos



@pytest.mark.parametrize("split", SPLITS)
def test_expert_wins_every_game(split):
    env = HouseholdEnv()
    seen_types = set()
    for task in household_tasks(split, 150):
        rewards, infos = play_expert(env, task)
        assert env.won, task.task_id
        assert rewards[-1] == 10.0 and sum(rewards) == 10.0
        assert not any(i["invalid"] for i in infos)
        assert len(rewards) <= 20
        seen_types.add(task.task_type)
    assert seen_types == set(TASK_TYPES)



@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_forced_task_type(task_type):
    env = HouseholdEnv()
    for task in household_tasks("ood", 10, task_type=task_type):
        _, _, info = env.reset(task)
        assert info["task_type"] == task_type == task.task_type
        play_expert(env, task)
        assert env.won



def test_admissible_actions_are_all_valid_and_others_are_not():
    rng = random.Random(0)
    env = HouseholdEnv()
    for task in household_tasks("train", 30):
        obs, actions, info = env.reset(Task(task.task_id, seed=task.seed, split="train", horizon=40))
        while not env.done:
            a = rng.choice(actions)
            obs, r, terminated, truncated, info = env.step(a)
            assert obs != NOTHING_HAPPENS and not info["invalid"], (task.task_id, a)
            assert "help" not in info["admissible_actions"]
            actions = info["admissible_actions"]



@pytest.mark.parametrize("expert, split", [("oracle", "id"), ("search", "ood")])
def test_expert_recovers_after_random_actions(expert, split):
    rng = random.Random(1)
    env = HouseholdEnv()
    act = env.expert_action if expert == "oracle" else env.search_action
    for task in household_tasks(split, 40):
        env.reset(Task(task.task_id, seed=task.seed, split=split, horizon=200))
        for _ in range(15):
            if env.done:
                break
            env.step(rng.choice(env.admissible))
        while not env.done:
            env.step(act())
        assert env.won, task.task_id



@pytest.mark.parametrize("split", SPLITS)
def test_search_expert_wins_every_game(split):
    env = HouseholdEnv()
    for task in household_tasks(split, 150):
        env.reset(Task(task.task_id, seed=task.seed, split=split, task_type=task.task_type, horizon=60))
        while not env.done:
            a = env.search_action()
            assert a in env.admissible, f"{task.task_id}: search action {a!r} not admissible"
            env.step(a)
        assert env.won, task.task_id



def _hide_unseen(env: HouseholdEnv, rng: random.Random) -> None:
    """Swap the contents of receptacles the agent has not looked in (the goal's destination type
    aside, whose contents the oracle part of the plan reads): the world changes where no
    observation has shown it."""
    g = env.game
    unseen = [r for r in g.receptacles if r not in env._seen and r.rsplit(" ", 1)[0] != g.dest_type]
    shuffled = [env.s.contents[r] for r in unseen]
    rng.shuffle(shuffled)
    for r, objs in zip(unseen, shuffled):
        env.s.contents[r] = objs



def test_search_expert_uses_only_what_it_has_seen():
    import copy

    rng = random.Random(0)
    changed = 0
    for task in household_tasks("train", 120):
        env = HouseholdEnv()
        env.reset(Task(task.task_id, seed=task.seed, split="train", task_type=task.task_type, horizon=60))
        while not env.done:
            other = copy.deepcopy(env)
            _hide_unseen(other, rng)
            changed += other.s.contents != env.s.contents
            assert other.search_action() == env.search_action(), task.task_id
            env.step(env.search_action())
    assert changed > 100  # the check did move hidden objects
    # the oracle does use hidden placements: its first move changes with them
    moved = 0
    for task in household_tasks("train", 60):
        env = HouseholdEnv()
        env.reset(task)
        other = copy.deepcopy(env)
        _hide_unseen(other, rng)
        moved += other.expert_action() != env.expert_action()
    assert moved > 10



def test_walkthrough_of_either_expert():
    task = household_tasks("id", 1, start=5, task_type="look_at_obj_in_light")[0]
    for expert in ("oracle", "search"):
        env = HouseholdEnv()
        walk = env.walkthrough(task, expert=expert)
        env.reset(task)
        for a in walk:
            out = env.step(a)
        assert out[2] and out[4]["won"], expert
    with pytest.raises(ValueError, match="expert must be 'oracle' or 'search'"):
        HouseholdEnv().walkthrough(task, expert="cheat")



def test_walkthrough_replays_to_a_win():
    env = HouseholdEnv()
    task = household_tasks("ood", 1, start=3)[0]
    walk = env.walkthrough(task)
    env.reset(task)
    for a in walk:
        out = env.step(a)
    assert out[2] and out[4]["won"] and out[1] == 10.0
    assert env.expert_action() is None



def test_observations_look_like_alfworld():
    env = HouseholdEnv()
    obs, actions, info = env.reset(household_tasks("train", 1, start=0)[0])
    assert obs.startswith("You are in the middle of a room. Looking quickly around you, you see a ")
    assert "\n\nYour task is to: " in obs
    assert any(a.startswith("go to ") for a in actions) and "inventory" in actions and "look" in actions
    go = next(a for a in actions if a.startswith("go to "))
    obs, *_ = env.step(go)
    assert obs.startswith(f"You arrive at {go[6:]}. ")



# ---------------------------------------------------------------------------- small rooms (max_receptacles)
@pytest.mark.parametrize("k", [4, 5, 8])
def test_small_rooms_hold_at_most_k_receptacles_and_both_experts_win(k):
    env = HouseholdEnv()
    for split in SPLITS:
        for task in household_tasks(split, 40, max_receptacles=k):
            assert task.option("max_receptacles") == k and task.task_id.endswith(f"/r{k}")
            _, actions, _ = env.reset(task)
            game = env.game
            assert len(game.receptacles) <= k
            assert len(set(game.receptacles)) == len(game.receptacles)
            by_type: dict = {}
            for r in game.receptacles:  # renumbered per type: cabinet 1, cabinet 2, ...
                rtype, num = r.rsplit(" ", 1)
                by_type.setdefault(rtype, []).append(int(num))
            assert all(nums == list(range(1, len(nums) + 1)) for nums in by_type.values())
            if game.task_type == "look_at_obj_in_light":
                assert any(game.lamp in objs for objs in game.contents.values())
            for expert in ("oracle", "search"):
                walk = env.walkthrough(task, expert=expert)
                env.reset(task)
                for a in walk:
                    out = env.step(a)
                assert out[2] and out[4]["won"], (task.task_id, expert)



def test_walkthrough_keeps_the_room_size_but_not_the_step_delay():
    import dataclasses
    import time

    task = household_tasks("train", 1, start=2, max_receptacles=4)[0]
    slow = dataclasses.replace(task, options=task.options + (("step_delay_s", 1.0),))
    t0 = time.perf_counter()
    walk = HouseholdEnv().walkthrough(slow)
    assert time.perf_counter() - t0 < 0.5 * len(walk)
    assert walk == HouseholdEnv().walkthrough(task)
    env = HouseholdEnv()
    env.reset(task)
    for a in walk:
        out = env.step(a)
    assert out[2] and out[4]["won"]

