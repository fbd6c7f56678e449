"""The environment protocol: tasks, text environments, canonical state keys, horizons.

Every environment of the project speaks one protocol (:class:`TextEnv`)::

    obs, admissible, info = env.reset(task)
    obs, reward, terminated, truncated, info = env.step(action)   # gymnasium's order; info["won"], info["admissible_actions"]

A subclass implements two hooks, :meth:`TextEnv._reset` and :meth:`TextEnv._step`;
the base class counts steps, truncates at the horizon, marks invalid actions and
attaches the canonical state key of every observation (``info["state_key"]``,
:func:`milegpo.state_keys.state_key`).

Milestones: a world whose step completed one of its verifiable subgoals says so with ``info["milestone"] =
True`` in what :meth:`TextEnv._step` returns (a bool; absent: False). The rollout copies it into the row's
``milestone`` field of the StepBatch (what BEACON's credit reads). The shipped worlds define theirs: the
household world and ALFWorld from the task's structure (:mod:`milegpo.envs.household.subgoals`), WebShop its
page phases (:mod:`milegpo.envs.webshop.phases`), TextWorld a rise of its score.

This module imports nothing heavy (no torch): pool workers import it at start-up.
"""

from __future__ import annotations

import hashlib
import math
import re
import traceback
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from numbers import Real
from typing import Any, Callable, ClassVar, Mapping, Sequence

from ..state_keys import SINK, canonical_state, state_key  # re-exported: one definition, torch-free
from ..usage import RunError
from .anchors import DEFAULT_STATE_ANCHOR, AnchorSpec, StateTracker, call_anchor, resolve_state_anchor

#: ALFWorld's answer to an action that does nothing; every world here uses it for invalid actions.
NOTHING_HAPPENS = "Nothing happens."

#: ALFWorld's six task types; the embedded household world and the game generator use them too.
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)

#: the default episode length (ALFWorld's 50 steps).
DEFAULT_HORIZON = 50

#: :meth:`TextEnv.steps_to_win` of a state from which no sequence of actions wins.
UNWINNABLE: int = 1 << 30

#: an admissible entry ``name[<...>]`` is a template (WebShop's ``search[<your query>]``): it admits ``name[<any text>]``
_TEMPLATE = re.compile(r"^([^\[\]<>]+)\[<[^<>]*>\]$")


def action_template(entry: str) -> str | None:
    """The name of a template entry ``name[<...>]`` (WebShop's ``search[<your query>]`` -> ``"search"``: it admits
    ``name[<any text that is not blank>]``), None for an entry that is an action as written."""
    template = _TEMPLATE.match(entry)
    return None if template is None else template.group(1)


#: characters a template's free text (a WebShop query) may not hold: they would end it or open a tag
QUERY_FORBIDDEN = "[]<>"
#: characters stripped from the ends of a goal's word (:func:`goal_words`): punctuation that follows or wraps a word
WORD_EDGE_PUNCTUATION = ".,;:!?\"'()"


def goal_words(goal: str) -> tuple[str, ...]:
    """The words a template's query may be made of under ``MileGPOConfig.constrain_query``: the goal text's
    whitespace-separated words, lower-cased (WebShop lower-cases a query), :data:`WORD_EDGE_PUNCTUATION` stripped
    from their ends, those holding one of ``[ ] < >`` dropped (they would end the query or open a tag), each once
    (first seen first). ``"i need a red scarf, and price lower than 40.00 dollars"`` -> ``("i", "need", "a",
    "red", "scarf", "and", "price", "lower", "than", "40.00", "dollars")``. A goal with no such word is a
    ValueError naming it (no query could be written)."""
    found: dict[str, None] = {}
    for raw in goal.lower().split():
        word = raw.strip(WORD_EDGE_PUNCTUATION)
        if word and not any(c in word for c in QUERY_FORBIDDEN):
            found.setdefault(word)
    if not found:
        raise ValueError(f"constrain_query: the goal {goal!r} has no word a query could use")
    return tuple(found)


