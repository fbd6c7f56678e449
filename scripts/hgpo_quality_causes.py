"""HGPO's ground-truth credit quality under one change at a time (notes/methods.md, "HGPO against its paper"):
the batches of ``milegpo credit-quality`` (mixed expert, seeds 0-4, 16 groups x 8, default anchor), HGPO under
the preset and under each change, GiGPO beside it; same-state AUC / group AUC with 95% bootstrap intervals.

    python scripts/hgpo_quality_causes.py [household|webshop]
"""

from __future__ import annotations

import sys

from milegpo.credit.presets import get_preset
from milegpo.evidence.labelled import default_expert, play_mixed_expert
from milegpo.evidence.quality import credit_quality, default_preset, quality_tasks

CHANGES = {"preset (the ALFWorld / WebShop script)": {}, "base group": {"hgpo_base_group": True},
           "history 0": {"hgpo_history": 0}, "paper weights (weight_shift 0)": {"hgpo_weight_shift": 0},
           "sample std": {"hgpo_std": "sample"}}


def main(env: str = "household") -> None:
    config = get_preset(default_preset(env))
    batches = [play_mixed_expert(quality_tasks(env, "train", 16, seed, None, {}), 8, seed, (0.1, 0.9),
                                 default_expert(env), 0.1)
               for seed in range(5)]

    def cell(rep, name):
        m = rep["methods"][name]
        return " / ".join(f"{m[k]:.3f} [{m['ci'][k][0]:.3f}, {m['ci'][k][1]:.3f}]"
                          for k in ("same_state_auc", "group_auc"))

    print(f"| {env}: HGPO under | same-state AUC / group AUC |\n| --- | --- |")
    gigpo = credit_quality(batches, config, "torch", methods=["gigpo"])
    print(f"| gigpo (preset) | {cell(gigpo, 'gigpo')} |")
    for label, changes in CHANGES.items():
        rep = credit_quality(batches, config.replace(**changes), "torch", methods=["hgpo"])
        print(f"| {label} | {cell(rep, 'hgpo')} |")


if __name__ == "__main__":
    main(*sys.argv[1:])
