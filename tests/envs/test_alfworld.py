"""ALFWorld through its own engine, on games written offline by milegpo.envs.alfworld.generate.

Needs the alfworld extra. Engine tests are slow (a game loads in 1-6 s, steps take 50-350 ms).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

pytest.importorskip("alfworld")
pytest.importorskip("textworld")

from milegpo.envs import EnvError, NOTHING_HAPPENS, state_key, success_by_task_type  # noqa: E402
from milegpo.envs.alfworld import AlfworldEnv, alfworld_tasks, generate  # noqa: E402
from milegpo.envs.alfworld.generator import mangle, scenes  # noqa: E402


def test_mangle_is_alfreds():
    assert mangle("Apple|+01.20|-00.50") == "Apple_bar__plus_01_dot_20_bar__minus_00_dot_50"


def test_scene_splits_follow_alfred():
    train, unseen = set(scenes("train")), set(scenes("valid_unseen"))
    assert train == set(scenes("valid_seen")) and not train & unseen
    assert len(train) == 96 and len(unseen) == 24
    with pytest.raises(ValueError):
        scenes("test")


def test_missing_data_is_a_clear_error(tmp_path):
    with pytest.raises(EnvError, match="no ALFWorld games"):
        alfworld_tasks("train", data_dir=tmp_path)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("alfworld")
    generate(root, 1, seed=0, split="train", task_types=["pick_and_place_simple"])
    generate(root, 1, seed=0, split="valid_unseen", task_types=["pick_and_place_simple", "look_at_obj_in_light"])
    return root


@pytest.mark.slow
def test_generated_games_have_the_official_layout(data):
    games = sorted(data.glob("json_2.1.1/*/*/*/game.tw-pddl"))
    assert [g.parts[-4] for g in games] == ["train", "valid_unseen"]
    for g in games:
        assert {p.name for p in g.parent.iterdir()} == {"game.tw-pddl", "traj_data.json", "initial_state.pddl"}
        game, traj = json.loads(g.read_text()), json.loads((g.parent / "traj_data.json").read_text())
        assert game["solvable"] is True and game["walkthrough"] and "UNKNOWN GOAL" not in game["grammar"]
        assert g.parent.parent.name.startswith(traj["task_type"] + "-")
        assert "_bar_" in game["pddl_problem"]
        split_scenes = scenes(g.parts[-4])
        assert traj["scene"]["scene_num"] in split_scenes


@pytest.mark.slow
def test_walkthrough_wins_with_reward_10_and_no_help(data):
    env = AlfworldEnv()
    tasks = alfworld_tasks("train", data_dir=data) + alfworld_tasks("ood", data_dir=data)
    assert [t.split for t in tasks] == ["train", "ood"] and all(t.horizon == 50 for t in tasks)
    won, types = [], []
    for task in tasks:
        obs, actions, info = env.reset(task)
        assert obs.startswith("-= Welcome to TextWorld, ALFRED! =-") and "help" not in actions
        assert info["state_key"] == state_key(info["state_text"]) and info["goal"] and info["task_type"] == task.task_type
        while not env.done:
            obs, r, terminated, truncated, info = env.step(env.expert_action())
            assert "help" not in info["admissible_actions"]
        won_ = info["won"]
        assert won_ and terminated and r == 10.0
        won.append(won_)
        types.append(info.get("task_type", task.task_type))
    assert success_by_task_type([t.task_type for t in tasks], won)["all"] == 1.0


@pytest.mark.slow
def test_invalid_action_horizon_and_handcoded_expert(data):
    env = AlfworldEnv()
    task = dataclasses.replace(alfworld_tasks("train", data_dir=data)[0], horizon=2)
    env.reset(task)
    obs, r, terminated, truncated, info = env.step("fly to the moon")
    assert obs == NOTHING_HAPPENS and info["invalid"] and not (terminated or truncated)
    obs, r, terminated, truncated, info = env.step("look")
    assert truncated and not terminated and not info["won"] and info["truncated"] and r == 0.0
    # the handcoded expert re-plans after a detour (the walkthrough cannot)
    task = dataclasses.replace(task, horizon=50, options=(("expert", True),))
    _, actions, _ = env.reset(task)
    env.step(next(a for a in actions if a.startswith("go to ")))
    while not env.done:
        env.step(env.expert_action())
    assert env.won


@pytest.mark.slow
def test_steps_to_win_is_the_length_of_alfworlds_pddl_plan(data):
    env = AlfworldEnv()
    task = alfworld_tasks("train", data_dir=data)[0]
    _, _, info = env.reset(task)
    start = env.steps_to_win()
    assert 1 <= start <= len(info["walkthrough"])
    counts = [start]
    for action in info["walkthrough"]:  # the generator's walkthrough explores: some steps lower nothing
        env.step(action)
        counts.append(env.steps_to_win())
        if env.done:
            break
    assert env.won and counts[-1] == 0 and all(a - b in (0, 1) for a, b in zip(counts, counts[1:]))


@pytest.mark.slow
def test_alfworlds_own_loader_accepts_the_games(data):
    from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv

    cfg = {"env": {"goal_desc_human_anns_prob": 0, "task_types": [1, 2, 3, 4, 5, 6], "domain_randomization": False,
                   "expert_type": "handcoded"},
           "dataset": {"data_path": str(data / "json_2.1.1/train"),
                       "eval_id_data_path": str(data / "json_2.1.1/valid_seen"),
                       "eval_ood_data_path": str(data / "json_2.1.1/valid_unseen"),
                       "num_train_games": -1, "num_eval_games": -1},
           "general": {"training_method": "dagger"}, "dagger": {"training": {"max_nb_steps_per_episode": 50}}}
    tw = AlfredTWEnv(cfg, train_eval="eval_out_of_distribution")
    assert len(tw.game_files) == 1
    env = tw.init_env(batch_size=1)
    try:
        obs, infos = env.reset()
        assert obs[0].startswith("-= Welcome to TextWorld, ALFRED! =-")
        obs, _, dones, infos = env.step(["look"])
        assert not dones[0]
    finally:
        env.close()


@pytest.mark.slow
def test_task_listing_options_and_a_pool_group(data, monkeypatch):
    from milegpo.envs.pool import EnvPool

    monkeypatch.setenv("ALFWORLD_DATA", str(data))
    # the signature the rollout's make_tasks uses: fn(split, n, start=, task_type=, horizon=)
    assert len(alfworld_tasks("ood", 5, start=0, horizon=30)) == 1
    assert alfworld_tasks("ood", 5, start=1) == []
    assert alfworld_tasks("train", 5, task_type="look_at_obj_in_light") == []
    task = alfworld_tasks("train", 1)[0]
    assert task.horizon == 50 and task.task_type == "pick_and_place_simple"
    with EnvPool(2, num_workers=2, step_timeout=120, reset_timeout=300) as pool:
        first = pool.reset_group(task)
        assert first[0][0] == first[1][0] and first[0][2]["game_id"] == first[1][2]["game_id"]
        for a in first[0][2]["walkthrough"]:
            outs = pool.step([a, a])
        assert all(o.won and o.reward == 10.0 for o in outs)


@pytest.mark.slow
def test_episodes_are_the_same_with_and_without_workers_and_overlap(data):
    from tests.rollout.scripted import play

    tasks = alfworld_tasks("train", data_dir=data) + alfworld_tasks("ood", data_dir=data)
    settings = [("sequential", False), ("workers-2", True), ("workers-1", False)]
    ref = play(settings, tasks, 2, 4, horizon=3, timeout=300)
    assert len(ref.episodes) == 4 and len(ref.rows) == 12
    assert len({r.state for r in ref.rows}) > 2 and any(r.invalid for r in ref.rows)


@pytest.fixture(scope="module")
def processing_games(tmp_path_factory):
    root = tmp_path_factory.mktemp("alfworld_processing")
    generate(root, 1, seed=1, split="train", task_types=["pick_heat_then_place_in_recep", "pick_clean_then_place_in_recep"])
    return alfworld_tasks("train", data_dir=root)


@pytest.mark.slow
def test_the_household_tracker_follows_real_alfworld_episodes(processing_games):
    """State anchors (issue 31) on ALFWorld's own engine: the expert's take / heat or clean / put, then a
    garbage action and an inadmissible one ("Nothing happens."), as the tracker's context line shows them."""
    env = AlfworldEnv()
    for task in processing_games:
        obs, _, info = env.reset(task)
        assert info["state_context"] == "Location: middle of a room. Items in hand (status): nothing."
        verb = "heated" if "heat" in task.task_type else "cleaned"
        held = None
        while not env.done:
            action = env.expert_action()
            obs, _, _, _, info = env.step(action)
            won = info["won"]
            context = info["state_context"]
            if action.startswith("take ") and "pick up" in obs:
                held = action[len("take "):].split(" from ")[0]
                assert f"Items in hand (status): {held}(unprocessed)." in context
            if action.startswith(("heat ", "clean ")):
                assert f"Items in hand (status): {held}({verb})." in context
            if action.startswith(("move ", "put ")) and held and held in action:
                assert "Items in hand (status): nothing." in context and f"{held}({verb}) from " in context
            if action.startswith("go to "):
                assert context.startswith(f"Location: {action[len('go to '):]}.")
        assert won and info["state_key"] == state_key(info["state_text"])
        # after the episode: a fresh one, a garbage action and an impossible one leave the context as it was
        obs, _, info = env.reset(task)
        for action in ("<think>xyzzy</think>", "take the moon from the sky", "heat nothing with everything"):
            out = env.step(action)
            assert out[0] == NOTHING_HAPPENS and out[4]["state_context"] == info["state_context"]