def match_action(action: str, admissible: Sequence[str], loose: bool = False) -> str | None:
    """The admissible action ``action`` stands for, or None when it is not admissible.

    An entry is admissible as written, or, when it is a template ``name[<...>]`` (e.g. WebShop's
    ``search[<your query>]``), by any ``name[text]`` whose text is not blank. Strict (``loose=False``,
    what :meth:`TextEnv.step` uses): ``action`` must be spelled as the entry; loose (what
    :func:`milegpo.rollout.parse_action` uses): case and runs of whitespace are ignored, and the
    entry's spelling is returned (a template's name with the action's text, whitespace collapsed).
    """
    # loose: the text with whitespace collapsed (as canonical_state collapses it), lower-cased
    norm = (lambda t: canonical_state(t).lower()) if loose else (lambda t: t)
    wanted = norm(action)
    for entry in admissible:
        if norm(entry) == wanted:
            return entry
    for entry in admissible:
        template = _TEMPLATE.match(entry)
        if template is None:
            continue
        name = template.group(1)
        prefix = norm(name) + "["
        if wanted.startswith(prefix) and wanted.endswith("]") and wanted[len(prefix):-1].strip():
            text = action.strip()[len(name) + 1:-1]
            return f"{name}[{canonical_state(text)}]" if loose else action
    return None


def stable_seed(*parts: Any) -> int:
    """A 63-bit seed derived from ``parts`` (stable across processes, unlike ``hash``)."""
    text = "\x1f".join(repr(p) for p in parts)
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little") >> 1


@dataclass(frozen=True)
class Task:
    """One game to play. All episodes of a task group play the same Task, hence the same game.

    task_id: unique name (e.g. ``"household/train/17"``, or the game's path for ALFWorld);
    env: which world plays it (``"household"``, ``"textworld"``, ``"alfworld"``; see
    :func:`milegpo.envs.register`); seed: the generator seed (embedded world, TextWorld);
    game_file: the game on disk (ALFWorld ``game.tw-pddl``, TextWorld ``.z8``/``.ulx``);
    task_type: e.g. ``"pick_heat_then_place_in_recep"`` or ``"tw-cooking"``; split:
    ``"train"``, ``"id"`` (ALFWorld valid_seen) or ``"ood"`` (valid_unseen); horizon: the
    step budget, the episode is truncated (done, not won) when it is spent; options: extra
    generator settings as ``(name, value)`` pairs (hashable, so a Task can key a dict).
    """

    task_id: str
    env: str = "household"
    seed: int | None = None
    game_file: str | None = None
    task_type: str = ""
    split: str = "train"
    horizon: int = DEFAULT_HORIZON
    options: tuple[tuple[str, Any], ...] = field(default=())

    def option(self, name: str, default: Any = None) -> Any:
        for k, v in self.options:
            if k == name:
                return v
        return default

    def to_dict(self) -> dict:
        return asdict(self)


class EnvError(RuntimeError):
    """An environment that cannot play the task it was given (missing file, unknown kind)."""


class EnvFailure(EnvError, RunError):
    """An environment's own failure during a run, in one line naming the environment kind, the method (``reset`` /
    ``step``), the task and the error (:func:`failure_line`): its reset or step raised, returned what the protocol
    does not take (a 4-tuple, a NaN reward), or did not answer within a pool's step timeout. A pool raises it at a
    reset; an episode's step failure ends that episode, and :class:`~milegpo.rollout.EpisodeRunner` raises it after
    the rollout unless ``env_errors="skip"`` (``MileGPOConfig.env_errors``). ``milegpo`` prints the line and exits 1.
    ``details``: the traceback where there is one."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details


#: the info key that marks a step as an environment failure (``info["error"]`` then holds its line): set by the pools
#: and the adapters that lose their engine (an OpenEnv server gone), never read from an environment's own info
ENV_FAILURE = "env_failure"


def failure_line(kind: str, method: str, task_id: str | None, error: BaseException | str, step: int | None = None) -> str:
    """``environment 'maze': step 3 of task 'maze/train/0' raised RuntimeError: boom (at maze.py:42 in step)``: one
    line naming the environment kind, the method, the task and the error (an exception, with the innermost frame of
    its traceback, or a text saying what happened)."""
    what = method if step is None else f"{method} {step}"
    where = f"environment {kind!r}: {what}" + (f" of task {task_id!r}" if task_id is not None else "")
    if isinstance(error, BaseException):
        frames = traceback.extract_tb(error.__traceback__) if error.__traceback__ is not None else []
        at = f" (at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
        return f"{where} raised {error_summary(error)}{at}"
    return f"{where}: {error}"


def error_summary(error: BaseException) -> str:
    """``RuntimeError: the first line of its message`` (the type alone when the message is empty)."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}{': ' + text if text else ''}"


