"""The registry of environment kinds: register(), entry points of installed packages, dotted paths, pool workers,
and the errors at the door."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from milegpo.envs import (BUILT_IN_KINDS, EnvError, EnvPool, EnvKind, SequentialPool, get_kind, known_kinds,
                          make_env, register, registered_kinds, reload_entry_points, task_space, unregister)
from milegpo.rollout import make_tasks

from .text_games import Corridor, corridor_tasks

ROOT = Path(__file__).resolve().parents[2]
GAMES = "tests.envs.text_games"


@pytest.fixture
def registry():
    """Whatever a test registers, or installs as a package, is forgotten after it."""
    before = set(registered_kinds())
    yield
    for kind in set(registered_kinds()) - before:
        unregister(kind)
    reload_entry_points()


def install_package(root: Path, name: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    """A package ``name`` installed into ``root`` (a folder on sys.path) as pip would: its modules and a dist-info
    folder that declares ``entry_points`` in group ``milegpo.envs``."""
    for rel, text in modules.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    info = root / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[milegpo.envs]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items()))


WALK = """
from milegpo.envs import EnvKind, Task, TextEnv


class Walk(TextEnv):
    def _reset(self, task):
        self.left = 2
        return "Two steps to go.", ["step", "rest"], {"goal": "walk"}

    def _step(self, action):
        self.left -= action == "step"
        won = self.left == 0
        return ("Arrived." if won else "One step to go."), float(won), won, [] if won else ["step", "rest"], {}


def walk_tasks(split, n, *, start=0, task_type="", horizon=6):
    return [Task(f"walk/{split}/{i}", env="walk", seed=i, split=split, horizon=horizon) for i in range(start, start + n)]


