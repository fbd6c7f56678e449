"""Milestone truth: how well each credit method's per-step scores find the environment's own milestones
(docs/milestone_truth.md: the figure, every score, the decisions).

MileGPO's contribution is to *infer* milestones and traps from the rollout graph; GraphGPO scores progress toward
the goal, GiGPO, HGPO and G2PO score steps by returns. None of them is told what a milestone is. The worlds are:
a :class:`~milegpo.credit.StepBatch` row's ``milestone`` says that its step completed one of the environment's
verifiable subgoals (household / ALFWorld: found, took, processed, placed the target; WebShop: BEACON's page
phases; ScienceWorld: a rise of the engine's score; a user environment: ``info["milestone"]``). This module asks,
for every step score a method computes, whether that score ranks the milestone steps above the other steps.

**Which steps are compared.** Within each task group (the rollouts of one task, which share one rollout graph),
every pair of one *intermediate milestone step* and one *other step*:

- intermediate milestone step: ``milestone`` true and ``next_state`` not the success sink g;
- other step: ``milestone`` false and ``next_state`` not g;
- a step into g (the winning step) is left out of both sides: every method is told the win by the reward, and
  the question is whether it finds the subgoals on the way (MileGPO's scores give g none by definition, spec
  section 1; GraphGPO's r^G is largest there).

**The figure.** ``milestone_auc``: of those pairs, the share in which the milestone step's score is higher (a tie,
within :data:`~milegpo.evidence.ranking.ADV_TIE_TOL`, counts 1/2), pooled over the pairs of all batches, with a
95% percentile bootstrap interval over task groups (the same resamples as :mod:`.quality`'s for the same batches)
and the paired difference to :data:`REFERENCE` over the same resamples. 0.5 is a coin; 1 puts every milestone
step above every other step of its group. Because pairs never leave a group, a score's per-group scale does not
matter (max-normalising a group's node scores, as the potentials do, leaves the figure unchanged).

**The scores** (:data:`STEP_SCORES`; s = the row's ``state``, s' = its ``next_state``, q its task group; every
array (N,) float64 in the batch's row order, read from the :class:`~milegpo.credit.CreditResult` of one label of
:func:`milegpo.credit.method_variants`):

- MileGPO (``milegpo-full``'s result; the node scores do not depend on the variant): the scores of the node the
  step enters, s'. ``milegpo_s_pcc`` is **the milestone score**: S_pcc+ (eq. 18) max-normalised within q, the
  score the full method (the paper's) seeds its milestone potential Phi+ with (eq. 19), 0 for a node outside the
  candidates S+. The others: ``milegpo_s0`` S0+ (eq. 5, RCS's seed, eq. 8), ``milegpo_coverage`` m(s') =
  |T+(s')| / max(K+, 1) (eq. 3), ``milegpo_candidate`` 1 if s' is in S+ (MD's uniform seed, eq. 7). The **trap
  score** ``milegpo_trap`` is *negated* so that higher = more milestone-like, as for every other row: -S-(s') /
  max of S- over q's traps for a trap s' (eq. 6), 0 for a node that is no trap. What the step is paid:
  ``milegpo_delta_pos`` delta+_t (eq. 9, the full variant's potentials) and ``milegpo_shaping`` r^M_t - r^G_t =
  c * lambda * (delta+_t - delta-_t) (eq. 20); ``milegpo_correction`` A^res = A^mix - A^G (eq. 21), the term MileGPO
  adds to GraphGPO's step advantage (weighted by eta, eq. 22).
- GraphGPO (``graphgpo``): ``graphgpo_return`` r^G_t = c * gamma_G^d(s', g) (eq. 1, its progress: how near the goal
  the step lands) and ``graphgpo_hop_gain`` d(s, g) - d(s', g) in hops, 0 where either distance is infinite
  (PCC's dd(e), eq. 15: how much nearer the step brings it); ``graphgpo_step_adv`` A^G = Norm_{q,s}(r^G) (eq. 21),
  its step advantage (the progress compared among the steps from one state).
- GiGPO (``gigpo``): ``gigpo_step_adv`` Norm_{q,s}(R_t), its step advantage; ``gigpo_return`` R_t, the step's
  discounted return (spec section 9).
- HGPO (``hgpo``): ``hgpo_adv`` its advantage, the weighted mean of the normalised returns over history depths
  (at the scripts' settings it has no episode term, so this is its step term); ``hgpo_depth1`` A_1, the depth-1
  level (GiGPO's step groups).
- G2PO (``g2po``): ``g2po_edge`` A_EC, the TD gain V(s') - V(s) normalised over q (its edge-centric term);
  ``g2po_node`` A_NC, V(s') normalised among the steps from s (its node-centric term).
- BEACON (``beacon``): ``beacon_segment_reward`` r_t (B2): 10 on a milestone step, 10 * gamma^k k steps before
  it, 0 after the last one. **BEACON is told the milestones** (:attr:`StepScore.told`): its segment reward is
  largest on every valid milestone step by construction, so its figure is ~1 (an upper reference, not a finding).
- Every method: ``<label>_advantage`` A_t, what the step is trained on (GRPO's is the episode term alone: the
  floor of a method that scores no step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..credit import SINK, CreditResult, StepBatch
from .ranking import bootstrap_ratios, bootstrap_weights, percentile_interval, ranked_above, ratio


@dataclass(frozen=True)
class StepScore:
    """One per-step score of one method: ``key`` names it in reports; ``label`` is the
    :func:`milegpo.credit.method_variants` label whose :class:`~milegpo.credit.CreditResult` it reads; ``compute``
    maps that result to (N,) float64 in the batch's row order; ``definition`` says what it is (the module's
    docstring has the equations); ``told``: the method is given the milestones (its figure is high by
    construction)."""

    key: str
    label: str
    definition: str
    compute: Callable[[CreditResult], np.ndarray]
    told: bool = False


def _rows(result: CreditResult, key: str) -> np.ndarray:
    return result.rows[key].detach().cpu().numpy().astype(np.float64)


def _nodes(result: CreditResult, key: str) -> np.ndarray:
    return result.nodes[key].detach().cpu().numpy()


def _next_node(result: CreditResult) -> np.ndarray:
    return result.rows["next_node"].detach().cpu().numpy()


def group_max_normalised(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """``values / max(values of the same group)``, 0 in a group whose max is not positive (spec sections 5, 6).

    values: (V,) float64, non-negative; group: (V,) int64. Returns (V,) float64."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return values
    _, dense = np.unique(group, return_inverse=True)
    dense = dense.reshape(-1)
    top = np.zeros(int(dense.max()) + 1)
    np.maximum.at(top, dense, values)
    top = top[dense]
    return np.divide(values, top, out=np.zeros_like(values), where=top > 0)


