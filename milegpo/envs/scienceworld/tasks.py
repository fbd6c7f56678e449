"""ScienceWorld's task space: its 30 task types, their variation splits, BEACON's levels, and the Tasks of a split.

Pure data and Python (no engine, no JVM): the parent process of a run lists its tasks without starting one.

The engine (scienceworld 1.2.3) splits the variations of each task type by contiguous index: ``train`` the first
~50%, ``dev`` the next ~25%, ``test`` the rest (its ``get_variations_train/dev/test``); :data:`VARIATIONS` holds
the three sizes of each type, read from the engine once (``tests/envs/scienceworld`` checks them against it).
The field trains on ``train`` and evaluates on ``dev`` or ``test`` (unseen variations of seen task types).

BEACON's levels (its ``variations_idx/L{0,1,2}_idx.json``: (task, variation) pairs over 29 task types, every
type but ``use-thermometer``), by the option ``level``:

- ``L0``: train variations / **dev** variations (the level BEACON's trainer loads);
- ``L1``: train variations / **test** variations;
- ``L2``: out of distribution by task type: the train variations of 19 types / the test variations of the
  other 10 (:data:`L2_HELD_OUT`).

A level names the split it evaluates on; asking it for the other one is an error that says which (so that
``--env_options '{"level": "L0"}'`` needs ``--eval_splits dev``). Counts (checked by the tests): L0 3,322 /
1,661, L1 3,322 / 1,684, L2 2,242 / 549, as BEACON's files hold.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any, Sequence

from ..base import EnvError, Task

#: task type -> (train, dev, test) variation counts of scienceworld 1.2.3, in the engine's order
#: (``get_task_names()``, alphabetical); the engine's variation index runs train, then dev, then test
VARIATIONS: dict[str, tuple[int, int, int]] = {
    "boil": (14, 7, 9),
    "change-the-state-of-matter-of": (14, 7, 9),
    "chemistry-mix": (16, 8, 8),
    "chemistry-mix-paint-secondary-color": (18, 9, 9),
    "chemistry-mix-paint-tertiary-color": (18, 9, 9),
    "find-animal": (150, 75, 75),
    "find-living-thing": (150, 75, 75),
    "find-non-living-thing": (150, 75, 75),
    "find-plant": (150, 75, 75),
    "freeze": (14, 7, 9),
    "grow-fruit": (62, 31, 33),
    "grow-plant": (62, 31, 33),
    "identify-life-stages-1": (6, 3, 5),
    "identify-life-stages-2": (4, 2, 4),
    "inclined-plane-determine-angle": (84, 42, 42),
    "inclined-plane-friction-named-surfaces": (692, 346, 348),
    "inclined-plane-friction-unnamed-surfaces": (80, 40, 42),
    "lifespan-longest-lived": (62, 31, 32),
    "lifespan-longest-lived-then-shortest-lived": (62, 31, 32),
    "lifespan-shortest-lived": (62, 31, 32),
    "measure-melting-point-known-substance": (218, 109, 109),
    "measure-melting-point-unknown-substance": (150, 75, 75),
    "melt": (14, 7, 9),
    "mendelian-genetics-known-plant": (60, 30, 30),
    "mendelian-genetics-unknown-plant": (240, 120, 120),
    "power-component": (10, 5, 5),
    "power-component-renewable-vs-nonrenewable-energy": (10, 5, 5),
    "test-conductivity": (450, 225, 225),
    "test-conductivity-of-unknown-substances": (300, 150, 150),
    "use-thermometer": (270, 135, 135),
}
#: the 30 task types, in the engine's order
TASK_TYPES: tuple[str, ...] = tuple(VARIATIONS)
#: the engine's variation splits: the splits scienceworld_tasks takes
SPLITS = ("train", "dev", "test")
#: the splits a run evaluates on by default: dev (in distribution: the variations a method is tuned on) and test
EVAL_SPLITS = ("dev", "test")
#: the task types whose actions need electricity (the engine refuses ``noElectricalAction`` for them)
ELECTRICAL = tuple(t for t in TASK_TYPES if "power-component" in t or "conductivity" in t)
#: the engine's simplifications (``easy`` is all of them; for an electrical task the engine leaves
#: ``noElectricalAction`` out of it)
SIMPLIFICATIONS = ("easy", "teleportAction", "selfWateringFlowerPots", "openContainers", "openDoors",
                   "noElectricalAction")
#: the step budget of a ScienceWorld task: the engine's own default episode limit (``envStepLimit=100``);
#: BEACON's scripts use 30 (``--horizon 30``)
DEFAULT_SCIENCEWORLD_HORIZON = 100
#: the reward of a win (the household's and verl-agent's convention)
WIN_REWARD = 10.0
#: the values of the Task option ``reward``; the first is the default: ``win`` (:data:`WIN_REWARD` on the winning
#: step, else 0) or ``score`` (every step ``WIN_REWARD`` x the rise of the engine's score / 100: its own dense
#: reward, summing to 10 at a win; negative on the step that fails the task)
REWARDS = ("win", "score")
DEFAULT_REWARD = "win"

#: BEACON's L2 task types held out of training (evaluated on their test variations)
L2_HELD_OUT = ("change-the-state-of-matter-of", "chemistry-mix-paint-tertiary-color", "find-plant", "grow-plant",
               "identify-life-stages-2", "inclined-plane-friction-unnamed-surfaces",
               "lifespan-longest-lived-then-shortest-lived", "measure-melting-point-unknown-substance",
               "mendelian-genetics-unknown-plant", "test-conductivity-of-unknown-substances")
_BEACON_TYPES = tuple(t for t in TASK_TYPES if t != "use-thermometer")


@dataclass(frozen=True)
class Level:
    """One of BEACON's variation sets: the task types of its training split and of its evaluation split, and
    which engine split it evaluates on."""

    name: str
    train_types: tuple[str, ...]
    eval_split: str
    eval_types: tuple[str, ...]

    def types(self, split: str) -> tuple[str, ...]:
        """The task types of ``split`` under this level; a split it does not evaluate on is a ValueError."""
        if split == "train":
            return self.train_types
        if split != self.eval_split:
            raise ValueError(f"ScienceWorld level {self.name} trains on train and evaluates on {self.eval_split} "
                             f"variations, not {split!r} (--eval_splits {self.eval_split})")
        return self.eval_types


LEVELS: dict[str, Level] = {
    "L0": Level("L0", _BEACON_TYPES, "dev", _BEACON_TYPES),
    "L1": Level("L1", _BEACON_TYPES, "test", _BEACON_TYPES),
    "L2": Level("L2", tuple(t for t in _BEACON_TYPES if t not in L2_HELD_OUT), "test", L2_HELD_OUT),
}


def variation_range(task_type: str, split: str) -> range:
    """The engine's variation indices of ``split`` for ``task_type`` (contiguous: train, then dev, then test)."""
    check_task_type(task_type)
    if split not in SPLITS:
        raise ValueError(f"ScienceWorld split must be one of {SPLITS}, got {split!r}")
    n_train, n_dev, n_test = VARIATIONS[task_type]
    start = {"train": 0, "dev": n_train, "test": n_train + n_dev}[split]
    return range(start, start + {"train": n_train, "dev": n_dev, "test": n_test}[split])


