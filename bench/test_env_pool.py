"""Environment pool throughput: N episodes stepped by EnvPool (worker processes) vs one at a time.

Each benchmark steps ``N`` episodes of one task group ``ROUNDS`` times ("look", which never
ends an episode) through :class:`EnvPool` with ``WORKERS`` processes, and the same workload
through :class:`SequentialPool` (one environment after another, in-process). Recorded in
extra_info: ``pool_steps_per_s``, ``sequential_steps_per_s`` and ``pool_vs_sequential``
(the ratio; > 1 means the pool is faster). Expect < 1 for the embedded world (a step costs
~10 us, the pipe round trip more), up to ~WORKERS for engines whose steps cost milliseconds
of CPU (TextWorld, ALFWorld) on a machine with WORKERS free cores, and up to N for
``household_20ms`` (a 20 ms sleep per step, one worker per episode: latency overlap).
On a loaded machine the wall ratio says how the scheduler shared the cores; CPU time does not
depend on it: ``sequential_cpu_over_busiest_worker`` is the in-process run's CPU seconds over the
busiest worker's (the speed-up if every worker had a core), with ``load_average``. ScienceWorld's steps run in
each worker's JVM, a child process whose CPU these figures do not count: its wall figures are the ones to read.

``test_step_vs_round_trip`` checks each world's :attr:`~milegpo.envs.TextEnv.step_in_workers`
declaration: one environment stepped in-process and through a one-worker EnvPool. ``round_trip_cpu_ms``
is the CPU the pool adds to a step (caller plus worker: pickling, two pipe hops, waking up),
``step_over_round_trip_cpu`` > 1 means a step costs more than its round trip (the kind should declare
``step_in_workers = True``); the ``*_wall_ms`` figures are the same in wall time (load-dependent).
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


def _scienceworld():
    """ScienceWorld's find-animal (variation 0; one JVM per worker process, a simulation per episode in it)."""
    pytest.importorskip("scienceworld")
    from milegpo.envs.scienceworld import scienceworld_tasks

    return dataclasses.replace(scienceworld_tasks("train", 1, task_type="find-animal")[0], horizon=10**9), 3


def _household_20ms():
    """The embedded world with a 20 ms sleep per step: an engine whose latency does not need a core."""
    task, _ = _household()
    return dataclasses.replace(task, options=(("step_delay_s", 0.02),)), 5


WORLDS = {"household": _household, "household_20ms": _household_20ms, "textworld": _textworld, "alfworld": _alfworld,
          "scienceworld": _scienceworld}
#: worker processes per world (a sleeping step needs no core, so that world gets one worker per episode)
WORKERS_OF = {"household_20ms": N}


def _run(pool, rounds: int) -> None:
    for _ in range(rounds):
        outs = pool.step(["look"] * N)
        assert not any(o.done for o in outs)


@pytest.mark.parametrize("world", list(WORLDS))
def test_pool_throughput(benchmark, median_of, record_ratio, cpu_s, load_average, world):
    task, rounds = WORLDS[world]()
    seq = SequentialPool(N)
    seq.reset_group(task, N)
    _run(seq, 1)  # warm
    t0, c0 = time.perf_counter(), time.process_time()
    _run(seq, rounds)
    seq_rate = N * rounds / (time.perf_counter() - t0)
    seq_cpu = time.process_time() - c0
    seq.close()
    workers = WORKERS_OF.get(world, WORKERS)
    timed_rounds = 3
    with EnvPool(N, num_workers=workers, step_timeout=600, reset_timeout=600) as pool:
        pool.reset_group(task, N)
        _run(pool, 1)
        worker_cpu = [cpu_s(p) for p in pool.pids]
        benchmark.pedantic(_run, args=(pool, rounds), rounds=timed_rounds, iterations=1)
        worker_cpu = [(cpu_s(p) - c) / timed_rounds for p, c in zip(pool.pids, worker_cpu)]
    benchmark.extra_info.update(world=world, n_envs=N, workers=workers, steps_per_round=N * rounds,
                                load_average=load_average, worker_cpu_s=worker_cpu, sequential_cpu_s=seq_cpu)
    if median_of(benchmark) is None:  # --benchmark-disable
        return
    pool_rate = N * rounds / median_of(benchmark)
    record_ratio(benchmark, "pool_steps_per_s", pool_rate)
    record_ratio(benchmark, "sequential_steps_per_s", seq_rate)
    record_ratio(benchmark, "pool_vs_sequential", pool_rate / seq_rate)
    record_ratio(benchmark, "sequential_cpu_over_busiest_worker", seq_cpu / max(worker_cpu))
    record_ratio(benchmark, "load_average", load_average)


