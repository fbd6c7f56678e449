"""Task sets of a run: the training tasks and the evaluation splits of one environment kind."""

from __future__ import annotations

import dataclasses
import inspect

from ..envs import Task


#: the generator arguments make_tasks sets itself (an env option may not name them)
_SET_BY_MAKE_TASKS = ("split", "n", "start", "task_type", "horizon")


def _task_function(env: str):
    """The task function of environment kind ``env`` (its :class:`~milegpo.envs.EnvKind`, from the registry)."""
    from ..envs import EnvError, task_function

    try:
        return task_function(env)
    except EnvError as e:
        raise ValueError(str(e)) from None


def _fn_name(env: str, fn) -> str:
    """How an error names the task function of ``env``: ``milegpo.envs.household_tasks`` for a built-in world."""
    name = getattr(fn, "__name__", "tasks")
    return f"milegpo.envs.{name}" if name == f"{env}_tasks" else f"the task function of env {env!r}"


def check_env_options(env: str, options: dict | None) -> None:
    """Refuse an option of ``options`` that the task function of ``env`` does not take (or that
    :func:`make_tasks` sets itself), with a ValueError that lists those it does."""
    if not options:
        return
    fn = _task_function(env)
    params = inspect.signature(fn).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    own = sorted(k for k in params
                 if k not in _SET_BY_MAKE_TASKS and params[k].kind is not inspect.Parameter.VAR_KEYWORD)
    hints = _type_hints(fn)
    for key, value in options.items():
        if key in _SET_BY_MAKE_TASKS or not (takes_any or key in params):
            raise ValueError(f"env option {key!r} is not a setting of {_fn_name(env, fn)}; its settings: "
                             f"{own}{' and generator keywords' if takes_any else ''}")
        if key in hints and not _fits(value, hints[key]):
            raise ValueError(f"env option {key!r}={value!r}: expected {_type_text(hints[key])} (the type of "
                             f"{_fn_name(env, fn)}'s {key})")


def _type_hints(fn) -> dict:
    import typing

    try:
        return typing.get_type_hints(fn)
    except Exception:  # an annotation that does not resolve: no types to check
        return {}


def _fits(value, hint) -> bool:
    """Whether ``value`` (read from JSON) is of the annotated type ``hint``: int / float / bool / str / a path /
    None and unions of them; any other annotation takes any value. A bool is no int here, an int is a float."""
    import os
    import types
    import typing

    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_fits(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str or hint is os.PathLike:
        return isinstance(value, str)
    return True


def _type_text(hint) -> str:
    import types
    import typing

    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(dict.fromkeys(_type_text(h) for h in typing.get_args(hint)))
    return {type(None): "null", bool: "boolean", int: "integer", float: "number", str: "string"}.get(
        hint, "path" if getattr(hint, "__name__", "") == "PathLike" else str(hint))


def make_tasks(env: str, split: str, n: int, task_type: str = "", horizon: int | None = None,
               start: int = 0, options: dict | None = None) -> list[Task]:
    """``n`` Tasks of environment kind ``env`` and ``split`` (``train`` | ``id`` | ``ood``).

    Calls the kind's task function ``tasks(split, n, ...)`` (its :class:`~milegpo.envs.EnvKind`; e.g.
    :func:`milegpo.envs.household_tasks`); an unknown kind is an error that lists the known ones. ``options`` are the
    generator's own keyword arguments (household: ``max_receptacles``; textworld: ``level``, ``go``...);
    one the generator does not take is an error that lists those it does (:func:`check_env_options`).
    """
    fn = _task_function(env)
    check_env_options(env, options)
    kwargs = {"start": start, **(options or {})}
    if task_type:
        kwargs["task_type"] = task_type
    if horizon is not None:
        kwargs["horizon"] = horizon
    return check_made_tasks(env, split, n, fn(split, n, **kwargs))


def check_made_tasks(env: str, split: str, n: int, made) -> list[Task]:
    """What a kind's task function returned for ``(split, n)``, checked: a list (or tuple) of ``n``
    :class:`~milegpo.envs.Task` (``n`` None: any number; fewer were a smaller run, a str a list of letters: silently). A TypeError /
    ValueError naming it. A task of another kind (a task function registered under a second kind, e.g.
    ``register("mine", MyEnv, tasks=household_tasks)``) is played by the kind asked for: its ``env`` is set to
    ``env``, as :class:`~milegpo.envs.openenv.ServedTasks` does (it was played by the other kind's class)."""
    if not isinstance(made, (list, tuple)) or not all(isinstance(t, Task) for t in made):
        raise TypeError(f"the task function of environment kind {env!r} returned {type(made).__name__} {made!r:.80} "
                        f"for split {split!r}; expected a list of milegpo.envs.Task")
    if n is not None and len(made) != n:  # None: every task of the split (WebShop's)
        raise ValueError(f"the task function of environment kind {env!r} returned {len(made)} tasks for split "
                         f"{split!r}; {n} were asked")
    return [t if t.env == env else dataclasses.replace(t, env=env) for t in made]


__all__ = ["make_tasks", "check_env_options", "check_made_tasks"]
