"""The episode loop's overlap of generation and environment steps: the same rollout with and without
workers and overlap, the step really in flight while the next part generates, and the lockstep of the
generation calls across (simulated) ranks."""

from __future__ import annotations

import dataclasses
import threading
import zlib

import pytest

from milegpo.envs import household_tasks
from milegpo.envs.pool import EnvPool, SequentialPool
from milegpo.rollout import EpisodeRunner

from .scripted import SETTINGS, admissible_in, play, sampler, signature

def household_mix(n: int, horizon: int = 7):
    """Tasks of different lengths, so that parts empty at different times."""
    tasks = household_tasks("train", n, horizon=horizon)
    return [dataclasses.replace(t, horizon=h) for t, h in zip(tasks, [horizon, 3, horizon - 1, 2, horizon][:n])]


@pytest.mark.parametrize("parts", [2, 3])
def test_household_rollout_is_the_same_with_and_without_workers_and_overlap(parts):
    tasks = household_mix(5)
    # 12 slots for 5 groups of 3: two waves (4 groups, then 1)
    ref = play(SETTINGS, tasks, 3, 12, parts=parts)
    assert len(ref.episodes) == 15 and ref.rows and any(r.invalid for r in ref.rows)
    ref.step_batch()


def test_the_parts_set_the_batches_so_they_change_a_sampled_rollout():
    """The sampler above is sensitive to how prompts are split into calls (so the equalities above are not
    trivial): parts=1 and parts=2 give other actions."""
    tasks = household_mix(2)
    one, two = sampler(0), sampler(0)
    rollouts = [EpisodeRunner(SequentialPool(8), parts=parts).run(tasks, 4, gen) for parts, gen in ((1, one), (2, two))]
    assert len(one.calls[0]) == 8 and [len(c) for c in two.calls[:2]] == [4, 4]
    assert [r.action for r in rollouts[0].rows] != [r.action for r in rollouts[1].rows]


def test_part_slots_are_fixed_contiguous_ranges():
    runner = EpisodeRunner(SequentialPool(1), parts=3)
    assert runner.part_slots(8) == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert runner.part_slots(2) == [[0], [1], []]
    assert EpisodeRunner(SequentialPool(1), parts=1).part_slots(3) == [[0, 1, 2]]
    with pytest.raises(ValueError, match="parts must be an int >= 1"):
        EpisodeRunner(parts=0)


def test_with_overlap_the_pool_plays_one_part_while_the_next_generates():
    """No timing: the generator looks at the pool. With the overlap, the other part's step is in flight
    during every call but the first of the wave; without it, never."""
    tasks = household_tasks("train", 2, horizon=4)
    for overlap in (True, False):
        pool = EnvPool(8, num_workers=2, step_timeout=60)
        in_flight = []
        gen = sampler(1, p_invalid=1.0)  # never wins: every episode lasts 4 steps

        def generate(prompts):
            in_flight.append(pool._pending is not None)
            return gen(prompts)

        try:
            out = EpisodeRunner(pool, parts=2, overlap=overlap).run(tasks, 4, generate)
        finally:
            pool.close()
        assert len(in_flight) == out.generate_calls == 8  # 4 steps x 2 parts
        assert in_flight == ([False] + [True] * 7 if overlap else [False] * 8)


def test_generate_must_answer_every_prompt():
    def short(prompts):
        return [[1]] * len(prompts), [[2]] * len(prompts), None, ["<action>look</action>"] * (len(prompts) - 1)

    with pytest.raises(ValueError, match="generate returned 1 texts for 2 prompts"):
        EpisodeRunner(SequentialPool(4)).run(household_tasks("train", 1, horizon=2), 4, short)


def test_default_pool_is_made_for_the_tasks_kinds():
    runner = EpisodeRunner(num_env_workers="auto")
    runner.run(household_tasks("train", 1, horizon=1), 2, sampler(0))
    assert isinstance(runner.pool, SequentialPool)  # household steps are cheaper than a round trip
    runner = EpisodeRunner(num_env_workers=2)
    try:
        runner.run(household_tasks("train", 1, horizon=1), 2, sampler(0))
        assert isinstance(runner.pool, EnvPool) and runner.pool.num_workers == 2
    finally:
        runner.close()


