"""Ground-truth credit quality: how often a credit method ranks a good step above a bad one.

The paper's diagnostics (:func:`milegpo.credit.diagnostics`) count agreement between estimators; these
measure agreement with the truth. A step's label comes from the world's own knowledge of the hidden state
(:meth:`milegpo.envs.TextEnv.steps_to_win`, e.g. the household planner): a step is **good** when it is valid
and lowers the steps-to-win by one (it is on an optimal path), **bad** otherwise (:func:`step_labels`).
Batches come with labels as a :class:`LabelledBatch` (:mod:`milegpo.evidence.labelled` plays them).

For every method (and variant) on the same batches:

- ``same_state_auc``: over pairs of rows of one (group, state), one good and one bad, the share where the
  good one has the higher advantage (ties count 1/2): credit where the methods' step terms compete;
- ``group_auc``: the same over pairs of rows of one task group, any states;
- ``tied_pair_accuracy``: the same over the same-state pairs whose GraphGPO step credit A^G ties
  (within :data:`~milegpo.credit.diagnostic_metrics.TIE_TOL`, the tie-correction rate's pairs, spec section 11): the
  pairs MileGPO's correction is for.

Beside them, ``milegpo credit-quality`` reports the milestone truth of every method's step scores on the same
batches (:mod:`.milestones`: do they rank the steps that completed one of the world's subgoals above the
others?).

Advantages equal to :data:`ADV_TIE_TOL` are a tie. Each figure is pooled over the pairs of all batches, with
a 95% percentile bootstrap interval over task groups (groups resampled with replacement, the same
resamples for every method, so differences between methods get intervals too).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ..credit import SketchTable, estimate_merged, method_variants
from ..credit.batch import StepBatch
from ..credit.config import CreditConfig
from ..credit.diagnostic_metrics import TIE_TOL, diagnostics, same_state_pairs
from ..usage import UsageError
from .milestones import format_milestone_truth, milestone_truth, plot_milestone_truth, step_scores
from .labelled import LabelledBatch, step_labels  # re-exported: the labelled batches this module scores
from .ranking import (ADV_TIE_TOL, bootstrap_ratios, bootstrap_weights, ordered_share,  # re-exported
                      percentile_interval, pooled_ratio, ratio)

METRICS = ("same_state_auc", "group_auc", "tied_pair_accuracy")
#: diagnostics (spec section 11) reported beside the ground-truth figures, averaged over batches
DIAGNOSTIC_KEYS = ("tie_correction_rate", "tie_pairs", "tie_share", "shared_state_coverage", "candidates",
                   "pcc_progress_share", "pcc_branch_share")


def labelled_pairs(first: np.ndarray, second: np.ndarray, good: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of the row pairs (``first[p]``, ``second[p]``), those with one good and one bad row, as
    (good row, bad row): two (P,) int64 arrays."""
    mixed = good[first] != good[second]
    first, second = first[mixed], second[mixed]
    first_good = good[first]
    return np.where(first_good, first, second), np.where(first_good, second, first)


@dataclass
class PairSets:
    """The labelled pairs of one batch: for each metric (good row, bad row, the pair's task group); and per task
    group the same-state row pairs (any labels) and those whose A^G ties (``tied``, ``same_state``: (G,) float64),
    the counts of GraphGPO's tie share."""

    pairs: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]
    n_groups: int
    tied: np.ndarray
    same_state: np.ndarray


