"""State anchors (issue 31): the trackers, the key serialisation, the hook in TextEnv and in pool workers."""

from __future__ import annotations

import hashlib
import random

import pytest

from milegpo.envs import NOTHING_HAPPENS, HouseholdEnv, household_tasks, state_key
from milegpo.envs.anchors import (AnchorError, ANCHOR_VERSION, DEFAULT_STATE_ANCHOR, STATE_ANCHORS, StateTracker, anchor_text,
                                  resolve_state_anchor, serialise)
from milegpo.envs.household.tracker import HouseholdTracker
from milegpo.envs.pool import EnvPool, SequentialPool


def _tracker() -> HouseholdTracker:
    tracker = HouseholdTracker()
    tracker.reset("You are in the middle of a room.", {})
    return tracker


def _play(tracker, steps):
    for action, observation in steps:
        tracker.update(action, observation, False, {})
    return tracker.context()


# ------------------------------------------------------------------------------------------ the household tracker
def test_household_tracker_follows_take_process_and_put_as_graphgpos_wrapper():
    tracker = _tracker()
    assert tracker.context() == "Location: middle of a room. Items in hand (status): nothing."
    got = _play(tracker, [("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a apple 1."),
                          ("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1.")])
    assert got == "Location: countertop 1. Items in hand (status): apple 1(unprocessed)."
    got = _play(tracker, [("go to microwave 1", "You arrive at microwave 1. The microwave 1 is closed."),
                          ("heat apple 1 with microwave 1", "You heat the apple 1 using the microwave 1."),
                          ("cool apple 1 with fridge 1", "You cool the apple 1 using the fridge 1.")])
    assert got == "Location: microwave 1. Items in hand (status): apple 1(heated, cooled)."
    got = _play(tracker, [("go to diningtable 1", "You arrive at diningtable 1. On the diningtable 1, you see nothing."),
                          ("put apple 1 in/on diningtable 1", "You put the apple 1 in/on the diningtable 1.")])
    assert got == ("Location: diningtable 1. Items in hand (status): nothing. History moving list by you: "
                   "apple 1(heated, cooled) from countertop 1 move to diningtable 1.")
    # clean, then move (the household's verb), and slice (ALFWorld's: the knife in hand, the object not)
    got = _play(tracker, [("take mug 1 from diningtable 1", "You pick up the mug 1 from the diningtable 1."),
                          ("clean mug 1 with sinkbasin 1", "You clean the mug 1 using the sinkbasin 1."),
                          ("move mug 1 to shelf 1", "You move the mug 1 to the shelf 1."),
                          ("take knife 1 from shelf 1", "You pick up the knife 1 from the shelf 1."),
                          ("slice bread 1 with knife 1", "You slice the bread 1 with the knife 1.")])
    assert got == ("Location: diningtable 1. Items in hand (status): knife 1(unprocessed). History moving list by "
                   "you: apple 1(heated, cooled) from countertop 1 move to diningtable 1; mug 1(cleaned) from "
                   "diningtable 1 move to shelf 1; bread 1(sliced).")


@pytest.mark.parametrize("action, observation", [
    ("take apple 1 from countertop 1", NOTHING_HAPPENS),           # "Nothing happens" changes nothing
    ("go to fridge 1", "Nothing happens."),
    ("take mug 2 from countertop 1", "You pick up the mug 2 from the countertop 1."),  # take while holding
    ("put mug 3 in/on shelf 1", "You put the mug 3 in/on the shelf 1."),  # put what is not held
    ("go to the moon", "You arrive at loc 3."),                    # the observation does not mention the target
    ("heat apple 1 with microwave 1", "The microwave 1 is closed."),  # no verb in the observation
    ("dance wildly", "You dance."), ("", ""), ("take", "You pick up."), ("put apple 1", "?"),
    ("<think>go to</think> [[[", "\x00\ud800"), ("move  to ", "You move."),
])
def test_household_tracker_is_unchanged_by_what_did_not_happen(action, observation):
    tracker = _tracker()
    before = _play(tracker, [("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1.")])
    tracker.update(action, observation, True, {})
    assert tracker.context() == before


