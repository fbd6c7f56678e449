"""Pools: many environments stepped at once, in worker processes or in-process.

Both pools share one API over ``n`` slots (one episode per slot)::

    pool = EnvPool(n=16, num_workers=4)          # or SequentialPool(n=16); or make_pool(16, "auto", kinds)
    first = pool.reset_group(task, 16)           # [(obs, admissible, info)] * 16, one game
    outs = pool.step(actions)                    # [StepOut | None] per slot of the last reset
    pending = pool.step_async(actions)           # the same step, sent: the workers play it ...
    ...                                          # ... while the caller does something else (generates)
    outs = pending.result()                      # ... and collected
    pool.close()

``reset(tasks)`` starts one episode per task in slots ``0..len(tasks)-1`` (the other
slots idle); ``reset_group(task, n)`` is ``reset([task] * n)``: every episode of a
group plays the same Task, hence the same game (their ``info["game_id"]`` agree).
``step(actions)`` takes one action per slot of the last reset (``None`` for an
episode that is done, or a ``{slot: action}`` mapping) and returns a
:class:`StepOut` per slot, ``None`` where nothing was stepped. ``step_async(actions)`` sends the step and returns at once
(:class:`PendingStep`); its ``result()`` collects the StepOuts. One step is in flight at a time:
another step or a reset before ``result()`` is an error. Resets and steps go to every worker
before the pool waits for any, so the workers play them in parallel (each worker its own slots
one after another).

:func:`make_pool` picks the pool of a run: ``num_workers="auto"`` gives a :class:`SequentialPool`
when every environment kind of the run steps faster in-process than a round trip to a worker costs
(:attr:`milegpo.envs.TextEnv.step_in_workers` is False: the household world), else an
:class:`EnvPool` of :func:`auto_env_workers` workers; an int is the number of workers (0: in-process).

Failures never vanish and never hang the caller. In :class:`EnvPool`, a worker that
dies (crash, ``os.kill``) or does not answer in time (``step_timeout`` seconds per
environment step it serves) is killed and restarted; every live episode it held ends in a truncated StepOut (truncated,
not won, ``info["truncated"] = True``, ``info["error"]`` says why in one line naming the environment kind, the
method, the task and the step (:func:`~milegpo.envs.base.failure_line`), ``info["env_failure"] = True``
(:data:`~milegpo.envs.base.ENV_FAILURE`: an ``"error"`` key of the environment's own info is no failure),
observation and state key unchanged). An
exception inside an environment's step ends that episode the same way (``info["error"]``: the exception's line, made
where it was raised, so its text crosses the process boundary; ``info["traceback"]``: the traceback). The pools never
stop a run on a step failure: :class:`~milegpo.rollout.EpisodeRunner` does (``env_errors``). A reset that raises is
an :class:`~milegpo.envs.base.EnvFailure` (one line); one that fails on a crash or timeout is retried once on a
fresh worker, then raises it too. A user's state anchor that fails (raises, or returns no str) is no environment's
failure: the reset or step raises :class:`~milegpo.envs.anchors.AnchorError` naming the anchor and the step, in
both pools.

:class:`SequentialPool` has no timeout: a Python call cannot be pre-empted, and playing the steps in another
thread would break the engines bound to the thread that made them; a world that may hang is played in an
:class:`EnvPool` (``num_env_workers`` >= 1, or ``"auto"`` for any kind that steps in workers, as every kind but the
household world does).
"""

from __future__ import annotations

import atexit
import functools
import multiprocessing as mp
import os
import time
import traceback
import weakref
from multiprocessing.connection import wait
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from .anchors import AnchorError, AnchorSpec, check_state_anchor
from .base import ENV_FAILURE, EnvError, EnvFailure, Task, TextEnv, failure_line
from .registry import EnvKind, get_kind, register_kind


