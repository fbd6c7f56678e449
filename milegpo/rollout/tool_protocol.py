"""TRL's tool-calling protocol (``GRPOTrainer(environment_factory=...)``, TRL 1.16), as the tool runner
(:mod:`milegpo.rollout.tools`) reads it: what an environment class must define (:func:`inspect_environment`), which
of its methods are tools (:func:`environment_tools`), what ``get_reward`` may return (:func:`check_reward`), how a
generated turn parses (:func:`parse_turn`), and which text keys a state.

State keys (the ``state`` / ``next_state`` of a row): the text of what the model observed before the
turn, keyed with :func:`milegpo.state_keys.state_key`. By default (:func:`default_tool_state`) it is

- at turn 0, the last message of the prompt (the row's last prompt message with ``reset``'s text);
- after a turn with tool calls, the turn's tool messages, each as its tool's name and its content
  (the tool result), in call order: the step's observation plus the tool names, not the arguments
  and not the history;
- after a turn that parsed as no tool call (the episode's end), the fixed text of the failed end;
  a successful episode's last ``next_state`` is the success sink :data:`~milegpo.credit.SINK`.

Milestones (the row's ``milestone``, what BEACON's credit reads): an environment that knows its verifiable
subgoals defines ``_milestones(self) -> int``, the number of them completed so far in the episode (0 after
``reset``, never decreasing); the runner reads it after ``reset`` and after every turn (:func:`milestone_count`),
and a turn in which the count rose is a milestone step. Without the method no row is a milestone. A count that is
not an int >= 0, or that falls, is an :class:`EnvironmentProtocolError` naming the class.

An environment keys its own states by defining ``_state_anchor(self, conversation) -> str`` (the
leading underscore keeps it out of the tools, in GRPOTrainer too); a ``state_anchor`` callable
``fn(env, conversation) -> str`` passed to the runner wins over both. ``conversation`` is the
episode's messages so far (the prompt, then the assistant and tool messages), ending with what the
model observes next.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..envs.anchors import serialise

#: the names of an environment's methods that are never tools (TRL's rule: ``reset``, ``get_reward`` and
#: every name with a leading underscore, which is where the state hook lives)
NOT_TOOLS = ("reset", "get_reward")
#: the environment method that keys its states (:func:`default_tool_state` otherwise)
STATE_HOOK = "_state_anchor"
#: the environment method that counts its completed subgoals (a turn in which the count rose is a milestone)
MILESTONE_HOOK = "_milestones"
#: the version tag of the default state text (a change of the text changes it)
TOOL_STATE_VERSION = "milegpo-tool-state/1"
#: the name a tool message takes when the turn's call could not be parsed (no tool name to give)
UNPARSED = "unknown"

#: state_anchor(env, conversation) -> the text the step's state key hashes
ToolAnchorFn = Callable[[Any, list], str]


class EnvironmentProtocolError(ValueError):
    """An ``environment_factory`` class, or what its methods return, that breaks TRL's protocol."""


