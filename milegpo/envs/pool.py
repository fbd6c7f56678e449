"""Pools: many environments stepped at once, in worker processes or in-process.

Both pools share one API over ``n`` slots (one episode per slot)::

    pool = EnvPool(n=16, num_workers=4)          # or SequentialPool(n=16)
    first = pool.reset_group(task, 16)           # [(obs, admissible, info)] * 16, one game
    outs = pool.step(actions)                    # [StepOut | None] per slot of the last reset
    pool.close()

``reset(tasks)`` starts one episode per task in slots ``0..len(tasks)-1`` (the other
slots idle); ``reset_group(task, n)`` is ``reset([task] * n)``: every episode of a
group plays the same Task, hence the same game (their ``info["game_id"]`` agree).
``step(actions)`` takes one action per slot of the last reset (``None`` for an
episode that is done, or a ``{slot: action}`` mapping) and returns a
:class:`StepOut` per slot, ``None`` where nothing was stepped.

Failures never vanish and never hang the caller. In :class:`EnvPool`, a worker that
dies (crash, ``os.kill``) or does not answer in time (``step_timeout`` seconds per
environment step it serves) is killed and restarted; every live episode it held ends in a truncated StepOut (done,
not won, ``info["truncated"] = True``, ``info["error"]`` says why, observation and
state key unchanged). An exception inside an environment's step ends that episode
the same way. A reset that fails on a crash or timeout is retried once on a fresh
worker, then raises :class:`EnvError`.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
import traceback
from multiprocessing.connection import wait
from typing import Any, Mapping, NamedTuple, Sequence

from .base import EnvError, Task, TextEnv, state_key


class StepOut(NamedTuple):
    """One environment step: ``obs, reward, done, won, info = out``."""

    obs: str
    reward: float
    done: bool
    won: bool
    info: dict


# --------------------------------------------------------------------------- env holder (worker side)
class _Slots:
    """The environments of some slots, one env per slot, re-made when the task's kind changes."""

    def __init__(self) -> None:
        self.envs: dict[int, TextEnv] = {}

    def reset(self, slot: int, task: Task):
        from . import make_env

        env = self.envs.get(slot)
        if env is None or env.kind != task.env:
            if env is not None:
                env.close()
            env = self.envs[slot] = make_env(task.env)
        return env.reset(task)

    def step(self, slot: int, action: str):
        return self.envs[slot].step(action)

    def close(self) -> None:
        for env in self.envs.values():
            try:
                env.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
        self.envs.clear()


def _run_batch(slots: _Slots, cmd: str, batch: list) -> list:
    out = []
    for slot, arg in batch:
        try:
            res = slots.reset(slot, arg) if cmd == "reset" else slots.step(slot, arg)
            out.append((slot, "ok", res))
        except Exception:  # noqa: BLE001 - reported to the parent, which ends the episode
            out.append((slot, "error", traceback.format_exc()))
    return out


def _worker_main(conn) -> None:
    slots = _Slots()
    try:
        while True:
            try:
                cmd, batch = conn.recv()
            except (EOFError, OSError):
                break
            if cmd == "close":
                break
            conn.send(_run_batch(slots, cmd, batch))
    finally:
        slots.close()