class StepOut(NamedTuple):
    """One environment step, in gymnasium's order (:meth:`milegpo.envs.TextEnv.step`):
    ``obs, reward, terminated, truncated, info = out``; ``out.done`` (either) and ``out.won`` (``info["won"]``)."""

    obs: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict

    @property
    def done(self) -> bool:
        """The episode ended: terminated (won or lost) or truncated."""
        return bool(self.terminated or self.truncated)

    @property
    def won(self) -> bool:
        return bool(self.info.get("won", False))


# --------------------------------------------------------------------------- env holder (worker side)
class _Slots:
    """The environments of some slots, one env per slot, re-made when the task's kind changes."""

    def __init__(self) -> None:
        self.envs: dict[int, TextEnv] = {}

    def reset(self, slot: int, task_anchor_spec: tuple[Task, AnchorSpec | None, "EnvKind | None"]):
        task, state_anchor, spec = task_anchor_spec
        env = self.envs.get(slot)
        if env is None or env.kind != task.env:
            if env is not None:
                env.close()
            # the parent's spec of the kind (a worker process knows only the built-in kinds until told)
            if spec is not None:
                register_kind(spec, replace_existing=True)
            env = self.envs[slot] = get_kind(task.env).make()
        try:  # where the observation arrives: the worker keys its own states
            env.set_state_anchor(state_anchor)
        except (ValueError, TypeError) as e:  # a dotted path the parent imported and this worker cannot
            raise AnchorError(f"{e} (in the pool's worker process {os.getpid()})") from None
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
        except AnchorError as e:  # the user's anchor, not the environment: the run stops (never a truncation)
            out.append((slot, "anchor", str(e)))
        except Exception as e:  # noqa: BLE001 - reported to the parent (its text crosses the process boundary)
            out.append((slot, "error", (_failure(slots, slot, cmd, arg, e), traceback.format_exc())))
    return out


def _failure(slots: _Slots, slot: int, cmd: str, arg: Any, error: Exception) -> str:
    """The one line (:func:`~milegpo.envs.base.failure_line`) of an environment's exception in ``cmd``."""
    if cmd == "reset":
        task = arg[0]
        return failure_line(task.env, "reset", task.task_id, error)
    env = slots.envs.get(slot)
    task = getattr(env, "task", None)
    return failure_line(getattr(env, "kind", "?"), "step", getattr(task, "task_id", None), error,
                        step=getattr(env, "steps", 0) + 1)


def _worker_main(conn, environ: dict[str, str]) -> None:
    # the environment of the pool's maker: a forkserver child would inherit the forkserver's, taken
    # when the first pool of the process started
    os.environ.clear()
    os.environ.update(environ)
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
class PendingStep:
    """A step sent by :meth:`EnvPool.step_async` (or SequentialPool's): ``result()`` waits for its StepOuts."""

    def __init__(self, pool: "_PoolBase", ticket: Any, batch: list[tuple[int, str]], out: list) -> None:
        self.pool, self.ticket, self.batch, self.out = pool, ticket, batch, out
        self._result: list[StepOut | None] | None = None

    def result(self) -> list[StepOut | None]:
        """A StepOut per slot of the last reset (None: not stepped); the same list on every call."""
        if self._result is None:
            self._result = self.pool._finish_step(self)
        return self._result