def describe(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "...}"


def environment_tools(env) -> list[Callable]:
    """The tools of an environment instance, as GRPOTrainer lists them: the bound methods of the functions its
    class defines (``inspect.getmembers(type(env), inspect.isfunction)``, name order), except ``reset``,
    ``get_reward`` and names with a leading underscore."""
    return [getattr(env, name) for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
            if name not in NOT_TOOLS and not name.startswith("_")]


@dataclass(frozen=True)
class EnvironmentSpec:
    """What a probe of an ``environment_factory`` found: the class, its tool names (name order), whether it
    scores its episodes (``get_reward``) and keys its states (``_state_anchor``)."""

    cls: type
    tool_names: tuple[str, ...]
    has_reward: bool
    has_state_hook: bool


def inspect_environment(factory: Callable[[], Any]) -> tuple[EnvironmentSpec, Any]:
    """Build one instance of ``factory`` and check it speaks TRL's protocol: a callable ``reset`` defined by its
    class (:class:`EnvironmentProtocolError` naming the class otherwise), ``get_reward`` callable where present.
    Returns (spec, the instance)."""
    if not callable(factory):
        raise EnvironmentProtocolError(f"environment_factory must be a class or a callable returning an environment, "
                                       f"got {type(factory).__name__} {describe(factory, 80)}")
    env = factory()
    cls = type(env)
    functions = dict(inspect.getmembers(cls, predicate=inspect.isfunction))
    if "reset" not in functions:
        what = "is not callable" if hasattr(env, "reset") else "is missing"
        raise EnvironmentProtocolError(
            f"environment {cls.__qualname__}: reset {what}; an environment_factory class must define "
            f"`def reset(self, **row) -> str | None` (TRL's protocol: it starts an episode from a dataset row)")
    if "get_reward" in functions and inspect.iscoroutinefunction(functions["get_reward"]):
        raise EnvironmentProtocolError(f"environment {cls.__qualname__}: an async get_reward is not supported by "
                                       f"MileGPOTrainer; define `def get_reward(self) -> float`")
    tools = environment_tools(env)
    if not tools:
        raise EnvironmentProtocolError(f"environment {cls.__qualname__} has no tools: its public methods (other than "
                                       f"reset and get_reward) are the tools the model calls")
    asynchronous = [t.__name__ for t in tools if inspect.iscoroutinefunction(t)]
    if asynchronous:
        raise EnvironmentProtocolError(f"environment {cls.__qualname__}: async tools {asynchronous} are not supported "
                                       f"by MileGPOTrainer; define them with `def`")
    spec = EnvironmentSpec(cls=cls, tool_names=tuple(t.__name__ for t in tools), has_reward="get_reward" in functions,
                           has_state_hook=STATE_HOOK in functions)
    return spec, env


def check_reward(value: Any, env) -> float:
    """``get_reward()``'s value as a float: a finite real number (int, float or bool, numpy's too, as GRPOTrainer
    takes them). None, NaN, infinities, strings and anything else are an :class:`EnvironmentProtocolError`
    naming the class."""
    if not isinstance(value, (int, float, np.integer, np.floating, np.bool_)):
        raise EnvironmentProtocolError(f"environment {type(env).__qualname__}: get_reward() returned "
                                       f"{describe(value, 80)} ({type(value).__name__}); expected a finite float")
    if not math.isfinite(float(value)):
        raise EnvironmentProtocolError(f"environment {type(env).__qualname__}: get_reward() returned {float(value)}; "
                                       f"expected a finite float")
    return float(value)


def milestone_count(env, before: int | None = None) -> int | None:
    """``env._milestones()``, the number of verifiable subgoals the episode has completed so far (None: the
    environment defines no such method). Anything but an int >= 0, or a count below ``before`` (the count
    after the previous turn), is an :class:`EnvironmentProtocolError` naming the class."""
    hook = getattr(type(env), MILESTONE_HOOK, None)
    if hook is None:
        return None
    count = getattr(env, MILESTONE_HOOK)()
    if isinstance(count, (bool, np.bool_)) or not isinstance(count, (int, np.integer)) or count < 0:
        raise EnvironmentProtocolError(f"environment {type(env).__qualname__}: {MILESTONE_HOOK}() returned "
                                       f"{describe(count, 80)}; expected an int >= 0 (the subgoals completed so far)")
    if before is not None and count < before:
        raise EnvironmentProtocolError(f"environment {type(env).__qualname__}: {MILESTONE_HOOK}() fell from {before} "
                                       f"to {count}; it counts the subgoals completed so far in the episode")
    return int(count)


def default_tool_state(conversation: Sequence[Mapping[str, Any]]) -> str:
    """The default state text of the point ``conversation`` ends at (see the module docstring): its trailing tool
    messages as ``name`` and ``content`` pairs, or, where it ends with another message (the prompt at turn 0),
    that message's role and content; serialised with :func:`milegpo.envs.anchors.serialise` after
    :data:`TOOL_STATE_VERSION`."""
    trailing = []
    for message in reversed(conversation):
        if message.get("role") != "tool":
            break
        trailing.insert(0, message)
    if trailing:
        parts = [f"{TOOL_STATE_VERSION} tools", str(len(trailing))]
        for message in trailing:
            parts += [str(message.get("name", "")), content_text(message.get("content", ""))]
        return serialise(parts)
    last = conversation[-1] if conversation else {"role": "user", "content": ""}
    return serialise([f"{TOOL_STATE_VERSION} {last.get('role', '')}", content_text(last.get("content", ""))])


#: the state text after an episode that ended with an answer (or no parse) and no success
END_STATE_TEXT = serialise([f"{TOOL_STATE_VERSION} end"])


def tool_state_anchor(spec) -> ToolAnchorFn | None:
    """The ``state_anchor`` of a tool-calling run from a ``MileGPOConfig.state_anchor`` setting: None (the
    environment's ``_state_anchor``, else :func:`default_tool_state`) for the config's default or None; a callable
    ``fn(env, conversation) -> str`` as it is; a dotted path ``pkg.module:fn`` imported. The other built-in
    anchors (``observation``, ``tracked``...) key a TextEnv's observations and are refused here."""
    from ..envs.anchors import DEFAULT_STATE_ANCHOR, STATE_ANCHORS, resolve_state_anchor

    if spec is None or spec == DEFAULT_STATE_ANCHOR:
        return None
    if callable(spec):
        return spec
    if isinstance(spec, str) and spec in STATE_ANCHORS:
        raise ValueError(f"state_anchor {spec!r} keys a TextEnv's observations; with environment_factory give a "
                         f"dotted path to fn(env, conversation) -> str, define {STATE_HOOK}(self, conversation) "
                         f"on the environment, or leave state_anchor at its default (the tool results and names)")
    return resolve_state_anchor(spec)


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks
        return " ".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def parse_turn(processing_class, ids: list[int], prefix: list[int], tools: list) -> tuple[dict, str | None]:
    """(message, error) of one generated turn: ``message`` is what GRPOTrainer's parser makes of it
    (:func:`trl.chat_template_utils.parse_response`, plain text where parsing fails); ``error`` is None when it
    parsed, else the parser's error text (the call did not parse)."""
    from trl.chat_template_utils import parse_response

    message = parse_response(processing_class, ids, prefix=prefix, tools=tools)
    if "tool_calls" in message:
        return message, None
    try:  # TRL swallowed the parser's error into a plain-text message: was there one?
        if getattr(processing_class, "response_template", None) is not None:
            parsed = processing_class.parse_response(ids, prefix=prefix, tools=tools)
        else:
            parsed = processing_class.parse_response(ids)
        if parsed is None:
            raise ValueError("parse_response returned None")
        from ..trl_seam import validate_tool_calls

        validate_tool_calls(parsed.get("tool_calls"))  # what TRL checks after parsing
    except (ValueError, TypeError) as e:
        return message, f"the tool call could not be parsed: {e}"
    return message, None


def not_utf8(text: str) -> str | None:
    """Where ``text`` is not valid UTF-8 (a lone surrogate, which no tokenizer takes), said in ASCII; None if it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"a lone surrogate {text[e.start]!r} at position {e.start}"
    return None


__all__ = ["EnvironmentProtocolError", "EnvironmentSpec", "inspect_environment", "environment_tools", "check_reward",
           "default_tool_state", "tool_state_anchor", "parse_turn", "describe", "content_text", "not_utf8",
           "NOT_TOOLS", "STATE_HOOK", "MILESTONE_HOOK", "milestone_count", "TOOL_STATE_VERSION", "UNPARSED", "END_STATE_TEXT", "ToolAnchorFn"]