def test_household_tracker_never_raises_on_garbage():
    rng = random.Random(0)
    words = ["take", "put", "move", "go", "to", "from", "in/on", "with", "heat", "slice", "drop", "apple 1", "", " ",
             "[", "]", "\n", "Nothing", "happens", "\ud800", "🍎"]
    tracker = _tracker()
    for _ in range(2000):
        action = " ".join(rng.choice(words) for _ in range(rng.randint(0, 6)))
        observation = " ".join(rng.choice(words) for _ in range(rng.randint(0, 8)))
        tracker.update(action, observation, rng.random() < 0.5, {})
        assert isinstance(tracker.context(), str)


def test_hand_played_household_episode_keys_what_the_observation_hides():
    """Walking to the destination with and without the object: one observation, two states (the aliasing of
    notes/credit_quality.md), under the tracked anchors only."""
    task = household_tasks("train", 1, task_type="pick_and_place_simple")[0]
    env = HouseholdEnv()
    walk = env.walkthrough(task)
    destination = next(a for a in reversed(walk) if a.startswith("go to "))
    keys: dict[str, tuple[int, int]] = {}
    for anchor in STATE_ANCHORS:
        env.set_state_anchor(anchor)
        env.reset(task)
        empty = env.step(destination)  # empty-handed
        env.reset(task)
        for action in walk[:walk.index(destination) + 1]:
            carrying = env.step(action)
        assert empty[0] == carrying[0]  # the same text: "You arrive at ... On the ..., you see ..."
        keys[anchor] = (empty[4]["state_key"], carrying[4]["state_key"])
        if anchor.startswith("tracked"):
            assert "Items in hand (status): nothing." in empty[4]["state_context"]
            assert "Items in hand (status): nothing." not in carrying[4]["state_context"]
    assert keys["observation"][0] == keys["observation"][1]
    assert keys["tracked"][0] != keys["tracked"][1] and keys["tracked+actions"][0] != keys["tracked+actions"][1]
    assert len({k for pair in keys.values() for k in pair}) == 7  # no two anchors share a key


# ------------------------------------------------------------------------------------------ keys
def test_observation_anchor_is_the_old_key_bit_for_bit():
    task = household_tasks("train", 1, start=3)[0]
    env = HouseholdEnv()
    env.set_state_anchor("observation")
    obs, _, info = env.reset(task)
    seen = [(obs, info)]
    for action in env.walkthrough(task) + ["dance"]:
        if env.done:
            break
        obs, _, _, _, info = env.step(action)
        seen.append((obs, info))
    for obs, info in seen:
        old = int.from_bytes(hashlib.blake2b(" ".join(obs.split()).encode(), digest_size=8).digest(), "little",
                             signed=True)  # the key of the runs before anchors, written out
        assert info["state_key"] == old == state_key(obs) and info["state_text"] == obs


def test_serialisation_is_length_prefixed_sorted_and_versioned():
    assert serialise(["hello", "a  b\n"]) == "5:hello3:a b"
    text = anchor_text("tracked+actions", "You arrive.", "Location: x.", ["look", "go to a"])
    assert text == serialise([f"{ANCHOR_VERSION} tracked+actions", "You arrive.\nLocation: x.", "2", "go to a", "look"])
    assert state_key(text) == int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little",
                                             signed=True)  # the text is its own canonical form
    # no two different action lists serialise alike; the order of the list does not matter
    assert anchor_text("observation+actions", "o", "", ["a b", "c"]) != anchor_text("observation+actions", "o", "",
                                                                                    ["a", "b c"])
    assert anchor_text("observation+actions", "o", "", ["b", "a"]) == anchor_text("observation+actions", "o", "",
                                                                                  ["a", "b"])
    # the observation-only anchors ignore the context; the tracked ones without actions ignore the actions
    assert anchor_text("observation+actions", "o", "c1", ["a"]) == anchor_text("observation+actions", "o", "c2", ["a"])
    assert anchor_text("tracked", "o", "c", ["a"]) == anchor_text("tracked", "o", "c", ["b"])
    assert DEFAULT_STATE_ANCHOR == "tracked+actions"


