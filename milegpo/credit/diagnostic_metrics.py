"""Credit diagnostics (spec section 11, paper section 4.4): :func:`diagnostics` of a result.

All computed on the host with numpy from a :class:`CreditResult`; they are for
logging and plots, not for the hot path. :func:`diagnostics_text` prints them.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from .result import CreditResult

#: A^G values closer than this count as tied (spec section 11)
TIE_TOL = 1e-6


def same_state_pairs(group: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All unordered pairs (i, j), i != j, of rows with the same (group, state).

    Returns two (P,) int64 arrays of row indices. Vectorised: rows sorted by
    (group, state), then every row is paired with the rows after it in its run."""
    n = group.shape[0]
    if n < 2:
        e = np.zeros(0, dtype=np.int64)
        return e, e
    order = np.lexsort((state, group))
    gs, ss = group[order], state[order]
    start = np.ones(n, dtype=bool)
    start[1:] = (gs[1:] != gs[:-1]) | (ss[1:] != ss[:-1])
    run_id = np.cumsum(start) - 1
    run_start = np.flatnonzero(start)
    run_end = np.append(run_start[1:], n)
    pos = np.arange(n)
    after = run_end[run_id] - pos - 1  # how many rows follow in the same run
    total = int(after.sum())
    if total == 0:
        e = np.zeros(0, dtype=np.int64)
        return e, e
    first = np.repeat(pos, after)
    offset_in_row = np.arange(total) - np.repeat(np.cumsum(after) - after, after)
    second = first + 1 + offset_in_row
    return order[first], order[second]


def _share(num: float, den: float) -> float:
    return num / den if den else float("nan")


#: parts of :func:`diagnostic_parts` that merge by maximum (:func:`merge_diagnostic_parts`); ``adv_m2``
#: merges by Chan's rule; every other part is a count or a sum and merges by addition
MAX_PARTS = ("adv_abs_max",)


