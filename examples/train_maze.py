"""Train the tool-calling maze of ``examples/maze_env.py`` with ``MileGPOTrainer``, on CPU, with a tiny model.

    python examples/train_maze.py --output_dir runs/maze                      # one seed, MileGPO credit
    python examples/train_maze.py --seeds 0 1 2 --methods milegpo grpo        # before / after, per method

The environment class and the dataset are what ``trl.GRPOTrainer(..., environment_factory=MazeEnv)`` takes;
only the trainer's name (and its config) differ. With a real chat model (``--model``: Qwen3, Llama 3.1, ...)
TRL's own tool-calling chat template and parser are used. Without one, a tiny Qwen2 and a word-level tokenizer
are built on the spot (:func:`maze_tokenizer`: its chat template renders the tools' schema, the tool calls and the
tool messages; each tool call the maze admits is one token), warm-started on the expert's tool calls (shortest
paths, :func:`warm_start`), then trained with reinforcement learning. The script prints the success rate on
held-out mazes before and after RL.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from typing import Sequence

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from maze_env import DIRECTIONS, MazeEnv, expert_direction  # noqa: E402  (the file beside this one)

#: the task every dataset row states (reset appends the first room to it)
TASK = "Find the exit of the maze: room c3."
#: the tiny policy's answer once it has escaped (a turn without a tool call ends the episode)
ANSWER = "escaped"
#: a chat template that renders tools (name and description), tool calls (one ``<tool_call>`` JSON each) and tool
#: messages; prefix-preserving, as TRL's multi-turn training needs
TOOL_CHAT_TEMPLATE = (
    "{%- if tools %}<|system|> tools :{% for t in tools %} {{ t.function.name }} : {{ t.function.description }}"
    "{% endfor %} {% endif %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'assistant' %}<|assistant|> {{ m.content }}"
    "{%- for tc in m.tool_calls or [] %} <tool_call>{\"name\": \"{{ tc.function.name }}\", \"arguments\": "
    "{{ tc.function.arguments | tojson }}}</tool_call>{% endfor %} <|endoftext|> "
    "{%- elif m.role == 'tool' %}<|tool|> {{ m.content }} "
    "{%- else %}<|user|> {{ m.content }} {% endif %}"
    "{%- endfor %}{% if add_generation_prompt %}<|assistant|> {% endif %}")
#: how transformers' ``parse_response`` reads a turn of that template (the format of TRL's own templates)
TOOL_RESPONSE_TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|assistant|>",
    "fields": {
        "tool_calls": {"open": "<tool_call>", "close_pattern": r"</tool_call>\s*", "repeats": True, "content": "json",
                       "transform": {"type": "function", "function": "{content}"}},
        "content": {"close_pattern": r"<\|endoftext\|>\s*", "content": "text"},
    },
}
SPECIAL = ["<pad>", "<unk>", "<|endoftext|>", "<|user|>", "<|assistant|>", "<|tool|>", "<|system|>"]


def call_text(name: str, arguments: dict) -> str:
    """A tool call as :data:`TOOL_CHAT_TEMPLATE` writes it."""
    return f'<tool_call>{{"name": "{name}", "arguments": {json.dumps(arguments)}}}</tool_call>'


def maze_calls() -> list[str]:
    """The calls the maze admits: ``move`` in each direction and ``look``."""
    return [call_text("move", {"direction": d}) for d in DIRECTIONS] + [call_text("look", {})]


def dataset(seeds: Sequence[int]):
    """The rows: TRL's conversational prompt and the maze's seed (``reset(seed=...)``)."""
    from datasets import Dataset

    return Dataset.from_dict({"prompt": [[{"role": "user", "content": TASK}] for _ in seeds],
                              "seed": [int(s) for s in seeds]})


def maze_tokenizer():
    """A word-level tokenizer of every text the maze shows, each of :func:`maze_calls` one token, the chat template
    :data:`TOOL_CHAT_TEMPLATE` and the response parser :data:`TOOL_RESPONSE_TEMPLATE`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    env, corpus = MazeEnv(), [TASK, ANSWER]
    for seed in range(200):
        corpus.append(env.reset(seed=seed))
        for name in ("move", "look"):
            corpus.append(f"{name} : {getattr(MazeEnv, name).__doc__}")
        for direction in DIRECTIONS:
            corpus.append(env.move(direction))
    corpus.append("tools : " + " ".join(f"{r}{c}" for r in "abc" for c in "123"))
    corpus.append("There is no door north. This is the exit! Answer to finish. You have escaped. {'error': "
                  "\"unknown direction\"} the tool call could not be parsed Tool not found.")
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    tok.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=SPECIAL, min_frequency=1))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>",
                                   eos_token="<|endoftext|>", padding_side="left", truncation_side="left")
    fast.add_tokens(maze_calls())
    fast.chat_template = TOOL_CHAT_TEMPLATE
    fast.response_template = TOOL_RESPONSE_TEMPLATE
    return fast