SPEC = EnvKind("ignored-name", Walk, tasks=walk_tasks, splits=("train", "eval"), eval_splits=("eval",))
"""


@pytest.fixture
def walk_package(tmp_path, monkeypatch, registry):
    install_package(tmp_path, "walkpkg", {"walk": "walkpkg.envs:SPEC", "walk-class": "walkpkg.envs:Walk"},
                    {"walkpkg/__init__.py": "", "walkpkg/envs.py": WALK})
    monkeypatch.syspath_prepend(str(tmp_path))
    reload_entry_points()
    return tmp_path


def test_the_built_in_worlds_register_through_the_same_door():
    specs = registered_kinds()
    assert set(BUILT_IN_KINDS) <= set(specs) and all(specs[k].origin == "milegpo" for k in BUILT_IN_KINDS)
    assert task_space("household").splits == ("train", "id", "ood") and task_space("webshop").eval_splits == ("test",)
    assert make_env("household").kind == "household"


def test_register_a_kind_with_its_tasks_and_splits(registry):
    spec = register("corridor", Corridor, tasks=corridor_tasks, splits=("short", "long"), eval_splits=("long",))
    assert isinstance(spec, EnvKind) and task_space("corridor") == (("short", "long"), ("long",), None)
    tasks = make_tasks("corridor", "long", 2, options={"length": 2})
    assert [t.option("length") for t in tasks] == [4, 4]
    env = make_env("corridor")
    env.reset(tasks[0])
    assert [env.step("walk right")[2] for _ in range(4)] == [False, False, False, True] and env.won
    assert register("corridor", Corridor, tasks=corridor_tasks, splits=("short", "long"),
                    eval_splits=("long",)) == spec  # the same again: nothing changes
    with pytest.raises(EnvError, match=r"environment kind 'corridor' is registered twice: by register\(\) "
                                       r"\(tests.envs.text_games:Corridor\) and by register\(\) "
                                       r"\(tests.envs.text_games:KeyDoor\); rename one"):
        register("corridor", f"{GAMES}:KeyDoor")
    with pytest.raises(EnvError, match="registered twice: by milegpo"):
        register("household", Corridor)


def test_a_class_alone_plays_seeded_tasks(registry):
    register("plain-corridor", Corridor)
    tasks = make_tasks("plain-corridor", "test", 3)
    assert [t.task_id for t in tasks] == [f"plain-corridor/test/{i}" for i in range(3)]
    assert len({t.seed for t in tasks}) == 3 and all(t.env == "plain-corridor" for t in tasks)
    with pytest.raises(ValueError, match=r"split must be one of \('train', 'test'\), got 'id'"):
        make_tasks("plain-corridor", "id", 1)


def test_an_installed_packages_entry_points_are_found_by_name(walk_package):
    assert "walk" in known_kinds() and "walk" not in registered_kinds()  # not loaded until asked
    assert task_space("walk") == (("train", "eval"), ("eval",), None)
    spec = get_kind("walk")
    assert spec.kind == "walk" and "entry point 'walkpkg.envs:SPEC' of package walkpkg" in spec.origin
    assert get_kind("walk-class").env_class().__name__ == "Walk"
    with EnvPool(2, 1) as pool:  # the workers find it too
        first = pool.reset(make_tasks("walk", "train", 2))
        assert first[0][0] == "Two steps to go."
        outs = pool.step(["step", "step"])
        outs = pool.step(["step", "rest"])
        assert outs[0].won and outs[0].terminated and not outs[1].done


def test_a_fresh_process_finds_an_entry_point_lazily(walk_package):
    code = ("import milegpo.envs as e; assert 'walk' not in e.registered_kinds(); "
            "env = e.make_env('walk'); print(env.reset(e.task_function('walk')('train', 1)[0])[0])")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(walk_package), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "Two steps to go.", out.stderr


def test_two_packages_claiming_one_name_and_a_broken_entry_point(tmp_path, monkeypatch, registry):
    install_package(tmp_path, "pkga", {"maze": "pkga:Maze"}, {"pkga/__init__.py": "Maze = None\n"})
    install_package(tmp_path, "pkgb", {"maze": "pkgb:Maze", "broken": "pkgb.missing:Env"},
                    {"pkgb/__init__.py": "Maze = None\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    reload_entry_points()
    with pytest.raises(EnvError, match=r"^environment kind 'maze' is declared by two packages' 'milegpo.envs' entry "
                                       r"points: pkga \(pkga:Maze\) and pkgb \(pkgb:Maze\); uninstall one"):
        get_kind("maze")
    with pytest.raises(EnvError, match=r"^environment kind 'broken': the entry point 'pkgb.missing:Env' of package "
                                       r"pkgb failed to import \(ModuleNotFoundError: No module named 'pkgb.missing'\)$"):
        get_kind("broken")


@pytest.mark.parametrize("kind, message", [
    ("atari", r"^unknown environment kind 'atari'; known: alfworld, household, scienceworld, textworld, webshop "
              r"\(or a dotted path 'package.module:Class', or 'gym:<gymnasium id>'\)$"),
    ("nowhere.pkg:Env", r"^environment 'nowhere.pkg:Env': 'nowhere.pkg:Env' does not resolve \(cannot "
                        r"import it \(no module named 'nowhere'\)\)$"),
    (f"{GAMES}:Nope", r"does not resolve \(module 'tests.envs.text_games' has no attribute 'Nope'\)$"),
    (f"{GAMES}:NotAnEnv", r"^environment kind 'tests.envs.text_games:NotAnEnv': NotAnEnv is neither a "
                          r"milegpo.envs.TextEnv subclass nor a gymnasium Env class \(it has no step\)$"),
    ("milegpo.envs.base:TextEnv", r"TextEnv is a TextEnv that does not implement _reset, _step$"),
])
def test_bad_kinds_are_one_clear_error(kind, message, registry):
    with pytest.raises(EnvError, match=message):
        get_kind(kind)


def test_pool_workers_find_a_kind_registered_only_in_the_parent(registry):
    register("runtime-corridor", Corridor, tasks=f"{GAMES}:corridor_tasks", splits=("short", "long"),
             eval_splits=("long",))
    tasks = [t.__class__(**{**t.to_dict(), "env": "runtime-corridor"}) for t in make_tasks("runtime-corridor",
                                                                                          "short", 2)]
    with EnvPool(2, 2) as pool:
        pool.reset(tasks)
        for _ in range(3):
            outs = pool.step(["walk right", "walk right"])
        assert all(o.won for o in outs)

    class Local(Corridor):
        pass

    register("local-corridor", Local)
    with EnvPool(1, 1) as pool, pytest.raises(ValueError, match=r"environment kind 'local-corridor' \(register\(\)\) "
                                                                r"cannot be sent to the pool's worker processes"):
        pool.reset(make_tasks("local-corridor", "train", 1))
    assert SequentialPool(1).reset(make_tasks("local-corridor", "train", 1))[0][0].startswith("You stand")


def test_a_dotted_path_in_the_config_and_in_a_saved_policys_task_file(tmp_path, registry):
    from milegpo.trainer import MileGPOConfig
    from milegpo.trainer.saved_policy import saved_task_settings

    kind = f"{GAMES}:Corridor"
    cfg = MileGPOConfig(output_dir=str(tmp_path), env=kind, report_to="none")
    assert cfg.eval_splits == ["test"]
    (tmp_path / "milegpo_task.json").write_text(json.dumps({"env": kind}))
    unregister(kind) if kind in registered_kinds() else None
    assert get_kind(saved_task_settings(tmp_path)["env"]).env_class() is Corridor  # re-found by its path
    from milegpo.trainer.config import ConfigError

    with pytest.raises(ConfigError, match=r"MileGPOConfig.env='nowhere:Env': environment 'nowhere:Env'"):
        MileGPOConfig(output_dir=str(tmp_path), env="nowhere:Env", report_to="none")


def test_the_cli_takes_a_dotted_path_and_refuses_a_bad_one_in_one_line(capsys):
    from tests.usage_errors import one_line_error

    line = one_line_error(capsys, ["train", "--env", "nowhere.pkg:Env"])
    assert line.startswith("milegpo train: error: MileGPOConfig.env='nowhere.pkg:Env': environment 'nowhere.pkg:Env'"
                           ": 'nowhere.pkg:Env' does not resolve")