def pair_sets(labelled: LabelledBatch, a_graph: np.ndarray) -> PairSets:
    """The pairs of :data:`METRICS` in one batch; a_graph: (N,) float64, GraphGPO's A^G (for the ties)."""
    cols = labelled.batch.to_numpy()
    _, group = np.unique(cols["group"], return_inverse=True)
    group = group.reshape(-1)
    n_groups = int(group.max()) + 1 if len(group) else 0
    good = labelled.good
    first, second = same_state_pairs(group, cols["state"])
    same_good, same_bad = labelled_pairs(first, second, good)
    all_good, all_bad = labelled_pairs(*same_state_pairs(group, np.zeros_like(group)), good)
    tied = np.abs(a_graph[same_good] - a_graph[same_bad]) <= TIE_TOL
    sets = {"same_state_auc": (same_good, same_bad), "group_auc": (all_good, all_bad),
            "tied_pair_accuracy": (same_good[tied], same_bad[tied])}
    tied_any = (np.abs(a_graph[first] - a_graph[second]) <= TIE_TOL).astype(np.float64)
    return PairSets({k: (g, b, group[g]) for k, (g, b) in sets.items()}, n_groups,
                    np.bincount(group[first], weights=tied_any, minlength=n_groups).astype(np.float64),
                    np.bincount(group[first], minlength=n_groups).astype(np.float64))


def _runs(config: CreditConfig, methods=None) -> dict:
    """label -> (method, variant, config with the label's changes) of :func:`milegpo.credit.method_variants`
    (or of ``methods``)."""
    labels = method_variants()
    shared = config.as_preset()  # one config for every method, each reading its own fields of it
    runs = {}
    for name in methods or labels:
        method, variant, changes = labels[name]
        runs[name] = (method, variant, shared.replace(**changes) if changes else shared)
    return runs


def estimate_all(batch: StepBatch, config: CreditConfig, backend: str = "auto", methods=None) -> dict:
    """``{name: CreditResult}`` of every label of :func:`milegpo.credit.method_variants` (every registered method,
    variant and measured setting; or of ``methods``) on ``batch``."""
    return estimate_merged(batch, _runs(config, methods), backend)[1]


def _sketches(labelled: LabelledBatch, similarity):
    if labelled.texts is None:
        raise ValueError(f"with_similar_states: the batch of {labelled.source!r} seed {labelled.seed} has no "
                         "observation texts (LabelledBatch.texts; milegpo.evidence.labelled records them)")
    return SketchTable.from_texts(labelled.texts, similarity)


def with_similar_states(labelled: LabelledBatch, similarity, backend: str = "auto") -> LabelledBatch:
    """The labelled batch with near-duplicate states merged (:func:`milegpo.credit.estimate_merged`'s merge of
    the sketches of ``labelled.texts`` under ``similarity``, a :class:`~milegpo.state_sketches.StateSimilarity`);
    rows and labels unchanged."""
    merged, _ = estimate_merged(labelled.batch, {}, backend, similarity, _sketches(labelled, similarity))
    return dataclasses.replace(labelled, batch=merged)


def distinct_states(batches: list[LabelledBatch]) -> int:
    """Distinct (task group, state) pairs of the rows' ``state``, summed over ``batches``."""
    return sum(len(np.unique(np.stack([lb.batch.group.numpy(), lb.batch.state.numpy()]), axis=1).T)
               for lb in batches)


def aliased_share(batches: list[LabelledBatch]) -> float:
    """Of the same-state row pairs of ``batches`` (any labels), the share whose rows are at different
    steps-to-win before their action: one state key for situations of different true distance from a win
    (NaN without pairs)."""
    aliased = pairs = 0
    for lb in (lb for lb in batches if lb.labelled):  # a world without a planner: no steps-to-win to compare
        first, second = same_state_pairs(lb.batch.group.numpy(), lb.batch.state.numpy())
        aliased += int((lb.steps_before[first] != lb.steps_before[second]).sum())
        pairs += len(first)
    return ratio(aliased, pairs)


def state_summary(batches: list[LabelledBatch], anchor: str) -> dict:
    """The aliasing diagnostic of ``batches`` keyed by state anchor ``anchor``: ``{"anchor", "distinct"}``
    (:func:`distinct_states`), ``"aliased_share"`` (:func:`aliased_share`, the planner's truth) and ``"pairs"``
    (the same-state row pairs it is a share of)."""
    pairs = sum(len(same_state_pairs(lb.batch.group.numpy(), lb.batch.state.numpy())[0]) for lb in batches)
    return {"anchor": anchor, "distinct": distinct_states(batches), "aliased_share": aliased_share(batches),
            "pairs": pairs}