def expert_policy(tokenizer, explore: float = 0.0, rng: random.Random | None = None, record: set | None = None):
    """A scripted ``generate(prompt_ids, environments)`` for :class:`milegpo.rollout.tools.ToolEpisodeRunner`: the
    shortest path's move (``ANSWER`` once escaped); with probability ``explore`` a random door instead. ``record``
    collects the (prompt, completion) pairs that are the expert's own (the warm start learns only those)."""
    rng = rng or random.Random(0)
    eos = tokenizer.eos_token_id

    def generate(prompt_ids, environments):
        completions = []
        for ids, env in zip(prompt_ids, environments):
            direction = expert_direction(env)
            expert = ANSWER if direction is None else call_text("move", {"direction": direction})
            text = expert
            if direction is not None and rng.random() < explore:
                text = call_text("move", {"direction": rng.choice(sorted(env.doors[env.position]))})
            completion = tokenizer(text, add_special_tokens=False)["input_ids"] + [eos]
            if record is not None and text == expert:
                record.add((tuple(ids), tuple(completion)))
            completions.append(completion)
        return completions, None

    return generate


def expert_pairs(tokenizer, seeds: Sequence[int], explore: float = 0.2, seed: int = 0, horizon: int = 12):
    """(prompt_ids, completion_ids) of the expert's turns on mazes ``seeds``, exactly as the trainer's episodes
    tokenize them (the runner plays the expert)."""
    from milegpo.rollout.tools import ToolEpisodeRunner

    pairs: set = set()
    runner = ToolEpisodeRunner(MazeEnv, tokenizer, horizon=horizon, tool_timeout=None)
    runner.run(list(dataset(seeds)), 1, expert_policy(tokenizer, explore, random.Random(seed), pairs))
    return sorted(pairs)


def warm_start(model, tokenizer, seeds: Sequence[int], epochs: int = 30, learning_rate: float = 3e-3,
               batch_size: int = 32, explore: float = 0.2, seed: int = 0) -> float:
    """Supervised warm start on the expert's tool calls (the loss on completion tokens only); returns the last
    epoch's mean loss."""
    pairs = expert_pairs(tokenizer, seeds, explore, seed)
    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    model.train()
    pad = tokenizer.pad_token_id
    loss_sum = 0.0
    for _ in range(epochs):
        rng.shuffle(pairs)
        loss_sum, n = 0.0, 0
        for start in range(0, len(pairs), batch_size):
            batch = pairs[start:start + batch_size]
            width = max(len(p) + len(c) for p, c in batch)
            ids = torch.full((len(batch), width), pad)
            labels = torch.full((len(batch), width), -100)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for i, (p, c) in enumerate(batch):  # left padding, as the trainer generates
                seq = list(p) + list(c)
                ids[i, width - len(seq):] = torch.tensor(seq)
                labels[i, width - len(c):] = torch.tensor(c)
                mask[i, width - len(seq):] = 1
            out = model(input_ids=ids, attention_mask=mask, labels=labels)
            optimizer.zero_grad()
            out.loss.backward()
            optimizer.step()
            loss_sum, n = loss_sum + out.loss.item(), n + 1
        loss_sum /= max(n, 1)
    model.eval()
    return loss_sum


def make_config(output_dir: str, seed: int, method: str, steps: int, **overrides):
    from milegpo.trainer import MileGPOConfig

    settings = dict(output_dir=output_dir, seed=seed, credit_method=method, max_steps=steps, groups_per_iteration=8,
                    group_size=8, horizon=8, learning_rate=3e-4, beta=0.0, per_device_train_batch_size=128,
                    max_completion_length=4, temperature=1.0, eval_temperature=0.4, eval_group_size=2,
                    logging_steps=1, save_strategy="no", report_to="none", use_cpu=True, bf16=False,
                    activation_checkpointing=False, disable_tqdm=True, tool_timeout=10.0)
    settings.update(overrides)
    return MileGPOConfig(**settings)


def run(seed: int, method: str, steps: int, output_dir: str, train_seeds=range(0, 64), eval_seeds=range(1000, 1064),
        sft_epochs: int = 30, quiet: bool = True) -> dict:
    """One run: tiny model, warm start, evaluation, RL, evaluation. Returns the success rates and times."""
    from milegpo.job.policy import make_model
    from milegpo.trainer import MileGPOTrainer

    t0 = time.perf_counter()
    torch.manual_seed(seed)
    tokenizer = maze_tokenizer()
    model = make_model(tokenizer, hidden=64, layers=2, seed=seed)
    sft_loss = warm_start(model, tokenizer, list(train_seeds)[:32], epochs=sft_epochs, seed=seed)
    args = make_config(output_dir, seed, method, steps)
    trainer = MileGPOTrainer(model, args=args, processing_class=tokenizer, train_dataset=dataset(train_seeds),
                             eval_dataset={"heldout": dataset(eval_seeds)}, environment_factory=MazeEnv)
    if quiet:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
    before = trainer.evaluate()["eval_heldout_success_rate"]
    t1 = time.perf_counter()
    trainer.train()
    after = trainer.evaluate()["eval_heldout_success_rate"]
    return {"seed": seed, "method": method, "steps": steps, "sft_loss": sft_loss, "before": before, "after": after,
            "rl_s": time.perf_counter() - t1, "total_s": time.perf_counter() - t0}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--methods", nargs="+", default=["milegpo"])
    parser.add_argument("--steps", type=int, default=30, help="RL iterations")
    parser.add_argument("--sft_epochs", type=int, default=30)
    parser.add_argument("--output_dir", default="runs/maze")
    parser.add_argument("--threads", type=int, default=0)
    ns = parser.parse_args(argv)
    if ns.threads:
        torch.set_num_threads(ns.threads)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    for method in ns.methods:
        for seed in ns.seeds:
            result = run(seed, method, ns.steps, os.path.join(ns.output_dir, f"{method}_{seed}"),
                         sft_epochs=ns.sft_epochs)
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