def node_score_of_next(result: CreditResult, node_values: np.ndarray) -> np.ndarray:
    """The per-node ``node_values`` ((V,) float64, the result's node order) of every row's s'; 0 where s' is the
    sink g (never a milestone or a trap, spec section 1: its coverage would be 1)."""
    values = np.where(_nodes(result, "is_sink"), 0.0, np.asarray(node_values, dtype=np.float64))
    return values[_next_node(result)]


def milestone_score(result: CreditResult) -> np.ndarray:
    """S_pcc+(s') max-normalised within the group (eq. 18; 0 outside S+): MileGPO's milestone score."""
    return node_score_of_next(result, group_max_normalised(_nodes(result, "s_pcc"), _nodes(result, "group")))


def s0_score(result: CreditResult) -> np.ndarray:
    """S0+(s') max-normalised within the group (eq. 5, RCS's seed eq. 8; 0 outside S+)."""
    return node_score_of_next(result, group_max_normalised(_nodes(result, "s0_pos"), _nodes(result, "group")))


def coverage_score(result: CreditResult) -> np.ndarray:
    """m(s') = |T+(s')| / max(K+, 1) (eq. 3)."""
    return node_score_of_next(result, _nodes(result, "coverage"))


def candidate_score(result: CreditResult) -> np.ndarray:
    """1 where s' is a milestone candidate (in S+: MD's uniform seed, eq. 7), else 0."""
    return node_score_of_next(result, _nodes(result, "is_milestone").astype(np.float64))


