"""HGPO: GiGPO's step groups taken at several depths of history (docs/algorithm.md, "HGPO").

"Hierarchy-of-Groups Policy Optimization for Long-Horizon Agentic Tasks" (He et al., arXiv 2602.22817,
ICLR 2026); the default settings are what the official recipe (verl-agent ``recipe/hgpo``) computes
under its ALFWorld / WebShop scripts, the paper's readings are switches (``hgpo_*`` fields of
:class:`~milegpo.credit.CreditConfig`):

- (H1) step return: R_t = sum_{j >= t} gamma^(j - t) r_j, minus ``invalid_penalty`` on an invalid row
  after discounting (``hgpo_penalty="return"``; ``"reward"``: off the reward before; ``"none"``);
- (H2) contexts: C_m(t) = (s_{t-m+1}, ..., s_t), the trajectory's last m states, m = 1..K+1, formed only
  where t >= m - 1 (K = ``hgpo_history``; so a depth past the batch's longest episode T forms none, and
  both estimators stop at m = min(K + 1, T): :func:`depth_count`);
- (H3) groups: G_m(q, c) = the rows of task group q whose depth-m context is c;
- (H4) level advantage: A_m = (R - mean_G R) / (std_G R + eps) (population std, ``hgpo_std``) or
  R - mean_G R (``norm="mean"``); a one-row group or equal returns: 0;
- (H5) level weight: L_m = m + ``hgpo_weight_shift``, w_m = L_m^alpha / (sum over the kept levels of
  L^alpha + ``hgpo_weight_eps``), the kept levels those with A_m != 0; with ``hgpo_base_group`` GRPO's
  Norm_q(Z) is one more item (L = 1);
- (H6) A = sum over the kept levels of w_m * A_m (0 when none is kept).

This module holds the plain-Python oracle (one function per equation, :func:`hgpo_reference`) and the
vectorised pipeline over :mod:`milegpo_kernels` ops (:func:`hgpo_tables`): the contexts are exact
dense ids, depth by depth (the depth-m context of a row is the depth-(m-1) context of the row before
it plus its own state), the levels one stacked segment normalisation, the aggregation a weighted mean
over at most K + 2 items per row. No host read on CUDA (so there, on the static layout, every depth up
to K + 1 is formed: :func:`longest_episode`). Its fields (``hgpo_*``) are declared here, with its
registration at the bottom.
"""

from __future__ import annotations

import math
import sys

import torch

from milegpo_kernels import dense_ids, segment_normalize, segment_sum

from .config import PENALTY_PLACES, CreditConfig, non_negative, zero_or_one
from .reference import ReferenceTerms, all_equal, normalize_segment
from .registry import ConfigField, CreditMethod, register
from .vectorized import GroupOrderedRows, MethodOutput, penalised_discounted_returns

F64 = torch.float64

#: HGPO's per-row arrays (``CreditResult.rows``): Z, Norm_q(Z), R_t (H1), the depth-1 level advantage A_1 (H4)
ROW_KEYS = ("episode_score", "episode_adv", "step_return", "depth1_adv")


# --------------------------------------------------------------------------------------- the oracle
def hgpo_step_returns(trajs: list, rows: list, config: CreditConfig) -> dict:
    """(H1) R_t = sum_{j >= t} gamma^(j - t) r_j, backward (running = r_t + gamma * running), with
    ``hgpo_penalty``: ``"return"`` R_t - p on an invalid row after discounting; ``"reward"``
    r_t - p on an invalid row before; ``"none"``. Returns {row index: R_t}."""
    p = config.invalid_penalty
    out = {}
    for tr in trajs:
        running = 0.0
        for i in reversed(tr):
            reward = rows[i]["reward"]
            if config.hgpo_penalty == "reward" and rows[i]["invalid"]:
                reward = reward - p
            running = reward + config.gamma * running
            out[i] = running - p if config.hgpo_penalty == "return" and rows[i]["invalid"] else running
    return out


def history_contexts(traj: list, rows: list, depth: int) -> dict:
    """(H2) C_m(t) = (s_{t-m+1}, ..., s_t) of every row of one trajectory (row indices in t order) with
    t >= m - 1, m = ``depth``. Returns {row index: tuple of m state keys, oldest first}."""
    states = [rows[i]["state"] for i in traj]
    return {i: tuple(states[t - depth + 1:t + 1]) for t, i in enumerate(traj) if t >= depth - 1}