class _PoolBase:
    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"pool size n must be >= 1, got {n}")
        self.n = n
        self.tasks: list[Task | None] = [None] * n
        self.live = [False] * n
        self.steps = [0] * n
        self.last_obs = [""] * n
        self.last_state: list[dict] = [{}] * n  # state_key / state_text / state_context of each slot's last info
        self._broken: dict[int, str] = {}  # slot -> why its env state was lost
        self.active = 0  # slots of the last reset
        self._pending: PendingStep | None = None  # the step sent by step_async, not collected yet

    # hooks ---------------------------------------------------------------
    def _send(self, cmd: str, batch: list[tuple[int, Any]], timeout: float) -> Any:
        """Start running (slot, arg) pairs; returns a ticket for :meth:`_collect`."""
        raise NotImplementedError

    def _collect(self, ticket: Any) -> dict[int, tuple[str, Any]]:
        """Wait for a ticket's pairs: slot -> ("ok", result) | ("error", traceback) | ("lost", reason)."""
        raise NotImplementedError

    def _run(self, cmd: str, batch: list[tuple[int, Any]], timeout: float) -> dict[int, tuple[str, Any]]:
        return self._collect(self._send(cmd, batch, timeout))

    def _idle(self, what: str) -> None:
        if self._pending is not None:
            raise RuntimeError(f"{what}: a step sent by step_async is still in flight; call its result() first")

    # API -----------------------------------------------------------------
    def _check_anchor(self, state_anchor: AnchorSpec | None) -> None:
        check_state_anchor(state_anchor)

    def _spec_for(self, kind: str) -> EnvKind | None:
        """What travels with a reset of kind ``kind`` to where its environment is made: nothing in-process (the
        registry is here); an :class:`EnvPool` sends the :class:`EnvKind` itself."""
        get_kind(kind)  # an unknown kind fails here, in the caller's process, with the known ones listed
        return None

    def reset(self, tasks: Sequence[Task], state_anchor: AnchorSpec | None = None) -> list[tuple[str, list[str], dict]]:
        """Start one episode of ``tasks[i]`` in slot i; returns (obs, admissible, info) per slot.

        state_anchor: what the episodes' state keys are made of (:meth:`TextEnv.set_state_anchor`: a name of
        :data:`~milegpo.envs.anchors.STATE_ANCHORS`, a dotted path or a callable; None: the default anchor),
        set in every slot's environment, which keys its states where it runs."""
        self._idle("reset")
        tasks = list(tasks)
        if not 1 <= len(tasks) <= self.n:
            raise ValueError(f"reset: expected 1..{self.n} tasks (the pool size), got {len(tasks)}")
        for i, t in enumerate(tasks):
            if not isinstance(t, Task):
                raise TypeError(f"reset: tasks[{i}] is a {type(t).__name__}, expected milegpo.envs.Task")
        self._check_anchor(state_anchor)
        specs = {kind: self._spec_for(kind) for kind in sorted({t.env for t in tasks})}
        batch = [(s, (t, state_anchor, specs[t.env])) for s, t in enumerate(tasks)]
        res = self._run("reset", batch, self.reset_timeout)
        retry = [(s, arg) for s, arg in batch if res[s][0] == "lost"]
        if retry:
            res.update(self._run("reset", retry, self.reset_timeout))
        out = []
        for s, (t, _, _) in batch:
            status, val = res[s]
            if status == "anchor":
                raise AnchorError(val)
            if status == "error":
                raise EnvFailure(*val)
            if status != "ok":  # lost twice: a worker that died or timed out in the reset, then again on a fresh one
                raise EnvFailure(failure_line(t.env, "reset", t.task_id, f"{val} (twice; slot {s})"))
            out.append(val)
            self.tasks[s], self.live[s], self.steps[s], self.last_obs[s] = t, True, 0, val[0]
            self.last_state[s] = _state_fields(val[2])
            self._broken.pop(s, None)
        for s in range(len(tasks), self.n):
            self.tasks[s], self.live[s] = None, False
        self.active = len(tasks)
        return out

    def reset_group(self, task: Task, n: int | None = None,
                    state_anchor: AnchorSpec | None = None) -> list[tuple[str, list[str], dict]]:
        """``n`` episodes (default: the pool size) of the same ``task``: one task group, one game."""
        return self.reset([task] * (self.n if n is None else n), state_anchor)

    def reset_groups(self, tasks: Sequence[Task], group_size: int,
                     state_anchor: AnchorSpec | None = None) -> list[tuple[str, list[str], dict]]:
        """``group_size`` episodes of each task, group after group (slot = group * group_size + k)."""
        return self.reset([t for t in tasks for _ in range(group_size)], state_anchor)

    @property
    def live_slots(self) -> list[int]:
        return [s for s in range(self.active) if self.live[s]]

    def step(self, actions: Sequence[str | None] | Mapping[int, str]) -> list[StepOut | None]:
        """Step every slot that has an action; returns a StepOut per slot of the last reset (None: not stepped)."""
        return self.step_async(actions).result()

    def step_async(self, actions: Sequence[str | None] | Mapping[int, str]) -> PendingStep:
        """:meth:`step`, sent and not waited for: ``pending.result()`` returns what ``step`` returns.

        Bad actions raise here, at the send. The step's timeout runs from the send.
        """
        self._idle("step_async")
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
            if s in self._broken:  # its worker was restarted for another slot: its environment is gone
                task = self.tasks[s]
                out[s] = self._truncated(s, failure_line(task.env, "step", task.task_id, self._broken.pop(s),
                                                         step=self.steps[s] + 1))
            else:
                batch.append((s, a))
        ticket = self._send("step", batch, self.step_timeout) if batch else None
        self._pending = PendingStep(self, ticket, batch, out)
        return self._pending

    def _finish_step(self, pending: PendingStep) -> list[StepOut | None]:
        """Collect a pending step (called once, by its ``result()``)."""
        try:
            res = self._collect(pending.ticket) if pending.batch else {}
        finally:
            self._pending = None
        out = pending.out
        anchor_failures = [res[s][1] for s, _ in pending.batch if res[s][0] == "anchor"]
        for s, _ in pending.batch:
            status, val = res[s]
            if status == "anchor":
                o = self._truncated(s, val)
            elif status == "ok":
                o = StepOut(*val)
                self.steps[s], self.last_obs[s], self.live[s] = o.info["step"], o.obs, not o.done
                self.last_state[s] = _state_fields(o.info)
            elif status == "lost":  # the worker died or timed out: say which environment, task and step
                task = self.tasks[s]
                o = self._truncated(s, failure_line(task.env, "step", task.task_id, val, step=self.steps[s] + 1))
            else:  # the environment raised: its one line, and the traceback beside it
                o = self._truncated(s, val[0], traceback=val[1])
            out[s] = o
        if anchor_failures:  # the user's anchor failed: the run stops, it does not play on with cut episodes
            raise AnchorError(anchor_failures[0])
        return out

    def _truncated(self, s: int, why: str, traceback: str = "") -> StepOut:
        self.steps[s] += 1
        self.live[s] = False
        obs = self.last_obs[s]
        # the state the episode was in: its anchor as the environment last keyed it (no second computation here)
        info = {**self.last_state[s], "admissible_actions": [], "step": self.steps[s], "invalid": False,
                "truncated": True, "won": False, "error": why, ENV_FAILURE: True}
        if traceback:
            info["traceback"] = traceback
        return StepOut(obs, 0.0, False, True, info)

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


