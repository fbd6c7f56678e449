"""The step prompt in both styles, and the episode loop rendering it (a scripted generator, no model)."""

import pytest

from milegpo.envs import household_tasks
from milegpo.rollout import EpisodeRunner, render_prompt


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

