"""The batched episode loop with scripted generators (no model): rows, episodes, waves."""

import random
import re

import numpy as np
import pytest

from milegpo.credit import SINK, estimate, presets
from milegpo.envs import HouseholdEnv, SequentialPool, household_tasks
from milegpo.rollout import EpisodeRunner, episode_metrics

from ..envs.text_games import Corridor


def _admissible(prompt: str) -> list[str]:
    return re.findall(r"'([^']*)'", prompt.split("current situation are:")[1].split("\n")[0])


def expert_generator(runner, tasks, group_size, p_expert=0.7, seed=0):
    """Plays a shadow copy of each episode: the expert's action with probability p_expert, else a random one.

    It follows the call schedule the runner documents: waves of ``pool.n // group_size`` groups; in a wave,
    the calls cycle over ``runner.part_slots`` and skip a part without live episodes; a call holds the live
    episodes of its part in slot order."""
    rng = random.Random(seed)
    shadows = []
    for t in tasks:
        for _ in range(group_size):
            env = HouseholdEnv()
            env.reset(t)
            shadows.append(env)
    per_wave = (runner.pool.n // group_size) * group_size
    state = {"wave": 0, "next": 0}

    def live_of(part, base):
        return [base + s for s in part if not shadows[base + s].done]

    def next_call():
        while state["wave"] * per_wave < len(shadows):
            base = state["wave"] * per_wave
            parts = runner.part_slots(min(per_wave, len(shadows) - base))
            for _ in range(len(parts)):
                k = state["next"]
                state["next"] = (k + 1) % len(parts)
                live = live_of(parts[k], base)
                if live:
                    return live
            state["wave"], state["next"] = state["wave"] + 1, 0
        raise AssertionError("a generation call after every episode ended")

    def generate(prompts):
        live = next_call()
        assert len(live) == len(prompts)
        texts = []
        for s, p in zip(live, prompts):
            adm = _admissible(p)
            assert adm == shadows[s].admissible
            a = shadows[s].expert_action() if rng.random() < p_expert else rng.choice(adm + ["dance"])
            texts.append(f"<think>ok</think><action>{a}</action>")
            shadows[s].step(a)
        return [[1, 2]] * len(prompts), [[3, 4, 5]] * len(prompts), None, texts

    return generate


def test_episode_loop_rows_are_a_valid_step_batch():
    tasks = household_tasks("train", 3, horizon=8)
    runner = EpisodeRunner(SequentialPool(12), history_length=2, horizon=8)
    out = runner.run(tasks, 4, expert_generator(runner, tasks, 4))
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
        assert rows[-1].milestone or not e.won  # the win is the household's last subgoal (issue 47)
    assert arr["success"].any() and not arr["success"].all()
    assert arr["invalid"].any()
    assert np.array_equal(arr["milestone"], batch.milestone.numpy()) and arr["milestone"].any()
    assert not (arr["milestone"] & arr["invalid"]).any()
    res = estimate(batch, "milegpo", presets.ALFWORLD, "full")
    assert np.isfinite(res.advantages.numpy()).all()
    m = episode_metrics(out.episode_summaries())
    assert 0 < m["success_rate"] < 1 and 0 < m["invalid_action_rate"] < 1


def test_waves_and_group_ids():
    tasks = household_tasks("train", 5, horizon=3)
    runner = EpisodeRunner(SequentialPool(4), horizon=3)  # 2 groups of 2 per wave -> 3 waves
    out = runner.run(tasks, 2, expert_generator(runner, tasks, 2, p_expert=0.0))
    assert sorted({e.group for e in out.episodes}) == [0, 1, 2, 3, 4]
    assert sorted(e.traj for e in out.episodes) == list(range(10))
    assert all(e.task.task_id == tasks[e.group].task_id for e in out.episodes)
    out.step_batch()


def test_the_loop_sketches_every_state_once_when_similarity_is_on():
    """With ``state_similarity`` the loop keeps one sketch per key it recorded (states and non-sink
    next_states), each the sketch of that observation's text; the merge reads them. Off: no sketches, the
    same rows."""
    from milegpo.credit import SketchTable, StateSimilarity, merge_similar_states

    tasks = household_tasks("train", 2, horizon=6)
    similarity = StateSimilarity(0.8)
    runner_on = EpisodeRunner(SequentialPool(6), horizon=6, state_similarity=similarity)
    on = runner_on.run(tasks, 3, expert_generator(runner_on, tasks, 3, seed=1))
    runner_off = EpisodeRunner(SequentialPool(6), horizon=6)
    off = runner_off.run(tasks, 3, expert_generator(runner_off, tasks, 3, seed=1))
    assert off.sketches == {} and [r.state for r in off.rows] == [r.state for r in on.rows]
    keys = {r.state for r in on.rows} | {r.next_state for r in on.rows if r.next_state != SINK}
    assert set(on.sketches) == keys
    first = on.rows[0]
    env = HouseholdEnv()
    obs, _, info = env.reset(tasks[first.group])
    # the sketch is of the state anchor's text (what the key hashes: tracked+actions by default)
    assert info["state_key"] == first.state and np.array_equal(on.sketches[first.state].bands,
                                                                similarity.sketch(info["state_text"]).bands)
    merged = merge_similar_states(on.step_batch(), SketchTable.from_sketches(on.sketches), similarity)
    assert len(merged) == len(on.rows)


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
    runner = EpisodeRunner(SequentialPool(4), horizon=4)
    out = runner.run(tasks, 2, expert_generator(runner, tasks, 2))
    assert all(e.score is None for e in out.episodes)
    assert "score" not in episode_metrics(out.episode_summaries())


def test_the_prompt_shows_the_trackers_context_and_the_rows_key_the_anchor():
    """State anchors (issue 31): key and prompt are set apart (``state_anchor``, ``show_state_context``)."""
    from milegpo.envs import state_key

    tasks = household_tasks("train", 1, horizon=5)
    seen: dict[tuple, list] = {}
    rows: dict[tuple, list] = {}
    for anchor in ("observation", "tracked+actions"):
        for show in (False, True):
            runner = EpisodeRunner(SequentialPool(2), horizon=5, state_anchor=anchor, show_state_context=show)
            prompts: list = []
            inner = expert_generator(runner, tasks, 2, seed=3)

            def generate(batch, inner=inner, prompts=prompts):
                prompts.extend(batch)
                return inner(batch)

            rows[anchor, show] = [r.state for r in runner.run(tasks, 2, generate).rows]
            seen[anchor, show] = prompts
    # the context line follows the observation only when shown; the key does not depend on the prompt
    assert all("Items in hand (status):" in p for p in seen["observation", True])
    assert not any("Items in hand (status):" in p for p in seen["observation", False])
    assert "Location: middle of a room. Items in hand (status): nothing." in seen["tracked+actions", True][0]
    assert rows["observation", True] == rows["observation", False]
    assert rows["tracked+actions", True] == rows["tracked+actions", False] != rows["observation", False]
    env = HouseholdEnv()
    env.set_state_anchor("observation")
    obs, _, _ = env.reset(tasks[0])
    assert rows["observation", False][0] == state_key(obs)  # the key of runs before anchors


def test_constrain_actions_hands_each_prompt_its_admissible_actions():
    """``constrain_actions=True``: ``generate(prompts, admissible)``, ``admissible[i]`` the actions the prompt lists
    (what a backend constrains the row to); off: ``generate(prompts)``, the same rollout for the same choices."""
    tasks = household_tasks("train", 2, horizon=4)

    def runs(constrain: bool):
        runner = EpisodeRunner(SequentialPool(4), horizon=4, constrain_actions=constrain)
        plain = expert_generator(runner, tasks, 2, p_expert=0.5)
        seen = []

        def generate(prompts, *admissible):
            assert len(admissible) == (1 if constrain else 0)
            if constrain:
                assert [_admissible(p) for p in prompts] == admissible[0]
                seen.extend(admissible[0])
            return plain(prompts)

        return runner.run(tasks, 2, generate), seen

    on, seen = runs(True)
    off, _ = runs(False)
    assert seen and all(seen)
    assert [(r.state, r.action, r.invalid) for r in on.rows] == [(r.state, r.action, r.invalid) for r in off.rows]


def test_constrain_query_hands_each_prompt_its_goal_words():
    """``constrain_query=True``: ``generate(prompts, admissible, query_words)``, ``query_words[i]`` the words of
    prompt ``i``'s goal (:func:`milegpo.envs.base.goal_words`); without constrain_actions it is refused."""
    from milegpo.envs.base import goal_words

    tasks = household_tasks("train", 2, horizon=4)
    runner = EpisodeRunner(SequentialPool(4), horizon=4, constrain_actions=True, constrain_query=True)
    plain = expert_generator(runner, tasks, 2, p_expert=0.5)
    seen = []

    def generate(prompts, admissible, query_words):
        assert len(query_words) == len(prompts) == len(admissible)
        seen.extend(zip(prompts, query_words))
        return plain(prompts)

    runner.run(tasks, 2, generate)
    goals = {goal_words(HouseholdEnv().reset(t)[2]["goal"]) for t in tasks}
    assert seen and len(goals) == 2
    for prompt, words in seen:
        text = prompt if isinstance(prompt, str) else prompt[-1]["content"]
        assert words in goals and all(w in text.lower() for w in words), (words, text)
    with pytest.raises(ValueError, match="constrain_query needs constrain_actions"):
        EpisodeRunner(SequentialPool(4), horizon=4, constrain_query=True)


class _ShownCorridor(Corridor):
    """The corridor with a prompt list of its own (``info["prompt_actions"]``), as ScienceWorld gives templates."""

    def _reset(self, task):
        obs, admissible, info = super()._reset(task)
        return obs, admissible, {**info, "prompt_actions": ["walk OBJ", "OBJ is one of: right"]}

    def _step(self, action):
        obs, reward, won, admissible, info = super()._step(action)
        return obs, reward, won, admissible, {**info, "prompt_actions": ["walk OBJ", "OBJ is one of: right"]}


def test_the_prompt_shows_a_worlds_prompt_actions_and_parses_against_its_admissible_list():
    from milegpo.envs import Task, register, unregister

    register("shown-corridor", _ShownCorridor)
    try:
        tasks = [Task("shown-corridor/0", env="shown-corridor", seed=0, horizon=5, options=(("length", 2),))]
        prompts: list = []

        def generate(batch):
            prompts.extend(batch)
            return [[1]] * len(batch), [[2]] * len(batch), None, ["<action>Walk  Right</action>"] * len(batch)

        rollout = EpisodeRunner(SequentialPool(2), horizon=5, prompt_style="compact").run(tasks, 2, generate)
    finally:
        unregister("shown-corridor")
    assert prompts and all(p.endswith("Actions: walk OBJ, OBJ is one of: right") for p in prompts)
    assert not any("wait" in p for p in prompts)  # the admissible list is not shown
    assert all(r.action == "walk right" and not r.invalid for r in rollout.rows)  # matched against it
    assert [ep.won for ep in rollout.episodes] == [True, True]
