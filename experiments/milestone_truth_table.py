"""The milestone-truth table of every method's step scores across worlds (issue 47, part 4; README "Evidence").

Reads the ``milestone_truth`` of ``milegpo credit-quality`` reports (one ``credit_quality.json`` per world) and
writes one markdown table: a row per step score (:data:`milegpo.evidence.milestones.STEP_SCORES`, in its order:
the method it belongs to, the score, its AUC for "this step completed one of the world's subgoals" with the 95%
bootstrap interval over task groups), a column per world, and a last row of the pairs and groups behind it.

    python experiments/milestone_truth_table.py \\
        household=experiments/results/milestone_truth/household/credit_quality.json \\
        WebShop=experiments/results/milestone_truth/webshop/credit_quality.json \\
        "ScienceWorld short=experiments/results/regime/scienceworld_short/quality/credit_quality.json" \\
        "ScienceWorld long=experiments/results/regime/scienceworld_long/quality/credit_quality.json" \\
        --out experiments/results/milestone_truth/table.md
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from milegpo.evidence.milestones import SCORES_BY_KEY  # noqa: E402


def _cell(entry: dict | None) -> str:
    if entry is None or entry["milestone_auc"] is None or math.isnan(entry["milestone_auc"]):
        return "n/a"
    lo, hi = entry["ci"]
    return f"{entry['milestone_auc']:.3f} [{lo:.3f}, {hi:.3f}]" + (" (told)" if entry["told"] else "")


def table(reports: dict[str, dict]) -> str:
    """The markdown table of ``{world: credit_quality report}``."""
    keys = list(dict.fromkeys(k for r in reports.values() for k in r["milestone_truth"]["scores"]))
    keys.sort(key=lambda k: list(SCORES_BY_KEY).index(k) if k in SCORES_BY_KEY else len(SCORES_BY_KEY))
    lines = ["| method (result read) | score | " + " | ".join(reports) + " |", "|" + " --- |" * (2 + len(reports))]
    for k in keys:
        spec = SCORES_BY_KEY.get(k)
        lines.append(f"| {spec.label if spec else k.split('_')[0]} | `{k}` | "
                     + " | ".join(_cell(r["milestone_truth"]["scores"].get(k)) for r in reports.values()) + " |")
    sizes = []
    for r in reports.values():
        lab, s = r["milestone_truth"]["labels"], r["settings"]
        pairs = next(iter(r["milestone_truth"]["scores"].values()))["pairs"]
        sizes.append(f"{pairs:,} pairs, {lab['intermediate_milestones']:,} milestone steps of {lab['rows']:,}, "
                     f"{lab['groups']} groups ({len(s['seeds'])} x {s['groups']} x {s['group_size']}, horizon "
                     f"{s['horizon']})")
    lines.append("| | behind it | " + " | ".join(sizes) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("reports", nargs="+", metavar="WORLD=PATH", help="a column's name and its credit_quality.json")
    p.add_argument("--out", help="write the table here too")
    args = p.parse_args(argv)
    reports = {}
    for item in args.reports:
        name, sep, path = item.partition("=")
        if not sep or not Path(path).is_file():
            p.error(f"{item!r}: give WORLD=PATH with PATH a credit_quality.json")
        report = json.loads(Path(path).read_text())
        if "milestone_truth" not in report:
            p.error(f"{path}: no milestone_truth in it (a report older than issue 47: rerun milegpo credit-quality)")
        reports[name] = report
    md = table(reports)
    if args.out:
        Path(args.out).write_text(md)
    print(md, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
