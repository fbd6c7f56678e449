"""Constrained actions (``MileGPOConfig.constrain_actions``): the text a policy writes inside
``<action>...</action>`` is one of its row's admissible actions.

What is constrained, per row of a generation batch (each row has its own admissible actions):

- before the action block the text is free (the ``<think>`` part), except that it cannot end (no EOS) and
  cannot spell ``<action>`` other than as the tokenizer's own encoding of it (which opens the block);
- once ``<action>`` is written, the tokens follow a trie of the admissible actions' token ids, each
  followed by ``</action>`` and EOS: nothing else can be written;
- a template entry ``name[<...>]`` (WebShop's search box ``search[<your query>]``) is the constrained prefix
  ``name[`` followed by free text up to ``]``: any tokens whose text holds none of ``[ ] < >``, at least one
  of them not blank, then ``]`` and ``</action>``. The query is the policy's own; only its frame is fixed;
- with the goal's words (``MileGPOConfig.constrain_query``; :func:`goal_words` of the row's goal text, WebShop's
  instruction), a template's free text is instead a sequence of those words separated by single spaces (each
  word as the tokenizer encodes it: the first ``w``, the others `` w``), at least one: the policy picks which
  words, in which order, and when to stop, but writes no word the goal does not hold;
- the budget: when the tokens left (``max_new_tokens``) are just enough for ``<action>`` and the longest
  admissible action, the block is opened; a query is closed when only ``]</action>`` and EOS still fit (a word
  of the goal is begun only when it can be finished before that). A budget too small for the longest action is
  refused (ValueError naming both lengths).

So every completion of a constrained row parses (:func:`milegpo.rollout.parse_action`) to an admissible
action. A row with no admissible actions (the episode loop's dummy prompt) is left free.

Two backends, one rule:

- transformers (CPU, and GPU without vLLM): :func:`allowed_tokens_fn` is a ``prefix_allowed_tokens_fn`` for
  ``generate`` (transformers' :class:`~transformers.generation.PrefixConstrainedLogitsProcessor` masks every
  other token before sampling);
- vLLM: :func:`action_regex` is the row's structured-outputs regex (``StructuredOutputsParams(regex=...)``,
  vLLM's guided decoding), one per request (:func:`milegpo.trainer.trl_mirror.guided_vllm_generate`). The
  regex form: free text, then ``<action>(a|b|name\\[query\\])</action>`` (with the goal's words the query is
  ``(w1|w2|...)( (w1|w2|...))*``, the same rule on the text). A regex cannot exclude ``<action>`` from
  the free text, so an earlier block may appear there; the completion still ends with an admissible block,
  and the parser reads the last one. A completion cut by ``max_tokens`` before its block closes is not
  admissible (vLLM does not plan for the budget).

How an action is drawn (``MileGPOConfig.constrained_sampling``, transformers only):

- ``token`` (the default): token by token, each token's probability renormalised over the tokens the admissible
  actions sharing the prefix go on with. A first token's whole mass goes to the actions that begin with it: where
  ``take`` is likely, some ``take X`` is taken whatever the model thinks of each X after it;
- ``sequence``: when the action block opens, each admissible action is drawn with its whole probability under the
  model at the sampling temperature (its tokens, ``</action>`` and EOS) over their sum, the model's distribution
  conditioned on writing an admissible action (:class:`SequenceScorer`: a forward pass of the row's text so far,
  then one batched pass over its actions reading that pass's cache; the rows that open their block at the same step
  after the same text, as a small policy's do, in one pass of each prompt length); its tokens are then forced. The
  free text before ``<action>`` is sampled as with ``token``. A row with a template action (a free query) is
  refused: its actions cannot be listed.

The loss trains the model's own (unconstrained) log-probabilities of the tokens sampled under the mask:
the mask changes which tokens are sampled, not what the policy gradient differentiates.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Sequence

import torch

from ..envs.base import QUERY_FORBIDDEN, WORD_EDGE_PUNCTUATION, action_template, goal_words  # re-exported
from ..usage import RunError

OPEN_TAG, CLOSE_TAG = "<action>", "</action>"
#: the fewest tokens a constrained completion takes whatever the tokenizer: ``<action>``, one token of an action,
#: ``</action>`` and EOS (MileGPOConfig refuses a smaller ``max_completion_length`` with ``constrain_actions``)
MIN_CONSTRAINED_TOKENS = 4
#: the regex of a query (a template's free text) in :func:`action_regex`: no forbidden character, not blank
QUERY_REGEX = r"[^\[\]<>]*[^\[\]<>\s][^\[\]<>]*"
#: how an action is drawn from a row's admissible ones (``MileGPOConfig.constrained_sampling``; module docstring)
SAMPLING = ("token", "sequence")


def _encode(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


class ConstraintError(RunError, ValueError):
    """What the constraint cannot do for a row, said in one line: an admissible action the tokenizer cannot spell
    (its tokens decode to another text: the policy would be held to a different, inadmissible action), or a
    budget (``max_completion_length``) too small for the longest admissible action."""


def _same_text(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are one action as :func:`milegpo.rollout.parse_action` reads it (case and runs of
    whitespace aside)."""
    return " ".join(a.lower().split()) == " ".join(b.lower().split())


