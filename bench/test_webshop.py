"""WebShop on the embedded catalog (3,000 products): environment steps, search latency, reward cost.

- ``test_webshop_episode_steps``: the shopping expert's recorded episodes of 20 test goals replayed
  (reset + every step; the expert's own thinking is not timed); ``steps_per_s``.
- ``test_webshop_search``: one BM25 query (a goal's instruction) on the engine itself, the
  per-world query cache bypassed; ``queries_per_s`` and ``search_ms``.
- ``test_webshop_reward``: :func:`get_reward` of a goal product for its goal with warm title-noun
  caches (as in an episode) and ``reward_cold_us`` with them cleared each call (fallback nouns,
  or spaCy where it is importable: the backend is in extra_info).
"""

from __future__ import annotations

import time

import pytest

from milegpo.envs.webshop import WebShopEnv, get_world, webshop_tasks
from milegpo.envs.webshop import reward as reward_module
from milegpo.envs.webshop.env import world_options
from milegpo.envs.webshop.reward import best_options, get_reward, goal_option_values, noun_backend

GOALS = 20


@pytest.fixture(scope="module")
def episodes():
    tasks = webshop_tasks("test", GOALS)
    env = WebShopEnv()
    out = []
    for task in tasks:
        env.reset(task)
        while not env.done:
            env.step(env.expert_action())
        out.append((task, [a for _, _, a in env.trace]))
    return out


def test_webshop_episode_steps(benchmark, median_of, record_ratio, episodes):
    env = WebShopEnv()
    n_steps = sum(len(actions) for _, actions in episodes)

    def replay():
        for task, actions in episodes:
            env.reset(task)
            for action in actions:
                env.step(action)

    benchmark(replay)
    benchmark.extra_info.update(episodes=len(episodes), steps=n_steps)
    if median_of(benchmark) is not None:
        record_ratio(benchmark, "steps_per_s", n_steps / median_of(benchmark))


def test_webshop_search(benchmark, median_of, record_ratio):
    world = get_world(world_options())
    queries = [g["instruction_text"] for g in world.shop.goals[:200]]
    i = iter(range(10**12))

    def search():
        return world.engine.search(queries[next(i) % len(queries)])

    assert search()
    benchmark(search)
    benchmark.extra_info.update(products=len(world.shop.products))
    if median_of(benchmark) is not None:
        record_ratio(benchmark, "search_ms", 1e3 * median_of(benchmark))
        record_ratio(benchmark, "queries_per_s", 1.0 / median_of(benchmark))


def test_webshop_reward(benchmark, median_of, record_ratio):
    world = get_world(world_options())
    cases = []
    for goal in world.shop.goals[:200]:
        product = world.shop.by_asin[goal["asin"]]
        cases.append((product, goal, world.shop.prices[goal["asin"]], best_options(product, goal_option_values(goal))))
    i = iter(range(10**12))

    def score():
        return get_reward(*cases[next(i) % len(cases)])

    assert score() == 1.0
    benchmark(score)
    t0 = time.perf_counter()
    for case in cases:
        reward_module.title_nouns.cache_clear()
        get_reward(*case)
    cold = (time.perf_counter() - t0) / len(cases)
    benchmark.extra_info.update(nouns=noun_backend())
    if median_of(benchmark) is not None:
        record_ratio(benchmark, "reward_us", 1e6 * median_of(benchmark))
        record_ratio(benchmark, "reward_cold_us", 1e6 * cold)
