"""Run the main job (``milegpo train``) under named settings x seeds and compare them: the numbers behind
notes/main_job.md (issue 50).

    python scripts/main_job_runs.py run --out /tmp/mj --seeds 0 1 2 3 4 --jobs 2 \\
        base= g8="--group_size 8" grpo="--credit_method grpo"
    python scripts/main_job_runs.py table --out /tmp/mj [--against base]

``run``: each ``LABEL=FLAGS`` (flags added to the default job's; empty: the defaults) for each seed, as
``nice -n NICE /usr/bin/time -v milegpo train --threads 1 --seed S FLAGS --output_dir OUT/LABEL/sS``, ``--jobs`` at a
time, each with its console in ``OUT/LABEL/sS.log``; a run whose ``summary.json`` exists is skipped. ``table``:
per label, every seed's warm start and after-RL ID / OOD success, the share of all-fail groups (no episode of
the group won: every method's advantage is then the same, no credit signal) over the first / last 10
iterations, training success over the first / last 10 iterations, CPU time (user + sys) and wall time with
the load average at the start; then the mean paired ID / OOD gain (after - before) with its 95% t-interval, and
with ``--against`` each label's after-RL ID success paired with that label's over the seeds both ran.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from milegpo.evidence.seed_stats import mean_ci, paired_test


def rl_only_flags(sft_dir: str, given: list[str]) -> list[str]:
    """Flags that run the default job's RL (and evaluations) from a warm-started policy saved in ``sft_dir`` (a
    run's ``sft`` folder, which records no task settings): the tiny run's defaults given explicitly (but those in
    the flags ``given``), no SFT."""
    from milegpo.job.arguments import JobArguments, TINY_DEFAULTS

    job_fields = set(JobArguments.__dataclass_fields__)
    flags = ["--model_name_or_path", sft_dir, "--sft_epochs", "0"]
    for key, value in TINY_DEFAULTS.items():
        if key in job_fields or key in ("seed", "output_dir") or f"--{key}" in given:
            continue
        flags += [f"--{key}", json.dumps(value) if isinstance(value, dict) else str(value)]
    return flags


def _run_one(out: Path, label: str, flags: str, seed: int, from_sft: Path | None = None, nice: int = 10) -> None:
    folder = out / label / f"s{seed}"
    if (folder / "summary.json").is_file():
        return
    extra = rl_only_flags(str(from_sft / f"s{seed}" / "sft"), shlex.split(flags)) if from_sft else []
    cmd = ["nice", "-n", str(nice), "/usr/bin/time", "-v", sys.executable, "-m", "milegpo.cli", "train", "--threads", "1",
           "--seed", str(seed), "--output_dir", str(folder), "--overwrite_output_dir", *extra, *shlex.split(flags)]
    folder.parent.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    t0 = time.time()
    with open(out / label / f"s{seed}.log", "w") as log:
        log.write(f"# {shlex.join(cmd)}\n# load average at start {load:.2f}\n")
        log.flush()
        rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "OMP_NUM_THREADS": "1"})
        log.write(f"# rc {rc}, wall {time.time() - t0:.0f} s, load average at end {os.getloadavg()[0]:.2f}\n")
    print(f"{label} s{seed}: rc {rc}, {time.time() - t0:.0f} s", flush=True)


def all_fail_shares(batches: list[str], all_won: bool = False) -> list[float]:
    """Per iteration: the share of task groups none of whose episodes won (``all_won``: all of whose episodes won;
    either way every episode of the group gets the same outcome term, no signal between them)."""
    shares = []
    for path in batches:
        data = np.load(path)
        group, success = data["group"], data["success"].astype(bool)
        same = [success[group == g].all() if all_won else not success[group == g].any() for g in np.unique(group)]
        shares.append(float(np.mean(same)))
    return shares


def _log_facts(log: Path) -> dict:
    text = log.read_text() if log.is_file() else ""
    facts = {}
    for key, pattern in (("user", r"User time \(seconds\): ([\d.]+)"), ("sys", r"System time \(seconds\): ([\d.]+)"),
                         ("load", r"load average at start ([\d.]+)"), ("wall", r"# rc \d+, wall (\d+) s"),
                         ("load_end", r"load average at end ([\d.]+)"), ("rss_kb", r"Maximum resident set size \(kbytes\): (\d+)")):
        m = re.search(pattern, text)
        facts[key] = float(m.group(1)) if m else float("nan")
    facts["cpu"] = facts["user"] + facts["sys"]
    return facts


def load_runs(out: Path) -> dict[str, dict[int, dict]]:
    """label -> seed -> the run's summary figures."""
    runs: dict[str, dict[int, dict]] = {}
    for summary_path in sorted(out.glob("*/s*/summary.json")):
        label, seed = summary_path.parent.parent.name, int(summary_path.parent.name[1:])
        s = json.loads(summary_path.read_text())
        hist = [h["success_rate"] for h in s["history"]]
        fail = all_fail_shares(s["batches"]) if s.get("batches") else []
        won = all_fail_shares(s["batches"], all_won=True) if s.get("batches") else []
        before, after = (s.get(k) or {} for k in ("before", "after"))  # --eval_before False / --num_eval_tasks 0
        rate = lambda ev, split: 100 * ev.get(f"{split}_success_rate", float("nan"))  # noqa: E731
        runs.setdefault(label, {})[seed] = dict(
            id0=rate(before, "id"), id1=rate(after, "id"), ood0=rate(before, "ood"), ood1=rate(after, "ood"),
            sft_loss=s.get("sft_loss", float("nan")), train_first=100 * np.mean(hist[:10]),
            train_last=100 * np.mean(hist[-10:]), fail_first=100 * np.mean(fail[:10]) if fail else float("nan"),
            fail_last=100 * np.mean(fail[-10:]) if fail else float("nan"), fail_all=100 * np.mean(fail) if fail else
            float("nan"), won_first=100 * np.mean(won[:10]) if won else float("nan"),
            won_last=100 * np.mean(won[-10:]) if won else float("nan"), total_s=s["total_s"], **_log_facts(summary_path.parent.parent / f"s{seed}.log"))
    return runs