def trap_score(result: CreditResult) -> np.ndarray:
    """-S-bar(s'): minus S-(s') / max of S- over the group's traps for a trap s' (eq. 6, the seed of Phi-,
    eq. 8), 0 for a node that is no trap. Negated: higher = less trap-like."""
    is_trap = _nodes(result, "is_trap")
    trap_values = np.where(is_trap, _nodes(result, "s_neg").astype(np.float64), 0.0)
    return -node_score_of_next(result, group_max_normalised(trap_values, _nodes(result, "group")))


def shaping_score(result: CreditResult) -> np.ndarray:
    """r^M_t - r^G_t = c * lambda * (delta+_t - delta-_t) (eq. 20)."""
    return _rows(result, "r_shaped") - _rows(result, "r_graph")


def hop_gain(result: CreditResult) -> np.ndarray:
    """d(s, g) - d(s', g) in hops, 0 where either is infinite (eq. 15's dd(e))."""
    dist = _nodes(result, "dist")
    here, there = dist[result.rows["node"].detach().cpu().numpy()], dist[_next_node(result)]
    return np.where((here >= 0) & (there >= 0), here - there, 0).astype(np.float64)


def _row_score(key: str) -> Callable[[CreditResult], np.ndarray]:
    def compute(result: CreditResult) -> np.ndarray:
        return _rows(result, key)

    compute.__doc__ = f"The result's per-row {key!r}."
    return compute


def _advantage(result: CreditResult) -> np.ndarray:
    return result.advantages.detach().cpu().numpy().astype(np.float64)


