"""ScienceWorld's engine: one JVM per process, one simulation per environment in it.

``scienceworld.ScienceWorldEnv`` starts a JVM per instance (py4j's ``launch_gateway``, 1.5-2.5 s, and a heap
that grows to 3.5 GB unless capped). A pool worker holds one environment per slot, and the engine's simulation
object (``scienceworld.runtime.pythonapi.PythonInterface``) is a plain JVM object: several live side by side in
one JVM, each its own world (measured: two simulations of one task and a third of another, stepped in turn,
give observations, scores and valid-action lists identical to one simulation alone in its own JVM; the task
types whose world draws random numbers as it runs, the bees of grow-fruit and both mendelian tasks, draw them
from the JVM's one generator, so they are not reproducible alone or shared: notes/scienceworld.md). So a
process starts one :class:`Engine` (one JVM, heap capped by :data:`HEAP_ENV`, default :data:`DEFAULT_HEAP`) the
first time an environment needs it, every environment of the process takes its own :class:`Simulation` in it
(reloaded per task, so a JVM start is paid once per worker, not per episode), and the JVM is shut down when the
last simulation is closed, or with its process (py4j's ``die_on_exit``: the JVM exits when its parent's pipe
closes, also after a ``kill -9`` of the parent).

:class:`Simulation` is the library's own ``ScienceWorldEnv`` (its ``load``, ``reset``, ``step``, gold path,
goal progress) on one simulation object of the shared JVM instead of a JVM of its own.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import tempfile
import threading
from typing import Any

from ..base import EnvError
from .tasks import INSTALL_JAVA, check_runtime

#: the environment variable that sets each engine's JVM heap cap (``-Xmx``), e.g. ``"2g"``
HEAP_ENV = "MILEGPO_SCIENCEWORLD_HEAP"
#: the default heap cap of an engine's JVM: measured peaks under it in notes/scienceworld.md
DEFAULT_HEAP = "1g"
#: the engine's own step limit (``envStepLimit``), set out of reach: the Task's horizon ends an episode
ENGINE_STEP_LIMIT = 1_000_000


class EngineError(EnvError):
    """The engine could not start (or died): its message is one line naming the cause and what to install."""


def heap_setting() -> str:
    """The JVM heap cap (``-Xmx`` value) of :data:`HEAP_ENV`, default :data:`DEFAULT_HEAP`; a value that is not
    a size (digits and one of k, m, g) is an :class:`EngineError`."""
    value = os.environ.get(HEAP_ENV, DEFAULT_HEAP).strip().lower()
    if not value[:-1].isdigit() or value[-1] not in "kmg" or int(value[:-1]) < 1:
        raise EngineError(f"${HEAP_ENV} must be a JVM heap size such as 1g or 1536m, got {value!r}")
    return value


class Engine:
    """One JVM running ScienceWorld's jar, reached through py4j (started in the constructor)."""

    def __init__(self) -> None:
        check_runtime()
        from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway
        from scienceworld.constants import BASEPATH, JAR_PATH

        self.heap = heap_setting()
        try:
            port, proc = launch_gateway(classpath=JAR_PATH, die_on_exit=True, cwd=BASEPATH,
                                        javaopts=[f"-Xmx{self.heap}"], return_proc=True)
        except FileNotFoundError:
            raise EngineError(f"ScienceWorld needs a Java runtime (java not found on PATH): {INSTALL_JAVA}") from None
        except Exception as e:  # noqa: BLE001 - py4j reports a JVM that died at start in several ways
            raise EngineError(f"ScienceWorld's engine (a JVM) failed to start: {start_failure(e)} (java "
                              f"{shutil.which('java')}, -Xmx{self.heap} from ${HEAP_ENV}; {INSTALL_JAVA})") from None
        self.process = proc
        self.gateway = JavaGateway(gateway_parameters=GatewayParameters(auto_field=True, port=port),
                                   java_process=proc)
        self.closed = False

    @property
    def pid(self) -> int:
        """The JVM's process id."""
        return self.process.pid

    def new_server(self) -> Any:
        """A new simulation object in this JVM (``PythonInterface``)."""
        if self.closed:
            raise EngineError("ScienceWorld's engine is closed")
        try:
            return self.gateway.jvm.scienceworld.runtime.pythonapi.PythonInterface()
        except Exception as e:  # noqa: BLE001 - a JVM that died (killed, out of memory)
            raise EngineError(f"ScienceWorld's engine (JVM pid {self.pid}) does not answer: {type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''}") from None

    def close(self) -> None:
        """Shut the JVM down and wait for it (killed after 10 s)."""
        if self.closed:
            return
        self.closed = True
        try:
            self.gateway.shutdown()
        except Exception:  # noqa: BLE001 - a JVM already gone
            pass
        try:
            if self.process.poll() is None and self.process.stdin is not None:
                self.process.stdin.write(b"\n")  # py4j's die_on_exit: the JVM exits when its stdin says so
                self.process.stdin.flush()
        except OSError:
            pass
        try:
            self.process.wait(timeout=10)
        except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired
            self.process.kill()
            self.process.wait(timeout=10)


