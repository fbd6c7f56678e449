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
  context + the turn's tokens + the tool messages' tokens (GRPOTrainer's own tool-suffix tokenization,
  :func:`milegpo.trl_seam.tool_suffix_ids`), concatenated, never re-tokenized, as GRPOTrainer builds them.

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
``success_threshold``. An episode cut by a hung tool is not scored (reward 0) and never a success,
whatever the threshold. A ``get_reward`` that raises stops the run with an error naming it.

Tool calls run one after another in the main thread when ``tool_timeout`` is None (as GRPOTrainer runs
its sync tools). With a timeout every call runs in a thread of its own, and the calls of different
episodes of one turn run at the same time (one thread per episode, its calls in order), so that k hung
tools cost one timeout, not k: an environment whose instances share state (a module-level random
generator, one connection) must guard it, or set ``tool_timeout=None``.

Invalid steps (counted in ``Episode.invalid_steps`` and ``ToolRollout.tool_failures``, never a crash):
a turn whose tool call does not parse (TRL's parser raises; GRPOTrainer would fall back to plain text and
end the episode, here the step is invalid and the parser's error is the observation, so the model can
try again), a call that names no tool of the environment (``{"error": "Tool X not found."}``, as TRL), a
tool that raises (``{"error": str(exception)}``, as TRL) or calls ``sys.exit``, a result whose ``str()``
raises (an int past Python's int-to-str limit) or whose text is not valid UTF-8 (a lone surrogate, which the
tokenizer cannot take), and a call of another type than ``function``; the observation names the tool.

State keys (the ``state`` / ``next_state`` of a row) are the texts of what the model observed, keyed with
:func:`milegpo.state_keys.state_key`: :mod:`milegpo.rollout.tool_protocol` says which texts (and holds what
TRL's protocol asks of an environment class: :func:`~milegpo.rollout.tool_protocol.inspect_environment`, and how
an environment counts its milestones: ``_milestones``, :func:`~milegpo.rollout.tool_protocol.milestone_count`).

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

from ..credit import SINK
from ..envs import Task
from ..envs.anchors import anchor_raised, serialise
from ..state_keys import state_key
from ..state_sketches import StateSimilarity
from ..usage import RunError
from .loop import Episode, Rollout, StepRow
from .tool_protocol import (END_STATE_TEXT, STATE_HOOK, TOOL_STATE_VERSION, UNPARSED, EnvironmentProtocolError,
                            ToolAnchorFn, check_reward, content_text, default_tool_state, describe,
                            environment_tools, inspect_environment, milestone_count, not_utf8, parse_turn)

GenerateIdsFn = Callable[[list[list[int]]], tuple[list[list[int]], "list[list[float]] | None"]]
#: score(env, row, prompt, completion_messages, completion_ids) -> the reward functions' weighted sum (NaN: none)
ScoreFn = Callable[[Any, Mapping[str, Any], list, list, list], float]


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


def _first_line(error: BaseException) -> str:
    text = str(error)
    return text.splitlines()[0][:300] if text else ""


def _error_content(error: Exception) -> str:
    """The tool message of a call that failed: TRL's ``{"error": str(e)}``, made valid UTF-8 where it is not."""
    text = str(error)
    if not_utf8(text) is not None:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return str({"error": text})


def _tool_content(name: str, tool: Callable, arguments: dict):
    """Call ``tool(**arguments)`` and make its result a tool message's content: a list (content blocks) as it is,
    anything else ``str(result)`` (TRL's). A ``sys.exit`` in the tool (its SystemExit would end the training
    process), a result whose ``str()`` raises (an int past Python's int-to-str limit) or whose text is not valid
    UTF-8 is a ValueError naming the tool."""
    try:
        result = tool(**arguments)
    except SystemExit as e:
        raise ValueError(f"tool {name} called sys.exit({e.code!r})") from None
    if isinstance(result, list):
        return result
    try:
        text = str(result)
    except Exception as e:  # noqa: BLE001 - a user's __str__, Python's int-to-str limit
        raise ValueError(f"the result of tool {name} ({type(result).__name__}) could not be made a string: "
                         f"{type(e).__name__}: {_first_line(e)}") from None
    where = not_utf8(text)
    if where is not None:
        raise ValueError(f"tool {name} returned text that is not valid UTF-8 ({where}); the tokenizer cannot take it")
    return text


