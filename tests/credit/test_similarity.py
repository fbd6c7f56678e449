"""state_similarity on StepBatches (milegpo.credit.similarity): the LSH + GPU merge against the exact rule
(all pairs in plain Python) and against verl-agent's SequenceMatcher grouping, on random and adversarial
observation sets; the LSH's recall and precision; every method sees the merged states."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
import torch

from milegpo.credit import (SINK, BatchError, SketchTable, StateSimilarity, StepBatch, estimate,
                            merge_similar_states, presets)
from milegpo.credit.similarity import exact_state_keys, verl_agent_state_groups
from milegpo.credit.synthetic import paths_batch, text_batch
from milegpo.state_keys import state_key
from milegpo.state_sketches import shingle_jaccard
from milegpo_kernels import interpreter_on

BACKENDS = ["torch"] + (["triton"] if interpreter_on() or torch.cuda.is_available() else [])


def device_of(backend):
    return "cuda" if backend == "triton" and torch.cuda.is_available() else "cpu"


def batch_of_texts(walks: list[tuple[int, list[str | None]]], shuffle_seed: int | None = 0):
    """A batch from (group, [text, text, ..., None]) walks (None at the end: a win), and its key -> text."""
    texts = {state_key(t): t for _, walk in walks for t in walk if t is not None}
    paths = [(g, [SINK if t is None else state_key(t) for t in walk]) for g, walk in walks]
    return paths_batch(paths, shuffle_seed=shuffle_seed), texts


def exact_batch(batch: StepBatch, texts, similarity) -> StepBatch:
    """The batch with the exact rule's keys (plain Python over all pairs)."""
    group = batch.group.tolist() * 2
    merged = exact_state_keys(group, batch.state.tolist() + batch.next_state.tolist(), texts, similarity)
    n = len(batch)
    fields = batch.as_dict()
    fields["state"], fields["next_state"] = torch.tensor(merged[:n]), torch.tensor(merged[n:])
    return StepBatch(**fields)


def merged_on(backend, batch, texts, similarity) -> StepBatch:
    device = device_of(backend)
    table = SketchTable.from_texts(texts, similarity)
    out = merge_similar_states(batch.to(device), table, similarity, backend=backend)
    assert out.state.device.type == device and out.row_order is not None
    return out.to("cpu")


def assert_equals_exact(batch, texts, similarity, backend):
    want = exact_batch(batch, texts, similarity)
    got = merged_on(backend, batch, texts, similarity)
    assert got.state.tolist() == want.state.tolist()
    assert got.next_state.tolist() == want.next_state.tolist()
    return got


# ---------------------------------------------------------------- random observation sets


@pytest.mark.parametrize("threshold", [0.5, 0.7, 0.9])
@pytest.mark.parametrize("seed, backend", [(0, "torch"), (1, "torch")] + [(2, b) for b in BACKENDS[1:]])
def test_merged_states_equal_the_exact_rule_on_random_rooms(seed, threshold, backend):
    """Rooms whose listings get reordered, renumbered and a step counter: bigram shingles, verified
    candidates: the merged states of every group are those of the all-pairs rule (the Triton kernels,
    under the interpreter on CPU, on a smaller batch)."""
    n_groups, horizon = (4, 20) if backend == "torch" else (2, 6)
    batch, texts = text_batch(n_groups, 8, horizon, seed=seed, shuffle_seed=seed)
    got = assert_equals_exact(batch, texts, StateSimilarity(threshold), backend)
    assert len(set(got.state.tolist())) < len(set(batch.state.tolist()))  # something merged


@pytest.mark.parametrize("seed", [0, 1])
def test_bags_of_words_merge_only_true_pairs(seed):
    """Unigram shingles (bags of words) at 0.9: more pairs sit near the threshold, the LSH misses a few of
    them (recall < 1, see the recall test), and what it merges is always a true merge: every merged state
    lies inside one exact state, and at least 95% of the rows get the exact key."""
    similarity = StateSimilarity(0.9, shingle_width=1)
    batch, texts = text_batch(4, 8, 20, seed=seed)
    want = exact_batch(batch, texts, similarity)
    got = merged_on("torch", batch, texts, similarity)
    exact_of = dict(zip(zip(batch.group.tolist(), batch.state.tolist()), want.state.tolist()))
    merged_of = dict(zip(zip(batch.group.tolist(), batch.state.tolist()), got.state.tolist()))
    inside: dict[tuple, set] = {}
    for node, merged in merged_of.items():
        inside.setdefault((node[0], merged), set()).add(exact_of[node])
    assert all(len(v) == 1 for v in inside.values())  # precision 1 by construction
    assert np.mean(np.array(got.state.tolist()) == np.array(want.state.tolist())) >= 0.95


