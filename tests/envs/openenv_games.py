"""The key-and-door game (:class:`tests.envs.text_games.KeyDoor`) as an OpenEnv environment, served by OpenEnv's own
server (``openenv.core.env_server.http_server.create_app`` under uvicorn, on loopback), for tests/envs/test_openenv.py.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Optional

import uvicorn
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from .text_games import KeyDoor


class TextAction(Action):
    """An action of a text game: its words."""

    message: str = Field(..., description="the action text")


class TextObservation(Observation):
    """What a text game shows: its text, the admissible actions, the goal, a context line and the outcome."""

    text: str = ""
    admissible_actions: list[str] = Field(default_factory=list)
    goal: str = ""
    state_context: str = ""
    won: bool = False


class KeyDoorEnvironment(Environment):
    """:class:`KeyDoor` behind OpenEnv's ``Environment`` interface; every session its own game."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self.game = KeyDoor()
        self._state = State(episode_id=None, step_count=0)

    def _observation(self, obs: str, info: dict, reward=None, done=False, won=False) -> TextObservation:
        return TextObservation(text=obs, admissible_actions=info["admissible_actions"], goal=self.goal,
                               state_context=info["state_context"], won=won, reward=reward, done=done)

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kwargs: Any) -> TextObservation:
        obs, info = self.game.reset(seed=seed)
        self.goal = info["goal"]
        self._state = State(episode_id=episode_id, step_count=0)
        return self._observation(obs, info)

    def step(self, action: TextAction, timeout_s: Optional[float] = None, **kwargs: Any) -> TextObservation:
        obs, reward, terminated, truncated, info = self.game.step(action.message)
        self._state.step_count += 1
        return self._observation(obs, info, reward=reward, done=terminated or truncated,
                                 won=bool(terminated and reward > 0))

    @property
    def state(self) -> State:
        return self._state


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OpenEnvServer:
    """OpenEnv's server of :class:`KeyDoorEnvironment` (``max_concurrent_envs`` sessions) under uvicorn in a thread
    of this process, on ``127.0.0.1:port``; ``url``, ``close()``; a context manager."""

    def __init__(self, max_concurrent_envs: int = 64, port: int | None = None) -> None:
        app = create_app(KeyDoorEnvironment, TextAction, TextObservation, env_name="keydoor",
                         max_concurrent_envs=max_concurrent_envs)
        self.port = port or free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error",
                                                    ws="websockets-sansio"))
        self.thread = threading.Thread(target=self.server.run, daemon=True, name="openenv-test-server")
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("OpenEnv's test server did not start")
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)

    def __enter__(self) -> "OpenEnvServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
