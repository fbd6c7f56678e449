"""OpenEnv: the household world served over OpenEnv's session protocol on loopback, played through the rollout
loop; a server down at the start, and one that dies mid-episode. Against the real ``openenv`` package (the
``openenv`` extra): a game served by OpenEnv's own server (create_app + uvicorn) played by milegpo, milegpo's served
household played by OpenEnv's own client, a server at capacity, one restarted between episodes; replies that are
not the protocol's; settings refused where they enter."""

import hashlib
import json
import os
import re
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
            milestone = {"milestone": action["message"] == "hi"} if action["message"] != "?" else {"milestone": "no"}
            return type("R", (), {"observation": {"prompt": f"{self.n} of 2.", **milestone},
                                  "reward": float(self.n == 2), "done": self.n == 2})()

    env = OpenEnvTextEnv(client=Client())
    obs, admissible, info = env.reset(household_tasks("train", 1)[0])
    assert obs == "Say hi twice." and admissible == []
    assert env.step("bye")[4]["milestone"] is False
    with pytest.raises(TypeError, match=r"observation\['milestone'\] = str 'no', expected a bool"):
        env.step("?")
    first = env.step("hi")[4]
    assert first["invalid"] is False and first["milestone"] is True  # free text: valid unless the observation says so
    obs, reward, terminated, truncated, info = env.step("hi")
    assert (obs, reward, terminated, truncated, info["won"]) == ("2 of 2.", 1.0, True, False, True)
    with pytest.raises(ValueError, match="exactly one"):
        OpenEnvTextEnv()


@pytest.mark.parametrize("reward, expected", [(np.float32(0.5), 0.5), (np.int64(1), 1.0), (2, 2.0), (None, 0.0),
                                             (float("nan"), None), ("1", None), (True, None), (np.inf, None)])
def test_a_steps_reward_is_a_finite_real_number_as_every_worlds_is(reward, expected):
    """OpenEnv's reward is read as base.finite_reward reads a gymnasium or environment_factory game's: numpy's
    numbers are numbers, a NaN, a str or a bool is a TypeError naming the server (None: no reward, 0)."""
    class Client:
        def reset(self, **kwargs):
            return type("R", (), {"observation": {"prompt": "go"}, "reward": None, "done": False})()

        def step(self, action):
            return type("R", (), {"observation": {"prompt": "went"}, "reward": reward, "done": False})()

    env = OpenEnvTextEnv(client=Client())
    env.reset(household_tasks("train", 1)[0])
    if expected is None:
        with pytest.raises(TypeError, match=r"OpenEnv .*: step returned reward .*, expected a finite number"):
            env.step("go")
    else:
        got = env.step("go")[1]
        assert type(got) is float and got == expected


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
        runner = EpisodeRunner(SequentialPool(8), history_length=2, horizon=8, env_errors="skip")
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


# ---------------------------------------------------------------------------------------------- the real OpenEnv
def _real_openenv():
    """The ``openenv`` package (the ``openenv`` extra; CI installs it): these tests skip only without it."""
    pytest.importorskip("openenv.core.env_server.http_server", reason="the openenv extra is not installed")
    from . import openenv_games

    return openenv_games


def _keydoor_rollout(kind, pool):
    from .test_gym import _play  # the scripted key-and-door policy, compact prompt, horizon 8

    return _play(kind, pool, n_tasks=3, group_size=4)


@pytest.mark.parametrize("pool", ["sequential", "workers"])
def test_an_environment_served_by_openenvs_own_server_trains_as_the_local_one(registry, pool):
    """OpenEnv's create_app + uvicorn on loopback serves the key-and-door game; milegpo plays it (one session per slot,
    from this process or 2 pool workers) and gets the StepBatch of the same game played locally, bit for bit."""
    games = _real_openenv()
    local_kind = "tests.envs.text_games:KeyDoor"
    with games.OpenEnvServer() as server:
        register_served("openenv-keydoor", server.url, like=local_kind)
        served = _keydoor_rollout("openenv-keydoor", SequentialPool(12) if pool == "sequential" else EnvPool(12, 2))
    local = _keydoor_rollout(local_kind, SequentialPool(12))
    served.step_batch()
    assert any(e.won for e in served.episodes) and not any(e.error for e in served.episodes)
    assert _digest(served) == _digest(local)