def _spelled(tokenizer, text: str, what: str, spaces: bool = True) -> list[int]:
    """The token ids of ``text``, checked to decode back to it (``spaces``: as :func:`_same_text`; off, whitespace
    aside: a query word that decodes as ``80 . 00`` is still the word, in a free-text query); else a
    :class:`ConstraintError` naming ``what``."""
    ids = _encode(tokenizer, text)
    back = tokenizer.decode(ids)
    same = _same_text(back, text) if spaces else "".join(back.lower().split()) == "".join(text.lower().split())
    if not same:
        raise ConstraintError(f"constrain_actions: the tokenizer cannot spell the {what} {text!r} (its tokens decode "
                              f"to {back!r}: the policy would be held to another, inadmissible action); use a "
                              "tokenizer that spells every admissible action, or constrain_actions off")
    return ids


@dataclass
class _Node:
    """A trie node: ``children`` token -> node; ``query``: a template's ``name[`` ends here (free text follows);
    ``end``: ``</action>`` ends here (EOS follows); ``need``: the most tokens from here to EOS."""

    children: dict[int, "_Node"] = field(default_factory=dict)
    query: bool = False
    end: bool = False
    need: int = 0


class Vocabulary:
    """What the constraint needs to know of a tokenizer, computed once: the tags' and ``]``'s encodings, the
    tokens whose text may extend a query, and those that could close a spelling of ``<action>`` (hold ``>``)."""

    def __init__(self, tokenizer, eos_token_ids: Sequence[int]):
        self.tokenizer = tokenizer
        self.eos = sorted({int(i) for i in eos_token_ids})
        if not self.eos:
            raise ValueError("constrain_actions needs an EOS token (the tokenizer has none)")
        self.open_ids = _encode(tokenizer, OPEN_TAG)
        self.close_ids = _encode(tokenizer, CLOSE_TAG)
        self.query_close_ids = _encode(tokenizer, "]") + self.close_ids
        size = len(tokenizer)
        special = set(tokenizer.all_special_ids) | set(self.eos)
        pieces = [tokenizer.decode([i]) for i in range(size)]
        self.all_ids = list(range(size))
        self.free_ids = [i for i in range(size) if i not in self.eos]
        self.query_ids = [i for i, p in enumerate(pieces)
                          if i not in special and p and not any(c in p for c in QUERY_FORBIDDEN)]
        self.nonblank_query_ids = [i for i in self.query_ids if pieces[i].strip()]
        self.closers = [i for i, p in enumerate(pieces) if ">" in p and i not in self.eos]
        self._tries: dict[tuple[tuple[str, ...], int], _Node] = {}
        self._words: dict[tuple[str, ...], QueryWords] = {}
        self._action_ids: dict[str, list[int]] = {}

    def query_words(self, words: Sequence[str]) -> QueryWords:
        """The word tries of a query made of ``words`` (cached per word list)."""
        key = tuple(words)
        if key not in self._words:
            self._words[key] = QueryWords.build(self.tokenizer, key)
        return self._words[key]

    def action_ids(self, action: str) -> list[int]:
        """The tokens of an admissible action (not a template) in the action block: its spelling, then
        ``</action>`` (cached per action: the sequence rule asks for them at every step)."""
        if action not in self._action_ids:
            self._action_ids[action] = _spelled(self.tokenizer, action, "admissible action") + self.close_ids
        return self._action_ids[action]

    def trie(self, admissible: Sequence[str], query_tokens: int = 1) -> _Node:
        """The token trie of ``admissible`` (cached per list); ``query_tokens``: the fewest tokens a template's
        query takes (1 for free text; the shortest word of a query of words), for the budget."""
        key = (tuple(admissible), int(query_tokens))
        if key not in self._tries:
            root = _Node()
            for entry in admissible:
                name = action_template(entry)
                ids = _spelled(self.tokenizer, f"{name}[", f"prefix of the admissible action {entry!r},") \
                    if name is not None else self.action_ids(entry)
                node = root
                for t in ids:
                    node = node.children.setdefault(t, _Node())
                node.query, node.end = node.query or name is not None, node.end or name is None
            _needs(root, int(query_tokens) + len(self.query_close_ids) + 1)
            self._tries[key] = root
        return self._tries[key]


