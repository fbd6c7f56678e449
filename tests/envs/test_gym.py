"""gymnasium text environments through the registry and the rollout loop, with no wrapper written by the user."""

import random
import re
import time

import pytest

gymnasium = pytest.importorskip("gymnasium")

from milegpo.credit import SINK  # noqa: E402
from milegpo.envs import EnvError, EnvPool, SequentialPool, get_kind, make_env, register, unregister  # noqa: E402
from milegpo.envs.base import EnvFailure  # noqa: E402
from milegpo.envs.gym import GymTextEnv  # noqa: E402
from milegpo.job.console import iteration_line  # noqa: E402
from milegpo.rollout import EpisodeRunner, make_tasks  # noqa: E402
from milegpo.rollout.loop import episode_metrics  # noqa: E402
from milegpo.usage import RunError  # noqa: E402

from .text_games import FreeKeyDoor, KeyDoor, key_door_expert  # noqa: E402

GAMES = "tests.envs.text_games"


@pytest.fixture
def kinds():
    """Kinds registered by a test are forgotten after it."""
    made = []

    def add(kind, env, **kw):
        made.append(kind)
        return register(kind, env, **kw)

    yield add
    for kind in made:
        unregister(kind)


def scripted_policy(p_expert=0.8, seed=0):
    """Reads the compact prompt (observation, context line, actions): the expert's action with probability
    p_expert, else a random listed action or an unknown one."""
    rng = random.Random(seed)

    def generate(prompts):
        texts = []
        for prompt in prompts:
            now = prompt.split("Now: ", 1)[1].split("\nActions:", 1)[0]
            listed = [a for a in prompt.rsplit("Actions: ", 1)[1].split(", ") if a]
            action = key_door_expert(now.splitlines()[0], "holding: key" in now)
            if rng.random() > p_expert:
                action = rng.choice(listed + ["dance"]) if listed else rng.choice(["go left", "dance", "go back"])
            texts.append(f"<think>ok</think><action>{action}</action>")
        return [[1, 2]] * len(prompts), [[3, 4]] * len(prompts), None, texts

    return generate


def _play(kind, pool, n_tasks=4, group_size=4, horizon=8, **runner_options):
    tasks = make_tasks(kind, "train", n_tasks, horizon=horizon)
    runner = EpisodeRunner(pool, history_length=1, prompt_style="compact", show_state_context=True,
                           **runner_options)
    try:
        return runner.run(tasks, group_size, scripted_policy())
    finally:
        pool.close()


@pytest.mark.parametrize("pool", ["sequential", "workers"])
def test_a_gymnasium_class_trains_through_the_rollout_loop(kinds, pool):
    kinds("keydoor", KeyDoor)
    out = _play("keydoor", SequentialPool(16) if pool == "sequential" else EnvPool(16, 2))
    batch = out.step_batch()  # validates: t = 0..T-1, next_state chain, SINK on wins
    arr = out.step_arrays()
    assert batch is not None and len(out.episodes) == 16
    assert any(e.won for e in out.episodes) and not all(e.won for e in out.episodes)
    for e in out.episodes:
        rows = [r for r in out.rows if r.traj == e.traj]
        assert (rows[-1].next_state == SINK) == e.won and all(r.success == e.won for r in rows)
    assert arr["invalid"].any()  # "dance" is not admissible
    # the default anchor keys the observation, the env's context line and the admissible actions: the hall
    # before and after taking the key are two states, though the observation is the same
    hall = {r.state for r in out.rows if r.t == 0}
    assert len(hall) == 1
    assert len({r.state for r in out.rows}) > 4


def test_free_text_actions_and_the_envs_own_invalid_flag(kinds):
    kinds("free-keydoor", FreeKeyDoor)
    out = _play("free-keydoor", SequentialPool(16))
    out.step_batch()
    rows = out.rows
    assert any(e.won for e in out.episodes)
    assert {r.invalid for r in rows if r.action == "dance"} == {True}
    assert {r.invalid for r in rows if r.action == "go left" and r.t == 0} == {False}  # in the hall: valid