def _webshop():
    from milegpo.envs.webshop import get_world, webshop_tasks
    from milegpo.envs.webshop.env import world_options

    task = dataclasses.replace(webshop_tasks("test", 1)[0], horizon=10**9)
    queries = [g["instruction_text"] for g in get_world(world_options()).shop.goals]

    def actions(run: int, steps: int) -> list[str]:
        # a search with a query not seen before (no cache hit), then back: as an episode's search/click mix
        fresh = queries[run * steps // 2:(run + 1) * steps // 2]
        return [a for q in fresh for a in (f"search[{q}]", "click[back to search]")]

    return task, actions


def _repeat(action: str):
    def actions(run: int, steps: int) -> list[str]:
        return [action] * steps

    return actions


#: world -> (task, actions(run, steps)): valid actions that never end the episode, other ones in every run
ROUND_TRIP_WORLDS = {
    "household": lambda: (_household()[0], _repeat("look")),
    "webshop": _webshop,
    "textworld": lambda: (_textworld()[0], _repeat("look")),
    "alfworld": lambda: (_alfworld()[0], _repeat("look")),
    "scienceworld": lambda: (_scienceworld()[0], _repeat("look around")),
}


@pytest.mark.parametrize("world", list(ROUND_TRIP_WORLDS))
def test_step_vs_round_trip(benchmark, median_of, record_ratio, cpu_s, load_average, world):
    from milegpo.envs import env_class

    task, actions = ROUND_TRIP_WORLDS[world]()
    steps = 20 if world in ("alfworld", "scienceworld") else 200
    runs = iter(range(10**6))

    def play(pool):
        for a in actions(next(runs), steps):
            pool.step([a])

    seq = SequentialPool(1)
    seq.reset([task])
    play(seq)  # warm
    t0, c0 = time.perf_counter(), time.process_time()
    play(seq)
    step_s, step_cpu = (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps
    seq.close()
    timed_rounds = 3
    with EnvPool(1, num_workers=1, step_timeout=600, reset_timeout=600) as pool:
        pool.reset([task])
        play(pool)
        c0, w0 = time.process_time(), cpu_s(pool.pids[0])
        benchmark.pedantic(play, args=(pool,), rounds=timed_rounds, iterations=1)
        pooled_cpu = (time.process_time() - c0 + cpu_s(pool.pids[0]) - w0) / (timed_rounds * steps)
    declared = env_class(task.env).step_in_workers
    benchmark.extra_info.update(world=world, steps=steps, declared_step_in_workers=declared,
                                load_average=load_average)
    if median_of(benchmark) is None:
        return
    round_trip_cpu = pooled_cpu - step_cpu
    record_ratio(benchmark, "step_cpu_ms", 1e3 * step_cpu)
    record_ratio(benchmark, "round_trip_cpu_ms", 1e3 * round_trip_cpu)
    record_ratio(benchmark, "step_over_round_trip_cpu", step_cpu / max(round_trip_cpu, 1e-6))
    record_ratio(benchmark, "step_wall_ms", 1e3 * step_s)
    record_ratio(benchmark, "round_trip_wall_ms", 1e3 * (median_of(benchmark) / steps - step_s))
    record_ratio(benchmark, "declared_step_in_workers", float(declared))
    record_ratio(benchmark, "load_average", load_average)


#: the overlap schedule check: generation call and environment step each sleep this long
SLEEP_S = 0.05


@pytest.mark.parametrize("overlap", [False, True], ids=["off", "on"])
def test_overlap_schedule(benchmark, median_of, record_ratio, medians, load_average, overlap):
    """The episode loop's schedule, with generation and environment steps that sleep (they need no CPU, so the
    figure holds on a loaded machine; it is not a performance figure of any model or engine): 8 episodes in
    2 parts of 4, one worker per episode, ``SLEEP_S`` per generation call and per environment step, 10 steps.
    Without the overlap a step of both parts costs 2 x (generation + environment), with it about
    2 x max(generation, environment): ``hidden_share`` = (off - on) / the environment's step time ~ 1."""
    from milegpo.rollout import EpisodeRunner

    task = dataclasses.replace(household_tasks("train", 1)[0], horizon=10,
                               options=(("step_delay_s", SLEEP_S),))

    def generate(prompts):
        time.sleep(SLEEP_S)
        return [[1]] * len(prompts), [[2]] * len(prompts), None, ["<action>look</action>"] * len(prompts)

    with EnvPool(N, num_workers=N, step_timeout=60) as pool:
        runner = EpisodeRunner(pool, parts=2, overlap=overlap)
        runner.run([task], N, generate)  # warm
        out = {}

        def play():
            out["rollout"] = runner.run([task], N, generate)

        benchmark.pedantic(play, rounds=3, iterations=1)
    rollout = out["rollout"]
    benchmark.extra_info.update(overlap=overlap, load_average=load_average, generate_s=rollout.generate_s,
                                env_s=rollout.env_s, generate_calls=rollout.generate_calls)
    if median_of(benchmark) is None:
        return
    medians[f"schedule/{overlap}"] = median_of(benchmark)
    record_ratio(benchmark, "wall_s", median_of(benchmark))
    record_ratio(benchmark, "generate_s", rollout.generate_s)
    record_ratio(benchmark, "env_wait_s", rollout.env_s)
    if overlap and "schedule/False" in medians:
        env_steps_s = rollout.generate_calls * SLEEP_S  # one part's step per generation call
        record_ratio(benchmark, "hidden_share", (medians["schedule/False"] - median_of(benchmark)) / env_steps_s)
        record_ratio(benchmark, "off_over_on", medians["schedule/False"] / median_of(benchmark))
