"""A non-privileged shopping expert: it sees what a policy sees (the page text, the admissible
actions, the episode's earlier pages, admissible actions and actions) and nothing of the goal's
hidden attributes or product.

Its plan, re-derived from the episode so far at every call (so it is a pure function of what was seen):

1. On the search page: search the instruction without its price clause and opening words.
2. On a results page: score each listed product by how many of the instruction's words its title
   holds (:func:`coverage`), drop those over the price limit (for a price range, its upper end) and
   those already looked at and left, and open the best; if none is left on the page, turn the page
   (up to page 5), then open the best product seen.
3. On an item page: for each option group, the value whose words appear as a phrase in the
   instruction (the longest such value). Words of the instruction that neither the title, those
   values nor the group names account for are *missing* (counted among the words that can tell
   products apart: words of some title listed so far, and option-like words): when some are
   missing and the product was not opened before, go back (``< prev``) and try the next; after
   :data:`MAX_OPENED` products, open again the one with the fewest missing words. Then click the
   chosen values not yet selected, one per step, and buy.
"""

from __future__ import annotations

import re
from typing import Sequence

from .pages import SEP
from .reward import COLOR_SET

_WORD = re.compile(r"[a-z0-9]+")
_PRICE_LIMIT = re.compile(r",?\s*and price lower than ([0-9.]+) dollars\s*$")
_ASIN = re.compile(r"^[A-Z0-9]{10}$")
_PRICE = re.compile(r"\$([0-9.]+)")
#: words of an instruction that name no property of the product
FILLER = frozenset("""
i im i'm am id i'd need want wants looking look for find me get buy would like to can you search show please
a an the and or with in of that is are be it its should some one which who has have size color colour flavor
flavour scent style type price lower than dollars pack
""".split())
MAX_RESULT_PAGES = 5
#: how many products the expert opens before it buys the best one it saw
MAX_OPENED = 4
#: size words that name option values
SIZE_WORDS = frozenset("x small medium large xl xxl queen king twin full ounce oz pound count piece person inch set "
                       "pair load wash w l".split())



def words(text: str) -> list[str]:
    """Lower-cased alphanumeric words, a plural ``s`` dropped (``shoes`` -> ``shoe``)."""
    return [w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
            for w in _WORD.findall(text.lower())]


def wanted_words(instruction: str) -> set[str]:
    """The instruction's content words (no price clause, no filler)."""
    return {w for w in words(_PRICE_LIMIT.sub("", instruction)) if w not in FILLER and (len(w) > 1 or w.isdigit())}


def coverage(instruction: str, text: str) -> float:
    """Share of the instruction's content words found in ``text``."""
    wanted = wanted_words(instruction)
    return len(wanted & set(words(text))) / len(wanted) if wanted else 0.0


def price_limit(instruction: str) -> float | None:
    """The ``price lower than X dollars`` limit of an instruction, if it has one."""
    found = _PRICE_LIMIT.search(instruction)
    return float(found.group(1)) if found else None


def search_query(instruction: str) -> str:
    """What the expert types: the instruction without its price clause and opening words."""
    text = _PRICE_LIMIT.sub("", instruction).strip().rstrip(".")
    for opener in ("i'm looking for", "i am looking for", "looking for", "can you find me", "i'd like to buy",
                   "i want to buy", "i would like", "i need", "i want", "find me", "search for", "get me"):
        if text.startswith(opener + " "):
            return text[len(opener) + 1:]
    return text


def _opened_asin(action: str) -> str | None:
    """The ASIN an action ``click[<asin>]`` opens, else None."""
    if action.startswith("click[") and action.endswith("]") and _ASIN.match(action[6:-1].upper()):
        return action[6:-1].upper()
    return None


def _phrase_in(value: str, instruction: str) -> bool:
    value_words = words(value)
    return bool(value_words) and f" {' '.join(value_words)} " in f" {' '.join(words(instruction))} "


def option_like(word: str) -> bool:
    """A word that usually names an option value: a colour, a size word, or one with a digit."""
    return word in COLOR_SET or word in SIZE_WORDS or any(c.isdigit() for c in word)


def _item_parts(texts: list[str], clickable: set[str], instruction: str) -> tuple[str, dict[str, list[str]], list[str]]:
    """(title, option group -> values, the value of each group the instruction names) of an item page.

    Between ``< Prev`` and the title, a clickable text is an option value, any other a group name."""
    price_at = next(i for i, t in enumerate(texts) if t.startswith("Price: "))
    groups: dict[str, list[str]] = {}
    current = None
    for t in texts[texts.index("< Prev") + 1: price_at - 1]:
        if t in clickable and current is not None:
            groups[current].append(t)
        else:
            current = t
            groups.setdefault(t, [])
    chosen = []
    for options in groups.values():
        fitting = [v for v in options if _phrase_in(v, instruction)]
        if fitting:
            chosen.append(max(fitting, key=lambda v: len(words(v))))
    return texts[price_at - 1], groups, chosen