def _needs(root: _Node, query_need: int) -> int:
    """Fill ``need`` (tokens from a node to EOS, the longest way) of ``root`` and every node below it; a query
    counts ``query_need`` tokens. Iterative: an action of a thousand tokens is a trie that deep."""
    order, stack = [], [root]
    while stack:  # parents before children
        node = stack.pop()
        order.append(node)
        stack.extend(node.children.values())
    for node in reversed(order):  # children before parents
        node.need = max([1 + c.need for c in node.children.values()]
                        + ([1] if node.end else []) + ([query_need] if node.query else []), default=0)
    return root.need


@dataclass
class _WordNode:
    """A node of a word trie: ``children`` token -> node; ``end``: a word ends here; ``to_end``: the fewest tokens
    from here to a word's end (0 at an end)."""

    children: dict[int, "_WordNode"] = field(default_factory=dict)
    end: bool = False
    to_end: int = 0


def _word_trie(encodings: Sequence[Sequence[int]]) -> _WordNode:
    root = _WordNode()
    for ids in encodings:
        node = root
        for t in ids:
            node = node.children.setdefault(t, _WordNode())
        node.end = True

    order, stack = [], [root]
    while stack:  # iterative, as _needs: a word of many tokens is a trie that deep
        node = stack.pop()
        order.append(node)
        stack.extend(node.children.values())
    for node in reversed(order):
        node.to_end = 0 if node.end else min([1 + c.to_end for c in node.children.values()], default=10 ** 9)
    return root


@dataclass
class QueryWords:
    """A query made of given words (:func:`goal_words`), as token tries: ``first`` (each word as encoded alone, the
    query's first word) and ``following`` (each as `` word``, after a space); ``shortest``: the fewest tokens of a
    first word."""

    words: tuple[str, ...]
    first: _WordNode
    following: _WordNode
    shortest: int

    @classmethod
    def build(cls, tokenizer, words: Sequence[str]) -> "QueryWords":
        if not words:
            raise ValueError("constrain_query: a row has no words for its query")
        firsts = [_spelled(tokenizer, w, "query word", spaces=False) for w in words]
        return cls(tuple(words), _word_trie(firsts), _word_trie([_encode(tokenizer, " " + w) for w in words]),
                   min(len(ids) for ids in firsts))


