"""The household world's milestones (issue 47): the subgoals of each task type, once each, the last the win."""

from __future__ import annotations

import pytest

from milegpo.envs import HouseholdEnv, household_tasks
from milegpo.envs.base import TASK_TYPES
from milegpo.envs.household.subgoals import SUBGOALS, HouseholdGoal, HouseholdSubgoals


def _play(env, task, actions):
    env.reset(task)
    return [env.step(a)[4]["milestone"] for a in actions]


@pytest.mark.parametrize("task_type", TASK_TYPES)
@pytest.mark.parametrize("expert", ["oracle", "search"])
def test_every_walkthrough_passes_each_subgoal_of_its_task_type_once(task_type, expert):
    """Both experts' walkthroughs of 12 games per task type: one milestone step per subgoal, the last on the
    winning step, and each where its subgoal is done (take -> taken, heat/clean/cool -> processed, move into
    the destination -> placed)."""
    env = HouseholdEnv()
    chain = SUBGOALS[task_type]
    for task in household_tasks("train", 12, task_type=task_type):
        actions = env.walkthrough(task, expert)
        flags = _play(env, task, actions)
        assert env.won and flags[-1] and sum(flags) == len(chain), (task.task_id, actions, flags)
        steps = [a for a, m in zip(actions, flags) if m]
        verbs = [a.split(" ")[0] for a in steps]
        if task_type == "pick_two_obj_and_place":
            assert verbs[-4:] == ["take", "move", "take", "move"], steps
        elif task_type == "look_at_obj_in_light":
            assert verbs[-2:] == ["take", "use"], steps
        elif "then_place" in task_type:
            assert verbs[-3:] == ["take", task_type.split("_")[1], "move"], steps
        else:
            assert verbs[-2:] == ["take", "move"], steps


def test_a_subgoal_undone_and_done_again_is_no_second_milestone():
    task = household_tasks("train", 1, task_type="pick_heat_then_place_in_recep")[0]
    env = HouseholdEnv()
    actions = env.walkthrough(task, "oracle")
    take = next(i for i, a in enumerate(actions) if a.startswith("take "))
    obj, where = actions[take][len("take "):].split(" from ")
    replay = actions[:take + 1] + [f"move {obj} to {where}", actions[take]] + actions[take + 1:]
    flags = _play(env, task, replay)
    assert env.won and sum(flags) == 4 and flags[take] and not flags[take + 1] and not flags[take + 2]
    # an inadmissible action and a look change nothing
    env.reset(task)
    assert not env.step("take the moon from the sky")[4]["milestone"] and not env.step("look")[4]["milestone"]


def test_found_is_the_first_observation_that_shows_the_object():
    subgoals = HouseholdSubgoals(HouseholdGoal("pick_and_place_simple", "apple", "fridge"))
    assert not subgoals.update("go to countertop 1", "On the countertop 1, you see a pineapple 1.", False)
    assert not subgoals.update("look", "Your task is to: put some apple in fridge.", False)
    assert subgoals.update("go to countertop 2", "On the countertop 2, you see a apple 1, and a mug 2.", False)
    assert not subgoals.update("go to countertop 1", "On the countertop 2, you see a apple 1.", False)
    assert subgoals.update("take apple 1 from countertop 2", "You pick up the apple 1 from the countertop 2.", False)
    assert not subgoals.update("move apple 1 to countertop 3", "You move the apple 1 to the countertop 3.", False)
    assert subgoals.progress(False) == 1  # put down elsewhere: found still holds, taken no more
    assert subgoals.update("move apple 1 to fridge 1", "You move the apple 1 to the fridge 1.", True)
    with pytest.raises(ValueError, match="task_type must be one of"):
        HouseholdGoal("pick_and_slice", "apple")
