"""OpenEnv environments played as :class:`~milegpo.envs.TextEnv`, and any milegpo world served the OpenEnv way.

OpenEnv (the ``openenv`` package, 0.10; ``openenv-core`` is its old name) serves an environment over a WebSocket
session at ``<server>/ws`` (``openenv.core.env_server.http_server.HTTPEnvServer``, made by ``create_app``): the
client sends ``{"type": "reset", "data": {seed, episode_id, ...}}`` (the server passes the keys its environment's
``reset`` takes), ``{"type": "step", "data": <action fields>}``, ``{"type": "state"}`` and ``{"type": "close"}``; the
server answers ``{"type": "observation", "data": {"observation": {...}, "reward": r, "done": d}}`` (or
``{"type": "error", "data": {"message", "code"}}``), one environment instance per connection. A server accepts
``max_concurrent_envs`` sessions at once (``create_app``'s argument, default 1; above 1 only for an environment
that declares ``SUPPORTS_CONCURRENT_SESSIONS = True``); one more is refused on connection with code
``CAPACITY_REACHED``. Its HTTP ``/reset`` and ``/step`` make a fresh environment per request, so an episode needs
the session.

:class:`OpenEnvTextEnv` plays such an environment, given a server URL (it speaks that protocol itself, with the
``websockets`` package) or a client object (OpenEnv's ``EnvClient.sync()``, e.g. ``GenericEnvClient``:
``reset(**kw)`` / ``step(action)`` returning a result with ``observation``, ``reward``, ``done``):

- the observation text: the first of :data:`TEXT_KEYS` in the observation that holds a str (``text_key`` picks
  one); admissible actions: ``admissible_actions`` / ``admissible_commands`` / ``legal_actions`` when listed,
  else free text; the goal: ``goal``; the context line (keyed by the default anchor): ``state_context``;
- the action sent: ``{action_key: text}`` (default ``"message"``, the field of OpenEnv's text environments);
- success: the observation's ``won`` (or ``success``) when it reports one, else ``done and reward > 0``; a ``done``
  without success is a loss, unless the observation says ``truncated`` (OpenEnv's protocol has only ``done``: a
  server that stops an episode at its own step limit and wants it read as truncated says so there); a step that
  completed one of the environment's verifiable subgoals: the observation's ``milestone`` (a bool; absent: False);
- milegpo opens one session per episode slot of its pool (``groups_per_iteration x group_size`` per process, all
  open at once): a server's capacity refusal is an :class:`~milegpo.envs.EnvError` that says what to set
  (``max_concurrent_envs``); a server down at reset is one naming the URL; a reply that is not JSON, or an error
  whose data is not the protocol's, names the server and what it sent;
- a server that dies or stops answering mid-episode ends that episode truncated (``info["error"]`` says why: an
  environment failure, see ``MileGPOConfig.env_errors``); a server restarted between episodes is reconnected at
  the next reset (the session that was open is dropped and opened again, once).

:func:`serve` serves any registered kind the same way on a port (``python -m milegpo.envs.openenv --env household
--port 8000``): OpenEnv's own client (``GenericEnvClient(base_url).sync()``: ``reset(task=task.to_dict())``,
``step({"message": action})``, ``state()``), or :class:`OpenEnvTextEnv` on another machine, plays it; the
observation holds the text, the admissible actions, the goal, the context line, ``won`` and ``milestone``, so a
remote episode keys its states (and marks its milestones) as a local one does. It takes any number of sessions.
:func:`register_served` registers a kind whose episodes are played on such a server.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass
from typing import Any, Callable

from .anchors import StateTracker
from .base import ENV_FAILURE, EnvError, Task, TextEnv, failure_line, finite_reward, step_flag

#: observation fields read as the observation's text, first present str wins
TEXT_KEYS = ("text", "observation", "prompt", "message")
#: observation fields that list the admissible actions
ADMISSIBLE_KEYS = ("admissible_actions", "admissible_commands", "legal_actions")
#: observation fields that report success
SUCCESS_KEYS = ("won", "success")


class _ObservedContext(StateTracker):
    """The context line the server reports in ``observation["state_context"]``."""

    def __init__(self) -> None:
        self.line = ""

    def reset(self, observation: str, info: dict) -> None:
        self.line = str(info.get("state_context", "") or "")

    def update(self, action: str, observation: str, invalid: bool, info: dict) -> None:
        self.line = str(info.get("state_context", "") or "")

    def context(self) -> str:
        return self.line


@dataclass
class _Result:
    observation: dict
    reward: float | None
    done: bool


def check_url(base_url: Any, who: str = "OpenEnvTextEnv") -> str:
    """``base_url`` when it is a server URL (a str starting with http://, https://, ws:// or wss://); anything else
    (``8000``, a port where a URL is due; ``"localhost:8000"``) a TypeError / ValueError naming what was given."""
    if not isinstance(base_url, str):
        raise TypeError(f"{who}: base_url must be the server's URL as a str, e.g. 'http://127.0.0.1:8000', got "
                        f"{type(base_url).__name__} {base_url!r:.80}")
    if not base_url.startswith(("http://", "https://", "ws://", "wss://")):
        raise ValueError(f"{who}: base_url must be http(s):// or ws(s)://, got {base_url!r:.80}")
    return base_url


def check_seconds(value: Any, name: str, who: str = "OpenEnvTextEnv") -> float:
    """``value`` as a float when it is a finite number of seconds > 0; anything else (-1, NaN, True) a ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{who}: {name} must be a finite number of seconds > 0, got {value!r:.80}")
    return float(value)


#: the error codes after which an OpenEnv server closes the session (the next request opens a new one)
SESSION_ENDING_CODES = ("CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR")


class _Session:
    """One OpenEnv WebSocket session (``<url>/ws``), opened on first use."""

    def __init__(self, url: str, timeout: float, connect_timeout: float) -> None:
        self.base_url = url
        url = url.rstrip("/")
        for http, ws in (("http://", "ws://"), ("https://", "wss://")):
            if url.startswith(http):
                url = ws + url[len(http):]
        self.url = url if url.endswith("/ws") else url + "/ws"
        self.timeout, self.connect_timeout = timeout, connect_timeout
        self.ws = None

    @property
    def is_open(self) -> bool:
        return self.ws is not None

    def request(self, message: dict) -> _Result:
        if self.ws is None:
            try:
                from websockets.sync.client import connect
            except ImportError:
                raise EnvError("OpenEnvTextEnv with a base_url needs the websockets package "
                               "(pip install 'milegpo[openenv]')") from None
            # entered by hand: the session outlives this call (websockets 17 wants connect() entered)
            self.ws = connect(self.url, open_timeout=self.connect_timeout, max_size=None, proxy=None).__enter__()
        from websockets.exceptions import ConnectionClosed

        try:
            self.ws.send(json.dumps(message))
        except ConnectionClosed:  # a refused session (at capacity) sends its error, then closes: read what it sent
            pass
        raw = self.ws.recv(timeout=self.timeout)
        try:
            reply = json.loads(raw)
        except ValueError:
            self.drop()  # out of step with the server: the next request opens a new session
            raise EnvError(f"OpenEnv server {self.base_url} sent a reply that is not JSON to {message.get('type')}: "
                           f"{raw!r:.200}") from None
        if not isinstance(reply, dict) or reply.get("type") not in ("observation", "error", "state"):
            self.drop()
            raise EnvError(f"OpenEnv server {self.base_url} sent {reply!r:.200} to {message.get('type')}, expected "
                           "{'type': 'observation' | 'error', 'data': ...}")
        data = reply.get("data")
        if reply["type"] == "error":
            raise self._refusal(data, message.get("type"))
        if not isinstance(data, dict) or not isinstance(data.get("observation", {}), dict):
            raise EnvError(f"OpenEnv server {self.base_url} sent an observation reply whose data is {data!r:.200}, "
                           "expected {'observation': {...}, 'reward': r, 'done': d}")
        return _Result(data.get("observation", {}), data.get("reward"), data.get("done", False))  # checked at the step

    def _refusal(self, data: Any, what: str) -> EnvError:
        """The EnvError of an error reply: the server's message and code (a capacity refusal says what to set)."""
        if not isinstance(data, dict):  # the protocol's data is {"message", "code"}: name what was sent instead
            return EnvError(f"OpenEnv server {self.base_url} answered {what} with an error: {data!r:.200}")
        code, text = data.get("code"), data.get("message", "error")
        if code in SESSION_ENDING_CODES:
            self.drop()
        if code == "CAPACITY_REACHED":
            held = (f" ({data['active_sessions']} of {data['max_sessions']} sessions in use)"
                    if "active_sessions" in data and "max_sessions" in data else "")
            return EnvError(f"OpenEnv server {self.base_url} refused a session: it is at capacity{held}. milegpo "
                            "plays one session per episode slot (groups_per_iteration x group_size per process, all "
                            "open at once): serve the environment with max_concurrent_envs at least that "
                            "(create_app(..., max_concurrent_envs=N), its Environment declaring "
                            "SUPPORTS_CONCURRENT_SESSIONS = True), or play fewer episodes at once")
        return EnvError(f"OpenEnv server {self.base_url}: {text} (code {code})")

    def drop(self) -> None:
        """Forget the connection (closed, or out of step with the server): the next request opens a new one."""
        ws, self.ws = self.ws, None
        if ws is not None:
            try:
                ws.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass

    def close(self) -> None:
        if self.ws is not None:
            try:
                self.ws.send(json.dumps({"type": "close"}))
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
            self.drop()


def _connection_errors() -> tuple:
    errors: tuple = (OSError, TimeoutError, EOFError)
    try:
        from websockets.exceptions import WebSocketException

        errors += (WebSocketException,)
    except ImportError:
        pass
    return errors


class OpenEnvTextEnv(TextEnv):
    """An OpenEnv environment as a :class:`TextEnv` (see the module docstring).

    base_url: the server (``http://host:port``, ``ws://host:port``; the session is ``/ws``), or client: an object
    with ``reset(**kwargs)`` and ``step(action)`` (OpenEnv's ``EnvClient(...).sync()``); action_key: the action's
    field; make_action: ``text -> action`` for a client that takes typed actions (default ``{action_key: text}``);
    text_key: the observation's text field (default: the first of :data:`TEXT_KEYS` present); timeout: seconds a
    reset or step may take on the server; connect_timeout: seconds to open the session."""

    experts = {}
    has_score = False
    step_in_workers = True
    kind = "openenv"

    def __init__(self, base_url: str | None = None, *, client: Any = None, action_key: str = "message",
                 make_action: Callable[[str], Any] | None = None, text_key: str | None = None,
                 timeout: float = 60.0, connect_timeout: float = 10.0) -> None:
        super().__init__()
        if (base_url is None) == (client is None):
            raise ValueError("OpenEnvTextEnv: give base_url (an OpenEnv server) or client (an OpenEnv client "
                             "object), exactly one")
        if base_url is not None:
            check_url(base_url)
        timeout, connect_timeout = check_seconds(timeout, "timeout"), check_seconds(connect_timeout, "connect_timeout")
        if client is not None and not (callable(getattr(client, "reset", None))
                                       and callable(getattr(client, "step", None))):
            raise TypeError(f"OpenEnvTextEnv: client {type(client).__name__} has no reset() / step(); pass "
                            "OpenEnv's EnvClient(...).sync() or an object like it")
        self.base_url, self.client = base_url, client
        self._session = None if base_url is None else _Session(base_url, timeout, connect_timeout)
        self.action_key, self.text_key = action_key, text_key
        self._make_action = make_action or (lambda text: {self.action_key: text})
        self._free_text = True
        self._where = base_url or type(client).__name__

    def make_tracker(self) -> StateTracker:
        return _ObservedContext()

    # ------------------------------------------------------------------ talking to the server
    def _call(self, what: str, payload: Any) -> _Result:
        if self._session is not None:
            return self._session.request({"type": what, "data": payload})
        result = self.client.reset(**payload) if what == "reset" else self.client.step(payload)
        observation = getattr(result, "observation", None)
        if hasattr(observation, "model_dump"):
            observation = observation.model_dump()
        return _Result(observation if isinstance(observation, dict) else {"text": observation},
                       getattr(result, "reward", None), getattr(result, "done", False))

    def _text(self, observation: dict, where: str) -> str:
        if not isinstance(observation, dict):
            raise TypeError(f"OpenEnv {self._where}: {where} returned a {type(observation).__name__} observation, "
                            "expected a dict of fields")
        keys = (self.text_key,) if self.text_key else TEXT_KEYS
        for key in keys:
            if isinstance(observation.get(key), str):
                return observation[key]
        raise TypeError(f"OpenEnv {self._where}: the {where} observation holds no text field "
                        f"{' / '.join(keys)} (its fields: {sorted(observation)}); pass text_key=")

    def _admissible(self, observation: dict) -> list[str]:
        for key in ADMISSIBLE_KEYS:
            actions = observation.get(key)
            if actions is not None:
                if not isinstance(actions, (list, tuple)) or not all(isinstance(a, str) for a in actions):
                    raise TypeError(f"OpenEnv {self._where}: observation[{key!r}] must be a list of str, got "
                                    f"{actions!r:.120}")
                self._free_text = False
                return list(actions)
        self._free_text = True
        return []

    def _reset(self, task: Task) -> tuple[str, list[str], dict]:
        payload = {"seed": task.seed, "episode_id": task.task_id, "task": task.to_dict()}
        # a session that was open may be stale (the server restarted since the last episode): opened again, once
        attempts = 2 if self._session is not None and self._session.is_open else 1
        for attempt in range(attempts):
            try:
                result = self._call("reset", payload)
                break
            except _connection_errors() as e:
                self._drop()
                if attempt + 1 < attempts and not isinstance(e, TimeoutError):
                    continue
                raise EnvError(f"OpenEnv server {self._where} is not reachable at reset of task {task.task_id!r} "
                               f"({type(e).__name__}: {e})") from None
        obs = self._text(result.observation, "reset")
        observation = result.observation
        goal = observation.get("goal", "")
        return obs, self._admissible(observation), {
            "goal": goal if isinstance(goal, str) else str(goal), "game_id": str(observation.get("game_id",
                                                                                               task.task_id)),
            "state_context": observation.get("state_context", "")}

    def _invalid(self, action: str) -> bool | None:
        return None if self._free_text else super()._invalid(action)

    def _step(self, action: str) -> tuple[str, float, bool, list[str], dict]:
        try:
            result = self._call("step", self._make_action(action))
        except _connection_errors() as e:  # the server died or stopped answering: this episode is over
            self._drop()
            lost = f"the OpenEnv server {self._where} was lost mid-episode ({type(e).__name__}: {e})"
            return self.last_obs, 0.0, False, [], {"truncated": True, "state_context": self.tracker.context(),
                                                   "error": failure_line(self.kind, "step", self.task.task_id, lost,
                                                                         step=self.steps + 1), ENV_FAILURE: True}
        observation = result.observation
        obs = self._text(observation, "step")
        reward = finite_reward(0.0 if result.reward is None else result.reward, f"OpenEnv {self._where}: step")
        where = f"OpenEnv {self._where}: step returned"
        done = step_flag(bool(result.done) if result.done is None else result.done, f"{where} done")  # null: not done
        key = next((k for k in SUCCESS_KEYS if observation.get(k) is not None), None)
        won = step_flag(observation[key], f"{where} observation[{key!r}]") if key else done and reward > 0
        truncated = step_flag(observation.get("truncated", False), f"{where} observation['truncated']") and not won
        info = {"lost": done and not won and not truncated, "truncated": truncated,
                "invalid": step_flag(observation.get("invalid", False), f"{where} observation['invalid']"),
                "milestone": step_flag(observation.get("milestone", False), f"{where} observation['milestone']"),
                "state_context": observation.get("state_context", "")}
        return obs, reward, won, self._admissible(observation), info

    def _drop(self) -> None:
        if self._session is not None:
            self._session.drop()

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
        elif callable(getattr(self.client, "close", None)):
            self.client.close()


# --------------------------------------------------------------------------- serving a world
class Server:
    """A running :func:`serve`: ``url`` (``http://host:port``), ``close()``; a context manager."""

    def __init__(self, server, thread: threading.Thread, host: str, port: int) -> None:
        self._server, self._thread, self.host, self.port = server, thread, host, port
        self.url = f"http://{host}:{port}"

    def close(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=10)

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _observation(env: TextEnv, obs: str, info: dict) -> dict:
    return {"text": obs, "admissible_actions": list(info.get("admissible_actions", [])),
            "goal": info.get("goal", ""), "state_context": info.get("state_context", ""),
            "won": bool(info.get("won", False)), "truncated": bool(info.get("truncated", False)), "invalid": bool(info.get("invalid", False)),
            "milestone": bool(info.get("milestone", False)), "game_id": info.get("game_id")}


def _handler(kind: str) -> Callable:
    from . import make_env

    def handle(connection) -> None:
        env = make_env(kind)  # one environment per session, as an OpenEnv server makes
        env.set_state_anchor("observation")  # keys are the client's: it keys what it receives
        goal = ""
        try:
            for raw in connection:
                try:
                    try:
                        message = json.loads(raw)
                    except ValueError as e:
                        connection.send(json.dumps({"type": "error", "data": {"message": f"Invalid JSON: {e}",
                                                                              "code": "INVALID_JSON"}}))
                        continue
                    what, data = message.get("type"), message.get("data") or {}
                    if what == "close":
                        break
                    if what == "state":  # OpenEnv's client asks it (EnvClient.state())
                        task = env.task.task_id if env.task is not None else None
                        connection.send(json.dumps({"type": "state", "data": {"episode_id": task,
                                                                              "step_count": env.steps}}))
                        continue
                    if what == "reset":
                        spec = data.get("task")
                        if not isinstance(spec, dict):
                            raise ValueError("reset: data['task'] must be the milegpo Task as a dict "
                                             "(OpenEnv's client: reset(task=task.to_dict()))")
                        spec = {**spec, "options": tuple(tuple(pair) for pair in spec.get("options", ()))}
                        obs, _, info = env.reset(Task(**spec))
                        goal = info.get("goal", "")
                        reply = {"observation": _observation(env, obs, info), "reward": None, "done": False}
                    elif what == "step":
                        action = data.get("message") if isinstance(data, dict) else None
                        if not isinstance(action, str):
                            raise ValueError("step: data['message'] must be the action text")
                        obs, reward, terminated, truncated, info = env.step(action)
                        reply = {"observation": _observation(env, obs, {**info, "goal": goal}), "reward": reward,
                                 "done": bool(terminated or truncated)}
                    else:
                        raise ValueError(f"unknown message type {what!r}")
                    connection.send(json.dumps({"type": "observation", "data": reply}))
                except Exception as e:  # noqa: BLE001 - reported to the client, the session goes on
                    connection.send(json.dumps({"type": "error", "data": {"message": f"{type(e).__name__}: {e}",
                                                                          "code": "EXECUTION_ERROR"}}))
        finally:
            env.close()

    return handle


def serve(kind: str, host: str = "127.0.0.1", port: int = 0) -> Server:
    """Serve environment kind ``kind`` over OpenEnv's WebSocket session protocol at ``ws://host:port/ws``, in a
    background thread (port 0: a free one, see ``Server.port``); each connection plays its own environment.
    Needs ``websockets``. ``host`` defaults to loopback: serving on other interfaces is the caller's choice."""
    from websockets.sync.server import serve as ws_serve

    from . import get_kind

    get_kind(kind)  # an unknown kind fails here, not in the first session
    server = ws_serve(_handler(kind), host, port, max_size=None)
    bound_port = server.socket.getsockname()[1]
    thread = threading.Thread(target=server.serve_forever, name=f"milegpo-openenv-{kind}", daemon=True)
    thread.start()
    return Server(server, thread, host, bound_port)


class ServedTasks:
    """The task function of a served kind: ``like``'s tasks (its splits, options), with ``env`` = the served kind."""

    def __init__(self, kind: str, like: str) -> None:
        self.kind, self.like = kind, like

    def __call__(self, split: str, n: int, **options) -> list[Task]:
        import dataclasses

        from . import task_function

        return [dataclasses.replace(t, env=self.kind) for t in task_function(self.like)(split, n, **options)]

    def __eq__(self, other) -> bool:
        return isinstance(other, ServedTasks) and (self.kind, self.like) == (other.kind, other.like)

    def __hash__(self) -> int:
        return hash((self.kind, self.like))


def register_served(kind: str, base_url: str, like: str, **env_kwargs):
    """Register ``kind``: the tasks, splits and task types of kind ``like``, played by the OpenEnv server at
    ``base_url`` (e.g. one :func:`serve` started for ``like``); ``env_kwargs`` go to :class:`OpenEnvTextEnv`."""
    from . import get_kind, register

    check_url(base_url, "register_served")
    space = get_kind(like).space()
    return register(kind, OpenEnvTextEnv, tasks=ServedTasks(kind, like), splits=space[0], eval_splits=space[1],
                    task_types=space[2], env_kwargs={"base_url": base_url, **env_kwargs},
                    origin=f"served {like} at {base_url}")


def main(argv: list[str] | None = None) -> int:
    """``python -m milegpo.envs.openenv --env household --host 127.0.0.1 --port 8000``: serve a kind until
    interrupted."""
    import argparse
    import time

    import sys

    from ..usage import OneLineParser, UsageError

    parser = OneLineParser(prog="python -m milegpo.envs.openenv",
                                     description="Serve a milegpo environment kind over OpenEnv's session protocol.")
    parser.add_argument("--env", default="household", help="environment kind (registered, entry point, dotted path)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=8000, help="0..65535 (0: a free one)")
    try:  # misuse (a bad flag, an unknown kind, a port in use or out of range, a host not found): one line, exit 2
        args = parser.parse_args(argv)
        if not 0 <= args.port <= 65535:
            parser.error(f"--port {args.port}: a port is 0..65535 (0: a free one)")
        try:
            server = serve(args.env, args.host, args.port)
        except (EnvError, OSError, OverflowError) as e:
            parser.error(f"cannot serve --env {args.env} at {args.host}:{args.port}: {str(e).splitlines()[0]}")
    except UsageError as e:
        print(e, file=sys.stderr)
        return 2
    print(f"serving {args.env} at {server.url} (OpenEnv session: ws://{args.host}:{server.port}/ws)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["OpenEnvTextEnv", "serve", "Server", "register_served", "ServedTasks", "TEXT_KEYS", "ADMISSIBLE_KEYS",
           "SUCCESS_KEYS", "SESSION_ENDING_CODES", "check_url", "check_seconds"]
