"""One constrained generation call under ``constrained_sampling='sequence'``: each row's admissible actions scored
one row at a time (the scorer before 2026-12-07) against the rows that open their action block together scored
in one pass of each prompt length (:meth:`milegpo.trainer.constrained.SequenceScorer.score_many`).

The policy is the job's tiny Qwen2 (``milegpo.job.policy``, untrained), ``ROWS`` household-like prompts of four
lengths, each with ten admissible actions, ``max_new_tokens`` just enough for ``<action>`` and the longest action, so
that every row opens its block first thing (as the job's warm-started policy does after its fixed thought). Both
ways draw the same actions (asserted, the same seed). Recorded: ``speedup_vs_row_by_row`` (median seconds of one
``generate`` call, row by row over batched) and the load average.
"""

from __future__ import annotations

import pytest
import torch

from milegpo.job.policy import make_model, make_tokenizer
from milegpo.trainer.constrained import SequenceScorer, allowed_tokens_fn

ROWS = 32
OBJECTS = ["cellphone", "pen", "laptop", "book", "keychain", "pencil", "cd", "mug"]
PLACES = ["sidetable 1", "drawer 1", "shelf 1", "desk 1"]
_MEDIANS: dict[str, float] = {}


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
def test_sequence_scorer_generate(benchmark, median_of, record_ratio, load_average, setting, impl):
    torch.set_num_threads(1)
    benchmark.group = f"constrained_sampling='sequence', one generate call of {ROWS} rows"
    model = setting[1]
    scorer = SequenceScorer(model) if impl == "batched" else RowByRow(SequenceScorer(model))
    texts = _generate(setting, scorer)
    actions = [t.split("<action>")[-1].split("</action>")[0].strip() for t in texts]
    assert all(a in adm for a, adm in zip(actions, setting[3])), actions
    _MEDIANS.setdefault(f"texts/{impl}", texts)
    if "texts/row_by_row" in _MEDIANS and impl == "batched":
        assert texts == _MEDIANS["texts/row_by_row"]  # the same draws
    benchmark.pedantic(_generate, args=(setting, scorer), rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(rows=ROWS, impl=impl, load_average=load_average)
    me = median_of(benchmark)
    if me is None:  # --benchmark-disable
        return
    _MEDIANS[impl] = me
    if impl == "batched" and "row_by_row" in _MEDIANS:
        record_ratio(benchmark, "speedup_vs_row_by_row", _MEDIANS["row_by_row"] / me)
