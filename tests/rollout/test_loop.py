"""The batched episode loop with scripted generators (no model): rows, episodes, waves."""

import random
import re

import numpy as np

from milegpo.credit import SINK, estimate, presets
from milegpo.envs import HouseholdEnv, household_tasks
from milegpo.rollout import EpisodeRunner, episode_metrics


def _admissible(prompt: str) -> list[str]:
    return re.findall(r"'([^']*)'", prompt.split("current situation are:")[1].split("\n")[0])


def expert_generator(tasks, group_size, p_expert=0.7, seed=0):
    """Plays a shadow copy of each episode: the expert's action with probability p_expert, else a random one."""
    rng = random.Random(seed)
    shadows = []
    for t in tasks:
        for _ in range(group_size):
            env = HouseholdEnv()
            env.reset(t)
            shadows.append(env)
    live = list(range(len(shadows)))

    def generate(prompts):
        nonlocal live
        live = [s for s in live if not shadows[s].done]
        texts = []
        for s, p in zip(live, prompts):
            adm = _admissible(p)
            a = shadows[s].expert_action() if rng.random() < p_expert else rng.choice(adm + ["dance"])
            texts.append(f"<think>ok</think><action>{a}</action>")
            shadows[s].step(a)
        return [[1, 2]] * len(prompts), [[3, 4, 5]] * len(prompts), None, texts

    return generate


def test_episode_loop_rows_are_a_valid_step_batch():
    tasks = household_tasks("train", 3, horizon=8)
    runner = EpisodeRunner(history_length=2, horizon=8)
    out = runner.run(tasks, 4, expert_generator(tasks, 4))
    assert len(out.episodes) == 12
    assert sum(e.length for e in out.episodes) == len(out.rows)
    batch = out.step_batch()  # validates: t = 0..T-1, next_state chain, SINK on wins
    arr = out.step_arrays()
    for e in out.episodes:
        rows = [r for r in out.rows if r.traj == e.traj]
        assert [r.t for r in rows] == list(range(e.length))
        assert all(r.success == e.won for r in rows)
        assert (rows[-1].next_state == SINK) == e.won
        assert e.length <= 8
    assert arr["success"].any() and not arr["success"].all()
    assert arr["invalid"].any()
    res = estimate(batch, "milegpo", presets.ALFWORLD, "full")
    assert np.isfinite(res.advantages.numpy()).all()
    m = episode_metrics(out.episode_summaries())
    assert 0 < m["success_rate"] < 1 and 0 < m["invalid_action_rate"] < 1


def test_waves_and_group_ids():
    from milegpo.envs import SequentialPool

    tasks = household_tasks("train", 5, horizon=3)
    runner = EpisodeRunner(SequentialPool(4), horizon=3)  # 2 groups of 2 per wave -> 3 waves
    out = runner.run(tasks, 2, expert_generator(tasks, 2, p_expert=0.0))
    assert sorted({e.group for e in out.episodes}) == [0, 1, 2, 3, 4]
    assert sorted(e.traj for e in out.episodes) == list(range(10))
    assert all(e.task.task_id == tasks[e.group].task_id for e in out.episodes)
    out.step_batch()


def test_score_metric_is_the_mean_score_x_100_where_the_world_scores_episodes():
    import pytest

    from milegpo.envs import Task
    from milegpo.rollout import final_score

    household = [("t", True, 3, 0, 10.0, None), ("t", False, 5, 1, 0.0, None)]
    assert "score" not in episode_metrics(household)
    shop = [("beauty", True, 3, 0, 10.0, 1.0), ("beauty", False, 5, 1, 0.0, 0.5), ("tools", False, 8, 8, 0.0, 0.0)]
    m = episode_metrics(shop, prefix="episode/")
    assert m["episode/score"] == pytest.approx(50.0) and m["episode/success_rate"] == pytest.approx(1 / 3)
    assert "score" not in episode_metrics([s[:5] for s in shop])  # summaries without a score field still read
    webshop = Task(task_id="webshop/x/test/0", env="webshop", seed=0)
    assert final_score(webshop, {"score": 0.75}) == 0.75
    assert final_score(webshop, {"error": "environment error", "truncated": True}) == 0.0  # the pool ended it
    assert final_score(household_tasks("train", 1)[0], {"score": 3}) is None  # household: no score
    for bad in ({}, {"score": 1.5}, {"score": "1"}):
        with pytest.raises(ValueError, match="webshop/x/test/0.*info\\['score'\\] in \\[0, 1\\]"):
            final_score(webshop, bad)


def test_household_episodes_have_no_score():
    tasks = household_tasks("train", 2, horizon=4)
    out = EpisodeRunner(horizon=4).run(tasks, 2, expert_generator(tasks, 2))
    assert all(e.score is None for e in out.episodes)
    assert "score" not in episode_metrics(out.episode_summaries())
