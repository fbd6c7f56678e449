"""Issue 34's table: per candidate configuration of the WebShop testbed, graphgpo - grpo final success (paired over
seeds) and its change against the default configuration (the seeds pair the configurations too: same goals, same
prior, same random stream per seed), plus the net credit of the purchase rows.

    python scripts/webshop_candidates.py experiments/results/testbed_webshop_baseline \
        experiments/results/testbed_webshop_reward_score ...

The first folder is the default configuration; each folder holds credit_testbed.py's results.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from milegpo.evidence.seed_stats import mean_ci


def load(folder: str) -> tuple[dict, dict]:
    saved = json.loads((Path(folder) / "results.json").read_text())
    by: dict = {}
    for r in saved["records"]:
        by.setdefault(r["method"], {})[r["seed"]] = r
    return saved["settings"], by


def net_purchase(record: dict) -> float:
    p = record["purchases"]
    n = p["won_n"] + p["lost_n"]
    return (p["won_n"] * p["won_mean"] + p["lost_n"] * p["lost_mean"]) / n if n else float("nan")


def cell(v, scale=100.0, sign=False) -> str:
    m, lo, hi = (scale * x for x in v)
    f = "+.1f" if sign else ".1f"
    return f"{m:{f}} [{lo:{f}}, {hi:{f}}]"


def main(folders: list[str]) -> None:
    _, base = load(folders[0])
    print("| configuration | grpo final success % | graphgpo final success % | graphgpo - grpo | change of the gap vs "
          "default | grpo / graphgpo net purchase credit |")
    print("| --- | --- | --- | --- | --- | --- |")
    for folder in folders:
        settings, by = load(folder)
        seeds = sorted(set(by["grpo"]) & set(by["graphgpo"]) & set(base["grpo"]))
        gap = [by["graphgpo"][s]["final"]["success"] - by["grpo"][s]["final"]["success"] for s in seeds]
        base_gap = [base["graphgpo"][s]["final"]["success"] - base["grpo"][s]["final"]["success"] for s in seeds]
        change = np.array(gap) - np.array(base_gap)
        name = Path(folder).name.replace("testbed_webshop_", "")
        print(f"| {name} | {cell(mean_ci([by['grpo'][s]['final']['success'] for s in seeds]))} | "
              f"{cell(mean_ci([by['graphgpo'][s]['final']['success'] for s in seeds]))} | "
              f"{cell(mean_ci(gap), sign=True)} | {cell(mean_ci(change), sign=True)} | "
              f"{np.mean([net_purchase(by['grpo'][s]) for s in seeds]):.2f} / "
              f"{np.mean([net_purchase(by['graphgpo'][s]) for s in seeds]):.2f} |")
    print(f"\n{len(seeds)} seeds; intervals: 95% t over seeds (paired).")


if __name__ == "__main__":
    main(sys.argv[1:])
