"""Milestone truth under one change at a time: which of our settings moves what MileGPO's scores say.

    python experiments/milestone_causes.py --out experiments/results/milestone_truth/causes

The same mixed-expert batches as ``milegpo credit-quality`` (seeds 0-4, 16 groups x 8, the world's horizon; played
once per state anchor: the anchor changes keys, not play) are credited by GraphGPO and MileGPO (full) under each
:data:`VARIANTS` entry, one setting changed from the world's default preset, and the milestone truth of every
MileGPO and GraphGPO step score is measured (:func:`milegpo.evidence.milestones.milestone_truth`, 95% bootstrap
intervals over the 80 groups). Causes, each on its own: the state key (``observation``: the observation text
alone), the normalisation of the step terms (``norm``), the paper's reading against the spec's (``*_spec``), and
the size of MileGPO's correction (``eta``, ``lam``). Writes ``<out>/causes.json`` and ``<out>/table.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from milegpo.credit.config import get_preset  # noqa: E402
from milegpo.evidence.labelled import default_expert, play_mixed_expert  # noqa: E402
from milegpo.evidence.milestones import milestone_truth  # noqa: E402
from milegpo.evidence.quality import default_preset, quality_tasks, similar_state_advantages  # noqa: E402

#: name -> (state anchor, preset (None: the world's), CreditConfig overrides)
VARIANTS = {
    "default": (None, None, {}),
    "observation keys": ("observation", None, {}),
    "norm mean": (None, None, {"norm": "mean"}),
    "norm mean_std": (None, None, {"norm": "mean_std"}),
    "spec reading": (None, "spec", {}),
    "eta 1.0": (None, None, {"eta": 1.0}),
    "eta 0.2": (None, None, {"eta": 0.2}),
}
#: the scores tabled
SCORES = ("milegpo_s_pcc", "milegpo_coverage", "milegpo_delta_pos", "milegpo_shaping", "milegpo_correction",
          "milegpo_advantage", "graphgpo_return", "graphgpo_step_adv", "graphgpo_advantage")


def measure(world: str, seeds, variants=VARIANTS, n_resamples: int = 2000, say=print) -> dict:
    """``{variant: milestone_truth report}`` of ``world`` (variants whose change is the preset's value already
    are skipped: they would repeat the default)."""
    base_preset = default_preset(world)
    played: dict = {}
    out = {}
    for name, (anchor, reading, overrides) in variants.items():
        preset = base_preset if reading is None else f"{'webshop' if world == 'webshop' else 'alfworld'}_{reading}"
        config = get_preset(preset)
        if overrides and all(getattr(config, k) == v for k, v in overrides.items()):
            say(f"[{world}] {name}: the preset's own value, skipped")
            continue
        config = config.replace(**overrides) if overrides else config
        if anchor not in played:
            t0 = time.perf_counter()
            played[anchor] = [play_mixed_expert(quality_tasks(world, "train", 16, seed, None), 8, seed,
                                                expert=default_expert(world), state_anchor=anchor) for seed in seeds]
            say(f"[{world}] played {len(seeds)} batches keyed by {anchor or 'the default anchor'} "
                f"({time.perf_counter() - t0:.0f} s)")
        batches = played[anchor]
        _, _, scores = similar_state_advantages(batches, None, config, "torch", ["graphgpo", "milegpo-full"],
                                                with_scores=True)
        out[name] = milestone_truth([lb.batch for lb in batches], scores, n_resamples)
        out[name]["settings"] = {"state_anchor": anchor or "tracked+actions", "preset": preset, "overrides": overrides}
    return out


def table(reports: dict) -> str:
    lines = ["| world | variant | " + " | ".join(SCORES) + " |", "|" + " --- |" * (len(SCORES) + 2)]
    for world, variants in reports.items():
        for name, rep in variants.items():
            cells = []
            for k in SCORES:
                e = rep["scores"][k]
                cells.append(f"{e['milestone_auc']:.3f} [{e['ci'][0]:.3f}, {e['ci'][1]:.3f}]")
            lines.append(f"| {world} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="experiments/results/milestone_truth/causes")
    p.add_argument("--worlds", nargs="+", default=["household", "webshop"])
    p.add_argument("--seeds", type=int, nargs="+", default=list(range(5)))
    p.add_argument("--resamples", type=int, default=2000)
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    reports = {world: measure(world, args.seeds, n_resamples=args.resamples) for world in args.worlds}
    strict = json.loads(json.dumps(reports), parse_constant=lambda constant: None)
    (out / "causes.json").write_text(json.dumps(strict, indent=1))
    md = table(reports)
    (out / "table.md").write_text(md)
    print(md + f"wrote {out / 'causes.json'}, {out / 'table.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
