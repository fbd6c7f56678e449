"""Pools: same-game groups, batched steps, crashed and hung workers, the in-process twin."""

from __future__ import annotations

import dataclasses
import os
import signal
import time

import pytest

from milegpo.envs import EnvError, HouseholdEnv, household_tasks, state_key
from milegpo.envs.pool import EnvPool, SequentialPool, auto_env_workers, env_workers, make_pool


@pytest.fixture(params=["sequential", "process"])
def pool(request):
    p = SequentialPool(4) if request.param == "sequential" else EnvPool(4, num_workers=2, step_timeout=20)
    yield p
    p.close()


def test_group_plays_one_game_to_a_win(pool):
    task = household_tasks("train", 1, start=11)[0]
    walk = HouseholdEnv().walkthrough(task)
    first = pool.reset_group(task, 4)
    assert len({o for o, _, _ in first}) == 1
    assert len({i["game_id"] for _, _, i in first}) == 1
    assert len({i["state_key"] for _, _, i in first}) == 1
    for a in walk:
        outs = pool.step([a] * 4)
    assert all(o.won and o.done and o.reward == 10.0 for o in outs)
    assert pool.live_slots == []


def test_reset_groups_and_independent_episodes(pool):
    tasks = household_tasks("id", 2, start=3)
    first = pool.reset_groups(tasks, 2)
    ids = [i["game_id"] for _, _, i in first]
    assert ids[0] == ids[1] and ids[2] == ids[3] and ids[0] != ids[2]
    # slot 0 plays its walkthrough, slot 1 wastes its steps, slots 2-3 are not stepped for a while
    walk = HouseholdEnv().walkthrough(tasks[0])
    for a in walk:
        outs = pool.step({0: a, 1: "look"})
        assert outs[2] is None and outs[3] is None
    assert outs[0].won and not outs[1].done
    assert pool.live_slots == [1, 2, 3]
    with pytest.raises(ValueError, match="slot 0 has no live episode"):
        pool.step({0: "look"})
    with pytest.raises(ValueError, match="expected 4 actions"):
        pool.step(["look"])
    outs = pool.step([None, "dance", "look", "look"])
    assert outs[0] is None and outs[1].info["invalid"] and not outs[2].info["invalid"]


def test_pool_matches_a_single_env():
    task = household_tasks("ood", 1, start=5)[0]
    env = HouseholdEnv()
    walk = env.walkthrough(task)
    ref = [env.reset(task)[2]["state_key"]] + [env.step(a)[4]["state_key"] for a in walk]
    with EnvPool(2, num_workers=2) as pool:
        got = [pool.reset_group(task)[1][2]["state_key"]] + [pool.step([a, a])[1].info["state_key"] for a in walk]
    assert got == ref


def test_killed_worker_truncates_its_episodes_and_the_pool_goes_on():
    task = household_tasks("train", 1, start=4)[0]
    walk = HouseholdEnv().walkthrough(task)
    with EnvPool(4, num_workers=2, step_timeout=20) as pool:
        pool.reset_group(task)
        keys_before = [o.info["state_key"] for o in pool.step([walk[0]] * 4)]
        before = list(pool.last_obs)
        os.kill(pool.pids[0], signal.SIGKILL)  # worker 0 holds slots 0 and 2
        outs = pool.step([walk[1]] * 4)
        for s in (0, 2):
            o = outs[s]
            assert o.done and not o.won and o.reward == 0.0 and o.info["truncated"]
            assert "died" in o.info["error"] and o.info["step"] == 2
            # the state the episode was in, as its worker last keyed it (the state anchor's key, not recomputed)
            assert o.obs == before[s] and o.info["state_key"] == keys_before[s]
        assert not outs[1].done and not outs[3].done and not outs[1].info["truncated"]
        assert pool.restarts == 1 and pool.live_slots == [1, 3]
        for a in walk[2:]:
            outs = pool.step([None, a, None, a])
        assert outs[1].won and outs[3].won
        # the restarted worker plays the next group
        pool.reset_group(task)
        for a in walk:
            outs = pool.step([a] * 4)
        assert all(o.won for o in outs)


def test_episode_of_a_worker_killed_while_idle_is_reported_at_its_next_step():
    task = household_tasks("train", 1, start=4)[0]
    with EnvPool(2, num_workers=2, step_timeout=20) as pool:
        pool.reset_group(task)
        os.kill(pool.pids[1], signal.SIGKILL)
        time.sleep(0.2)
        outs = pool.step({0: "look"})  # worker 1 not asked: nothing noticed yet
        assert not outs[0].done and outs[1] is None
        outs = pool.step({1: "look"})
        assert outs[1].info["truncated"] and "died" in outs[1].info["error"]
        assert pool.restarts == 1


