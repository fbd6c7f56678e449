"""Credit diagnostics (spec section 11, paper section 4.4): :func:`diagnostics` of a result.

All computed on the host with numpy from a :class:`CreditResult`; they are for
logging and plots, not for the hot path. :func:`diagnostics_text` prints them.
(Formerly ``milegpo.credit.diagnose`` with ``credit_diagnostics`` / ``format_diagnostics``:
those names still work, see :mod:`milegpo._moved`.)
"""

from __future__ import annotations

import math

import numpy as np

from .._moved import moved_names
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


def _share(num: int, den: int) -> float:
    return num / den if den else float("nan")


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
    """
    b = result.batch.to_numpy()
    n = b["group"].shape[0]
    out: dict[str, float] = {"rows": float(n)}

    # shared-state coverage: distinct trajectories per (group, state)
    if n:
        key = np.stack([b["group"], b["state"]], 1)
        _, inv = np.unique(key, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        pairs = np.unique(np.stack([inv, b["traj"]], 1), axis=0)
        per_state = np.bincount(pairs[:, 0], minlength=inv.max() + 1)
        out["shared_state_coverage"] = float((per_state[inv] > 1).mean())
    else:
        out["shared_state_coverage"] = float("nan")

    i, j = same_state_pairs(b["group"], b["state"])
    out["same_state_pairs"] = float(i.shape[0])
    if "a_graph" in result.rows:
        ag = result.rows["a_graph"].cpu().numpy()
        tied = np.abs(ag[i] - ag[j]) <= TIE_TOL
        out["tie_share"] = _share(int(tied.sum()), int(i.shape[0]))
        if "r_shaped" in result.rows:
            rm = result.rows["r_shaped"].cpu().numpy()
            succ = b["success"]
            opposite = tied & (succ[i] != succ[j])
            win = np.where(succ[i], i, j)[opposite]
            lose = np.where(succ[i], j, i)[opposite]
            corrected = int((rm[win] > rm[lose] + result.config.threshold_tol).sum())
            out["tie_pairs"] = float(opposite.sum())
            out["tie_corrected"] = float(corrected)
            out["tie_correction_rate"] = _share(corrected, int(opposite.sum()))

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
        k = int(cand.sum())
        out["candidates"] = float(k)
        out["traps"] = float(nodes["is_trap"].sum())
        for name, mask in (("local", local), ("coverage", coverage), ("weak", weak)):
            out[f"support_{name}"] = float(mask.sum())
            out[f"support_{name}_share"] = _share(int(mask.sum()), k)
        out["pcc_progress_share"] = _share(int((cand & (nodes["psi_bar"] > tol)).sum()), k)
        out["pcc_branch_share"] = _share(int((cand & (nodes["b"] > tol)).sum()), k)
        out["retained"] = float((cand & nodes["retained"]).sum())

    adv = result.advantages.cpu().numpy()
    out["adv_mean"] = float(adv.mean()) if n else float("nan")
    out["adv_std"] = float(adv.std()) if n else float("nan")
    out["adv_abs_max"] = float(np.abs(adv).max()) if n else float("nan")
    return out


def diagnostics_text(d: dict) -> str:
    """The dict of :func:`diagnostics` as a short human-readable block, one ``name value`` line each."""
    def f(x):
        return "n/a" if isinstance(x, float) and math.isnan(x) else (f"{x:.3f}" if isinstance(x, float) else str(x))

    lines = []
    for k, v in d.items():
        lines.append(f"  {k:<28} {f(v)}")
    return "\n".join(lines)


__getattr__ = moved_names(__name__)  # the names before issue 19: credit_diagnostics, format_diagnostics

__all__ = ["TIE_TOL", "diagnostics", "diagnostics_text", "same_state_pairs"]