def check_task_type(task_type: str) -> str:
    if task_type not in VARIATIONS:
        raise ValueError(f"ScienceWorld task_type must be one of the 30 task types ({', '.join(TASK_TYPES)}), "
                         f"got {task_type!r}")
    return task_type


def check_variation(task_type: str, variation: Any) -> int:
    """``variation`` when it is one of ``task_type``'s (0 .. its count - 1); else a ValueError naming the range
    (the engine itself answers an out-of-range variation with a raw IndexOutOfBoundsException at reset)."""
    total = sum(VARIATIONS[check_task_type(task_type)])
    if isinstance(variation, bool) or not isinstance(variation, int) or not 0 <= variation < total:
        spans = ", ".join(f"{split} {_span(variation_range(task_type, split))}" for split in SPLITS)
        raise ValueError(f"ScienceWorld {task_type} has variations 0..{total - 1} ({spans}), got {variation!r}")
    return variation


def _span(r: range) -> str:
    return f"{r.start}..{r.stop - 1}"


def check_simplifications(simplifications: str, task_type: str | None = None) -> str:
    """``simplifications`` (comma-separated names of :data:`SIMPLIFICATIONS`, "" for none) as the engine takes
    it; an unknown name, or ``noElectricalAction`` for an electrical task, is a ValueError."""
    if not isinstance(simplifications, str):
        raise ValueError(f"ScienceWorld simplifications is a comma-separated str (e.g. 'easy'), got "
                         f"{simplifications!r}")
    names = [s.strip() for s in simplifications.split(",") if s.strip()]
    bad = [s for s in names if s not in SIMPLIFICATIONS]
    if bad:
        raise ValueError(f"ScienceWorld simplifications must be among {', '.join(SIMPLIFICATIONS)}, got "
                         f"{', '.join(map(repr, bad))}")
    if "noElectricalAction" in names and task_type in ELECTRICAL:
        raise ValueError(f"ScienceWorld {task_type} needs electrical actions: noElectricalAction cannot simplify it "
                         "(easy leaves it out by itself)")
    return ",".join(names)