def _state_fields(info: dict) -> dict:
    """The state anchor's fields of an environment's info (``state_key``, ``state_text``, ``state_context``)."""
    return {k: info[k] for k in ("state_key", "state_text", "state_context") if k in info}


class SequentialPool(_PoolBase):
    """The in-process pool: same API as :class:`EnvPool`, environments stepped one after another.

    No timeouts (a Python call cannot be pre-empted); an exception in an environment ends
    its episode as truncated, like in EnvPool.
    """

    def __init__(self, n: int, *, step_timeout: float | None = None, reset_timeout: float | None = None) -> None:
        super().__init__(n)
        self.step_timeout, self.reset_timeout = step_timeout, reset_timeout
        self._slots = _Slots()

    def _send(self, cmd, batch, timeout):
        # in-process: the work is done at the send, so step_async overlaps nothing (and changes nothing)
        return {s: (st, v) for s, st, v in _run_batch(self._slots, cmd, batch)}

    def _collect(self, ticket):
        return ticket

    def close(self) -> None:
        self._slots.close()


class _Ticket(NamedTuple):
    """What EnvPool._send started: the work per worker, the connections still to answer, the results so far."""

    cmd: str
    per_worker: dict
    pending: dict
    res: dict
    budget: float
    deadline: float


class EnvPool(_PoolBase):
    """``n`` environments in ``num_workers`` worker processes (slot s lives in worker ``s % num_workers``).

    start_method: "forkserver" (default where available) or "spawn"; workers import only
    :mod:`milegpo.envs` and the engine a task needs. step_timeout / reset_timeout: seconds one
    environment step / reset may take; a worker serving k slots in a call gets k times that,
    then it is killed and restarted. num_workers: at most ``n``; default (None or ``"auto"``)
    :func:`auto_env_workers`. Workers run with the environment variables of the pool's creation.
    """

    def __init__(self, n: int, num_workers: int | str | None = None, *, start_method: str | None = None,
                 step_timeout: float = 60.0, reset_timeout: float = 300.0) -> None:
        super().__init__(n)
        num_workers = env_workers_setting(num_workers)
        if num_workers == 0:
            raise ValueError("EnvPool: num_workers must be >= 1 (0 workers is a SequentialPool)")
        self.num_workers = auto_env_workers(n) if num_workers == "auto" else min(n, num_workers)
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
        self._environ = dict(os.environ)  # what every worker (also a restarted one) runs with
        for w in range(self.num_workers):
            self._start(w)
        # an open pool closes at interpreter exit, before multiprocessing's own exit handler (registered when
        # the first worker started; atexit runs last-in first) kills the workers and Python warns of the
        # semaphores they held; a weak reference, so an unreferenced pool is still collected (and closed)
        self._exit_hook = functools.partial(_close_at_exit, weakref.ref(self))
        atexit.register(self._exit_hook)

    def _check_anchor(self, state_anchor: AnchorSpec | None) -> None:
        check_state_anchor(state_anchor)
        if callable(state_anchor):  # it travels to the workers: a lambda or a local function cannot
            import pickle

            try:
                pickle.dumps(state_anchor)
            except Exception as e:  # noqa: BLE001 - pickle raises several kinds
                raise ValueError(f"state_anchor {state_anchor!r} cannot be sent to the pool's worker processes "
                                 f"({e}): pass a module-level function or its dotted path") from None

    def _spec_for(self, kind: str) -> EnvKind:
        """The :class:`EnvKind` of ``kind``, sent to the workers with each reset (they register it: a kind
        registered only in this process, or found here by an entry point, is found there too). One that cannot
        be pickled (a class defined in ``__main__`` of an interactive session, or inside a function) is a
        ValueError naming the kind."""
        import pickle

        spec = get_kind(kind)
        try:
            pickle.loads(pickle.dumps(spec))
        except Exception as e:  # noqa: BLE001 - pickle raises several kinds
            raise ValueError(f"environment kind {kind!r} ({spec.origin}) cannot be sent to the pool's worker "
                             f"processes ({type(e).__name__}: {e}): define its class and task function at module "
                             "level of an importable module, or register it by dotted path") from None
        return spec

    def worker_of(self, slot: int) -> int:
        return slot % self.num_workers

    @property
    def pids(self) -> list[int]:
        """Process id of each worker (index = worker number)."""
        return [p.pid for p in self._procs]

    def _start(self, w: int) -> None:
        parent, child = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(target=_worker_main, args=(child, self._environ), daemon=True,
                                 name=f"milegpo-env-{w}")
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

    def _send(self, cmd, batch, timeout):
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
        return _Ticket(cmd, per_worker, pending, res, budget, time.monotonic() + budget)

    def _collect(self, ticket):
        cmd, per_worker, pending, res = ticket.cmd, ticket.per_worker, ticket.pending, ticket.res
        while pending:
            # past the deadline this still polls: an answer that came in while the caller was busy counts
            ready = wait(list(pending), timeout=max(ticket.deadline - time.monotonic(), 0))
            if not ready:
                for conn, w in list(pending.items()):
                    pid = self._procs[w].pid
                    self._lose(w, per_worker[w], res,
                               f"worker {w} (pid {pid}) timed out after {ticket.budget:g} s in {cmd}")
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
        if hasattr(self, "_exit_hook"):  # not when a worker failed to start in __init__
            atexit.unregister(self._exit_hook)
        self._pending = None  # a step in flight is dropped: its workers answer, then read "close"
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