def test_hung_worker_times_out_and_is_replaced():
    task = household_tasks("train", 1, start=8)[0]
    with EnvPool(2, num_workers=2, step_timeout=1.0) as pool:
        pool.reset_group(task)
        hung = pool.pids[1]
        os.kill(hung, signal.SIGSTOP)
        t0 = time.monotonic()
        outs = pool.step(["look", "look"])
        assert time.monotonic() - t0 < 10
        assert not outs[0].done
        assert outs[1].done and outs[1].info["truncated"] and "timed out" in outs[1].info["error"]
        assert pool.pids[1] != hung and pool.restarts == 1
        assert pool.reset_group(task)[1][2]["game_id"] == pool.reset_group(task)[0][2]["game_id"]


def test_environment_exception_truncates_that_episode_only():
    pool = SequentialPool(2)
    task = household_tasks("train", 1)[0]
    pool.reset_group(task)

    def boom(action):
        raise RuntimeError("engine exploded")

    pool._slots.envs[0].step = boom
    outs = pool.step(["look", "look"])
    assert outs[0].info["truncated"] and "engine exploded" in outs[0].info["error"]
    assert not outs[1].done


def test_failed_reset_raises_naming_the_task(pool):
    from milegpo.envs import Task
    from milegpo.envs.base import EnvFailure

    with pytest.raises(EnvFailure, match=r"^environment 'household': reset of task 'broken' raised \w+: [^\n]*no seed"):
        pool.reset([household_tasks("train", 1)[0], Task("broken", env="household")])
    with pytest.raises(EnvError, match="unknown environment kind"):
        pool.reset([Task("x", env="nope", seed=1)])
    with pytest.raises(ValueError, match="expected 1..4 tasks"):
        pool.reset(household_tasks("train", 5))


def test_reset_on_a_dead_worker_is_retried_on_a_fresh_one():
    task = household_tasks("train", 1, start=6)[0]
    with EnvPool(2, num_workers=2, step_timeout=20) as pool:
        os.kill(pool.pids[0], signal.SIGKILL)
        time.sleep(0.2)
        first = pool.reset_group(task)
        assert first[0][2]["game_id"] == first[1][2]["game_id"] and pool.restarts == 1
        assert pool.live_slots == [0, 1]


def test_slow_environment_times_out_without_signals():
    task = household_tasks("train", 1, start=9)[0]
    slow = dataclasses.replace(task, options=(("step_delay_s", 5.0),))
    with EnvPool(2, num_workers=2, step_timeout=0.5) as pool:
        pool.reset([task, slow])
        t0 = time.monotonic()
        outs = pool.step(["look", "look"])
        assert time.monotonic() - t0 < 4
        assert not outs[0].done and outs[1].info["truncated"] and "timed out" in outs[1].info["error"]


# ------------------------------------------------------------------ asynchronous steps
def test_step_async_is_step_sent_then_collected(pool):
    task = household_tasks("train", 1, start=11)[0]
    walk = HouseholdEnv().walkthrough(task)
    pool.reset_group(task, 4)
    ref = SequentialPool(4)
    ref.reset_group(task, 4)
    for a in walk:
        pending = pool.step_async({0: a, 2: a, 3: "look"})
        with pytest.raises(RuntimeError, match="still in flight"):
            pool.step_async({1: "look"})
        with pytest.raises(RuntimeError, match="still in flight"):
            pool.reset_group(task, 4)
        outs = pending.result()
        assert pending.result() is outs  # collected once
        assert outs == ref.step({0: a, 2: a, 3: "look"})
    assert outs[0].won and outs[1] is None and pool.live_slots == [1, 3]
    with pytest.raises(ValueError, match="slot 0 has no live episode"):
        pool.step_async({0: "look"})  # bad actions raise at the send, and nothing stays in flight
    assert pool.step_async({1: "look"}).result()[1].info["step"] == 1


def test_worker_killed_while_its_step_is_in_flight():
    # every step sleeps 1 s, so the kill lands while worker 0 still holds the step (a bare "look" could be
    # answered before the signal arrives, and then nothing died in flight)
    task = dataclasses.replace(household_tasks("train", 1, start=4)[0], options=(("step_delay_s", 1.0),))
    with EnvPool(4, num_workers=2, step_timeout=20) as pool:
        pool.reset_group(task)
        pending = pool.step_async({0: "look", 1: "look"})
        os.kill(pool.pids[0], signal.SIGKILL)  # worker 0 holds slots 0 and 2
        outs = pending.result()
        assert outs[0].info["truncated"] and "died" in outs[0].info["error"] and not outs[1].done
        outs = pool.step({2: "look", 3: "look"})  # slot 2 lost its environment with the worker
        assert outs[2].info["truncated"] and not outs[3].done and pool.restarts == 1


