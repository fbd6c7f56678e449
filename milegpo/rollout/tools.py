"""Tool-calling episodes of a TRL ``environment_factory`` class: one training row per assistant turn.

TRL's protocol (``trl.GRPOTrainer``, docstring of ``environment_factory``, TRL 1.16): an environment class
whose ``reset(**row) -> str | None`` starts an episode from a dataset row (a string is appended to the
last user message of the row's ``prompt``), whose public methods are the tools the model calls (their
docstrings are the tools' schema in the chat template), and whose optional ``get_reward() -> float``
scores the episode. :class:`ToolEpisodeRunner` plays ``group_size`` episodes of each row in that protocol
and shows the model what ``GRPOTrainer`` shows it:

- the prompt is the row's ``prompt`` (conversational) with ``reset``'s text appended to its last message,
  rendered by the tokenizer's chat template with the environment's tools (``apply_chat_template(...,
  tools=..., add_generation_prompt=True)``; the chat template GRPOTrainer renders with, passed in);
- a turn's tool calls are parsed as GRPOTrainer parses them (:func:`trl.chat_template_utils.parse_response`
  with the prompt as prefix and the tools), each call runs, and its result becomes a ``{"role": "tool",
  "name": ..., "content": str(result)}`` message; the next turn's context is the token ids of the previous
  context + the turn's tokens + the tool messages' tokens (:func:`tool_suffix_ids`, GRPOTrainer's
  ``_get_tool_suffix_ids``), concatenated, never re-tokenized, as GRPOTrainer builds them.

What differs from GRPOTrainer is the unit of training. GRPOTrainer trains the whole conversation as one
completion on one advantage, with the tool-result tokens masked (``tool_mask`` 0). Here every assistant
turn is one step, one :class:`~milegpo.rollout.StepRow`: its prompt is the context before the turn, its
completion is the turn's own tokens. So every token of turn t carries turn t's advantage A_t, and the
tool-result tokens are never a completion token of any row (they are in the next row's prompt): they
get no loss, as GRPOTrainer's mask gives them none.

An episode ends when the model answers without a tool call (that answer is its last row), at the
horizon (``horizon`` turns), when its context outgrows ``max_context`` tokens, or when a tool hangs past
``tool_timeout`` seconds (the step is recorded, its observation says the tool timed out, the episode is
truncated and its environment instance is dropped, since the tool's thread may still be using it).
Its reward is scored once at the end as GRPOTrainer scores it: ``get_reward()`` when the environment
defines it, plus ``score`` (the trainer's reward functions, weighted) when given. The reward is the last
row's ``reward`` (the others' are 0); the episode is a success when the reward is at least
``success_threshold``.

Invalid steps (counted in ``Episode.invalid_steps`` and ``ToolRollout.tool_failures``, never a crash):
a turn whose tool call does not parse (TRL's parser raises; GRPOTrainer would fall back to plain text and
end the episode, here the step is invalid and the parser's error is the observation, so the model can
try again), a call that names no tool of the environment (``{"error": "Tool X not found."}``, as TRL), a
tool that raises (``{"error": str(exception)}``, as TRL) and a call of another type than ``function``.

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
``reset``, never decreasing); the runner reads it after ``reset`` and after every turn, and a turn in which the
count rose is a milestone step. Without the method no row is a milestone. A count that is not an int >= 0, or
that falls, is an :class:`EnvironmentProtocolError` naming the class.

An environment keys its own states by defining ``_state_anchor(self, conversation) -> str`` (the
leading underscore keeps it out of the tools, in GRPOTrainer too); a ``state_anchor`` callable
``fn(env, conversation) -> str`` passed to the runner wins over both. ``conversation`` is the
episode's messages so far (the prompt, then the assistant and tool messages), ending with what the
model observes next.

Generation is a callable, so the runner knows nothing of models::

    generate(prompt_ids: list[list[int]]) -> (completion_ids: list[list[int]], logprobs: list[list[float]] | None)

A ``generate`` with a parameter named ``environments`` is also given the live episodes' environment instances
(in prompt order), so that a scripted policy (an expert, a test's) can read them; the trainer's does not.

Under several processes every rank makes the same number of generation calls (``sync_any``, as
:class:`~milegpo.rollout.EpisodeRunner`): a rank with no live episode generates for one dummy prompt.
"""

from __future__ import annotations

