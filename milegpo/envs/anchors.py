"""State anchors: what a row's ``state`` key is made of, and the tracker context a prompt may show.

A state anchor turns what the agent has seen at a step into the text its state key hashes
(``info["state_text"]``, keyed by :func:`milegpo.state_keys.state_key` into ``info["state_key"]``) and the
context line a prompt may show after the observation (``info["state_context"]``). The context comes from the
environment's :class:`StateTracker` (:meth:`milegpo.envs.TextEnv.make_tracker`), which follows, from the
actions and observations of the episode, what the observation alone does not say (the household's object in
hand, what it heated or moved; WebShop's query, page and selected options). Anchors by name:

- ``observation``: the observation alone; its key is ``state_key(observation)``, bit for bit the key of the
  runs before anchors existed (verl-agent's GiGPO anchor);
- ``observation+actions``: the observation and the sorted admissible actions;
- ``tracked``: the observation with the tracker's context line appended;
- ``tracked+actions`` (the default, :data:`DEFAULT_STATE_ANCHOR`): both (the public GraphGPO recipe's key).

Every anchor but ``observation`` is a length-prefixed serialisation (:func:`serialise`) of a version tag naming
the anchor, the (canonical) observation text, and for ``+actions`` the number of admissible actions and every
one of them in sorted order, so that no two different inputs serialise alike and no two anchors share a key.
A world without a tracker has an empty context (``tracked`` is then the observation under another tag).

A user's own anchor is a callable ``anchor(observation, context, admissible) -> str`` (the text to key), or
the dotted path to one (``"package.module:function"`` or ``"package.module.function"``), resolved where the
environment runs (pool workers too). This module imports nothing heavy (no torch).
"""

from __future__ import annotations

from typing import Callable, Sequence, Union

from ..state_keys import canonical_state
from ..usage import RunError, resolve_dotted

#: the built-in anchors, by name
STATE_ANCHORS = ("observation", "observation+actions", "tracked", "tracked+actions")
#: the anchor of a run that names none (``MileGPOConfig.state_anchor``, a bare environment)
DEFAULT_STATE_ANCHOR = "tracked+actions"
#: the version tag of the serialisation: a change of what an anchor holds changes it
ANCHOR_VERSION = "milegpo-state/1"

#: anchor(observation, context, admissible actions) -> the text its state key hashes
AnchorFn = Callable[[str, str, Sequence[str]], str]
#: what ``state_anchor`` settings take: a built-in name, a dotted path to an AnchorFn, or an AnchorFn
AnchorSpec = Union[str, AnchorFn]


def serialise(parts: Sequence[str]) -> str:
    """``parts`` as one text, each part canonical (:func:`canonical_state`) and prefixed by its length and a
    colon: ``"5:hello3:a b"``. Two different lists never serialise alike, and the text is its own canonical form
    (no whitespace at a joint), so :func:`~milegpo.state_keys.state_key` hashes exactly it."""
    out = []
    for part in parts:
        text = canonical_state(part)
        out.append(f"{len(text)}:{text}")
    return "".join(out)


def observed_text(observation: str, context: str) -> str:
    """The observation with the tracker's context line appended (a newline between; the observation alone when
    the context is empty): what the ``tracked`` anchors key and what a prompt shows with the context on."""
    return f"{observation}\n{context}" if context else observation


def anchor_text(anchor: str, observation: str, context: str, admissible: Sequence[str]) -> str:
    """The text a built-in anchor keys (see the module docstring).

    anchor: one of :data:`STATE_ANCHORS`; observation: the raw observation; context: the tracker's context line
    ("" where there is none); admissible: the admissible actions (any order: sorted here)."""
    if anchor == "observation":
        return observation
    if anchor not in STATE_ANCHORS:
        raise ValueError(f"state_anchor must be one of {', '.join(STATE_ANCHORS)} or a dotted path to a callable, "
                         f"got {anchor!r}")
    shown = observed_text(observation, context) if anchor.startswith("tracked") else observation
    parts = [f"{ANCHOR_VERSION} {anchor}", shown]
    if anchor.endswith("+actions"):
        actions = sorted(admissible)
        parts += [str(len(actions)), *actions]
    return serialise(parts)


class AnchorError(RunError):
    """A user's state anchor failed where it ran: it raised, or returned something other than a str. The
    message names the anchor and where (the reset, or the step, of which task). Never an episode's truncation:
    a pool raises it to its caller, and the run stops (``milegpo`` prints the line)."""


def _import_path(path: str) -> AnchorFn:
    form = (f"a dotted path to a callable is 'package.module:function' or 'package.module.function', importable "
            f"from anywhere (built-in anchors: {', '.join(STATE_ANCHORS)})")
    try:
        found = resolve_dotted(path)
    except ValueError as e:
        raise ValueError(f"state_anchor {path!r}: {e}; {form}") from None
    if not callable(found):
        raise ValueError(f"state_anchor {path!r} is a {type(found).__name__}, not a callable")
    return found


