"""Task sets of a run: the training tasks and the evaluation splits of one environment kind."""

from __future__ import annotations

import importlib

from ..envs import Task


def make_tasks(env: str, split: str, n: int, task_type: str = "", horizon: int | None = None,
               start: int = 0) -> list[Task]:
    """``n`` Tasks of environment kind ``env`` and ``split`` (``train`` | ``id`` | ``ood``).

    Calls ``milegpo.envs.<env>_tasks(split, n, ...)`` (e.g. :func:`milegpo.envs.household_tasks`);
    an environment kind without such a function is an error that names it.
    """
    envs = importlib.import_module("milegpo.envs")
    try:
        fn = getattr(envs, f"{env}_tasks")
    except AttributeError:
        raise ValueError(f"environment kind {env!r} has no task generator milegpo.envs.{env}_tasks") from None
    kwargs = {"start": start}
    if task_type:
        kwargs["task_type"] = task_type
    if horizon is not None:
        kwargs["horizon"] = horizon
    return list(fn(split, n, **kwargs))


__all__ = ["make_tasks"]
