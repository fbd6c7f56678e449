"""gymnasium text environments through the registry and the rollout loop, with no wrapper written by the user."""

import random

import pytest

gymnasium = pytest.importorskip("gymnasium")

from milegpo.credit import SINK  # noqa: E402
from milegpo.envs import EnvError, EnvPool, SequentialPool, get_kind, make_env, register, unregister  # noqa: E402
from milegpo.envs.gym import GymTextEnv  # noqa: E402
from milegpo.rollout import EpisodeRunner, make_tasks  # noqa: E402

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
    ("RaisesOnStep", "the right room caught fire"),
    ("OldGymStep", r"OldGymStep.step returned a 4-tuple, expected gymnasium 1.x's"),
])
def test_a_step_that_fails_ends_its_episode_truncated_and_the_run_goes_on(game, why):
    kind = f"{GAMES}:{game}"
    pool = SequentialPool(2)
    pool.reset(make_tasks(kind, "train", 1) * 2)
    outs = pool.step({0: "go right", 1: "look"})
    if game == "OldGymStep":  # every step returns the old shape
        assert all(o.truncated and not o.won and "returned a 4-tuple, expected gymnasium 1.x's" in o.info["error"]
                   for o in outs)
    else:
        assert outs[0].truncated and not outs[0].won and why in outs[0].info["error"]
        assert not outs[1].done
    out = _play(kind, EnvPool(8, 2), n_tasks=2)  # the rollout records truncated episodes and goes on
    assert out.step_batch() is not None and any(e.truncated and e.error for e in out.episodes)


def test_bad_classes_are_refused_at_the_door():
    from .text_games import NotAnEnv

    with pytest.raises(EnvError, match=r"environment kind 'x': NotAnEnv is neither a milegpo.envs.TextEnv subclass "
                                       r"nor a gymnasium Env class \(it has no step\)"):
        register("x", NotAnEnv)
    with pytest.raises(EnvError, match="is neither"):
        get_kind(f"{GAMES}:key_door_expert")