def step_flag(value: Any, what: str) -> bool:
    """A step's bool (``terminated``, ``truncated``, ``won``, ``info["invalid"]``): a bool, a numpy bool or the int
    0 / 1; anything else (the str ``"false"`` was True) a TypeError naming ``what``."""
    numpy_bool = getattr(getattr(value, "dtype", None), "kind", "") == "b" and getattr(value, "shape", None) == ()
    if isinstance(value, bool) or numpy_bool or (type(value) is int and value in (0, 1)):
        return bool(value)
    raise TypeError(f"{what} = {type(value).__name__} {value!r:.80}, expected a bool")


def finite_reward(value: Any, what: str) -> float:
    """A step's reward as a float: a finite real number (not a bool); anything else (NaN, inf, None, a str) a
    TypeError naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
        raise TypeError(f"{what} returned reward {value!r:.80}, expected a finite number")
    return float(value)


def _actions(value: Any, what: str) -> list[str]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(a, str) for a in value):
        raise TypeError(f"{what} returned admissible actions {value!r:.120}, expected a list of str")
    return list(value)


class TextEnv(ABC):
    """A text game played one action at a time.

    ``reset(task) -> (observation, admissible_actions, info)``;
    ``step(action) -> (observation, reward, terminated, truncated, info)``, in gymnasium's order: ``terminated``
    the game ended (won, or lost), ``truncated`` the episode was cut short without an ending (the horizon was
    reached, or the world said so); the episode is done when either is true (:attr:`done`), and ``info["won"]``
    (also :attr:`won`) says whether it was won.

    ``info`` always holds: ``state_key`` (int, :func:`state_key` of the state anchor's text),
    ``state_text`` (that text), ``state_context`` (the tracker's context line, "" where there is none; see
    :mod:`milegpo.envs.anchors`), ``admissible_actions`` (list[str]), ``step`` (steps taken so far), ``invalid`` (the
    action was not admissible; the world answered, usually "Nothing happens."), ``milestone`` (the step completed
    one of the world's verifiable subgoals: what :meth:`_step` said, False on reset and where it said nothing),
    ``truncated`` (the horizon was reached before a win), ``won``, ``lost`` (the game
    ended without a win before the horizon, e.g. a burnt meal in TextWorld), and on reset
    ``task`` (the Task as a dict), ``goal`` (the task sentence) and ``game_id`` (a
    fingerprint of the game: equal for every episode of one task group).

    The state anchor (:attr:`state_anchor`, set by :meth:`set_state_anchor`; default
    :data:`~milegpo.envs.anchors.DEFAULT_STATE_ANCHOR`) says what the key is made of; ``"observation"`` keys the
    observation alone, as before anchors existed. A world follows what its observations do not show with the
    tracker :meth:`make_tracker` returns, fed at every reset and step here (one hook for every caller: in-process
    and in pool workers alike).

    Subclasses implement :meth:`_reset` and :meth:`_step`; optionally :meth:`make_tracker`, :meth:`expert_action`,
    :meth:`read_action` and more experts (:attr:`experts`, :meth:`expert`). A step after ``done`` raises
    :class:`EnvError`; an action that is not a ``str`` (``None``, a list) a ``TypeError``, in every world.
    """

    #: the kind this class plays (:func:`milegpo.envs.register`; an instance made by the registry carries its kind)
    kind: str = ""
    #: a step of this world costs more than a round trip to a pool worker (pickling and two pipe hops,
    #: ~0.1-0.3 ms), so that ``num_env_workers="auto"`` plays it in an EnvPool's workers; a world whose
    #: steps are cheaper declares False and is stepped in-process (``bench/test_env_pool.py`` measures both)
    step_in_workers: bool = True
    #: the world's experts, name -> the method that returns its next action (see :meth:`expert`):
    #: ``"search"`` acts only on what the agent has observed (a policy can learn to imitate it), ``"oracle"``
    #: may read the hidden state
    experts: ClassVar[Mapping[str, str]] = {}
    #: whether ``info["score"]`` holds the episode's score in [0, 1] (WebShop's raw reward; 0 until the end):
    #: the rollout then reports it as the ``score`` metric (mean x 100) beside the success rate
    has_score: ClassVar[bool] = False

    def __init__(self) -> None:
        self.task: Task | None = None
        self.steps = 0
        self.done = True
        self.won = False
        self.last_obs = ""
        self.admissible: list[str] = []
        self.tracker: StateTracker = StateTracker()
        self.set_state_anchor(DEFAULT_STATE_ANCHOR)

    # ------------------------------------------------------------------ state anchor
    def set_state_anchor(self, spec: AnchorSpec | None) -> None:
        """Key states by ``spec`` from the next reset on: a name of
        :data:`~milegpo.envs.anchors.STATE_ANCHORS`, a dotted path to an anchor callable, a callable
        ``(observation, context, admissible) -> text``, or None (the default anchor). A bad one is a ValueError
        naming the built-in anchors."""
        self._anchor_fn = resolve_state_anchor(spec)
        self.state_anchor = DEFAULT_STATE_ANCHOR if spec is None else spec

    def make_tracker(self) -> StateTracker:
        """A fresh tracker for an episode (:class:`~milegpo.envs.anchors.StateTracker`); the base class's tracks
        nothing (empty context)."""
        return StateTracker()

    def _anchor_info(self, obs: str, admissible: Sequence[str]) -> dict:
        """``state_key``, ``state_text`` and ``state_context`` of the observation that just arrived."""
        context = self.tracker.context()
        task = self.task.task_id if self.task is not None else "?"
        where = f"the reset of task {task!r}" if self.steps == 0 else f"step {self.steps} of task {task!r}"
        text = call_anchor(self._anchor_fn, self.state_anchor, obs, context, list(admissible), where)
        return {"state_key": state_key(text), "state_text": text, "state_context": context}

    # ------------------------------------------------------------------ hooks
    @abstractmethod
    def _reset(self, task: Task) -> tuple[str, list[str], dict]:
        """Start ``task``; return (observation, admissible actions, info with 'goal', 'game_id')."""

    @abstractmethod
    def _step(self, action: str) -> tuple[str, float, bool, list[str], dict]:
        """Play ``action``; return (observation, reward, won, admissible actions, info).

        ``info["lost"] = True`` ends the episode without a win (a game that can be lost); ``info["truncated"] =
        True`` ends it truncated (the world's own time limit, a lost connection), as the horizon does;
        ``info["milestone"] = True`` says the step completed one of the world's verifiable subgoals (a bool: a
        TypeError naming the world otherwise).
        """

    def _invalid(self, action: str) -> bool | None:
        """Whether ``action`` (as :meth:`read_action` read it) is not admissible in the current state: not one of
        :attr:`admissible` (:func:`match_action`). None: the world tells after the step (``info["invalid"]`` of
        :meth:`_step`; a world that takes free text)."""
        return match_action(action, self.admissible) is None

    def expert_action(self) -> str | None:
        """The next action of the world's expert from the current state, or None if it has none."""
        return None

    def expert(self, name: str = "search") -> Callable[[], str | None]:
        """The next-action method of this world's expert ``name`` (one of :attr:`experts`); any other name is
        a ValueError that lists the world's experts."""
        if name not in self.experts:
            raise ValueError(f"{type(self).__name__}: expert must be "
                             f"{' or '.join(repr(n) for n in self.experts) or '(none: this world has no expert)'}, "
                             f"got {name!r}")
        return getattr(self, self.experts[name])

    def playable_actions(self, admissible: Sequence[str]) -> list[str]:
        """The admissible actions as commands a chooser that writes no text can send (a random action, a tabular
        policy): the list itself, except where an entry is a template, which the world fills in with what its
        non-privileged expert would type (WebShop: ``search[<your query>]`` becomes the expert's query)."""
        return list(admissible)

    def steps_to_win(self) -> int | None:
        """Privileged knowledge for judging credit, never shown to an agent: the fewest actions that win
        from the current hidden state, as the world's own planner counts them; ``None`` where the world
        cannot tell, :data:`UNWINNABLE` where no sequence of actions wins. A step is on an optimal path
        when it is valid and lowers this by one (``milegpo.evidence.quality`` labels steps so).

        Asked only when labels are wanted (``milegpo.evidence.labelled.play_episode(..., label=True)``, or a
        replay of recorded actions), so training pays nothing for it. Household: an exact planner
        (:mod:`milegpo.envs.household.planner`); TextWorld: its winning policy's length; ALFWorld: its PDDL
        planner's plan length (the last two not proven shortest)."""
        return None

    def close(self) -> None:
        """Free what the environment holds (processes, files)."""

    # ------------------------------------------------------------------ protocol
    def reset(self, task: Task) -> tuple[str, list[str], dict]:
        if task.horizon < 1:
            raise ValueError(f"Task {task.task_id!r}: horizon must be >= 1, got {task.horizon}")
        obs, admissible, info = self._checked_reset(self._reset(task))
        self.task, self.steps, self.done, self.won = task, 0, False, False
        self.last_obs, self.admissible = obs, list(admissible)
        info = dict(info)
        self.tracker = self.make_tracker()
        self.tracker.reset(obs, info)
        info.update(self._anchor_info(obs, admissible), admissible_actions=list(admissible), step=0, invalid=False,
                    milestone=False, truncated=False, won=False, lost=False, task=task.to_dict())
        info.setdefault("goal", "")
        info.setdefault("game_id", task.task_id)
        return obs, list(admissible), info

    def _checked_reset(self, out: Any) -> tuple[str, list[str], dict]:
        """What :meth:`_reset` returned, checked: (observation str, admissible actions list of str, info dict); anything
        else is a TypeError naming the class (a world of the project, or a user's subclass, that returns another
        shape: ``None``, a 2-tuple)."""
        what = f"{type(self).__name__}._reset"
        if not (isinstance(out, tuple) and len(out) == 3):
            raise TypeError(f"{what} returned {type(out).__name__} {out!r:.80}, expected (observation, admissible "
                            "actions, info)")
        obs, admissible, info = out
        if not isinstance(obs, str):
            raise TypeError(f"{what} returned a {type(obs).__name__} observation, expected str")
        if not isinstance(info, dict):
            raise TypeError(f"{what} returned a {type(info).__name__} info, expected a dict")
        return obs, _actions(admissible, what), info

    def _checked_step(self, out: Any) -> tuple[str, float, bool, list[str], dict]:
        """What :meth:`_step` returned, checked: (observation str, reward a finite number, won a bool, admissible
        actions list of str, info dict); anything else (a NaN reward, a 4-tuple) is a TypeError naming the class."""
        what = f"{type(self).__name__}._step"
        if not (isinstance(out, tuple) and len(out) == 5):
            shape = f"a {len(out)}-tuple" if isinstance(out, tuple) else f"{type(out).__name__} {out!r:.60}"
            raise TypeError(f"{what} returned {shape}, expected (observation, reward, won, admissible actions, info)")
        obs, reward, won, admissible, info = out
        if not isinstance(obs, str):
            raise TypeError(f"{what} returned a {type(obs).__name__} observation, expected str")
        if not isinstance(info, dict):
            raise TypeError(f"{what} returned a {type(info).__name__} info, expected a dict")
        return (obs, finite_reward(reward, what), step_flag(won, f"{what} returned won"), _actions(admissible, what),
                info)

    def read_action(self, action: str) -> str:
        """The action as this world reads it (``action`` already stripped); WebShop lower-cases the argument
        of ``name[argument]``. Default: unchanged."""
        return action

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """Play ``action``; returns ``(observation, reward, terminated, truncated, info)`` (see the class)."""
        if not isinstance(action, str):
            raise TypeError(f"{type(self).__name__}.step: an action is a str (one of info['admissible_actions'] "
                            f"or any text), got {type(action).__name__} {action!r:.80}")
        if self.task is None:
            raise EnvError(f"{type(self).__name__}.step called before reset")
        if self.done:
            raise EnvError(f"{type(self).__name__}.step: episode of task {self.task.task_id!r} is done "
                           f"(after {self.steps} steps); call reset")
        action = self.read_action(action.strip())
        invalid = self._invalid(action)
        obs, reward, won, admissible, info = self._checked_step(self._step(action))
        if invalid is None:
            invalid = bool(info.get("invalid", False))
        self.steps += 1
        lost = bool(info.get("lost", False)) and not won
        truncated = (not won) and (not lost) and (self.steps >= self.task.horizon or bool(info.get("truncated")))
        self.done, self.won = bool(won or lost or truncated), bool(won)
        self.last_obs, self.admissible = obs, list(admissible)
        info = dict(info)
        self.tracker.update(action, obs, bool(invalid), info)
        info.update(self._anchor_info(obs, admissible), admissible_actions=list(admissible), step=self.steps,
                    invalid=bool(invalid and not won), milestone=self._milestone(info), truncated=truncated,
                    won=bool(won), lost=lost)
        return obs, float(reward), bool(won or lost), truncated, info

    def _milestone(self, info: dict) -> bool:
        """``info["milestone"]`` of :meth:`_step` (False when absent); anything but a bool (or a numpy bool) is a
        TypeError naming the world and the step (``"false"`` would have been True)."""
        value = info.get("milestone", False)
        dtype = getattr(value, "dtype", None)  # a numpy bool scalar (np.True_) without importing numpy here
        if isinstance(value, bool) or (getattr(dtype, "kind", "") == "b" and getattr(value, "ndim", 1) == 0):
            return bool(value)
        task = self.task.task_id if self.task is not None else "?"
        raise TypeError(f"{type(self).__name__}: step {self.steps} of task {task!r} returned info['milestone'] = "
                        f"{type(value).__name__} {value!r:.80}, expected a bool (did the step complete one of the "
                        "world's verifiable subgoals)")


def success_by_task_type(task_types, won) -> dict[str, float]:
    """Success rate per task type (plus ``"all"``) from parallel sequences of task types and outcomes."""
    task_types, won = list(task_types), [bool(w) for w in won]
    if len(task_types) != len(won):
        raise ValueError(f"success_by_task_type: {len(task_types)} task types but {len(won)} outcomes")
    out: dict[str, float] = {}
    for t in sorted(set(task_types)):
        ws = [w for tt, w in zip(task_types, won) if tt == t]
        out[t] = sum(ws) / len(ws)
    out["all"] = sum(won) / len(won) if won else float("nan")
    return out


__all__ = ["SINK", "UNWINNABLE", "match_action", "action_template", "goal_words", "WORD_EDGE_PUNCTUATION", "QUERY_FORBIDDEN", "success_by_task_type", "NOTHING_HAPPENS", "DEFAULT_HORIZON", "Task", "TextEnv", "EnvError", "canonical_state",
           "state_key", "stable_seed", "EnvFailure", "ENV_FAILURE", "failure_line", "error_summary", "step_flag", "finite_reward"]