@dataclass
class _Row:
    """One row's state: ``mode`` free | open | trie | query | words | close | eos; ``at``: the position in the tag
    being forced (open: ``<action>``, close: ``]</action>``); ``node``: where in the trie (trie); ``words``: the
    row's query words (None: a free query), ``word_nodes`` where in their tries (words)."""

    index: int
    prompt_length: int
    seen: int
    trie: _Node
    mode: str = "free"
    at: int = 0
    node: _Node | None = None
    words: QueryWords | None = None
    word_nodes: list[_WordNode] = field(default_factory=list)  # words: where in the word tries (several: ambiguous)
    generated: list[int] = field(default_factory=list)  # the row's ids after its prompt, as last seen


class ActionConstraint:
    """``prefix_allowed_tokens_fn(batch_id, input_ids) -> allowed token ids`` for one ``generate`` call over rows
    with admissible actions ``admissible[batch_id]`` (see the module docstring). ``input_ids``: the row's
    prompt + generated ids so far (1-D); the first call of a row sees its (left-padded) prompt only."""

    def __init__(self, vocabulary: Vocabulary, admissible: Sequence[Sequence[str]], max_new_tokens: int,
                 query_words: Sequence[Sequence[str] | None] | None = None,
                 scorer: "SequenceScorer | None" = None, prompts: Sequence[Sequence[int]] | None = None):
        self.v = vocabulary
        if scorer is not None and (prompts is None or len(prompts) != len(admissible)):
            raise ValueError(f"constrained_sampling='sequence' needs each row's prompt ids: "
                             f"{'none' if prompts is None else len(prompts)} for {len(admissible)} rows")
        self.admissible, self.scorer = admissible, scorer
        self.prompts = None if prompts is None else [list(map(int, p)) for p in prompts]
        if scorer is not None:
            for actions in admissible:
                template = next((a for a in actions if action_template(a) is not None), None)
                if template is not None:
                    raise ConstraintError(f"constrained_sampling='sequence': the admissible action {template!r} is "
                                          "a template with a free query, whose completions cannot be listed and "
                                          "scored; use constrained_sampling='token'")
        if query_words is not None and len(query_words) != len(admissible):
            raise ValueError(f"constrain_query: {len(query_words)} rows of query words for {len(admissible)} rows")
        self.words = [None if query_words is None or not query_words[i] or not admissible[i]
                      else vocabulary.query_words(query_words[i]) for i in range(len(admissible))]
        self.tries = [vocabulary.trie(a, 1 if w is None else w.shortest) if a else None
                      for a, w in zip(admissible, self.words)]
        self.max_new_tokens = int(max_new_tokens)
        longest = max([t.need for t in self.tries if t is not None], default=0)
        if longest and self.max_new_tokens < len(vocabulary.open_ids) + longest:
            raise ConstraintError(f"constrain_actions: max_completion_length={self.max_new_tokens} tokens cannot hold "
                             f"{OPEN_TAG} and the longest admissible action ({len(vocabulary.open_ids)} + {longest} "
                             "tokens with its closing tag and EOS); raise max_completion_length")
        self.rows: dict[int, _Row] = {}
        self._early: dict[int, tuple[tuple[int, ...], torch.Tensor]] = {}  # row -> (its text assumed, its scores)

    def __call__(self, batch_id: int, input_ids) -> list[int]:
        ids = input_ids.tolist() if hasattr(input_ids, "tolist") else list(input_ids)
        trie = self.tries[batch_id]
        if trie is None:  # no admissible actions: free
            return self.v.all_ids
        row = self.rows.get(batch_id)
        if row is None:
            row = self.rows[batch_id] = _Row(index=batch_id, prompt_length=len(ids), seen=len(ids), trie=trie,
                                             words=self.words[batch_id])
        for end in range(row.seen + 1, len(ids) + 1):
            self._advance(row, ids[row.prompt_length:end])
        row.seen, row.generated = len(ids), ids[row.prompt_length:]
        return self._allowed(row, row.generated)

    def _advance(self, row: _Row, generated: list[int]) -> None:
        """Move ``row`` past the last token of ``generated``."""
        token, v = generated[-1], self.v
        if row.mode == "free":
            if generated[-len(v.open_ids):] == v.open_ids:
                row.mode, row.node = "trie", self._root(row, generated)
        elif row.mode == "open":
            row.at += 1
            if row.at == len(v.open_ids):
                row.mode, row.node = "trie", self._root(row, generated)
        elif row.mode == "trie":
            child = row.node.children.get(token)
            if child is None and row.words is not None:  # a query's first token, of its first word
                row.mode, row.word_nodes = "words", [row.words.first.children[token]]
            elif child is None:  # a query's first token (the trie's tokens come first where both fit)
                row.mode = "query"
            elif child.end and not child.children and not child.query:
                row.mode = "eos"
            else:
                row.node = child
        elif row.mode == "query":
            if token == v.query_close_ids[0]:
                row.mode, row.at = ("close", 1) if len(v.query_close_ids) > 1 else ("eos", 0)
        elif row.mode == "words":
            at_end = any(n.end for n in row.word_nodes)
            if at_end and token == v.query_close_ids[0]:
                row.mode, row.at = ("close", 1) if len(v.query_close_ids) > 1 else ("eos", 0)
            else:  # on in the word, or (after a word's end) the next word
                row.word_nodes = [n.children[token] for n in row.word_nodes if token in n.children] + (
                    [row.words.following.children[token]] if at_end and token in row.words.following.children
                    else [])
        elif row.mode == "close":
            row.at += 1
            if row.at == len(v.query_close_ids):
                row.mode = "eos"
        else:  # eos: EOS was written
            row.mode = "done"

    def _root(self, row: _Row, generated: list[int]) -> _Node:
        """Where the action block starts in the trie: the row's trie (``token``), or with a scorer (``sequence``)
        the trie of the one action drawn by its whole probability after ``generated`` (its tokens are then
        forced)."""
        if self.scorer is None:
            return row.trie
        spelled = self._spelled(row.index)
        paths = list(spelled)
        early = self._early.pop(row.index, None)
        if early is not None and early[0] == tuple(generated):
            scores = early[1]
        elif hasattr(self.scorer, "score_many"):
            ahead = self._opening_next(row, generated)
            scores, *others = self.scorer.score_many(
                [self.prompts[i] + list(generated) for i in [row.index, *ahead]],
                [paths, *(list(self._spelled(i)) for i in ahead)], self.v.eos)
            self._early.update((i, (tuple(generated), s)) for i, s in zip(ahead, others))
        else:  # any callable (prefix, continuations, eos) -> scores
            scores = self.scorer(self.prompts[row.index] + list(generated), paths, self.v.eos)
        drawn = int(torch.multinomial(torch.softmax(scores.double(), 0), 1))
        return self.v.trie([spelled[paths[drawn]]])

    def _opening_next(self, row: _Row, generated: list[int]) -> list[int]:
        """The other rows one token short of opening their block after the same text as ``row`` (``generated``):
        generate calls the rows in turn, so when ``row`` opens its block the rows after it are a step behind. Most
        open theirs at the same step after the same text (the tiny policy's fixed thought, or none): scored now in
        one batched pass with ``row``, each such row's draw reads its scores when it opens as assumed (one that
        writes another token is scored alone when its block opens; the batched scores are each row's alone up to
        float rounding)."""
        behind = list(generated[:-1])
        return [i for i, other in self.rows.items() if other is not row and other.mode in ("free", "open")
                and other.generated == behind and self._early.get(i, (None,))[0] != tuple(generated)]

    def _spelled(self, index: int) -> dict[tuple[int, ...], str]:
        """A row's admissible actions by their token sequences, one entry per sequence (as the trie has one path:
        two spellings of one action, one)."""
        spelled = {}
        for action in self.admissible[index]:
            spelled.setdefault(tuple(self.v.action_ids(action)), action)
        return spelled

    def _allowed(self, row: _Row, generated: list[int]) -> list[int]:
        v, left = self.v, self.max_new_tokens - len(generated)
        if row.mode == "free":
            if left <= len(v.open_ids) + row.trie.need:  # just enough left for the tag and the longest action
                row.mode, row.at = "open", 0
            else:
                banned = self._wrong_open_tags(generated)
                return [i for i in v.free_ids if i not in banned] if banned else v.free_ids
        if row.mode == "open":
            return [v.open_ids[row.at]]
        if row.mode == "trie":
            node = row.node
            allowed = list(node.children)
            if node.query and row.words is not None:  # the first token of the query's first word
                fits = left - 1 - len(v.query_close_ids) - 1  # tokens left for the word after this one
                allowed += [t for t, c in row.words.first.children.items() if c.to_end <= fits and t not in node.children]
            elif node.query:  # the first token of the query: not blank, and not one the trie goes on with
                allowed += [i for i in v.nonblank_query_ids if i not in node.children]
            return allowed
        if row.mode == "words":
            return self._word_tokens(row, left)
        if row.mode == "query":
            if left <= len(v.query_close_ids) + 1:  # only "]</action>" and EOS still fit
                return [v.query_close_ids[0]]
            return v.query_ids + [v.query_close_ids[0]]
        if row.mode == "close":
            return [v.query_close_ids[row.at]]
        return v.eos  # eos, done

    def _word_tokens(self, row: _Row, left: int) -> list[int]:
        """The tokens a query of words may go on with: the current word's next tokens, after a word's end also the
        next word's first tokens and ``]``; a word is begun or continued only if it can end with ``]</action>`` and
        EOS still fitting after it."""
        v = self.v
        close = v.query_close_ids[0]
        at_end = any(n.end for n in row.word_nodes)
        fits = left - 1 - len(v.query_close_ids) - 1  # tokens after this one that a word may still take
        candidates = [(t, c) for n in row.word_nodes for t, c in n.children.items()]
        if at_end:
            candidates += list(row.words.following.children.items())
        allowed = list(dict.fromkeys(t for t, c in candidates if c.to_end <= fits and t != close))
        if at_end:
            allowed.append(close)
        if not allowed:  # the budget planned for the shortest word: it cannot run out inside one
            raise RuntimeError("constrain_query: no token fits the budget inside a word (a bug of the budget plan)")
        return allowed

    def _wrong_open_tags(self, generated: list[int]) -> set[int]:
        """Tokens that would spell ``<action>`` in the free text other than by the tag's own encoding."""
        tail, n_open = generated[-len(OPEN_TAG):], len(self.v.open_ids)
        return {t for t in self.v.closers
                if OPEN_TAG in self.v.tokenizer.decode(tail + [t]) and (generated + [t])[-n_open:] != self.v.open_ids}