# --------------------------------------------------------------------------- shared bookkeeping
class _PoolBase:
    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"pool size n must be >= 1, got {n}")
        self.n = n
        self.tasks: list[Task | None] = [None] * n
        self.live = [False] * n
        self.steps = [0] * n
        self.last_obs = [""] * n
        self._broken: dict[int, str] = {}  # slot -> why its env state was lost
        self.active = 0  # slots of the last reset

    # hooks ---------------------------------------------------------------
    def _run(self, cmd: str, batch: list[tuple[int, Any]], timeout: float) -> dict[int, tuple[str, Any]]:
        """Run (slot, arg) pairs; return slot -> ("ok", result) | ("error", traceback) | ("lost", reason)."""
        raise NotImplementedError

    # API -----------------------------------------------------------------
    def reset(self, tasks: Sequence[Task]) -> list[tuple[str, list[str], dict]]:
        """Start one episode of ``tasks[i]`` in slot i; returns (obs, admissible, info) per slot."""
        tasks = list(tasks)
        if not 1 <= len(tasks) <= self.n:
            raise ValueError(f"reset: expected 1..{self.n} tasks (the pool size), got {len(tasks)}")
        for i, t in enumerate(tasks):
            if not isinstance(t, Task):
                raise TypeError(f"reset: tasks[{i}] is a {type(t).__name__}, expected milegpo.envs.Task")
        batch = list(enumerate(tasks))
        res = self._run("reset", batch, self.reset_timeout)
        retry = [(s, t) for s, t in batch if res[s][0] == "lost"]
        if retry:
            res.update(self._run("reset", retry, self.reset_timeout))
        out = []
        for s, t in batch:
            status, val = res[s]
            if status != "ok":
                raise EnvError(f"reset of slot {s} (task {t.task_id!r}) failed: {val}")
            out.append(val)
            self.tasks[s], self.live[s], self.steps[s], self.last_obs[s] = t, True, 0, val[0]
            self._broken.pop(s, None)
        for s in range(len(tasks), self.n):
            self.tasks[s], self.live[s] = None, False
        self.active = len(tasks)
        return out

    def reset_group(self, task: Task, n: int | None = None) -> list[tuple[str, list[str], dict]]:
        """``n`` episodes (default: the pool size) of the same ``task``: one task group, one game."""
        return self.reset([task] * (self.n if n is None else n))

    def reset_groups(self, tasks: Sequence[Task], group_size: int) -> list[tuple[str, list[str], dict]]:
        """``group_size`` episodes of each task, group after group (slot = group * group_size + k)."""
        return self.reset([t for t in tasks for _ in range(group_size)])

    @property
    def live_slots(self) -> list[int]:
        return [s for s in range(self.active) if self.live[s]]

    def step(self, actions: Sequence[str | None] | Mapping[int, str]) -> list[StepOut | None]:
        """Step every slot that has an action; returns a StepOut per slot of the last reset (None: not stepped)."""
        if isinstance(actions, Mapping):
            todo = dict(actions)
        else:
            actions = list(actions)
            if len(actions) != self.active:
                raise ValueError(f"step: expected {self.active} actions (one per slot of the last reset, None for "
                                 f"done episodes), got {len(actions)}")
            todo = {s: a for s, a in enumerate(actions) if a is not None}
        for s, a in todo.items():
            if not 0 <= s < self.active or not self.live[s]:
                raise ValueError(f"step: slot {s} has no live episode (live slots: {self.live_slots})")
            if not isinstance(a, str):
                raise TypeError(f"step: the action of slot {s} is a {type(a).__name__}, expected str")
        out: list[StepOut | None] = [None] * self.active
        batch = []
        for s, a in sorted(todo.items()):
            if s in self._broken:
                out[s] = self._truncated(s, self._broken.pop(s))
            else:
                batch.append((s, a))
        res = self._run("step", batch, self.step_timeout) if batch else {}
        for s, _ in batch:
            status, val = res[s]
            if status == "ok":
                o = StepOut(*val)
                self.steps[s], self.last_obs[s], self.live[s] = o.info["step"], o.obs, not o.done
            else:
                o = self._truncated(s, val if status == "lost" else f"environment error:\n{val}")
            out[s] = o
        return out

    def _truncated(self, s: int, why: str) -> StepOut:
        self.steps[s] += 1
        self.live[s] = False
        obs = self.last_obs[s]
        info = {"state_key": state_key(obs), "admissible_actions": [], "step": self.steps[s], "invalid": False,
                "truncated": True, "won": False, "error": why}
        return StepOut(obs, 0.0, True, False, info)

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


class SequentialPool(_PoolBase):
    """The in-process pool: same API as :class:`EnvPool`, environments stepped one after another.

    No timeouts (a Python call cannot be pre-empted); an exception in an environment ends
    its episode as truncated, like in EnvPool.
    """

    def __init__(self, n: int, *, step_timeout: float | None = None, reset_timeout: float | None = None) -> None:
        super().__init__(n)
        self.step_timeout, self.reset_timeout = step_timeout, reset_timeout
        self._slots = _Slots()

    def _run(self, cmd, batch, timeout):
        return {s: (st, v) for s, st, v in _run_batch(self._slots, cmd, batch)}

    def close(self) -> None:
        self._slots.close()


