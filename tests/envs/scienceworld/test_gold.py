"""The gold action sequence wins through milegpo's environment for every one of ScienceWorld's 30 task types
(variation 0 of train, no simplification), played by the environment's gold expert in the engine that plays the
episode, two processes in parallel (one engine each). About 4-6 minutes on 2 busy cores (notes/scienceworld.md):
the steps cost 30-400 ms (the valid-action list), the mendelian tasks' gold paths 13-26 s to generate."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import time
from concurrent.futures import ProcessPoolExecutor

import pytest

pytest.importorskip("scienceworld")

from milegpo.envs.scienceworld import TASK_TYPES, ScienceWorldEnv, scienceworld_tasks  # noqa: E402

_ENV: list[ScienceWorldEnv] = []


def play_gold(task_type: str) -> dict:
    """Play variation 0 of ``task_type`` by the gold expert (horizon 1,000: every gold path fits)."""
    if not _ENV:
        _ENV.append(ScienceWorldEnv())
    env = _ENV[0]
    start = time.perf_counter()
    task = dataclasses.replace(scienceworld_tasks("train", 1, task_type=task_type)[0], horizon=1000)
    env.reset(task)
    gold = env.gold_sequence()
    steps = milestones = invalid = listed = 0
    while not env.done:
        action = env.expert_action()
        listed += action in env.admissible
        _, _, _, _, info = env.step(action)
        steps, milestones, invalid = steps + 1, milestones + info["milestone"], invalid + info["invalid"]
    return dict(task_type=task_type, won=env.won, score=info["engine_score"], steps=steps, gold=len(gold),
                milestones=milestones, invalid=invalid, listed=listed, seconds=time.perf_counter() - start)


@pytest.mark.slow
def test_gold_wins_every_task_type():
    with ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as workers:
        results = list(workers.map(play_gold, TASK_TYPES))
    lost = [r for r in results if not r["won"]]
    assert lost == [], lost
    assert all(r["score"] == 100 and r["milestones"] >= 3 and r["steps"] <= r["gold"] for r in results)
    assert sum(r["listed"] for r in results) >= 0.8 * sum(r["steps"] for r in results)
