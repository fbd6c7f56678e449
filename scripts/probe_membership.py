"""Can a policy model learn the presence test (is the goal's word among the words in view?) from clean examples?
The check a candidate model must pass before it is worth a main-job run (issue 50, ``notes/main_job.md``, tenth
round).

    python scripts/probe_membership.py --shape household [--layers 2 --hidden 128 --heads 4 --kv_heads 2 --lr 3e-4]
    python scripts/probe_membership.py --shape bare --heads 8 --kv_heads 8 --steps 4000
    python scripts/probe_membership.py --shape bare_word --steps 500          # the sanity check: no comparison

Builds the main job's tokenizer and a tiny Qwen2 (:func:`milegpo.job.policy.make_model`, ``--seed``), then trains it
from scratch on examples drawn anew at every step (no example seen twice): a goal word and a list of 1-4 words of
the tokenizer's lowercase words, the goal's word in the list half the time; the answer, one token read at the last
position, is ``take`` where it is and ``go`` where not (:func:`example`). Shapes: ``bare`` (``W : w1 w2 .``),
``household`` (the main job's prompt: ``Task: look at W under the desklamp.``, a ``Before: [...]`` of 5-30 random
words that may hold W, ``Now: ... you see a w1 2, and a w2 1.``, an ``Actions:`` line), ``household_now`` (the same
without the ``Before:`` line), ``household_late`` / ``household_now_late`` (the ``Task:`` line after the ``Now:``
one, next to the decision; with / without ``Before:``), and ``bare_word`` /
``household_word``, whose answer is a fixed property of the goal's word alone (no comparison: every model learns it
at once, so a shape that fails there is broken). Every ``--every`` steps, the accuracy on ``--eval`` fresh examples
(chance 0.5); one JSON line at the end. ``--first_shape S --first_steps N``: a curriculum, N steps on shape S before
the ``--steps`` on ``--shape`` (the evaluations, of ``--shape``, count the steps of both). ``--threads`` (default 1).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from milegpo.job.policy import make_model, make_tokenizer  # noqa: E402

SHAPES = ("bare", "household", "household_now", "household_late", "household_now_late", "bare_word", "household_word")


def object_words(tok) -> list[str]:
    """The tokenizer's plain lowercase words of three letters or more (not its added action phrases)."""
    added = set(tok.get_added_vocab())
    return sorted(w for w in tok.get_vocab() if w.isalpha() and w.islower() and w not in added and len(w) > 2)


def example(rng: random.Random, words: list[str], shape: str) -> tuple[str, bool]:
    """One (text, answer) pair: the answer True (``take``) where the goal's word is among the listed ones (``*_word``
    shapes: where the goal's word has an even index in ``words``)."""
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {SHAPES}, got {shape!r}")
    listed = rng.sample(words, rng.randint(1, 4))
    answer = rng.random() < 0.5
    goal = rng.choice(listed) if answer else rng.choice([w for w in words if w not in listed])
    if shape.endswith("_word"):
        answer = words.index(goal) % 2 == 0
    if shape.startswith("bare"):
        return f"{goal} : " + " ".join(listed) + " .", answer
    # the history's words are drawn for every shape (the same stream of examples whether or not the line is shown)
    before = " ".join(rng.choice(words) for _ in range(rng.randint(5, 30)))
    before = "" if shape.startswith("household_now") else f"Before: [{before}]\n"
    seen = ", ".join(f"a {w} {rng.randint(1, 3)}" for w in listed)
    task = f"Task: look at {goal} under the desklamp.\n"
    now = f"Now: You arrive at shelf 1. On the shelf 1, you see {seen}.\n"
    if shape.endswith("_late"):  # the task's line after the observation, next to the decision
        return f"{before}{now}{task}Actions: go to desk 1, look", answer
    return f"{task}{before}{now}Actions: go to desk 1, look", answer


