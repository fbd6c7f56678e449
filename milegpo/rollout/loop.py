"""The batched episode loop: environment steps -> one training row per step.

:class:`EpisodeRunner` plays ``len(tasks) x group_size`` episodes in an environment
pool (all episodes of one group play the same Task), one batched generation call per
step for every live episode, and returns a :class:`Rollout`: one :class:`StepRow` per
environment step (the StepBatch fields of the spec plus prompt/completion token ids
and the sampling log-probs when the generation backend gives them) and one
:class:`Episode` per trajectory.

Generation is a callable so that the loop knows nothing about models::

    generate(prompts) -> (prompt_ids, completion_ids, logprobs | None, texts)

Overlap of generation and environment steps. The episodes of a wave are split into
``parts`` fixed parts (contiguous slot ranges, :meth:`EpisodeRunner.part_slots`); one
generation call serves the live episodes of one part, and the calls go part 0, 1, ...,
``parts - 1``, 0, 1, ... . With ``overlap=True`` the step of part k is sent to the pool
(``pool.step_async``) and collected only after the generation call of the next part, so that
an :class:`~milegpo.envs.EnvPool`'s workers play part k while the policy generates part k + 1:
an iteration costs about max(generation, environment) instead of their sum (the shorter is
hidden as far as the parts are balanced; a SequentialPool steps at the send, hiding nothing).

Equality guarantee: the rollout does not depend on ``overlap`` or on the pool (SequentialPool,
EnvPool of any number of workers). Every generation call sees the same prompts in the same
order either way, because (1) the parts are fixed by slot, not by timing; (2) the prompts of
part k depend only on part k's own episodes, whose last step is always collected before part
k is generated again (a step in flight is collected first if its part comes next); (3) every
collected step is applied before the next step is sent, in send order, so rows, histories and
``Rollout.rows`` come out in one order; (4) an environment's episode depends only on its task
and actions (each slot has its own environment, in whichever process). What does change the
rollout is ``parts`` (it changes the generation batches: a sampling generator draws its random
numbers per batch), so ``parts`` is the same for runs that must agree.

Under several processes every rank calls ``generate`` the same number of times: before each
call ``sync_any`` (an all-reduce "is anyone playing this part?") decides, on every rank alike,
whether the call is made; a rank with no live episode in that part generates for one dummy
prompt and discards it, so collective generation backends (vLLM server / tensor parallel,
ZeRO-3, FSDP) never deadlock. The decision for part k uses only part k's collected state,
which a step in flight of another part cannot change, so the overlap keeps this lockstep.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ..credit import SINK, StepBatch
from ..envs import Task, env_class
from ..envs.anchors import check_state_anchor
from ..envs.base import ENV_FAILURE, EnvFailure, goal_words
from ..envs.pool import make_pool
from ..state_sketches import StateSimilarity, StateSketch
from .parse import parse_action
from .prompt import as_model_input, render_prompt, shown_actions

GenerateFn = Callable[[list], tuple[list[list[int]], list[list[int]], "list[list[float]] | None", list[str]]]

#: what a rollout does with an episode its environment failed (a step that raised, returned what the protocol does
#: not take, timed out or lost its worker or server): ``"raise"`` stops the run after the rollout with an
#: :class:`~milegpo.envs.base.EnvFailure` naming the first failure, ``"skip"`` keeps the episode as it ended
#: (truncated, not won, its rows kept) and counts it (``env_errors`` of :func:`episode_metrics`)
ENV_ERRORS = ("raise", "skip")


def check_env_errors(value: str) -> str:
    """``value`` when it is one of :data:`ENV_ERRORS`; anything else a ValueError naming them."""
    if value not in ENV_ERRORS:
        raise ValueError(f"env_errors must be one of {', '.join(repr(v) for v in ENV_ERRORS)}, got {value!r}")
    return value


@dataclass
class StepRow:
    """One environment step = one training row (spec section 1 fields + tokens)."""

    group: int
    traj: int
    t: int
    state: int
    next_state: int
    reward: float
    invalid: bool
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float] | None
    completion: str
    action: str
    success: bool = False  # set when the episode ends
    milestone: bool = False  # the step completed one of the environment's verifiable subgoals (info["milestone"])


@dataclass
class Episode:
    """One trajectory: its group, task and outcome."""

    group: int
    traj: int
    task: Task
    won: bool = False
    length: int = 0
    invalid_steps: int = 0
    reward: float = 0.0
    truncated: bool = False
    error: str = ""  # why its environment failed (one line, info["error"] of a step marked ENV_FAILURE), "" if it did not
    traceback: str = ""  # the environment's traceback, where it raised
    score: float | None = None  # the world's score in [0, 1] at the end (``TextEnv.has_score``), else None


@dataclass
class Rollout:
    """What one call of :meth:`EpisodeRunner.run` returns."""

    rows: list[StepRow] = field(default_factory=list)
    episodes: list[Episode] = field(default_factory=list)
    #: seconds in generation calls
    generate_s: float = 0.0
    #: seconds the loop waited on the pool (resets, sends, collects): with the overlap, what generation
    #: did not hide
    env_s: float = 0.0
    #: the part of env_s spent in resets
    reset_s: float = 0.0
    generate_calls: int = 0
    #: key -> sketch of every observation that became a state or next_state, when the runner sketches
    #: (``state_similarity``); empty otherwise
    sketches: dict[int, StateSketch] = field(default_factory=dict)

    def step_batch(self, group_offset: int = 0, traj_offset: int = 0) -> StepBatch:
        """The rows as a validated :class:`~milegpo.credit.StepBatch` (row order kept)."""
        return StepBatch(**self.step_arrays(group_offset, traj_offset))

    def step_arrays(self, group_offset: int = 0, traj_offset: int = 0) -> dict[str, np.ndarray]:
        r = self.rows
        return {
            "group": np.array([x.group + group_offset for x in r], dtype=np.int64),
            "traj": np.array([x.traj + traj_offset for x in r], dtype=np.int64),
            "t": np.array([x.t for x in r], dtype=np.int64),
            "state": np.array([x.state for x in r], dtype=np.int64),
            "next_state": np.array([x.next_state for x in r], dtype=np.int64),
            "success": np.array([x.success for x in r], dtype=bool),
            "reward": np.array([x.reward for x in r], dtype=np.float64),
            "invalid": np.array([x.invalid for x in r], dtype=bool),
            "milestone": np.array([x.milestone for x in r], dtype=bool),
        }

    def episode_summaries(self) -> list[tuple[str, bool, int, int, float, float | None, bool]]:
        """(task_type, won, length, invalid_steps, reward, score, failed) per episode: small, for gathering across
        ranks (score: None in a world without one; failed: its environment failed, ``Episode.error``)."""
        return [(e.task.task_type, e.won, e.length, e.invalid_steps, e.reward, e.score, bool(e.error))
                for e in self.episodes]


def episode_metrics(summaries: Sequence[tuple], prefix: str = "") -> dict[str, float]:
    """Success rate (overall and per task type), mean length, invalid-action rate, mean return, ``env_errors`` (the
    episodes whose environment failed, a count; 0 unless the run plays on with ``env_errors="skip"``), and where the
    world scores episodes (WebShop) ``score``: the mean score x 100, over the episodes that have one (the
    paper's WebShop score). Summaries as :meth:`Rollout.episode_summaries` gives them."""
    if not summaries:
        return {}
    won = np.array([s[1] for s in summaries], dtype=float)
    length = np.array([s[2] for s in summaries], dtype=float)
    invalid = np.array([s[3] for s in summaries], dtype=float)
    out = {
        f"{prefix}success_rate": float(won.mean()),
        f"{prefix}episode_length": float(length.mean()),
        f"{prefix}invalid_action_rate": float(invalid.sum() / max(length.sum(), 1.0)),
        f"{prefix}return": float(np.mean([s[4] for s in summaries])),
        f"{prefix}episodes": float(len(summaries)),
        f"{prefix}env_errors": float(sum(bool(s[6]) for s in summaries if len(s) > 6)),
    }
    scores = [s[5] for s in summaries if len(s) > 5 and s[5] is not None]
    if scores:
        out[f"{prefix}score"] = 100.0 * float(np.mean(scores))
    by_type: dict[str, list[float]] = {}
    for s in summaries:
        if s[0]:
            by_type.setdefault(s[0], []).append(float(s[1]))
    for tt, v in sorted(by_type.items()):
        out[f"{prefix}success/{tt}"] = float(np.mean(v))
    return out


def final_score(task: Task, info: dict) -> float | None:
    """The score of an episode of ``task`` from its last step's ``info``: ``info["score"]`` in a world that
    scores episodes (:attr:`TextEnv.has_score`), else None. An episode the pool ended on an environment failure
    (``info["error"]``) bought nothing: 0.0. A scored world's missing or out-of-range score is an error naming
    the task."""
    if not env_class(task.env).has_score:
        return None
    if info.get("error"):
        return 0.0
    score = info.get("score")
    if not isinstance(score, (int, float)) or not 0.0 <= float(score) <= 1.0:
        raise ValueError(f"task {task.task_id!r}: a {task.env} episode must end with info['score'] in [0, 1], "
                         f"got {score!r}")
    return float(score)


def _local_only(flag: bool) -> bool:
    return flag


def _check_outputs(outputs, n_prompts: int) -> None:
    """``generate`` must return (prompt_ids, completion_ids, logprobs | None, texts), one entry per prompt."""
    if not isinstance(outputs, (tuple, list)) or len(outputs) != 4:
        raise ValueError("generate must return (prompt_ids, completion_ids, logprobs | None, texts), got "
                         f"{type(outputs).__name__}")
    for name, value in zip(("prompt_ids", "completion_ids", "logprobs", "texts"), outputs):
        if (value is not None or name != "logprobs") and len(value) != n_prompts:
            raise ValueError(f"generate returned {len(value)} {name} for {n_prompts} prompts")


class _Played(NamedTuple):
    """A step already played (a pool without ``step_async``), in the shape of a PendingStep."""

    outs: list

    def result(self) -> list:
        return self.outs


def _reset(pool, tasks: list, state_anchor):
    """``pool.reset(tasks, state_anchor=...)``; a pool of one's own whose reset takes no ``state_anchor`` keys its
    states as its environments do."""
    import inspect

    try:
        takes_anchor = "state_anchor" in inspect.signature(pool.reset).parameters
    except (TypeError, ValueError):  # a callable without a signature
        takes_anchor = False
    return pool.reset(tasks, state_anchor=state_anchor) if takes_anchor else pool.reset(tasks)


def _send_step(pool, actions: dict[int, str]):
    step_async = getattr(pool, "step_async", None)
    return step_async(actions) if step_async is not None else _Played(pool.step(actions))


class EpisodeRunner:
    """Plays task groups in a pool and records one row per step.

    pool: an :class:`~milegpo.envs.EnvPool` / :class:`~milegpo.envs.SequentialPool` (or anything
      with ``n``, ``reset(tasks[, state_anchor=...])``, ``step(actions)``, and ``step_async(actions).result()`` to play a
      step while the next part generates); None: on first use, :func:`~milegpo.envs.make_pool` for the
      tasks' kinds with ``num_env_workers`` workers.
    conversational: render prompts as chat messages (the tokenizer has a chat template) or text.
    history_length: (observation, action) pairs shown in the prompt (paper: 2).
    horizon: step budget cap: an episode lasts at most ``min(Task.horizon, horizon)`` steps (None: the task's).
    require_think: a completion without ``<think>...</think>`` is invalid.
    prompt_style: ``alfworld`` (the verl-agent template) or ``compact`` (:func:`render_prompt`).
    state_similarity: sketch every observation as it arrives (:class:`~milegpo.state_sketches.StateSimilarity`,
      once per distinct key) into ``Rollout.sketches``, for :func:`milegpo.credit.merge_similar_states`;
      None (the default): no sketches.
    state_anchor: what the rows' state keys are made of (:mod:`milegpo.envs.anchors`: a name of
      :data:`~milegpo.envs.anchors.STATE_ANCHORS`, a dotted path or a callable; None: the default,
      ``tracked+actions``), set in the pool's environments at every reset.
    show_state_context: show the state tracker's context line (``info["state_context"]``) after the current
      observation in the prompt; independent of ``state_anchor``, so key and prompt ablate apart.
    parts: generation calls per step of a wave's episodes (the module docstring: it sets the batches).
    overlap: step one part in the pool while generating the next (changes the timing, never the rollout).
    constrain_actions: call ``generate(prompts, admissible)``, ``admissible[i]`` the admissible actions of prompt
      ``i`` (an empty list for the dummy prompt of a call with no live episode), so that the backend constrains
      each row's action to them (``MileGPOTrainer``: ``MileGPOConfig.constrain_actions``); off:
      ``generate(prompts)``.
    constrain_query: with ``constrain_actions``, call ``generate(prompts, admissible, query_words)``,
      ``query_words[i]`` the words of prompt ``i``'s goal (:func:`milegpo.envs.base.goal_words`; None for
      the dummy prompt), so that a template's query is made of them (``MileGPOConfig.constrain_query``).
    num_env_workers: workers of the pool made when ``pool`` is None (``"auto"`` or an int).
    env_errors: an episode whose environment failed (:data:`ENV_ERRORS`): ``"raise"`` (default) stops the run when
      the rollout ends, with an :class:`~milegpo.envs.base.EnvFailure` naming the first failure (on every rank
      alike: the decision is one more ``sync_any``), ``"skip"`` keeps it as it ended (truncated) and counts it.
    env_step_timeout: seconds one environment step may take in the pool made when ``pool`` is None (an
      :class:`~milegpo.envs.EnvPool`'s workers; an in-process pool cannot time a step out).
    """

    def __init__(self, pool=None, *, conversational: bool = False, history_length: int = 2,
                 horizon: int | None = None, require_think: bool = False, prompt_style: str = "alfworld",
                 state_similarity: StateSimilarity | None = None, state_anchor=None,
                 show_state_context: bool = True, parts: int = 2, overlap: bool = True,
                 num_env_workers: int | str = "auto", constrain_actions: bool = False,
                 constrain_query: bool = False, env_errors: str = "raise",
                 env_step_timeout: float | None = None) -> None:
        if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
            raise ValueError(f"EpisodeRunner: parts must be an int >= 1, got {parts!r}")
        self.pool = pool
        self.conversational = conversational
        self.history_length = history_length
        self.horizon = horizon
        self.require_think = require_think
        self.prompt_style = prompt_style
        self.state_similarity = state_similarity
        self.state_anchor = check_state_anchor(state_anchor)
        self.show_state_context = bool(show_state_context)
        self.parts = parts
        self.overlap = overlap
        self.num_env_workers = num_env_workers
        self.constrain_actions = bool(constrain_actions)
        if constrain_query and not constrain_actions:
            raise ValueError("EpisodeRunner: constrain_query needs constrain_actions (it constrains the query of a "
                             "constrained action block)")
        self.constrain_query = bool(constrain_query)
        self.env_errors = check_env_errors(env_errors)
        self.env_step_timeout = env_step_timeout
        self._dummy_prompt: Any = as_model_input(render_prompt("", "", [], [], 0, 0, style=prompt_style),
                                                 conversational)

    def _ensure_pool(self, n: int, tasks: Sequence[Task]):
        if self.pool is None:
            options = {} if self.env_step_timeout is None else {"step_timeout": self.env_step_timeout}
            self.pool = make_pool(n, self.num_env_workers, kinds={t.env for t in tasks} or {"household"}, **options)
        return self.pool

    def _sketch(self, out: Rollout, key: int, info: dict) -> None:
        """Sketch the state anchor's text (``info["state_text"]``: what the key hashes) of a new key."""
        if self.state_similarity is not None and key not in out.sketches:
            out.sketches[key] = self.state_similarity.sketch(info["state_text"])

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()

    def part_slots(self, n_slots: int) -> list[list[int]]:
        """The slots of each part of a wave of ``n_slots`` episodes: ``parts`` contiguous ranges, the first
        ``n_slots % parts`` one longer (some are empty when there are fewer episodes than parts)."""
        size, extra = divmod(n_slots, self.parts)
        bounds = [k * size + min(k, extra) for k in range(self.parts + 1)]
        return [list(range(bounds[k], bounds[k + 1])) for k in range(self.parts)]

    def run(self, tasks: Sequence[Task], group_size: int, generate: GenerateFn,
            sync_any: Callable[[bool], bool] = _local_only) -> Rollout:
        """Play ``group_size`` episodes of every task; group ``g`` is ``tasks[g]``, traj = g * group_size + k.

        When the pool holds fewer than ``len(tasks) * group_size`` slots, groups are played in waves.
        ``sync_any(flag)`` must return whether ``flag`` is true on any rank (identity in one process).
        """
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        tasks = [dataclasses.replace(t, horizon=min(t.horizon, self.horizon)) if self.horizon else t for t in tasks]
        pool = self._ensure_pool(max(len(tasks), 1) * group_size, tasks)
        per_wave = pool.n // group_size
        if per_wave < 1:
            raise ValueError(f"the environment pool has {pool.n} slots, fewer than group_size={group_size}")
        waves = [list(range(i, min(i + per_wave, len(tasks)))) for i in range(0, len(tasks), per_wave)]
        out = Rollout()
        w = 0
        while sync_any(w < len(waves)):
            groups = waves[w] if w < len(waves) else []
            self._run_wave(pool, [(g, tasks[g]) for g in groups], group_size, generate, sync_any, out)
            w += 1
        if self.env_errors == "raise":
            self._raise_failures(out, sync_any)
        return out

    @staticmethod
    def _raise_failures(out: Rollout, sync_any: Callable[[bool], bool]) -> None:
        """Stop the run (every rank alike) when an environment failed in this rollout: the first failure's line."""
        failed = [e for e in out.episodes if e.error]
        if not sync_any(bool(failed)):
            return
        tail = "; env_errors='skip' plays on and counts such episodes"
        if not failed:
            raise EnvFailure(f"an environment failed in another process of the run (its line is in that process's "
                             f"output){tail}")
        first = failed[0]
        more = f" ({len(failed)} of {len(out.episodes)} episodes failed)" if len(failed) > 1 else ""
        raise EnvFailure(f"{first.error}{more}{tail}", first.traceback)

    def _run_wave(self, pool, groups, group_size, generate, sync_any, out: Rollout) -> None:
        slots: list[dict] = []
        if groups:
            t0 = time.perf_counter()
            firsts = _reset(pool, [task for _, task in groups for _ in range(group_size)], self.state_anchor)
            out.reset_s += time.perf_counter() - t0
            out.env_s += time.perf_counter() - t0
            for i, (obs, admissible, info) in enumerate(firsts):
                g, task = groups[i // group_size]
                ep = Episode(group=g, traj=g * group_size + i % group_size, task=task)
                out.episodes.append(ep)
                slots.append({"ep": ep, "obs": obs, "admissible": list(admissible), "shown": shown_actions(info),
                              "key": int(info["state_key"]),
                              "context": info.get("state_context", ""), "goal": info.get("goal", ""), "history": [],
                              "rows": [], "live": True})
                self._sketch(out, slots[-1]["key"], info)
        parts = self.part_slots(len(slots))
        in_flight: tuple | None = None  # (part, PendingStep, generated) of the step sent and not yet collected

        def collect() -> None:
            nonlocal in_flight
            part, pending, generated = in_flight
            in_flight = None
            t0 = time.perf_counter()
            results = pending.result()
            out.env_s += time.perf_counter() - t0
            self._apply(slots, generated, results, out)

        while True:
            played = False
            for k, part in enumerate(parts):
                if in_flight is not None and in_flight[0] == k:
                    collect()  # part k is generated again next: its last step must be in
                live = [s for s in part if slots[s]["live"]]
                if not sync_any(bool(live)):
                    continue  # no rank plays part k: no call
                played = True
                generated = self._generate(slots, live, generate, out)
                if in_flight is not None:
                    collect()  # the other part's step, played by the pool while this part generated
                if live:
                    t0 = time.perf_counter()
                    pending = _send_step(pool, {s: p.action for s, (_, p) in generated[1].items()})
                    out.env_s += time.perf_counter() - t0
                    in_flight = (k, pending, generated)
                    if not self.overlap:
                        collect()
            if not played:
                break
        if in_flight is not None:  # cannot happen (a part in flight is collected before its next call)
            collect()

    def _generate(self, slots, live: list[int], generate: GenerateFn, out: Rollout):
        """One generation call for the live slots ``live`` (a dummy prompt when there are none, to keep
        collective backends in lockstep); returns (outputs, {slot: (index in the call, ParsedAction)})."""
        if not live:
            prompts = [self._dummy_prompt]
        else:
            prompts = []
            for s in live:
                st = slots[s]
                text = render_prompt(st["goal"], st["obs"], st["shown"], st["history"], len(st["rows"]),
                                     self.history_length, self.prompt_style,
                                     st["context"] if self.show_state_context else "")
                prompts.append(as_model_input(text, self.conversational))
            self._dummy_prompt = prompts[0]
        t0 = time.perf_counter()
        if self.constrain_query:
            outputs = generate(prompts, [list(slots[s]["admissible"]) for s in live] if live else [[]],
                               [goal_words(slots[s]["goal"]) for s in live] if live else [None])
        elif self.constrain_actions:
            outputs = generate(prompts, [list(slots[s]["admissible"]) for s in live] if live else [[]])
        else:
            outputs = generate(prompts)
        out.generate_s += time.perf_counter() - t0
        out.generate_calls += 1
        _check_outputs(outputs, len(prompts))
        texts = outputs[3]
        parsed = {s: (j, parse_action(texts[j], slots[s]["admissible"], self.require_think))
                  for j, s in enumerate(live)}
        return outputs, parsed

    def _apply(self, slots, generated, results, out: Rollout) -> None:
        """Record the rows of one collected step and end the episodes it finished."""
        (prompt_ids, completion_ids, logprobs, texts), parsed = generated
        for s, (j, p) in parsed.items():
            st, res = slots[s], results[s]
            obs, reward, terminated, truncated, info = res
            done, won = bool(terminated or truncated), bool(info.get("won", False))
            ep: Episode = st["ep"]
            invalid = (not p.valid) or bool(info.get("invalid", False))
            row = StepRow(group=ep.group, traj=ep.traj, t=len(st["rows"]), state=st["key"],
                          next_state=SINK if won else int(info["state_key"]), reward=float(reward),
                          invalid=invalid, prompt_ids=list(prompt_ids[j]), completion_ids=list(completion_ids[j]),
                          logprobs=None if logprobs is None else list(logprobs[j]), completion=texts[j],
                          action=p.action, milestone=bool(info.get("milestone", False)))
            st["rows"].append(row)
            st["history"].append((st["obs"], p.action or texts[j].strip()[:80]))
            st["obs"], st["admissible"], st["key"] = obs, list(info.get("admissible_actions", [])), int(
                info["state_key"])
            st["context"], st["shown"] = info.get("state_context", ""), shown_actions(info)
            if not won:
                self._sketch(out, st["key"], info)
            ep.length += 1
            ep.invalid_steps += int(invalid)
            ep.reward += float(reward)
            if done:
                st["live"] = False
                ep.won, ep.truncated = bool(won), bool(info.get("truncated", False))
                if info.get(ENV_FAILURE):  # the pool's (or an adapter's) mark, not an "error" of the env's own info
                    ep.error, ep.traceback = str(info.get("error", "")), str(info.get("traceback", ""))
                ep.score = final_score(ep.task, info)
                for r in st["rows"]:
                    r.success = ep.won
                out.rows.extend(st["rows"])


__all__ = ["EpisodeRunner", "Rollout", "StepRow", "Episode", "GenerateFn", "episode_metrics", "final_score",
           "ENV_ERRORS", "check_env_errors"]
