"""What a warm-started tiny policy has learned, step by step: the numbers behind notes/main_job.md.

    python scripts/probe_warm_start.py [--seed 1 --epochs 24 --hidden 128 --lr 3e-3 --scheduler cosine ...]
    python scripts/probe_warm_start.py --policy milegpo_run/sft [--no_context]     # a run's warm start as it is
    python scripts/probe_warm_start.py --seed 1 --constrain          # actions constrained to the admissible ones
    python scripts/probe_warm_start.py --seed 0 --epochs 96 --save /tmp/w96   # kept for probe_take_skill.py fit
    python scripts/probe_warm_start.py --seed 0 --rename_objects 4 --epochs 6  # 4 copies, objects renamed in 3
    python scripts/probe_warm_start.py --seed 1 --phrase_verbs go open close use examine inventory look take move \
        --tokenizer_tasks 400                                        # `take X from Y` one token too

Builds the tiny tokenizer and Qwen2 of the main job, runs its SFT warm start (TRL SFTTrainer) on the
searching expert's walkthroughs, then reports, on held-out ID prompts of that expert, how often the greedy
action is admissible and equals the expert's, split by the expert's verb (``go``, ``take``, ``use``...),
the same on prompts of its own walkthroughs (what it memorised against what carries to new games), and how many
ID games the policy wins (greedy and at temperature 0.4, the evaluation's) and what its ``take`` actions in
those games were (``takes``: taken where the goal's object is not among the admissible takes, which leaves the
wrong object in hand, or right / wrong where it is, against a random admissible take's chance). ``--seed`` is the
job's ``--seed`` (the tiny model's initial weights, the walkthroughs' random moves and the SFT order).
``--rename_objects K``: each warm-start example K times, K-1 of them with the object types permuted
(:func:`renamed_pairs`), so that only the comparison of the goal's word with the observation's explains the labels
across the copies. ``--save DIR`` keeps the trained warm start (for ``scripts/probe_take_skill.py fit``).
``--constrain``: every action is written under the job's ``--constrain_actions`` (``milegpo.trainer.constrained``: the
text in the action block is one of the admissible actions). ``--phrase_verbs``: the verbs whose admissible actions
are one token each (``milegpo.job.policy.PHRASE_VERBS``), met in ``--tokenizer_tasks`` games per split. One JSON
line on stdout.
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
from milegpo.job import policy  # noqa: E402
from milegpo.job.policy import easy_tasks, make_model, make_tokenizer, reload_tokenizer, sft_warm_start  # noqa: E402
from milegpo.trainer.constrained import allowed_tokens_fn  # noqa: E402


def goal_takes(env: HouseholdEnv, admissible: list[str]) -> tuple[list[int], list[int]]:
    """The indices of ``admissible``'s takes, and of those that take the goal's object type."""
    takes = [i for i, x in enumerate(admissible) if x.startswith("take ")]
    return takes, [i for i in takes if admissible[i].split()[1] == env.game.target_type]


def take_facts(env: HouseholdEnv, action: str, admissible: list[str]) -> collections.Counter:
    """What one ``take`` of the policy was: taken with the goal's object type absent from the admissible takes (the
    wrong object in hand: only a ``move`` back, which the expert never plays, undoes it), or present and right or
    wrong, with the chance of a random admissible take being right."""
    takes, right = goal_takes(env, admissible)
    facts = collections.Counter(takes=1)
    if not right:
        facts["absent"] += 1
    else:
        facts.update(present=1, right=int(action in [admissible[i] for i in right]))
        facts["chance"] += len(right) / len(takes)
    return facts


def rename_classes() -> list[list[str]]:
    """The object types of the rooms that hold the embedded default's task type (those train and ID games hold),
    grouped by where they may lie (a type in two rooms keeps its first room's group; groups in the order the rooms
    first list them, each sorted): ``--rename_objects`` permutes the types within a group, so that a renamed
    walkthrough's search order still suits its object."""
    from milegpo.envs.household.generator import ROOMS, UNSEEN_TYPES

    groups: dict[tuple, set] = {}
    placed: set = set()
    for room in ROOMS.values():
        if policy.EASY_TASK_TYPE in room.task_types:
            for kind, (where, _) in room.objects.items():
                if kind not in UNSEEN_TYPES and kind not in placed:
                    groups.setdefault(where, set()).add(kind)
                    placed.add(kind)
    return [sorted(group) for group in groups.values()]


