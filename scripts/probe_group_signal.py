"""Which task groups give a warm-started policy a learning signal: the numbers behind notes/main_job.md (issue 50).

    python scripts/probe_group_signal.py --policy milegpo_run/sft [--episodes 16 --temperatures 0.7 1.0 1.5]
    python scripts/probe_group_signal.py --policy milegpo_run/sft --split id --tasks 100 --episodes 1 \
        --temperatures 0.4 --flags "--constrain_actions true"   # the evaluation's games, another decoding

A group of k episodes of one task in which no episode wins gives every credit method a zero advantage (no
signal). This plays ``--episodes`` n episodes of each of the job's RL training tasks (``--tasks``, the default
job's games) with the policy of ``--policy`` (a run's ``sft`` folder: the warm start) at each temperature, and
reports, from each task's wins s of n, the expected share of all-fail groups of size k (C(n - s, k) / C(n, k),
unbiased) for k = 2, 4, 8, 16, the success rate, and both by the task's difficulty (the searching expert's
steps to a win: what a curriculum would order by), and the invalid-action share. ``--split`` plays another split's
first tasks (``id``: the evaluation's games), ``--flags`` adds job flags (e.g. ``--constrain_actions true``) to the
default job's. One JSON line per temperature on stdout.
"""

from __future__ import annotations

import argparse
import collections
import json
import shlex
import sys
import time
from math import comb
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from milegpo.envs import HouseholdEnv  # noqa: E402
from milegpo.job.arguments import TINY_DEFAULTS  # noqa: E402
from milegpo.job.flags import parse  # noqa: E402
from milegpo.job.pipeline import make_trainer  # noqa: E402
from milegpo.job.policy import easy_tasks, reload_tokenizer  # noqa: E402


def all_fail_share(wins: list[int], n: int, k: int) -> float:
    """Expected share of all-fail groups of size ``k`` drawn without replacement from ``n`` episodes per task."""
    return sum(comb(n - s, k) / comb(n, k) for s in wins) / len(wins)


def probe_trainer(policy: str, n_tasks: int, horizon: int, seed: int, flags: list[str] = ()):
    """The default job's trainer around the policy folder ``policy`` (its RL settings, ``n_tasks`` training games,
    ``horizon``, one thread, torch seeded with ``seed``), with job ``flags`` added: what these probes play with."""
    args = ["--model_name_or_path", policy, "--output_dir", "/tmp/probe_group_signal", "--seed", str(seed),
            "--threads", "1", "--horizon", str(horizon), "--num_train_tasks", str(n_tasks), "--num_eval_tasks", "0"]
    for key in ("env_options", "prompt_style", "task_type", "max_completion_length", "groups_per_iteration",
                "group_size", "per_device_train_batch_size", "report_to", "bf16", "activation_checkpointing"):
        value = TINY_DEFAULTS[key]
        args += [f"--{key}", json.dumps(value) if isinstance(value, dict) else str(value)]
    _, cfg = parse(args + list(flags))
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    return make_trainer(policy, reload_tokenizer(policy), cfg)


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policy", required=True, help="a warm-started policy folder (a run's sft/)")
    p.add_argument("--tasks", type=int, default=TINY_DEFAULTS["num_train_tasks"])
    p.add_argument("--episodes", type=int, default=16)
    p.add_argument("--horizon", type=int, default=TINY_DEFAULTS["horizon"])
    p.add_argument("--temperatures", type=float, nargs="+", default=[1.0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--split", default="train", help="whose tasks: train (the RL training tasks), id, ood")
    p.add_argument("--flags", default="", help="job flags added to the default job's (shell-quoted)")
    a = p.parse_args(argv)
    k_room = TINY_DEFAULTS["env_options"]["max_receptacles"]
    tasks = easy_tasks(a.split, a.tasks, horizon=a.horizon, max_receptacles=k_room)
    steps = {t.task_id: len(HouseholdEnv().walkthrough(t, "search")) for t in tasks}
    trainer = probe_trainer(a.policy, a.tasks, a.horizon, a.seed, shlex.split(a.flags))
    out = []
    try:
        for temperature in a.temperatures:
            t0 = time.perf_counter()
            rollout = trainer.play(tasks, a.episodes, temperature=temperature)
            wins, invalid, steps_played = collections.Counter(), 0, 0
            for episode in rollout.episodes:
                wins[episode.task.task_id] += bool(episode.won)
                invalid += episode.invalid_steps
                steps_played += episode.length
            per_task = [wins[t.task_id] for t in tasks]
            by_steps = collections.defaultdict(list)
            for t in tasks:
                by_steps[min(steps[t.task_id], 8)].append(wins[t.task_id])
            res = {"policy": a.policy, "split": a.split, "flags": a.flags, "temperature": temperature,
                   "horizon": a.horizon, "episodes": a.episodes, "invalid": round(100 * invalid / max(steps_played, 1), 1),
                   "success": round(100 * sum(per_task) / (a.episodes * len(tasks)), 1),
                   "tasks_never_won": sum(s == 0 for s in per_task),
                   "all_fail_share": {k: round(100 * all_fail_share(per_task, a.episodes, k), 1)
                                      for k in (2, 4, 8, 16) if k <= a.episodes},
                   "by_expert_steps": {f"{s}{'+' if s == 8 else ''}": {
                       "tasks": len(w), "success": round(100 * sum(w) / (a.episodes * len(w)), 1),
                       **({"all_fail_4": round(100 * all_fail_share(w, a.episodes, 4), 1)} if a.episodes >= 4 else {})} for s, w in sorted(by_steps.items())},
                   "s": round(time.perf_counter() - t0)}
            print(json.dumps(res), flush=True)
            out.append(res)
    finally:
        trainer.close()
    return out


if __name__ == "__main__":
    main()
