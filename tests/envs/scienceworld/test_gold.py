"""The gold action sequence wins through milegpo's environment for every one of ScienceWorld's 30 task types
(variation 0 of train, no simplification), played by the environment's gold expert in the engine that plays the
episode, two processes in parallel. About 4-6 minutes on 2 busy cores (notes/scienceworld.md): the steps cost
30-400 ms (the valid-action list), the mendelian tasks' gold paths 13-26 s to generate.

Each task type is played in a fresh engine (a JVM of its own, ~1.5 s to start). The engine's gold path is a
function of what its JVM did before (notes/scienceworld.md), and the gold path is an open-loop plan:
in a world that draws random numbers as it runs (the bees of both mendelian tasks: two fresh JVMs playing
mendelian-genetics-known-plant's gold path see different bees from step 45 on) it is a plan for one draw. In a
fresh JVM the gold path is the same every time (mendelian-known: 144 actions in 18 fresh JVMs) and it won every
time we played it (15 of 15, 11 of them with a `wait1` put in at random at 5% of the steps); in a
JVM that had played other task types before, CI once got a 258-action gold path that lost at step 249
(score -100), notes/scienceworld.md 2026-12-05."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import time
from concurrent.futures import ProcessPoolExecutor

import pytest

pytest.importorskip("scienceworld")

from milegpo.envs.scienceworld import TASK_TYPES, ScienceWorldEnv, scienceworld_tasks  # noqa: E402
from milegpo.envs.scienceworld.engine import process_engine  # noqa: E402


def play_gold(task_type: str) -> dict:
    """Play variation 0 of ``task_type`` by the gold expert (horizon 1,000: every gold path fits) in a fresh
    engine (closing the process's only environment shuts its JVM down)."""
    fresh = process_engine() is None
    env = ScienceWorldEnv()
    try:
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
                    milestones=milestones, invalid=invalid, listed=listed, seconds=time.perf_counter() - start,
                    fresh=fresh)
    finally:
        env.close()
        assert process_engine() is None, "the JVM outlived the only environment that used it"


@pytest.mark.slow
def test_gold_wins_every_task_type():
    with ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as workers:
        results = list(workers.map(play_gold, TASK_TYPES))
    lost = [r for r in results if not r["won"]]
    assert lost == [], lost
    assert all(r["fresh"] for r in results)  # each task type in a JVM of its own
    assert all(r["score"] == 100 and r["milestones"] >= 3 and r["steps"] <= r["gold"] for r in results)
    assert sum(r["listed"] for r in results) >= 0.8 * sum(r["steps"] for r in results)