def diagnostic_parts(result: CreditResult) -> dict[str, float]:
    """The numerators, denominators and advantage moments behind :func:`diagnostics`, in a form that
    merges over batches of disjoint task groups (:func:`merge_diagnostic_parts`): every diagnostic is a
    count or a share of counts over rows, row pairs or nodes of one (group, state) or one group, so the
    parts of the processes that each hold whole groups merge into the parts of their whole batch, and
    :func:`diagnostics_from_parts` gives what :func:`diagnostics` gives that batch.

    Keys (all float): ``rows``; ``shared_state_rows`` (rows whose (group, state) is visited by more than one
    trajectory); ``same_state_pairs``; with A^G ``tied_pairs`` (same-state pairs whose A^G differ by at most
    :data:`TIE_TOL`), and with r^M ``tie_pairs`` / ``tie_corrected`` (spec section 11); with the MileGPO node
    table ``candidates``, ``traps``, ``support_local`` / ``support_coverage`` / ``support_weak``,
    ``pcc_progress`` / ``pcc_branch`` (candidates with psi-bar > 0 / b > 0), ``retained``; and the moments of
    the advantages: ``adv_sum``, ``adv_m2`` (sum of squared deviations from this batch's mean),
    ``adv_abs_sum``, ``adv_abs_max`` (0 for no rows), ``adv_zeros`` (rows with advantage exactly 0)."""
    b = result.batch.to_numpy()
    n = b["group"].shape[0]
    parts: dict[str, float] = {"rows": float(n)}

    # shared-state coverage: distinct trajectories per (group, state)
    shared = 0
    if n:
        key = np.stack([b["group"], b["state"]], 1)
        _, inv = np.unique(key, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        pairs = np.unique(np.stack([inv, b["traj"]], 1), axis=0)
        per_state = np.bincount(pairs[:, 0], minlength=inv.max() + 1)
        shared = int((per_state[inv] > 1).sum())
    parts["shared_state_rows"] = float(shared)

    i, j = same_state_pairs(b["group"], b["state"])
    parts["same_state_pairs"] = float(i.shape[0])
    if "a_graph" in result.rows:
        ag = result.rows["a_graph"].cpu().numpy()
        tied = np.abs(ag[i] - ag[j]) <= TIE_TOL
        parts["tied_pairs"] = float(tied.sum())
        if "r_shaped" in result.rows:
            rm = result.rows["r_shaped"].cpu().numpy()
            succ = b["success"]
            opposite = tied & (succ[i] != succ[j])
            win = np.where(succ[i], i, j)[opposite]
            lose = np.where(succ[i], j, i)[opposite]
            parts["tie_pairs"] = float(opposite.sum())
            parts["tie_corrected"] = float((rm[win] > rm[lose] + result.config.threshold_tol).sum())

    if "is_milestone" in result.nodes:
        # counts only: the nodes in any order (a lazy table skips its sort into canonical order)
        unordered = getattr(result.nodes, "unordered", None)
        table = unordered() if unordered is not None else result.nodes
        nodes = {k: v.cpu().numpy() for k, v in table.items()}
        tol = result.config.threshold_tol
        cand = nodes["is_milestone"]
        local = cand & ((nodes["psi_bar"] > tol) | (nodes["b"] > tol))
        coverage = cand & ~local & (nodes["coverage"] >= result.config.theta_m - tol)
        weak = cand & ~local & ~coverage
        parts["candidates"] = float(cand.sum())
        parts["traps"] = float(nodes["is_trap"].sum())
        for name, mask in (("local", local), ("coverage", coverage), ("weak", weak)):
            parts[f"support_{name}"] = float(mask.sum())
        parts["pcc_progress"] = float((cand & (nodes["psi_bar"] > tol)).sum())
        parts["pcc_branch"] = float((cand & (nodes["b"] > tol)).sum())
        parts["retained"] = float((cand & nodes["retained"]).sum())

    adv = result.advantages.cpu().numpy()
    adv_sum = adv.sum()
    parts["adv_sum"] = float(adv_sum)
    # numpy's std: the squared deviations from sum / n, summed (so one batch's std is np.std's, bit for bit)
    parts["adv_m2"] = float(np.sum((adv - adv_sum / n) ** 2)) if n else 0.0
    parts["adv_abs_sum"] = float(np.abs(adv).sum())
    parts["adv_abs_max"] = float(np.abs(adv).max()) if n else 0.0
    parts["adv_zeros"] = float((adv == 0).sum())
    return parts


def merge_diagnostic_parts(parts: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The :func:`diagnostic_parts` of the union of batches of disjoint task groups, from each batch's parts
    (e.g. one per process, in rank order): counts and sums add, :data:`MAX_PARTS` take the maximum, and
    ``adv_m2`` merges by Chan et al.'s pairwise rule (m2 = m2_a + m2_b + (mean_b - mean_a)^2 n_a n_b / n).
    Every batch must have the same keys (the same credit method)."""
    if not parts:
        raise ValueError("merge_diagnostic_parts: no parts to merge")
    keys = list(parts[0])
    for rank, p in enumerate(parts):
        if list(p) != keys:
            raise ValueError(f"merge_diagnostic_parts: part {rank} has keys {sorted(p)}, part 0 has {sorted(keys)}; "
                             "every part must come from the same credit method")
    merged = dict(parts[0])
    for p in parts[1:]:
        n_a, n_b = merged["rows"], p["rows"]
        n = n_a + n_b
        if n_a and n_b:
            delta = p["adv_sum"] / n_b - merged["adv_sum"] / n_a
            merged["adv_m2"] = merged["adv_m2"] + p["adv_m2"] + delta * delta * n_a * n_b / n
        else:
            merged["adv_m2"] = merged["adv_m2"] + p["adv_m2"]
        for k in keys:
            if k in MAX_PARTS:
                merged[k] = max(merged[k], p[k])
            elif k != "adv_m2":
                merged[k] = merged[k] + p[k]
    return merged


def diagnostics_from_parts(parts: Mapping[str, float]) -> dict:
    """:func:`diagnostics` from :func:`diagnostic_parts` (one batch's, or :func:`merge_diagnostic_parts` of
    several): the same keys in the same order."""
    n = parts["rows"]
    out: dict[str, float] = {"rows": float(n)}
    out["shared_state_coverage"] = _share(parts["shared_state_rows"], n)
    out["same_state_pairs"] = parts["same_state_pairs"]
    if "tied_pairs" in parts:
        out["tie_share"] = _share(parts["tied_pairs"], parts["same_state_pairs"])
        if "tie_pairs" in parts:
            out["tie_pairs"] = parts["tie_pairs"]
            out["tie_corrected"] = parts["tie_corrected"]
            out["tie_correction_rate"] = _share(parts["tie_corrected"], parts["tie_pairs"])
    if "candidates" in parts:
        k = parts["candidates"]
        out["candidates"] = k
        out["traps"] = parts["traps"]
        for name in ("local", "coverage", "weak"):
            out[f"support_{name}"] = parts[f"support_{name}"]
            out[f"support_{name}_share"] = _share(parts[f"support_{name}"], k)
        out["pcc_progress_share"] = _share(parts["pcc_progress"], k)
        out["pcc_branch_share"] = _share(parts["pcc_branch"], k)
        out["retained"] = parts["retained"]
    out["adv_mean"] = parts["adv_sum"] / n if n else float("nan")
    out["adv_std"] = math.sqrt(parts["adv_m2"] / n) if n else float("nan")
    out["adv_abs_max"] = parts["adv_abs_max"] if n else float("nan")
    return out


def diagnostics(result: CreditResult) -> dict:
    """Spec section 11, as a flat dict of numbers (NaN where undefined).

    - ``tie_pairs``, ``tie_corrected``, ``tie_correction_rate``: unordered row pairs
      with the same (group, state), opposite outcomes and |A^G_i - A^G_j| <= 1e-6;
      the share where the successful row's r^M is strictly higher.
    - ``candidates``, ``support_local`` (psi-bar > 0 or b > 0), ``support_coverage``
      (else m >= theta_m), ``support_weak`` (neither), with ``*_share``.
    - ``pcc_progress_share`` / ``pcc_branch_share``: candidates with psi-bar > 0 /
      with b > 0.
    - ``shared_state_coverage``: share of rows whose (group, state) is visited by more
      than one trajectory; ``tie_share``: share of same-state row pairs whose A^G
      differ by at most 1e-6 (``same_state_pairs`` counts them).

    Under several processes that each hold whole task groups, merge their
    :func:`diagnostic_parts` (:func:`merge_diagnostic_parts`) and read
    :func:`diagnostics_from_parts`: the diagnostics of their whole batch.
    """
    return diagnostics_from_parts(diagnostic_parts(result))


def diagnostics_text(d: dict) -> str:
    """The dict of :func:`diagnostics` as a short human-readable block, one ``name value`` line each."""
    def f(x):
        return "n/a" if isinstance(x, float) and math.isnan(x) else (f"{x:.3f}" if isinstance(x, float) else str(x))

    lines = []
    for k, v in d.items():
        lines.append(f"  {k:<28} {f(v)}")
    return "\n".join(lines)


__all__ = ["MAX_PARTS", "TIE_TOL", "diagnostic_parts", "diagnostics", "diagnostics_from_parts", "diagnostics_text",
           "merge_diagnostic_parts", "same_state_pairs"]