@pytest.mark.slow
def test_alfworld_milestones_are_the_household_subgoals(processing_games, tmp_path):
    """Issue 47: on ALFWorld's own engine the expert passes the four subgoals of a heat / clean task (found,
    took, processed, placed = the win) each once; a game without traj_data.json has no milestones."""
    import shutil

    from milegpo.envs.alfworld import task_goal

    env = AlfworldEnv()
    for task in processing_games:
        env.reset(task)
        steps = []
        while not env.done:
            action = env.expert_action()
            if env.step(action)[4]["milestone"]:
                steps.append(action)
        assert env.won and len(steps) == 4, steps
        assert [a.split(" ")[0] for a in steps[1:]] == ["take", task.task_type.split("_")[1], "move"], steps
    assert task_goal({"task_type": "pick_two_obj_and_place", "pddl_params": {"object_target": "CD",
                                                                             "parent_target": "Safe"}}) is not None
    assert task_goal({"task_type": "pick_and_place_with_movable_recep"}) is None
    bare = tmp_path / "bare"
    shutil.copytree(Path(processing_games[0].game_file).parent, bare)
    (bare / "traj_data.json").unlink()
    env = AlfworldEnv()
    env.reset(dataclasses.replace(processing_games[0], game_file=str(bare / "game.tw-pddl")))
    while not env.done:
        assert env.step(env.expert_action())[4]["milestone"] is False