import inspect
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..credit import SINK
from ..envs import Task
from ..envs.anchors import anchor_raised, serialise
from ..state_keys import state_key
from ..state_sketches import StateSimilarity
from .loop import Episode, Rollout, StepRow

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

GenerateIdsFn = Callable[[list[list[int]]], tuple[list[list[int]], "list[list[float]] | None"]]
#: score(env, row, prompt, completion_messages, completion_ids) -> the reward functions' weighted sum (NaN: none)
ScoreFn = Callable[[Any, Mapping[str, Any], list, list, list], float]
#: state_anchor(env, conversation) -> the text the step's state key hashes
ToolAnchorFn = Callable[[Any, list], str]


class EnvironmentProtocolError(ValueError):
    """An ``environment_factory`` class, or what its methods return, that breaks TRL's protocol."""


def _describe(value: Any, limit: int = 160) -> str:
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
                                       f"got {type(factory).__name__} {_describe(factory, 80)}")
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
                                       f"{_describe(value, 80)} ({type(value).__name__}); expected a finite float")
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
                                       f"{_describe(count, 80)}; expected an int >= 0 (the subgoals completed so far)")
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
            parts += [str(message.get("name", "")), _content_text(message.get("content", ""))]
        return serialise(parts)
    last = conversation[-1] if conversation else {"role": "user", "content": ""}
    return serialise([f"{TOOL_STATE_VERSION} {last.get('role', '')}", _content_text(last.get("content", ""))])


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


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks
        return " ".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def tool_suffix_ids(processing_class, tool_messages: list[dict], chat_template: str | None = None,
                    chat_template_kwargs: Mapping[str, Any] | None = None) -> list[int]:
    """The token ids of ``tool_messages`` as the chat template writes them after an assistant turn (up to the
    next assistant header): GRPOTrainer's ``_get_tool_suffix_ids`` (TRL 1.16) for a text tokenizer, a dummy
    conversation rendered with and without the tool messages, the first cut after its last EOS."""
    kwargs = dict(chat_template_kwargs or {})
    dummy = [{"role": "user", "content": "dummy"},
             {"role": "assistant", "content": "",
              "tool_calls": [{"type": "function", "function": {"name": tool_messages[0]["name"], "arguments": {}}}]}]
    prefix = processing_class.apply_chat_template(dummy, add_generation_prompt=False, tokenize=True,
                                                  chat_template=chat_template, return_dict=False, **kwargs)
    full = processing_class.apply_chat_template(dummy + tool_messages, add_generation_prompt=True, tokenize=True,
                                                chat_template=chat_template, return_dict=False, **kwargs)
    eos = [i for i, tok in enumerate(prefix) if tok == processing_class.eos_token_id]
    if eos:
        prefix = prefix[:eos[-1] + 1]
    if list(full[:len(prefix)]) != list(prefix):
        raise ValueError("the chat template is not prefix-preserving: the EOS-trimmed prefix ids are not a prefix of "
                         "the ids with the tool messages")
    return list(full[len(prefix):])


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
        try:  # what TRL checks after parsing (a private helper of TRL 1.16)
            from trl.chat_template_utils import _validate_tool_calls
        except ImportError:
            _validate_tool_calls = None
        if _validate_tool_calls is not None:
            _validate_tool_calls(parsed.get("tool_calls"))
    except (ValueError, TypeError) as e:
        return message, f"the tool call could not be parsed: {e}"
    return message, None


class _Hung(Exception):
    pass


def call_with_timeout(fn: Callable, kwargs: dict, timeout: float | None):
    """``fn(**kwargs)``; with ``timeout`` (seconds) in a daemon thread, :class:`_Hung` when it is not back in time
    (the thread is left running: Python cannot stop it). An exception of ``fn`` is raised here."""
    if timeout is None:
        return fn(**kwargs)
    box: dict[str, Any] = {}

    def target():
        try:
            box["value"] = fn(**kwargs)
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    thread = threading.Thread(target=target, daemon=True, name=f"milegpo-tool-{getattr(fn, '__name__', 'tool')}")
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise _Hung()
    if "error" in box:
        raise box["error"]
    return box["value"]