def start_failure(error: BaseException) -> str:
    """What a JVM that died at start said, from py4j's exception: py4j reads the JVM's first line of output as its
    port, so the JVM's own error ("Error occurred during initialization of VM") comes back inside a ValueError."""
    text = str(error)
    found = re.search(r"invalid literal for int\(\) with base 10: b(['\"])(.*?)\1$", text, re.S)
    if found:
        return found.group(2).replace("\\n", " ").strip() or "no output"
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"


class _Shared:
    """The process's engine and the simulations that use it."""

    def __init__(self) -> None:
        self.engine: Engine | None = None
        self.users = 0
        self.lock = threading.Lock()


_SHARED = _Shared()


def process_engine() -> Engine | None:
    """The engine of this process, None when none is running (tests, measurements)."""
    return _SHARED.engine


def shutdown_engine() -> None:
    """Shut this process's engine down now, whoever still holds a simulation of it (process exit)."""
    with _SHARED.lock:
        engine, _SHARED.engine, _SHARED.users = _SHARED.engine, None, 0
    if engine is not None:
        engine.close()


atexit.register(shutdown_engine)


def _simulation_class() -> type:
    from scienceworld import ScienceWorldEnv as LibraryEnv

    class Simulation(LibraryEnv):
        """The library's ``ScienceWorldEnv`` on one simulation object of the process's shared engine: every method
        is the library's but ``__init__`` (no JVM of its own), ``close`` (gives the simulation back) and the valid
        list (one JSON answer, kept per step: :meth:`valid_with_templates`); :meth:`step_quiet` is its own (a step that
        reads back only the answer, the score and the end, for replays)."""

        def __init__(self) -> None:  # noqa: D401 - not the library's constructor: no JVM launched here
            with _SHARED.lock:
                if _SHARED.engine is None or _SHARED.engine.closed:
                    _SHARED.engine, _SHARED.users = Engine(), 0
                self.engine = _SHARED.engine
                _SHARED.users += 1
            try:
                self.server = self.engine.new_server()
            except EngineError:
                self._give_back()
                raise
            self._gateway = self.engine.gateway
            self.lastStepScore = 0
            self.taskName = None
            self.simplificationStr = ""
            self.variationIdx = 0
            self.envStepLimit = ENGINE_STEP_LIMIT
            self.clear_run_histories()
            self.goldPathGenerated = False
            self._obj_tree_tempdir = tempfile.TemporaryDirectory()  # where the library's getObjectTree writes
            self.steps = 0  # steps and loads so far (what valid_with_templates keeps its answer by)
            self._valid: list[dict] = []
            self._valid_at = -1  # the step _valid was asked at
            self.open = True

        def step(self, input_str: str):
            """The library's step; every step is counted (:attr:`steps`: what a per-state answer is kept by)."""
            self.steps += 1
            return super().step(input_str)

        def step_quiet(self, input_str: str) -> tuple[str, int, bool]:
            """The engine's answer to ``input_str``, its score (-100..100) and whether the task ended (as the
            library's step decides it), without what the library's step reads besides (the look, the inventory, the
            task description and the valid list: 30-60 ms of a long task's step); counted as :meth:`step` counts."""
            self.steps += 1
            observation = self.server.step(input_str)
            score = int(round(100 * self.server.getScore()))
            completed = bool(self.server.getCompleted()) or score < 0 or self.get_num_moves() > self.envStepLimit
            self.lastStepScore = score
            return observation, score, completed

        def get_valid_action_object_combinations(self) -> list[str]:
            """The library's valid list (its step puts it in ``info["valid"]``), read as one JSON answer instead of a
            py4j call per entry (measured on boil's states of 115-1,078 actions: 28-56 ms against the library's 25-92
            ms); the same actions in another order (the env sorts them). The answer is kept for this step
            (:meth:`valid_with_templates`)."""
            valid = self.valid_with_templates()
            return [v["action"] for v in valid]

        def valid_with_templates(self) -> list[dict]:
            """The valid actions with their templates and object ids (``getValidActionObjectCombinationsJSON``),
            asked of the engine once per step."""
            if self._valid_at != self.steps:
                self._valid = json.loads(self.server.getValidActionObjectCombinationsJSON())["validActions"]
                self._valid_at = self.steps
            return self._valid

        def load(self, *args, **kwargs):
            self.steps += 1  # a new world: nothing kept from the last one applies
            return super().load(*args, **kwargs)

        def _give_back(self) -> None:
            with _SHARED.lock:
                _SHARED.users -= 1
                last = _SHARED.users <= 0 and _SHARED.engine is self.engine
                if last:
                    _SHARED.engine, _SHARED.users = None, 0
            if last:
                self.engine.close()

        def close(self) -> None:
            """Give this simulation back; the engine shuts down with its last one."""
            if getattr(self, "open", False):
                self.open = False
                self.server = None
                self._give_back()

        def __del__(self) -> None:
            pass  # the library's closes the JVM; an unreferenced simulation is released by py4j's garbage collection

    return Simulation


_SIMULATION: list[type] = []


def new_simulation() -> Any:
    """A :class:`Simulation` in this process's engine (started on first use); ``close()`` it when done."""
    if not _SIMULATION:
        _SIMULATION.append(_simulation_class())
    return _SIMULATION[0]()


__all__ = ["Engine", "EngineError", "new_simulation", "process_engine", "shutdown_engine", "heap_setting", "HEAP_ENV",
           "DEFAULT_HEAP", "ENGINE_STEP_LIMIT"]