def credit_quality(batches: list[LabelledBatch], config: CreditConfig, backend: str = "auto",
                   n_resamples: int = 2000, seed: int = 0, methods=None, reference: str = "graphgpo") -> dict:
    """Ground-truth credit quality of every label of :func:`milegpo.credit.method_variants` (or ``methods``) on
    ``batches``, each estimated with ``config`` on ``backend``; see :func:`quality_of_advantages`, which
    this feeds with the advantages, GraphGPO's A^G and the credit diagnostics of every batch."""
    if not batches:
        raise ValueError("credit_quality: no batches")
    names = list(methods or method_variants())
    names += [m for m in dict.fromkeys([reference, "graphgpo"]) if m not in names]  # graphgpo: its A^G ties
    advantages, a_graphs, diags = method_advantages(batches, config, backend, names)
    return quality_of_advantages(batches, advantages, a_graphs, diags, n_resamples, seed, reference)


def method_advantages(batches: list[LabelledBatch], config: CreditConfig, backend: str = "auto", methods=None):
    """What :func:`quality_of_advantages` reads, for every method of ``methods`` (default
    :func:`milegpo.credit.method_variants`; it must hold ``graphgpo``): per batch ``{name: (N,) float64}`` advantages,
    GraphGPO's A^G ((N,) float64) and ``{name: diagnostics}``, as three lists."""
    return similar_state_advantages(batches, None, config, backend, methods)[1]


def similar_state_advantages(batches: list[LabelledBatch], similarity, config: CreditConfig, backend: str = "auto",
                             methods=None, with_scores: bool = False):
    """Every batch with near-duplicate states merged under ``similarity`` (None: exact keys) and every method
    estimated on it, one :func:`milegpo.credit.estimate_merged` call per batch (the trainer's sequence).
    Returns (the batches the estimates saw, :func:`method_advantages`' three lists of them, per batch the
    step scores of :func:`milegpo.evidence.milestones.step_scores` of the methods estimated, with
    ``with_scores``; else None: they cost a host copy of every score)."""
    runs = _runs(config, methods)
    seen, advantages, a_graphs, diags, scores = [], [], [], [], []
    for labelled in batches:
        table = _sketches(labelled, similarity) if similarity is not None else None
        merged, results = estimate_merged(labelled.batch, runs, backend, similarity, table)
        seen.append(labelled if similarity is None else dataclasses.replace(labelled, batch=merged))
        advantages.append({m: r.advantages.cpu().numpy() for m, r in results.items()})
        a_graphs.append(results["graphgpo"].rows["a_graph"].cpu().numpy())
        diags.append({m: diagnostics(r) for m, r in results.items()})
        if with_scores:
            scores.append(step_scores(results))
    return seen, (advantages, a_graphs, diags), scores if with_scores else None


def against_exact(batches: list[LabelledBatch], exact: list[dict], merged: list[dict], a_graphs: list[np.ndarray],
                  n_resamples: int = 2000, seed: int = 0) -> dict:
    """Each method with merged states against itself with exact keys, on the exact keys' pairs (so the
    group AUC's pairs are the same, and the same-state pairs are those of identical observations), paired
    over the same bootstrap resamples of groups.

    batches: the B labelled batches with exact keys; exact / merged: per batch ``{name: (N,) advantages}``
    with exact and with merged states; a_graphs: per batch GraphGPO's A^G with exact keys. Returns ``{name:
    {metric: {"exact", "merged", "value" (merged - exact), "ci"}}}``."""
    out = {}
    for m in exact[0]:
        rep = quality_of_advantages(batches, [{m: e[m], f"{m}@merged": g[m]} for e, g in zip(exact, merged)],
                                    a_graphs, None, n_resamples, seed, reference=m)["methods"]
        out[m] = {k: {"exact": rep[m][k], "merged": rep[f"{m}@merged"][k], **rep[f"{m}@merged"][f"minus_{m}"][k]}
                  for k in METRICS}
    return out