def resolve_state_anchor(spec: AnchorSpec | None) -> AnchorFn:
    """The anchor function of a ``state_anchor`` setting: a built-in name, a dotted path, a callable, or None
    (:data:`DEFAULT_STATE_ANCHOR`). A name that is neither built in nor importable is a ValueError naming the
    built-in anchors."""
    if spec is None:
        spec = DEFAULT_STATE_ANCHOR
    if callable(spec):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"state_anchor must be a str (one of {', '.join(STATE_ANCHORS)} or a dotted path) or a "
                        f"callable, got {type(spec).__name__} {spec!r:.80}")
    if spec in STATE_ANCHORS:
        return _BUILT_IN[spec]
    if "." not in spec and ":" not in spec:
        raise ValueError(f"state_anchor must be one of {', '.join(STATE_ANCHORS)} or a dotted path to a callable, "
                         f"got {spec!r}")
    return _import_path(spec)


def call_anchor(fn: AnchorFn, spec: AnchorSpec | None, observation: str, context: str, admissible: Sequence[str],
                where: str) -> str:
    """``fn(observation, context, admissible)``, the text the state key hashes; an exception of the anchor, or a
    value that is not a str, is an :class:`AnchorError` naming the anchor (:func:`anchor_name` of ``spec``) and
    ``where`` it ran ("the reset of task 'x'", "step 3 of task 'x'")."""
    try:
        text = fn(observation, context, admissible)
    except Exception as e:  # noqa: BLE001 - a user's anchor may raise anything
        raise anchor_raised(f"state_anchor {anchor_name(spec)}", e, where) from e
    if not isinstance(text, str):
        raise AnchorError(f"state_anchor {anchor_name(spec)} returned a {type(text).__name__} ({text!r:.60}), "
                          f"expected the str its state key hashes, at {where}")
    return text


def anchor_raised(anchor: str, error: BaseException, where: str) -> AnchorError:
    """The one-line :class:`AnchorError` for an anchor (``anchor`` names it) that raised ``error`` at ``where``."""
    message = str(error).splitlines()[0] if str(error) else ""
    return AnchorError(f"{anchor} raised {type(error).__name__}{': ' + message if message else ''} at {where}")


def check_state_anchor(spec: AnchorSpec | None) -> AnchorSpec:
    """``spec`` itself once it resolves (:func:`resolve_state_anchor`), for settings checked where they enter."""
    resolve_state_anchor(spec)
    return DEFAULT_STATE_ANCHOR if spec is None else spec


def anchor_name(spec: AnchorSpec | None) -> str:
    """The name a report gives an anchor setting: the built-in name or dotted path, a callable's qualified name."""
    if spec is None:
        return DEFAULT_STATE_ANCHOR
    if isinstance(spec, str):
        return spec
    return f"{getattr(spec, '__module__', '?')}:{getattr(spec, '__qualname__', repr(spec))}"


def _built_in(anchor: str) -> AnchorFn:
    def fn(observation: str, context: str, admissible: Sequence[str]) -> str:
        return anchor_text(anchor, observation, context, admissible)

    fn.__name__ = fn.__qualname__ = f"anchor[{anchor}]"
    return fn


_BUILT_IN = {name: _built_in(name) for name in STATE_ANCHORS}


class StateTracker:
    """What an episode has done that its observation may not show, followed from actions and observations.

    :meth:`reset` at the episode's start, :meth:`update` after every step (the action as the world read it, the
    observation it answered, whether the action was admissible), :meth:`context` the line a prompt may show and
    the ``tracked`` anchors key. A tracker never raises on an action it cannot read: it stays as it was. This
    base class tracks nothing (an empty context): a world without a tracker of its own."""

    def reset(self, observation: str, info: dict) -> None:
        """Forget the last episode; ``observation`` / ``info``: what the reset returned."""

    def update(self, action: str, observation: str, invalid: bool, info: dict) -> None:
        """Follow one step: ``action`` as the world read it, the ``observation`` it answered, ``invalid`` (the
        action was not admissible), the step's ``info``."""

    def context(self) -> str:
        """The context line ("" when there is nothing to say)."""
        return ""


__all__ = ["AnchorError", "call_anchor", "STATE_ANCHORS", "DEFAULT_STATE_ANCHOR", "ANCHOR_VERSION", "AnchorFn", "AnchorSpec", "serialise",
           "observed_text", "anchor_text", "resolve_state_anchor", "check_state_anchor", "anchor_name",
           "StateTracker"]