class EnvPool(_PoolBase):
    """``n`` environments in ``num_workers`` worker processes (slot s lives in worker ``s % num_workers``).

    start_method: "forkserver" (default where available) or "spawn"; workers import only
    :mod:`milegpo.envs` and the engine a task needs. step_timeout / reset_timeout: seconds one
    environment step / reset may take; a worker serving k slots in a call gets k times that,
    then it is killed and restarted. num_workers: default ``min(n, os.cpu_count())``.
    """

    def __init__(self, n: int, num_workers: int | None = None, *, start_method: str | None = None,
                 step_timeout: float = 60.0, reset_timeout: float = 300.0) -> None:
        super().__init__(n)
        self.num_workers = min(n, num_workers or os.cpu_count() or 1)
        if start_method is None:
            start_method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        if start_method == "fork":
            raise ValueError("EnvPool: start_method 'fork' is refused (unsafe with threads/torch); "
                             "use 'forkserver' or 'spawn'")
        self._ctx = mp.get_context(start_method)
        if start_method == "forkserver":
            self._ctx.set_forkserver_preload(["milegpo.envs"])
        self.step_timeout, self.reset_timeout = float(step_timeout), float(reset_timeout)
        self._procs: list = [None] * self.num_workers
        self._conns: list = [None] * self.num_workers
        self.restarts = 0
        self._closed = False
        for w in range(self.num_workers):
            self._start(w)

    def worker_of(self, slot: int) -> int:
        return slot % self.num_workers

    @property
    def pids(self) -> list[int]:
        """Process id of each worker (index = worker number)."""
        return [p.pid for p in self._procs]

    def _start(self, w: int) -> None:
        parent, child = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(target=_worker_main, args=(child,), daemon=True, name=f"milegpo-env-{w}")
        proc.start()
        child.close()
        self._procs[w], self._conns[w] = proc, parent

    def _restart(self, w: int, why: str) -> None:
        proc, conn = self._procs[w], self._conns[w]
        try:
            conn.close()
        except OSError:
            pass
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=10)
        self.restarts += 1
        # every live episode of this worker lost its environment
        for s in range(w, self.n, self.num_workers):
            if self.live[s]:
                self._broken[s] = why
        self._start(w)

    def _run(self, cmd, batch, timeout):
        if self._closed:
            raise EnvError("EnvPool is closed")
        per_worker: dict[int, list] = {}
        for s, arg in batch:
            per_worker.setdefault(self.worker_of(s), []).append((s, arg))
        res: dict[int, tuple[str, Any]] = {}
        pending: dict = {}
        for w, items in per_worker.items():
            try:
                self._conns[w].send((cmd, items))
                pending[self._conns[w]] = w
            except (OSError, ValueError):
                self._lose(w, items, res, f"worker {w} (pid {self._procs[w].pid}) died before {cmd}")
        # the limit is per environment call: a worker that serves k slots gets k times it
        budget = timeout * max((len(items) for items in per_worker.values()), default=1)
        deadline = time.monotonic() + budget
        while pending:
            left = deadline - time.monotonic()
            ready = wait(list(pending), timeout=max(left, 0)) if left > 0 else []
            if not ready:
                for conn, w in list(pending.items()):
                    pid = self._procs[w].pid
                    self._lose(w, per_worker[w], res, f"worker {w} (pid {pid}) timed out after {budget:g} s in {cmd}")
                break
            for conn in ready:
                w = pending.pop(conn)
                try:
                    for s, st, v in conn.recv():
                        res[s] = (st, v)
                except (EOFError, OSError):
                    self._procs[w].join(timeout=2)
                    code = self._procs[w].exitcode
                    self._lose(w, per_worker[w], res,
                               f"worker {w} (pid {self._procs[w].pid}) died in {cmd} (exit code {code})")
        return res

    def _lose(self, w: int, items: list, res: dict, why: str) -> None:
        for s, _ in items:
            res[s] = ("lost", why)
        self._restart(w, why)
        for s, _ in items:  # these are reported now, not on their next step
            self._broken.pop(s, None)

    def close(self) -> None:
        if getattr(self, "_closed", True):
            return
        self._closed = True
        for conn in self._conns:
            try:
                conn.send(("close", None))
            except (OSError, ValueError):
                pass
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
        for conn in self._conns:
            conn.close()


__all__ = ["EnvPool", "SequentialPool", "StepOut"]
