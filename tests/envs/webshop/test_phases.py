"""WebShop's milestones (issue 47): BEACON's page phases, in order, each once (milegpo.envs.webshop.phases)."""

from __future__ import annotations

import pytest

from milegpo.envs.webshop import WebShopEnv
from milegpo.envs.webshop.phases import can_meet_goal
from milegpo.envs.webshop.reward import best_options, goal_option_values


def _play(env, actions):
    return [env.step(a)[4]["milestone"] for a in actions]


def _goal_run(env, task):
    """Search the goal product's title, open it, click its best options, buy: (actions, milestone flags)."""
    env.reset(task)
    asin = env.goal["asin"]
    options = best_options(env.world.shop.by_asin[asin], goal_option_values(env.goal))
    actions = [f"search[{env.world.shop.by_asin[asin]['Title']}]", f"click[{asin.lower()}]",
               *(f"click[{v}]" for v in options.values()), "click[buy now]"]
    env.reset(task)
    return actions, _play(env, actions)


def test_the_goal_products_purchase_passes_every_phase_once(small_tasks):
    """Buying the goal product with its best options: a milestone at the search, the product, the option click
    that completes the goal's options (none when the goal asks none) and the purchase; nothing else."""
    env = WebShopEnv()
    checked = {"options": 0, "none": 0}
    for task in small_tasks["test"][:20]:
        actions, flags = _goal_run(env, task)
        if not env.won:
            continue
        n_options = len(goal_option_values(env.goal))
        assert flags[0] and flags[1] and flags[-1], (actions, flags)
        if n_options:
            assert sum(flags) == 4 and flags[-2] and not any(flags[2:-2]), (actions, flags)
            checked["options"] += 1
        else:
            assert sum(flags) == 3, (actions, flags)
            checked["none"] += 1
        assert env.phases.phase == "complete"
    assert checked["options"] >= 5 and checked["none"] >= 1, checked


def test_the_expert_wins_with_every_phase_and_the_phases_come_in_order(small_tasks):
    env = WebShopEnv()
    seen = 0
    for task in small_tasks["train"][:30]:
        env.reset(task)
        flags = []
        while not env.done:
            flags.append(env.step(env.expert_action())[4]["milestone"])
        if env.won:
            seen += 1
            assert sum(flags) == (4 if goal_option_values(env.goal) else 3) and flags[-1], flags
    assert seen >= 20


def test_nothing_counts_out_of_order_and_a_wrong_purchase_is_no_milestone(small_tasks):
    env = WebShopEnv()
    task = next(t for t in small_tasks["test"] if env.reset(t) and goal_option_values(env.goal))
    asin = env.goal["asin"]
    title = env.world.shop.by_asin[asin]["Title"]
    options = list(best_options(env.world.shop.by_asin[asin], goal_option_values(env.goal)).values())
    env.reset(task)
    # the goal product bought without its options: the search and detail phases pass, the options one does not, so
    # the purchase (lost) is no milestone either
    flags = _play(env, [f"search[{title}]", f"click[{asin.lower()}]", "click[buy now]"])
    assert flags == [True, True, False] and env.phases.phase == "options" and not env.won
    # a second search, page turns and a product that cannot meet the goal change nothing once passed
    env.reset(task)
    assert _play(env, [f"search[{title}]", "click[next >]", "click[< prev]", f"search[{title}]"]) == [True, False,
                                                                                                     False, False]
    shown = env.session.results[:10]
    other = next((a for a in shown if not can_meet_goal(env.world, env.goal, a)), None)
    if other is not None:
        assert _play(env, [f"click[{other.lower()}]"]) == [False] and env.phases.phase == "detail"
        env.step("click[< prev]")
    assert _play(env, [f"click[{asin.lower()}]"]) == [True]
    assert _play(env, [f"click[{v}]" for v in options]) == [False] * (len(options) - 1) + [True]


def test_a_search_that_lists_no_product_that_can_meet_the_goal_is_no_milestone(small_tasks):
    env = WebShopEnv()
    task = small_tasks["test"][0]
    env.reset(task)
    for query in ("zzzz qqqq", "a", "the"):
        env.reset(task)
        flags = _play(env, [f"search[{query}]"])
        listed = env.session.results[:10]
        assert flags == [any(can_meet_goal(env.world, env.goal, a) for a in listed)]
    with pytest.raises(KeyError):
        can_meet_goal(env.world, env.goal, "NOT-AN-ASIN")