# ------------------------------------------------------------------ lockstep across ranks
class FakeRanks:
    """Threads as ranks: ``sync_any`` is an all-reduce OR, ``generate`` a collective that every rank must
    enter together (a rank that skipped or added a call breaks the barrier: the test fails, it never hangs)."""

    def __init__(self, world: int, timeout: float = 60.0) -> None:
        self.world = world
        self.barrier = threading.Barrier(world, timeout=timeout)
        self.flags = [False] * world
        self.lock = threading.Lock()
        self.log: list[list[tuple]] = [[] for _ in range(world)]

    def sync_any(self, rank: int):
        def sync(flag: bool) -> bool:
            self.flags[rank] = bool(flag)
            self.barrier.wait()
            answer = any(self.flags)
            self.barrier.wait()
            self.log[rank].append(("sync", answer))
            return answer

        return sync

    def generate(self, rank: int, policy):
        def generate(prompts):
            self.barrier.wait()  # the collective: every rank calls it, in the same order
            self.log[rank].append(("generate",))
            return policy(prompts)

        return generate


def greedy(prompts):
    """A policy that is a function of the prompt only (so extra dummy calls change nothing)."""
    texts = []
    for p in prompts:
        actions = admissible_in(p) or ["look"]
        texts.append(f"<action>{actions[zlib.crc32(p.encode()) % len(actions)]}</action>")
    return [[1]] * len(prompts), [[2]] * len(prompts), None, texts


@pytest.mark.parametrize("overlap", [True, False])
def test_ranks_stay_in_lockstep_with_the_overlap(overlap):
    # rank 0: two waves of long episodes; rank 1: one short wave; rank 2: no tasks at all
    rank_tasks = [household_mix(3, horizon=6), [dataclasses.replace(household_tasks("id", 1)[0], horizon=2)], []]
    alone = []
    for tasks in rank_tasks:
        runner = EpisodeRunner(SequentialPool(4), parts=2, overlap=overlap)
        alone.append(signature(runner.run(tasks, 2, greedy)) if tasks else None)
    ranks = FakeRanks(3)
    results: list = [None] * 3
    errors: list = []

    def rank_main(rank):
        pool = EnvPool(4, num_workers=2, step_timeout=60) if rank == 0 else SequentialPool(4)
        try:
            runner = EpisodeRunner(pool, parts=2, overlap=overlap)
            results[rank] = runner.run(rank_tasks[rank], 2, ranks.generate(rank, greedy), ranks.sync_any(rank))
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append((rank, e))
            ranks.barrier.abort()
        finally:
            pool.close()

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    assert ranks.log[0] == ranks.log[1] == ranks.log[2]  # same syncs, same answers, same generation calls
    n_calls = sum(1 for e in ranks.log[0] if e[0] == "generate")
    assert all(r.generate_calls == n_calls for r in results)
    assert results[2].rows == [] and results[2].episodes == []
    for rank in (0, 1):  # the real episodes are those of the rank alone (the dummy calls discarded)
        rows, episodes, _ = signature(results[rank])
        assert (rows, episodes) == alone[rank][:2]
    assert results[1].generate_calls > alone[1][2]  # rank 1 made dummy calls while rank 0 played on


def test_a_pool_without_step_async_still_plays():
    class StepOnly:
        def __init__(self, n):
            self._pool = SequentialPool(n)
            self.n = n

        def reset(self, tasks):
            return self._pool.reset(tasks)

        def step(self, actions):
            return self._pool.step(actions)

        def close(self):
            self._pool.close()

    tasks = household_mix(2)
    ref = EpisodeRunner(SequentialPool(6)).run(tasks, 3, sampler(2))
    got = EpisodeRunner(StepOnly(6)).run(tasks, 3, sampler(2))
    assert signature(got) == signature(ref)
