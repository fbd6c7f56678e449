"""BEACON: milestone-guided credit, GiGPO's episode term plus a segment term between the environment's
milestones (docs/algorithm.md, "BEACON").

"BEACON: Milestone-Guided Policy Learning for Long-Horizon Language Agents" (its code calls the method MiGPO);
the default settings are what the official code (``ZJU-REAL/BEACON``, ``migpo/core_migpo.py`` and its verl
trainer) computes on its dynamic-milestone path (the one of its WebShop and ScienceWorld runs) under its ALFWorld
script; the other scripts' values are the presets ``beacon_webshop`` / ``beacon_scienceworld``. A row's
``milestone`` (the StepBatch field the environment fills: the step completed one of its verifiable subgoals)
cuts each trajectory into segments:

- (B1) milestone steps: m_1 < m_2 < ... < m_K, the steps t of the trajectory with ``milestone`` true;
- (B2) segment reward: r_t = :data:`MILESTONE_REWARD` * gamma^(m_k - t) for the steps m_(k-1)+1 .. m_k of the
  k-th segment (m_0 = -1; the milestone step itself gets 10), 0 after the last milestone and on every step of a
  trajectory without one; then r_t - p on an invalid row (p = ``invalid_penalty``, ``beacon_step_penalty``;
  gamma = ``beacon_gamma``);
- (B3) segment index: s = the number of the trajectory's milestone steps strictly before the row (a milestone
  step closes its segment, the steps after it start the next);
- (B4) segment term: A_seg = Norm over the rows of one (task group, s) pair of r: r - mean (``beacon_mode=
  "mean"``, the scripts') or (r - mean) / (sample std + ``norm_eps``) (``"mean_std"``); a one-row pair or equal
  values: 0;
- (B5) episode term: GiGPO's Norm_q(Z) over the task group's rows (Z the trajectory's summed reward, minus p on
  an invalid row), normalised with ``beacon_mode`` (the code normalises both terms alike; a group of one row
  keeps its Z: mean 0, std 1);
- (B6) A = A_ep + w * A_seg (w = ``beacon_weight``).

Rows are ordered by t within each trajectory (the official code counts segments in batch order, which on one
rank is t order). A batch with no milestone row (``StepBatch.milestone`` all False, as a batch built without the
field has) is computed by the same equations: every row in segment 0 with r = -p * invalid, so the segment term
compares the invalid-action penalties only; :func:`warn_without_milestones` says so (``estimate`` calls it:
the official code, given no milestone column at all, prints a warning and returns the episode term alone).

This module holds the plain-Python oracle (one function per equation, :func:`beacon_reference`) and the
vectorised pipeline over :mod:`milegpo_kernels` ops (:func:`beacon_tables`): the segment rewards are one
discounted scan that restarts at every milestone, the segment indices a cumulative count of milestones, the
(group, segment) pairs dense ids, the segment term one segment normalisation. No new kernel, no host read.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import torch

from milegpo_kernels import dense_ids, discounted_returns, segment_normalize

from .config import CreditConfig
from .reference import ReferenceTerms, decayed, normalize_episode, normalize_segments

if TYPE_CHECKING:  # the pipeline's types (vectorized imports the registry, which imports this module)
    from .batch import StepBatch
    from .result import Tables
    from .vectorized import GroupOrderedRows

F64 = torch.float64

#: the segment reward of a milestone step (the official code's 10.0, GiGPO's reward scale)
MILESTONE_REWARD = 10.0

#: BEACON's per-row arrays (``CreditResult.rows``): Z and A_ep (B5, BEACON's own normalisation), r (B2), s (B3),
#: A_seg (B4)
ROW_KEYS = ("episode_score", "episode_adv", "segment_reward", "segment", "segment_adv")


# --------------------------------------------------------------------------------------- the oracle
def milestone_steps(traj: list, rows: list) -> list:
    """(B1) The steps t (0-based, in t order) of one trajectory's rows (row indices in t order) whose
    ``milestone`` is true."""
    return [t for t, i in enumerate(traj) if rows[i]["milestone"]]


def segment_rewards(traj: list, rows: list, config: CreditConfig) -> dict:
    """(B2) r_t of one trajectory: 10 * gamma^(m_k - t) in the segment closed by milestone step m_k (gamma^(m_k - t)
    as m_k - t multiplications of 10, :func:`~milegpo.credit.reference.decayed`), 0 after the last milestone;
    minus ``invalid_penalty`` on an invalid row with ``beacon_step_penalty``. Returns {row index: r}."""
    out = {i: 0.0 for i in traj}
    start = 0
    for m in milestone_steps(traj, rows):
        for t in range(start, m + 1):
            out[traj[t]] = decayed(MILESTONE_REWARD, config.beacon_gamma, m - t)
        start = m + 1
    if config.beacon_step_penalty:
        for i in traj:
            if rows[i]["invalid"]:
                out[i] = out[i] - config.invalid_penalty
    return out


def segment_indices(traj: list, rows: list) -> dict:
    """(B3) s of every row of one trajectory: its milestone steps strictly before the row. Returns {row index: s}."""
    out = {}
    before = 0
    for i in traj:
        out[i] = before
        if rows[i]["milestone"]:
            before += 1
    return out


def segment_terms(rewards: dict, segments: dict, rows: list, config: CreditConfig) -> dict:
    """(B4) A_seg: r normalised over the rows of each (task group, segment index) pair with ``beacon_mode``;
    a one-row pair or equal values give 0. Returns {row index: A_seg}."""
    keys = {i: (rows[i]["group"], segments[i]) for i in rewards}
    return normalize_segments(rewards, keys, config.beacon_mode, config.norm_eps, "zero")


def episode_terms(z: dict, rows: list, config: CreditConfig) -> dict:
    """(B5) A_ep: Norm_q(Z) (:func:`~milegpo.credit.reference.normalize_episode`) with ``beacon_mode`` for
    ``norm``. Returns {row index: A_ep}."""
    return normalize_episode(z, rows, _episode_config(config))


def beacon_advantage(episode_adv: float, segment_adv: float, config: CreditConfig) -> float:
    """(B6) A = A_ep + w * A_seg."""
    return episode_adv + config.beacon_weight * segment_adv


def beacon_reference(terms: ReferenceTerms) -> list:
    """BEACON, plain Python: (B1-B3) per trajectory, (B4, B5) per task group, (B6) per row. Fills
    ``segment_reward``, ``segment``, ``segment_adv`` and BEACON's ``episode_adv``; returns the N advantages."""
    rows, config, row_vals = terms.rows, terms.config, terms.row_vals
    n = len(rows)
    rewards: dict = {}
    segments: dict = {}
    for trajs in terms.groups.values():
        for traj in trajs:
            rewards.update(segment_rewards(traj, rows, config))
            segments.update(segment_indices(traj, rows))
    segment_adv = segment_terms(rewards, segments, rows, config)
    episode_adv = episode_terms({i: row_vals["episode_score"][i] for i in range(n)}, rows, config)
    for i in range(n):
        row_vals["segment_reward"][i] = rewards[i]
        row_vals["segment"][i] = segments[i]
        row_vals["segment_adv"][i] = segment_adv[i]
        row_vals["episode_adv"][i] = episode_adv[i]
    return [beacon_advantage(episode_adv[i], segment_adv[i], config) for i in range(n)]


