"""Action parsing: ``<action>...</action>`` out of a completion, checked against the admissible actions."""

from __future__ import annotations

import re
from typing import NamedTuple, Sequence

from ..envs.base import match_action

_ACTION = re.compile(r"<action>(.*?)</action>", re.DOTALL | re.IGNORECASE)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_WS = re.compile(r"\s+")


class ParsedAction(NamedTuple):
    """action: what is sent to the environment (the admissible spelling when it matched, else the
    parsed text, else ""); valid: parsed and admissible (and thought, if required); reason: why not."""

    action: str
    valid: bool
    reason: str


def parse_action(completion: str, admissible: Sequence[str], require_think: bool = False) -> ParsedAction:
    """Parse one completion.

    The last complete ``<action>...</action>`` block is the action; matching against
    ``admissible`` ignores case and runs of whitespace. Invalid (``valid=False``) when
    there is no action block ("no_action"), the action is not admissible
    ("not_admissible"; a template entry such as ``search[<your query>]`` admits ``search[any words]``,
    see :func:`milegpo.envs.base.match_action`), or ``require_think`` and there is no ``<think>...</think>``
    block ("no_think"). An invalid action still goes to the environment (which answers
    "Nothing happens."), so the episode spends the step, as in ALFWorld.

    An empty ``admissible`` is a free-text state (a gymnasium or OpenEnv environment that lists no admissible
    actions, :class:`milegpo.envs.gym.GymTextEnv`): any non-empty action text is taken as written (whitespace
    collapsed), and the environment tells whether it was valid.
    """
    found = _ACTION.findall(completion)
    if not found:
        return ParsedAction("", False, "no_action")
    raw = _WS.sub(" ", found[-1]).strip()
    if not admissible:
        if not raw:
            return ParsedAction("", False, "no_action")
        match = raw
    else:
        match = match_action(raw, admissible, loose=True)
    if match is None:
        return ParsedAction(raw, False, "not_admissible")
    if require_think and not _THINK.search(completion):
        return ParsedAction(match, False, "no_think")
    return ParsedAction(match, True, "")


__all__ = ["ParsedAction", "parse_action"]
