"""The protocol: state keys, tasks, horizon, invalid actions (on the embedded world)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

from milegpo.envs.anchors import anchor_text
from milegpo.envs import NOTHING_HAPPENS, SINK, EnvError, HouseholdEnv, Task, canonical_state, household_tasks, state_key
from milegpo.envs import base as envbase
from milegpo.envs import success_by_task_type


def test_sink_is_the_credit_modules_sink():
    from milegpo.credit.batch import SINK as CREDIT_SINK

    assert SINK == CREDIT_SINK == (1 << 63) - 1


def test_state_key_is_signed_blake2b_of_canonical_text():
    text = "You arrive at  countertop 1.\n On the countertop 1, you see nothing. "
    assert canonical_state(text) == "You arrive at countertop 1. On the countertop 1, you see nothing."
    want = int.from_bytes(hashlib.blake2b(canonical_state(text).encode(), digest_size=8).digest(), "little", signed=True)
    assert state_key(text) == want
    assert state_key(text) == state_key(canonical_state(text))
    assert state_key("a") != state_key("b")
    keys = [state_key(f"obs {i}") for i in range(2000)]
    assert all(-(1 << 63) <= k < SINK for k in keys)
    assert any(k < 0 for k in keys) and any(k > 0 for k in keys)


def test_state_key_is_stable_across_processes():
    texts = ["Nothing happens.", "You pick up the apple 1 from the countertop 1.", "ünïcode ✓"]
    code = "from milegpo.envs import state_key; import sys; print([state_key(t) for t in sys.argv[1:]])"
    env = dict(os.environ, PYTHONHASHSEED="123")  # Python's own hash() would differ; ours must not
    out = subprocess.run([sys.executable, "-c", code, *texts], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == str([state_key(t) for t in texts])


def test_state_key_never_returns_sink(monkeypatch):
    class FakeDigest:
        def digest(self):
            return SINK.to_bytes(8, "little", signed=True)

    monkeypatch.setattr(envbase.hashlib, "blake2b", lambda *a, **k: FakeDigest())
    assert envbase.state_key("anything") == SINK - 1


def test_importing_envs_does_not_import_torch():
    code = "import sys, milegpo.envs, milegpo.envs.pool; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_reset_info_and_state_keys():
    env = HouseholdEnv()
    task = household_tasks("train", 1)[0]
    obs, actions, info = env.reset(task)
    # the default anchor (tracked+actions) keys the observation with the tracker's context and the actions
    assert info["state_key"] == state_key(info["state_text"]) and info["state_text"] != obs
    assert info["state_context"] == "Location: middle of a room. Items in hand (status): nothing."
    env.set_state_anchor("observation")  # the key of runs before anchors
    assert env.reset(task)[2]["state_key"] == state_key(obs)
    assert info["admissible_actions"] == actions and actions
    assert info["step"] == 0 and not info["invalid"] and not info["truncated"] and not info["won"]
    assert info["goal"] and info["goal"] in obs
    assert info["task"]["task_id"] == task.task_id
    assert "help" not in actions


def test_invalid_action_answers_nothing_happens_and_changes_nothing():
    env = HouseholdEnv()
    obs0, actions0, _ = env.reset(household_tasks("train", 1, start=5)[0])
    obs, reward, terminated, truncated, info = env.step("dance with the fridge")
    assert obs == NOTHING_HAPPENS and reward == 0.0 and not terminated and not truncated and not info["won"]
    assert info["invalid"] is True and info["step"] == 1
    assert info["admissible_actions"] == actions0
    assert info["state_key"] == state_key(anchor_text("tracked+actions", NOTHING_HAPPENS, info["state_context"],
                                                      actions0))
    # a valid action afterwards is not invalid
    _, _, _, _, info = env.step(actions0[0])
    assert info["invalid"] is False


def test_horizon_truncates_not_terminates():
    env = HouseholdEnv()
    task = Task("h3", env="household", seed=0, split="train", horizon=3)
    env.reset(task)
    outs = [env.step("look") for _ in range(3)]
    assert [o[3] for o in outs] == [False, False, True] and not any(o[2] for o in outs)
    obs, reward, terminated, truncated, info = outs[-1]
    assert env.done and not env.won and not info["won"] and reward == 0.0 and info["truncated"] and info["step"] == 3
    with pytest.raises(EnvError, match="is done"):
        env.step("look")


def test_a_win_on_the_last_allowed_step_is_a_win_not_a_truncation():
    env = HouseholdEnv()
    task = household_tasks("train", 1, start=2)[0]
    walk = env.walkthrough(task)
    env.reset(Task(task.task_id, seed=task.seed, split=task.split, horizon=len(walk)))
    for a in walk:
        obs, reward, terminated, truncated, info = env.step(a)
    assert terminated and not truncated and info["won"] and reward == 10.0 and not info["truncated"]


def test_task_checks():
    with pytest.raises(ValueError, match="horizon"):
        HouseholdEnv().reset(Task("bad", seed=0, horizon=0))
    with pytest.raises(EnvError, match="no seed"):
        HouseholdEnv().reset(Task("noseed"))
    with pytest.raises(EnvError, match="before reset"):
        HouseholdEnv().step("look")
    t = Task("x", options=(("a", 1),))
    assert t.option("a") == 1 and t.option("b", 7) == 7 and hash(t) == hash(Task("x", options=(("a", 1),)))


def test_success_by_task_type():
    got = success_by_task_type(["a", "b", "a", "a"], [True, False, False, True])
    assert got == {"a": 2 / 3, "b": 0.0, "all": 0.5}
    with pytest.raises(ValueError):
        success_by_task_type(["a"], [])


# ---------------------------------------------------------------- bad input refused where it enters (issue 20)
@pytest.mark.parametrize("action", [None, 3, ["look"], b"look"])
def test_an_action_is_a_string(action):
    env = HouseholdEnv()
    env.reset(household_tasks("train", 1)[0])
    with pytest.raises(TypeError, match=rf"HouseholdEnv.step: an action is a str \(one of info\['admissible_actions'\] "
                                        rf"or any text\), got {type(action).__name__}"):
        env.step(action)
    assert env.steps == 0 and not env.done  # nothing was played
    env.step("look")  # the episode goes on


def test_every_world_checks_its_actions_in_the_base_class():
    from milegpo.envs import BUILT_IN_KINDS, TextEnv, env_class

    # the check lives in TextEnv.step: no world replaces it (WebShop reads its actions through read_action)
    for kind in BUILT_IN_KINDS:
        assert env_class(kind).step is TextEnv.step, kind


def test_state_key_takes_any_str():
    lone = ["a\ud800b", "\udfff", "x\udc80y", "\ud83d"]  # lone surrogates (e.g. bytes decoded with surrogateescape)
    keys = [state_key(text) for text in lone]
    assert len(set(keys)) == len(keys) and all(-(2**63) <= k < SINK for k in keys)
    # stable across processes (no PYTHONHASHSEED dependence), as for every other text
    code = "from milegpo.envs import state_key; print([state_key(t) for t in %r])" % (lone,)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "123"})
    assert out.stdout.strip() == str(keys)
    # text without surrogates keeps its key (surrogatepass changes nothing there)
    text = "Ünïcödé 🍎 obs"
    assert state_key(text) == int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little",
                                             signed=True)
    with pytest.raises(TypeError, match="state_key: an observation is a str, got NoneType"):
        state_key(None)


# ---------------------------------------------------------------- milestones (issue 47)
class _Steps(envbase.TextEnv):
    """Walk three steps; the world reports ``milestone`` as the task's option ``says`` maps the step count."""

    def _reset(self, task):
        self.pos = 0
        return "start", ["walk"], {"goal": "walk"}

    def _step(self, action):
        self.pos += 1
        says = dict(self.task.option("says", ()))
        info = {"milestone": says[self.pos]} if self.pos in says else {}
        return f"at {self.pos}", 0.0, self.pos >= 3, ["walk"], info


def test_info_milestone_is_the_worlds_and_false_where_it_says_nothing():
    import numpy as np

    env = _Steps()
    _, _, info = env.reset(Task("steps/0", options=(("says", ((1, True), (2, np.bool_(False)))),)))
    assert info["milestone"] is False
    assert [env.step("walk")[4]["milestone"] for _ in range(3)] == [True, False, False]
    for bad, shown in (("yes", "str 'yes'"), (1, "int 1"), (None, "NoneType None")):
        env.reset(Task("steps/1", options=(("says", ((1, bad),)),)))
        with pytest.raises(TypeError, match=rf"_Steps: step 1 of task 'steps/1' returned info\['milestone'\] = "
                                            rf"{shown}, expected a bool"):
            env.step("walk")
