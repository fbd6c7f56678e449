"""ScienceWorld's task space without its engine: variation splits, BEACON's levels, task lists, option checks."""

from __future__ import annotations

import pytest

from milegpo.envs import EnvError, task_space
from milegpo.envs.scienceworld import tasks as sw
from milegpo.envs.scienceworld.tasks import (L2_HELD_OUT, LEVELS, TASK_TYPES, VARIATIONS, check_simplifications,
                                             check_variation, java_major, order, variation_range)


def test_thirty_task_types_and_the_engines_totals():
    assert len(TASK_TYPES) == 30 and TASK_TYPES == tuple(sorted(TASK_TYPES))
    totals = [sum(counts[i] for counts in VARIATIONS.values()) for i in range(3)]
    assert totals == [3592, 1796, 1819] and sum(totals) == 7207  # notes: the engine's own split sizes


def test_variation_ranges_are_contiguous_train_dev_test():
    for task_type, (n_train, n_dev, n_test) in VARIATIONS.items():
        train, dev, test = (variation_range(task_type, s) for s in ("train", "dev", "test"))
        assert (train.start, dev.start, test.start) == (0, n_train, n_train + n_dev)
        assert (len(train), len(dev), len(test)) == (n_train, n_dev, n_test)
    with pytest.raises(ValueError, match="split must be one of"):
        variation_range("boil", "valid")


def test_beacon_levels_hold_beacons_counts():
    def count(level, split):
        return sum(len(variation_range(t, split)) for t in LEVELS[level].types(split))

    assert (count("L0", "train"), count("L0", "dev")) == (3322, 1661)
    assert (count("L1", "train"), count("L1", "test")) == (3322, 1684)
    assert (count("L2", "train"), count("L2", "test")) == (2242, 549)
    assert "use-thermometer" not in LEVELS["L0"].train_types and len(LEVELS["L0"].train_types) == 29
    assert set(LEVELS["L2"].eval_types) == set(L2_HELD_OUT) and not set(L2_HELD_OUT) & set(LEVELS["L2"].train_types)
    with pytest.raises(ValueError, match="evaluates on dev"):
        LEVELS["L0"].types("test")


def test_round_robin_order_covers_the_types_first():
    pairs = order(TASK_TYPES, "train")
    assert len(pairs) == 3592 and len(set(pairs)) == 3592
    assert [t for t, _ in pairs[:30]] == list(TASK_TYPES) and all(v == 0 for _, v in pairs[:30])
    assert pairs[30] == ("boil", 1)
    test = order(["identify-life-stages-2", "boil"], "test")
    assert test[:2] == [("identify-life-stages-2", 6), ("boil", 21)] and test[-1] == ("boil", 29)


def test_variation_and_simplification_checks_name_the_range():
    assert check_variation("boil", 29) == 29
    named = r"boil has variations 0\.\.29 \(train 0\.\.13, dev 14\.\.20, test 21\.\.29\)"
    for bad in (30, -1, "3", True, 2.0):
        with pytest.raises(ValueError, match=named):
            check_variation("boil", bad)
    with pytest.raises(ValueError, match="one of the 30 task types"):
        check_variation("boiling", 0)
    assert check_simplifications(" easy ") == "easy"
    assert check_simplifications("openDoors,teleportAction") == "openDoors,teleportAction"
    with pytest.raises(ValueError, match="'fast'"):
        check_simplifications("easy,fast")
    with pytest.raises(ValueError, match="needs electrical actions"):
        check_simplifications("noElectricalAction", "power-component")
    assert check_simplifications("easy", "power-component") == "easy"  # the engine leaves noElectricalAction out


def test_java_version_text():
    assert java_major('openjdk version "17.0.15" 2025-04-15') == 17
    assert java_major('java version "1.8.0_392"') == 8
    assert java_major('openjdk version "21" 2023-09-19') == 21
    assert java_major("no java here") is None