def test_milegpos_served_household_is_played_by_openenvs_own_client():
    """OpenEnv's GenericEnvClient (its own session protocol, reset / step / state) plays milegpo's served household:
    the observations, rewards and outcomes of the local world."""
    pytest.importorskip("openenv.core.generic_client", reason="the openenv extra is not installed")
    from openenv.core.generic_client import GenericEnvClient

    from milegpo.envs import make_env

    task = household_tasks("train", 1, horizon=6)[0]
    local = make_env("household")
    obs, admissible, _ = local.reset(task)
    with serve("household") as server:
        with GenericEnvClient(base_url=server.url).sync() as client:
            first = client.reset(task=task.to_dict())
            assert first.observation["text"] == obs and first.observation["admissible_actions"] == admissible
            assert first.done is False
            for k in range(6):
                action = admissible[k % len(admissible)]
                obs, reward, terminated, truncated, info = local.step(action)
                result = client.step({"message": action})
                assert (result.observation["text"], result.reward, result.done) == (obs, reward, terminated or truncated)
                assert result.observation["won"] == info["won"]
                admissible = info["admissible_actions"]
                if local.done:
                    break
            assert client.state()["step_count"] == local.steps
            with pytest.raises(RuntimeError, match=r"data\['task'\] must be the milegpo Task as a dict"):
                client.reset(seed=3)  # the served world needs its Task: the error says how to send it


def test_a_server_at_capacity_is_one_line_that_says_what_to_set(registry):
    """OpenEnv's server takes max_concurrent_envs sessions (default 1): a pool of 2 slots got a refusal per slot
    past it, in a traceback."""
    games = _real_openenv()
    from milegpo.envs.base import EnvFailure

    with games.OpenEnvServer(max_concurrent_envs=1) as server:
        register_served("narrow-keydoor", server.url, like="tests.envs.text_games:KeyDoor")
        pool = SequentialPool(2)
        with pytest.raises(EnvFailure) as refused:
            pool.reset(make_tasks("narrow-keydoor", "train", 2))
        pool.close()
    line = str(refused.value)
    assert "\n" not in line and line.startswith("environment 'narrow-keydoor': reset of task ")
    assert f"OpenEnv server {server.url} refused a session: it is at capacity (1 of 1 sessions in use)" in line
    assert "max_concurrent_envs" in line and "SUPPORTS_CONCURRENT_SESSIONS" in line


def test_a_server_restarted_between_episodes_is_reconnected_at_the_next_reset():
    games = _real_openenv()
    env = None
    port = games.free_port()
    task = make_tasks("tests.envs.text_games:KeyDoor", "train", 1, horizon=8)[0]
    with games.OpenEnvServer(port=port) as server:
        env = OpenEnvTextEnv(server.url)
        env.reset(task)
        env.step("look")
    with games.OpenEnvServer(port=port):  # the same address, a new server: the old session is gone
        obs, admissible, _ = env.reset(task)  # was: "not reachable at reset"
        assert obs.startswith("You are in the hall") and admissible == ["go left", "go right", "look"]
        assert env.step("look")[0].startswith("You are in the hall")
        env.close()


class _Talker:
    """A WebSocket server on loopback that answers every message with ``reply`` (a str sent as it is)."""

    def __init__(self, reply: str) -> None:
        import threading

        from websockets.sync.server import serve as ws_serve

        def handle(connection):
            for _ in connection:
                connection.send(reply)

        self.server = ws_serve(handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.socket.getsockname()[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.mark.parametrize("reply, message", [
    ("<html>502 Bad Gateway</html>", r"OpenEnv server {url} sent a reply that is not JSON to reset: "
                                     r"'<html>502 Bad Gateway</html>'"),
    ('{"type": "error", "data": "the engine is warming up"}', r"OpenEnv server {url} answered reset with an error: "
                                                              r"'the engine is warming up'"),
    ('[1, 2]', r"OpenEnv server {url} sent \[1, 2\] to reset, expected"),
    ('{"type": "observation", "data": "ok"}', r"OpenEnv server {url} sent an observation reply whose data is 'ok'"),
])
def test_a_reply_that_is_not_the_protocols_names_the_server_and_what_it_sent(reply, message):
    talker = _Talker(reply)
    try:
        env = OpenEnvTextEnv(talker.url)
        with pytest.raises(EnvError, match=message.format(url=re.escape(talker.url))):
            env.reset(household_tasks("train", 1)[0])
        env.close()
    finally:
        talker.close()


@pytest.mark.parametrize("kwargs, error, message", [
    ({"base_url": 8000}, TypeError, r"base_url must be the server's URL as a str, e.g. 'http://127.0.0.1:8000', got "
                                    r"int 8000"),
    ({"base_url": "localhost:8000"}, ValueError, r"base_url must be http\(s\):// or ws\(s\)://, got 'localhost:8000'"),
    ({"base_url": "http://h:1", "timeout": -1}, ValueError, r"timeout must be a finite number of seconds > 0, got -1"),
    ({"base_url": "http://h:1", "timeout": float("nan")}, ValueError, r"timeout must be .* got nan"),
    ({"base_url": "http://h:1", "connect_timeout": 0}, ValueError, r"connect_timeout must be .* got 0"),
])
def test_bad_settings_are_refused_where_they_enter(registry, kwargs, error, message):
    with pytest.raises(error, match=message):  # was: an AttributeError at the first reset; -1 / NaN kept
        OpenEnvTextEnv(kwargs.pop("base_url"), **kwargs)
    with pytest.raises(TypeError, match=r"register_served: base_url must be the server's URL as a str"):
        register_served("port-only", 8000, like="household")
