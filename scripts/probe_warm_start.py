"""What a warm-started tiny policy has learned, step by step: the numbers behind notes/main_job.md.

    python scripts/probe_warm_start.py [--epochs 24 --hidden 128 --lr 3e-3 --max_receptacles 4 ...]

Builds the tiny tokenizer and Qwen2 of the main job, runs its SFT warm start (TRL SFTTrainer) on the
searching expert's walkthroughs, then reports, on held-out ID prompts of that expert, how often the greedy
action is admissible and equals the expert's, split by the expert's verb (``go``, ``take``, ``use``...),
and how many ID games the policy wins (greedy and at temperature 0.4). One JSON line on stdout.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from milegpo.envs import HouseholdEnv  # noqa: E402
from milegpo.rollout import parse_action, render_prompt  # noqa: E402
from milegpo.job.policy import easy_tasks, make_model, make_tokenizer, reload_tokenizer, sft_warm_start  # noqa: E402


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--max_receptacles", type=int, default=4)
    p.add_argument("--prompt_style", default="compact")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--epochs", type=float, default=24)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--sft_tasks", type=int, default=64)
    p.add_argument("--horizon", type=int, default=8)
    p.add_argument("--probe_steps", type=int, default=80, help="held-out expert steps to score")
    p.add_argument("--games", type=int, default=32, help="ID games to play")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    k, style = a.max_receptacles, a.prompt_style
    t0 = time.perf_counter()
    tok = make_tokenizer(max_receptacles=k)
    model = make_model(tok, hidden=a.hidden, layers=a.layers)
    tasks = easy_tasks("train", a.sft_tasks, start=64, horizon=a.horizon, max_receptacles=k)
    with tempfile.TemporaryDirectory() as d:
        model, loss, n = sft_warm_start(model, tok, tasks, d + "/sft", epochs=a.epochs, learning_rate=a.lr,
                                        disable_tqdm=True, use_cpu=True, prompt_style=style)
        sft_s = time.perf_counter() - t0
        tok.save_pretrained(d)
        tok = reload_tokenizer(d)  # what the rollout decodes with

    def act(prompt: str, sample: bool) -> str:
        ids = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                      return_tensors="pt", return_dict=True)
        out = model.generate(**ids, max_new_tokens=16, do_sample=sample, temperature=0.4 if sample else None)
        return tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)

    # held-out expert steps: one prompt per step of the searching expert's ID episodes
    probe = []
    for task in easy_tasks("id", 64, horizon=a.horizon, max_receptacles=k):
        env = HouseholdEnv()
        obs, adm, info = env.reset(task)
        hist = []
        while not env.done and len(probe) < a.probe_steps:
            label = env.search_action()
            probe.append((render_prompt(info["goal"], obs, adm, hist, len(hist), 2, style), adm, label))
            hist.append((obs, label))
            obs, _, _, _, step = env.step(label)
            adm = step["admissible_actions"]
        if len(probe) >= a.probe_steps:
            break
    valid = match = 0
    by_verb, ok_verb = collections.Counter(), collections.Counter()
    for prompt, adm, label in probe:
        got = parse_action(act(prompt, False), adm)
        valid += got.valid
        hit = got.valid and got.action == label
        match += hit
        by_verb[label.split()[0]] += 1
        ok_verb[label.split()[0]] += hit
    wins = {}
    for sample in (False, True):
        won = 0
        for task in easy_tasks("id", a.games, horizon=a.horizon, max_receptacles=k):
            env = HouseholdEnv()
            obs, adm, info = env.reset(task)
            hist = []
            while not env.done:
                got = parse_action(act(render_prompt(info["goal"], obs, adm, hist, len(hist), 2, style), sample), adm)
                hist.append((obs, got.action))
                obs, _, _, _, step = env.step(got.action)
                adm = step["admissible_actions"]
            won += env.won
        wins["T=0.4" if sample else "greedy"] = f"{won}/{a.games}"
    res = {"args": vars(a), "sft_examples": n, "sft_loss": round(loss, 3), "sft_s": round(sft_s),
           "valid": round(valid / len(probe), 3), "match": round(match / len(probe), 3),
           "match_by_verb": {v: f"{ok_verb[v]}/{by_verb[v]}" for v in by_verb}, "wins": wins}
    print(json.dumps(res))
    return res


if __name__ == "__main__":
    main()