def test_a_dotted_path_and_a_gymnasium_id_are_kinds():
    kind = f"{GAMES}:KeyDoor"
    assert get_kind(kind).origin == "dotted path"
    out = _play(kind, EnvPool(8, 2), n_tasks=2)  # the workers find the class by the path the task carries
    assert out.step_batch() is not None and all(t.env == kind for t in {e.task for e in out.episodes})
    gymnasium.register(id="KeyDoorTest-v0", entry_point=f"{GAMES}:KeyDoor", disable_env_checker=True)
    env = make_env("gym:KeyDoorTest-v0")
    obs, actions, info = env.reset(make_tasks("gym:KeyDoorTest-v0", "train", 1)[0])
    assert isinstance(env, GymTextEnv) and actions == ["go left", "go right", "look"] and info["goal"]
    with pytest.raises(EnvError, match="'Nowhere-v9' is not a registered gymnasium id"):
        get_kind("gym:Nowhere-v9")


def test_a_gymnasium_id_registered_in_this_process_plays_in_pool_workers():
    """Issue 48.3: the workers got the id, not what gymnasium needs to make it (NameNotFound in every worker)."""
    if "KeyDoorWorkers-v0" not in gymnasium.registry:
        gymnasium.register(id="KeyDoorWorkers-v0", entry_point=KeyDoor, disable_env_checker=True)  # a class, not a path
    kind = "gym:KeyDoorWorkers-v0"
    out = _play(kind, EnvPool(8, 2), n_tasks=2)
    assert out.step_batch() is not None and not any(e.error for e in out.episodes)
    assert any(e.won for e in out.episodes)
    local = _play(kind, SequentialPool(8), n_tasks=2)
    assert out.step_arrays()["state"].tolist() == local.step_arrays()["state"].tolist()


def test_gymnasiums_module_colon_id_form_imports_the_module_first():
    """``gym:<module>:<id>``, as gymnasium.make takes it: a command line cannot import the user's module itself."""
    kind = "gym:tests.envs.gym_registered:KeyDoorRegistered-v0"
    spec = get_kind(kind)
    assert spec.origin == "gymnasium id 'tests.envs.gym_registered:KeyDoorRegistered-v0'"
    out = _play(kind, EnvPool(8, 2), n_tasks=2)
    assert out.step_batch() is not None and not any(e.error for e in out.episodes)
    with pytest.raises(EnvError, match=r"environment kind 'gym:tests.envs.nowhere:X-v0': 'X-v0' is not a registered "
                                       r"gymnasium id \(ModuleNotFoundError: No module named 'tests.envs.nowhere'"):
        get_kind("gym:tests.envs.nowhere:X-v0")
    with pytest.raises(EnvError, match=r"'Nope-v0' is not a registered gymnasium id .*the module "
                                       r"'tests.envs.gym_registered' did not register it"):
        get_kind("gym:tests.envs.gym_registered:Nope-v0")


def test_steps_map_to_gymnasiums_tuple():
    env = GymTextEnv(KeyDoor)
    task = make_tasks(f"{GAMES}:KeyDoor", "train", 1, horizon=3)[0]
    env.reset(task)
    obs, reward, terminated, truncated, info = env.step("break door" if "break door" in env.admissible else "go left")
    assert not terminated and not truncated
    env.step("look")
    obs, reward, terminated, truncated, info = env.step("look")
    assert truncated and not terminated and not info["won"]  # the task's horizon
    # a termination without reward is a loss: break the door of the room without the key
    for task in make_tasks(f"{GAMES}:KeyDoor", "train", 8, horizon=3):
        env.reset(task)
        if "break door" in env.step("go left")[4]["admissible_actions"]:
            break
    else:
        raise AssertionError("no game of 8 has the door on the left")
    out = env.step("break door")
    assert out[2] and not out[3] and out[4]["lost"] and not out[4]["won"] and out[1] == 0.0


