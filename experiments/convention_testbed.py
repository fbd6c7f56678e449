"""Does a credit convention change learning? The credit testbed (experiments/credit_testbed.py) with each
method run under several CreditConfig conventions on the same seeds, one switch at a time, paired by seed.

    OMP_NUM_THREADS=1 python experiments/convention_testbed.py --out experiments/results/parity_testbed \
        --methods graphgpo milegpo-full --seeds $(seq 0 19) --state-anchor observation

(``--state-anchor observation``: the recorded run keyed states by the observation; the default is the trainer's,
``tracked+actions``.)

A seed plays the same tasks in the same order from the same prior with the same random stream under every
method and convention (credit_testbed.run), so the per-seed differences pair. The conventions
(:data:`CONVENTIONS`) are today's defaults and the public GraphGPO recipe's episode term, reached one switch at
a time (:data:`PAIRS`): ``trajectory-penalty`` (every row of a trajectory gets its return, 10 * success - 0.1 *
its invalid count, still standardised over rows: the recipe's original helper), then ``per-trajectory`` (that
return standardised once per trajectory; a per-trajectory norm needs one score per trajectory, so it is
compared with ``trajectory-penalty``; both switches together are compared with the defaults too). Also, by
``--conventions``: ``step-reward-penalty`` (GiGPO's step reward -0.1 on an invalid row, the recipe's) and
``recipe`` (every field of ``presets.GRAPHGPO_REPRODUCTION``, the recipe as issue 33 described it), each
against the defaults. Every run
is appended to ``<out>/records.jsonl`` as it ends (a second call with the same flags runs only what is
missing); the table (``<out>/table.md``, + ``analysis.json``) holds the final and mean training success per
method and convention and the paired differences with 95% t-intervals.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from credit_testbed import parser, run, settings_of  # noqa: E402

from milegpo.credit import presets  # noqa: E402
from milegpo.evidence.seed_stats import mean_ci, paired_test  # noqa: E402

#: convention -> CreditConfig fields changed from the preset; ``recipe``: every field where
#: presets.GRAPHGPO_REPRODUCTION differs from presets.ALFWORLD_SPEC (with preset alfworld_spec: the whole recipe)
CONVENTIONS = {
    "default": {},
    "trajectory-penalty": {"episode_penalty": "trajectory"},
    "per-trajectory": {"episode_penalty": "trajectory", "episode_norm_over": "trajectories"},
    "step-reward-penalty": {"step_penalty": "reward"},
    "recipe": {k: v for k, v in presets.GRAPHGPO_REPRODUCTION.to_dict().items()
               if presets.ALFWORLD_SPEC.to_dict()[k] != v},
}
#: the one-switch comparisons (changed, baseline), then the recipe's whole episode term, GiGPO's step-reward
#: penalty and the whole recipe against the defaults (a pair is tabled where both were run)
PAIRS = (("trajectory-penalty", "default"), ("per-trajectory", "trajectory-penalty"), ("per-trajectory", "default"),
         ("step-reward-penalty", "default"), ("recipe", "default"))
ENDPOINTS = {"final success": lambda r: r["final"]["success"],
             "mean training success": lambda r: float(np.mean([c["success"] for c in r["curve"]])),
             "final invalid": lambda r: r["final"]["invalid"]}


def analyse(records: list[dict]) -> dict:
    """Per (method, convention) each endpoint's mean and 95% interval over seeds; per method and pair of
    :data:`PAIRS` the paired difference (changed - baseline) over the seeds both ran."""
    by: dict = {}
    for r in records:
        by.setdefault((r["method"], r["convention"]), {})[r["seed"]] = r
    out: dict = {"cells": {}, "paired": {}}
    for (method, convention), runs in sorted(by.items()):
        out["cells"][f"{method} / {convention}"] = {
            "seeds": len(runs), **{k: mean_ci([f(r) for r in runs.values()]) for k, f in ENDPOINTS.items()}}
    for method in sorted({m for m, _ in by}):
        for changed, base in PAIRS:
            a, b = by.get((method, changed), {}), by.get((method, base), {})
            seeds = sorted(set(a) & set(b))
            if len(seeds) >= 2:
                out["paired"][f"{method}: {changed} - {base}"] = {
                    "seeds": len(seeds),
                    **{k: paired_test([f(a[s]) for s in seeds], [f(b[s]) for s in seeds]) for k, f in ENDPOINTS.items()}}
    return out


def table(records: list[dict], settings: dict) -> str:
    a = analyse(records)
    seeds = sorted({r["seed"] for r in records})

    def cell(v):
        m, lo, hi = v
        return f"{100 * m:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"

    def diff(v):
        return f"{100 * v['diff']:+.1f} [{100 * v['ci'][0]:+.1f}, {100 * v['ci'][1]:+.1f}] (p {v['t_p']:.2f})"

    s = settings
    lines = [f"Convention testbed ({s['env']}): {s['tasks']} training tasks, horizon {s['horizon']}, "
             f"{s['iterations']} iterations x {s['groups']} groups x {s['group_size']} episodes, lr {s['lr']}, "
             f"state anchor {s.get('state_anchor', s.get('state', 'observation'))}, the policy sees "
             f"{s.get('policy_sees', 'observation')}, preset {s['preset']}; {len(seeds)} seeds ({seeds[0]}-{seeds[-1]}); "
             "mean and 95% t-interval over seeds, %.", "",
             "| method / convention | final success | mean training success | final invalid | seeds |",
             "| --- | --- | --- | --- | --- |"]
    for name, v in a["cells"].items():
        lines.append(f"| {name} | {cell(v['final success'])} | {cell(v['mean training success'])} | "
                     f"{cell(v['final invalid'])} | {v['seeds']} |")
    lines += ["", "Paired differences (points, changed - baseline; 95% t-interval over seeds; paired t-test p):", "",
              "| method: pair | final success | mean training success | final invalid | seeds |",
              "| --- | --- | --- | --- | --- |"]
    for name, v in a["paired"].items():
        lines.append(f"| {name} | {diff(v['final success'])} | {diff(v['mean training success'])} | "
                     f"{diff(v['final invalid'])} | {v['seeds']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = parser(__doc__)
    p.set_defaults(out="experiments/results/parity_testbed", methods=["graphgpo", "milegpo-full"])
    p.add_argument("--conventions", nargs="+", default=["default", "trajectory-penalty", "per-trajectory"],
                   choices=list(CONVENTIONS))
    args = p.parse_args(argv)
    if args.jobs != 1:
        p.error("--jobs: this script runs one job at a time (--jobs 1)")
    settings = settings_of(args, p)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "records.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    done = {(r["seed"], r["method"], r["convention"]) for r in records}
    t0 = time.perf_counter()
    for seed in args.seeds:  # seed-major: a cut-short run still pairs every convention on its seeds
        for method in args.methods:
            for convention in args.conventions:
                if (seed, method, convention) in done:
                    continue
                overrides = {**settings["overrides"], **CONVENTIONS[convention]}
                record = {**run(seed, method, {**settings, "overrides": overrides}), "convention": convention}
                records.append(record)
                with log.open("a") as f:
                    f.write(json.dumps(record) + "\n")
                print(f"[seed {seed}] {method:<13} {convention:<19} final success {record['final']['success']:.3f} "
                      f"({record['seconds']:.1f} s)", flush=True)
    md = table(records, settings)
    footer = (f"\nCommand: `python experiments/convention_testbed.py {' '.join(argv)}`; {len(records)} runs "
              f"recorded, this call {time.perf_counter() - t0:.0f} s wall.\n")
    (out / "table.md").write_text(md + footer)
    (out / "analysis.json").write_text(json.dumps({"settings": settings, "analysis": analyse(records)}, indent=1))
    print("\n" + md + footer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
