"""How far milegpo's closest old CreditConfig is from the GraphGPO recipe's credit as issue 33 described it (a
reproduction's docstrings; ``presets.GRAPHGPO_REPRODUCTION``, not verl-agent's code, which is
``presets.GRAPHGPO_REFERENCE`` since issue 40), on random batches.

    python experiments/parity_check.py --out experiments/results/parity_check --batches 34

Batches: :func:`milegpo.credit.synthetic.random_batch`, seed i, 3-6 task groups of 1-8 trajectories (a quarter
of the groups hold one trajectory), a fifth of the groups all-fail, horizon 20, 15% invalid actions, 12
states per group with self-loops and states that cannot reach success. The recipe's credit is the
independent implementation of tests/credit/test_reference_parity.py (written from the issue's text). For
GRPO, GiGPO and GraphGPO, against that credit:

- ``before``: the closest config milegpo had, ``presets.ALFWORLD_SPEC`` with gamma_G = 0.1 (the recipe's omega),
  for GiGPO also with ``step_penalty="return"`` (verl-agent's trainer; the closer of the two is kept);
- ``after``: ``presets.GRAPHGPO_REPRODUCTION``;
- ``without X``: the preset with one of its conventions back at milegpo's default (:data:`LEAVE_ONE_OUT`),
  what that convention alone accounts for.

Per method: the largest per-row difference, on groups of two or more trajectories and on one-trajectory
groups; among the row pairs of one (group, state), the share ordered the other way (one strictly above the
other under one credit, strictly below under the other) and, of the pairs whose trajectories have different
invalid counts and that the recipe separates (by more than 1e-9), the share tied (within 1e-9). Writes
``<out>/table.md`` and ``<out>/figures.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from milegpo.credit import estimate, presets  # noqa: E402
from milegpo.credit.synthetic import random_batch  # noqa: E402
from tests.credit.test_reference_parity import recipe_credit  # noqa: E402

METHODS = ("grpo", "gigpo", "graphgpo")
#: the preset's conventions, each set back to milegpo's default (a per-trajectory norm needs the trajectory's
#: penalty, so the penalty goes back with the norm)
LEAVE_ONE_OUT = {
    "per-trajectory norm": dict(episode_norm_over="rows"),
    "trajectory penalty": dict(episode_norm_over="rows", episode_penalty="row"),
    "one value -> 0": dict(episode_single_value="unit"),
    "max + 1": dict(graph_unreachable="zero"),
    "penalty in step reward": dict(step_penalty="none"),
}
TIE = 1e-9


def batch_of(seed: int):
    rng = np.random.default_rng(seed)
    n_groups = int(rng.integers(3, 7))
    sizes = [1 if rng.random() < 0.25 else int(rng.integers(2, 9)) for _ in range(n_groups)]
    outcomes = ["fail" if rng.random() < 0.2 else None for _ in range(n_groups)]
    return random_batch(n_groups, sizes, 20, seed=seed, invalid_p=0.15, outcome=outcomes)


def candidates(method: str) -> dict:
    old = presets.ALFWORLD_SPEC.replace(gamma_g=0.1).as_preset()  # a preset of every method here
    out = {"alfworld, gamma_G 0.1": old}
    if method == "gigpo":
        out["+ step_penalty=return"] = old.replace(step_penalty="return")
    return out


def pair_stats(rows: list[dict], got: np.ndarray, want: np.ndarray) -> dict:
    """Counts over the row pairs of one (group, state): misordered, and the recipe's invalid-count pairs tied."""
    trajs: dict = {}
    for r in rows:
        trajs[r["traj"]] = trajs.get(r["traj"], 0) + int(r["invalid"])
    cells: dict = {}
    for i, r in enumerate(rows):
        cells.setdefault((r["group"], r["state"]), []).append(i)
    pairs = misordered = separated = tied = 0
    for idx in cells.values():
        a = np.array(idx)
        if len(a) < 2:
            continue
        g, w = got[a], want[a]
        dg, dw = g[:, None] - g[None, :], w[:, None] - w[None, :]
        upper = np.triu(np.ones((len(a), len(a)), dtype=bool), 1)
        pairs += int(upper.sum())
        misordered += int((upper & (((dg > TIE) & (dw < -TIE)) | ((dg < -TIE) & (dw > TIE)))).sum())
        n_inv = np.array([trajs[rows[i]["traj"]] for i in idx])
        by_invalid = upper & (n_inv[:, None] != n_inv[None, :]) & (np.abs(dw) > TIE)
        separated += int(by_invalid.sum())
        tied += int((by_invalid & (np.abs(dg) <= TIE)).sum())
    return {"pairs": pairs, "misordered": misordered, "separated_by_invalid": separated, "tied_of_those": tied}