def _close_at_exit(pool_ref: weakref.ref) -> None:
    pool = pool_ref()
    if pool is not None:
        pool.close()


# --------------------------------------------------------------------------- choosing a pool
def auto_env_workers(n_slots: int) -> int:
    """The workers ``num_env_workers="auto"`` gives a pool of ``n_slots`` slots (>= 1).

    The CPUs this process may run on (``os.sched_getaffinity``; ``os.cpu_count()`` where that does not
    exist) shared among the processes of this node that a torchrun / accelerate launch started
    (``$LOCAL_WORLD_SIZE``, default 1), at least 1, and no more than the slots.
    """
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    local = os.environ.get("LOCAL_WORLD_SIZE", "1")
    try:
        local_processes = int(local)
    except ValueError:
        raise ValueError(f"$LOCAL_WORLD_SIZE must be an integer, got {local!r}") from None
    if local_processes < 1:
        raise ValueError(f"$LOCAL_WORLD_SIZE must be >= 1, got {local_processes}")
    return max(1, min(cpus // local_processes, n_slots))


def env_workers_setting(value: int | str | None) -> int | str:
    """A ``num_env_workers`` setting checked: ``"auto"`` (also None) or an int >= 0 (also as a string,
    as a command line gives it)."""
    if value is None or value == "auto":
        return "auto"
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"num_env_workers must be 'auto' or an int >= 0, got {value!r}")
    return value


def env_workers(num_workers: int | str | None, n_slots: int, kinds: Iterable[str]) -> int:
    """The worker processes of a pool of ``n_slots`` slots for environments of ``kinds`` (0: in-process).

    num_workers: an int >= 0 is taken as it is (capped by the slots); ``"auto"`` is 0 when no kind
    declares :attr:`~milegpo.envs.TextEnv.step_in_workers` (their steps are cheaper than a round trip
    to a worker), else :func:`auto_env_workers`.
    """
    num_workers = env_workers_setting(num_workers)
    if num_workers != "auto":
        return min(num_workers, n_slots)
    kinds = sorted(set(kinds))
    if not kinds:
        raise ValueError("env_workers: 'auto' needs the environment kinds of the run, got none")
    return auto_env_workers(n_slots) if any(get_kind(k).env_class().step_in_workers for k in kinds) else 0


def make_pool(n: int, num_workers: int | str = "auto", kinds: Iterable[str] = ("household",),
              **pool_options) -> "EnvPool | SequentialPool":
    """The pool of ``n`` slots for environments of ``kinds``: an :class:`EnvPool` of
    :func:`env_workers` workers, or a :class:`SequentialPool` when that is 0. ``pool_options``
    (``step_timeout``, ``reset_timeout``, ``start_method``) go to the pool."""
    workers = env_workers(num_workers, n, kinds)
    if workers == 0:
        pool_options.pop("start_method", None)
        return SequentialPool(n, **pool_options)
    return EnvPool(n, workers, **pool_options)


__all__ = ["EnvPool", "SequentialPool", "StepOut", "PendingStep", "auto_env_workers", "env_workers",
           "env_workers_setting", "make_pool"]
