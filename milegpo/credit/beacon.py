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
  trajectory without one; then r_t - p on an invalid row (p = ``invalid_penalty``, ``beacon_penalty="return"``;
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
Its fields (``beacon_*``, their WebShop values where its WebShop script differs) and its presets
(``beacon_alfworld`` / ``beacon_webshop`` / ``beacon_scienceworld``) are declared here, with its registration at the
bottom.
"""

from __future__ import annotations

import warnings

import torch

from milegpo_kernels import dense_ids, discounted_returns, segment_normalize

from .batch import StepBatch
from .config import ALFWORLD_PAPER, WEBSHOP_PAPER, CreditConfig, add_preset, unit_interval
from .reference import ReferenceTerms, decayed, normalize_episode, normalize_segments, penalised_step_returns
from .registry import ConfigField, CreditMethod, register
from .vectorized import GroupOrderedRows, MethodOutput, episode_terms as episode_stage

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
    minus ``invalid_penalty`` on an invalid row with ``beacon_penalty="return"``. Returns {row index: r}."""
    out = {i: 0.0 for i in traj}
    start = 0
    for m in milestone_steps(traj, rows):
        for t in range(start, m + 1):
            out[traj[t]] = decayed(MILESTONE_REWARD, config.beacon_gamma, m - t)
        start = m + 1
    return penalised_step_returns(out, rows, config) if config.beacon_penalty == "return" else out


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
    if config.beacon_penalty == "return":
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
                  variant: str) -> MethodOutput:
    """BEACON on the (group, traj, t)-ordered rows: (B2) :func:`segment_reward_terms`, (B3)
    :func:`segment_index_terms`, (B4) :func:`segment_adv_terms`, (B5) the episode stage with ``beacon_mode``
    (the one computed already where ``norm`` is the same), (B6)."""
    rewards = segment_reward_terms(rows, config)
    segments = segment_index_terms(rows)
    segment_adv = segment_adv_terms(rewards, segments, rows, config)
    episode = row_values if config.norm == config.beacon_mode else episode_stage(rows, _episode_config(config))
    adv = episode["episode_adv"] + config.beacon_weight * segment_adv
    return MethodOutput(adv, {**row_values, "episode_adv": episode["episode_adv"], "segment_reward": rewards,
                              "segment": segments, "segment_adv": segment_adv})


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


# --------------------------------------------------------------------------------------- fields, registration
#: the largest BEACON weight w (its square enters no statistic, but w * A_seg must stay finite)
BEACON_MAX_WEIGHT = 1e100


def _weight(name: str, v) -> None:
    if not 0.0 <= v <= BEACON_MAX_WEIGHT:
        raise ValueError(f"CreditConfig.{name} must be in [0, {BEACON_MAX_WEIGHT:g}], got {v}")


#: BEACON's fields: the defaults are its ALFWorld script's, the WebShop and ScienceWorld values its WebShop and
#: ScienceWorld scripts' (a preset of the world ``webshop`` or ``scienceworld``, ``presets.WEBSHOP`` /
#: ``presets.SCIENCEWORLD`` and those built from them, reads them: ``CreditConfig.world``)
BEACON_FIELDS = (
    ConfigField("beacon_gamma", 0.9, "gamma of the segment reward r_t = 10 * gamma^(m_k - t) toward the segment's "
                "milestone step m_k (B2; the scripts: ALFWorld 0.9, WebShop and ScienceWorld 0.95).", float,
                unit_interval, world_defaults=(("webshop", 0.95), ("scienceworld", 0.95))),
    ConfigField("beacon_weight", 10.0, "w in A = A_ep + w * A_seg (B6; the scripts: ALFWorld 10, WebShop and "
                "ScienceWorld 1).", float, _weight, world_defaults=(("webshop", 1.0), ("scienceworld", 1.0))),
    ConfigField("beacon_mode", "mean", "how both of BEACON's terms normalise (B4, B5; the code's mode): \"mean\" "
                "(mean_norm, every script) or \"mean_std\" (mean_std_norm: divided by the sample std + norm_eps); "
                "BEACON reads it instead of norm.", ("mean", "mean_std")),
    ConfigField("beacon_penalty", "return", "where invalid_penalty enters BEACON's segment reward (B2; "
                "PENALTY_PLACES): \"return\" (the code's trainer: off an invalid row's decayed segment reward r_t) "
                "or \"none\" (the milestones alone).", ("none", "return")),
)

register(CreditMethod(
    "beacon", "A = Norm_q(Z) + w * Norm_{q, segment}(10 * gamma^(m_k - t)): segments between the environment's "
    "milestones (BEACON, the official code's dynamic-milestone path)",
    beacon_reference, beacon_tables, row_keys=ROW_KEYS, fields=BEACON_FIELDS, batch_check=warn_without_milestones))

#: BEACON's official scripts (``ZJU-REAL/BEACON`` ``examples/migpo_trainer/run_{alfworld,webshop,sciworld}.sh``): gamma,
#: w, the invalid-action penalty p (the trainer's ``invalid_action_penalty_coef``, on the episode score and the
#: segment reward alike), ``mean_norm`` everywhere; each on its world's preset of the paper (ScienceWorld, which
#: has none: the ALFWorld one). ``ALFWORLD`` / ``WEBSHOP`` hold their world's gamma and w already (p stays the
#: paper's 0.1). In a ``milegpo train`` run ``--invalid_action_penalty`` sets p: the recipes give it.
BEACON_ALFWORLD = add_preset("beacon_alfworld", ALFWORLD_PAPER.replace(
    beacon_gamma=0.9, beacon_weight=10.0, beacon_mode="mean", invalid_penalty=0.1))
BEACON_WEBSHOP = add_preset("beacon_webshop", WEBSHOP_PAPER.replace(
    beacon_gamma=0.95, beacon_weight=1.0, beacon_mode="mean", invalid_penalty=1.0))
BEACON_SCIENCEWORLD = add_preset("beacon_scienceworld", ALFWORLD_PAPER.replace(
    beacon_gamma=0.95, beacon_weight=1.0, beacon_mode="mean", invalid_penalty=0.1))


__all__ = ["ROW_KEYS", "BEACON_FIELDS", "BEACON_ALFWORLD", "BEACON_WEBSHOP", "BEACON_SCIENCEWORLD", "MILESTONE_REWARD", "beacon_reference", "beacon_tables", "milestone_steps", "segment_rewards",
           "segment_indices", "segment_terms", "episode_terms", "beacon_advantage", "segment_reward_terms",
           "segment_index_terms", "segment_adv_terms", "warn_without_milestones"]
