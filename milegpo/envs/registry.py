"""The registry of environment kinds: the one table every reader of ``Task.env`` uses.

An environment kind (``Task.env``, ``MileGPOConfig.env``, ``--env``) names an :class:`EnvKind`: the class that
plays it, the function that makes its tasks, its splits, the splits a run evaluates on by default, and its
task types. A kind is found, in this order:

1. registered in this process: :func:`register` (the four built-in worlds register so, in
   :mod:`milegpo.envs`; a user's script or package may call it too);
2. a Python entry point of group :data:`ENTRY_POINT_GROUP` (``milegpo.envs``) named like the kind, of an
   installed package, loaded on the first lookup of a name not registered (its object: an :class:`EnvKind`,
   or an environment class registered with the defaults below);
3. a dotted path ``"package.module:Class"`` (a :class:`~milegpo.envs.TextEnv` subclass or a gymnasium ``Env``
   class, or an :class:`EnvKind`): the kind is the path itself, so a task file or a pool worker that reads it
   finds the class again;
4. ``"gym:<id>"``: a gymnasium environment registered with ``gymnasium.register(id=...)``, played through
   :class:`milegpo.envs.gym.GymTextEnv`.

What a class registered without a task function plays (:func:`seeded_tasks`): task ``i`` of a split is the
seed ``stable_seed(kind, split, i)`` (the class's ``reset`` reads ``task.seed``), splits :data:`DEFAULT_SPLITS`.

Pool workers (other processes) are sent the :class:`EnvKind` of every kind they play
(:func:`milegpo.envs.pool.EnvPool` does), so they find every kind the parent does, also one registered in the
parent's ``__main__``-free code only. Importing this module imports no engine: dotted paths resolve on first use.
"""

from __future__ import annotations

import importlib
import inspect
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from ..usage import resolve_dotted
from .base import DEFAULT_HORIZON, EnvError, Task, TextEnv, stable_seed

#: the entry-point group an installed package declares its environments in (``[project.entry-points."milegpo.envs"]``)
ENTRY_POINT_GROUP = "milegpo.envs"
#: the prefix of a kind that names a gymnasium registry id (``"gym:TextGame-v0"``)
GYM_PREFIX = "gym:"
#: the splits of a kind registered without any: seeds of a training and a test split
DEFAULT_SPLITS = ("train", "test")
#: the splits such a kind evaluates on by default
DEFAULT_EVAL_SPLITS = ("test",)

#: a value given as ``"package.module:attribute"``, imported on first use
Lazy = Any


def resolve_path(path: str, what: str) -> Any:
    """The object a dotted path ``"package.module:attribute"`` (or ``"package.module.attribute"``) names
    (:func:`pkgutil.resolve_name`); one that does not resolve is an :class:`EnvError` naming ``what`` it was for and
    what failed."""
    try:
        return resolve_dotted(path)
    except ValueError as e:
        raise EnvError(f"{what}: {path!r} does not resolve ({e})") from None


class UnknownKind(EnvError):
    """A kind that is not registered, not an installed entry point, not a dotted path nor ``gym:<id>``."""

    def __init__(self, kind: str, known: Sequence[str]) -> None:
        self.kind, self.known = kind, list(known)
        super().__init__(f"unknown environment kind {kind!r}; known: {', '.join(self.known)} (or a dotted path "
                         "'package.module:Class', or 'gym:<gymnasium id>')")


def _is_dotted(value: Any) -> bool:
    return isinstance(value, str) and ":" in value


def is_gym_class(cls: Any) -> bool:
    """Whether ``cls`` is a gymnasium-style environment class (not a TextEnv): a class with ``reset`` and
    ``step`` (a ``gymnasium.Env`` subclass is one)."""
    return (isinstance(cls, type) and not issubclass(cls, TextEnv) and callable(getattr(cls, "reset", None))
            and callable(getattr(cls, "step", None)))