def test_the_envs_own_planner_is_asked_for_steps_to_win():
    env = GymTextEnv(KeyDoor)
    for task in make_tasks(f"{GAMES}:KeyDoor", "train", 8):  # a game with the key on the left (the expert's guess)
        env.reset(task)
        if env.env.key_room == "left":
            break
    counts = [env.steps_to_win()]
    while not env.done:
        env.step(key_door_expert(env.last_obs, "holding: key" in env.tracker.context()))
        counts.append(env.steps_to_win())
    assert env.won and counts == list(range(counts[0], -1, -1)) and counts[0] == 5


@pytest.mark.parametrize("game, message", [
    ("NumericObs", r"NumericObs.reset returned a ndarray observation, expected str"),
])
def test_bad_resets_fail_at_the_reset(game, message):
    env = GymTextEnv(getattr(__import__(GAMES, fromlist=[game]), game))
    with pytest.raises(TypeError, match=message):
        env.reset(make_tasks(f"{GAMES}:KeyDoor", "train", 1)[0])
    pool = SequentialPool(2)
    with pytest.raises(EnvError, match=message):
        pool.reset(make_tasks(f"{GAMES}:{game}", "train", 2))


@pytest.mark.parametrize("game, why", [
    ("RaisesOnStep", r"raised RuntimeError: the right room caught fire \(at text_games.py:\d+ in step\)"),
    ("OldGymStep", r"raised TypeError: OldGymStep.step returned a 4-tuple, expected gymnasium 1.x's"),
    ("NaNReward", r"raised TypeError: NaNReward.step returned reward nan, expected a finite number"),
])
def test_a_step_that_fails_ends_its_episode_in_the_pool_with_one_line(game, why):
    kind = f"{GAMES}:{game}"
    for pool in (SequentialPool(2), EnvPool(2, 2)):  # the line is made where the step ran: it crosses processes
        with pool:
            pool.reset(make_tasks(kind, "train", 1) * 2)
            outs = pool.step({0: "go right", 1: "look"})
        named = rf"^environment '{kind}': step 1 of task '{kind}/train/0' {why}"
        failed = outs if game != "RaisesOnStep" else outs[:1]  # the others fail at every step
        for o in failed:
            assert o.truncated and not o.won and "\n" not in o.info["error"]
            assert re.search(named, o.info["error"]) and "Traceback" in o.info["traceback"]
        if game == "RaisesOnStep":
            assert not outs[1].done


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("game, why", [
    ("RaisesOnStep", "raised RuntimeError: the right room caught fire"),
    ("OldGymStep", "raised TypeError: OldGymStep.step returned a 4-tuple"),
    ("NaNReward", "raised TypeError: NaNReward.step returned reward nan"),
])
def test_an_environment_that_fails_stops_the_run_in_one_line(game, why, workers):
    """Issue 48.1: every episode ended after one step, advantages all zero, and the run went on silently."""
    kind = f"{GAMES}:{game}"
    pool = EnvPool(8, workers) if workers else SequentialPool(8)
    with pytest.raises(EnvFailure) as failure:
        _play(kind, pool, n_tasks=2)
    line = str(failure.value)
    assert "\n" not in line and line.startswith(f"environment '{kind}': step ") and why in line
    assert "env_errors='skip'" in line and "Traceback" in failure.value.details
    assert isinstance(failure.value, RunError)  # milegpo prints it in one line and exits 1


@pytest.mark.parametrize("workers", [0, 2])
def test_env_errors_skip_plays_on_and_counts_the_failed_episodes(workers):
    kind = f"{GAMES}:RaisesOnStep"
    pool = EnvPool(8, workers) if workers else SequentialPool(8)
    out = _play(kind, pool, n_tasks=2, env_errors="skip")
    failed = [e for e in out.episodes if e.error]
    assert out.step_batch() is not None and failed and all(e.truncated and not e.won for e in failed)
    assert all("raised RuntimeError: the right room caught fire" in e.error for e in failed)
    metrics = episode_metrics(out.episode_summaries(), prefix="episode/")
    assert metrics["episode/env_errors"] == len(failed) > 0
    assert "env errors" in iteration_line(metrics, 1, 2)
    clean = _play(f"{GAMES}:KeyDoor", SequentialPool(8), n_tasks=2)
    metrics = episode_metrics(clean.episode_summaries(), prefix="episode/")
    assert metrics["episode/env_errors"] == 0 and "env errors" not in iteration_line(metrics, 1, 2)
    with pytest.raises(ValueError, match="env_errors must be one of 'raise', 'skip', got 'ignore'"):
        EpisodeRunner(SequentialPool(1), env_errors="ignore")