# --------------------------------------------------------------------------------------- the pipeline
def segment_reward_terms(rows: GroupOrderedRows, config: CreditConfig) -> torch.Tensor:
    """(B1, B2) r of every row in (group, traj, t) order, (N,) float64: one backward discounted scan of 10 on
    the milestone rows that restarts at every milestone and trajectory end (so r_t = 10 * gamma * ... * gamma
    back from the segment's milestone, 0 after the last), then the invalid-action penalty."""
    reward = rows.milestone.to(F64) * MILESTONE_REWARD
    out = discounted_returns(reward, rows.traj_end | rows.milestone, config.beacon_gamma, **rows.ops)
    if config.beacon_step_penalty:
        out = torch.where(rows.invalid, out - config.invalid_penalty, out)
    return out


def segment_index_terms(rows: GroupOrderedRows) -> torch.Tensor:
    """(B3) s of every row in (group, traj, t) order, (N,) int64: the milestones before the row in the batch
    minus those before its trajectory's first row (a cumulative count; no host read)."""
    flags = rows.milestone.to(torch.int64)
    before = torch.cumsum(flags, 0) - flags  # milestone rows before each row, over the whole batch
    # the count at each trajectory's first row, carried along its rows (the count never decreases)
    at_start = torch.cummax(torch.where(rows.traj_start, before, 0), 0).values
    return before - at_start