def quality_of_advantages(batches: list[LabelledBatch], advantages: list[dict], a_graphs: list[np.ndarray],
                          diagnostics: list[dict] | None = None, n_resamples: int = 2000, seed: int = 0,
                          reference: str | None = "graphgpo") -> dict:
    """The figures of :data:`METRICS` for given advantages.

    batches: B labelled batches; advantages: per batch ``{name: (N,) float64}`` (the same names in every
    batch); a_graphs: per batch GraphGPO's A^G, (N,) float64 (the ties of ``tied_pair_accuracy``);
    diagnostics: per batch ``{name: milegpo.credit.diagnostics(...)}`` (optional); reference: the method the others
    are compared with (``minus_<reference>``, paired over the same resamples), None for none.

    Returns ``{"methods": {name: {"same_state_auc", "group_auc", "tied_pair_accuracy", "ci": {metric: [lo,
    hi]}, "pairs": {metric: count}, "per_batch": {metric: [value per batch]}, "minus_<reference>": {metric:
    {"value", "ci"}}, "diagnostics": {...}}}, "ties": {"tie_share", "ci", "tied_pairs", "same_state_pairs"},
    "labels": {...}}``: ``ties`` is GraphGPO's tie share (same-state row pairs, any labels, whose A^G ties) pooled
    over the batches with its bootstrap interval over the same groups; NaN where a figure has no pairs."""
    if not (len(batches) == len(advantages) == len(a_graphs)) or not batches:
        raise ValueError(f"quality_of_advantages: {len(batches)} batches, {len(advantages)} advantage sets and "
                         f"{len(a_graphs)} A^G arrays: need one of each per batch, at least one")
    names = list(advantages[0])
    # per unit (a task group of one batch) and metric: summed pair scores and pair counts, per method
    score = {m: {k: [] for k in METRICS} for m in names}
    count = {k: [] for k in METRICS}
    tied, same_state = [], []
    per_batch = {m: {k: [] for k in METRICS} for m in names}
    for b, labelled in enumerate(batches):
        if set(advantages[b]) != set(names):
            raise ValueError(f"quality_of_advantages: batch {b} has methods {sorted(advantages[b])}, batch 0 {names}")
        sets = pair_sets(labelled, a_graphs[b])
        for k, (good_row, bad_row, group) in sets.pairs.items():
            count[k].append(np.bincount(group, minlength=sets.n_groups))
        tied.append(sets.tied)
        same_state.append(sets.same_state)
        for m in names:
            adv = np.asarray(advantages[b][m], dtype=np.float64)
            if adv.shape != labelled.good.shape:
                raise ValueError(f"quality_of_advantages: advantages of {m!r} in batch {b} have shape {adv.shape}, "
                                 f"the batch {labelled.good.shape}")
            for k, (good_row, bad_row, group) in sets.pairs.items():
                shares = ordered_share(adv, good_row, bad_row)
                score[m][k].append(np.bincount(group, weights=shares, minlength=sets.n_groups))
                per_batch[m][k].append(ratio(float(shares.sum()), len(shares)))
    counts = {k: np.concatenate(v).astype(np.float64) for k, v in count.items()}
    scores = {m: {k: np.concatenate(v).astype(np.float64) for k, v in d.items()} for m, d in score.items()}
    n_units = len(counts[METRICS[0]])
    weights = bootstrap_weights(n_units, n_resamples, seed)
    boot = {m: {k: bootstrap_ratios(scores[m][k], counts[k], weights) for k in METRICS} for m in names}
    out: dict = {"methods": {}}
    for m in names:
        entry: dict = {k: ratio(float(scores[m][k].sum()), float(counts[k].sum())) for k in METRICS}
        entry["ci"] = {k: percentile_interval(boot[m][k]) for k in METRICS}
        entry["pairs"] = {k: int(counts[k].sum()) for k in METRICS}
        entry["per_batch"] = per_batch[m]
        if reference is not None and m != reference and reference in names:
            entry[f"minus_{reference}"] = {
                k: {"value": entry[k] - ratio(float(scores[reference][k].sum()), float(counts[k].sum())),
                    "ci": percentile_interval(boot[m][k] - boot[reference][k])} for k in METRICS}
        if diagnostics is not None:
            ds = [d[m] for d in diagnostics]
            entry["diagnostics"] = {key: _nanmean([d.get(key, float("nan")) for d in ds]) for key in DIAGNOSTIC_KEYS
                                    if any(key in d for d in ds)}
            # each batch's own (one per seed and source: the spread over seeds gives their intervals)
            entry["diagnostics_per_batch"] = {key: [float(d.get(key, float("nan"))) for d in ds]
                                              for key in entry["diagnostics"]}
        out["methods"][m] = entry
    tie_share, tie_ci = pooled_ratio(np.concatenate(tied), np.concatenate(same_state), weights)
    out["ties"] = {"tie_share": tie_share, "ci": tie_ci, "tied_pairs": int(sum(t.sum() for t in tied)),
                   "same_state_pairs": int(sum(p.sum() for p in same_state))}
    good = np.concatenate([b.good for b in batches])
    out["labels"] = {"rows": int(good.size), "good_share": float(good.mean()) if good.size else float("nan"),
                     "batches": len(batches), "groups": n_units,
                     "success_rate": _nanmean([_trajectory_success(b.batch) for b in batches]),
                     "invalid_share": float(np.concatenate([b.batch.invalid.numpy() for b in batches]).mean())}
    return out


