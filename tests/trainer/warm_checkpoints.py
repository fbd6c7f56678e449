"""Warm checkpoints for the trainer tests: the job's tiny tokenizer and Qwen2 (milegpo.job.policy) after a
short plain supervised warm start on expert episodes (faster than the main job's SFTTrainer warm start), saved
once per session (:func:`build_warm_checkpoint`)."""

from __future__ import annotations

import os
import random

import torch

from milegpo.envs import Task, household_tasks
from milegpo.job.policy import expert_pairs, make_model, make_tokenizer  # noqa: F401  (re-exported for the scripts)


def expert_episodes(tasks: list[Task], history_length: int = 2):
    """(prompt text, expert completion text) for every step of the expert on each task."""
    return expert_pairs(tasks, history_length)


def warm_start(model, tokenizer, tasks: list[Task], steps: int = 120, batch: int = 16, lr: float = 3e-3,
               seed: int = 0) -> None:
    """Supervised steps on expert (prompt, completion) pairs: the policy learns the format and some play."""
    rng = random.Random(seed)
    pairs = expert_episodes(tasks)
    chat = tokenizer.chat_template is not None
    data = []
    for p, c in pairs:
        if chat:
            ids = tokenizer.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                                tokenize=True, return_dict=True)["input_ids"]
            ids = list(ids[0]) if ids and isinstance(ids[0], list) else list(ids)
        else:
            ids = tokenizer(p)["input_ids"]
        comp = tokenizer(c)["input_ids"] + [tokenizer.eos_token_id]
        data.append((ids, comp))
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        sel = [data[rng.randrange(len(data))] for _ in range(batch)]
        length = max(len(a) + len(b) for a, b in sel)
        ids = torch.full((batch, length), tokenizer.pad_token_id)
        labels = torch.full((batch, length), -100)
        att = torch.zeros((batch, length), dtype=torch.long)
        for i, (a, b) in enumerate(sel):
            seq = a + b
            ids[i, :len(seq)] = torch.tensor(seq)
            labels[i, len(a):len(seq)] = torch.tensor(b)
            att[i, :len(seq)] = 1
        loss = model(input_ids=ids, attention_mask=att, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()


def build_warm_checkpoint(path: str, n_tasks: int = 24, steps: int = 60, **model_kw) -> str:
    """Tokenizer + warm-started tiny Qwen2 saved to ``path`` (reused by every test in a session)."""
    if os.path.exists(os.path.join(path, "config.json")):
        return path
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    tok = make_tokenizer()
    model = make_model(tok, **model_kw)
    warm_start(model, tok, easy_tasks("train", n_tasks), steps=steps)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def easy_tasks(split: str, n: int, horizon: int = 6) -> list[Task]:
    return household_tasks(split, n, task_type="look_at_obj_in_light", horizon=horizon)