def check_env_class(cls: Any, kind: str) -> type:
    """``cls`` when it plays kind ``kind``: a concrete :class:`TextEnv` subclass, or a gymnasium-style class
    (``reset`` and ``step``, adapted by :class:`milegpo.envs.gym.GymTextEnv`); anything else is an
    :class:`EnvError` saying what it is and what was expected."""
    if isinstance(cls, type) and issubclass(cls, TextEnv):
        if inspect.isabstract(cls):
            missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
            raise EnvError(f"environment kind {kind!r}: {cls.__qualname__} is a TextEnv that does not implement "
                           f"{missing}")
        return cls
    if is_gym_class(cls):
        return cls
    what = cls.__qualname__ if isinstance(cls, type) else f"a {type(cls).__name__}"
    lacks = [m for m in ("reset", "step") if not callable(getattr(cls, m, None))]
    raise EnvError(f"environment kind {kind!r}: {what} is neither a milegpo.envs.TextEnv subclass nor a gymnasium "
                   f"Env class{' (it has no ' + ' / '.join(lacks) + ')' if lacks else ''}")


@dataclass(frozen=True)
class EnvKind:
    """One environment kind: what plays it, what makes its tasks, and its task space.

    kind: the name (``Task.env``); env: the class that plays it (a :class:`TextEnv` subclass or a
    gymnasium-style class) or its dotted path; tasks: ``tasks(split, n, *, start=0, task_type="",
    horizon=DEFAULT_HORIZON, **options) -> list[Task]`` or its dotted path (None: :func:`seeded_tasks`);
    splits / eval_splits: every split ``tasks`` takes / those a run evaluates on by default (or dotted paths to
    such tuples); task_types: the task types it takes, None where its data decides (or a dotted path); origin:
    where it was registered (``"milegpo"``, ``"entry point of <package>"``, ``"dotted path"``, ``"register()"``),
    for error messages. Picklable when its class and task function are module-level (pool workers get it)."""

    kind: str
    env: Lazy
    tasks: Lazy = None
    splits: Lazy = DEFAULT_SPLITS
    eval_splits: Lazy = DEFAULT_EVAL_SPLITS
    task_types: Lazy = None
    origin: str = "register()"
    env_kwargs: dict = field(default_factory=dict)
    _cache: dict = field(default_factory=dict, compare=False, repr=False, hash=False)

    def __getstate__(self):
        return {k: getattr(self, k) for k in ("kind", "env", "tasks", "splits", "eval_splits", "task_types", "origin",
                                              "env_kwargs")}

    def __setstate__(self, state):
        for k, v in state.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "_cache", {})

    def _get(self, name: str) -> Any:
        if name not in self._cache:
            value = getattr(self, name)
            if _is_dotted(value):
                value = resolve_path(value, f"environment kind {self.kind!r} ({self.origin}): {name}")
            self._cache[name] = value
        return self._cache[name]

    def source_class(self) -> type:
        """The class registered (imported on first use), checked by :func:`check_env_class`: a TextEnv subclass or
        a gymnasium-style class."""
        return check_env_class(self._get("env"), self.kind)

    def env_class(self) -> type[TextEnv]:
        """The :class:`TextEnv` class that plays this kind: the registered class, or
        :class:`~milegpo.envs.gym.GymTextEnv` for a gymnasium-style one (its class attributes, ``experts``,
        ``has_score``, ``step_in_workers``, are what readers of the kind ask)."""
        cls = self.source_class()
        if issubclass(cls, TextEnv):
            return cls
        from .gym import GymTextEnv

        return GymTextEnv

    def make(self) -> TextEnv:
        """A fresh environment of this kind: ``env(**env_kwargs)``, or a gymnasium-style class inside
        :class:`~milegpo.envs.gym.GymTextEnv` (``GymTextEnv(env, **env_kwargs)``); its ``kind`` is this kind."""
        cls = self.source_class()
        try:
            if issubclass(cls, TextEnv):
                env = cls(**self.env_kwargs)
            else:
                from .gym import GymTextEnv

                env = GymTextEnv(cls, **self.env_kwargs)
        except TypeError as e:  # a class that needs arguments, or env_kwargs it does not take: a bare TypeError
            raise EnvError(f"environment kind {self.kind!r} ({self.origin}): {cls.__qualname__}(**{self.env_kwargs!r})"
                           f" failed: {e}; register it with env_kwargs= its arguments") from None
        env.kind = self.kind
        return env

    def task_function(self) -> Callable[..., list[Task]]:
        """``tasks(split, n, **kwargs)`` of this kind (:func:`seeded_tasks` of it when none was given)."""
        fn = self._get("tasks")
        if fn is None:
            kind = self.kind

            def fn(split: str, n: int, *, start: int = 0, task_type: str = "", horizon: int = DEFAULT_HORIZON):
                return seeded_tasks(kind, self.space()[0], split, n, start=start, task_type=task_type, horizon=horizon)

        elif not callable(fn):
            raise EnvError(f"environment kind {self.kind!r} ({self.origin}): tasks is a {type(fn).__name__}, "
                           "expected a function tasks(split, n, **options) -> list[Task]")
        return fn

    def space(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...] | None]:
        """(splits, eval_splits, task_types), resolved and checked."""
        splits, eval_splits, task_types = self._get("splits"), self._get("eval_splits"), self._get("task_types")
        for name, value in (("splits", splits), ("eval_splits", eval_splits), ("task_types", task_types)):
            if value is None and name == "task_types":
                continue
            if isinstance(value, str) or not all(isinstance(v, str) for v in value) or (name != "task_types"
                                                                                        and not value):
                raise EnvError(f"environment kind {self.kind!r} ({self.origin}): {name} must be a non-empty sequence "
                               f"of str, got {value!r}")
        bad = [s for s in eval_splits if s not in splits]
        if bad:
            raise EnvError(f"environment kind {self.kind!r} ({self.origin}): eval_splits {bad} are not among its "
                           f"splits {tuple(splits)}")
        return tuple(splits), tuple(eval_splits), None if task_types is None else tuple(task_types)