def order(types: Sequence[str], split: str) -> list[tuple[str, int]]:
    """The (task type, variation) pairs of ``split`` over ``types``, round-robin: the first variation of every
    type, then the second of every type that has one, ...; so the first tasks of a split cover its types
    evenly (a split of all types is 1 find-animal for every 2 inclined-plane tasks, not 1 for 9)."""
    ranges = [(t, variation_range(t, split)) for t in types]
    out = []
    for k in range(max((len(r) for _, r in ranges), default=0)):
        out += [(t, r[k]) for t, r in ranges if k < len(r)]
    return out


def task_id(task_type: str, split: str, variation: int, simplifications: str = "") -> str:
    return f"scienceworld/{task_type}/{split}/{variation}" + (f"/{simplifications}" if simplifications else "")


def scienceworld_tasks(split: str = "train", n: int | None = 100, start: int = 0, task_type: str = "",
                       horizon: int = DEFAULT_SCIENCEWORLD_HORIZON, task_types: Sequence[str] | None = None,
                       level: str | None = None, simplifications: str = "",
                       reward: str = DEFAULT_REWARD) -> list[Task]:
    """``n`` ScienceWorld tasks of ``split`` (``train``, ``dev`` or ``test``: the engine's variations), from the
    ``start``-th on (None: all).

    task_type / task_types: keep only these task types (default: every type of the level, or all 30); level:
    one of BEACON's :data:`LEVELS` (``L0``, ``L1``, ``L2``; see the module docstring), None for the engine's
    splits of every type; simplifications: the engine's (``easy``, or comma-separated names of
    :data:`SIMPLIFICATIONS`), "" for none (the default; BEACON uses ``easy``); reward: ``win`` or ``score`` (see
    :data:`REWARDS`). Tasks come round-robin over the types (:func:`order`); a Task's ``seed`` is the variation
    index, its ``task_type`` the engine's task name. Fewer than ``n`` tasks left is an :class:`EnvError`.

    This needs the engine (a Java runtime and the ``scienceworld`` package): a missing one is an EnvError that
    names what to install (:func:`check_runtime`), raised here, where a run builds its tasks before any model."""
    if split not in SPLITS:
        raise ValueError(f"ScienceWorld split must be one of {SPLITS} (the engine's variation splits), got {split!r}")
    if reward not in REWARDS:
        raise ValueError(f"ScienceWorld reward must be one of {list(REWARDS)} ('win': {WIN_REWARD:g} on a win, "
                         f"else 0; 'score': the rise of the engine's score), got {reward!r}")
    if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:
        raise ValueError(f"ScienceWorld horizon must be an int >= 1 (steps), got {horizon!r}")
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise ValueError(f"ScienceWorld start must be an int >= 0, got {start!r}")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
        raise ValueError(f"ScienceWorld n must be an int >= 0 or None (all), got {n!r}")
    if level is not None and level not in LEVELS:
        raise ValueError(f"ScienceWorld level must be one of {', '.join(LEVELS)} (BEACON's) or None, got {level!r}")
    types = LEVELS[level].types(split) if level is not None else TASK_TYPES
    wanted = list(task_types or ([task_type] if task_type else []))
    for t in wanted:
        check_task_type(t)
    if wanted:
        outside = [t for t in wanted if t not in types]
        if outside:
            raise ValueError(f"ScienceWorld level {level} has no {', '.join(outside)} in its {split} split (its "
                             f"types there: {', '.join(types)})")
        types = tuple(t for t in TASK_TYPES if t in wanted)
    simplifications = check_simplifications(simplifications)
    for t in types:
        check_simplifications(simplifications, t)
    check_runtime()
    pairs = order(types, split)
    chosen = pairs[start:] if n is None else pairs[start:start + n]
    if n is not None and len(chosen) < n:
        which = ", ".join(types) if len(types) < 4 else f"{len(types)} task types"
        raise EnvError(f"ScienceWorld split {split!r} of {which}{f' (level {level})' if level else ''} has "
                       f"{len(pairs)} variations; asked for {n} from {start} on")
    options: tuple[tuple[str, Any], ...] = ()
    if simplifications:
        options += (("simplifications", simplifications),)
    if reward != DEFAULT_REWARD:
        options += (("reward", reward),)
    return [Task(task_id=task_id(t, split, v, simplifications), env="scienceworld", seed=v, task_type=t, split=split,
                 horizon=horizon, options=options) for t, v in chosen]