def lsh_pair_counts(batch, texts, similarity):
    """(similar pairs, candidate pairs, similar candidates) over the distinct states of each group."""
    nodes = sorted({(g, k) for g, k in zip(batch.group.tolist() * 2, batch.state.tolist() + batch.next_state.tolist())
                    if k != SINK})
    sketch = {k: similarity.sketch(texts[k]) for _, k in nodes}
    similar = candidates = both = 0
    for (ga, ka), (gb, kb) in itertools.combinations(nodes, 2):
        if ga != gb:
            continue
        is_similar = shingle_jaccard(sketch[ka].shingles, sketch[kb].shingles) >= similarity.threshold
        is_candidate = bool((sketch[ka].bands == sketch[kb].bands).any())
        similar, candidates, both = similar + is_similar, candidates + is_candidate, both + (is_similar and is_candidate)
    return similar, candidates, both


@pytest.mark.parametrize("width, threshold, min_recall", [(2, 0.5, 0.99), (2, 0.7, 0.99), (2, 0.9, 0.99),
                                                          (1, 0.7, 0.98), (1, 0.9, 0.95)])
def test_lsh_recall_and_precision_against_the_exact_rule(width, threshold, min_recall, capsys):
    """The LSH's recall (similar pairs it proposes) and precision (proposed pairs that are similar) over all
    pairs of states of a group, on random rooms (4 seeds, 4 groups x 8 walks x 20 steps each). With
    verification (the default layout) candidates are cheap, so the layout favours recall; the precision of
    the merge is then 1 by construction (the test above). Without it the layout balances both, and each
    candidate merges. Figures are printed (pytest -s)."""
    rows = []
    for verify in (True, False):
        similarity = StateSimilarity(threshold, shingle_width=width, verify=verify)
        counts = np.sum([lsh_pair_counts(*text_batch(4, 8, 20, seed=seed), similarity) for seed in range(4)], axis=0)
        similar, candidates, both = (int(c) for c in counts)
        recall, precision = both / similar, both / candidates
        rows.append((verify, similarity.layout, similar, candidates, recall, precision))
        if verify:
            assert recall >= min_recall
        else:
            assert recall >= 0.6 and precision >= 0.5
    with capsys.disabled():
        for verify, layout, similar, candidates, recall, precision in rows:
            print(f"\nshingle width {width}, threshold {threshold}, verify {verify}, bands x rows {layout}: "
                  f"{similar} similar pairs, {candidates} candidates, recall {recall:.3f}, precision {precision:.3f}")


# ---------------------------------------------------------------- adversarial observation sets

ROOM = ("You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a cabinet 2, a cabinet 3, "
        "a countertop 1, a drawer 1, a drawer 2, a fridge 1, a garbagecan 1, a microwave 1, a shelf 1, a shelf 2, "
        "a sinkbasin 1, a stoveburner 1, a stoveburner 2, and a toaster 1.")