def test_bad_anchors_are_refused_naming_the_built_in_ones():
    for bad in ("tracked+action", "obs", ""):
        with pytest.raises(ValueError, match="state_anchor must be one of observation, observation\\+actions, "
                                             "tracked, tracked\\+actions or a dotted path"):
            resolve_state_anchor(bad)
    with pytest.raises(ValueError, match="cannot import it"):
        resolve_state_anchor("no_such_module.anchor")
    with pytest.raises(ValueError, match="not a callable"):
        resolve_state_anchor("milegpo.envs.anchors:ANCHOR_VERSION")
    with pytest.raises(TypeError, match="state_anchor must be a str"):
        resolve_state_anchor(3)
    env = HouseholdEnv()
    env.set_state_anchor(lambda obs, context, actions: 7)
    with pytest.raises(AnchorError, match=r"returned a int \(7\), expected the str .* at the reset of task"):
        env.reset(household_tasks("train", 1)[0])


def upper_anchor(observation: str, context: str, admissible) -> str:
    """A user's anchor (module level: it travels to pool workers by reference)."""
    return observation.upper() + " | " + context


def test_a_user_anchor_by_callable_and_by_dotted_path():
    task = household_tasks("train", 1)[0]
    env = HouseholdEnv()
    for spec in (upper_anchor, f"{__name__}:upper_anchor", f"{__name__}.upper_anchor"):
        env.set_state_anchor(spec)
        obs, _, info = env.reset(task)
        assert info["state_text"] == upper_anchor(obs, info["state_context"], []) and info["state_key"] == state_key(
            info["state_text"])


def test_a_world_without_a_tracker_has_an_empty_context():
    tracker = StateTracker()
    tracker.reset("o", {})
    tracker.update("x", "y", False, {})
    assert tracker.context() == ""
    assert anchor_text("tracked", "o", "", []) != anchor_text("observation", "o", "", [])


# ------------------------------------------------------------------------------------------ pools
@pytest.mark.parametrize("anchor", ["observation", "tracked+actions", upper_anchor])
def test_pool_workers_key_states_as_the_env_in_process(anchor):
    tasks = household_tasks("train", 2, start=7)
    walks = [HouseholdEnv().walkthrough(t) for t in tasks]
    reference = []
    for task, walk in zip(tasks, walks):
        env = HouseholdEnv()
        env.set_state_anchor(anchor)
        infos = [env.reset(task)[2]] + [env.step(a)[4] for a in walk[:6] + ["garbage!"]]
        reference.append([(i["state_key"], i["state_text"], i["state_context"]) for i in infos])
    for pool in (SequentialPool(2), EnvPool(2, num_workers=2)):
        with pool:
            firsts = pool.reset(tasks, state_anchor=anchor)
            got = [[(i["state_key"], i["state_text"], i["state_context"])] for _, _, i in firsts]
            for t in range(7):
                outs = pool.step([(walk[:6] + ["garbage!"])[t] for walk in walks])
                for slot, out in enumerate(outs):
                    got[slot].append((out.info["state_key"], out.info["state_text"], out.info["state_context"]))
            assert got == reference, type(pool).__name__


def test_an_anchor_that_cannot_travel_to_workers_is_refused_at_the_reset():
    with EnvPool(2, num_workers=1) as pool:
        with pytest.raises(ValueError, match="cannot be sent to the pool's worker processes"):
            pool.reset(household_tasks("train", 1), state_anchor=lambda o, c, a: o)
        with pytest.raises(ValueError, match="state_anchor must be one of"):
            pool.reset(household_tasks("train", 1), state_anchor="tracked+action")
