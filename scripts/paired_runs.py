"""Final success of testbed runs made under different settings, paired by seed (the testbed's seeds pair runs:
same tasks, prior and random stream), e.g. one method under a changed CreditConfig against others' default runs:

    python scripts/paired_runs.py \\
        hgpo=experiments/results/field_methods/testbed_webshop:hgpo \\
        hgpo-base=experiments/results/field_methods/webshop_hgpo_base_group:hgpo \\
        gigpo=experiments/results/field_methods/testbed_webshop:gigpo --against gigpo

Each argument is ``LABEL=FOLDER:METHOD`` (FOLDER holds an experiments/credit_testbed.py results.json); prints a
markdown table of each label's final success % (mean, 95% t-interval over seeds) and its paired difference to the
``--against`` label over the seeds both ran (``experiments/credit_testbed.py --combine`` pairs runs of equal
settings only; this pairs any).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from milegpo.evidence.seed_stats import mean_ci, paired_test


def final_success(folder: str, method: str) -> dict[int, float]:
    """seed -> final success % of ``method``'s runs in ``folder``/results.json."""
    records = json.loads((Path(folder) / "results.json").read_text())["records"]
    out = {r["seed"]: 100 * r["final"]["success"] for r in records if r["method"] == method}
    if not out:
        raise SystemExit(f"{folder}: no runs of {method!r}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", metavar="LABEL=FOLDER:METHOD")
    p.add_argument("--against", required=True, help="the label the others are paired with")
    args = p.parse_args(argv)
    runs = {}
    for spec in args.runs:
        label, _, rest = spec.partition("=")
        folder, _, method = rest.rpartition(":")
        if not (label and folder and method):
            p.error(f"{spec!r}: expected LABEL=FOLDER:METHOD")
        runs[label] = final_success(folder, method)
    if args.against not in runs:
        p.error(f"--against {args.against!r}: not one of the labels {list(runs)}")
    base = runs[args.against]
    print(f"| run | final success % | minus {args.against} (points, paired t p, seeds) |")
    print("| --- | --- | --- |")
    for label, values in runs.items():
        m, lo, hi = mean_ci(list(values.values()))
        seeds = sorted(set(values) & set(base))
        cell = "" if label == args.against else (lambda t: f"{t['diff']:+.1f} [{t['ci'][0]:+.1f}, {t['ci'][1]:+.1f}] "
                                                            f"(p {t['t_p']:.3f}, {t['n']})")(
            paired_test([values[s] for s in seeds], [base[s] for s in seeds]))
        print(f"| {label} | {m:.1f} [{lo:.1f}, {hi:.1f}] ({len(values)}) | {cell} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