class SequenceScorer:
    """The whole log-probability of each of a row's continuations under ``model`` at ``temperature``
    (``constrained_sampling='sequence'``): ``scorer(prefix, continuations, eos) -> tensor``, entry ``i`` the sum over
    the tokens of ``continuations[i]`` of their log-probabilities (logits over ``temperature``, softmax over the
    vocabulary) after ``prefix`` and the tokens before them, plus that of ending there (any of the ``eos`` ids).
    Without gradients: one forward pass of ``prefix`` whose key-value cache every continuation then reads, in one
    right-padded batch (the prefix is not run once per action). :meth:`score_many` scores several rows so: one
    pass over the prefixes of each length (no padding) and one over all their continuations. Where the model's
    ``forward`` takes ``logits_to_keep`` (transformers' causal LMs), the prefix pass computes the logits of its last
    position only, not a vocabulary's worth at every prefix position."""

    #: the most logits (continuation tokens x vocabulary) one batched pass of :meth:`score_many` computes: 2**25
    #: floats, 128 MiB (a 150k-token vocabulary: about 16 continuations of 14 tokens a pass, one row's)
    LOGITS_PER_PASS = 2 ** 25

    def __init__(self, model, temperature: float = 1.0):
        if not temperature > 0:
            raise ValueError(f"constrained_sampling='sequence': temperature must be > 0, got {temperature}")
        self.model, self.temperature = model, float(temperature)
        self._keeps = _takes_logits_to_keep(model)

    def __call__(self, prefix: Sequence[int], continuations: Sequence[Sequence[int]],
                 eos: Sequence[int]) -> torch.Tensor:
        return self.score_many([prefix], [continuations], eos)[0]

    def score_many(self, prefixes: Sequence[Sequence[int]], continuations: Sequence[Sequence[Sequence[int]]],
                   eos: Sequence[int]) -> list[torch.Tensor]:
        """``[scorer(prefixes[r], continuations[r], eos) for r in rows]``, rows of one prefix length in one pass."""
        if len(prefixes) != len(continuations):
            raise ValueError(f"score_many: {len(prefixes)} prefixes for {len(continuations)} lists of continuations")
        out: list[torch.Tensor | None] = [None] * len(prefixes)
        by_length: dict[int, list[int]] = {}
        for r, prefix in enumerate(prefixes):
            by_length.setdefault(len(prefix), []).append(r)
        vocab = int(getattr(self.model.config, "vocab_size", 0) or 1)
        for rows in by_length.values():
            chunks, chunk, width, count = [], [], 0, 0  # at most LOGITS_PER_PASS logits a pass, one row at least
            for r in rows:
                w, k = max(len(c) for c in continuations[r]) + 1, len(continuations[r])
                if chunk and (count + k) * max(width, w) * vocab > self.LOGITS_PER_PASS:
                    chunks.append(chunk)
                    chunk, width, count = [], 0, 0
                chunk.append(r)
                width, count = max(width, w), count + k
            for chunk in chunks + [chunk]:
                scores = self._same_length([prefixes[r] for r in chunk], [continuations[r] for r in chunk], eos)
                for r, row_scores in zip(chunk, scores):
                    out[r] = row_scores
        return out

    def _same_length(self, prefixes, continuations, eos) -> list[torch.Tensor]:
        """:meth:`score_many` for prefixes of one length: one pass over them, one over every continuation (each
        reading its own row's cache)."""
        n = len(prefixes[0])
        device = next(self.model.parameters()).device
        counts = [len(c) for c in continuations]
        flat = [c for row in continuations for c in row]
        k, lengths = len(flat), [len(c) for c in flat]
        tokens = torch.zeros((k, max(lengths)), dtype=torch.long)
        mask = torch.ones((k, n + max(lengths)), dtype=torch.long)
        for i, c in enumerate(flat):
            tokens[i, :len(c)] = torch.tensor(list(c))
            mask[i, n + len(c):] = 0
        tokens, mask = tokens.to(device), mask.to(device)
        prefix_ids = torch.tensor([list(p) for p in prefixes], device=device)
        owner = torch.repeat_interleave(torch.arange(len(prefixes), device=device), torch.tensor(counts, device=device))
        with torch.no_grad():
            head = self.model(input_ids=prefix_ids, use_cache=True, **({"logits_to_keep": 1} if self._keeps else {}))
            # transformers 5.25 names the cache ``cache`` (in and out), earlier versions ``past_key_values``
            name = "cache" if "cache" in head else "past_key_values"
            cache = head.get(name)
            if cache is None:  # a model that keeps no cache: each continuation after the whole prefix
                full = torch.cat([prefix_ids[owner], tokens], 1)
                keep = {"logits_to_keep": max(lengths)} if self._keeps else {}
                rest = self.model(input_ids=full, attention_mask=mask, **keep).logits[:, -max(lengths):]
            else:
                cache.reorder_cache(owner)  # each row's cache once per continuation of its own
                positions = torch.arange(n, n + max(lengths), device=device).expand(k, -1)
                rest = self.model(input_ids=tokens, attention_mask=mask, position_ids=positions, use_cache=True,
                                  **{name: cache}).logits
        # position j of ``logits`` predicts continuation token j (j = 0: the prefix's last position)
        logits = torch.cat([head.logits[owner, -1:], rest], 1)
        logp = torch.log_softmax(logits.float() / self.temperature, -1)
        taken = logp[:, :-1].gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        lengths_t = torch.tensor(lengths, device=logp.device)
        taken = torch.where(torch.arange(max(lengths), device=logp.device) < lengths_t[:, None], taken, 0.0)
        ends = logp[torch.arange(k, device=logp.device), lengths_t]
        return list((taken.sum(1) + torch.logsumexp(ends[:, list(eos)], -1)).split(counts))