def measure(n_batches: int) -> dict:
    figures: dict = {}
    total_rows = 0
    for seed in range(n_batches):
        batch = batch_of(seed)
        rows = batch.rows()
        total_rows += len(rows)
        sizes: dict = {}
        for r in rows:
            sizes.setdefault(r["group"], set()).add(r["traj"])
        single = np.array([len(sizes[r["group"]]) == 1 for r in rows])
        for method in METHODS:
            want = np.array(recipe_credit(rows, method))
            configs = {**{f"before: {k}": v for k, v in candidates(method).items()},
                       "after: graphgpo_reproduction": presets.GRAPHGPO_REPRODUCTION,
                       **{f"without {k}": presets.GRAPHGPO_REPRODUCTION.replace(**v).as_preset()
                          for k, v in LEAVE_ONE_OUT.items()
                          if method == "gigpo" or k != "penalty in step reward"}}
            if method != "graphgpo":  # only r^G reads it
                configs.pop("without max + 1")
            for name, config in configs.items():
                got = estimate(batch, method, config, backend="reference").advantages.numpy()
                diff = np.abs(got - want)
                f = figures.setdefault(method, {}).setdefault(name, {
                    "max_diff_groups_of_2+": 0.0, "max_diff_one_trajectory": 0.0, "pairs": 0, "misordered": 0,
                    "separated_by_invalid": 0, "tied_of_those": 0, "misordered_per_batch": []})
                f["max_diff_groups_of_2+"] = max(f["max_diff_groups_of_2+"], float(diff[~single].max(initial=0)))
                f["max_diff_one_trajectory"] = max(f["max_diff_one_trajectory"], float(diff[single].max(initial=0)))
                stats = pair_stats(rows, got, want)
                for k, v in stats.items():
                    f[k] += v
                f["misordered_per_batch"].append(stats["misordered"] / max(stats["pairs"], 1))
    return {"batches": n_batches, "rows": total_rows, "methods": figures}


def table(result: dict) -> str:
    lines = [f"{result['batches']} random batches, {result['rows']} rows; against the recipe's credit "
             "(tests/credit/test_reference_parity.recipe_credit):", "",
             "| method | config | max row diff, groups of 2+ | max row diff, one-trajectory groups | misordered "
             "pairs (same group, state) | per batch (min-max) | invalid-count pairs tied |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for method, configs in result["methods"].items():
        for name, f in configs.items():
            per = f["misordered_per_batch"]
            tied = f["tied_of_those"] / f["separated_by_invalid"] if f["separated_by_invalid"] else float("nan")
            lines.append(f"| {method} | {name} | {f['max_diff_groups_of_2+']:.3g} | {f['max_diff_one_trajectory']:.3g} | "
                         f"{100 * f['misordered'] / max(f['pairs'], 1):.2f}% of {f['pairs']} | "
                         f"{100 * min(per):.2f}-{100 * max(per):.2f}% | {100 * tied:.1f}% of "
                         f"{f['separated_by_invalid']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="experiments/results/parity_check")
    p.add_argument("--batches", type=int, default=34)
    args = p.parse_args(argv)
    if args.batches < 1:
        p.error(f"--batches must be >= 1, got {args.batches}")
    result = measure(args.batches)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    md = table(result)
    (out / "table.md").write_text(md)
    (out / "figures.json").write_text(json.dumps(result, indent=1))
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
