"""Issue 31's learning table: the testbed (experiments/credit_testbed.py) for each state anchor the credit keys by
and each thing the tabular policy sees, one world at a time, paired over seeds.

    python experiments/anchor_matrix.py experiments/results/testbed_webshop_baseline \
        experiments/results/anchors/testbed_webshop_observation_context \
        experiments/results/anchors/testbed_webshop_tracked+actions_obs \
        experiments/results/anchors/testbed_webshop_tracked+actions_context

Every folder holds a results.json of one configuration (``--combine`` joins chunks); they must share every setting
but the anchor and what the policy sees. Prints, as markdown: final success % per method and configuration (mean
and 95% t-interval over seeds), and the paired differences (95% t-interval, paired t-test p): the adjacent pairs
of the paper's ranking and every method against GRPO within a configuration, and, per method, the anchor's effect
(``tracked+actions`` - ``observation``, the same policy input) and the context's (``context`` - ``observation``,
the same anchor). The seeds pair them all: a seed plays the same goals from the same prior with the same random
stream in every configuration."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from credit_testbed import METHODS, comparable_settings, settings_difference  # noqa: E402

from milegpo.evidence.seed_stats import mean_ci, paired_test  # noqa: E402

#: adjacent pairs a reader asks about first; every method - grpo is added
PAIRS = [("milegpo-full", "graphgpo"), ("graphgpo", "gigpo"), ("gigpo", "grpo")]


def load(folders: list[str]) -> dict[tuple[str, str], dict]:
    """(anchor, policy sees) -> {method: {seed: final success}}; a ValueError for a configuration given twice
    or folders whose other settings differ."""
    cells: dict[tuple[str, str], dict] = {}
    shared = None
    for folder in folders:
        saved = json.loads((Path(folder) / "results.json").read_text())
        s = comparable_settings(saved["settings"])
        cell = (s.pop("state_anchor"), s.pop("policy_sees"))
        if shared is None:
            shared = s
        elif s != shared:
            raise ValueError(f"{folder}: settings other than the anchor and the policy's input differ from "
                             f"{folders[0]}'s: {settings_difference(s, shared)}")
        if cell in cells:
            raise ValueError(f"{folder}: anchor {cell[0]}, policy sees {cell[1]} is given twice")
        by: dict = {}
        for r in saved["records"]:
            by.setdefault(r["method"], {})[r["seed"]] = r["final"]["success"]
        cells[cell] = by
    return cells


def ci(values, sign: bool = False) -> str:
    m, lo, hi = (100 * x for x in mean_ci(values))
    f = "+.1f" if sign else ".1f"
    return f"{m:{f}} [{lo:{f}}, {hi:{f}}]"


def paired(a: dict, b: dict) -> str:
    seeds = sorted(set(a) & set(b))
    if len(seeds) < 2:
        return "n/a"
    t = paired_test([a[s] for s in seeds], [b[s] for s in seeds])
    return f"{100 * t['diff']:+.1f} [{100 * t['ci'][0]:+.1f}, {100 * t['ci'][1]:+.1f}] (p {t['t_p']:.3f}, {len(seeds)})"


def markdown(cells: dict[tuple[str, str], dict]) -> str:
    order = sorted(cells, key=lambda c: (c[0] != "observation", c[0], c[1] != "observation"))
    methods = [m for m in METHODS if any(m in cells[c] for c in order)]
    head = [f"{a}, policy sees {p}" for a, p in order]
    lines = ["Final success % (mean and 95% t-interval over seeds; seeds in brackets where not 20):", "",
             "| method | " + " | ".join(head) + " |", "| --- |" + " --- |" * len(order)]
    for m in methods:
        row = []
        for c in order:
            v = cells[c].get(m)
            row.append("not run" if not v else ci(list(v.values())) + ("" if len(v) == 20 else f" ({len(v)})"))
        lines.append(f"| {m} | " + " | ".join(row) + " |")
    lines += ["", "Paired differences within a configuration (points; 95% t-interval; paired t-test p; seeds):", "",
              "| pair | " + " | ".join(head) + " |", "| --- |" + " --- |" * len(order)]
    pairs = PAIRS + [(m, "grpo") for m in methods if m != "grpo" and (m, "grpo") not in PAIRS]
    for a, b in pairs:
        lines.append(f"| {a} - {b} | " + " | ".join(
            paired(cells[c][a], cells[c][b]) if a in cells[c] and b in cells[c] else "not run" for c in order) + " |")
    effects = []
    for anchor in sorted({c[0] for c in order} - {"observation"}):
        for sees in sorted({c[1] for c in order}, key=lambda p: (p != "observation", p)):
            if (anchor, sees) in cells and ("observation", sees) in cells:
                effects.append((f"{anchor} - observation keys (policy sees {sees})", (anchor, sees),
                                ("observation", sees)))
    for anchor in sorted({c[0] for c in order}):
        if (anchor, "context") in cells and (anchor, "observation") in cells:
            effects.append((f"context - no context in the policy's input ({anchor} keys)", (anchor, "context"),
                            (anchor, "observation")))
    if effects:
        lines += ["", "Paired effects of a configuration change, per method (points; 95% t-interval; paired t-test p; "
                  "seeds):", "", "| method | " + " | ".join(e[0] for e in effects) + " |",
                  "| --- |" + " --- |" * len(effects)]
        for m in methods:
            lines.append(f"| {m} | " + " | ".join(
                paired(cells[x][m], cells[y][m]) if m in cells[x] and m in cells[y] else "not run"
                for _, x, y in effects) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python experiments/anchor_matrix.py RESULTS_DIR [RESULTS_DIR ...]", file=sys.stderr)
        return 2
    try:
        cells = load(argv)
    except (OSError, ValueError) as e:
        print(f"anchor_matrix: {e}", file=sys.stderr)
        return 2
    print(markdown(cells), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