@dataclass
class _Calls:
    """What one turn's tool calls did: the tool messages, counts, and the hung call's error ("" if none)."""

    messages: list = field(default_factory=list)
    calls: int = 0
    failures: int = 0
    timeouts: int = 0
    hung: str = ""


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
    return describe(dict(row), 200)


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
            raise EnvironmentProtocolError(f"{where} returned {type(text).__name__} {describe(text, 80)}; expected "
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
            from ..trl_seam import tool_suffix_ids  # GRPOTrainer's own

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
                f"{type(env).__qualname__}.reset returned {type(observation).__name__} {describe(observation, 80)} "
                f"for dataset row {_row_text(row)}; expected a str (appended to the last user message) or None")
        messages = [dict(m) for m in prompt]
        if observation is not None:
            content = messages[-1].get("content", "")
            if not isinstance(content, str):
                raise ValueError(f"dataset row {_row_text(row)}: the last prompt message's content must be a str to "
                                 f"append reset's text to")
            messages[-1] = {**messages[-1], "content": content + observation}
        where = not_utf8(observation) if observation is not None else None
        if where is not None:
            raise EnvironmentProtocolError(f"{type(env).__qualname__}.reset returned text that is not valid UTF-8 "
                                           f"({where}) for dataset row {_row_text(row)}; the tokenizer cannot take it")
        for message in messages:
            where = not_utf8(content_text(message.get("content", "")))
            if where is not None:
                raise ValueError(f"dataset row {_row_text(row)}: its prompt is not valid UTF-8 ({where}); the "
                                 "tokenizer cannot take it")
        ids = self.processing_class.apply_chat_template(messages, tools=tools or None, chat_template=self.chat_template,
                                                       add_generation_prompt=True, tokenize=True, return_dict=True,
                                                       **self.chat_template_kwargs)["input_ids"]
        return messages, list(ids)

    def _run_calls(self, env, tool_calls: list) -> _Calls:
        """Run one turn's calls in order (no change to the rollout: this may run in a thread of its own)."""
        tools = {t.__name__: t for t in environment_tools(env)}
        done = _Calls()
        for call in tool_calls:
            done.calls += 1
            if call.get("type", "function") != "function":
                done.failures += 1
                name = call.get("name", UNPARSED)
                done.messages.append({"role": "tool", "name": name,
                                      "content": str({"error": f"Unsupported tool call type: {call.get('type')}"})})
                continue
            function = call["function"]
            name = function["name"]
            try:
                if name not in tools:
                    raise ValueError(f"Tool {name} not found.")
                arguments = function.get("arguments") or {}
                if not isinstance(arguments, dict):
                    raise ValueError(f"the arguments of tool {name} must be an object, got {describe(arguments, 60)}")
                content = call_with_timeout(_tool_content, {"name": name, "tool": tools[name], "arguments": arguments},
                                            self.tool_timeout)
            except _Hung:
                done.failures += 1
                done.timeouts += 1
                done.hung = f"tool {name} timed out after {self.tool_timeout:g} s; the episode is truncated"
                done.messages.append({"role": "tool", "name": name, "content": str({"error": done.hung})})
                return done
            except Exception as e:  # noqa: BLE001 - a tool that raises: an invalid step, its error the result (TRL)
                done.failures += 1
                content = _error_content(e)
            done.messages.append({"role": "tool", "name": name, "content": content})
        return done

    def _run_turns(self, turns: list[tuple[Any, list]]) -> list[_Calls]:
        """Every ``(env, tool_calls)`` of one generation step run: one after another in this thread without a
        ``tool_timeout``; with one, each episode's calls in a thread of their own, all episodes at once (k hung
        tools cost one timeout, not k)."""
        if self.tool_timeout is None or len(turns) < 2:
            return [self._run_calls(env, calls) for env, calls in turns]
        results: list[_Calls | BaseException | None] = [None] * len(turns)

        def play(j: int, env, calls: list) -> None:
            try:
                results[j] = self._run_calls(env, calls)
            except BaseException as e:  # noqa: BLE001 - raised in the caller's thread, as without a timeout
                results[j] = e

        threads = [threading.Thread(target=play, args=(j, env, calls), daemon=True, name=f"milegpo-tools-{j}")
                   for j, (env, calls) in enumerate(turns)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return results

    def _finish_reward(self, env, slot: dict) -> float:
        reward = 0.0
        if self.spec.has_reward:
            try:
                value = env.get_reward()
            except Exception as e:  # noqa: BLE001 - the user's method: the run stops with one line naming it
                raise RunError(f"{type(env).__qualname__}.get_reward() raised {type(e).__name__}: "
                               f"{_first_line(e)}") from e
            except SystemExit as e:
                raise RunError(f"{type(env).__qualname__}.get_reward() called sys.exit({e.code!r})") from None
            reward += check_reward(value, env)
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
            turns = [self._turn(slot, list(map(int, completion_ids[j])),
                                None if logprobs is None else [float(x) for x in logprobs[j]], out)
                     for j, slot in enumerate(live)]
            calling = [(slot, calls) for slot, calls in zip(live, turns) if calls]
            results = self._run_turns([(slot["env"], calls) for slot, calls in calling])
            for (slot, _), done in zip(calling, results):
                self._after_calls(slot, done, out)
            out.env_s += time.perf_counter() - t0
        return out

    def _turn(self, slot: dict, ids: list[int], logprobs: list[float] | None, out: ToolRollout) -> list:
        """Record one generated turn as a row; an answer (no tool call) ends the episode, a call that does not
        parse is an invalid step with the parser's error as its observation. Returns the turn's tool calls to run
        (none: the turn is done)."""
        ep: Episode = slot["ep"]
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
            row.action = "<unparsed tool call>"
            done = _Calls(calls=1, failures=1,
                          messages=[{"role": "tool", "name": UNPARSED, "content": str({"error": parse_error})}])
            self._after_calls(slot, done, out)
            return []
        if tool_calls:
            row.action = "; ".join(_call_text(c) for c in tool_calls)
            return tool_calls
        row.action = "<answer>"  # an answer: the episode's end
        self._milestone(slot, row)
        self._end(slot, out, next_text=None, truncated=False, error="")
        return []

    def _after_calls(self, slot: dict, done: _Calls, out: ToolRollout) -> None:
        """The turn's tool messages in the conversation, the next state and context; the episode's end at the
        horizon, past ``max_context`` or after a hung tool."""
        ep: Episode = slot["ep"]
        out.tool_calls += done.calls
        out.tool_failures += done.failures
        out.tool_timeouts += done.timeouts
        row = slot["rows"][-1]
        if not done.hung:  # a hung call's thread may still be using the instance
            self._milestone(slot, row)
        row.invalid = done.failures > 0 and not done.hung
        ep.invalid_steps += int(row.invalid)
        tool_messages = done.messages
        slot["conversation"].extend(tool_messages)
        slot["completion"].extend(tool_messages)
        if done.hung:
            next_text = serialise([f"{TOOL_STATE_VERSION} timeout", done.hung])
            self._instances[slot["index"]] = self.factory()  # the hung call's thread may still use the old one
            self._end(slot, out, next_text=next_text, truncated=True, error=done.hung, score=False)
            return
        next_text = self._state_text(slot["env"], slot["conversation"])
        suffix = self._suffix(tool_messages)
        next_ids = slot["ids"] + row.completion_ids + suffix
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
        ep.won = score and reward >= self.success_threshold  # an unscored (hung) episode is never a success
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


__all__ = ["ToolEpisodeRunner", "ToolRollout", "call_with_timeout", "GenerateIdsFn", "ScoreFn"]
