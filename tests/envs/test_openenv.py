"""OpenEnv: the household world served over OpenEnv's session protocol on loopback, played through the rollout
loop; a server down at the start, and one that dies mid-episode."""

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("websockets")

from milegpo.envs import EnvError, EnvPool, SequentialPool, household_tasks, registered_kinds, unregister  # noqa: E402
from milegpo.envs.openenv import OpenEnvTextEnv, register_served, serve  # noqa: E402
from milegpo.rollout import EpisodeRunner, make_tasks  # noqa: E402

from ..rollout.test_loop import expert_generator  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def registry():
    before = set(registered_kinds())
    yield
    for kind in set(registered_kinds()) - before:
        unregister(kind)


def _digest(out) -> str:
    arr = out.step_arrays()
    h = hashlib.sha256()
    for k in sorted(arr):
        h.update(k.encode())
        h.update(np.ascontiguousarray(arr[k]).tobytes())
    h.update(json.dumps([(e.won, e.truncated, e.length, e.invalid_steps, e.reward) for e in out.episodes]).encode())
    return h.hexdigest()


def _rollout(kind, pool, n_tasks=3, group_size=4):
    tasks = make_tasks(kind, "train", n_tasks, horizon=8)
    runner = EpisodeRunner(pool, history_length=2, horizon=8)
    try:
        return runner.run(tasks, group_size, expert_generator(runner, tasks, group_size, p_expert=0.6, seed=3))
    finally:
        pool.close()


@pytest.mark.parametrize("pool", ["sequential", "workers"])
def test_a_served_household_trains_as_the_local_one(registry, pool):
    with serve("household") as server:
        register_served("served-household", server.url, like="household")
        served = _rollout("served-household", SequentialPool(12) if pool == "sequential" else EnvPool(12, 2))
    local = _rollout("household", SequentialPool(12))
    served.step_batch()
    assert any(e.won for e in served.episodes) and len(served.rows) == len(local.rows)
    assert _digest(served) == _digest(local)  # same rows, state keys, rewards, outcomes: bit for bit


def test_a_client_object_is_played_too():
    class Client:  # the shape of OpenEnv's EnvClient(...).sync(): reset(**kw) / step(action) -> a result
        def __init__(self):
            self.n = 0

        def reset(self, **kwargs):
            self.n = 0
            return type("R", (), {"observation": {"prompt": "Say hi twice."}, "reward": None, "done": False})()

        def step(self, action):
            self.n += action["message"] == "hi"
            return type("R", (), {"observation": {"prompt": f"{self.n} of 2."}, "reward": float(self.n == 2),
                                  "done": self.n == 2})()

    env = OpenEnvTextEnv(client=Client())
    obs, admissible, info = env.reset(household_tasks("train", 1)[0])
    assert obs == "Say hi twice." and admissible == []
    assert env.step("hi")[4]["invalid"] is False  # free text: valid unless the observation says otherwise
    obs, reward, terminated, truncated, info = env.step("hi")
    assert (obs, reward, terminated, truncated, info["won"]) == ("2 of 2.", 1.0, True, False, True)
    with pytest.raises(ValueError, match="exactly one"):
        OpenEnvTextEnv()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(port: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "milegpo.envs.openenv", "--env", "household", "--port", str(port)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert "serving household" in proc.stdout.readline()
    return proc


def test_a_server_down_at_the_start_is_a_clear_error(registry):
    port = _free_port()
    register_served("nowhere-household", f"http://127.0.0.1:{port}", like="household")
    with pytest.raises(EnvError, match=rf"OpenEnv server http://127.0.0.1:{port} is not reachable at reset of task "
                                       r"'household/train/"):
        SequentialPool(2).reset(make_tasks("nowhere-household", "train", 2))


def test_a_server_that_dies_mid_episode_truncates_its_episodes_and_the_run_goes_on(registry):
    port = _free_port()
    proc = _start_server(port)
    try:
        register_served("fragile-household", f"http://127.0.0.1:{port}", like="household")
        tasks = make_tasks("fragile-household", "train", 2, horizon=8)
        runner = EpisodeRunner(SequentialPool(8), history_length=2, horizon=8)
        inner = expert_generator(runner, tasks, 4, p_expert=0.0, seed=1)  # random play: nobody wins in 2 steps
        calls = {"n": 0}

        def generate(prompts):
            calls["n"] += 1
            if calls["n"] == 3:  # after both parts of the first step: the server dies
                proc.kill()
                proc.wait(timeout=10)
            return inner(prompts)

        out = runner.run(tasks, 4, generate)
        out.step_batch()  # still a valid batch
        assert all(e.truncated and not e.won and "lost mid-episode" in e.error for e in out.episodes)
        assert {e.length for e in out.episodes} <= {2, 3}
        proc = _start_server(port)  # back up: the next episodes reconnect
        first = runner.pool.reset(tasks)
        assert first[0][0].startswith("You are in the middle of a room")
        runner.pool.close()
    finally:
        proc.kill()
        proc.wait(timeout=10)