def history_groups(trajs: list, rows: list, depth: int) -> list:
    """(H3) G_m(q, c) of one task group: the row indices (ascending) of each depth-m context c, in order
    of the contexts. Returns [[row index, ...], ...]."""
    members: dict = {}
    for tr in trajs:
        for i, context in history_contexts(tr, rows, depth).items():
            members.setdefault(context, []).append(i)
    return [sorted(members[c]) for c in sorted(members)]


def level_advantages(returns: list, config: CreditConfig) -> list:
    """(H4) A_m of a group's members: (R - mean) / (std + norm_eps), std over n (``hgpo_std="population"``)
    or n - 1 (``"sample"``), or R - mean (``norm="mean"``); a one-row group or equal returns: 0."""
    n = len(returns)
    if n == 1 or all_equal(returns):
        return [0.0] * n
    if config.hgpo_std == "sample" or config.norm == "mean":
        return normalize_segment(returns, config.norm, config.norm_eps, "zero")
    mean = sum(returns) / n
    std = math.sqrt(sum((x - mean) * (x - mean) for x in returns) / n)
    return [(x - mean) / (std + config.norm_eps) for x in returns]


def level_weight(depth: int, config: CreditConfig) -> float:
    """(H5) L^alpha of the depth-m level: L = m + ``hgpo_weight_shift``; the base group (m = 0) has L = 1."""
    length = 1 if depth == 0 else depth + config.hgpo_weight_shift
    return float(length) ** config.hgpo_alpha


def weighted_levels(items: list, config: CreditConfig) -> float:
    """(H5, H6) A = sum over the kept items of w_m * A_m, w_m = L_m^alpha / (sum of the kept L^alpha +
    ``hgpo_weight_eps``), the kept items those with A_m != 0; 0 when none is kept.
    items: [(m, A_m), ...] in ascending m."""
    kept = [(m, a) for m, a in items if a != 0.0]
    total = 0.0
    for m, _ in kept:
        total = total + level_weight(m, config)
    out = 0.0
    for m, a in kept:
        out = out + level_weight(m, config) / (total + config.hgpo_weight_eps) * a
    return out


def depth_count(config: CreditConfig, longest: int) -> int:
    """(H2) The depths of history formed: m = 1..K + 1, up to the batch's longest episode T (``longest``): a
    depth m > T forms no context (t >= m - 1 holds on no row), so each of its groups is one row, its A_m is 0
    and it is not kept (H5): the same advantages, without K + 1 - T passes that change nothing."""
    return max(1, min(int(config.hgpo_history) + 1, int(longest)))


def hgpo_reference(terms: ReferenceTerms) -> list:
    """HGPO, plain Python: (H1) per trajectory, (H3, H4) per task group and depth, (H5, H6) per row.
    Fills ``step_return`` and ``depth1_adv``; returns the N advantages."""
    rows, config, row_vals = terms.rows, terms.config, terms.row_vals
    n = len(rows)
    longest = max((len(tr) for trajs in terms.groups.values() for tr in trajs), default=1)
    items: list = [[] for _ in range(n)]
    if config.hgpo_base_group:
        for i in range(n):
            items[i].append((0, terms.episode_adv[i]))
    returns: dict = {}
    for trajs in terms.groups.values():
        returns.update(hgpo_step_returns(trajs, rows, config))
    depth1 = [0.0] * n
    for trajs in terms.groups.values():
        for depth in range(1, depth_count(config, longest) + 1):
            for members in history_groups(trajs, rows, depth):
                for i, a in zip(members, level_advantages([returns[i] for i in members], config)):
                    items[i].append((depth, a))
                    if depth == 1:
                        depth1[i] = a
    for i in range(n):
        row_vals["step_return"][i] = returns[i]
        row_vals["depth1_adv"][i] = depth1[i]
    return [weighted_levels(items[i], config) for i in range(n)]


# --------------------------------------------------------------------------------------- the pipeline
def hgpo_step_return_terms(rows: GroupOrderedRows, config: CreditConfig) -> torch.Tensor:
    """(H1) R_t of every row in (group, traj, t) order, (N,) float64: one backward discounted scan, the invalid
    penalty where ``hgpo_penalty`` puts it."""
    return penalised_discounted_returns(rows, config.hgpo_penalty, config)


def step_indices(rows: GroupOrderedRows) -> torch.Tensor:
    """t of every row, (N,) int64: its distance from its trajectory's first row (rows are in (group, traj, t)
    order)."""
    row_ids = torch.arange(len(rows), device=rows.state.device)
    return row_ids - torch.cummax(torch.where(rows.traj_start, row_ids, 0), 0).values