def batch(tok, rng, words, shape, n, answer_ids):
    """``n`` examples, padded by the job's tokenizer (on the left: the answer is read at the last position), and
    their answer token ids."""
    pairs = [example(rng, words, shape) for _ in range(n)]
    enc = tok([text for text, _ in pairs], add_special_tokens=False, padding=True, return_tensors="pt")
    return enc["input_ids"], enc["attention_mask"], torch.tensor([answer_ids[a] for _, a in pairs])


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="household", choices=SHAPES)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=128, help="the main job's --tiny_hidden")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv_heads", type=int, default=2)
    p.add_argument("--rope_theta", type=float, help="the RoPE base (the tiny Qwen2's default: 1e4)")
    p.add_argument("--lr", type=float, default=3e-4, help="AdamW's (the job's SFT: 3e-3, its RL: 3e-4)")
    p.add_argument("--steps", type=int, default=4000)
    p.add_argument("--first_shape", choices=SHAPES, help="a curriculum: train on this shape first")
    p.add_argument("--first_steps", type=int, default=0, help="steps on --first_shape before --shape's --steps")
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--every", type=int, default=250, help="evaluate every this many steps")
    p.add_argument("--eval", type=int, default=512, help="fresh examples an evaluation")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    if a.hidden % a.heads or a.heads % a.kv_heads:
        p.error(f"--hidden {a.hidden}, --heads {a.heads}, --kv_heads {a.kv_heads}: the heads must divide the width "
                "and the key-value heads the heads")
    if bool(a.first_shape) != (a.first_steps > 0):
        p.error("--first_shape and --first_steps go together (a curriculum: that many steps on that shape first)")
    torch.set_num_threads(a.threads)
    tok = make_tokenizer(n_tasks=40, max_receptacles=4)
    model = make_model(tok, hidden=a.hidden, layers=a.layers, heads=a.heads, kv_heads=a.kv_heads, seed=a.seed)
    if a.rope_theta:  # the same weights, another base for the rotary embedding
        from transformers.models.qwen2.modeling_qwen2 import Qwen2RotaryEmbedding

        model.config.rope_parameters = {"rope_theta": a.rope_theta, "rope_type": "default"}
        model.model.rotary_emb = Qwen2RotaryEmbedding(model.config)
    words = object_words(tok)
    answer_ids = {True: tok.convert_tokens_to_ids("take"), False: tok.convert_tokens_to_ids("go")}
    rng, eval_rng = random.Random(a.seed), random.Random(10_000 + a.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr)
    curve, t0 = [], time.perf_counter()
    total = a.first_steps + a.steps
    for step in range(total + 1):
        if step % a.every == 0 or step == total:
            model.eval()
            with torch.no_grad():
                x, mask, y = batch(tok, eval_rng, words, a.shape, a.eval, answer_ids)
                logits = model(input_ids=x, attention_mask=mask).logits[:, -1]
                pick = torch.where(logits[:, answer_ids[True]] > logits[:, answer_ids[False]],
                                   answer_ids[True], answer_ids[False])
                acc = (pick == y).double().mean().item()
            curve.append((step, round(acc, 3)))
            print(f"step {step}: accuracy {acc:.3f} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
            model.train()
        if step == total:
            break
        shape = a.first_shape if step < a.first_steps else a.shape
        x, mask, y = batch(tok, rng, words, shape, a.batch_size, answer_ids)
        loss = torch.nn.functional.cross_entropy(model(input_ids=x, attention_mask=mask).logits[:, -1], y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    res = {"shape": a.shape, "layers": a.layers, "hidden": a.hidden, "heads": a.heads, "kv_heads": a.kv_heads,
           "rope_theta": a.rope_theta, "lr": a.lr, "seed": a.seed, "words": len(words), "steps": a.steps,
           "first_shape": a.first_shape, "first_steps": a.first_steps,
           "final_accuracy": curve[-1][1], "best_accuracy": max(c for _, c in curve), "curve": curve,
           "seconds": round(time.perf_counter() - t0, 1)}
    print(json.dumps(res), flush=True)
    return res


if __name__ == "__main__":
    main()