def renamed_pairs(pairs, copies: int, seed: int) -> list[tuple[str, str]]:
    """Each (prompt, completion) of ``pairs`` followed by ``copies - 1`` copies with the object types renamed in
    prompt and completion alike (one random permutation within each of :func:`rename_classes` per copy, drawn from
    ``seed + 1000``: a stream apart from the walkthroughs' random moves): the labels then follow the goal's word and
    the observation's only through their being the same word."""
    import random
    import re

    classes = rename_classes()
    pattern = re.compile(r"\b(" + "|".join(kind for group in classes for kind in group) + r")\b")
    rng = random.Random(seed + 1000)
    out = []
    for prompt, completion in pairs:
        out.append((prompt, completion))
        for _ in range(copies - 1):
            names = {}
            for group in classes:
                shuffled = group[:]
                rng.shuffle(shuffled)
                names.update(zip(group, shuffled))
            out.append(tuple(pattern.sub(lambda m: names[m.group(1)], text) for text in (prompt, completion)))
    return out


def actor(tok, model, constrain: bool, max_new_tokens: int = 16):
    """``act(prompt, sample, admissible) -> completion text`` of ``model``: greedy, or sampled at the evaluation's
    temperature 0.4; with ``constrain`` the action block is one of ``admissible`` (the job's ``--constrain_actions``)."""

    def act(prompt: str, sample: bool, admissible: list[str]) -> str:
        ids = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                      return_tensors="pt", return_dict=True)
        allowed = allowed_tokens_fn(tok, [tok.eos_token_id], [admissible], max_new_tokens) if constrain else None
        out = model.generate(**ids, max_new_tokens=max_new_tokens, do_sample=sample,
                             temperature=0.4 if sample else None, prefix_allowed_tokens_fn=allowed)
        return tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)

    return act


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
    p.add_argument("--seed", type=int, default=0, help="the job's --seed")
    p.add_argument("--explore", type=float, default=0.2, help="the job's --sft_explore")
    p.add_argument("--sft_batch_size", type=int, default=16)
    p.add_argument("--scheduler", default="constant", help="the SFT's lr_scheduler_type")
    p.add_argument("--no_context", dest="show_context", action="store_false",
                   help="prompts without the state tracker's context line (the warm start before 2026-12-04)")
    p.add_argument("--constrain", action="store_true", help="actions constrained to the admissible ones")
    p.add_argument("--phrase_verbs", nargs="+", help="verbs whose admissible actions are one token each")
    p.add_argument("--tokenizer_tasks", type=int, default=40, help="games per split the tokenizer is made of")
    p.add_argument("--rename_objects", type=int, default=1, metavar="K",
                   help="each warm-start example K times: as recorded and K-1 times with its object types renamed")
    p.add_argument("--save", help="a folder to save the trained warm start in (for scripts/probe_take_skill.py)")
    p.add_argument("--policy", help="a warm-started policy folder (a run's sft/) to probe instead of training one")
    a = p.parse_args(argv)
    if a.rename_objects < 1:
        p.error(f"--rename_objects {a.rename_objects}: must be at least 1 (the example as recorded)")
    torch.set_num_threads(a.threads)
    k, style = a.max_receptacles, a.prompt_style
    t0 = time.perf_counter()
    tasks = easy_tasks("train", a.sft_tasks, start=64, horizon=a.horizon, max_receptacles=k)
    if a.policy:  # a run's warm-started policy, probed as it is
        from transformers import AutoModelForCausalLM

        tok, model = reload_tokenizer(a.policy), AutoModelForCausalLM.from_pretrained(a.policy).eval()
        loss = n = float("nan")
    else:
        if a.phrase_verbs:
            policy.PHRASE_VERBS = tuple(a.phrase_verbs)
        tok = make_tokenizer(n_tasks=a.tokenizer_tasks, max_receptacles=k)
        model = make_model(tok, hidden=a.hidden, layers=a.layers, seed=a.seed)
        recorded = policy.expert_pairs
        if a.rename_objects > 1:  # the warm start's dataset is built from policy.expert_pairs
            policy.expert_pairs = lambda *args, **kw: renamed_pairs(recorded(*args, **kw), a.rename_objects, a.seed)
        with tempfile.TemporaryDirectory() as d:
            try:
                model, loss, n = sft_warm_start(model, tok, tasks, d + "/sft", epochs=a.epochs, learning_rate=a.lr,
                                                disable_tqdm=True, use_cpu=True, prompt_style=style, seed=a.seed,
                                                explore=a.explore, batch_size=a.sft_batch_size,
                                                lr_scheduler_type=a.scheduler, show_context=a.show_context)
            finally:
                policy.expert_pairs = recorded
            tok.save_pretrained(d)
            tok = reload_tokenizer(d)  # what the rollout decodes with
        if a.save:
            model.save_pretrained(a.save)
            tok.save_pretrained(a.save)
    sft_s = time.perf_counter() - t0

    def context(info: dict) -> str:
        return info.get("state_context", "") if a.show_context else ""

    act = actor(tok, model, a.constrain)

    def expert_steps(tasks, limit):
        """(prompt, admissible, label) of every step of the searching expert's episodes of ``tasks``."""
        steps = []
        for task in tasks:
            env = HouseholdEnv()
            obs, adm, info = env.reset(task)
            hist = []
            goal = info["goal"]
            while not env.done and len(steps) < limit:
                label = env.search_action()
                steps.append((render_prompt(goal, obs, adm, hist, len(hist), 2, style, context(info)), adm, label))
                hist.append((obs, label))
                obs, _, _, _, info = env.step(label)
                adm = info["admissible_actions"]
            if len(steps) >= limit:
                break
        return steps

    def score(steps):
        """valid share, match share, and per expert verb: matched / steps."""
        valid = match = 0
        by_verb, ok_verb = collections.Counter(), collections.Counter()
        for prompt, adm, label in steps:
            got = parse_action(act(prompt, False, adm), adm)
            valid += got.valid
            hit = got.valid and got.action == label
            match += hit
            by_verb[label.split()[0]] += 1
            ok_verb[label.split()[0]] += hit
        return (round(valid / len(steps), 3), round(match / len(steps), 3),
                {v: f"{ok_verb[v]}/{by_verb[v]}" for v in sorted(by_verb)})

    # held-out expert steps (ID games) and steps of the warm start's own games (without its random moves)
    valid, match, match_by_verb = score(expert_steps(easy_tasks("id", 64, horizon=a.horizon, max_receptacles=k),
                                                     a.probe_steps))
    seen_valid, seen_match, seen_by_verb = score(expert_steps(tasks, a.probe_steps))
    wins, takes = {}, {}
    for sample in (False, True):
        won = 0
        tk = collections.Counter()
        for task in easy_tasks("id", a.games, horizon=a.horizon, max_receptacles=k):
            env = HouseholdEnv()
            obs, adm, info = env.reset(task)
            hist, goal = [], info["goal"]
            while not env.done:
                got = parse_action(act(render_prompt(goal, obs, adm, hist, len(hist), 2, style, context(info)), sample,
                                       adm), adm)
                if got.valid and got.action.startswith("take "):
                    tk.update(take_facts(env, got.action, adm))
                hist.append((obs, got.action))
                obs, _, _, _, info = env.step(got.action)
                adm = info["admissible_actions"]
            won += env.won
        key = "T=0.4" if sample else "greedy"
        wins[key] = f"{won}/{a.games}"
        takes[key] = {"takes": tk["takes"], "target_absent": tk["absent"],
                      "right_when_present": f"{tk['right']}/{tk['present']}",
                      "chance_when_present": round(tk["chance"] / max(tk["present"], 1), 3)}
    res = {"args": vars(a), "sft_examples": n, "sft_loss": round(loss, 3), "sft_s": round(sft_s),
           "valid": valid, "match": match, "match_by_verb": match_by_verb, "seen_valid": seen_valid,
           "seen_match": seen_match, "seen_match_by_verb": seen_by_verb, "wins": wins,
           "takes": takes}
    print(json.dumps(res))
    return res


if __name__ == "__main__":
    main()
