"""ScienceWorld in pools: one engine (JVM) per worker process, reused across episodes and tasks, and no JVM left
behind when the pool closes or a worker dies."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

pytest.importorskip("scienceworld")

from milegpo.envs import EnvPool  # noqa: E402
from milegpo.envs.scienceworld import ScienceWorldEnv, scienceworld_tasks  # noqa: E402
from milegpo.envs.scienceworld.engine import process_engine  # noqa: E402


def java_children(pid: int) -> list[int]:
    """The java processes whose parent is ``pid`` (read from /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        comm = text[text.index("(") + 1:text.rindex(")")]
        ppid = int(text[text.rindex(")") + 2:].split()[1])
        if ppid == pid and comm == "java":
            out.append(int(stat.parent.name))
    return sorted(out)


def alive(pid: int) -> bool:
    """Running (a zombie counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_gone(pids, seconds: float = 20.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.2)
    return [p for p in pids if alive(p)]


def test_in_process_engine_shuts_down_with_its_last_environment():
    env = ScienceWorldEnv()
    env.reset(scienceworld_tasks("train", 1, task_type="lifespan-longest-lived")[0])
    jvm = process_engine().pid
    assert jvm in java_children(os.getpid())
    env.close()
    assert process_engine() is None and wait_gone([jvm]) == []


@pytest.mark.slow
def test_one_engine_per_worker_reused_and_closed():
    first = scienceworld_tasks("train", 1, task_type="find-animal")[0]
    second = scienceworld_tasks("dev", 1, task_type="lifespan-shortest-lived")[0]
    pool = EnvPool(4, num_workers=2)
    try:
        outs = pool.reset_group(first, 4)
        assert len({o[2]["state_key"] for o in outs}) == 1  # one game for the group
        engines = {w: java_children(pid) for w, pid in enumerate(pool.pids)}
        assert all(len(jvms) == 1 for jvms in engines.values()), engines  # one JVM for the worker's two slots
        for _ in range(2):
            results = pool.step(["open door to greenhouse"] * 4)
            assert all(not r.info["invalid"] for r in results)
        pool.reset_group(second, 4)  # another task: the same engines, reloaded
        assert {w: java_children(pid) for w, pid in enumerate(pool.pids)} == engines
        jvms = [p for js in engines.values() for p in js]
    finally:
        pool.close()
    assert wait_gone(jvms) == []


@pytest.mark.slow
def test_a_killed_worker_takes_its_engine_with_it():
    pool = EnvPool(2, num_workers=2)
    try:
        pool.reset_group(scienceworld_tasks("train", 1, task_type="lifespan-longest-lived")[0], 2)
        worker = pool.pids[0]
        (jvm,) = java_children(worker)
        os.kill(worker, signal.SIGKILL)
        assert wait_gone([jvm]) == []  # py4j's die_on_exit: the JVM reads its parent's pipe
        out = pool.step(["look around", "look around"])  # the pool restarts the worker; its episode ends truncated
        assert out[0].truncated and "died" in out[0].info["error"] and not out[1].truncated
    finally:
        pool.close()


@pytest.mark.parametrize("heap, message", [
    ("1k", r"^ScienceWorld's engine \(a JVM\) failed to start: Error occurred during initialization of VM \(java .*"
           r"-Xmx1k from \$MILEGPO_SCIENCEWORLD_HEAP"),
    ("lots", r"^\$MILEGPO_SCIENCEWORLD_HEAP must be a JVM heap size such as 1g or 1536m, got 'lots'$"),
])
def test_an_engine_that_cannot_start_is_one_line(heap, message):
    """In a process of its own (this one may run an engine already): the reset raises one EngineError line."""
    import re
    import subprocess
    import sys

    script = ("from milegpo.envs.scienceworld import ScienceWorldEnv, scienceworld_tasks\n"
              "from milegpo.envs.scienceworld.engine import EngineError\n"
              "try:\n"
              "    ScienceWorldEnv().reset(scienceworld_tasks('train', 1, task_type='boil')[0])\n"
              "except EngineError as e:\n"
              "    print(e)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "MILEGPO_SCIENCEWORLD_HEAP": heap})
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and len(lines) == 1 and re.search(message, lines[0]), (done.stdout, done.stderr)
