"""GRPO vs GiGPO vs GraphGPO vs MileGPO (and its md / rcs ablations) on the same tasks, seeds and budget.

    python experiments/compare_methods.py --out experiments/results/compare_cpu \\
        --seeds 0 1 2 3 --jobs 2 -- --threads 1

Every method starts from the same SFT warm-started policy (built once per seed, by the same code as
``milegpo train``), plays the same training tasks in the same order (same seed) for the same number of
iterations, and is evaluated on the same ID / OOD tasks. Flags after ``--`` are ``milegpo train`` flags
(MileGPOConfig fields and the job's: ``--model_name_or_path``, ``--sft_epochs``...), shared by all methods.

Writes ``<out>/results.json`` (one record per method and seed), ``<out>/table.md`` (mean over seeds; 95%
intervals, paired differences and the seeds a 2-point difference needs) and ``<out>/compare.png`` (ID / OOD
success after training, and training success per iteration).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

def method_labels() -> dict[str, tuple[str, str]]:
    """label -> (credit method, variant) of every registered method and variant
    (:func:`milegpo.credit.method_variants`: grpo, gigpo, graphgpo, milegpo-md, milegpo-rcs, milegpo-full)."""
    from milegpo.credit import method_variants

    return {name: (method, variant) for name, (method, variant, _) in method_variants(settings=False).items()}


def run_seed(seed: int, job_flags: list[str], out: Path, methods) -> list[dict]:
    from milegpo.job import (eval_summary, load_policy, make_trainer, parse, reload_tokenizer, training_history,
                             warm_start)

    job, cfg = parse(job_flags + ["--seed", str(seed), "--output_dir", str(out / f"seed{seed}" / "base")])
    if job.threads:
        import torch

        torch.set_num_threads(job.threads)
    t0 = time.perf_counter()
    model, tok, _ = load_policy(job, cfg)
    policy, sft_info = warm_start(job, cfg, model, tok, out / f"seed{seed}" / "sft", quiet=True)
    tok = reload_tokenizer(policy)
    print(f"[seed {seed}] warm start: {sft_info.get('sft_examples', 0)} steps, loss {sft_info.get('sft_loss', 0):.3f}, "
          f"{time.perf_counter() - t0:.0f} s", flush=True)
    trainer = make_trainer(policy, tok, cfg)
    splits = list(trainer.eval_tasks)
    before = eval_summary(trainer.evaluate(), splits)
    print(f"[seed {seed}] before RL: {before}", flush=True)
    trainer.close()
    del trainer  # its model is freed before the next trainer loads one
    records = []
    for name, (method, variant) in methods.items():
        _, cfg = parse(job_flags + ["--seed", str(seed), "--credit_method", method, "--credit_variant", variant,
                                    "--output_dir", str(out / f"seed{seed}" / name), "--disable_tqdm", "true"])
        t0 = time.perf_counter()
        trainer = make_trainer(policy, tok, cfg)
        trainer.train()
        after = eval_summary(trainer.evaluate(), splits)
        hist = training_history(trainer.state.log_history)
        rec = {"method": name, "seed": seed, "before": before, "after": after, "splits": splits,
               "train_success": [h["success_rate"] for h in hist],
               "train_invalid": [h["invalid_rate"] for h in hist], "seconds": time.perf_counter() - t0,
               "iterations": cfg.max_steps, "groups_per_iteration": cfg.groups_per_iteration,
               "group_size": cfg.group_size, "horizon": cfg.horizon, "num_eval_tasks": cfg.num_eval_tasks,
               "task_type": cfg.task_type, "policy": job.model_name_or_path or "tiny"}
        records.append(rec)
        print(f"[seed {seed}] {name:<13} after: {after}  train success {rec['train_success']}  "
              f"({rec['seconds']:.0f} s)", flush=True)
        trainer.close()
        del trainer
    return records


def _mean(xs):
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return sum(xs) / len(xs) if xs else float("nan")


def table(records: list[dict]) -> str:
    methods = list(dict.fromkeys(r["method"] for r in records))
    seeds = sorted({r["seed"] for r in records})
    r0 = records[0]
    a, b = (r0["splits"] + ["", ""])[:2]
    lines = [f"Scale: policy {r0['policy']}, household `{r0['task_type'] or 'all task types'}`, horizon {r0['horizon']}, "
             f"{r0['iterations']} iterations x {r0['groups_per_iteration']} groups x {r0['group_size']} episodes, "
             f"{r0['num_eval_tasks']} eval tasks per split, seeds {seeds} (mean over seeds).", "",
             f"| method | train success (all iters) | train success (last iter) | train invalid (last iter) | "
             f"{a} success | {b} success | {a}-{b} gap | {a} invalid | {b} invalid | time / run (s) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    before = [r["before"] for r in records]
    lines.append(f"| (SFT start, before RL) | - | - | - | {100 * _mean([x.get(a + '_success_rate') for x in before]):.1f} | "
                 f"{100 * _mean([x.get(b + '_success_rate') for x in before]):.1f} | "
                 f"{100 * _mean([x.get('gap') for x in before]):+.1f} | "
                 f"{100 * _mean([x.get(a + '_invalid_action_rate') for x in before]):.1f} | "
                 f"{100 * _mean([x.get(b + '_invalid_action_rate') for x in before]):.1f} | - |")
    for m in methods:
        rs = [r for r in records if r["method"] == m]
        lines.append(
            f"| {m} | {100 * _mean([_mean(r['train_success']) for r in rs]):.1f} | "
            f"{100 * _mean([r['train_success'][-1] if r['train_success'] else None for r in rs]):.1f} | "
            f"{100 * _mean([r['train_invalid'][-1] if r['train_invalid'] else None for r in rs]):.1f} | "
            f"{100 * _mean([r['after'].get(a + '_success_rate') for r in rs]):.1f} | "
            f"{100 * _mean([r['after'].get(b + '_success_rate') for r in rs]):.1f} | "
            f"{100 * _mean([r['after'].get('gap') for r in rs]):+.1f} | "
            f"{100 * _mean([r['after'].get(a + '_invalid_action_rate') for r in rs]):.1f} | "
            f"{100 * _mean([r['after'].get(b + '_invalid_action_rate') for r in rs]):.1f} | "
            f"{_mean([r['seconds'] for r in rs]):.0f} |")
    return "\n".join(lines) + "\n"


#: the paper's ranking, best first (its adjacent pairs are compared, and every method with GRPO)
PAPER_RANKING = ("milegpo-full", "graphgpo", "gigpo", "grpo")
#: the difference whose detection the power statement sizes (2 points of success)
POWER_DELTA = 0.02


def intervals(records: list[dict]) -> dict:
    """95% t-intervals over seeds of each method's ID / OOD success after RL, paired differences (seeds pair the
    methods: one warm start per seed) of the paper's adjacent pairs and of every method with GRPO, and the
    seeds a paired t-test would need to separate a 2-point difference given each pair's measured seed-to-seed
    spread (80% power, two-sided 5%)."""
    from milegpo.evidence.seed_stats import mean_ci, paired_test, seeds_for

    methods = list(dict.fromkeys(r["method"] for r in records))
    a, b = (records[0]["splits"] + ["", ""])[:2]
    by = {m: {r["seed"]: r for r in records if r["method"] == m} for m in methods}
    splits = [s for s in (a, b) if s]

    def success(r, split):
        return r["after"].get(split + "_success_rate")

    out: dict = {"methods": {m: {s: mean_ci([success(r, s) for r in by[m].values()]) for s in splits}
                             for m in methods}, "paired": {}}
    pairs = [(x, y) for x, y in zip(PAPER_RANKING, PAPER_RANKING[1:])]
    pairs += [(m, "grpo") for m in methods if m != "grpo" and (m, "grpo") not in pairs]
    for x, y in pairs:
        if x in by and y in by:
            seeds = sorted(set(by[x]) & set(by[y]))
            tests = {s: paired_test([success(by[x][k], s) for k in seeds], [success(by[y][k], s) for k in seeds])
                     for s in splits}
            for s in splits:
                tests[s]["seeds_for_2_points"] = seeds_for(POWER_DELTA, tests[s]["sd"])
            out["paired"][f"{x} - {y}"] = tests
    sds = [v[a]["sd"] for v in out["paired"].values() if v[a]["sd"] == v[a]["sd"]]
    out["pooled_sd"] = float(np.sqrt(np.mean(np.square(sds)))) if sds else float("nan")
    out["seeds_for_2_points"] = seeds_for(POWER_DELTA, out["pooled_sd"])
    return out


def intervals_table(records: list[dict]) -> str:
    """The markdown of :func:`intervals` (points of success)."""
    iv = intervals(records)
    a, b = (records[0]["splits"] + ["", ""])[:2]
    n = len({r["seed"] for r in records})

    def ci(v):
        m, lo, hi = v
        return f"{100 * m:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"

    lines = [f"95% t-intervals over the {n} seeds (success after RL, points) and paired differences (seeds pair the "
             f"methods), with the seeds a paired t-test needs to separate a {100 * POWER_DELTA:.0f}-point difference "
             "at the measured spread (80% power, two-sided 5%):", "",
             f"| comparison | {a} success | {b} success | {a} paired p (t / Wilcoxon) | seeds for 2 points ({a}) |",
             "| --- | --- | --- | --- | --- |"]
    for m, v in iv["methods"].items():
        lines.append(f"| {m}: mean | {ci(v[a])} | {ci(v[b]) if b in v else '-'} | - | - |")
    for name, v in iv["paired"].items():
        d = v[a]
        lines.append(f"| {name} | {100 * d['diff']:+.1f} [{100 * d['ci'][0]:+.1f}, {100 * d['ci'][1]:+.1f}] | "
                     + (f"{100 * v[b]['diff']:+.1f} [{100 * v[b]['ci'][0]:+.1f}, {100 * v[b]['ci'][1]:+.1f}]"
                        if b in v else "-")
                     + f" | {d['t_p']:.2f} / {d['wilcoxon_p']:.2f} | {d['seeds_for_2_points']} |")
    lines += ["", f"Seed-to-seed spread of the paired {a} differences: {100 * iv['pooled_sd']:.1f} points (root mean "
              f"square over the pairs); a {100 * POWER_DELTA:.0f}-point difference needs about "
              f"{iv['seeds_for_2_points']} seeds at this scale."]
    return "\n".join(lines) + "\n"


def plot(records: list[dict], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = list(dict.fromkeys(r["method"] for r in records))
    a, b = (records[0]["splits"] + ["", ""])[:2]
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
    x = range(len(methods))
    for off, split in ((-0.2, a), (0.2, b)):
        ys = [100 * _mean([r["after"].get(split + "_success_rate") for r in records if r["method"] == m])
              for m in methods]
        axes[0].bar([i + off for i in x], ys, width=0.4, label=f"{split} success")
    base = 100 * _mean([r["before"].get(a + "_success_rate") for r in records])
    axes[0].axhline(base, color="gray", ls="--", lw=1, label=f"{a} before RL")
    axes[0].set_xticks(list(x), methods, rotation=20)
    axes[0].set_ylabel("success after training (%)")
    axes[0].legend(fontsize=8)
    from milegpo.job.plots import rolling_mean

    window = 1
    for m in methods:
        rs = [r["train_success"] for r in records if r["method"] == m]
        n = min(len(s) for s in rs)
        window = max(1, n // 10)
        ys = rolling_mean([100 * _mean([s[i] for s in rs]) for i in range(n)], window)
        axes[1].plot(range(1, n + 1), ys, marker="o" if n <= 20 else None, label=m)
    axes[1].set_xlabel("iteration")
    axes[1].set_ylabel("training success (%)")
    axes[1].legend(fontsize=7, title=f"mean of {window} iterations" if window > 1 else None, title_fontsize=7)
    fig.suptitle("credit methods, same tasks / seeds / budget")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = "python experiments/compare_methods.py " + " ".join(argv)
    job_flags = []
    if "--" in argv:
        i = argv.index("--")
        argv, job_flags = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="experiments/results/compare")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--jobs", type=int, default=1, help="seeds run in this many processes at once (give each "
                                                         "`--threads` after `--` so they share the cores)")
    p.add_argument("--table-only", action="store_true", help="rewrite table.md / compare.png from results.json")
    p.add_argument("--methods", nargs="+", default=None,
                   help="labels of milegpo.credit.method_variants (default: every one: grpo gigpo graphgpo milegpo-md "
                        "milegpo-rcs milegpo-full)")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.table_only:
        records = json.loads((out / "results.json").read_text())
        md = table(records) + "\n" + intervals_table(records)
        old = (out / "table.md").read_text() if (out / "table.md").exists() else ""
        tail = old[old.index("\nCommand:"):] if "\nCommand:" in old else ""
        (out / "table.md").write_text(md + tail)
        print(md + f"wrote {out / 'table.md'}, {plot(records, out / 'compare.png')}")
        return 0
    if args.jobs < 1:
        p.error(f"--jobs must be >= 1, got {args.jobs}")
    labels = method_labels()
    unknown = [m for m in args.methods or () if m not in labels]
    if unknown:
        p.error(f"--methods: unknown label(s) {unknown}; known: {' '.join(labels)}")
    methods = {name: pair for name, pair in labels.items() if args.methods is None or name in args.methods}
    t0 = time.perf_counter()
    records = []
    if args.jobs == 1 or len(args.seeds) == 1:
        for seed in args.seeds:
            records += run_seed(seed, job_flags, out, methods)
            (out / "results.json").write_text(json.dumps(records, indent=1))
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            for recs in pool.map(run_seed, args.seeds, [job_flags] * len(args.seeds), [out] * len(args.seeds),
                                 [methods] * len(args.seeds)):
                records += recs  # in seed order
                (out / "results.json").write_text(json.dumps(records, indent=1))
    md = table(records) + "\n" + intervals_table(records)
    (out / "table.md").write_text(md + f"\nCommand: `{command}`; total wall time {time.perf_counter() - t0:.0f} s.\n")
    print("\n" + md)
    print(f"wrote {out / 'table.md'}, {out / 'results.json'}, {plot(records, out / 'compare.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