def _ci(values) -> str:
    m, lo, hi = mean_ci(values)
    return f"{m:+.1f} [{lo:+.1f}, {hi:+.1f}]" if len(values) > 1 else f"{m:+.1f}"


def table(out: Path, against: str | None) -> str:
    runs = load_runs(out)
    lines = ["| label | seed | SFT loss | ID before -> after | OOD before -> after | all-fail groups % (it 1-10 -> "
             "last 10) | all-win groups % (it 1-10 -> last 10) | train success % (it 1-10 -> last 10) | CPU s (user+sys) | wall s (load) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label, seeds in runs.items():
        for seed, r in sorted(seeds.items()):
            lines.append(f"| {label} | {seed} | {r['sft_loss']:.3f} | {r['id0']:.1f} -> {r['id1']:.1f} | "
                         f"{r['ood0']:.1f} -> {r['ood1']:.1f} | {r['fail_first']:.0f} -> {r['fail_last']:.0f} | "
                         f"{r['won_first']:.0f} -> {r['won_last']:.0f} | "
                         f"{r['train_first']:.1f} -> {r['train_last']:.1f} | {r['cpu']:.0f} | "
                         f"{r['total_s']:.0f} ({r['load']:.1f}) |")
    lines += ["", "| label | seeds | ID before | ID after | paired ID gain | paired OOD gain | all-fail % (all its) | "
              "min ID before | seeds gaining ID | mean CPU s |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label, seeds in runs.items():
        rs = [seeds[k] for k in sorted(seeds)]
        id0, id1 = [r["id0"] for r in rs], [r["id1"] for r in rs]
        ood0, ood1 = [r["ood0"] for r in rs], [r["ood1"] for r in rs]
        lines.append(f"| {label} | {len(rs)} | {np.mean(id0):.1f} | {np.mean(id1):.1f} | "
                     f"{_ci([b - a for a, b in zip(id0, id1)])} | {_ci([b - a for a, b in zip(ood0, ood1)])} | "
                     f"{np.mean([r['fail_all'] for r in rs]):.0f} | {min(id0):.1f} | "
                     f"{sum(b > a for a, b in zip(id0, id1))}/{len(rs)} | {np.mean([r['cpu'] for r in rs]):.0f} |")
    if against and against in runs:
        lines += ["", f"| label | after-RL ID minus {against} (paired, 95% t-interval, seeds) | OOD minus {against} |",
                  "| --- | --- | --- |"]
        base = runs[against]
        for label, seeds in runs.items():
            common = sorted(set(seeds) & set(base))
            if label == against or len(common) < 2:
                continue
            t_id = paired_test([seeds[k]["id1"] for k in common], [base[k]["id1"] for k in common])
            t_ood = paired_test([seeds[k]["ood1"] for k in common], [base[k]["ood1"] for k in common])
            lines.append(f"| {label} | {t_id['diff']:+.1f} [{t_id['ci'][0]:+.1f}, {t_id['ci'][1]:+.1f}] ({len(common)}) "
                         f"| {t_ood['diff']:+.1f} [{t_ood['ci'][0]:+.1f}, {t_ood['ci'][1]:+.1f}] |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", required=True, type=Path)
    r.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument("--nice", type=int, default=10)
    r.add_argument("--from_sft", type=Path, help="a label folder of earlier runs (OUT/LABEL): start every run from "
                   "the warm-started policy of the same seed there (RL only)")
    r.add_argument("settings", nargs="+", metavar="LABEL=FLAGS")
    t = sub.add_parser("table")
    t.add_argument("--out", required=True, type=Path)
    t.add_argument("--against")
    args = p.parse_args(argv)
    if args.cmd == "table":
        print(table(args.out, args.against))
        return 0
    settings = [s.partition("=")[::2] for s in args.settings]
    work = [(label, flags, seed) for seed in args.seeds for label, flags in settings]
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda w: _run_one(args.out, *w, from_sft=args.from_sft, nice=args.nice), work))
    print(table(args.out, None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