@pytest.mark.parametrize("backend", BACKENDS)
def test_chained_near_duplicates_merge_transitively(backend):
    """A~B~C~D (each step changes a few words) with A !~ C: one state (verl-agent's greedy rule, seeded by A,
    splits the chain); a distant room stays apart."""
    words = ROOM.split()
    chain = []
    for step in range(4):
        variant = list(words)
        for i in range(0, 6 * step, 2):
            variant[i] = f"w{i}"
        chain.append(" ".join(variant))
    similarity = StateSimilarity(0.75)
    sims = [[shingle_jaccard(similarity.sketch(a).shingles, similarity.sketch(b).shingles) for b in chain]
            for a in chain]
    assert all(sims[i][i + 1] >= 0.75 for i in range(3)) and sims[0][2] < 0.75 and sims[0][3] < 0.75
    other = "You arrive at shelf 1. On the shelf 1, you see nothing."
    batch, texts = batch_of_texts([(0, chain + [other]), (0, [chain[3], chain[1], None]), (1, [chain[0], other])])
    got = assert_equals_exact(batch, texts, similarity, backend)
    lowest = min(state_key(t) for t in chain)
    in_group0 = got.group == 0
    assert set(got.state[in_group0 & (batch.state != state_key(other))].tolist()) == {lowest}
    assert set(got.state[got.group == 1].tolist()) == {state_key(chain[0])}  # alone in its group


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_state_shared_by_several_groups(backend):
    """Issue 52: the same first observation in 121 task groups (a task played by several groups), and a near
    duplicate in the last: merged per group on every backend as by the exact rule, and every method's
    credit on the merged batch equals the plain-Python reference's."""
    start = ROOM
    near = ROOM.replace("drawer 1", "drawer 9")
    other = "You arrive at shelf 1. On the shelf 1, you see nothing."
    walks = [(g, [start, None] if g % 2 else [start, start]) for g in range(120)]  # one state: no pair to verify
    walks += [(120, [start, near, None]), (120, [near, start, other])]  # more groups than candidate pairs
    batch, texts = batch_of_texts(walks)
    similarity = StateSimilarity(0.25)
    got = assert_equals_exact(batch, texts, similarity, backend)
    for method, variant in (("graphgpo", "full"), ("milegpo", "full"), ("gigpo", "full")):
        want = estimate(got, method, presets.ALFWORLD, variant, "reference").advantages
        on_backend = estimate(got.to(device_of(backend)), method, presets.ALFWORLD, variant, backend).advantages
        torch.testing.assert_close(on_backend.cpu().double(), want.double(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_strings_that_differ_only_in_a_number(backend):
    """A long observation whose counter changes is one state; short observations that differ only in the
    receptacle's number ("cabinet 3" vs "cabinet 4": different places) stay apart at 0.6 (bigram Jaccard
    7/13 = 0.54), though verl-agent's character ratio (0.96) would merge them at its default 0.95."""
    counters = [ROOM + f" You have {k} steps left." for k in (30, 29, 28, 7)]
    cabinets = [f"You arrive at cabinet {k}. The cabinet {k} is closed." for k in (3, 4)]
    similarity = StateSimilarity(0.6)
    batch, texts = batch_of_texts([(0, counters[:2] + cabinets[:1]), (0, counters[2:] + cabinets[1:] + [None])])
    got = assert_equals_exact(batch, texts, similarity, backend)
    keys = dict(zip(batch.state.tolist() + batch.next_state.tolist(), got.state.tolist() + got.next_state.tolist()))
    assert len({keys[state_key(t)] for t in counters}) == 1
    assert len({keys[state_key(t)] for t in cabinets}) == 2
    assert verl_agent_state_groups(cabinets, [0, 0], 0.95) == [0, 0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_reordered_lists(backend):
    """A listing in another order: the same bag of words (shingle width 1: one state at any threshold); as
    bigrams it shares all but the junctions (one state at 0.7 here, two at 0.95)."""
    items = [f"a {name} {i}" for i, name in enumerate(("mug", "apple", "knife", "plate", "bread", "egg"), 1)]
    first = "On the countertop 1, you see " + ", ".join(items) + "."
    second = "On the countertop 1, you see " + ", ".join(items[3:] + items[:3]) + "."
    batch, texts = batch_of_texts([(0, [first, second]), (0, [second, first, None])])
    for similarity, n_states in ((StateSimilarity(1.0, shingle_width=1), 1), (StateSimilarity(0.7), 1),
                                 (StateSimilarity(0.95), 2)):
        got = assert_equals_exact(batch, texts, similarity, backend)
        assert len(set(got.state.tolist())) == n_states


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_and_very_long_observations(backend):
    """An empty observation has no shingles (similar to nothing but itself); a 3,000-word observation and a
    copy with two words changed are one state; a short one is not like the long ones."""
    rng = random.Random(0)
    vocab = [f"word{i}" for i in range(400)]
    long_text = " ".join(rng.choice(vocab) for _ in range(3000))
    long_words = long_text.split()
    long_words[10], long_words[2000] = "changed", "again"
    long_copy = " ".join(long_words)
    similarity = StateSimilarity(0.9)
    batch, texts = batch_of_texts([(0, ["", long_text, "   "]), (0, [long_copy, "", "nothing here"])])
    got = assert_equals_exact(batch, texts, similarity, backend)
    keys = dict(zip(batch.state.tolist() + batch.next_state.tolist(), got.state.tolist() + got.next_state.tolist()))
    assert keys[state_key(long_text)] == keys[state_key(long_copy)] == min(state_key(long_text), state_key(long_copy))
    assert keys[state_key("")] == state_key("") and keys[state_key("nothing here")] == state_key("nothing here")


# ---------------------------------------------------------------- verl-agent's rule


def test_verl_agent_rule_is_greedy_and_order_dependent():
    """The first member of each cluster is its representative: A~B, B~C, A !~ C groups {A, B}, {C} in the
    order A, B, C and {A, B, C} in the order B, A, C; the connected components give {A, B, C} for both."""
    a = "x" * 40 + "a" * 10
    b = "x" * 40 + "a" * 5 + "b" * 5
    c = "x" * 40 + "b" * 10
    from difflib import SequenceMatcher

    ratio = {(p, q): SequenceMatcher(None, p, q).ratio() for p in (a, b, c) for q in (a, b, c)}
    assert ratio[(b, a)] >= 0.85 and ratio[(c, b)] >= 0.85 and ratio[(c, a)] < 0.85
    assert verl_agent_state_groups([a, b, c], [0, 0, 0], 0.85) == [0, 0, 1]
    assert verl_agent_state_groups([b, a, c], [0, 0, 0], 0.85) == [0, 0, 0]
    assert verl_agent_state_groups([a, b, c, a], [1, 0, 1, 0], 0.85) == [1, 0, 2, 0]  # groups in sorted order
    with pytest.raises(ValueError, match="threshold must be in"):
        verl_agent_state_groups([a], [0], 1.0)


def test_verl_agent_rule_equals_ours_where_similarity_is_an_equivalence():
    """Clusters of long observations whose members differ in a counter or a listing's order, clusters far
    apart: verl-agent's greedy SequenceMatcher grouping at 0.95 and our components at 0.6 give one partition
    of the rows, whatever the row order."""
    names = ["cabinet", "drawer", "shelf", "fridge", "sofa", "bed", "desk", "safe", "sink", "lamp", "pan", "pot",
             "toaster", "mirror", "towel", "plate"]
    rooms = [f"You are in room {r}. You see " + ", ".join(f"a {names[(4 * r + i) % 16]}{r} {i}" for i in range(12))
             for r in range(4)]
    rng = random.Random(1)
    walks, row_texts = [], []
    for k in range(6):
        walk = [rooms[rng.randrange(4)] + f" You have {rng.randrange(10, 40)} steps left." for _ in range(5)]
        walks.append((k % 2, walk + [None]))
    batch, texts = batch_of_texts(walks, shuffle_seed=3)
    got = merged_on(BACKENDS[-1], batch, texts, StateSimilarity(0.6))
    row_texts = [texts[k] for k in batch.state.tolist()]
    verl = verl_agent_state_groups(row_texts, batch.group.tolist(), 0.95)
    ours = list(zip(batch.group.tolist(), got.state.tolist()))
    assert len(set(verl)) == len(set(ours)) == 8  # 4 rooms x 2 groups, counters merged
    assert len(set(zip(verl, ours))) == 8  # one partition


# ---------------------------------------------------------------- the StepBatch path


@pytest.mark.parametrize("method, variant", [("grpo", "full"), ("gigpo", "full"), ("graphgpo", "full"),
                                             ("milegpo", "md"), ("milegpo", "full")])
def test_every_method_sees_the_merged_states(method, variant):
    """Credit on the merged batch equals credit on a batch built with the exact rule's keys (plain
    Python): every method groups by the merged states; and it differs from exact keys for the step
    methods."""
    similarity = StateSimilarity(0.7)
    batch, texts = text_batch(3, 8, 12, seed=5, shuffle_seed=2)
    merged = merged_on("torch", batch, texts, similarity)
    want = estimate(exact_batch(batch, texts, similarity), method, presets.ALFWORLD, variant, "reference")
    got = estimate(merged, method, presets.ALFWORLD, variant, "torch")
    torch.testing.assert_close(got.advantages, want.advantages, rtol=1e-9, atol=1e-9)
    exact_keys = estimate(batch, method, presets.ALFWORLD, variant, "torch").advantages
    assert torch.equal(exact_keys, got.advantages) == (method == "grpo")


def test_the_merge_keeps_rows_and_order_and_never_touches_the_sink():
    batch, texts = text_batch(2, 6, 10, seed=3, shuffle_seed=1)
    assert bool((batch.next_state == SINK).any())
    got = merge_similar_states(batch, SketchTable.from_texts(texts, StateSimilarity(0.6)), StateSimilarity(0.6))
    for name in ("group", "traj", "t", "success", "reward", "invalid"):
        assert torch.equal(getattr(got, name), getattr(batch, name))
    assert torch.equal(got.row_order, batch.row_order)
    assert torch.equal(got.next_state == SINK, batch.next_state == SINK) and not bool((got.state == SINK).any())
    StepBatch(**got.as_dict())  # still a valid batch


def test_merge_errors_name_the_row_and_the_setting():
    batch, texts = text_batch(1, 2, 4, seed=0)
    similarity = StateSimilarity(0.8)
    first = batch.state[0].item()
    missing = {k: t for k, t in texts.items() if k != first}
    with pytest.raises(BatchError, match=f"row 0 holds key {first}, which has no sketch"):
        merge_similar_states(batch, SketchTable.from_texts(missing, similarity), similarity)
    with pytest.raises(ValueError, match="bands"):
        merge_similar_states(batch, SketchTable.from_texts(texts, StateSimilarity(0.5)), similarity)
    with pytest.raises(TypeError, match="StateSimilarity"):
        merge_similar_states(batch, SketchTable.from_texts(texts, similarity), 0.8)
    empty = StepBatch(*[np.zeros(0, dtype=np.int64)] * 5, np.zeros(0, dtype=bool), np.zeros(0), np.zeros(0, bool))
    assert len(merge_similar_states(empty, SketchTable.from_sketches({}), similarity)) == 0
