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
- the budget: when the tokens left (``max_new_tokens``) are just enough for ``<action>`` and the longest
  admissible action, the block is opened; a query is closed when only ``]</action>`` and EOS still fit.
  A budget too small for the longest action is refused (ValueError naming both lengths).

So every completion of a constrained row parses (:func:`milegpo.rollout.parse_action`) to an admissible
action. A row with no admissible actions (the episode loop's dummy prompt) is left free.

Two backends, one rule:

- transformers (CPU, and GPU without vLLM): :func:`allowed_tokens_fn` is a ``prefix_allowed_tokens_fn`` for
  ``generate`` (transformers' :class:`~transformers.generation.PrefixConstrainedLogitsProcessor` masks every
  other token before sampling);
- vLLM: :func:`action_regex` is the row's structured-outputs regex (``StructuredOutputsParams(regex=...)``,
  vLLM's guided decoding), one per request (:func:`milegpo.trainer.trl_mirror.guided_vllm_generate`). The
  regex form: free text, then ``<action>(a|b|name\\[query\\])</action>``. A regex cannot exclude ``<action>`` from
  the free text, so an earlier block may appear there; the completion still ends with an admissible block,
  and the parser reads the last one. A completion cut by ``max_tokens`` before its block closes is not
  admissible (vLLM does not plan for the budget).

The loss trains the model's own (unconstrained) log-probabilities of the tokens sampled under the mask:
the mask changes which tokens are sampled, not what the policy gradient differentiates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

from ..envs.base import action_template

OPEN_TAG, CLOSE_TAG = "<action>", "</action>"
#: characters a template's free text (a WebShop query) may not hold: they would end it or open a tag
QUERY_FORBIDDEN = "[]<>"
#: the regex of a query (a template's free text) in :func:`action_regex`: no forbidden character, not blank
QUERY_REGEX = r"[^\[\]<>]*[^\[\]<>\s][^\[\]<>]*"


def _encode(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


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
        self._tries: dict[tuple[str, ...], _Node] = {}

    def trie(self, admissible: Sequence[str]) -> _Node:
        """The token trie of ``admissible`` (cached per list)."""
        key = tuple(admissible)
        if key not in self._tries:
            root = _Node()
            for entry in admissible:
                name = action_template(entry)
                ids = _encode(self.tokenizer, f"{name}[") if name is not None else (
                    _encode(self.tokenizer, entry) + self.close_ids)
                node = root
                for t in ids:
                    node = node.children.setdefault(t, _Node())
                node.query, node.end = node.query or name is not None, node.end or name is None
            _needs(root, 1 + len(self.query_close_ids) + 1)
            self._tries[key] = root
        return self._tries[key]


def _needs(node: _Node, query_need: int) -> int:
    """Fill ``need`` (tokens from ``node`` to EOS, the longest way) below ``node``; a query counts one token."""
    best = max([1 + _needs(c, query_need) for c in node.children.values()]
               + ([1] if node.end else []) + ([query_need] if node.query else []), default=0)
    node.need = best
    return best


@dataclass
class _Row:
    """One row's state: ``mode`` free | open | trie | query | close | eos; ``at``: the position in the tag being
    forced (open: ``<action>``, close: ``]</action>``); ``node``: where in the trie (trie)."""

    prompt_length: int
    seen: int
    trie: _Node
    mode: str = "free"
    at: int = 0
    node: _Node | None = None


class ActionConstraint:
    """``prefix_allowed_tokens_fn(batch_id, input_ids) -> allowed token ids`` for one ``generate`` call over rows
    with admissible actions ``admissible[batch_id]`` (see the module docstring). ``input_ids``: the row's
    prompt + generated ids so far (1-D); the first call of a row sees its (left-padded) prompt only."""

    def __init__(self, vocabulary: Vocabulary, admissible: Sequence[Sequence[str]], max_new_tokens: int):
        self.v = vocabulary
        self.tries = [vocabulary.trie(a) if a else None for a in admissible]
        self.max_new_tokens = int(max_new_tokens)
        longest = max([t.need for t in self.tries if t is not None], default=0)
        if longest and self.max_new_tokens < len(vocabulary.open_ids) + longest:
            raise ValueError(f"constrain_actions: max_completion_length={self.max_new_tokens} tokens cannot hold "
                             f"{OPEN_TAG} and the longest admissible action ({len(vocabulary.open_ids)} + {longest} "
                             "tokens with its closing tag and EOS); raise max_completion_length")
        self.rows: dict[int, _Row] = {}

    def __call__(self, batch_id: int, input_ids) -> list[int]:
        ids = input_ids.tolist() if hasattr(input_ids, "tolist") else list(input_ids)
        trie = self.tries[batch_id]
        if trie is None:  # no admissible actions: free
            return self.v.all_ids
        row = self.rows.get(batch_id)
        if row is None:
            row = self.rows[batch_id] = _Row(prompt_length=len(ids), seen=len(ids), trie=trie)
        for end in range(row.seen + 1, len(ids) + 1):
            self._advance(row, ids[row.prompt_length:end])
        row.seen = len(ids)
        return self._allowed(row, ids[row.prompt_length:])

    def _advance(self, row: _Row, generated: list[int]) -> None:
        """Move ``row`` past the last token of ``generated``."""
        token, v = generated[-1], self.v
        if row.mode == "free":
            if generated[-len(v.open_ids):] == v.open_ids:
                row.mode, row.node = "trie", row.trie
        elif row.mode == "open":
            row.at += 1
            if row.at == len(v.open_ids):
                row.mode, row.node = "trie", row.trie
        elif row.mode == "trie":
            child = row.node.children.get(token)
            if child is None:  # a query's first token (the trie's tokens come first where both fit)
                row.mode = "query"
            elif child.end and not child.children and not child.query:
                row.mode = "eos"
            else:
                row.node = child
        elif row.mode == "query":
            if token == v.query_close_ids[0]:
                row.mode, row.at = ("close", 1) if len(v.query_close_ids) > 1 else ("eos", 0)
        elif row.mode == "close":
            row.at += 1
            if row.at == len(v.query_close_ids):
                row.mode = "eos"
        else:  # eos: EOS was written
            row.mode = "done"

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
            if node.query:  # the first token of the query: not blank, and not one the trie goes on with
                allowed += [i for i in v.nonblank_query_ids if i not in node.children]
            return allowed
        if row.mode == "query":
            if left <= len(v.query_close_ids) + 1:  # only "]</action>" and EOS still fit
                return [v.query_close_ids[0]]
            return v.query_ids + [v.query_close_ids[0]]
        if row.mode == "close":
            return [v.query_close_ids[row.at]]
        return v.eos  # eos, done

    def _wrong_open_tags(self, generated: list[int]) -> set[int]:
        """Tokens that would spell ``<action>`` in the free text other than by the tag's own encoding."""
        tail, n_open = generated[-len(OPEN_TAG):], len(self.v.open_ids)
        return {t for t in self.v.closers
                if OPEN_TAG in self.v.tokenizer.decode(tail + [t]) and (generated + [t])[-n_open:] != self.v.open_ids}


_VOCABULARIES: dict[int, tuple[object, Vocabulary]] = {}


def allowed_tokens_fn(tokenizer, eos_token_ids: Sequence[int], admissible: Sequence[Sequence[str]],
                      max_new_tokens: int) -> ActionConstraint:
    """The ``prefix_allowed_tokens_fn`` of one ``generate`` call: row ``i`` writes one of ``admissible[i]`` in its
    action block (an empty list: row ``i`` is free). The tokenizer's :class:`Vocabulary` is built once."""
    held = _VOCABULARIES.get(id(tokenizer))
    if held is None or held[0] is not tokenizer:
        held = _VOCABULARIES[id(tokenizer)] = (tokenizer, Vocabulary(tokenizer, eos_token_ids))
    return ActionConstraint(held[1], admissible, max_new_tokens)


def _regex_literal(text: str) -> str:
    """``text`` as a regex matching itself (the metacharacters escaped; a structured-outputs regex is not Python's,
    so only those, not ``re.escape``'s wider set)."""
    return re.sub(r"([\\.^$|?*+()\[\]{}])", r"\\\1", text)


def action_regex(admissible: Sequence[str]) -> str:
    """The structured-outputs regex of a row (vLLM guided decoding): free text, then ``<action>``, one admissible
    action (a template ``name[<...>]``: ``name[`` + a query, :data:`QUERY_REGEX`), ``</action>``."""
    choices = []
    for entry in admissible:
        name = action_template(entry)
        choices.append(_regex_literal(entry) if name is None else _regex_literal(f"{name}[") + QUERY_REGEX + r"\]")
    return r"[\s\S]*" + _regex_literal(OPEN_TAG) + "(" + "|".join(choices) + ")" + _regex_literal(CLOSE_TAG)


__all__ = ["ActionConstraint", "Vocabulary", "allowed_tokens_fn", "action_regex", "OPEN_TAG", "CLOSE_TAG",
           "QUERY_FORBIDDEN", "QUERY_REGEX"]