def test_step_timeout_runs_from_the_send():
    task = household_tasks("train", 1, start=9)[0]
    slow = dataclasses.replace(task, options=(("step_delay_s", 5.0),))
    with EnvPool(2, num_workers=2, step_timeout=0.5) as pool:
        pool.reset([task, slow])
        pending = pool.step_async(["look", "look"])
        time.sleep(1.0)  # the caller generates meanwhile; the slow worker's time is spent
        t0 = time.monotonic()
        outs = pending.result()
        assert time.monotonic() - t0 < 2
        assert not outs[0].done and "timed out" in outs[1].info["error"]


# ------------------------------------------------------------------ choosing and sizing a pool
@pytest.fixture
def cpus(monkeypatch):
    def set_cpus(n, local_world_size=None):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(n)), raising=False)
        if local_world_size is None:
            monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
        else:
            monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local_world_size))

    return set_cpus


def test_auto_workers_share_the_allowed_cpus_among_the_local_processes(cpus):
    cpus(16)
    assert auto_env_workers(128) == 16 and auto_env_workers(6) == 6  # at most one per slot
    cpus(16, local_world_size=8)
    assert auto_env_workers(128) == 2
    cpus(16, local_world_size=3)
    assert auto_env_workers(128) == 5
    cpus(2, local_world_size=8)
    assert auto_env_workers(128) == 1  # never 0
    for bad in ("x", "0"):
        cpus(16, local_world_size=bad)
        with pytest.raises(ValueError, match="LOCAL_WORLD_SIZE"):
            auto_env_workers(8)


def test_auto_picks_the_pool_by_what_each_kind_declares(cpus):
    from milegpo.envs import BUILT_IN_KINDS, env_class

    cpus(3)
    assert not HouseholdEnv.step_in_workers  # its steps are cheaper than a round trip
    assert all(env_class(k).step_in_workers for k in BUILT_IN_KINDS if k != "household")
    assert env_workers("auto", 8, ["household"]) == 0
    assert env_workers("auto", 8, ["household", "webshop"]) == 3
    assert env_workers("auto", 2, ["alfworld"]) == 2
    assert env_workers(5, 4, ["household"]) == 4 and env_workers("0", 4, ["webshop"]) == 0
    with make_pool(8, "auto", ["household"]) as p:
        assert isinstance(p, SequentialPool)
    with make_pool(8, "auto", ["webshop"], step_timeout=30) as p:
        assert isinstance(p, EnvPool) and p.num_workers == 3 and p.step_timeout == 30
    with make_pool(8, 2, ["household"]) as p:
        assert isinstance(p, EnvPool) and p.num_workers == 2
    for bad in (-1, "many", True, 2.5):
        with pytest.raises(ValueError, match="num_env_workers must be 'auto' or an int >= 0"):
            env_workers(bad, 8, ["household"])
    with pytest.raises(ValueError, match="needs the environment kinds"):
        env_workers("auto", 8, [])
    with pytest.raises(EnvError, match="unknown environment kind"):
        env_workers("auto", 8, ["nope"])
    with pytest.raises(ValueError, match="0 workers is a SequentialPool"):
        EnvPool(2, num_workers=0)


def test_config_num_env_workers_is_auto_by_default():
    from trl import TrlParser

    from milegpo.trainer.config import MileGPOConfig

    base = ["--output_dir", "/tmp/milegpo-pool-test", "--report_to", "none", "--use_cpu", "true"]

    def parse(*flags):
        return TrlParser(MileGPOConfig).parse_args_and_config(base + list(flags))[0]

    assert parse().num_env_workers == "auto" and parse().rollout_parts == 2
    assert parse("--num_env_workers", "3").num_env_workers == 3
    assert parse("--num_env_workers", "auto", "--rollout_parts", "1").rollout_parts == 1
    with pytest.raises(ValueError, match=r"MileGPOConfig.num_env_workers='many': must be 'auto' or an int >= 0"):
        parse("--num_env_workers", "many")
    with pytest.raises(ValueError, match=r"MileGPOConfig.rollout_parts=0: must be >= 1"):
        parse("--rollout_parts", "0")


def test_an_open_pool_closes_its_workers_at_interpreter_exit(monkeypatch):
    """EnvPool registers its close with atexit (run before multiprocessing's exit handler kills the workers), by
    a weak reference, and close() takes it back."""
    import gc
    import types
    import weakref

    import milegpo.envs.pool as pool_module

    hooks = []
    monkeypatch.setattr(pool_module, "atexit", types.SimpleNamespace(
        register=hooks.append, unregister=lambda f: hooks.remove(f) if f in hooks else None))
    pool = EnvPool(2, num_workers=1)
    assert hooks == [pool._exit_hook]
    hooks[0]()  # what atexit calls at exit
    assert [p.exitcode for p in pool._procs] == [0]  # the worker read "close" and exited by itself
    assert hooks == []
    pool = EnvPool(2, num_workers=1)
    ref = weakref.ref(pool)
    del pool
    gc.collect()
    assert ref() is None and hooks == []  # the hook kept no pool alive; __del__ closed it
