"""Environment pool throughput: N episodes stepped by EnvPool (worker processes) vs one at a time.

Each benchmark steps ``N`` episodes of one task group ``ROUNDS`` times ("look", which never
ends an episode) through :class:`EnvPool` with ``WORKERS`` processes, and the same workload
through :class:`SequentialPool` (one environment after another, in-process). Recorded in
extra_info: ``pool_steps_per_s``, ``sequential_steps_per_s`` and ``pool_vs_sequential``
(the ratio; > 1 means the pool is faster). Expect < 1 for the embedded world (a step costs
~10 us, the pipe round trip more), up to ~WORKERS for engines whose steps cost milliseconds
of CPU (TextWorld, ALFWorld) on a machine with WORKERS free cores, and up to N for
``household_20ms`` (a 20 ms sleep per step, one worker per episode: latency overlap).
"""

from __future__ import annotations

import dataclasses
import os
import time

import pytest

from milegpo.envs import household_tasks
from milegpo.envs.pool import EnvPool, SequentialPool

N = 8
WORKERS = min(4, os.cpu_count() or 1)


def _household():
    return dataclasses.replace(household_tasks("train", 1)[0], horizon=10**9), 200


def _textworld():
    pytest.importorskip("textworld")
    from milegpo.envs.textworld_env import make_game, textworld_tasks

    task = textworld_tasks("train", 1, challenge="tw-coin_collector", horizon=10**9)[0]
    path = make_game("tw-coin_collector", task.seed, "train", dict(task.options))
    return dataclasses.replace(task, game_file=str(path)), 20


def _alfworld():
    pytest.importorskip("alfworld")
    from milegpo.envs import EnvError
    from milegpo.envs.alfworld import alfworld_tasks

    try:
        tasks = alfworld_tasks("train", n=1, horizon=10**9)
    except EnvError:
        pytest.skip("no ALFWorld games: set $ALFWORLD_DATA (python -m milegpo.envs.alfworld DIR --train 1)")
    if not tasks:
        pytest.skip("no ALFWorld games under $ALFWORLD_DATA")
    return tasks[0], 3


def _household_20ms():
    """The embedded world with a 20 ms sleep per step: an engine whose latency does not need a core."""
    task, _ = _household()
    return dataclasses.replace(task, options=(("step_delay_s", 0.02),)), 5


WORLDS = {"household": _household, "household_20ms": _household_20ms, "textworld": _textworld, "alfworld": _alfworld}
#: worker processes per world (a sleeping step needs no core, so that world gets one worker per episode)
WORKERS_OF = {"household_20ms": N}


def _run(pool, rounds: int) -> None:
    for _ in range(rounds):
        outs = pool.step(["look"] * N)
        assert not any(o.done for o in outs)


@pytest.mark.parametrize("world", list(WORLDS))
def test_pool_throughput(benchmark, median_of, record_ratio, world):
    task, rounds = WORLDS[world]()
    seq = SequentialPool(N)
    seq.reset_group(task, N)
    _run(seq, 1)  # warm
    t0 = time.perf_counter()
    _run(seq, rounds)
    seq_rate = N * rounds / (time.perf_counter() - t0)
    seq.close()
    workers = WORKERS_OF.get(world, WORKERS)
    with EnvPool(N, num_workers=workers, step_timeout=600, reset_timeout=600) as pool:
        pool.reset_group(task, N)
        _run(pool, 1)
        benchmark.pedantic(_run, args=(pool, rounds), rounds=3, iterations=1)
    benchmark.extra_info.update(world=world, n_envs=N, workers=workers, steps_per_round=N * rounds)
    if median_of(benchmark) is None:  # --benchmark-disable
        return
    pool_rate = N * rounds / median_of(benchmark)
    record_ratio(benchmark, "pool_steps_per_s", pool_rate)
    record_ratio(benchmark, "sequential_steps_per_s", seq_rate)
    record_ratio(benchmark, "pool_vs_sequential", pool_rate / seq_rate)


def test_household_single_env_step(benchmark, median_of, record_ratio):
    """One embedded-world step (the project's default CPU environment); must stay well under 1 ms."""
    from milegpo.envs import HouseholdEnv

    env = HouseholdEnv()
    task, _ = _household()
    env.reset(task)
    actions = [a for a in env.admissible if a.startswith("go to ")]
    i = iter(range(10**12))

    def step():
        env.step(actions[next(i) % len(actions)])

    benchmark(step)
    if median_of(benchmark) is not None:  # None under --benchmark-disable
        record_ratio(benchmark, "steps_per_s", 1.0 / median_of(benchmark))
