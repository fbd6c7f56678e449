"""The paper's mechanism figures (its figure 2 and section 4.5; spec sections 10-11) on this project's worlds.

    python experiments/paper_mechanism.py --out experiments/results/paper_mechanism --seeds 20

For each world (household, WebShop), state anchor (the default ``tracked+actions``, and ``observation``) and
preset (the paper's reading, the spec's), ``milegpo credit-quality`` plays one labelled batch per seed (the
mixed expert: an early, partly random policy; 16 task groups x 8 rollouts, as the paper's iterations) into
``<out>/<world>_<anchor>_<preset>/credit_quality.json``, whose ``diagnostics_per_batch`` hold per seed:

- ``shared_state_coverage``: the share of transitions that leave a state several rollouts of the group visit
  (paper: 73.7% ALFWorld, 73.9% WebShop);
- ``tie_share`` (GraphGPO): the share of same-state action pairs whose GraphGPO credit A^G is tied
  (paper: 54.4%, 72.7%);
- ``tie_correction_rate`` of MileGPO md / rcs / full: of the tied same-state pairs with opposite outcomes, the
  share where r^M of the won row is higher (paper, WebShop: md 17.0%, rcs 26.5% of 569 pairs), and
  ``tie_pairs``, how many such pairs a batch holds.

The table (``<out>/table.md``, ``<out>/figures.json``) gives each figure's mean over seeds with its 95%
t-interval, and the tie pairs pooled over the seeds. Below it, paired over the same seeds' batches (the preset
does not change what is played): the ground-truth figures of ``credit-quality`` (same-state AUC, group AUC,
tied-pair accuracy; per batch) of MileGPO md / rcs / full under the paper's reading minus the spec's, and of
GraphGPO under verl-agent's recipe (``graphgpo_reference``, ``graphgpo_reference_webshop``: one more run per
world and anchor) minus the paper's preset, and of verl-agent's GiGPO (``gigpo-verl``: the step penalty,
``gigpo_reference``) minus the paper's. Runs already on disk are read, not played again. When the learning
testbed's folders exist beside ``--out`` (:data:`TESTBED`: ``paper_testbed_<world>_paper`` / ``_spec``, runs
of ``credit_testbed.py --methods milegpo-rcs milegpo-full --preset alfworld_paper`` / ``alfworld_spec``;
``_baselines`` (gigpo, graphgpo under the paper's preset), ``_gigpo_reference``, ``_graphgpo_reference``; the
``webshop_*`` presets for WebShop), their final and mean training success, paired by seed, are tabled too.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from milegpo.evidence.quality import run_credit_quality
from milegpo.evidence.seed_stats import mean_ci, paired_test

WORLDS = {"household": "alfworld", "webshop": "webshop"}
ANCHORS = ("tracked+actions", "observation")
READINGS = ("paper", "spec")
#: the ground-truth figures compared paired (credit_quality.json's per_batch)
METRICS = ("same_state_auc", "group_auc", "tied_pair_accuracy")
#: verl-agent's GraphGPO recipe per world
RECIPE = {"household": "graphgpo_reference", "webshop": "graphgpo_reference_webshop"}
#: (method of credit_quality.json, diagnostic) -> the table's column
FIGURES = {("graphgpo", "shared_state_coverage"): "shared-state coverage",
           ("graphgpo", "tie_share"): "tie share (A^G)",
           ("milegpo-md", "tie_correction_rate"): "tie correction md",
           ("milegpo-rcs", "tie_correction_rate"): "tie correction rcs",
           ("milegpo-full", "tie_correction_rate"): "tie correction full"}
PAPER = {"household": {"shared-state coverage": 0.737, "tie share (A^G)": 0.544},
         "webshop": {"shared-state coverage": 0.739, "tie share (A^G)": 0.727, "tie correction md": 0.170,
                     "tie correction rcs": 0.265}}


def run_dir(out: Path, world: str, anchor: str, reading: str) -> Path:
    preset = RECIPE[world] if reading == "recipe" else f"{WORLDS[world]}_{reading}"
    return out / f"{world}_{anchor}_{preset}"


def report_of(out: Path, world: str, anchor: str, reading: str, seeds: int, groups: int, group_size: int,
              say=print) -> dict:
    """credit_quality.json of one world, anchor and preset (played and written when it is not on disk)."""
    folder = run_dir(out, world, anchor, reading)
    path = folder / "credit_quality.json"
    if not path.is_file():
        t0 = time.perf_counter()
        run_credit_quality(folder, env=world, seeds=tuple(range(seeds)), groups=groups, group_size=group_size,
                           preset=folder.name.split("_", 2)[2], state_anchor=anchor, n_resamples=200,
                           say=lambda *_: None)
        say(f"{folder.name}: {time.perf_counter() - t0:.0f} s")
    return json.loads(path.read_text())


def paired(out: Path, seeds: int, groups: int, group_size: int, say=print) -> dict:
    """Per world and anchor: (method, reading) minus (method, baseline reading), per metric, paired over seeds."""
    result: dict = {}
    for world in WORLDS:
        for anchor in ANCHORS:
            reports = {r: report_of(out, world, anchor, r, seeds, groups, group_size, say)
                       for r in READINGS + ("recipe",)}
            comparisons = [(f"{m}: paper - spec", m, "paper", "spec") for m in ("milegpo-md", "milegpo-rcs",
                                                                                "milegpo-full")]
            comparisons.append(("graphgpo: recipe - paper preset", "graphgpo", "recipe", "paper"))
            # gigpo-verl is gigpo with step_penalty="return": verl-agent's GiGPO (gigpo_reference)
            comparisons.append(("gigpo: verl-agent (gigpo-verl) - paper preset", ("gigpo-verl", "gigpo"), "paper",
                                "paper"))
            for label, method, a, b in comparisons:
                method_a, method_b = method if isinstance(method, tuple) else (method, method)
                for metric in METRICS:
                    got = paired_test(reports[a]["methods"][method_a]["per_batch"][metric],
                                      reports[b]["methods"][method_b]["per_batch"][metric])
                    result.setdefault(f"{world} / {anchor}", {}).setdefault(label, {})[metric] = got
    return result


def measure(out: Path, seeds: int, groups: int, group_size: int, say=print) -> dict:
    figures: dict = {}
    for world in WORLDS:
        for reading in READINGS:
            for anchor in ANCHORS:
                report = report_of(out, world, anchor, reading, seeds, groups, group_size, say)
                row: dict = {"seeds": report["labels"]["batches"], "rows": report["labels"]["rows"],
                             "success_rate": report["labels"]["success_rate"]}
                for (method, key), name in FIGURES.items():
                    per_seed = report["methods"][method]["diagnostics_per_batch"].get(key, [])
                    mean, lo, hi = mean_ci(per_seed)
                    row[name] = {"mean": mean, "ci": [lo, hi], "per_seed": per_seed}
                pairs = report["methods"]["milegpo-rcs"]["diagnostics_per_batch"].get("tie_pairs", [])
                row["tie pairs"] = int(sum(p for p in pairs if p == p))
                figures[f"{world} / {anchor} / {reading}"] = row
    return figures


def pct(cell: dict) -> str:
    lo, hi = cell["ci"]
    return f"{100 * cell['mean']:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]" if lo == lo else f"{100 * cell['mean']:.1f}"


def table(figures: dict) -> str:
    names = list(FIGURES.values())
    lines = ["| world / anchor / reading | seeds | " + " | ".join(names) + " | tie pairs |",
             "| --- | --- | " + " | ".join("---" for _ in names) + " | --- |"]
    for label, row in figures.items():
        lines.append(f"| {label} | {row['seeds']} | " + " | ".join(pct(row[n]) for n in names)
                     + f" | {row['tie pairs']} |")
    for world, paper in PAPER.items():
        lines.append(f"| paper, {world if world == 'webshop' else 'ALFWorld'} | | "
                     + " | ".join(f"{100 * paper[n]:.1f}" if n in paper else "" for n in names) + " | |")
    return "\n".join(lines) + "\n"


def paired_table(result: dict) -> str:
    lines = ["| world / anchor | comparison | " + " | ".join(METRICS) + " |",
             "| --- | --- | " + " | ".join("---" for _ in METRICS) + " |"]
    for where, comps in result.items():
        for label, cells in comps.items():
            lines.append(f"| {where} | {label} | " + " | ".join(
                f"{1000 * c['diff']:+.1f} [{1000 * c['ci'][0]:+.1f}, {1000 * c['ci'][1]:+.1f}] (p {c['t_p']:.2g})"
                for c in (cells[m] for m in METRICS)) + " |")
    return "\n".join(lines) + "\n"


#: the learning testbed (experiments/credit_testbed.py): (method, folder suffix a, folder suffix b, label), each
#: folder ``paper_testbed_<world>_<suffix>`` beside ``--out``; a minus b, paired by seed
TESTBED = (("milegpo-rcs", "paper", "spec", "paper - spec reading"),
           ("milegpo-full", "paper", "spec", "paper - spec reading"),
           ("gigpo", "gigpo_reference", "baselines", "verl-agent's code - paper preset"),
           ("graphgpo", "graphgpo_reference", "baselines", "verl-agent's code - paper preset"))


def testbed_pairs(results: Path) -> dict:
    """Final success and mean training success (points) of each comparison of :data:`TESTBED`, paired by seed,
    for every world whose two testbed folders exist."""
    out: dict = {}
    for world in WORLDS:
        for method, a, b, label in TESTBED:
            folders = {r: results.parent / f"paper_testbed_{world}_{r}" / "results.json" for r in (a, b)}
            if not all(f.is_file() for f in folders.values()):
                continue
            records = {r: {(x["method"], x["seed"]): x for x in json.loads(f.read_text())["records"]}
                       for r, f in folders.items()}
            seeds = sorted(seed for m, seed in records[a] if m == method and (m, seed) in records[b])
            for figure, value in (("final success", lambda x: 100 * x["final"]["success"]),
                                  ("mean training success",
                                   lambda x: 100 * sum(c["success"] for c in x["curve"]) / len(x["curve"]))):
                xs = [value(records[a][(method, seed)]) for seed in seeds]
                ys = [value(records[b][(method, seed)]) for seed in seeds]
                out.setdefault(f"{world} / {method}: {label}", {})[figure] = {
                    "a": mean_ci(xs), "b": mean_ci(ys), "a - b": paired_test(xs, ys)}
    return out


def testbed_table(pairs: dict) -> str:
    lines = ["| world / method: comparison | figure | a | b | a - b (paired) |", "| --- | --- | --- | --- | --- |"]
    for where, figures in pairs.items():
        for label, cell in figures.items():
            (am, alo, ahi), (bm, blo, bhi), d = cell["a"], cell["b"], cell["a - b"]
            lines.append(f"| {where} | {label} | {am:.1f} [{alo:.1f}, {ahi:.1f}] | {bm:.1f} [{blo:.1f}, {bhi:.1f}] | "
                         f"{d['diff']:+.2f} [{d['ci'][0]:+.2f}, {d['ci'][1]:+.2f}] (p {d['t_p']:.2g}, n {d['n']}) |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="experiments/results/paper_mechanism")
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--groups", type=int, default=16)
    p.add_argument("--group-size", type=int, default=8)
    args = p.parse_args(argv)
    out = Path(args.out)
    figures = measure(out, args.seeds, args.groups, args.group_size)
    pairs = paired(out, args.seeds, args.groups, args.group_size)
    testbed = testbed_pairs(out)
    (out / "figures.json").write_text(json.dumps({"mechanism": figures, "paired": pairs, "testbed": testbed},
                                                 indent=1))
    text = (table(figures) + "\nPaired differences over the seeds, x 1000 (+2.0 = +0.002 of the figure), 95% t-interval, "
            "paired t-test p:\n\n" + paired_table(pairs))
    if testbed:
        text += ("\nThe learning testbed (experiments/credit_testbed.py, tracked+actions keys, the policy sees the "
                 "context line; percent, 95% t-intervals over seeds):\n\n" + testbed_table(testbed))
    (out / "table.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
