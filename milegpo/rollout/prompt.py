"""The agent prompt of one step (spec section 10): task, recent history, observation, actions.

The model sees the task, the ``history_length`` most recent (observation, action)
pairs, the current observation and the admissible actions, and is asked to reason in
``<think>...</think>`` and to answer with one action in ``<action>...</action>``
(the verl-agent ALFWorld template, which the paper uses).
"""

from __future__ import annotations

from typing import Sequence

#: the step prompt; ``{history}`` is empty at step 0
TEMPLATE = (
    "You are an expert agent operating in a household environment.\n"
    "Your task is to: {goal}\n"
    "{history}"
    "You are now at step {step} and your current observation is: {observation}\n"
    "Your admissible actions of the current situation are: [{actions}].\n\n"
    "Now it's your turn to take an action. You should first reason step-by-step about the current situation. "
    "This reasoning process MUST be enclosed within <think> </think> tags. Once you've finished your reasoning, "
    "you should choose an admissible action for the current step and present it within <action> </action> tags."
)

HISTORY = (
    "Prior to this step, you have already taken {n} step(s). Below are the most recent {k} observations and "
    "the corresponding actions you took: {pairs}\n"
)


def render_prompt(goal: str, observation: str, admissible: Sequence[str], history: Sequence[tuple[str, str]],
                  step: int, history_length: int = 2) -> str:
    """The text of one step's prompt.

    goal: the task sentence; observation: the current observation; admissible: the
    admissible actions; history: all (observation, action) pairs of the episode so far,
    oldest first (only the last ``history_length`` are shown); step: steps taken so far.
    """
    recent = list(history)[-history_length:] if history_length > 0 else []
    hist = ""
    if recent:
        first = step - len(recent) + 1
        pairs = " ".join(f"[Observation {first + i}: '{o.strip()}', Action {first + i}: '{a}']"
                         for i, (o, a) in enumerate(recent))
        hist = HISTORY.format(n=step, k=len(recent), pairs=pairs)
    return TEMPLATE.format(goal=goal.strip(), history=hist, step=step + 1, observation=observation.strip(),
                           actions=", ".join(f"'{a}'" for a in admissible))


def as_model_input(text: str, conversational: bool) -> str | list[dict]:
    """The prompt in the form TRL tokenizes: chat messages when the tokenizer has a chat template, else text."""
    return [{"role": "user", "content": text}] if conversational else text


__all__ = ["TEMPLATE", "HISTORY", "render_prompt", "as_model_input"]
