"""Does ``state_similarity`` help the credit? Ground-truth credit quality of every method on household and
WebShop batches with exact state keys and with near-duplicate states merged at a few thresholds.

For each environment this runs ``milegpo credit-quality --state-similarity T ...``
(:func:`milegpo.evidence.quality.run_credit_quality`: mixed-expert batches labelled by the world's planner,
every method scored on the same batches with exact keys and with the merge at each threshold), writes its
``credit_quality.json`` into ``<out>/<env>/`` and gathers the figures into ``<out>/table.md`` and
``<out>/table.json``: distinct states, the share of same-state pairs at different true distances from a
win, shared-state coverage and tie share (the spec's section-11
diagnostics of MileGPO full), the tie-correction rate, the same-state and group AUC of every method with
95% bootstrap intervals over task groups, and each method's group AUC and same-state AUC on the exact
keys' pairs with merged states minus exact keys, paired on the same pairs and resamples
(:func:`milegpo.evidence.quality.against_exact`).

    python experiments/state_similarity.py --thresholds 0.9 0.8 0.7 --out experiments/results/state_similarity
    python experiments/state_similarity.py --out experiments/results/state_similarity --table-only
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from milegpo.credit import method_variants  # noqa: E402
from milegpo.evidence.quality import run_credit_quality  # noqa: E402

DIAGNOSTICS = ("shared_state_coverage", "tie_share", "tie_correction_rate")


def settings_of(report: dict) -> list[tuple[str, dict]]:
    """(name, report) of exact keys and every threshold of one ``credit_quality.json``."""
    return [("exact", report)] + [(f"similarity {t}", rep) for t, rep in report.get("state_similarity", {}).items()]


def _cell(value, ci) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def _signed(entry: dict) -> str:
    value, (lo, hi) = entry["value"], entry["ci"]
    return "n/a" if value is None else f"{value:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def tables(reports: dict) -> tuple[str, dict]:
    """Markdown tables and their figures (JSON) of ``{env: credit_quality.json report}``."""
    methods = list(method_variants())
    summary: dict = {}
    diag = ["| env | keys | states | shared-state coverage | tie share | tie-correction rate | labelled same-state "
            "pairs | aliased same-state pairs |", "|---" * 8 + "|"]
    same = ["| env | keys | " + " | ".join(methods) + " |", "|---" * (2 + len(methods)) + "|"]
    group = list(same)
    paired = {k: list(same) for k in ("group_auc", "same_state_auc")}
    for env, report in reports.items():
        s = report["settings"]
        summary[env] = {"settings": s, "labels": report["labels"], "seconds": report.get("seconds"), "keys": {}}
        for name, rep in settings_of(report):
            full = rep["methods"]["milegpo-full"]
            d = full["diagnostics"]
            # credit_quality.json's "states" (anchor, distinct, aliased_share); older reports: the count and a share
            states = rep["states"] if isinstance(rep["states"], dict) else {"distinct": rep["states"],
                                                                           "aliased_share": rep.get("aliased_share")}
            row = {"states": states["distinct"], "aliased_share": states["aliased_share"],
                   **{k: d.get(k) for k in DIAGNOSTICS},
                   "same_state_pairs": full["pairs"]["same_state_auc"],
                   "methods": {m: {k: {"value": rep["methods"][m][k], "ci": rep["methods"][m]["ci"][k]}
                                   for k in ("same_state_auc", "group_auc", "tied_pair_accuracy")} for m in methods}}
            if "against_exact" in rep:
                row["against_exact"] = rep["against_exact"]
            summary[env]["keys"][name] = row
            diag.append(f"| {env} | {name} | {row['states']} | " + " | ".join(
                "n/a" if row[k] is None else f"{row[k]:.3f}" for k in DIAGNOSTICS) + f" | {row['same_state_pairs']} | "
                + ("n/a" if row["aliased_share"] is None else f"{row['aliased_share']:.3f}") + " |")
            for lines, k in ((same, "same_state_auc"), (group, "group_auc")):
                lines.append(f"| {env} | {name} | " + " | ".join(
                    _cell(rep["methods"][m][k], rep["methods"][m]["ci"][k]) for m in methods) + " |")
            for k, lines in paired.items():
                if "against_exact" in rep:
                    lines.append(f"| {env} | {name} | " + " | ".join(
                        _signed(rep["against_exact"][m][k]) for m in methods) + " |")
    header = []
    for env, report in reports.items():
        s, lab = report["settings"], report["labels"]
        header.append(f"- {env}: seeds {s['seeds']}, {s['groups']} groups x {s['group_size']}, horizon {s['horizon']}, "
                      f"the {s['expert']} expert with epsilon ~ U{tuple(s['epsilon'])}, preset {s['preset']}, "
                      f"shingles of {s.get('similarity_shingle', 2)} tokens; {lab['rows']} steps, "
                      f"{lab['good_share']:.1%} good, {lab['success_rate']:.1%} of trajectories won; "
                      f"{s['resamples']} bootstrap resamples over {lab['groups']} groups")
    text = "\n".join([
        "Ground-truth credit quality with exact state keys and with near-duplicate states merged "
        "(`experiments/state_similarity.py`; per environment `<env>/credit_quality.json`).", "", *header, "",
        "Diagnostics (MileGPO full, mean over batches; aliased: the share of all same-state row pairs whose rows "
        "are at different steps-to-win, `milegpo.evidence.quality.aliased_share`):", "", *diag, "",
        "Same-state AUC (pairs of rows in one merged state: the pair set changes with the keys):", "", *same, "",
        "Group AUC (the same pairs for every setting):", "", *group, "",
        "Group AUC with merged states minus exact keys, paired (same pairs, same resamples):", "",
        *paired["group_auc"], "",
        "Same-state AUC on the exact keys' pairs (rows of one identical observation), merged minus exact, paired:",
        "", *paired["same_state_auc"], ""])
    return text, summary


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", nargs="+", default=["household", "webshop"])
    p.add_argument("--thresholds", nargs="+", type=float, default=[0.9, 0.8, 0.7])
    p.add_argument("--shingle", type=int, default=2)
    p.add_argument("--groups", type=int, default=16)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--horizon", type=int, default=None, help="default the world's (household 50, webshop 30)")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    p.add_argument("--resamples", type=int, default=2000)
    p.add_argument("--backend", default="torch")
    p.add_argument("--out", default="experiments/results/state_similarity")
    p.add_argument("--table-only", action="store_true", help="only gather the tables from <out>/<env>/")
    a = p.parse_args(argv)
    out = Path(a.out)
    reports = {}
    for env in a.envs:
        path = out / env / "credit_quality.json"
        if not a.table_only:
            run_credit_quality(out / env, env=env, seeds=a.seeds, groups=a.groups, group_size=a.group_size,
                               horizon=a.horizon, backend=a.backend, n_resamples=a.resamples,
                               state_similarity=a.thresholds, similarity_shingle=a.shingle)
        if not path.exists():
            raise FileNotFoundError(f"{path}: no credit-quality report for {env} (run without --table-only)")
        reports[env] = json.loads(path.read_text())
    text, summary = tables(reports)
    print(text)
    (out / "table.md").write_text(text)
    (out / "table.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