def _takes_logits_to_keep(model) -> bool:
    """Whether ``model.forward`` names a ``logits_to_keep`` parameter (a model that only takes ``**kwargs``, a
    wrapper's, is not asked: it might pass the name on to a module that refuses it)."""
    try:
        return "logits_to_keep" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):  # no signature to read
        return False


_VOCABULARIES: dict[int, tuple[object, Vocabulary]] = {}


def allowed_tokens_fn(tokenizer, eos_token_ids: Sequence[int], admissible: Sequence[Sequence[str]],
                      max_new_tokens: int, query_words: Sequence[Sequence[str] | None] | None = None,
                      scorer: SequenceScorer | None = None, prompts: Sequence[Sequence[int]] | None = None
                      ) -> ActionConstraint:
    """The ``prefix_allowed_tokens_fn`` of one ``generate`` call: row ``i`` writes one of ``admissible[i]`` in its
    action block (an empty list: row ``i`` is free); ``query_words[i]``: the words row ``i``'s query is made of
    (``constrain_query``; None or no list: a free query). ``scorer`` (``constrained_sampling='sequence'``): each
    row's action is drawn by its whole probability after ``prompts[i]`` (the row's prompt ids, unpadded) and the
    text written before it. The tokenizer's :class:`Vocabulary` is built once."""
    held = _VOCABULARIES.get(id(tokenizer))
    if held is None or held[0] is not tokenizer:
        held = _VOCABULARIES[id(tokenizer)] = (tokenizer, Vocabulary(tokenizer, eos_token_ids))
    return ActionConstraint(held[1], admissible, max_new_tokens, query_words, scorer, prompts)