def _trajectory_success(batch: StepBatch) -> float:
    cols = batch.to_numpy()
    _, first = np.unique(cols["traj"], return_index=True)
    return float(cols["success"][first].mean()) if first.size else float("nan")


def _nanmean(xs) -> float:
    xs = [float(x) for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return sum(xs) / len(xs) if xs else float("nan")


def format_quality(report: dict) -> str:
    """A plain-text table of a :func:`credit_quality` report (values with their 95% intervals)."""
    def cell(entry, k):
        v, (lo, hi) = entry[k], entry["ci"][k]
        return "n/a" if math.isnan(v) else f"{v:.3f} [{lo:.3f}, {hi:.3f}]"

    lines = [f"{'method':<14}" + "".join(f"{k:>28}" for k in METRICS)]
    for m, entry in report["methods"].items():
        lines.append(f"{m:<14}" + "".join(f"{cell(entry, k):>28}" for k in METRICS))
    first = next(iter(report["methods"].values()))
    lines.append(f"{'pairs':<14}" + "".join(f"{first['pairs'][k]:>28}" for k in METRICS))
    return "\n".join(lines)


def plot_quality(report: dict, path, title: str = "") -> str:
    """Bars of the three figures per method with their 95% intervals (0.5: no better than a coin)."""
    from ..job.plots import pyplot, save_figure

    methods = list(report["methods"])
    fig, ax = pyplot().subplots(figsize=(max(7.0, 1.3 * len(methods)), 3.8))
    width = 0.8 / len(METRICS)
    for j, k in enumerate(METRICS):
        xs = [i + (j - 1) * width for i in range(len(methods))]
        vals = [report["methods"][m][k] for m in methods]
        lo = [v - report["methods"][m]["ci"][k][0] for m, v in zip(methods, vals)]
        hi = [report["methods"][m]["ci"][k][1] - v for m, v in zip(methods, vals)]
        ax.bar(xs, vals, width, yerr=[lo, hi], capsize=2, label=k.replace("_", " "))
    ax.axhline(0.5, color="gray", ls="--", lw=1)
    ax.set_xticks(range(len(methods)), methods, rotation=20)
    ax.set_ylim(0, 1)
    ax.set_ylabel("good step ranked above bad")
    ax.legend(fontsize=8)
    ax.set_title(title or "ground-truth credit quality (95% bootstrap intervals over groups)", fontsize=9)
    fig.tight_layout()
    return str(save_figure(fig, path))


# ---------------------------------------------------------------------------------------------- the command
#: the first game seed / goal index of the quality batches: generated worlds far from the training runs' seeds;
#: WebShop has a fixed goal list (the embedded catalog's train split: 1,921 goals, training runs take them from
#: 0 on), so its batches take the train goals from 1,000 on; ALFWorld's games are a fixed set (often a few
#: generated ones), taken from the first; ScienceWorld's train variations likewise (150 per type at most)
QUALITY_START = {"webshop": 1_000, "alfworld": 0, "scienceworld": 0}
QUALITY_START_DEFAULT = 100_000


def default_preset(env: str) -> str:
    """The credit preset of an environment kind (paper table 5) as ``milegpo train`` picks it: the kind's row of
    :data:`milegpo.job.ENV_DEFAULTS` (``webshop`` for WebShop, ``scienceworld`` for ScienceWorld), else
    MileGPOConfig's default (``alfworld``)."""
    from ..trainer.config import MileGPOConfig
    from ..job.arguments import env_defaults

    return env_defaults(env, tiny=False).get("credit_preset", MileGPOConfig.credit_preset)


def quality_tasks(env: str, split: str, groups: int, seed: int, horizon: int | None, options: dict | None = None,
                  task_types=None) -> list:
    """The ``groups`` tasks of batch ``seed``: task types in turn (household: all six, so every batch holds
    every type), game seeds / goals ``start + seed * groups + g`` with ``start`` from :data:`QUALITY_START`
    (away from the training runs' seeds). horizon: None for the world's own (household 50, WebShop 30)."""
    from ..envs.base import TASK_TYPES
    from ..rollout import make_tasks

    if task_types is None:
        # household generates any game of any type: every batch holds every type; ALFWorld's fixed game set is
        # taken in its own order (its types mixed), so that a few generated games fill a batch
        task_types = TASK_TYPES if env == "household" else ("",)
    start = QUALITY_START.get(env, QUALITY_START_DEFAULT) + seed * groups
    tasks = []
    for g in range(groups):
        task_type = task_types[(g + seed) % len(task_types)]
        found = make_tasks(env, split, 1, task_type, horizon, start=start + g, options=options)
        if not found:  # a world of a fixed task set (ALFWorld's games) has none at that index
            raise UsageError(f"env {env!r}, split {split!r} has no task "
                             f"{'of type ' + repr(task_type) + ' ' if task_type else ''}at index {start + g} (batch "
                             f"seed {seed}, group {g}; its tasks are taken from index {start - seed * groups} on): "
                             f"give fewer --groups / --seeds, or a split with more tasks")
        tasks.append(found[0])
    return tasks


def run_credit_quality(out_dir, env: str = "household", seeds=(0, 1, 2, 3, 4), groups: int = 16,
                       group_size: int = 8, horizon: int | None = None, epsilon=(0.1, 0.9),
                       expert: str | None = None,
                       invalid_share: float = 0.1, checkpoint: str | None = None, temperature: float = 1.0,
                       checkpoint_flags=(), checkpoint_seeds: int | None = None, preset: str | None = None,
                       backend: str = "auto",
                       n_resamples: int = 2000, split: str = "train", options: dict | None = None,
                       state_anchor: str | None = None, state_similarity=(), similarity_shingle: int = 2,
                       say=print) -> dict:
    """``milegpo credit-quality``: play labelled batches (the mixed expert, and ``checkpoint``'s policy if
    given; for the first ``checkpoint_seeds`` seeds, default all: a language model's batch costs minutes on a
    CPU) for every seed, measure every method on them, write ``<out_dir>/credit_quality.json`` and
    ``credit_quality.png`` (plus one plot per policy source when there are several). state_anchor: what the
    mixed expert's rows' state keys are made of (:mod:`milegpo.envs.anchors`; None: the default,
    ``tracked+actions``, as the trainer's; a checkpoint's rows are keyed as its saved task settings say).
    horizon None: the world's own (household 50 as
    ALFWorld, WebShop 30); expert None: :func:`milegpo.evidence.labelled.default_expert`; preset None: the
    environment's (:func:`default_preset`: ``webshop`` for WebShop, ``scienceworld`` for ScienceWorld, else
    ``alfworld``). state_similarity: thresholds at which the
    same batches are measured again with near-duplicate states merged (:func:`with_similar_states`,
    shingles of ``similarity_shingle`` tokens), reported under ``state_similarity`` (threshold -> the
    report of all batches, with ``states`` and ``against_exact``: :func:`against_exact`). Returns the report:
    :func:`credit_quality` of all batches, with ``states`` (:func:`state_summary`: the anchor, the distinct
    (group, state) pairs and the aliased share of same-state pairs), ``sources`` (the same per policy source)
    and ``settings``; ``milestone_truth`` (:func:`milegpo.evidence.milestones.milestone_truth` of every step score
    on all batches, per source under ``sources``), written with ``milestone_truth.png`` too."""
    import json
    import time
    from pathlib import Path

    from .labelled import default_expert, play_checkpoint, play_mixed_expert
    from ..state_sketches import StateSimilarity
    from ..credit.config import get_preset

    from ..envs.anchors import anchor_name, check_state_anchor

    state_anchor = check_state_anchor(state_anchor)
    expert = expert or default_expert(env)
    preset = preset or default_preset(env)
    # the thresholds checked before anything is played
    similarities = [StateSimilarity(float(t), shingle_width=similarity_shingle) for t in state_similarity]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = get_preset(preset)
    t0 = time.perf_counter()
    by_source: dict[str, list] = {}
    for n, seed in enumerate(seeds):
        tasks = quality_tasks(env, split, groups, seed, horizon, options)
        played = [play_mixed_expert(tasks, group_size, seed, tuple(epsilon), expert, invalid_share,
                                     state_anchor=state_anchor)]
        if checkpoint and (checkpoint_seeds is None or n < checkpoint_seeds):
            played.append(play_checkpoint(checkpoint, tasks, group_size, seed, temperature, flags=checkpoint_flags))
        for lb in played:
            by_source.setdefault(lb.source, []).append(lb)
            good = f"{lb.good.mean():.1%} good" if lb.labelled else "no step labels (the world gives no steps_to_win)"
            say(f"[{lb.source} seed {seed}] {len(lb.batch)} steps, {good}, {int(lb.batch.milestone.sum())} "
                f"milestone steps, success {_trajectory_success(lb.batch):.1%} ({time.perf_counter() - t0:.0f} s)")
    everything = [lb for batches in by_source.values() for lb in batches]
    _, exact, scores = similar_state_advantages(everything, None, config, backend, with_scores=True)
    report = quality_of_advantages(everything, *exact, n_resamples)
    report["milestone_truth"] = milestone_truth([lb.batch for lb in everything], scores, n_resamples)
    report["states"] = state_summary(everything, anchor_name(state_anchor))
    report["sources"] = {src: credit_quality(batches, config, backend, n_resamples)
                         for src, batches in by_source.items()}
    first = 0
    for src, batches in by_source.items():  # everything holds the sources' batches in turn
        report["sources"][src]["milestone_truth"] = milestone_truth(
            [lb.batch for lb in batches], scores[first:first + len(batches)], n_resamples)
        first += len(batches)
    if similarities:
        report["state_similarity"] = {}
        for similarity in similarities:
            threshold = float(similarity.threshold)
            merged, advantages, _ = similar_state_advantages(everything, similarity, config, backend)
            rep = {**quality_of_advantages(merged, *advantages, n_resamples),
                   "states": state_summary(merged, anchor_name(state_anchor)),
                   "against_exact": against_exact(everything, exact[0], advantages[0], exact[1], n_resamples)}
            report["state_similarity"][str(threshold)] = rep
            say(f"[similarity {threshold}] {rep['states']['distinct']} states (exact "
                f"{report['states']['distinct']}) "
                f"({time.perf_counter() - t0:.0f} s)")
    report["settings"] = {"env": env, "split": split, "seeds": list(seeds), "groups": groups,
                          "group_size": group_size, "horizon": horizon or tasks[0].horizon, "epsilon": list(epsilon),
                          "expert": expert,
                          "invalid_share": invalid_share, "checkpoint": checkpoint, "temperature": temperature,
                          "checkpoint_seeds": list(seeds)[:checkpoint_seeds] if checkpoint else [],
                          "preset": preset, "options": options or {}, "resamples": n_resamples,
                          "state_anchor": anchor_name(state_anchor),
                          "state_similarity": [float(t) for t in state_similarity],
                          "similarity_shingle": similarity_shingle}
    report["seconds"] = time.perf_counter() - t0
    # NaN (a figure without pairs) as null: JSON has no NaN
    strict = json.loads(json.dumps(report), parse_constant=lambda constant: None)
    (out / "credit_quality.json").write_text(json.dumps(strict, indent=1))
    plot_quality(report, out / "credit_quality.png",
                 f"ground-truth credit quality, {env}: {len(everything)} batches x {groups} groups x {group_size} "
                 f"(95% bootstrap intervals over groups)")
    plot_milestone_truth(report["milestone_truth"], out / "milestone_truth.png",
                         f"milestone truth, {env}: {len(everything)} batches x {groups} groups x {group_size} (95% "
                         "bootstrap intervals over groups; hatched: told the milestones)")
    if len(by_source) > 1:
        for src, rep in report["sources"].items():
            plot_quality(rep, out / f"credit_quality_{src}.png", f"ground-truth credit quality, {env}, {src}")
            plot_milestone_truth(rep["milestone_truth"], out / f"milestone_truth_{src}.png",
                                 f"milestone truth, {env}, {src}")
    for src, rep in report["sources"].items():
        say(f"\n{src}: {rep['labels']['batches']} batches, {rep['labels']['rows']} steps, "
            f"{rep['labels']['good_share']:.1%} good, success {rep['labels']['success_rate']:.1%}")
        say(format_quality(rep))
        say(f"\n{src}, milestone truth: does a step's score rank the steps that completed a subgoal (the world's "
            "milestone field, the win left out) above the other steps of their group?")
        say(format_milestone_truth(rep["milestone_truth"]))
    for threshold, rep in report.get("state_similarity", {}).items():
        say(f"\nall sources, near-duplicate states merged at {threshold} ({rep['states']['distinct']} states):")
        say(format_quality(rep))
    states = report["states"]
    aliased = "n/a (no step labels)" if math.isnan(states["aliased_share"]) else f"{states['aliased_share']:.1%}"
    say(f"\nstates (anchor {states['anchor']}): {states['distinct']} distinct (group, state) pairs; "
        f"{aliased} of {states['pairs']} same-state row pairs at different steps-to-win")
    say(f"\nwrote {out / 'credit_quality.json'} ({report['seconds']:.0f} s)")
    return report



__all__ = ["ADV_TIE_TOL", "METRICS", "LabelledBatch", "step_labels", "labelled_pairs",
           "ordered_share", "PairSets", "pair_sets", "estimate_all", "method_advantages", "similar_state_advantages",
           "against_exact", "with_similar_states", "distinct_states", "aliased_share", "state_summary",
           "bootstrap_weights", "percentile_interval",
           "credit_quality", "quality_of_advantages", "format_quality", "plot_quality", "QUALITY_START",
           "default_preset", "quality_tasks", "run_credit_quality"]
