"""The regime where MileGPO's inference pays, found or shown absent (issue 47, part 5).

The paper's mechanism: MileGPO helps where GraphGPO's credit ties many same-state actions and horizons are long.
For each cell of :data:`CELLS` (a world, its size and horizon; a few cells change one setting of another cell,
to test a cause on its own) this measures, on the same settings:

- on early rollouts (``milegpo credit-quality``'s mixed expert, :data:`QUALITY_SEEDS` batches of 16 groups x 8):
  GraphGPO's tie share, the shared-state coverage, MileGPO's tie-correction rate (spec section 11), and the
  milestone truth of MileGPO's milestone score, its correction A^res and GraphGPO's progress
  (:mod:`milegpo.evidence.milestones`);
- on the learning testbed (``experiments/credit_testbed.py``: tabular policy, the trainer's credit, 20+ seeds):
  final and mean training success of GraphGPO, MileGPO (full) and BEACON, paired by seed, the seeds a paired
  t-test needs to see 2 points at the measured spread, and the same mechanism figures on the learner's own
  rollouts (the records' ``credit`` and ``milestone_truth``).

    python experiments/regime.py run household_full_h50 --seeds $(seq 0 19)   # one cell (parts: other seeds)
    python experiments/regime.py quality household_full_h50                   # its credit-quality again
    python experiments/regime.py table                                        # every cell on disk
    python experiments/regime.py looks scienceworld_long --at 20 30 39        # one cell's interim looks

``run`` writes ``<out>/<cell>/quality/credit_quality.json`` (once) and ``<out>/<cell>/testbed/seeds_<a>-<b>/``
(``seeds_<a>-<b>_<methods>`` for other methods than :data:`METHODS`; one credit_testbed folder per call: calls
with other seeds or methods add to a cell); ``table`` combines each cell's
folders (a (method, seed) found twice is refused) into ``<out>/table.md`` and ``<out>/regime.json``; ``table CELL...``
prints those cells' table and writes nothing (the files hold every cell's); ``looks CELL`` prints the cell's MileGPO -
GraphGPO tests over seeds 0 to n-1 for each n of ``--at``, each with Holm's verdict over every cell's tests. A cell whose
world is not installed (ScienceWorld before its branch lands) is one more key of :data:`CELLS`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import credit_testbed  # noqa: E402
import numpy as np  # noqa: E402

from milegpo.evidence.ranking import bootstrap_weights, percentile_interval  # noqa: E402
from milegpo.evidence.quality import run_credit_quality  # noqa: E402
from milegpo.evidence.seed_stats import paired_test, seeds_for  # noqa: E402

#: what every cell's testbed runs share unless the cell says otherwise: the trainer's defaults (state anchor
#: tracked+actions, the context line in the policy's input), the README's testbed
BASE = {"state_anchor": "tracked+actions", "policy_sees": "context", "tasks": 32, "groups": 8, "group_size": 8}
#: name -> the cell's settings: env, options (the task generator's), horizon, iterations, and optionally lr,
#: preset, prior, overrides (CreditConfig fields), state_anchor, policy_sees, tasks, groups, group_size (the
#: testbed's), quality_seeds / quality_groups / quality_group_size (credit-quality's batches: QUALITY_SEEDS of
#: 16 x 8), testbed (False: early-rollout figures only), also (more testbed folders of runs of the same settings,
#: e.g. BEACON's README runs: combined with the cell's); ``base``: the cell this one changes one setting of (a cause
#: tested on its own), ``note``: what the cell is, ``why`` / ``why_no_beacon``: why its learning / BEACON's runs
#: are n/a (the table's notes)
CELLS: dict[str, dict] = {
    "household_r4_h10": {"env": "household", "options": {"max_receptacles": 4}, "horizon": 10, "iterations": 40,
                         "note": "the main job's world: rooms of 4 receptacles, a short horizon"},
    "household_r4_h30": {"env": "household", "options": {"max_receptacles": 4}, "horizon": 30, "iterations": 40,
                         "note": "rooms of 4, the testbed's horizon"},
    "household_r8_h30": {"env": "household", "options": {"max_receptacles": 8}, "horizon": 30, "iterations": 40,
                         "note": "rooms of 8"},
    "household_full_h15": {"env": "household", "options": {}, "horizon": 15, "iterations": 40,
                           "note": "ALFWorld-sized rooms (7-21 receptacles), a short horizon"},
    "household_full_h30": {"env": "household", "options": {}, "horizon": 30, "iterations": 40,
                           "also": ["experiments/results/beacon_testbed/household"],
                           "note": "ALFWorld-sized rooms, the README's testbed"},
    "household_full_h50": {"env": "household", "options": {}, "horizon": 50, "iterations": 40,
                           "note": "ALFWorld's size and horizon"},
    "webshop_h15": {"env": "webshop", "options": {}, "horizon": 15, "iterations": 30,
                    "note": "WebShop, half its horizon"},
    "webshop_h30": {"env": "webshop", "options": {}, "horizon": 30, "iterations": 30,
                    "also": ["experiments/results/beacon_testbed/webshop"],
                    "note": "WebShop's horizon, the README's testbed"},
    # ScienceWorld (BEACON's "easy" simplifications). Learning on ScienceWorld's own action space is not affordable
    # nor learnable for a tabular policy (FULL_ACTIONS_WHY); the testbed plays the cached world over a RESTRICTED
    # action set instead (experiments/sw_world.py: the gold expert's action and `distractors` listed actions per
    # state, the same for every method and seed, the engine's transitions cached in `world_cache`)
    "scienceworld_short": {"env": "scienceworld", "horizon": 15, "iterations": 40, "tasks": 8,
                           "options": {"task_types": ["find-non-living-thing", "lifespan-longest-lived",
                                                      "lifespan-shortest-lived",
                                                      "lifespan-longest-lived-then-shortest-lived"],
                                       "simplifications": "easy"},
                           "world_cache": "experiments/results/regime/scienceworld_short/world", "distractors": 3,
                           "quality_seeds": 3,
                           "note": "ScienceWorld's short task types (gold 5-6 steps), horizon 15; learning: the cached "
                                   "world over a RESTRICTED action set (the gold expert's action and 3 listed ones "
                                   "per state), 8 train variations per seed"},
    "scienceworld_long": {"env": "scienceworld", "horizon": 50, "iterations": 40, "tasks": 4, "groups": 4,
                          "options": {"task_types": ["boil", "melt", "freeze", "change-the-state-of-matter-of"],
                                      "simplifications": "easy"},
                          "world_cache": "experiments/results/regime/scienceworld_long/world", "distractors": 3,
                          "world_key": "thermal",
                          "fixed_tasks": True, "quality_seeds": 5, "quality_groups": 8,
                          "note": "ScienceWorld's long task types (gold 22-36 steps), horizon 50; its early-rollout "
                                  "figures rest on 5 batches of 8 groups (40 groups, 6,867 same-state pairs); "
                                  "learning: the cached world over a RESTRICTED action set (the gold expert's "
                                  "action and 3 listed ones per state), its states keyed with the engine's whole "
                                  "world (temperatures: the visible key merged states these thermal types play "
                                  "apart), 4 train variations (one of each type), the "
                                  "same for every seed (exploring a long type's states anew per seed costs too much "
                                  "engine time), 4 groups of 8 per iteration"},
    # one cause at a time, each against its base cell (same seeds: paired)
    "household_full_h50_observation": {"base": "household_full_h50", "state_anchor": "observation",
                                       "note": "keys: the observation text alone (GiGPO's anchor; aliased)"},
    "household_full_h50_eta1": {"base": "household_full_h50", "overrides": {"eta": 1.0},
                                "note": "scale: MileGPO's eta 1.0 (WebShop's table-5 value) instead of 0.2",
                                "why_no_beacon": "BEACON reads no eta: its runs would be household_full_h50's"},
    "household_full_h50_norm_mean": {"base": "household_full_h50", "overrides": {"norm": "mean"}, "lr": 0.05,
                                     "note": "convention: step terms centred, not divided by their spread (WebShop's "
                                             "table-5 norm; lr 0.05 as WebShop's testbed, advantages in reward "
                                             "units); under mean/std MileGPO's A^res points away from milestones "
                                             "(its milestone AUC 0.399; under mean 0.698 [0.675, 0.722] on the same "
                                             "batches: experiments/results/milestone_truth/causes)",
                                     "why_no_beacon": "a change of MileGPO's normalisation (BEACON normalises by "
                                                      "its own beacon_mode); not run"},
    "household_full_h50_prior1": {"base": "household_full_h50", "prior": 1.0,
                                  "note": "a weaker start (prior logit 1.0): fewer wins early, more ties"},
    "scienceworld_short_prior1": {"base": "scienceworld_short", "prior": 1.0,
                                  "world_cache": "experiments/results/regime/scienceworld_short_prior1/world",
                                  "note": "scienceworld_short with a weaker start (prior logit 1.0 on the expert's "
                                          "action instead of 2, the invalid action's 1 as before): the short cell "
                                          "is saturated (85% of its first iteration won); its own world cache, "
                                          "begun as a copy of the short cell's (the same engine transitions; the "
                                          "short cell's cache left as it landed)"},
    "scienceworld_short_d10": {"base": "scienceworld_short", "distractors": 10,
                               "world_cache": "experiments/results/regime/scienceworld_short_d10/world",
                               "note": "scienceworld_short with 10 listed actions beside the gold expert's per "
                                       "state instead of 3 (its own world cache, begun empty: new edges need the "
                                       "engine)"},
}
#: why the ScienceWorld cells do not learn on the engine's own action space (measured, notes/milestone_truth.md)
FULL_ACTIONS_WHY = ("a 2-iteration probe of scienceworld_short on the full action space (seed 0, GraphGPO; its folder "
                    "testbed_probe) took 148 s for 128 training and 128 evaluation episodes of ~10 steps (load 4), "
                    "~35 min a run, and won 3.1% then 0% of its training episodes: the testbed's prior (logit 2 on the "
                    "expert's action) among 300-3,800 listed actions gives that action 0.2-2.4% a step")
#: the batches of credit-quality per cell (mixed expert, seeds 0..QUALITY_SEEDS-1)
QUALITY_SEEDS = 5
#: the methods every cell's testbed runs
METHODS = ("graphgpo", "milegpo-full", "beacon")
#: the pairs tabled: (a, b) -> a - b, paired by seed
PAIRS = (("milegpo-full", "graphgpo"), ("beacon", "milegpo-full"), ("beacon", "graphgpo"))
#: the step scores of the milestone-truth columns
TRUTH_SCORES = ("milegpo_s_pcc", "milegpo_correction", "graphgpo_return", "graphgpo_step_adv",
                "beacon_segment_reward")


def cell_settings(name: str) -> dict:
    """A cell's full settings: :data:`BASE`, its base cell's, then its own."""
    if name not in CELLS:
        raise KeyError(f"no cell {name!r}; cells: {', '.join(CELLS)}")
    own = dict(CELLS[name])
    base = cell_settings(own.pop("base")) if "base" in own else dict(BASE)
    base.pop("note", None)
    return {**base, **own}


def testbed_args(s: dict, out: Path, seeds, methods) -> list[str]:
    """credit_testbed.py's flags for cell settings ``s``."""
    args = ["--out", str(out), "--env", s["env"], "--env-options", json.dumps(s["options"]), "--horizon",
            str(s["horizon"]), "--iterations", str(s["iterations"]), "--tasks", str(s["tasks"]), "--groups",
            str(s["groups"]), "--group-size", str(s["group_size"]), "--state-anchor", s["state_anchor"],
            "--policy-sees", s["policy_sees"], "--seeds", *map(str, seeds), "--methods", *methods]
    for flag, key in (("--lr", "lr"), ("--preset", "preset"), ("--prior", "prior"), ("--world-cache", "world_cache"),
                      ("--distractors", "distractors"), ("--world-key", "world_key")):
        if key in s:
            args += [flag, str(s[key])]
    if s.get("overrides"):
        args += ["--overrides", json.dumps(s["overrides"])]
    if s.get("fixed_tasks"):
        args.append("--fixed-tasks")
    return args