#: every step score, in the order reports list them (definitions: the module's docstring)
STEP_SCORES: tuple[StepScore, ...] = (
    StepScore("milegpo_s_pcc", "milegpo-full", "S_pcc+(s') / max over q (eq. 18): MileGPO's milestone score",
              milestone_score),
    StepScore("milegpo_s0", "milegpo-full", "S0+(s') / max over q (eq. 5, RCS's seed)", s0_score),
    StepScore("milegpo_coverage", "milegpo-full", "m(s') = |T+(s')| / max(K+, 1) (eq. 3)", coverage_score),
    StepScore("milegpo_candidate", "milegpo-full", "1 if s' in S+ (MD's seed, eq. 7)", candidate_score),
    StepScore("milegpo_trap", "milegpo-full", "-S-(s') / max over q's traps (eq. 6), negated: higher = less trap",
              trap_score),
    StepScore("milegpo_delta_pos", "milegpo-full", "delta+_t (eq. 9): the potential gain the step is paid",
              _row_score("delta_pos")),
    StepScore("milegpo_shaping", "milegpo-full", "r^M_t - r^G_t = c lambda (delta+_t - delta-_t) (eq. 20)",
              shaping_score),
    StepScore("milegpo_correction", "milegpo-full", "A^res = A^mix - A^G (eq. 21): the correction MileGPO adds",
              _row_score("a_res")),
    StepScore("graphgpo_return", "graphgpo", "r^G_t = c gamma_G^d(s', g) (eq. 1): GraphGPO's progress",
              _row_score("r_graph")),
    StepScore("graphgpo_hop_gain", "graphgpo", "d(s, g) - d(s', g), 0 if either is infinite (eq. 15's dd)", hop_gain),
    StepScore("graphgpo_step_adv", "graphgpo", "A^G = Norm_{q,s}(r^G) (eq. 21): GraphGPO's step advantage",
              _row_score("a_graph")),
    StepScore("gigpo_step_adv", "gigpo", "Norm_{q,s}(R_t): GiGPO's step advantage", _row_score("step_adv")),
    StepScore("gigpo_return", "gigpo", "R_t = sum_k gamma^(k-t) reward_k: the step's discounted return",
              _row_score("step_return")),
    StepScore("hgpo_depth1", "hgpo", "A_1: the depth-1 level (GiGPO's step groups)", _row_score("depth1_adv")),
    StepScore("g2po_edge", "g2po", "A_EC: the TD gain V(s') - V(s), normalised over q", _row_score("a_ec")),
    StepScore("g2po_node", "g2po", "A_NC: V(s'), normalised among the steps from s", _row_score("a_nc")),
    StepScore("beacon_segment_reward", "beacon", "r_t (B2): 10 gamma^k, k steps before the segment's milestone",
              _row_score("segment_reward"), told=True),
    StepScore("grpo_advantage", "grpo", "A_t = Norm_q(Z): the episode term alone (no step score)", _advantage),
    StepScore("gigpo_advantage", "gigpo", "A_t: GiGPO's advantage", _advantage),
    StepScore("graphgpo_advantage", "graphgpo", "A_t: GraphGPO's advantage", _advantage),
    StepScore("milegpo_advantage", "milegpo-full", "A_t: MileGPO's (full) advantage", _advantage),
    StepScore("hgpo_advantage", "hgpo", "A_t: HGPO's advantage (its step term: no episode term at the preset)",
              _advantage),
    StepScore("g2po_advantage", "g2po", "A_t: G2PO's advantage", _advantage),
    StepScore("beacon_advantage", "beacon", "A_t: BEACON's advantage", _advantage, told=True),
)
SCORES_BY_KEY = {score.key: score for score in STEP_SCORES}
#: the score every other is compared with (paired over the bootstrap's resamples): GraphGPO's progress
REFERENCE = "graphgpo_return"
#: the scores of the short table (``format_milestone_truth(..., short=True)``, the README's)
SHORT = ("milegpo_s_pcc", "milegpo_s0", "milegpo_coverage", "milegpo_trap", "milegpo_delta_pos",
         "milegpo_correction", "graphgpo_return", "graphgpo_hop_gain", "graphgpo_step_adv", "gigpo_step_adv",
         "hgpo_depth1", "g2po_edge", "beacon_segment_reward", "grpo_advantage")


def step_scores(results: dict, scores: Sequence[StepScore] = STEP_SCORES) -> dict[str, np.ndarray]:
    """``{key: (N,) float64}`` of every score of ``scores`` whose label is in ``results`` (``{label:
    CreditResult}`` of one batch, as :func:`milegpo.credit.estimate_merged` returns them)."""
    out = {}
    for score in scores:
        if score.label in results:
            values = np.asarray(score.compute(results[score.label]), dtype=np.float64)
            n = len(results[score.label])
            if values.shape != (n,):
                raise ValueError(f"step score {score.key!r} gave shape {values.shape}, expected ({n},)")
            out[score.key] = values
    return out


def milestone_sides(batch: StepBatch) -> tuple[np.ndarray, np.ndarray]:
    """(intermediate milestone rows, other rows) of ``batch``: two (N,) bool masks, neither holding a row whose
    ``next_state`` is the success sink (see the module's docstring)."""
    cols = batch.to_numpy()
    kept = cols["next_state"] != SINK
    milestone = cols["milestone"].astype(bool)
    return kept & milestone, kept & ~milestone


def group_units(batch: StepBatch) -> tuple[np.ndarray, int]:
    """Each row's task group as a dense id 0..G-1 ((N,) int64) and G."""
    _, dense = np.unique(batch.group.numpy(), return_inverse=True)
    dense = dense.reshape(-1)
    return dense, int(dense.max()) + 1 if dense.size else 0


