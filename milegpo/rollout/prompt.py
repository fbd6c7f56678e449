"""The agent prompt of one step (spec section 10): task, recent history, observation, actions.

The model sees the task, the ``history_length`` most recent (observation, action)
pairs, the current observation and the admissible actions, and is asked to reason in
``<think>...</think>`` and to answer with one action in ``<action>...</action>``
(the verl-agent ALFWorld template, which the paper uses).

``style="webshop"`` is verl-agent's WebShop template: the page's texts after the instruction, each
quoted (its ``format_obs``), the admissible actions one per line, no history at step 0, and no
history either when the prompt would exceed 13,000 characters (as verl-agent does).

``style="compact"`` drops the instructions and shows the same facts in few tokens
(task, recent ``[observation -> action]`` pairs, observation, actions): for the tiny
policies trained from scratch on CPU, whose attention finds the action list faster in
a short prompt; the answer format (``<think>``, ``<action>``) is learned in the warm start. A WebShop page
shows there without its instruction (the task line says it once).
"""

from __future__ import annotations

from typing import Sequence

from ..envs.anchors import observed_text

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

#: verl-agent's WebShop prompts (agent_system/environments/prompts/webshop.py): the first step, then with history
_WEBSHOP_INTRO = "\nYou are an expert autonomous agent operating in the WebShop e\u2011commerce environment."
_WEBSHOP_TAIL = (
    "Your admissible actions of the current situation are: \n[\n{actions}\n].\n\n"
    "Now it's your turn to take one action for the current step.\n"
    "You should first reason step-by-step about the current situation, then think carefully which admissible "
    "action best advances the shopping goal. This reasoning process MUST be enclosed within <think> </think> tags. \n"
    "Once you've finished your reasoning, you should choose an admissible action for current step and present it "
    "within <action> </action> tags.\n"
)
WEBSHOP_TEMPLATE_NO_HIS = (_WEBSHOP_INTRO + " \nYour task is to: {goal}.\nYour current observation is: {observation}.\n"
                           + _WEBSHOP_TAIL)
WEBSHOP_TEMPLATE = (
    _WEBSHOP_INTRO + "\nYour task is to: {goal}.\n"
    "Prior to this step, you have already taken {n} step(s). Below are the most recent {k} observations and the "
    "corresponding actions you took: {pairs}\n"
    "You are now at step {step} and your current observation is: {observation}.\n" + _WEBSHOP_TAIL
)
#: verl-agent drops the history of a WebShop prompt longer than this many characters
WEBSHOP_MAX_CHARS = 13000

#: the compact step prompt (``style="compact"``)
COMPACT_TEMPLATE = "Task: {goal}\nBefore: {history}\nNow: {observation}\nActions: {actions}"

#: the prompt styles :func:`render_prompt` knows
PROMPT_STYLES = ("alfworld", "compact", "webshop")

HISTORY = (
    "Prior to this step, you have already taken {n} step(s). Below are the most recent {k} observations and "
    "the corresponding actions you took: {pairs}\n"
)


def render_prompt(goal: str, observation: str, admissible: Sequence[str], history: Sequence[tuple[str, str]],
                  step: int, history_length: int = 2, style: str = "alfworld", context: str = "") -> str:
    """The text of one step's prompt.

    goal: the task sentence; observation: the current observation; admissible: the
    admissible actions; history: all (observation, action) pairs of the episode so far,
    oldest first (only the last ``history_length`` are shown); step: steps taken so far;
    style: ``alfworld`` (the verl-agent template), ``webshop`` (verl-agent's WebShop template) or
    ``compact`` (see the module docstring); context: the state tracker's context line
    (``info["state_context"]``, :mod:`milegpo.envs.anchors`), shown on its own line after the current
    observation ("" shows none, the prompt of old runs).
    """
    recent = list(history)[-history_length:] if history_length > 0 else []
    if style == "webshop":
        return _webshop_prompt(goal, observation, admissible, recent, step, context)
    if style == "compact":
        history = " ".join(f"[{_compact_page(o, goal)} -> {a}]" for o, a in recent)
        return COMPACT_TEMPLATE.format(goal=goal.strip(), history=history,
                                       observation=observed_text(_compact_page(observation, goal), context),
                                       actions=", ".join(admissible))
    if style != "alfworld":
        raise ValueError(f"prompt style must be one of {PROMPT_STYLES}, got {style!r}")
    hist = HISTORY.format(n=step, k=len(recent), pairs=_pairs(recent, step)) if recent else ""
    return TEMPLATE.format(goal=goal.strip(), history=hist, step=step + 1,
                           observation=observed_text(observation.strip(), context),
                           actions=", ".join(f"'{a}'" for a in admissible))


