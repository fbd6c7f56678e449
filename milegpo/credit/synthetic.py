"""Synthetic rollout batches for tests and benchmarks.

:func:`random_batch` walks a small random directed state graph per task group, the
way an agent wanders an ALFWorld room: every trajectory starts in the group's start
state, follows a "spine" towards the goal-ish states with some probability and a
random branch otherwise (revisits, self-loops, shared prefixes), and an invalid
action keeps the state (a self-loop). A trajectory succeeds with probability
``success_p`` each time it stands in a goal-ish state (its winning step gets reward
``win_reward`` and next_state :data:`SINK`); otherwise it fails or is truncated at a
random length <= ``horizon``. Deterministic by ``seed`` (numpy Generator). The group's milestones (the
StepBatch's ``milestone`` field) are a few fixed states of the spine (every ``n_states // 4``-th, from the
start's) and the win: a step is a milestone when it reaches such a state for the first time in its trajectory,
or wins (no random draw: the other fields are those of a batch without milestones).

:func:`benchmark_batch` is the issue's benchmark shape: 16 groups x 8 trajectories
x 50 steps = 6,400 rows, every trajectory exactly ``horizon`` steps long.

:func:`paths_batch` builds a batch from hand-written visit sequences (tests).

:func:`text_batch` is a batch whose states are observation texts with near-duplicates (tests and
benchmarks of ``state_similarity``): every group is a room of places, and every visit to a place
renders its text anew, the listing sometimes reordered, an object's instance number sometimes changed,
a step counter sometimes shown.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .batch import FIELDS, SINK, StepBatch

OUTCOMES = (None, "success", "fail")


def _distinct_ints(rng: np.random.Generator, n: int, low: int, high: int) -> np.ndarray:
    """n distinct int64 values in [low, high)."""
    while True:
        vals = rng.integers(low, high, size=n, dtype=np.int64)
        if len(np.unique(vals)) == n:
            return vals


def _state_graph(rng: np.random.Generator, n_states: int, self_loop_p: float, max_out_degree: int):
    """Successor lists of a random graph on 0..n_states-1; successor 0 of state i is the spine i+1."""
    succ = []
    for i in range(n_states):
        spine = min(i + 1, n_states - 1)
        k = int(rng.integers(0, max_out_degree))
        extra = rng.integers(0, n_states, size=k).tolist()
        out = [spine] + [j for j in extra if j != spine and j != i]
        if rng.random() < self_loop_p and i not in out:
            out.append(i)
        succ.append(list(dict.fromkeys(out)))
    return succ


def random_batch(
    n_groups: int = 4,
    group_size: int | Sequence[int] = 8,
    horizon: int = 20,
    *,
    seed: int = 0,
    n_states: int = 12,
    max_out_degree: int = 3,
    spine_p: float = 0.6,
    self_loop_p: float = 0.3,
    invalid_p: float = 0.05,
    success_p: float = 0.5,
    goal_frac: float = 0.25,
    outcome: str | None | Sequence[str | None] = None,
    fixed_length: bool = False,
    win_reward: float = 10.0,
    shuffle: bool = True,
    device=None,
) -> StepBatch:
    """A random rollout batch of ``n_groups`` task groups.

    group_size: trajectories per group, an int or one int per group (1 gives a
      singleton group).
    horizon: the longest trajectory, in steps; with ``fixed_length`` every
      trajectory has exactly ``horizon`` steps and can only win on its last step
      (with probability ``success_p`` if it ever stood in a goal-ish state).
    n_states: states per group graph (keys are random int64s, negative ones
      included, never SINK); the last ``goal_frac`` of them are goal-ish.
    outcome: ``None`` (random), ``"success"`` (every trajectory of the group wins,
      at the latest on its last step) or ``"fail"`` (none wins); one value or one
      per group.
    shuffle: return the rows in a random order (the estimators must not care).

    Returns a validated :class:`StepBatch`; rows of a trajectory have the
    trajectory's ``success``; rewards are ``win_reward`` on the winning step, else 0.
    """
    if n_groups < 0 or horizon < 1 or n_states < 1:
        raise ValueError(f"random_batch: need n_groups >= 0, horizon >= 1, n_states >= 1; got "
                         f"{n_groups}, {horizon}, {n_states}")
    sizes = [group_size] * n_groups if isinstance(group_size, (int, np.integer)) else list(group_size)
    outcomes = [outcome] * n_groups if outcome is None or isinstance(outcome, str) else list(outcome)
    if len(sizes) != n_groups or len(outcomes) != n_groups:
        raise ValueError(f"random_batch: group_size / outcome need {n_groups} values, got "
                         f"{len(sizes)} / {len(outcomes)}")
    for o in outcomes:
        if o not in OUTCOMES:
            raise ValueError(f"random_batch: outcome must be one of {OUTCOMES}, got {o!r}")
    rng = np.random.default_rng(seed)
    group_ids = _distinct_ints(rng, n_groups, -1_000_000, 1_000_000).tolist()
    n_traj = int(sum(sizes))
    traj_ids = (rng.permutation(n_traj) + int(rng.integers(-1_000_000, 1_000_000))).tolist()
    n_goal = max(1, int(round(goal_frac * n_states)))

    cols = {k: [] for k in FIELDS}
    spacing = max(1, n_states // 4)
    marks = set(range(spacing, n_states, spacing))  # the spine's milestone states
    k_traj = 0
    for gi in range(n_groups):
        keys = _distinct_ints(rng, n_states, -(1 << 63), SINK).tolist()
        succ = _state_graph(rng, n_states, self_loop_p, max_out_degree)
        goal = set(range(n_states - n_goal, n_states))
        forced = outcomes[gi]
        for _ in range(sizes[gi]):
            length = horizon if fixed_length else int(rng.integers(1, horizon + 1))
            u = rng.random((length, 4)).tolist()
            states, nexts, rewards, invalid, milestone = [], [], [], [], []
            cur, won, seen_goal, reached = 0, False, False, set()
            for t in range(length):
                ut = u[t]
                seen_goal = seen_goal or cur in goal
                last = t == length - 1
                if fixed_length:
                    win = last and (forced == "success" or (forced is None and seen_goal and ut[2] < success_p))
                else:
                    win = (forced != "fail" and cur in goal and ut[2] < success_p) or (forced == "success" and last)
                states.append(keys[cur])
                if win:
                    nexts.append(SINK)
                    rewards.append(win_reward)
                    invalid.append(False)
                    milestone.append(True)
                    won = True
                    break
                if ut[0] < invalid_p:
                    nxt = cur
                    invalid.append(True)
                else:
                    options = succ[cur]
                    nxt = options[0] if ut[1] < spine_p else options[int(ut[3] * len(options))]
                    invalid.append(False)
                nexts.append(keys[nxt])
                rewards.append(0.0)
                milestone.append(nxt in marks and nxt not in reached)
                reached.add(nxt)
                cur = nxt
            n = len(states)
            cols["group"] += [group_ids[gi]] * n
            cols["traj"] += [traj_ids[k_traj]] * n
            cols["t"] += list(range(n))
            cols["state"] += states
            cols["next_state"] += nexts
            cols["success"] += [won] * n
            cols["reward"] += rewards
            cols["invalid"] += invalid
            cols["milestone"] += milestone
            k_traj += 1
    arrays = {
        "group": np.asarray(cols["group"], dtype=np.int64), "traj": np.asarray(cols["traj"], dtype=np.int64),
        "t": np.asarray(cols["t"], dtype=np.int64), "state": np.asarray(cols["state"], dtype=np.int64),
        "next_state": np.asarray(cols["next_state"], dtype=np.int64),
        "success": np.asarray(cols["success"], dtype=bool), "reward": np.asarray(cols["reward"], dtype=np.float64),
        "invalid": np.asarray(cols["invalid"], dtype=bool), "milestone": np.asarray(cols["milestone"], dtype=bool),
    }
    if shuffle and len(arrays["t"]):
        perm = rng.permutation(len(arrays["t"]))
        arrays = {k: v[perm] for k, v in arrays.items()}
    return StepBatch(**arrays, device=device)


def benchmark_batch(n_groups: int = 16, group_size: int = 8, horizon: int = 50, *, seed: int = 0,
                    n_states: int = 40, **kwargs) -> StepBatch:
    """The benchmark shape: ``n_groups`` x ``group_size`` trajectories of exactly ``horizon`` steps
    (16 x 8 x 50 = 6,400 rows by default); other options as :func:`random_batch`."""
    return random_batch(n_groups, group_size, horizon, seed=seed, n_states=n_states, fixed_length=True, **kwargs)


def paths_batch(paths: Sequence, *, win_reward: float = 10.0, invalid: dict | None = None,
                rewards: dict | None = None, milestones: dict | None = None,
                shuffle_seed: int | None = None) -> StepBatch:
    """A batch from hand-written trajectories.

    paths: one ``(group, [s_0, s_1, ..., s_T])`` per trajectory (trajectory ids
      0, 1, ... in this order); the sequence holds every visited state including
      the last next_state; a trajectory whose last element is :data:`SINK` is a
      success and gets ``win_reward`` on its last step.
    invalid: {trajectory index: step indices whose action was invalid}.
    rewards: {trajectory index: list of per-step rewards} overriding the default.
    milestones: {trajectory index: step indices that completed a subgoal} (the ``milestone`` field; none else).
    shuffle_seed: shuffle the rows with this seed (None keeps (traj, t) order).
    """
    rows = []
    invalid = invalid or {}
    rewards = rewards or {}
    milestones = milestones or {}
    for k, (group, seq) in enumerate(paths):
        if len(seq) < 2:
            raise ValueError(f"paths_batch: trajectory {k} needs at least [s_0, s_1], got {seq}")
        ok = seq[-1] == SINK
        steps = len(seq) - 1
        rew = rewards.get(k, [0.0] * (steps - 1) + [win_reward if ok else 0.0])
        if len(rew) != steps:
            raise ValueError(f"paths_batch: trajectory {k} has {steps} steps but {len(rew)} rewards")
        bad, marked = set(invalid.get(k, ())), set(milestones.get(k, ()))
        for t in range(steps):
            rows.append({"group": group, "traj": k, "t": t, "state": seq[t], "next_state": seq[t + 1],
                         "success": ok, "reward": float(rew[t]), "invalid": t in bad, "milestone": t in marked})
    if shuffle_seed is not None:
        order = np.random.default_rng(shuffle_seed).permutation(len(rows)).tolist()
        rows = [rows[i] for i in order]
    return StepBatch.from_rows(rows)


_OBJECTS = ("apple", "bread", "mug", "knife", "plate", "egg", "tomato", "spoon", "cup", "pan", "lettuce", "potato",
            "book", "pen", "vase", "cloth")
_PLACES = ("countertop", "cabinet", "drawer", "shelf", "fridge", "sinkbasin", "stoveburner", "diningtable", "safe",
           "microwave", "garbagecan", "sidetable")


def text_batch(n_groups: int = 4, group_size: int = 8, horizon: int = 20, *, seed: int = 0, n_places: int = 12,
               p_forward: float = 0.6, p_reorder: float = 0.3, p_instance: float = 0.2, p_counter: float = 0.2,
               success_p: float = 0.3, shuffle_seed: int | None = None) -> tuple[StepBatch, dict[int, str]]:
    """A batch of ``n_groups`` rooms x ``group_size`` walks of at most ``horizon`` steps whose states are texts.

    A walk moves to the next place with probability ``p_forward``, else to a random one, and wins with
    probability ``success_p`` at the last place. A visit renders "You arrive at <place>. On the <place>, you
    see a <object> <n>, ..." with the listing shuffled (``p_reorder``), one instance number changed
    (``p_instance``) and "You have <k> steps left." appended (``p_counter``). Returns the batch (trajectory
    order, or shuffled by ``shuffle_seed``) and every state key's text (:func:`milegpo.state_keys.state_key`)."""
    from ..state_keys import state_key

    rng = np.random.default_rng(seed)
    texts: dict[int, str] = {}
    paths = []
    for g in range(n_groups):
        places = []
        for i in range(n_places):
            name = f"{_PLACES[int(rng.integers(len(_PLACES)))]} {i + 1}"
            items = [f"{_OBJECTS[int(j)]} {int(rng.integers(1, 4))}"
                     for j in rng.choice(len(_OBJECTS), size=int(rng.integers(0, 6)), replace=False)]
            places.append((name, items))
        for _ in range(group_size):
            seq, at = [], 0
            for t in range(horizon + 1):
                name, items = places[at]
                items = list(items)
                if items and rng.random() < p_reorder:
                    items = [items[int(j)] for j in rng.permutation(len(items))]
                if items and rng.random() < p_instance:
                    j = int(rng.integers(len(items)))
                    items[j] = f"{items[j].rsplit(' ', 1)[0]} {int(rng.integers(4, 9))}"
                listing = ", ".join(f"a {x}" for x in items) or "nothing"
                text = f"You arrive at {name}. On the {name}, you see {listing}."
                if rng.random() < p_counter:
                    text += f" You have {horizon - t} steps left."
                key = state_key(text)
                texts[key] = text
                seq.append(key)
                if t == horizon:
                    break
                if at == n_places - 1 and rng.random() < success_p:
                    seq.append(SINK)
                    break
                at = min(at + 1, n_places - 1) if rng.random() < p_forward else int(rng.integers(n_places))
            paths.append((g, seq))
    return paths_batch(paths, shuffle_seed=shuffle_seed), texts


__all__ = ["random_batch", "benchmark_batch", "paths_batch", "text_batch"]