def _regex_literal(text: str) -> str:
    """``text`` as a regex matching itself (the metacharacters escaped; a structured-outputs regex is not Python's,
    so only those, not ``re.escape``'s wider set)."""
    return re.sub(r"([\\.^$|?*+()\[\]{}])", r"\\\1", text)


def action_regex(admissible: Sequence[str], query_words: Sequence[str] | None = None) -> str:
    """The structured-outputs regex of a row (vLLM guided decoding): free text, then ``<action>``, one admissible
    action (a template ``name[<...>]``: ``name[`` + a query, :data:`QUERY_REGEX`, or with ``query_words`` a
    sequence of them separated by single spaces), ``</action>``."""
    query = QUERY_REGEX
    if query_words:
        word = "(" + "|".join(_regex_literal(w) for w in query_words) + ")"
        query = f"{word}( {word})*"
    choices = []
    for entry in admissible:
        name = action_template(entry)
        choices.append(_regex_literal(entry) if name is None else _regex_literal(f"{name}[") + query + r"\]")
    return r"[\s\S]*" + _regex_literal(OPEN_TAG) + "(" + "|".join(choices) + ")" + _regex_literal(CLOSE_TAG)


__all__ = ["ConstraintError", "MIN_CONSTRAINED_TOKENS", "SAMPLING", "ActionConstraint", "Vocabulary", "QueryWords",
           "SequenceScorer", "allowed_tokens_fn", "action_regex", "goal_words",
           "OPEN_TAG", "CLOSE_TAG", "QUERY_FORBIDDEN", "QUERY_REGEX", "WORD_EDGE_PUNCTUATION"]