def longest_episode(rows: GroupOrderedRows, t: torch.Tensor) -> int:
    """The batch's longest episode T (rows) on the host layout, where reading it is free; on the GPU's static
    layout, which reads nothing on the host (a sync, and no CUDA graph could be captured), the bound N instead:
    every depth up to K + 1 is formed there (the same numbers; the extra depths are a few kernel launches)."""
    if rows.static:
        return len(rows)
    return int(t.max()) + 1 if len(rows) else 1


def context_ids(rows: GroupOrderedRows, t: torch.Tensor, depth_count: int) -> tuple[torch.Tensor, int]:
    """(H2, H3) the group of every row at each depth m = 1..``depth_count``: (depth_count, N) int64 ids,
    each depth's in [0, cap), and cap. Depth 1 numbers (group, s_t); depth m numbers (the depth-(m-1) id
    of the row before, s_t), exact tuples, no hash to collide; a row with t < m - 1 (its history is
    shorter than m) gets an id of its own (a one-row group, whose advantage is 0). t: the rows' step
    indices (:func:`step_indices`)."""
    n, ops = len(rows), rows.ops
    row_ids = torch.arange(n, device=rows.state.device)
    first = dense_ids(rows.group, rows.state, **ops)
    cap = rows.capacity(first.count, n)
    levels = [first.ids]
    for depth in range(2, depth_count + 1):
        before = torch.cat([levels[-1][:1], levels[-1][:-1]])  # the depth-(m-1) id of the row before
        # a short history: a key no formed context has (ids are < n), one per row
        before = torch.where(t >= depth - 1, before, n + row_ids)
        ids = dense_ids(before, rows.state, **ops)
        levels.append(ids.ids)
        cap = max(cap, rows.capacity(ids.count, n))
    return torch.stack(levels), cap


def level_advantage_terms(returns: torch.Tensor, levels: torch.Tensor, cap: int, rows: GroupOrderedRows,
                          config: CreditConfig) -> torch.Tensor:
    """(H4) A_m of every row at every depth, (depth_count, N) float64: one stacked segment normalisation
    over (depth, id); the population std as sqrt(segment mean of (R - mean)^2) (``hgpo_std="population"``
    with ``norm="mean_std"``)."""
    depth_count, n = levels.shape
    seg = (levels + cap * torch.arange(depth_count, device=levels.device).unsqueeze(1)).reshape(-1)
    values = returns.repeat(depth_count)
    if config.norm == "mean" or config.hgpo_std == "sample":
        out = segment_normalize(values, seg, depth_count * cap, config.norm, config.norm_eps, "zero", **rows.ops)
        return out.reshape(depth_count, n)
    # population std: the deviations (0 in a one-row or all-equal group), then their mean square per group
    dev = segment_normalize(values, seg, depth_count * cap, "mean", config.norm_eps, "zero", **rows.ops)
    size = segment_sum(torch.ones_like(dev), seg, depth_count * cap)
    var = segment_sum(dev * dev, seg, depth_count * cap) / size.clamp(min=1.0)
    scale = var.sqrt().index_select(0, seg) + config.norm_eps
    # a one-row or all-equal group is 0 as in the oracle (with norm_eps = 0 its 0 / 0 was NaN here)
    out = torch.where(scale > 0.0, dev / torch.where(scale > 0.0, scale, torch.ones_like(scale)), torch.zeros_like(dev))
    return out.reshape(depth_count, n)


def weighted_level_terms(level_adv: torch.Tensor, config: CreditConfig) -> torch.Tensor:
    """(H5, H6) A = sum over the kept items of w_m * A_m, (N,) float64. level_adv: (items, N), item 0
    the base group when ``hgpo_base_group``, then depths 1..K+1."""
    base = 1 if config.hgpo_base_group else 0
    depths = range(1 - base, level_adv.shape[0] + 1 - base)
    kept = (level_adv != 0.0).to(F64)
    # L^alpha per item as Python scalars (a tensor built from a list would be a host-to-device copy on CUDA)
    weights = torch.stack([kept[k] * level_weight(m, config) for k, m in enumerate(depths)])
    total = weights.sum(0) + config.hgpo_weight_eps
    # a row with no kept item is 0 as in the oracle (with hgpo_weight_eps = 0 its 0 / 0 was NaN here)
    total = torch.where(total > 0.0, total, torch.ones_like(total))
    return (weights / total * level_adv).sum(0)