def test_missing_runtime_is_one_line_naming_what_to_install(monkeypatch):
    monkeypatch.setattr(sw, "_RUNTIME_OK", [])
    monkeypatch.setattr(sw.shutil, "which", lambda name: None)
    monkeypatch.setattr(sw, "package_installed", lambda: True)
    with pytest.raises(EnvError) as e:
        sw.check_runtime()
    assert str(e.value) == ("ScienceWorld needs a Java runtime (java not found on PATH): "
                            "apt install openjdk-17-jre-headless")
    monkeypatch.setattr(sw, "package_installed", lambda: False)
    with pytest.raises(EnvError, match=r"^ScienceWorld needs its engine package .*'milegpo\[scienceworld\]'"):
        sw.check_runtime()


def test_a_java_that_does_not_run_is_named(monkeypatch, tmp_path):
    fake = tmp_path / "java"
    fake.write_text("#!/bin/sh\necho 'Error: could not open libjvm.so' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sw, "_RUNTIME_OK", [])
    monkeypatch.setattr(sw, "package_installed", lambda: True)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvError, match=r"java -version: Error: could not open libjvm\.so\): apt install"):
        sw.check_runtime()


def test_task_space_is_registered():
    space = task_space("scienceworld")
    assert space.splits == ("train", "dev", "test") and space.eval_splits == ("dev", "test")
    assert space.task_types == TASK_TYPES


# ---------------------------------------------------------------------------------------------- the task list
# the task function checks the runtime (it names what to install): these need the package and Java
needs_engine = pytest.mark.skipif(not sw.package_installed(), reason="scienceworld is not installed")


@needs_engine
def test_tasks_of_a_split():
    tasks = sw.scienceworld_tasks("dev", 3, task_type="boil", horizon=30)
    assert [t.seed for t in tasks] == [14, 15, 16]
    assert [t.task_id for t in tasks] == ["scienceworld/boil/dev/14", "scienceworld/boil/dev/15",
                                          "scienceworld/boil/dev/16"]
    assert all(t.env == "scienceworld" and t.split == "dev" and t.horizon == 30 and t.options == () for t in tasks)
    easy = sw.scienceworld_tasks("test", 1, start=2, task_types=["melt", "freeze"], simplifications="easy",
                                 reward="score")[0]
    assert (easy.task_type, easy.seed, easy.task_id) == ("freeze", 22, "scienceworld/freeze/test/22/easy")
    assert easy.options == (("simplifications", "easy"), ("reward", "score"))
    assert len(sw.scienceworld_tasks("train", None, task_type="identify-life-stages-2")) == 4


@needs_engine
def test_levels_select_beacons_pairs():
    held_out = sw.scienceworld_tasks("test", None, level="L2")
    assert len(held_out) == 549 and {t.task_type for t in held_out} == set(L2_HELD_OUT)
    assert len(sw.scienceworld_tasks("dev", None, level="L0")) == 1661
    with pytest.raises(ValueError, match="level L1 trains on train and evaluates on test"):
        sw.scienceworld_tasks("dev", 1, level="L1")
    with pytest.raises(ValueError, match="level L2 has no find-plant in its train split"):
        sw.scienceworld_tasks("train", 1, level="L2", task_type="find-plant")


@needs_engine
def test_task_list_refusals():
    with pytest.raises(EnvError, match="has 4 variations; asked for 5"):
        sw.scienceworld_tasks("test", 5, task_type="identify-life-stages-2")
    for kwargs, match in ((dict(split="valid"), "split must be one of"), (dict(level="L3"), "level must be one of"),
                          (dict(reward="dense"), "reward must be one of"), (dict(horizon=0), "horizon"),
                          (dict(task_type="boiling"), "one of the 30 task types"),
                          (dict(simplifications="noElectricalAction"), "needs electrical actions")):
        with pytest.raises(ValueError, match=match):
            sw.scienceworld_tasks(**{"n": 1, **kwargs})