def _pairs(recent: Sequence[tuple[str, str]], step: int) -> str:
    first = step - len(recent) + 1
    return " ".join(f"[Observation {first + i}: '{o.strip()}', Action {first + i}: '{a}']" for i, (o, a) in enumerate(recent))


def _texts_after_instruction(observation: str, goal: str) -> list[str] | None:
    """A WebShop page's texts after its instruction (``"... [SEP] Instruction: [SEP] <goal> [SEP] ..."``); None
    for an observation that does not hold ``goal`` as one of its texts (any other world's)."""
    parts = observation.split(" [SEP] ")
    return parts[parts.index(goal) + 1:] if goal in parts else None


def _compact_page(observation: str, goal: str) -> str:
    """The compact prompt's observation: a WebShop page without its instruction (the task line states it once),
    any other observation unchanged."""
    texts = _texts_after_instruction(observation, goal)
    return (observation if texts is None else " [SEP] ".join(texts)).strip()


def webshop_observation(observation: str, goal: str) -> str:
    """verl-agent's ``format_obs``: the page's texts after the instruction, each quoted, joined by ``" [SEP] "``."""
    texts = _texts_after_instruction(observation, goal)
    return observation if texts is None else " [SEP] ".join(f"'{p}'" for p in texts)


def _webshop_prompt(goal: str, observation: str, admissible: Sequence[str], recent, step: int, context: str) -> str:
    actions = "\n".join(f"'{a}'," for a in admissible)
    shown = observed_text(webshop_observation(observation, goal), context)
    first = WEBSHOP_TEMPLATE_NO_HIS.format(goal=goal, observation=shown, actions=actions)
    if not recent:
        return first
    pairs = _pairs([(webshop_observation(o, goal), a) for o, a in recent], step)
    text = WEBSHOP_TEMPLATE.format(goal=goal, n=step, k=len(recent), pairs=pairs, step=step + 1,
                                   observation=shown, actions=actions)
    return first if len(text) > WEBSHOP_MAX_CHARS else text


def shown_actions(info: dict) -> list[str]:
    """The actions a prompt shows for the state of ``info`` (a reset's or step's): ``info["prompt_actions"]`` where
    the world gives it (its admissible list is too long for a prompt: ScienceWorld shows its action templates and
    the objects in view, :func:`milegpo.envs.scienceworld.actions.prompt_actions`), else
    ``info["admissible_actions"]``. Parsing and constrained decoding still use the admissible list."""
    shown = info.get("prompt_actions")
    return list(info.get("admissible_actions", []) if shown is None else shown)


def as_model_input(text: str, conversational: bool) -> str | list[dict]:
    """The prompt in the form TRL tokenizes: chat messages when the tokenizer has a chat template, else text."""
    return [{"role": "user", "content": text}] if conversational else text


__all__ = ["TEMPLATE", "COMPACT_TEMPLATE", "WEBSHOP_TEMPLATE", "WEBSHOP_TEMPLATE_NO_HIS", "PROMPT_STYLES", "HISTORY",
           "render_prompt", "shown_actions", "webshop_observation", "as_model_input"]
