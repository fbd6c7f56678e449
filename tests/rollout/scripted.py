"""Scripted generators for episode-loop tests (no model) and a comparable signature of a rollout."""

from __future__ import annotations

import random
import re
import zlib

from milegpo.envs.pool import EnvPool, SequentialPool
from milegpo.rollout import EpisodeRunner

_ACTIONS = re.compile(r"admissible actions of the current situation are:(.*?)\]\.?\s*\n\s*\nNow it", re.DOTALL)
_QUOTED = re.compile(r"'([^'\n]*)'")
QUERIES = ("mug", "shampoo", "red shirt", "towel")


def admissible_in(prompt: str) -> list[str]:
    """The admissible actions listed in a step prompt (alfworld and webshop styles)."""
    found = _ACTIONS.search(prompt)
    return _QUOTED.findall(found.group(1)) if found else []


def sampler(seed: int = 0, p_invalid: float = 0.15):
    """A random policy that, like sampling from a model, draws its random numbers call after call and
    prompt after prompt: another split of the prompts into calls gives other actions. Picks an admissible
    action of the prompt (a WebShop ``search[<your query>]`` gets a query), sometimes an invalid one; the
    "log-probs" are random numbers too, so rows that were matched to the wrong call show it."""
    rng = random.Random(seed)
    calls: list[list[str]] = []

    def generate(prompts):
        calls.append(list(prompts))
        rng.random()  # one draw per call, as a model's sampler draws per batch: the calls' split matters
        texts, logprobs = [], []
        for p in prompts:
            actions = admissible_in(p)
            if not actions or rng.random() < p_invalid:
                action = rng.choice(["dance", "fly to the moon"])
            else:
                action = rng.choice(actions).replace("<your query>", rng.choice(QUERIES))
            texts.append(f"<think>t</think><action>{action}</action>")
            logprobs.append([rng.random(), rng.random()])
        prompt_ids = [[zlib.crc32(p.encode()) % 997, len(p) % 991] for p in prompts]
        completion_ids = [[zlib.crc32(t.encode()) % 983] for t in texts]
        return prompt_ids, completion_ids, logprobs, texts

    generate.calls = calls
    return generate


def signature(rollout) -> tuple:
    """Everything a rollout recorded except its timings, in its order: rows, then episodes."""
    rows = [(r.group, r.traj, r.t, r.state, r.next_state, r.reward, r.invalid, tuple(r.prompt_ids),
             tuple(r.completion_ids), None if r.logprobs is None else tuple(r.logprobs), r.completion, r.action,
             r.success) for r in rollout.rows]
    episodes = [(e.group, e.traj, e.task.task_id, e.won, e.length, e.invalid_steps, e.reward, e.truncated, e.error)
                for e in rollout.episodes]
    return tuple(rows), tuple(episodes), rollout.generate_calls


#: (pool, overlap) settings that must give the rollout of the first (SequentialPool, no overlap)
SETTINGS = (("sequential", False), ("sequential", True), ("workers-1", True), ("workers-2", False),
            ("workers-2", True), ("workers-3", True))


def _pool(setting: str, n: int, timeout: float):
    if setting == "sequential":
        return SequentialPool(n)
    return EnvPool(n, num_workers=int(setting.split("-")[1]), step_timeout=timeout, reset_timeout=timeout)


def play(settings, tasks, group_size: int, n_slots: int, seed: int = 0, timeout: float = 120.0, **runner_kw):
    """Play the tasks under every (pool, overlap) setting with a fresh :func:`sampler` each; assert that all
    give the same generation calls and the same rollout (:func:`signature`); return the first rollout."""
    first = None
    for pool_kind, overlap in settings:
        gen = sampler(seed)
        runner = EpisodeRunner(_pool(pool_kind, n_slots, timeout), overlap=overlap, **runner_kw)
        try:
            rollout = runner.run(tasks, group_size, gen)
        finally:
            runner.close()
        if first is None:
            first, first_calls = rollout, gen.calls
            continue
        assert gen.calls == first_calls, f"other generation calls with {pool_kind}, overlap={overlap}"
        assert signature(rollout) == signature(first), f"another rollout with {pool_kind}, overlap={overlap}"
    return first