def seeded_tasks(kind: str, splits: Sequence[str], split: str, n: int, *, start: int = 0, task_type: str = "",
                 horizon: int = DEFAULT_HORIZON) -> list[Task]:
    """The tasks of a kind registered without a task function: task ``i`` of ``split`` (``i`` from ``start``) is
    ``Task(f"{kind}/{split}/{i}", env=kind, seed=stable_seed(kind, split, i), ...)``; its class's ``reset`` reads
    the seed. A split not in ``splits`` is a ValueError naming them."""
    if split not in splits:
        raise ValueError(f"environment kind {kind!r}: split must be one of {tuple(splits)}, got {split!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"environment kind {kind!r}: n must be an int >= 0, got {n!r}")
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:  # -1 was a task 'k/train/-1'
        raise ValueError(f"environment kind {kind!r}: start must be an int >= 0, got {start!r}")
    if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:  # 2.5 / 0 were kept in the Task
        raise ValueError(f"environment kind {kind!r}: horizon must be an int >= 1 (steps), got {horizon!r}")
    return [Task(f"{kind}/{split}/{i}", env=kind, seed=stable_seed(kind, split, i), task_type=task_type, split=split,
                 horizon=horizon) for i in range(start, start + n)]


class _Registry:
    def __init__(self) -> None:
        self.specs: dict[str, EnvKind] = {}
        self.entry_points_loaded = False
        self.entry_points: dict[str, list] = {}
        self.lock = threading.RLock()

    def _load_entry_point_names(self) -> None:
        if self.entry_points_loaded:
            return
        from importlib.metadata import entry_points

        for ep in entry_points(group=ENTRY_POINT_GROUP):
            self.entry_points.setdefault(ep.name, []).append(ep)
        self.entry_points_loaded = True


_REGISTRY = _Registry()


def _package_of(ep) -> str:
    dist = getattr(ep, "dist", None)
    return getattr(dist, "name", None) or "an unknown package"


def register(kind: str, env: Any, *, tasks: Any = None, splits: Any = DEFAULT_SPLITS,
             eval_splits: Any = DEFAULT_EVAL_SPLITS, task_types: Any = None, env_kwargs: dict | None = None,
             replace_existing: bool = False, origin: str = "register()") -> EnvKind:
    """Register environment kind ``kind``, played by ``env``; returns its :class:`EnvKind`.

    env: a :class:`~milegpo.envs.TextEnv` subclass, a gymnasium-style ``Env`` class (``reset(seed=...) ->
    (obs, info)``, ``step(action) -> (obs, reward, terminated, truncated, info)`` with text observations and
    actions), or the dotted path ``"package.module:Class"`` of one (imported on first use).
    tasks: ``tasks(split, n, *, start=0, task_type="", horizon=..., **options) -> list[Task]`` (or its dotted
    path); None: :func:`seeded_tasks`. splits, eval_splits, task_types: see :class:`EnvKind`. env_kwargs: keyword
    arguments of every instance (``register("remote-maze", OpenEnvTextEnv, env_kwargs={"base_url": url})``); they
    travel to pool workers with the spec, so they must pickle.

    A kind registered already with another spec is an :class:`EnvError` naming both origins (pass
    ``replace_existing=True`` to replace it); registering the same spec again changes nothing. A class given as
    an object is checked here (:func:`check_env_class`)."""
    if not isinstance(kind, str) or not kind.strip() or kind != kind.strip():
        raise EnvError(f"register: kind must be a non-empty str without surrounding blanks, got {kind!r}")
    if not _is_dotted(env):
        check_env_class(env, kind)
    if env_kwargs is not None and not isinstance(env_kwargs, dict):
        raise EnvError(f"register({kind!r}): env_kwargs must be a dict of keyword arguments, got "
                       f"{type(env_kwargs).__name__}")
    spec = EnvKind(kind, env, tasks, splits, eval_splits, task_types, origin, dict(env_kwargs or {}))
    return _install(spec, replace_existing)


def register_kind(spec: EnvKind, replace_existing: bool = False) -> EnvKind:
    """Register an :class:`EnvKind` as it is (what an entry point or a pool worker hands over)."""
    if not isinstance(spec, EnvKind):
        raise EnvError(f"register_kind: expected an EnvKind, got {type(spec).__name__}")
    if not _is_dotted(spec.env):
        check_env_class(spec.env, spec.kind)
    return _install(spec, replace_existing)


def _install(spec: EnvKind, replace_existing: bool) -> EnvKind:
    with _REGISTRY.lock:
        old = _REGISTRY.specs.get(spec.kind)
        if old is not None and not replace_existing and old != spec:
            raise EnvError(f"environment kind {spec.kind!r} is registered twice: by {old.origin} ({_what(old.env)}) "
                           f"and by {spec.origin} ({_what(spec.env)}); rename one, or pass replace_existing=True")
        if old is None or old != spec:
            _REGISTRY.specs[spec.kind] = spec
        return _REGISTRY.specs[spec.kind]


def unregister(kind: str) -> None:
    """Forget kind ``kind`` (tests; a kind not registered is a KeyError)."""
    with _REGISTRY.lock:
        del _REGISTRY.specs[kind]


def _what(env: Any) -> str:
    if isinstance(env, str):
        return env
    return f"{getattr(env, '__module__', '?')}:{getattr(env, '__qualname__', type(env).__name__)}"


def _from_object(kind: str, obj: Any, origin: str) -> EnvKind:
    """The spec an entry point's or a dotted path's object stands for: an EnvKind (its kind must be ``kind`` for
    an entry point; a dotted path takes it as it is named), else an environment class with the defaults."""
    if isinstance(obj, EnvKind):
        return replace(obj, kind=kind, origin=f"{origin} ({obj.origin})", _cache={})
    check_env_class(obj, kind)
    return EnvKind(kind, obj, origin=origin)


def _from_entry_point(kind: str) -> EnvKind | None:
    _REGISTRY._load_entry_point_names()
    eps = _REGISTRY.entry_points.get(kind)
    if not eps:
        return None
    distinct = {(ep.value, _package_of(ep)) for ep in eps}
    if len(distinct) > 1:
        claims = " and ".join(f"{package} ({value})" for value, package in sorted(distinct, key=lambda d: d[1]))
        raise EnvError(f"environment kind {kind!r} is declared by two packages' {ENTRY_POINT_GROUP!r} entry points: "
                       f"{claims}; uninstall one, or name the class by its dotted path")
    ep = eps[0]
    origin = f"entry point {ep.value!r} of package {_package_of(ep)}"
    try:
        obj = ep.load()
    except Exception as e:  # noqa: BLE001 - any import failure is the entry point's
        raise EnvError(f"environment kind {kind!r}: the {origin} failed to import ({type(e).__name__}: {e})") from None
    return _from_object(kind, obj, origin)


def _from_gym_id(kind: str) -> EnvKind:
    """The kind of ``gym:<id>`` (or gymnasium's ``gym:<module>:<id>``, which imports ``module`` first, as
    ``gymnasium.make`` does): played by :class:`~milegpo.envs.gym.GymTextEnv` from the id's ``gymnasium.EnvSpec``,
    which travels to pool workers with the spec (an id registered only in this process is made there too)."""
    env_id = kind[len(GYM_PREFIX):]
    try:
        import gymnasium
    except ImportError:
        raise EnvError(f"environment kind {kind!r}: a gymnasium id needs gymnasium (pip install 'milegpo[gym]')") \
            from None
    module, _, name = env_id.rpartition(":")
    try:
        if module:  # what gymnasium.make does with "module:id": import the module that registers the id
            importlib.import_module(module)
        gym_spec = gymnasium.spec(name)
    except Exception as e:  # noqa: BLE001 - NameNotFound, a module that does not import, ...
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        hint = (f"the module {module!r} did not register it" if module else
                "gymnasium.register(id=...) it in the module that defines it, and import that module first, or "
                "name it as gym:<module>:<id>")
        raise EnvError(f"environment kind {kind!r}: {name!r} is not a registered gymnasium id "
                       f"({type(e).__name__}: {why}); {hint}") from None
    from .gym import GymTextEnv

    return EnvKind(kind, GymTextEnv, origin=f"gymnasium id {env_id!r}", env_kwargs={"env_id": gym_spec})


def get_kind(kind: str) -> EnvKind:
    """The :class:`EnvKind` of ``kind`` (registered, an entry point, a dotted path or ``gym:<id>``; see the module
    docstring); an unknown one is an :class:`EnvError` listing the known kinds."""
    if not isinstance(kind, str):
        raise EnvError(f"an environment kind is a str, got {type(kind).__name__} {kind!r}")
    spec = _REGISTRY.specs.get(kind)
    if spec is not None:
        return spec
    with _REGISTRY.lock:
        if kind.startswith(GYM_PREFIX):
            spec = _from_gym_id(kind)
        elif _is_dotted(kind):
            spec = _from_object(kind, resolve_path(kind, f"environment {kind!r}"), "dotted path")
        else:
            spec = _from_entry_point(kind)
        if spec is None:
            raise UnknownKind(kind, known_kinds())
        return _install(spec, False)


def reload_entry_points() -> None:
    """Read the installed packages' entry points again on the next lookup (after a package was installed in this
    process's lifetime); kinds already found stay registered."""
    with _REGISTRY.lock:
        _REGISTRY.entry_points_loaded = False
        _REGISTRY.entry_points = {}


def known_kinds() -> list[str]:
    """The kinds known by name, sorted: those registered here and those installed packages declare as entry points
    (not loaded). Dotted paths and ``gym:<id>`` kinds resolved so far are not listed (they are found by their
    spelling)."""
    _REGISTRY._load_entry_point_names()
    return sorted(k for k in set(_REGISTRY.specs) | set(_REGISTRY.entry_points) if not _is_dotted(k))


def registered_kinds() -> dict[str, EnvKind]:
    """The kinds registered in this process so far (a copy)."""
    return dict(_REGISTRY.specs)


__all__ = ["EnvKind", "UnknownKind", "register", "register_kind", "unregister", "get_kind", "known_kinds", "registered_kinds", "reload_entry_points",
           "seeded_tasks", "resolve_path", "check_env_class", "is_gym_class", "ENTRY_POINT_GROUP", "GYM_PREFIX",
           "DEFAULT_SPLITS", "DEFAULT_EVAL_SPLITS"]