def run_cell(name: str, out: Path, seeds, methods=METHODS, say=print, quality_only: bool = False) -> None:
    """The cell's credit-quality batches (once; again with ``quality_only``, which runs nothing else) and its
    testbed runs of ``seeds`` x ``methods``."""
    s = cell_settings(name)
    folder = out / name
    quality = folder / "quality"
    if quality_only or not (quality / "credit_quality.json").is_file():
        t0 = time.perf_counter()
        preset = s.get("preset")
        run_credit_quality(quality, env=s["env"], seeds=tuple(range(s.get("quality_seeds", QUALITY_SEEDS))),
                           horizon=s["horizon"],
                           groups=s.get("quality_groups", 16), group_size=s.get("quality_group_size", 8),
                           options=s["options"] or None, state_anchor=s["state_anchor"], backend="torch",
                           preset=preset, say=lambda *_: None)
        say(f"[{name}] credit-quality: {time.perf_counter() - t0:.0f} s", flush=True)
    if quality_only:
        return
    if not s.get("testbed", True):
        say(f"[{name}] no testbed for this cell ({CELLS[name].get('note', '')}): early-rollout figures only")
        return
    part = folder / "testbed" / (f"seeds_{min(seeds)}-{max(seeds)}"
                                 + ("" if tuple(methods) == METHODS else "_" + "_".join(methods)))
    if (part / "results.json").is_file():
        say(f"[{name}] {part} is there already: not run again")
        return
    t0 = time.perf_counter()
    credit_testbed.main(testbed_args(s, part, seeds, methods))
    say(f"[{name}] testbed {len(seeds)} seeds x {len(methods)} methods: {time.perf_counter() - t0:.0f} s", flush=True)