@dataclass
class ToolRollout(Rollout):
    """A :class:`~milegpo.rollout.Rollout` of tool-calling episodes, with GRPOTrainer's tool counts: ``tool_calls``
    (calls made), ``tool_failures`` (calls that did not parse, named no tool, raised or hung) and ``tool_timeouts``
    (calls that hung)."""

    tool_calls: int = 0
    tool_failures: int = 0
    tool_timeouts: int = 0
    #: state key -> the text it hashes (what the model observed there)
    state_texts: dict[int, str] = field(default_factory=dict)
    #: per episode (the order of ``episodes``): its messages, the prompt then the assistant and tool messages
    conversations: list[list[dict]] = field(default_factory=list)


def _row_text(row: Mapping[str, Any]) -> str:
    return _describe(dict(row), 200)


class ToolEpisodeRunner:
    """Plays ``environment_factory`` episodes with TRL's tool-calling protocol (see the module docstring).

    factory: the environment class (or a callable returning an instance).
    processing_class: the tokenizer; its chat template must render tools and tool messages, and it must parse
      responses (``response_template``, as GRPOTrainer sets it with ``add_response_schema``).
    horizon: the most assistant turns of an episode.
    success_threshold: an episode whose reward is at least this is a success.
    tool_timeout: seconds a tool call may take (None: no limit).
    state_anchor: ``fn(env, conversation) -> str`` (None: the environment's ``_state_anchor``, else
      :func:`default_tool_state`).
    chat_template, chat_template_kwargs: what GRPOTrainer renders with (``self.chat_template``: its
      prefix-preserving training template where the tokenizer's is not; ``args.chat_template_kwargs``).
    score: the reward functions' weighted sum of a finished episode (:data:`ScoreFn`), added to ``get_reward``;
      None: ``get_reward`` alone (the environment must define it).
    max_context: an episode whose next context would exceed this many tokens ends there, truncated.
    state_similarity: sketch each state's text (for :func:`milegpo.credit.merge_similar_states`).
    """

    def __init__(self, factory, processing_class, *, horizon: int = 50, success_threshold: float = 0.5,
                 tool_timeout: float | None = 60.0, state_anchor: ToolAnchorFn | None = None,
                 chat_template: str | None = None, chat_template_kwargs: Mapping[str, Any] | None = None,
                 score: ScoreFn | None = None, max_context: int | None = None,
                 state_similarity: StateSimilarity | None = None, probe=None) -> None:
        if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:
            raise ValueError(f"ToolEpisodeRunner: horizon must be an int >= 1, got {horizon!r}")
        # True was 1 s, inf an OverflowError at the first tool call (Thread.join), NaN a str: refused here
        if tool_timeout is not None and (isinstance(tool_timeout, bool) or not isinstance(tool_timeout, (int, float))
                                         or not math.isfinite(tool_timeout) or tool_timeout <= 0):
            raise ValueError(f"ToolEpisodeRunner: tool_timeout must be a finite number of seconds > 0 or None (no "
                             f"limit), got {tool_timeout!r}")
        if isinstance(success_threshold, bool) or not isinstance(success_threshold, (int, float)) \
                or not math.isfinite(success_threshold):  # NaN: no episode was ever a success, silently
            raise ValueError(f"ToolEpisodeRunner: success_threshold must be a finite number, got {success_threshold!r}")
        if max_context is not None and (isinstance(max_context, bool) or not isinstance(max_context, int)
                                        or max_context < 1):  # 0 / -1 ended every episode after its first turn
            raise ValueError(f"ToolEpisodeRunner: max_context must be an int >= 1 (tokens) or None, got "
                             f"{max_context!r}")
        if state_anchor is not None and not callable(state_anchor):
            raise TypeError(f"ToolEpisodeRunner: state_anchor must be a callable fn(env, conversation) -> str, got "
                            f"{type(state_anchor).__name__}")
        if probe is None:
            self.spec, probe = inspect_environment(factory)
        else:
            self.spec = inspect_environment(lambda: probe)[0]
        if not self.spec.has_reward and score is None:
            raise EnvironmentProtocolError(
                f"environment {self.spec.cls.__qualname__} defines no get_reward() and no reward function was "
                f"given: pass reward_funcs, or define `def get_reward(self) -> float`")
        self.factory = factory
        self.processing_class = processing_class
        self.horizon = horizon
        self.success_threshold = float(success_threshold)
        self.tool_timeout = tool_timeout
        self.state_anchor = state_anchor
        self.chat_template = chat_template
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.score = score
        self.max_context = max_context
        self.state_similarity = state_similarity
        self._instances: list = [probe]
        self._dummy: list[int] | None = None
        self._suffix_cache: dict[tuple, list[int]] = {}

    # ------------------------------------------------------------------ pieces
    def _instance(self, k: int):
        while len(self._instances) <= k:
            self._instances.append(self.factory())
        return self._instances[k]

    def _state_text(self, env, conversation: list) -> str:
        if self.state_anchor is not None:
            fn, where = (lambda: self.state_anchor(env, conversation)), "the state_anchor callable"
        elif self.spec.has_state_hook:
            fn, where = (lambda: getattr(env, STATE_HOOK)(conversation)), f"{type(env).__qualname__}.{STATE_HOOK}"
        else:
            return default_tool_state(conversation)
        try:
            text = fn()
        except Exception as e:  # noqa: BLE001 - a user's anchor may raise anything; the run stops in one line
            raise anchor_raised(where, e, f"turn {len(conversation)} of the conversation") from e
        if not isinstance(text, str):
            raise EnvironmentProtocolError(f"{where} returned {type(text).__name__} {_describe(text, 80)}; expected "
                                           f"the state's text (str)")
        return text

    def _key(self, out: ToolRollout, text: str) -> int:
        key = state_key(text)
        if key not in out.state_texts:
            out.state_texts[key] = text
            if self.state_similarity is not None:
                out.sketches[key] = self.state_similarity.sketch(text)
        return key

    def _suffix(self, tool_messages: list[dict]) -> list[int]:
        cache_key = tuple((m["name"], repr(m["content"])) for m in tool_messages)
        if cache_key not in self._suffix_cache:
            if len(self._suffix_cache) > 4096:
                self._suffix_cache.clear()
            self._suffix_cache[cache_key] = tool_suffix_ids(self.processing_class, tool_messages, self.chat_template,
                                                            self.chat_template_kwargs)
        return self._suffix_cache[cache_key]

    def _start(self, env, row: Mapping[str, Any], tools: list) -> tuple[list, list[int]]:
        """reset(**row) and the first prompt: (messages, token ids)."""
        if not isinstance(row, Mapping):
            raise TypeError(f"a dataset row must be a mapping (a dict of columns), got {type(row).__name__}")
        prompt = row.get("prompt", [{"role": "user", "content": ""}])
        if not (isinstance(prompt, list) and prompt and all(isinstance(m, Mapping) and "role" in m for m in prompt)):
            raise ValueError(f"dataset row {_row_text(row)}: 'prompt' must be a conversation (a non-empty list of "
                             f"{{'role', 'content'}} messages) for an environment_factory, got "
                             f"{type(prompt).__name__}")
        try:
            observation = env.reset(**row)
        except Exception as e:
            raise ValueError(f"{type(env).__qualname__}.reset rejected dataset row {_row_text(row)}: "
                             f"{type(e).__name__}: {e}") from e
        if observation is not None and not isinstance(observation, str):
            raise EnvironmentProtocolError(
                f"{type(env).__qualname__}.reset returned {type(observation).__name__} {_describe(observation, 80)} "
                f"for dataset row {_row_text(row)}; expected a str (appended to the last user message) or None")
        messages = [dict(m) for m in prompt]
        if observation is not None:
            content = messages[-1].get("content", "")
            if not isinstance(content, str):
                raise ValueError(f"dataset row {_row_text(row)}: the last prompt message's content must be a str to "
                                 f"append reset's text to")
            messages[-1] = {**messages[-1], "content": content + observation}
        ids = self.processing_class.apply_chat_template(messages, tools=tools or None, chat_template=self.chat_template,
                                                       add_generation_prompt=True, tokenize=True, return_dict=True,
                                                       **self.chat_template_kwargs)["input_ids"]
        return messages, list(ids)

    def _run_calls(self, env, tool_calls: list, out: ToolRollout) -> tuple[list[dict], bool, str]:
        """Run one turn's calls: (tool messages, any call failed, "" or the hung call's error)."""
        tools = {t.__name__: t for t in environment_tools(env)}
        messages, failed = [], False
        for call in tool_calls:
            out.tool_calls += 1
            if call.get("type", "function") != "function":
                out.tool_failures += 1
                failed = True
                name = call.get("name", UNPARSED)
                messages.append({"role": "tool", "name": name,
                                 "content": str({"error": f"Unsupported tool call type: {call.get('type')}"})})
                continue
            function = call["function"]
            name = function["name"]
            try:
                if name not in tools:
                    raise ValueError(f"Tool {name} not found.")
                arguments = function.get("arguments") or {}
                if not isinstance(arguments, dict):
                    raise ValueError(f"the arguments of tool {name} must be an object, got {_describe(arguments, 60)}")
                result = call_with_timeout(tools[name], arguments, self.tool_timeout)
            except _Hung:
                out.tool_failures += 1
                out.tool_timeouts += 1
                error = f"tool {name} timed out after {self.tool_timeout:g} s; the episode is truncated"
                messages.append({"role": "tool", "name": name, "content": str({"error": error})})
                return messages, True, error
            except Exception as e:  # noqa: BLE001 - a tool that raises: an invalid step, its error the result (TRL)
                out.tool_failures += 1
                failed = True
                result = {"error": str(e)}
            messages.append({"role": "tool", "name": name,
                             "content": result if isinstance(result, list) else str(result)})
        return messages, failed, ""

    def _finish_reward(self, env, slot: dict) -> float:
        reward = 0.0
        if self.spec.has_reward:
            reward += check_reward(env.get_reward(), env)
        if self.score is not None:
            extra = self.score(env, slot["row"], slot["prompt"], slot["completion"], slot["completion_ids"])
            if not math.isnan(extra):
                reward += float(extra)
        return reward

    # ------------------------------------------------------------------ the episodes
    def run(self, rows: Sequence[Mapping[str, Any]], group_size: int, generate: GenerateIdsFn,
            sync_any: Callable[[bool], bool] = lambda flag: flag) -> ToolRollout:
        """Play ``group_size`` episodes of every row; group ``g`` is ``rows[g]``, traj = g * group_size + k; the
        rollout's rows are in episode-end order (as :class:`~milegpo.rollout.EpisodeRunner`'s)."""
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        try:
            takes_envs = "environments" in inspect.signature(generate).parameters
        except (TypeError, ValueError):
            takes_envs = False
        out = ToolRollout()
        slots: list[dict] = []
        t0 = time.perf_counter()
        for g, row in enumerate(rows):
            for k in range(group_size):
                i = g * group_size + k
                env = self._instance(i)
                tools = environment_tools(env)
                messages, ids = self._start(env, row, tools)
                task = Task(task_id=f"row {g}", env="environment_factory", task_type=str(row.get("task_type", "")))
                ep = Episode(group=g, traj=i, task=task)
                out.episodes.append(ep)
                slot = {"ep": ep, "env": env, "index": i, "row": row, "tools": tools, "prompt": [dict(m) for m in
                                                                                                  messages],
                        "conversation": messages, "ids": ids, "completion": [], "completion_ids": [], "rows": [],
                        "live": True}
                slot["key"] = self._key(out, self._state_text(env, messages))
                slot["milestones"] = milestone_count(env)
                slots.append(slot)
                out.conversations.append(messages)
        out.reset_s += time.perf_counter() - t0
        out.env_s += time.perf_counter() - t0
        while True:
            live = [s for s in slots if s["live"]]
            if not sync_any(bool(live)):
                break
            prompts = [s["ids"] for s in live] or [self._dummy or [self.processing_class.eos_token_id]]
            t0 = time.perf_counter()
            if takes_envs:
                completion_ids, logprobs = generate(prompts, environments=[s["env"] for s in live])
            else:
                completion_ids, logprobs = generate(prompts)
            out.generate_s += time.perf_counter() - t0
            out.generate_calls += 1
            if len(completion_ids) != len(prompts) or (logprobs is not None and len(logprobs) != len(prompts)):
                raise ValueError(f"generate returned {len(completion_ids)} completions for {len(prompts)} prompts")
            if live:
                self._dummy = live[0]["ids"]
            t0 = time.perf_counter()
            for j, slot in enumerate(live):
                self._step(slot, list(map(int, completion_ids[j])),
                           None if logprobs is None else [float(x) for x in logprobs[j]], out)
            out.env_s += time.perf_counter() - t0
        return out

    def _step(self, slot: dict, ids: list[int], logprobs: list[float] | None, out: ToolRollout) -> None:
        ep: Episode = slot["ep"]
        env = slot["env"]
        message, parse_error = parse_turn(self.processing_class, ids, slot["ids"], slot["tools"])
        tool_calls = message.get("tool_calls") or []
        text = self.processing_class.decode(ids, skip_special_tokens=True)
        row = StepRow(group=ep.group, traj=ep.traj, t=len(slot["rows"]), state=slot["key"], next_state=0, reward=0.0,
                      invalid=False, prompt_ids=list(slot["ids"]), completion_ids=ids, logprobs=logprobs,
                      completion=text, action="")
        slot["rows"].append(row)
        ep.length += 1
        slot["conversation"].append(message)
        slot["completion"].append(message)
        slot["completion_ids"].extend(ids)
        if parse_error is not None:
            out.tool_calls += 1
            out.tool_failures += 1
            tool_messages, failed, hung = [{"role": "tool", "name": UNPARSED,
                                            "content": str({"error": parse_error})}], True, ""
            row.action = "<unparsed tool call>"
        elif tool_calls:
            tool_messages, failed, hung = self._run_calls(env, tool_calls, out)
            row.action = "; ".join(_call_text(c) for c in tool_calls)
        else:  # an answer: the episode's end
            row.action = "<answer>"
            self._milestone(slot, row)
            self._end(slot, out, next_text=None, truncated=False, error="")
            return
        if not hung:  # a hung call's thread may still be using the instance
            self._milestone(slot, row)
        row.invalid = failed and not hung
        ep.invalid_steps += int(row.invalid)
        slot["conversation"].extend(tool_messages)
        slot["completion"].extend(tool_messages)
        next_text = self._state_text(env, slot["conversation"]) if not hung else serialise(
            [f"{TOOL_STATE_VERSION} timeout", hung])
        if hung:
            self._instances[slot["index"]] = self.factory()  # the hung call's thread may still use the old one
            self._end(slot, out, next_text=next_text, truncated=True, error=hung, score=False)
            return
        suffix = self._suffix(tool_messages)
        next_ids = slot["ids"] + ids + suffix
        slot["completion_ids"].extend(suffix)
        if len(slot["rows"]) >= self.horizon:
            self._end(slot, out, next_text=next_text, truncated=True, error="")
        elif self.max_context is not None and len(next_ids) > self.max_context:
            self._end(slot, out, next_text=next_text, truncated=True,
                      error=f"the context reached {len(next_ids)} tokens (max_context {self.max_context})")
        else:
            slot["ids"] = next_ids
            slot["key"] = self._key(out, next_text)

    def _milestone(self, slot: dict, row: StepRow) -> None:
        """The row is a milestone when the environment's subgoal count (:func:`milestone_count`) rose in its turn."""
        count = milestone_count(slot["env"], slot["milestones"])
        row.milestone = count is not None and count > slot["milestones"]
        slot["milestones"] = count

    def _end(self, slot: dict, out: ToolRollout, next_text: str | None, truncated: bool, error: str,
             score: bool = True) -> None:
        ep: Episode = slot["ep"]
        slot["live"] = False
        reward = self._finish_reward(slot["env"], slot) if score else 0.0
        ep.reward = reward
        ep.won = reward >= self.success_threshold
        ep.truncated = truncated and not ep.won
        ep.error = error
        rows = slot["rows"]
        last = rows[-1]
        last.reward = reward
        last.next_state = SINK if ep.won else self._key(out, next_text if next_text is not None else END_STATE_TEXT)
        for prev, nxt in zip(rows, rows[1:]):
            prev.next_state = nxt.state
        for r in rows:
            r.success = ep.won
        out.rows.extend(rows)


def _call_text(call: Mapping[str, Any]) -> str:
    function = call.get("function") or {}
    arguments = function.get("arguments") or {}
    args = ", ".join(f"{k}={v!r}" for k, v in arguments.items()) if isinstance(arguments, dict) else str(arguments)
    return f"{function.get('name', call.get('name', '?'))}({args})"


__all__ = ["ToolEpisodeRunner", "ToolRollout", "EnvironmentSpec", "EnvironmentProtocolError", "inspect_environment",
           "environment_tools", "check_reward", "default_tool_state", "tool_state_anchor", "tool_suffix_ids",
           "parse_turn",
           "call_with_timeout", "STATE_HOOK", "MILESTONE_HOOK", "milestone_count", "NOT_TOOLS", "TOOL_STATE_VERSION", "END_STATE_TEXT"]