def hgpo_tables(rows: GroupOrderedRows, row_values: dict[str, torch.Tensor], config: CreditConfig,
                variant: str) -> MethodOutput:
    """HGPO on the (group, traj, t)-ordered rows: (H1) :func:`hgpo_step_return_terms`, (H2, H3)
    :func:`context_ids` up to :func:`depth_count`, (H4) :func:`level_advantage_terms`, (H5, H6)
    :func:`weighted_level_terms`."""
    returns = hgpo_step_return_terms(rows, config)
    t = step_indices(rows)
    levels, cap = context_ids(rows, t, depth_count(config, longest_episode(rows, t)))
    level_adv = level_advantage_terms(returns, levels, cap, rows, config)
    items = torch.cat([row_values["episode_adv"].unsqueeze(0), level_adv]) if config.hgpo_base_group else level_adv
    adv = weighted_level_terms(items, config)
    return MethodOutput(adv, {**row_values, "step_return": returns, "depth1_adv": level_adv[0]})


# --------------------------------------------------------------------------------------- the registration
def _history(name: str, v) -> None:
    if int(v) != v or not 0 <= v <= 64:
        raise ValueError(f"CreditConfig.{name} must be a whole number in [0, 64] (previous states), got {v}")


def check_weights(config: CreditConfig) -> None:
    """(H5) L^alpha with L up to K + 1 + shift, summed over K + 2 items, must stay a finite float64 (1e300 was an
    OverflowError at the first credit step)."""
    longest = int(config.hgpo_history) + 1 + config.hgpo_weight_shift
    if longest > 1:
        top = math.log(sys.float_info.max / (int(config.hgpo_history) + 2)) / math.log(longest)
        if config.hgpo_alpha > top:
            raise ValueError(f"CreditConfig.hgpo_alpha must be at most {top:.4g} with hgpo_history="
                             f"{config.hgpo_history} (L^alpha of the longest context, L = {longest}, must be a "
                             f"finite float64), got {config.hgpo_alpha}")


#: HGPO's CreditConfig fields (defaults: the official ALFWorld / WebShop scripts, verl-agent recipe/hgpo)
HGPO_FIELDS = (
    ConfigField("hgpo_history", 2, "K, the depths of history (H2): steps are grouped by their last m states, m = 1..K "
                "+ 1 (0: GiGPO's step groups); depths past the batch's longest episode form no group.", int, _history),
    ConfigField("hgpo_alpha", 1.0, "alpha, the exponent of a level's weight L^alpha (H5; 0: the levels weigh the "
                "same).", float, non_negative),
    ConfigField("hgpo_std", "population", "the std of a level's mean_std normalisation (H4): \"population\" (the "
                "code: divide by n) or \"sample\".", ("population", "sample")),
    ConfigField("hgpo_weight_shift", 1, "L = m + hgpo_weight_shift for the group of the last m states (H5): 1 (the "
                "code: 2 : 3 : 4 for K = 2) or 0 (the paper's k + 1: 1 : 2 : 3).", int, zero_or_one),
    ConfigField("hgpo_base_group", False, "the code's base_group: GRPO's Norm_q(Z) enters the weighted mean as one "
                "more level, L = 1 (H5); off in the scripts.", bool),
    ConfigField("hgpo_penalty", "return", "where invalid_penalty enters HGPO's step return R_t (H1; PENALTY_PLACES): "
                "\"return\" (the code: off the invalid row's own discounted return), \"reward\" (off its reward, "
                "before discounting) or \"none\".", PENALTY_PLACES),
    ConfigField("hgpo_weight_eps", 1e-6, "the eps of the level weights' denominator, sum of the kept L^alpha + eps "
                "(H5).", float, non_negative),
)

register(CreditMethod(
    "hgpo", "A = sum_m w_m * Norm_{q, last m states}(R_t), w_m ~ (m + 1)^alpha: GiGPO's step groups at depths "
    "of history 1..K+1 (HGPO, arXiv 2602.22817)",
    hgpo_reference, hgpo_tables, row_keys=ROW_KEYS, fields=("gamma", *HGPO_FIELDS), check=check_weights))


__all__ = ["ROW_KEYS", "HGPO_FIELDS", "hgpo_reference", "hgpo_tables", "hgpo_step_returns", "history_contexts",
           "history_groups", "level_advantages", "level_weight", "weighted_levels", "depth_count",
           "hgpo_step_return_terms", "step_indices", "longest_episode", "context_ids", "level_advantage_terms",
           "weighted_level_terms", "check_weights"]