def test_an_error_key_of_the_environments_own_info_is_no_failure():
    out = _play(f"{GAMES}:ReportsErrors", SequentialPool(8), n_tasks=2)
    assert not any(e.error for e in out.episodes) and any(e.won for e in out.episodes)


def test_a_step_that_hangs_times_out_in_a_worker_and_stops_the_run():
    """A gymnasium step that never returns: the worker is killed after the step timeout, and the run stops."""
    kind = f"{GAMES}:HangsOnStep"
    runner = EpisodeRunner(None, history_length=1, prompt_style="compact", num_env_workers=2, env_step_timeout=1.0)
    start = time.monotonic()
    try:
        with pytest.raises(EnvFailure, match=rf"environment '{kind}': step \d of task '{kind}/train/\d+': worker \d "
                                             r"\(pid \d+\) timed out after \d s in step"):
            runner.run(make_tasks(kind, "train", 2, horizon=6), 2, scripted_policy())
    finally:
        runner.close()
    assert isinstance(runner.pool, EnvPool) and time.monotonic() - start < 60


def test_a_text_env_subclass_that_returns_a_bad_step_is_named():
    """The base class checks what a TextEnv's own _step returns (a NaN reward was kept as a reward)."""
    from .text_games import NaNCorridor, ShortStepCorridor

    task = make_tasks(f"{GAMES}:Corridor", "train", 1)[0]
    for cls, message in ((NaNCorridor, "NaNCorridor._step returned reward nan, expected a finite number"),
                         (ShortStepCorridor, r"ShortStepCorridor._step returned a 4-tuple, expected \(observation, "
                                             r"reward, won, admissible actions, info\)")):
        env = cls()
        env.reset(task)
        with pytest.raises(TypeError, match=message):
            env.step("walk right")
    kind = f"{GAMES}:NaNCorridor"
    with pytest.raises(EnvFailure, match=rf"environment '{kind}': step 1 of task .* raised TypeError: NaNCorridor._step "
                                         "returned reward nan"):
        _play(kind, EnvPool(4, 2), n_tasks=1)


def test_bad_classes_are_refused_at_the_door():
    from .text_games import NotAnEnv

    with pytest.raises(EnvError, match=r"environment kind 'x': NotAnEnv is neither a milegpo.envs.TextEnv subclass "
                                       r"nor a gymnasium Env class \(it has no step\)"):
        register("x", NotAnEnv)
    with pytest.raises(EnvError, match="is neither"):
        get_kind(f"{GAMES}:key_door_expert")


class _MilestoneKeyDoor(KeyDoor):
    """Taking the key is the subgoal it reports (``info["milestone"]``)."""

    says = True

    def step(self, action):
        took = action == "take key" and action in self._actions()
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {**info, "milestone": self.says if took else False}


class _TextMilestoneKeyDoor(_MilestoneKeyDoor):
    says = "true"


def test_info_milestone_passes_through_to_the_rows(kinds):
    kinds("milestone-keydoor", _MilestoneKeyDoor)
    out = _play("milestone-keydoor", SequentialPool(8))
    rows = out.rows
    assert {r.milestone for r in rows if r.action == "take key" and not r.invalid} == {True}
    assert not any(r.milestone for r in rows if r.action != "take key")
    assert out.step_batch().milestone.sum() == sum(r.milestone for r in rows) > 0
    env = GymTextEnv(_TextMilestoneKeyDoor)
    for task in make_tasks(f"{GAMES}:KeyDoor", "train", 8):
        env.reset(task)
        if env.env.key_room == "left":
            break
    env.step("go left")
    with pytest.raises(TypeError, match=r"_TextMilestoneKeyDoor.step returned info\['milestone'\] = str 'true', "
                                        r"expected a bool"):
        env.step("take key")