# ------------------------------------------------------------------------------------------------ the table
def _records(folder: Path, also=()) -> list[dict]:
    """The testbed records of a cell: its parts and the ``also`` folders (the same settings, else refused)."""
    parts = [str(p.parent) for p in sorted((folder / "testbed").glob("*/results.json"))]
    parts += [str(p) for p in also if (Path(p) / "results.json").is_file()]
    if not parts:
        return []
    return credit_testbed.combine(parts)[1]


def _mean(xs):
    xs = [x for x in xs if x == x]
    return sum(xs) / len(xs) if xs else float("nan")


def _pooled(shares, counts) -> float:
    """The share pooled over batches from each batch's share of its count (NaN without any count)."""
    num = sum(s * c for s, c in zip(shares, counts) if c and s == s)
    den = sum(c for s, c in zip(shares, counts) if c and s == s)
    return num / den if den else float("nan")


def expert_tie_share(q: dict) -> list[float]:
    """GraphGPO's tie share on a cell's credit-quality batches: tied pairs of all same-state pairs, pooled over
    the batches, with the bootstrap interval over task groups that credit-quality reports (``ties``); NaN for a
    report written before it had them (rerun the cell's credit-quality). Not a t-interval over the few batches'
    shares: two batches (ScienceWorld's long cell) gave 90.4 [29.8, 151.0]."""
    ties = q.get("ties")
    if ties is None:
        return [float("nan")] * 3
    return [ties["tie_share"], *ties["ci"]]