def _clickable(admissible: Sequence[str]) -> set[str]:
    return {a[len("click["):-1] for a in admissible if a.startswith("click[")}


class ShoppingExpert:
    """Stateless: :meth:`act` reads the page, the admissible actions and the episode's trace."""

    def act(self, observation: str, admissible: Sequence[str], trace: Sequence[tuple[str, tuple, str]]) -> str:
        """The next action; ``trace``: the episode's earlier (observation, admissible actions, action)."""
        texts = observation.split(SEP)
        instruction = texts[texts.index("Instruction:") + 1] if "Instruction:" in texts else ""
        if "search[<your query>]" in admissible:
            return f"search[{search_query(instruction)}]"
        if "click[buy now]" in admissible:
            return self._item(texts, admissible, trace, instruction)
        if any(t.startswith("Page ") and "(Total results:" in t for t in texts):
            return self._results(texts, admissible, trace, instruction)
        return "click[< prev]" if "click[< prev]" in admissible else "click[back to search]"

    # ------------------------------------------------------------------ results page
    @staticmethod
    def _listing(texts: list[str]) -> list[tuple[str, str, str]]:
        """(asin, title, price) of each product on a results page."""
        out = []
        for i, t in enumerate(texts):
            if _ASIN.match(t) and i + 2 < len(texts):
                out.append((t, texts[i + 1], texts[i + 2]))
        return out

    @staticmethod
    def _left(trace) -> set[str]:
        """ASINs opened earlier in the episode (and left without buying, since the episode goes on)."""
        return {asin for _, _, a in trace if (asin := _opened_asin(a))}

    def _missing(self, instruction, title, groups, chosen, trace) -> set[str]:
        """The instruction's words this product does not account for, among those that can tell products
        apart: words of some title listed so far, and option-like words (colours, sizes, numbers)."""
        listed = {w for obs, _, _ in trace if "(Total results:" in obs for _, t, _ in self._listing(obs.split(SEP))
                  for w in words(t)}
        seen = set(words(title)) | {w for v in chosen for w in words(v)} | {w for g in groups for w in words(g)}
        return {w for w in wanted_words(instruction) - seen if w in listed or option_like(w)}

    def _visited(self, trace) -> dict[str, int]:
        """ASIN -> how many words its item page left missing, for the products opened so far."""
        out = {}
        for i, (_, _, action) in enumerate(trace):
            asin = _opened_asin(action)
            if asin and i + 1 < len(trace) and "click[buy now]" in trace[i + 1][1]:
                texts = trace[i + 1][0].split(SEP)
                instruction = texts[texts.index("Instruction:") + 1]
                title, groups, chosen = _item_parts(texts, _clickable(trace[i + 1][1]), instruction)
                out[asin] = len(self._missing(instruction, title, groups, chosen, trace))
        return out

    def _results(self, texts, admissible, trace, instruction) -> str:
        limit = price_limit(instruction)
        left = self._left(trace)
        visited = self._visited(trace)
        if len(left) >= MAX_OPENED and visited:  # enough looking: buy the best product seen
            return f"click[{min(visited, key=lambda a: (visited[a], a)).lower()}]"
        best, best_score = None, -1.0
        for asin, title, price in self._listing(texts):
            prices = [float(p) for p in _PRICE.findall(price)] or [0.0]
            if asin in left or (limit is not None and max(prices) > limit):
                continue
            score = coverage(instruction, title)
            if score > best_score:
                best, best_score = asin, score
        if best is not None and f"click[{best.lower()}]" in admissible:
            return f"click[{best.lower()}]"
        page = next((int(t.split()[1]) for t in texts if t.startswith("Page ")), 1)
        if page < MAX_RESULT_PAGES and "click[next >]" in admissible:
            return "click[next >]"
        listing = self._listing(texts)
        if listing:  # nothing new is left: take the best product shown again
            return f"click[{max(listing, key=lambda p: coverage(instruction, p[1]))[0].lower()}]"
        return "click[< prev]" if "click[< prev]" in admissible else "click[back to search]"

    # ------------------------------------------------------------------ item page
    def _item(self, texts, admissible, trace, instruction) -> str:
        title, groups, chosen = _item_parts(texts, _clickable(admissible), instruction)
        # the options selected since this product was opened (WebShop's page does not show them)
        opens = [i for i, (_, _, a) in enumerate(trace) if _opened_asin(a)]
        opened = opens[-1] if opens else -1
        current_asin = _opened_asin(trace[opened][2]) if opens else None
        revisit = sum(1 for _, _, a in trace if _opened_asin(a) == current_asin) > 1
        selected = {a[len("click["):-1] for _, _, a in trace[opened + 1:] if a.startswith("click[")}
        missing = self._missing(instruction, title, groups, chosen, trace)
        if missing and not revisit and "click[< prev]" in admissible:
            return "click[< prev]"
        for value in chosen:
            if value not in selected:
                return f"click[{value}]"
        return "click[buy now]"


__all__ = ["ShoppingExpert", "search_query", "coverage", "price_limit", "wanted_words", "words", "FILLER"]
