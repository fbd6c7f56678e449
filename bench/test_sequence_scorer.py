"""One constrained generation call under ``constrained_sampling='sequence'``: each row's admissible actions scored
one row at a time (the scorer before 2026-12-07) against the rows that open their action block together scored
in one pass of each prompt length (:meth:`milegpo.trainer.constrained.SequenceScorer.score_many`); and, with a
real model's vocabulary, the scorer's prefix pass computing every prefix position's logits (a model whose forward
does not take ``logits_to_keep``, the scorer before 2026-12-08) against its last position's only.

The policy is the job's tiny Qwen2 (``milegpo.job.policy``, untrained), ``ROWS`` household-like prompts of four
lengths, each with ten admissible actions, ``max_new_tokens`` just enough for ``<action>`` and the longest action, so
that every row opens its block first thing (as the job's warm-started policy does after its fixed thought). Both
ways draw the same actions (asserted, the same seed). Recorded: ``speedup_vs_row_by_row`` (median seconds of one
``generate`` call, row by row over batched) and the load average.

The prefix bench: a Qwen2 of the job's width with ``VOCAB`` (Qwen2.5's) tokens, untrained; one ``score_many`` call of
8 rows of ``PREFIX`` random tokens with 10 continuations of 12 tokens each. The scores agree to 1e-4 (asserted).
Recorded: ``speedup_vs_every_position``.
"""

from __future__ import annotations

import pytest
import torch

from milegpo.job.policy import make_model, make_tokenizer
from milegpo.trainer.constrained import SequenceScorer, allowed_tokens_fn

ROWS = 32
VOCAB = 151_936
PREFIX = 200
OBJECTS = ["cellphone", "pen", "laptop", "book", "keychain", "pencil", "cd", "mug"]
PLACES = ["sidetable 1", "drawer 1", "shelf 1", "desk 1"]
#: each parametrisation's output, for the next one to assert the same (the medians go to conftest's ``medians``)
_OUTPUTS: dict[str, object] = {}


class RowByRow:
    """The scorer without ``score_many``: the constraint scores each row alone when its block opens."""

    def __init__(self, scorer: SequenceScorer):
        self.scorer = scorer

    def __call__(self, prefix, continuations, eos):
        return self.scorer(prefix, continuations, eos)


@pytest.fixture(scope="module")
def setting():
    torch.manual_seed(0)
    tok = make_tokenizer(n_tasks=40, max_receptacles=4)
    model = make_model(tok, hidden=128).eval()  # the job's size
    prompts, admissible = [], []
    for r in range(ROWS):
        seen = ", ".join(f"a {o} 1" for o in OBJECTS[: 1 + r % 4])  # four prompt lengths
        text = (f"Task: look at {OBJECTS[r % len(OBJECTS)]} under the desklamp. You are at {PLACES[r % 4]}. "
                f"On it you see {seen}.")
        prompts.append(tok(text, add_special_tokens=False)["input_ids"])
        admissible.append([f"go to {p}" for p in PLACES] + [f"take {o} 1 from {PLACES[r % 4]}" for o in OBJECTS[:5]]
                          + ["take keychain 1 from sidetable 1"])
    width = max(len(p) for p in prompts)
    batch = torch.full((ROWS, width), tok.pad_token_id)
    mask = torch.zeros((ROWS, width), dtype=torch.long)
    for r, p in enumerate(prompts):  # left-padded, as TRL's generation pads
        batch[r, width - len(p):], mask[r, width - len(p):] = torch.tensor(p), 1
    open_and_longest = len(tok("<action>", add_special_tokens=False)["input_ids"]) + max(
        len(tok(f" {a} </action>", add_special_tokens=False)["input_ids"]) for a in admissible[0]) + 1
    return tok, model, prompts, admissible, batch, mask, open_and_longest


