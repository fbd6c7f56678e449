"""Tiny models and tokenizers built on the spot (no download): a WordLevel tokenizer trained on the
household world's texts, a 2-layer Qwen2 from a config, and a short supervised warm start on expert
episodes so that sampled episodes mix successes, failures and invalid actions."""

from __future__ import annotations

import os
import random

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from milegpo.envs import HouseholdEnv, Task, household_tasks
from milegpo.rollout import render_prompt

SPECIAL = ["<pad>", "<unk>", "<|endoftext|>", "<|user|>", "<|assistant|>"]
TAGS = ["<think>", "</think>", "<action>", "</action>"]
CHAT_TEMPLATE = ("{% for m in messages %}<|user|> {{ m['content'] }} {% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|> {% endif %}")
THOUGHT = "<think> i act </think>"


def completion_text(action: str) -> str:
    return f"{THOUGHT} <action> {action} </action>"


def expert_episodes(tasks: list[Task], history_length: int = 2):
    """(prompt text, expert completion text) for every step of the expert on each task."""
    pairs = []
    for task in tasks:
        env = HouseholdEnv()
        obs, adm, info = env.reset(task)
        hist = []
        while not env.done:
            a = env.expert_action()
            pairs.append((render_prompt(info["goal"], obs, adm, hist, len(hist), history_length), completion_text(a)))
            hist.append((obs, a))
            obs, _, _, _, info2 = env.step(a)
            adm = info2["admissible_actions"]
    return pairs


def _action_phrases(tasks: list[Task]) -> set[str]:
    out = set()
    for task in tasks:
        env = HouseholdEnv()
        _, adm, _ = env.reset(task)
        out.update(adm)
        while not env.done:
            _, _, _, _, info = env.step(env.expert_action())
            out.update(info["admissible_actions"])
    return out


def make_tokenizer(chat: bool = True) -> PreTrainedTokenizerFast:
    """WordLevel tokenizer trained on household texts; every admissible-action phrase seen in the easy tasks is one
    token (so a tiny model learns to copy an action from the prompt in a few dozen supervised steps)."""
    corpus, phrases = [], set()
    for split in ("train", "id", "ood"):
        tasks = household_tasks(split, 40)
        corpus += [p + " " + c for p, c in expert_episodes(tasks)]
        for t in tasks:
            corpus.append(HouseholdEnv().reset(t)[0] + " Nothing happens.")
        phrases |= _action_phrases(easy_tasks(split, 40, horizon=50))
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # join tokens with spaces
    tok.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=SPECIAL + TAGS, min_frequency=1))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>",
                                   eos_token="<|endoftext|>", padding_side="left", truncation_side="left")
    fast.add_tokens(TAGS + sorted(phrases))
    if chat:
        fast.chat_template = CHAT_TEMPLATE
    return fast


def make_model(tokenizer, hidden: int = 64, layers: int = 2, seed: int = 0, heads: int = 4,
               kv_heads: int = 2) -> Qwen2ForCausalLM:
    """A tiny Qwen2 from a config (vLLM's CPU attention needs head_dim = hidden / heads >= 32)."""
    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                      max_position_embeddings=4096, tie_word_embeddings=True, pad_token_id=tokenizer.pad_token_id,
                      eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    model = Qwen2ForCausalLM(cfg)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


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
