"""Prompt, parsing and the episode loop, with scripted generators (no model)."""

import random
import re

import numpy as np
import pytest

from milegpo.credit import SINK, estimate, presets
from milegpo.envs import HouseholdEnv, household_tasks
from milegpo.rollout import EpisodeRunner, episode_metrics, parse_action, render_prompt


def test_parse_action():
    adm = ["go to cabinet 1", "look"]
    assert parse_action("<think>x</think><action> Go  to cabinet 1 </action>", adm) == ("go to cabinet 1", True, "")
    assert parse_action("<action>look</action> then <action>go to cabinet 1</action>", adm).action == "go to cabinet 1"
    assert parse_action("go to cabinet 1", adm) == ("", False, "no_action")
    assert parse_action("<action>fly</action>", adm) == ("fly", False, "not_admissible")
    assert parse_action("<action>look</action>", adm, require_think=True) == ("look", False, "no_think")
    assert parse_action("<action>look", adm).valid is False  # truncated


def test_prompt_shows_last_two_pairs_and_actions():
    text = render_prompt("put a mug in sink.", "You see a mug.", ["take mug 1", "look"],
                         [("o1", "a1"), ("o2", "a2"), ("o3", "a3")], step=3, history_length=2)
    assert "'o2'" in text and "'o3'" in text and "'o1'" not in text
    assert "['take mug 1', 'look']" in text and "<think>" in text and "<action>" in text
    assert "put a mug in sink." in text and "step 4" in text
    assert "Prior to this step" not in render_prompt("g", "o", ["a"], [], 0)


def test_compact_prompt_shows_the_same_facts_without_instructions():
    text = render_prompt("put a mug in sink.", "You see a mug.", ["take mug 1", "look"],
                         [("o1", "a1"), ("o2", "a2"), ("o3", "a3")], step=3, history_length=2, style="compact")
    assert text == ("Task: put a mug in sink.\nBefore: [o2 -> a2] [o3 -> a3]\nNow: You see a mug.\n"
                    "Actions: take mug 1, look")
    assert render_prompt("g", "o", ["a"], [], 0, style="compact") == "Task: g\nBefore: \nNow: o\nActions: a"
    with pytest.raises(ValueError, match="prompt style must be one of"):
        render_prompt("g", "o", ["a"], [], 0, style="fancy")
    # the runner renders its prompts in the configured style
    tasks = household_tasks("train", 1, horizon=3)
    seen = []

    def generate(prompts):
        seen.extend(prompts)
        return [[1]] * len(prompts), [[2]] * len(prompts), None, ["<action>look</action>"] * len(prompts)

    EpisodeRunner(history_length=1, horizon=3, prompt_style="compact").run(tasks, 2, generate)
    assert len(seen) == 6 and all(p.startswith("Task: ") and "\nActions: " in p for p in seen)
    assert seen[-1].split("\nNow: ")[0].endswith("-> look]")


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
