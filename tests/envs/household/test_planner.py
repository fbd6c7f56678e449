"""The household planner behind HouseholdEnv.steps_to_win: hand-played episodes and their step labels,
exactness against a breadth-first search over the real game, and Bellman consistency in full-size rooms."""

from __future__ import annotations

import copy
import random
from collections import deque

import pytest

from milegpo.envs import HouseholdEnv, household_tasks
from milegpo.envs.base import TASK_TYPES
from milegpo.evidence.labelled import labelled_batch, play_episode


def task_of(task_type: str, seed: int, **kw):
    return next(t for t in household_tasks("train", seed + 1, task_type=task_type, **kw) if t.seed == seed)


def scripted(actions):
    return lambda obs, admissible, t: actions[t]


def test_hand_played_episode_labels():
    # "put a bowl on armchair": bowl 1 in the closed drawer 1, bowl 2 on sidetable 1 (open), armchair 1 the
    # destination; the oracle expert walks to the drawer (5 steps), the shortest plan takes bowl 2 (4 steps)
    task = task_of("pick_and_place_simple", 93)
    env = HouseholdEnv()
    env.reset(task)
    assert env.game.goal_text == "put a bowl on armchair." and "bowl 2" in env.game.contents["sidetable 1"]
    assert env.steps_to_win() == 4 and len(env.walkthrough(task)) == 5
    actions = ["go to drawer 1", "inventory", "dance", "go to sidetable 1", "take bowl 2 from sidetable 1",
               "go to armchair 1", "move bowl 2 to armchair 1"]
    ep = play_episode(env, task, scripted(actions), label=True)
    assert ep.won and ep.invalid == [False, False, True, False, False, False, False]
    assert ep.steps_before == [4, 4, 4, 4, 3, 2, 1] and ep.steps_after == [4, 4, 4, 3, 2, 1, 0]
    lb = labelled_batch([[ep]], "hand", 0)
    # the detour, the look in the inventory and the invalid action are bad; the rest is on an optimal path
    assert lb.good.tolist() == [False, False, False, True, True, True, True]


def test_labels_of_a_heat_task_and_a_lamp_task():
    env = HouseholdEnv()
    for task_type in ("pick_heat_then_place_in_recep", "look_at_obj_in_light"):
        task = task_of(task_type, 3)
        env.reset(task)
        start = env.steps_to_win()
        ep = play_episode(env, task, lambda obs, adm, t: env.expert_action(), label=True)
        assert ep.won and ep.steps_before[0] == start and ep.steps_after[-1] == 0
        # every oracle step lowers the count by at most one, and the count never rises on a valid step
        assert all(b - a in (0, 1) for b, a in zip(ep.steps_before, ep.steps_after))
        assert len(ep) >= start


def _state(env):
    s = env.s
    return (s.location, s.holding, frozenset(s.opened), frozenset((o, frozenset(p)) for o, p in s.props.items() if p),
            s.lamp_on, tuple(sorted((r, tuple(sorted(v))) for r, v in s.contents.items())))


def brute_force_steps(env, limit: int = 12):
    """Breadth-first search over the real game with every admissible action (None beyond ``limit``)."""
    if env._won():
        return 0
    saved, saved_actions = env.s, env.admissible
    seen, queue = {_state(env)}, deque([(copy.deepcopy(env.s), 0)])
    try:
        while queue:
            state, depth = queue.popleft()
            if depth >= limit:
                return None
            env.s = copy.deepcopy(state)
            actions = env.admissible_actions()
            for action in actions:
                env.s, env.admissible = copy.deepcopy(state), actions
                env._step(action)
                if env._won():
                    return depth + 1
                key = _state(env)
                if key not in seen:
                    seen.add(key)
                    queue.append((env.s, depth + 1))
    finally:
        env.s, env.admissible = saved, saved_actions
    return None


def random_states(task_type: str, n_games: int, seed: int, **kw):
    """States reached by half-expert, half-random play (the env in that state, one at a time)."""
    rng = random.Random(seed)
    env = HouseholdEnv()
    for task in household_tasks("train", n_games, task_type=task_type, horizon=40, **kw):
        env.reset(task)
        while not env.done:
            if rng.random() < 0.3:
                yield env
            env.step(env.expert_action() if rng.random() < 0.5 else rng.choice(env.admissible))


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_planner_equals_a_search_over_the_real_game_in_small_rooms(task_type):
    checked = 0
    for env in random_states(task_type, 3, seed=1, max_receptacles=4):
        want = brute_force_steps(env)
        if want is not None:
            assert env.steps_to_win() == want, (env.game.goal_text, env.s)
            checked += 1
    assert checked >= 3


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_planner_is_bellman_consistent_in_full_size_rooms(task_type):
    # V(s) = 1 + min over every admissible action of V(s'), no action lowers V by more than one, V = 0 when won:
    # the planner's count is the true distance to a win on every state checked
    checked = 0
    for env in random_states(task_type, 4, seed=2):
        value, state, actions = env.steps_to_win(), env.s, env.admissible
        after = []
        for action in actions:
            env.s, env.admissible = copy.deepcopy(state), actions
            env._step(action)
            after.append(0 if env._won() else env.steps_to_win())
        env.s, env.admissible = state, actions
        assert value >= 1 and min(after) == value - 1 and all(a >= value - 1 for a in after)
        checked += 1
    assert checked >= 4


def test_a_won_state_is_zero_steps_away_and_reset_is_required():
    env = HouseholdEnv()
    with pytest.raises(ValueError, match="call reset first"):
        env.steps_to_win()
    task = task_of("pick_two_obj_and_place", 5)
    env.reset(task)
    for action in env.walkthrough(task):
        env.step(action)
    assert env.won and env.steps_to_win() == 0