# ---------------------------------------------------------------------------------------------- the runtime
#: what to install, named in the errors
INSTALL_PACKAGE = "pip install 'milegpo[scienceworld]' (scienceworld==1.2.3)"
INSTALL_JAVA = "apt install openjdk-17-jre-headless"
_JAVA_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')
_RUNTIME_OK: list[bool] = []


def java_major(version_text: str) -> int | None:
    """The Java major version of ``java -version``'s text (``"1.8.0_392"`` -> 8, ``"17.0.15"`` -> 17), None if
    it names none."""
    found = _JAVA_VERSION.search(version_text)
    if found is None:
        return None
    major, minor = int(found.group(1)), int(found.group(2) or 0)
    return minor if major == 1 else major


def package_installed() -> bool:
    """Whether the ``scienceworld`` package can be imported here (not imported by this)."""
    return importlib.util.find_spec("scienceworld") is not None


def check_runtime() -> None:
    """What ScienceWorld's engine needs on this machine, checked without starting it (once per process): the
    ``scienceworld`` package, and a Java runtime of version 8 or later on PATH that runs (``java -version``).
    Anything missing is an :class:`EnvError` of one line naming what to install."""
    if _RUNTIME_OK:
        return
    if not package_installed():
        raise EnvError(f"ScienceWorld needs its engine package (scienceworld is not installed): {INSTALL_PACKAGE}")
    java = shutil.which("java")
    if java is None:
        raise EnvError(f"ScienceWorld needs a Java runtime (java not found on PATH): {INSTALL_JAVA}")
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EnvError(f"ScienceWorld needs a Java runtime that runs ({java} -version failed: {e}): "
                       f"{INSTALL_JAVA}") from None
    text = (done.stderr or "") + (done.stdout or "")
    major = java_major(text)
    if done.returncode != 0 or major is None:
        first = next((line for line in text.splitlines() if line.strip()), f"exit status {done.returncode}")
        raise EnvError(f"ScienceWorld needs a Java runtime that runs ({java} -version: {first.strip()}): "
                       f"{INSTALL_JAVA}")
    if major < 8:
        raise EnvError(f"ScienceWorld needs Java 8 or later ({java} is Java {major}): {INSTALL_JAVA}")
    _RUNTIME_OK.append(True)


__all__ = ["VARIATIONS", "TASK_TYPES", "SPLITS", "EVAL_SPLITS", "ELECTRICAL", "SIMPLIFICATIONS", "LEVELS", "Level",
           "L2_HELD_OUT", "DEFAULT_SCIENCEWORLD_HORIZON", "WIN_REWARD", "REWARDS", "DEFAULT_REWARD",
           "scienceworld_tasks", "variation_range", "check_task_type", "check_variation", "check_simplifications",
           "order", "task_id", "check_runtime", "package_installed", "java_major", "INSTALL_PACKAGE", "INSTALL_JAVA"]