def segment_adv_terms(rewards: torch.Tensor, segments: torch.Tensor, rows: GroupOrderedRows,
                      config: CreditConfig) -> torch.Tensor:
    """(B4) A_seg, (N,) float64: one segment normalisation over the dense ids of the (group, s) pairs."""
    pairs = dense_ids(rows.group, segments, **rows.ops)
    cap = rows.capacity(pairs.count, len(rows))
    return segment_normalize(rewards, pairs.ids, cap, config.beacon_mode, config.norm_eps, "zero", **rows.ops)


def beacon_tables(rows: GroupOrderedRows, row_values: dict[str, torch.Tensor], config: CreditConfig,
                  variant: str) -> Tables:
    """BEACON on the (group, traj, t)-ordered rows: (B2) :func:`segment_reward_terms`, (B3)
    :func:`segment_index_terms`, (B4) :func:`segment_adv_terms`, (B5) the episode stage with ``beacon_mode``
    (the one computed already where ``norm`` is the same), (B6)."""
    from .vectorized import episode_terms as episode_stage, method_tables

    rewards = segment_reward_terms(rows, config)
    segments = segment_index_terms(rows)
    segment_adv = segment_adv_terms(rewards, segments, rows, config)
    episode = row_values if config.norm == config.beacon_mode else episode_stage(rows, _episode_config(config))
    adv = episode["episode_adv"] + config.beacon_weight * segment_adv
    return method_tables("beacon", rows, adv, {**row_values, "episode_adv": episode["episode_adv"],
                                               "segment_reward": rewards, "segment": segments,
                                               "segment_adv": segment_adv})


# --------------------------------------------------------------------------------------- helpers
def _episode_config(config: CreditConfig) -> CreditConfig:
    """``config`` with ``norm`` = ``beacon_mode``: the episode term's settings under BEACON."""
    return config if config.norm == config.beacon_mode else config.replace(norm=config.beacon_mode)


def warn_without_milestones(batch: StepBatch) -> None:
    """A :class:`UserWarning` when no row of a non-empty ``batch`` is a milestone (one host read of the flags):
    BEACON then has no segments, and its segment term compares the invalid-action penalties only."""
    if len(batch) and not bool(batch.milestone.any()):
        warnings.warn("beacon: no row of the batch is a milestone (StepBatch.milestone is all False): every row is "
                      "in segment 0 with segment reward -invalid_penalty * invalid, so the segment term compares "
                      "invalid actions only; does the environment report info['milestone'] (milegpo.envs.base)?",
                      UserWarning, stacklevel=3)


__all__ = ["ROW_KEYS", "MILESTONE_REWARD", "beacon_reference", "beacon_tables", "milestone_steps", "segment_rewards",
           "segment_indices", "segment_terms", "episode_terms", "beacon_advantage", "segment_reward_terms",
           "segment_index_terms", "segment_adv_terms", "warn_without_milestones"]