def milestone_pair_scores(values: np.ndarray, batch: StepBatch, sides: tuple[np.ndarray, np.ndarray] | None = None,
                          units: tuple[np.ndarray, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per task group of ``batch`` (dense ids): the summed pair scores of ``values`` over its (intermediate
    milestone, other) pairs and the pair count. values: (N,) float64; ``sides`` / ``units``: the batch's
    :func:`milestone_sides` / :func:`group_units`, when the caller scores several values of one batch (None:
    computed here). Returns two (G,) float64 arrays."""
    positive, negative = milestone_sides(batch) if sides is None else sides
    group, n_groups = group_units(batch) if units is None else units
    won, pairs = np.zeros(n_groups), np.zeros(n_groups)
    for g in np.unique(group[positive]):
        mine = group == g
        pos, neg = values[mine & positive], values[mine & negative]
        won[g] = ranked_above(pos, neg)
        pairs[g] = float(pos.size * neg.size)
    return won, pairs


def milestone_truth(batches: Sequence[StepBatch], scores: Sequence[dict], n_resamples: int = 2000, seed: int = 0,
                    reference: str | None = REFERENCE) -> dict:
    """``milestone_auc`` of every score, pooled over ``batches`` with bootstrap intervals over task groups.

    batches: B StepBatches (their ``milestone`` fields the truth); scores: per batch ``{key: (N,) float64}``
    (:func:`step_scores`; the same keys in every batch); reference: the key the others are compared with, paired
    over the same resamples (None: none). The resamples are :mod:`.quality`'s (units: the task groups of each
    batch in turn; ``seed``), so one seed gives both reports the same draws.

    Returns ``{"scores": {key: {"milestone_auc", "ci", "pairs", "per_batch", "minus_<reference>": {"value",
    "ci"}, "label", "definition", "told"}}, "labels": {"rows", "milestone_rows", "winning_rows",
    "intermediate_milestones", "groups", "groups_with_pairs", "batches"}, "reference"}``; NaN where there are no
    pairs (a world that marks no milestone, or none before the win)."""
    if len(batches) != len(scores) or not batches:
        raise ValueError(f"milestone_truth: {len(batches)} batches and {len(scores)} score sets: need one of each "
                         "per batch, at least one")
    keys = list(scores[0])
    won: dict[str, list] = {k: [] for k in keys}
    per_batch: dict[str, list] = {k: [] for k in keys}
    counts, sides = [], []
    for b, batch in enumerate(batches):
        if set(scores[b]) != set(keys):
            raise ValueError(f"milestone_truth: batch {b} has scores {sorted(scores[b])}, batch 0 {sorted(keys)}")
        sides.append(milestone_sides(batch))
        units = group_units(batch)
        batch_pairs = None
        for k in keys:
            values = np.asarray(scores[b][k], dtype=np.float64)
            if values.shape != (len(batch),):
                raise ValueError(f"milestone_truth: score {k!r} of batch {b} has shape {values.shape}, the batch "
                                 f"({len(batch)},)")
            w, batch_pairs = milestone_pair_scores(values, batch, sides[b], units)
            won[k].append(w)
            per_batch[k].append(ratio(float(w.sum()), float(batch_pairs.sum())))
        if batch_pairs is None:  # no scores: the pairs still count
            batch_pairs = milestone_pair_scores(np.zeros(len(batch)), batch, sides[b], units)[1]
        counts.append(batch_pairs)
    count = np.concatenate(counts)
    weights = bootstrap_weights(len(count), n_resamples, seed)
    out: dict = {"scores": {}, "reference": reference if reference in keys else None}
    boot = {k: bootstrap_ratios(np.concatenate(won[k]), count, weights) for k in keys}
    totals = {k: ratio(float(np.concatenate(won[k]).sum()), float(count.sum())) for k in keys}
    for k in keys:
        spec = SCORES_BY_KEY.get(k)
        entry: dict = {"milestone_auc": totals[k], "ci": percentile_interval(boot[k]), "pairs": int(count.sum()),
                       "per_batch": per_batch[k], "label": spec.label if spec else "",
                       "definition": spec.definition if spec else "", "told": bool(spec.told) if spec else False}
        if out["reference"] is not None and k != reference:
            entry[f"minus_{reference}"] = {"value": totals[k] - totals[reference],
                                           "ci": percentile_interval(boot[k] - boot[reference])}
        out["scores"][k] = entry
    out["labels"] = {"batches": len(batches), "rows": int(sum(len(batch) for batch in batches)),
                     "milestone_rows": int(sum(int(batch.milestone.sum()) for batch in batches)),
                     "winning_rows": int(sum(int((batch.next_state == SINK).sum()) for batch in batches)),
                     "intermediate_milestones": int(sum(int(pos.sum()) for pos, _ in sides)),
                     "groups": int(len(count)), "groups_with_pairs": int((count > 0).sum())}
    return out


def format_milestone_truth(report: dict, short: bool = False) -> str:
    """A plain-text table of a :func:`milestone_truth` report: each score's figure with its 95% interval, its
    difference to the reference, and its definition (``short``: the scores of :data:`SHORT` only)."""
    ref = report.get("reference")
    lines = [f"{'score':<22}{'milestone AUC':>24}{'minus ' + (ref or '-'):>34}  definition"]
    for k, entry in report["scores"].items():
        if short and k not in SHORT:
            continue
        v, (lo, hi) = entry["milestone_auc"], entry["ci"]
        cell = "n/a" if v is None or math.isnan(v) else f"{v:.3f} [{lo:.3f}, {hi:.3f}]"
        diff = entry.get(f"minus_{ref}")
        dcell = "" if diff is None or math.isnan(diff["value"]) else \
            f"{diff['value']:+.3f} [{diff['ci'][0]:+.3f}, {diff['ci'][1]:+.3f}]"
        told = " (told the milestones)" if entry["told"] else ""
        lines.append(f"{k:<22}{cell:>24}{dcell:>34}  {entry['definition']}{told}")
    lab = report["labels"]
    lines.append(f"pairs {next(iter(report['scores'].values()))['pairs'] if report['scores'] else 0}: "
                 f"{lab['intermediate_milestones']} intermediate milestone steps of {lab['rows']} rows "
                 f"({lab['milestone_rows']} milestone rows, {lab['winning_rows']} winning rows left out), "
                 f"{lab['groups_with_pairs']} of {lab['groups']} groups with pairs")
    return "\n".join(lines)


def plot_milestone_truth(report: dict, path, title: str = "") -> str:
    """Bars of every score's figure with its 95% interval (0.5: a coin; hatched: told the milestones)."""
    from ..job.plots import pyplot, save_figure

    keys = list(report["scores"])
    fig, ax = pyplot().subplots(figsize=(max(7.0, 0.55 * len(keys)), 4.2))
    vals = [report["scores"][k]["milestone_auc"] for k in keys]
    vals = [float("nan") if v is None else v for v in vals]
    lo = [v - report["scores"][k]["ci"][0] if not math.isnan(v) else 0 for k, v in zip(keys, vals)]
    hi = [report["scores"][k]["ci"][1] - v if not math.isnan(v) else 0 for k, v in zip(keys, vals)]
    bars = ax.bar(range(len(keys)), vals, yerr=[lo, hi], capsize=2)
    for bar, k in zip(bars, keys):
        if report["scores"][k]["told"]:
            bar.set_hatch("//")
    ax.axhline(0.5, color="gray", ls="--", lw=1)
    ax.set_xticks(range(len(keys)), keys, rotation=60, ha="right", fontsize=7)
    ax.set_ylim(0, 1)
    ax.set_ylabel("milestone step ranked above other steps")
    ax.set_title(title or "milestone truth (95% bootstrap intervals over groups; hatched: told the milestones)",
                 fontsize=9)
    fig.tight_layout()
    return str(save_figure(fig, path))


__all__ = ["StepScore", "STEP_SCORES", "SCORES_BY_KEY", "REFERENCE", "SHORT", "step_scores", "milestone_sides",
           "group_units", "milestone_pair_scores", "milestone_truth", "format_milestone_truth",
           "plot_milestone_truth", "group_max_normalised", "node_score_of_next", "milestone_score", "s0_score",
           "coverage_score", "candidate_score", "trap_score", "shaping_score", "hop_gain"]
