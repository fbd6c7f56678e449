"""Adversarial random StepBatches for the credit tests (independent of milegpo.credit.synthetic),
and :func:`rows_ok`, the hand-written batch the error tests mutate.

Tiny state spaces force shared states, revisits and self-loops; outcomes are drawn
independently of the path so that every structure (a success through a trap, a
failure through a milestone) shows up.
"""

from __future__ import annotations

import numpy as np

from milegpo.credit import SINK, StepBatch

MODES = ("mixed", "all_success", "all_fail")


def make_rows(rng: np.random.Generator, n_groups: int, k: int, horizon: int, n_states: int = 6,
              p_success: float = 0.5, p_self: float = 0.2, p_invalid: float = 0.15, mode: str = "mixed",
              one_step: bool = False) -> list[dict]:
    rows = []
    traj_ids = rng.permutation(10 * n_groups * k + 10)[: n_groups * k] - 5 * n_groups * k  # negatives too
    group_ids = rng.choice(np.arange(-1000, 1000), size=n_groups, replace=False)
    j = 0
    for g in range(n_groups):
        keys = rng.integers(-(2**63), 2**63 - 1, size=n_states, dtype=np.int64)
        succ = [rng.choice(n_states, size=int(rng.integers(1, 4))) for _ in range(n_states)]
        group_mode = mode if mode != "mixed" else str(rng.choice(MODES, p=[0.8, 0.1, 0.1]))
        for _ in range(k):
            tr = int(traj_ids[j])
            j += 1
            length = 1 if one_step else int(rng.integers(1, horizon + 1))
            won = group_mode == "all_success" or (group_mode == "mixed" and rng.random() < p_success)
            s = 0
            total = 0.0
            for t in range(length):
                invalid = bool(rng.random() < p_invalid)
                if invalid or rng.random() < p_self:
                    nxt = s
                else:
                    nxt = int(rng.choice(succ[s]))
                last = t == length - 1
                reward = 10.0 if (last and won) else 0.0
                total += reward
                rows.append(dict(group=int(group_ids[g]), traj=tr, t=t, state=int(keys[s]),
                                 next_state=SINK if (last and won) else int(keys[nxt]), success=won,
                                 reward=reward, invalid=invalid))
                s = nxt
    return rows


def make_batch(seed: int, shuffle: bool = True, milestone_rate: float = 0.25, **kwargs) -> StepBatch:
    """:func:`make_rows` as a StepBatch; ``milestone`` flags drawn at ``milestone_rate`` (and on every winning step)
    by a generator of their own, so the other fields are those the seed always gave."""
    rng = np.random.default_rng(seed)
    rows = make_rows(rng, **kwargs)
    flags = np.random.default_rng([seed, 47]).random(len(rows)) < milestone_rate
    rows = [{**r, "milestone": bool(f) or r["next_state"] == SINK} for r, f in zip(rows, flags)]
    if shuffle:
        rows = [rows[i] for i in rng.permutation(len(rows))]
    return StepBatch.from_rows(rows)


def rows_ok() -> list[dict]:
    """Four hand-written rows, the valid batch the error tests mutate."""
    # traj 0 wins in two steps, traj 1 fails in two steps; rows deliberately shuffled
    return [
        dict(group=0, traj=1, t=1, state=3, next_state=3, success=False, reward=0.0, invalid=True),
        dict(group=0, traj=0, t=0, state=1, next_state=2, success=True, reward=0.0, invalid=False),
        dict(group=0, traj=1, t=0, state=1, next_state=3, success=False, reward=0.0, invalid=False),
        dict(group=0, traj=0, t=1, state=2, next_state=SINK, success=True, reward=10.0, invalid=False),
    ]