def _generate(setting, scorer):
    tok, model, prompts, admissible, batch, mask, new_tokens = setting
    torch.manual_seed(1)
    fn = allowed_tokens_fn(tok, [tok.eos_token_id], admissible, new_tokens, scorer=scorer, prompts=prompts)
    with torch.no_grad():
        out = model.generate(input_ids=batch, attention_mask=mask, max_new_tokens=new_tokens, do_sample=True,
                             temperature=1.0, top_k=0, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                             prefix_allowed_tokens_fn=fn)
    return tok.batch_decode(out[:, batch.shape[1]:], skip_special_tokens=True)


@pytest.mark.parametrize("impl", ["row_by_row", "batched"])
def test_sequence_scorer_generate(benchmark, medians, median_of, record_ratio, load_average, setting, impl):
    torch.set_num_threads(1)
    benchmark.group = f"constrained_sampling='sequence', one generate call of {ROWS} rows"
    model = setting[1]
    scorer = SequenceScorer(model) if impl == "batched" else RowByRow(SequenceScorer(model))
    texts = _generate(setting, scorer)
    actions = [t.split("<action>")[-1].split("</action>")[0].strip() for t in texts]
    assert all(a in adm for a, adm in zip(actions, setting[3])), actions
    _OUTPUTS.setdefault(f"texts/{impl}", texts)
    if "texts/row_by_row" in _OUTPUTS and impl == "batched":
        assert texts == _OUTPUTS["texts/row_by_row"]  # the same draws
    benchmark.pedantic(_generate, args=(setting, scorer), rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(rows=ROWS, impl=impl, load_average=load_average)
    me = median_of(benchmark)
    if me is None:  # --benchmark-disable
        return
    medians[f"sequence_generate/{impl}"] = me
    if impl == "batched" and "sequence_generate/row_by_row" in medians:
        record_ratio(benchmark, "speedup_vs_row_by_row", medians["sequence_generate/row_by_row"] / me)


@pytest.fixture(scope="module")
def wide_vocabulary():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2)
    model = Qwen2ForCausalLM(cfg).eval()
    g = torch.Generator().manual_seed(1)
    prefixes = [torch.randint(0, VOCAB, (PREFIX,), generator=g).tolist() for _ in range(8)]
    conts = [[torch.randint(0, VOCAB, (12,), generator=g).tolist() for _ in range(10)] for _ in range(8)]
    return model, prefixes, conts


class EveryPosition(torch.nn.Module):
    """The model behind a forward that takes only ``**kwargs``: the scorer does not ask it for fewer logits."""

    def __init__(self, model):
        super().__init__()
        self.inner, self.config = model, model.config

    def forward(self, **kw):
        return self.inner(**kw)


@pytest.mark.parametrize("impl", ["every_position", "last_only"])
def test_sequence_scorer_prefix_logits(benchmark, medians, median_of, record_ratio, load_average, wide_vocabulary,
                                       impl):
    torch.set_num_threads(1)
    benchmark.group = f"SequenceScorer.score_many, vocabulary {VOCAB}, 8 prefixes of {PREFIX} tokens"
    model, prefixes, conts = wide_vocabulary
    scorer = SequenceScorer(EveryPosition(model) if impl == "every_position" else model)
    scores = torch.cat(scorer.score_many(prefixes, conts, [0]))
    _OUTPUTS.setdefault(f"scores/{impl}", scores)
    if impl == "last_only" and "scores/every_position" in _OUTPUTS:
        torch.testing.assert_close(scores, _OUTPUTS["scores/every_position"], atol=1e-4, rtol=0)
    benchmark.pedantic(scorer.score_many, args=(prefixes, conts, [0]), rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(vocab=VOCAB, prefix=PREFIX, impl=impl, load_average=load_average)
    me = median_of(benchmark)
    if me is None:
        return
    medians[f"sequence_prefix/{impl}"] = me
    if impl == "last_only" and "sequence_prefix/every_position" in medians:
        record_ratio(benchmark, "speedup_vs_every_position", medians["sequence_prefix/every_position"] / me)