def bounded_mean_ci(xs, n_resamples: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    """Mean over seeds of a share (a success rate) and the 95% percentile bootstrap interval of that mean over
    seeds: inside the seeds' range, so never past 0 or 100% (the t-interval of a mean near 100% is: 99.8 [99.4,
    100.1]); NaN interval for fewer than two seeds."""
    xs = np.asarray([x for x in xs if x == x], dtype=np.float64)
    if xs.size < 2:
        return (float(xs.mean()) if xs.size else float("nan")), float("nan"), float("nan")
    means = bootstrap_weights(xs.size, n_resamples, seed) @ xs / xs.size
    return (float(xs.mean()), *percentile_interval(means))


#: a learning run's endpoints (its testbed record -> a success rate): the final evaluation, the mean training success
ENDPOINTS = {"final_success": lambda r: r["final"]["success"],
             "train_success": lambda r: _mean([c["success"] for c in r["curve"]])}


def cell_figures(name: str, out: Path) -> dict | None:
    """Every figure of one cell on disk (None when nothing is)."""
    folder = out / name
    qpath = folder / "quality" / "credit_quality.json"
    records = _records(folder, cell_settings(name).get("also", ()))
    if not qpath.is_file() and not records:
        return None
    fig: dict = {"cell": name, "settings": cell_settings(name), "note": CELLS[name].get("note", "")}
    if qpath.is_file():
        q = json.loads(qpath.read_text())
        per = q["methods"]["milegpo-full"]["diagnostics_per_batch"]
        fig["expert"] = {"tie_share": expert_tie_share(q),
                         "per_batch": {k: per[k] for k in ("tie_share", "shared_state_coverage",
                                                           "tie_correction_rate")},
                         "tie_correction_rate": _pooled(per["tie_correction_rate"], per["tie_pairs"])}
        fig["expert"]["tie_pairs"] = sum(per["tie_pairs"])
        truth = q["milestone_truth"]
        fig["expert"]["truth"] = {k: [truth["scores"][k]["milestone_auc"], *truth["scores"][k]["ci"]]
                                  for k in TRUTH_SCORES}
        fig["expert"]["rows"] = q["labels"]["rows"]
        fig["expert"]["success"] = q["labels"]["success_rate"]
        fig["expert"]["aliased_share"] = q["states"]["aliased_share"]
    if records:
        by = {m: {r["seed"]: r for r in records if r["method"] == m} for m in sorted({r["method"] for r in records})}
        fig["methods"] = {m: {"seeds": len(runs), **{k: bounded_mean_ci([f(r) for r in runs.values()])
                                                      for k, f in ENDPOINTS.items()}} for m, runs in by.items()}
        fig["paired"] = {}
        for a, b in PAIRS:
            if a in by and b in by:
                seeds = sorted(set(by[a]) & set(by[b]))
                tests = {k: paired_test([f(by[a][s]) for s in seeds], [f(by[b][s]) for s in seeds])
                         for k, f in ENDPOINTS.items()}
                for t in tests.values():  # one seed has no spread to size the seeds by: None
                    t["seeds_for_2_points"] = seeds_for(0.02, t["sd"]) if t["n"] >= 2 else None
                fig["paired"][f"{a} - {b}"] = tests
        learner = {}
        for m in ("graphgpo", "milegpo-full"):
            runs = [r for r in by.get(m, {}).values() if r.get("credit")]
            if runs:
                first = [r["credit"][0]["tie_share"] for r in runs]
                learner[m] = {"tie_share_first": bounded_mean_ci(first),
                              "tie_share_mean": bounded_mean_ci([_mean([c["tie_share"] for c in r["credit"]])
                                                                 for r in runs])}
                totals: dict = {}
                for r in runs:
                    for k, (won, pairs) in r["milestone_truth"].items():
                        t = totals.setdefault(k, [0.0, 0.0])
                        t[0] += won
                        t[1] += pairs
                learner[m]["truth"] = {k: (w / p if p else float("nan")) for k, (w, p) in totals.items()}
        fig["learner"] = learner
    return fig


def _ci(v, scale=100.0, sign=False) -> str:
    m, lo, hi = v
    if m != m:
        return "n/a"
    f = "+.1f" if sign else ".1f"
    return f"{scale * m:{f}} [{scale * lo:{f}}, {scale * hi:{f}}]"


def _auc(v) -> str:
    return "n/a" if v is None or v[0] is None or v[0] != v[0] else f"{v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]"


def table(figures: list[dict]) -> str:
    """The regime table (markdown) of :func:`cell_figures` of every cell."""
    lines = ["| cell | horizon | rooms | tie share % (expert) | tie share % (learner, it. 1) | milestone AUC S_pcc+ | "
             "A^res | r^G | graphgpo final % | graphgpo training % | milegpo - graphgpo final | training | seeds "
             "for 2 pts (training) | beacon - milegpo final | training |", "|" + " --- |" * 15]
    for f in figures:
        s, e, L = f["settings"], f.get("expert", {}), f.get("learner", {})
        rooms = s["options"].get("max_receptacles", "full") if s["env"] == "household" else "-"
        truth = e.get("truth", {})
        g = f.get("methods", {}).get("graphgpo")
        pair = f.get("paired", {}).get("milegpo-full - graphgpo")
        beacon = f.get("paired", {}).get("beacon - milegpo-full")

        def diff(t, key):
            if t is None:
                return "n/a"
            x = t[key]
            return f"{100 * x['diff']:+.1f} [{100 * x['ci'][0]:+.1f}, {100 * x['ci'][1]:+.1f}] (p {x['t_p']:.3f}, {x['n']})"

        lines.append(
            f"| {f['cell']} | {s['horizon']} | {rooms} | {_ci(e['tie_share']) if 'tie_share' in e else 'n/a'} | "
            f"{_ci(L['graphgpo']['tie_share_first']) if 'graphgpo' in L else 'n/a'} | "
            f"{_auc(truth.get('milegpo_s_pcc'))} | {_auc(truth.get('milegpo_correction'))} | "
            f"{_auc(truth.get('graphgpo_return'))} | {_ci(g['final_success']) if g else 'n/a'} | "
            f"{_ci(g['train_success']) if g else 'n/a'} | {diff(pair, 'final_success')} | "
            f"{diff(pair, 'train_success')} | "
            f"{(pair['train_success']['seeds_for_2_points'] or 'n/a') if pair else 'n/a'} | "
            f"{diff(beacon, 'final_success')} | "
            f"{diff(beacon, 'train_success')} |")
    return "\n".join(lines) + "\n"


#: the seeds the issue asks of every learning cell
SEEDS_ASKED = 20


def table_notes(figures: list[dict], cells=None) -> str:
    """What the table's n/a cells and seed counts mean, per cell: its note, why a column is n/a (a cell's ``why``
    says what it would cost), the cell whose early-rollout batches it reads, and where its seeds fall short of
    :data:`SEEDS_ASKED` or of the seeds a paired t-test needs to see 2 points at the spread measured; last, which of
    ``cells`` (default: every cell) has nothing on disk."""
    lines = ["", "Notes (per cell):", ""]
    for f in figures:
        name, s = f["cell"], f["settings"]
        own = CELLS[name]
        said = [f["note"]]
        if "expert" not in f:
            said.append("no credit-quality batches on disk: the early-rollout columns are n/a")
        if not s.get("testbed", True):
            said.append(f"learning n/a: no testbed run ({own.get('why', 'not run')})")
        elif "methods" not in f:
            said.append(f"learning n/a: {own.get('why', 'its testbed was not run in this round')}")
        if "base" in own and "state_anchor" not in own:
            said.append(f"early-rollout columns: {own['base']}'s batches credited with its settings (this cell's "
                        "change is applied to its learner only)")
        pair = f.get("paired", {}).get("milegpo-full - graphgpo")
        if pair and "beacon - milegpo-full" not in f["paired"]:
            said.append(f"BEACON n/a: {own.get('why_no_beacon', 'not run')}")
        if pair:
            n = pair["train_success"]["n"]
            need = {k: pair[k]["seeds_for_2_points"] for k in ("final_success", "train_success")}
            short = [f"{k.split('_')[0]} {need[k]}" for k in need if need[k] is not None and need[k] > n]
            said.append(f"{n} paired seed{'s' if n != 1 else ''}"
                        + (f" (fewer than the {SEEDS_ASKED} asked)" if n < SEEDS_ASKED else "")
                        + ("; one seed has no spread to size the seeds a paired t-test needs" if n < 2 else
                           "; seeds a paired t-test needs to see 2 points at the measured spread, more than run: "
                           + ", ".join(short) if short else "; enough to see 2 points in both endpoints"))
        lines.append(f"- **{name}**: " + "; ".join(x for x in said if x) + ".")
    absent = [name for name in (cells or CELLS) if name not in {f["cell"] for f in figures}]
    if absent:
        lines.append(f"- Not run (nothing on disk, not in the table): {', '.join(absent)}.")
    return "\n".join(lines) + "\n"


def holm(pvalues: dict, alpha: float = 0.05) -> dict:
    """Holm's step-down correction: name -> whether the test is significant at family-wise level ``alpha`` (the
    i-th smallest p of m compared with alpha / (m - i), stopping at the first that is not)."""
    order = sorted(pvalues, key=lambda k: pvalues[k])
    out, going = {}, True
    for i, name in enumerate(order):
        going = going and pvalues[name] <= alpha / (len(order) - i)
        out[name] = going
    return out


def pair_tests(figures: list[dict], pair: str = "milegpo-full - graphgpo") -> dict:
    """(cell, endpoint) -> ``pair``'s paired test in each of :func:`cell_figures`' ``figures`` that has a p: the
    family Holm corrects over."""
    return {(f["cell"], key): t for f in figures for key, t in f.get("paired", {}).get(pair, {}).items()
            if t["t_p"] == t["t_p"]}


def holm_summary(figures: list[dict], pair: str = "milegpo-full - graphgpo") -> str:
    """The table's conclusion line: ``pair``'s tests of every cell and endpoint (final, training), Holm-corrected
    at 5%; the ones that survive, with their sign."""
    tests = pair_tests(figures, pair)
    if not tests:
        return ""
    kept = holm({k: t["t_p"] for k, t in tests.items()})
    survive = [f"{cell} {key.split('_')[0]} {100 * tests[(cell, key)]['diff']:+.1f} (p {tests[(cell, key)]['t_p']:.4f})"
               for (cell, key), ok in kept.items() if ok]
    return (f"\nHolm over the {len(tests)} {pair} tests (cells x final / training, 5%): "
            + ("; ".join(survive) if survive else "none survives") + ".\n")


def interim_looks(name: str, out: Path, at=(), pair: str = "milegpo-full - graphgpo") -> list[dict]:
    """A cell's interim looks at ``pair``: each endpoint's paired test over seeds 0 to n-1, for each n of ``at``
    (none: every n from 2 to the most seeds 0 to n-1 that both methods ran), and whether Holm over every cell's
    ``pair`` tests (:func:`holm_summary`'s family: the other cells' as they are on disk now) keeps it. A cell whose
    seeds are added a few at a time is looked at many times: a look's nominal p is not the cell's result."""
    a, b = pair.split(" - ")
    records = _records(out / name, cell_settings(name).get("also", ()))
    by = {m: {r["seed"]: r for r in records if r["method"] == m} for m in (a, b)}
    ran = 0
    while ran in by[a] and ran in by[b]:
        ran += 1
    at = sorted(at) if at else list(range(2, ran + 1))
    if not at or at[0] < 2 or at[-1] > ran:
        raise ValueError(f"{name}: a look needs seeds 0 to n-1 (n >= 2) of both {a} and {b}; they ran seeds 0 to "
                         f"{ran - 1}" + (f", asked at {', '.join(map(str, at))}" if at else ""))
    figures = [f for f in (cell_figures(other, out) for other in CELLS if other != name) if f is not None]
    others = {k: t["t_p"] for k, t in pair_tests(figures, pair).items()}
    rows = []
    for n in at:
        row = {"seeds": n, "tests": len(others) + len(ENDPOINTS)}
        for key, f in ENDPOINTS.items():
            row[key] = paired_test([f(by[a][s]) for s in range(n)], [f(by[b][s]) for s in range(n)])
        kept = holm({**others, **{(name, k): row[k]["t_p"] for k in ENDPOINTS}})
        for key in ENDPOINTS:
            row[key]["holm"] = kept[(name, key)]
        rows.append(row)
    return rows


def looks_table(name: str, rows: list[dict], pair: str = "milegpo-full - graphgpo") -> str:
    """:func:`interim_looks` as markdown: a row a look, each endpoint's difference in points, p and Holm's verdict."""
    lines = [f"{name}, {pair}, over seeds 0 to n-1 (points, 95% t-interval, paired t-test p; Holm over the "
             f"{rows[0]['tests']} tests of every cell at 5%: each look is another chance to cross its bar)", "",
             "| seeds | final | p | Holm | training | p | Holm |", "|" + " --- |" * 7]
    for row in rows:
        cols = [f"{_ci([row[k]['diff'], *row[k]['ci']], sign=True)} | {row[k]['t_p']:.4f} | "
                f"{'kept' if row[k]['holm'] else 'not kept'}" for k in ("final_success", "train_success")]
        lines.append(f"| {row['seeds']} | {' | '.join(cols)} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["run", "quality", "table", "cells", "looks"],
                   help="run: a cell's credit-quality (once) and testbed; quality: its credit-quality again; looks: "
                   "one cell's MileGPO - GraphGPO tests over seeds 0 to n-1, n = --at (interim looks)")
    p.add_argument("cells", nargs="*", help="cells to run (run), or to print the table of (table: written to the "
                   "files only for every cell on disk, no cell named)")
    p.add_argument("--out", default="experiments/results/regime")
    p.add_argument("--seeds", type=int, nargs="+", default=list(range(20)))
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(credit_testbed.METHODS))
    p.add_argument("--at", type=int, nargs="+", default=[],
                   help="looks: the numbers of seeds to look at (default: every n from 2 to the seeds both ran)")
    args = p.parse_args(argv)
    out = Path(args.out)
    unknown = [c for c in args.cells if c not in CELLS]
    if unknown:
        p.error(f"no cell {', '.join(unknown)}; cells: {', '.join(CELLS)}")
    if args.command == "cells":
        for name in CELLS:
            print(f"{name}: {CELLS[name].get('note', '')}; {json.dumps(cell_settings(name))}")
        return 0
    if args.command == "looks":
        if len(args.cells) != 1:
            p.error("looks: name one cell")
        try:
            rows = interim_looks(args.cells[0], out, args.at)
        except ValueError as e:
            p.error(str(e))
        print(looks_table(args.cells[0], rows), end="")
        return 0
    if args.command in ("run", "quality"):
        if not args.cells:
            p.error(f"{args.command}: name the cells to run")
        for name in args.cells:
            run_cell(name, out, args.seeds, args.methods, quality_only=args.command == "quality")
        return 0
    figures = [f for f in (cell_figures(name, out) for name in (args.cells or CELLS)) if f is not None]
    md = table(figures) + table_notes(figures, args.cells) + holm_summary(figures)
    if args.cells:  # a part of the table: the files keep every cell's
        print(md + f"(only {', '.join(args.cells)}: {out / 'table.md'} and {out / 'regime.json'} not written)")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(md)
    (out / "regime.json").write_text(json.dumps(figures, indent=1))
    print(md + f"wrote {out / 'table.md'}, {out / 'regime.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
