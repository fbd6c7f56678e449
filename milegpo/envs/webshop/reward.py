"""WebShop's reward of a purchase: type, attribute, option and price terms.

The functions keep the names, arguments and return values of WebShop's
``web_agent_site/engine/goal.py`` (princeton-nlp/WebShop, MIT; the version verl-agent ships,
with ``get_option_reward(purchased_options, goal_options)``)::

    total = (n_attr + n_opt + r_price) / (len(goal["attributes"]) + len(goal["goal_options"]) + 1)
    total *= r_type

A product is a dict with WebShop's loaded keys (``query``, ``product_category``, ``name``,
``Title``, ``Attributes``, ``BulletPoints``, ``Description``); a goal a dict with ``query``,
``product_category``, ``name``, ``attributes``, ``goal_options``, ``price_upper``.

Fuzzy matching is thefuzz's ``fuzz.token_set_ratio`` (what WebShop calls), computed with
rapidfuzz exactly as thefuzz >= 0.20 does: both strings lose the characters U+0080..U+00FF,
then rapidfuzz's ``default_process`` (non-alphanumerics -> spaces, lower case, strip), then the
ratio is rounded to an int; a match is a rounded score > 85 (:func:`token_set_score`).

Title nouns (the type term): WebShop tags product names with spaCy (``en_core_web_sm``) and keeps
the lower-cased tokens tagged NOUN or PROPN. When spaCy and an English model are importable the
same is done here (:data:`SPACY_MODEL`, else ``en_core_web_lg`` / ``en_core_web_md``). Otherwise
:func:`fallback_title_nouns`: the content words of the name (see its docstring); how far it is from
spaCy is measured in notes/webshop.md. ``MILEGPO_WEBSHOP_NOUNS=fallback`` forces the fallback (so that
two machines, one with spaCy and one without, can compute the same rewards).
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any, Iterable, Sequence

from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

#: WebShop's ``COLOR_SET`` (web_agent_site/engine/normalize.py), in its order: the first word that is a
#: substring of an option value replaces the whole value.
COLOR_SET = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure",
    "banana", "beige", "black", "blue", "blush", "bordeaux", "bronze",
    "brown", "burgundy", "camel", "camo", "caramel", "champagne",
    "charcoal", "cheetah", "chestnut", "chocolate", "christmas", "coffee",
    "cognac", "copper", "coral", "cranberry", "cream", "crystal", "dark",
    "denim", "eggplant", "elephant", "espresso", "fuchsia", "gold", "granite",
    "grape", "graphite", "grass", "gray", "green", "grey", "heather", "indigo",
    "ivory", "ivy", "khaki", "lavender", "lemon", "leopard", "light", "lilac",
    "lime", "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha",
    "multicolor", "mushroom", "mustard", "natural", "navy", "nude", "olive",
    "orange", "peach", "pewter", "pink", "plum", "purple", "rainbow", "red",
    "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver", "skull",
    "slate", "steel", "stone", "stonewash", "sunflower", "tan", "taupe", "teal",
    "tiger", "turquoise", "violet", "walnut", "wheat", "white", "wine", "yellow",
)

#: a fuzzy match is a rounded token-set ratio above this (WebShop's ``score > 85``)
FUZZY_THRESHOLD = 85

#: the spaCy model WebShop loads (``spacy.load("en_core_web_sm")``); the larger ones are tried after it
SPACY_MODEL = "en_core_web_sm"
_SPACY_MODELS = (SPACY_MODEL, "en_core_web_lg", "en_core_web_md")
_NOUN_TAGS = ("PNOUN", "NOUN", "PROPN")  # WebShop's tuple ("PNOUN" is no spaCy tag; kept for fidelity)

_LATIN1 = {i: None for i in range(128, 256)}


def normalize_color(color_string: str) -> str:
    """WebShop's ``normalize_color``: the first word of :data:`COLOR_SET` that is a substring of the value, else the value."""
    for color in COLOR_SET:
        if color in color_string:
            return color
    return color_string


def token_set_score(a: Any, b: Any) -> int:
    """thefuzz's ``fuzz.token_set_ratio(a, b)`` (force_ascii, full_process): an int in 0..100."""
    if a is None or b is None:
        return 0
    left = default_process(str(a).translate(_LATIN1))
    right = default_process(str(b).translate(_LATIN1))
    return int(round(fuzz.token_set_ratio(left, right)))


def fuzzy_match(a: Any, b: Any) -> bool:
    """WebShop's match test: ``token_set_ratio(a, b) > 85``."""
    return token_set_score(a, b) > FUZZY_THRESHOLD


# --------------------------------------------------------------------------- title nouns
#: closed-class words and measure words that are never counted as nouns by :func:`fallback_title_nouns`
FUNCTION_WORDS = frozenset("""
a an the and or nor but for of in on at to by with without from into onto over under up down off out about
as per via than then so if is are be been being was were am do does did has have had it its this that these
those each every all any both either neither some no not only just very more most less least much many few
one two three four five six seven eight nine ten & + x w/ vs new best top great
""".split())

_FALLBACK_TOKEN = re.compile(r"[a-z0-9]+(?:['.][a-z0-9]+)*")
_NUMBERISH = re.compile(r"^[0-9.]+(?:st|nd|rd|th|s|x|k|pcs|pc|ct|oz|ml|mm|cm|in|ft|lb|lbs|g|kg|l|w|v|mah|gb|tb)?$")


def fallback_title_nouns(name: str) -> list[str]:
    """The documented stand-in for spaCy's NOUN / PROPN tokens of a product name.

    Product names are title-cased noun phrases, which spaCy's tagger mostly tags NOUN or PROPN;
    so: lower-case the name, split it into runs of letters and digits (``d.o.n.`` and ``men's``
    stay one token, hyphens and slashes split, as spaCy's infix rules do), and keep every token
    that has a letter, is not a number or a number with a unit (``16oz``, ``3.4``, ``2pcs``), and is
    not one of :data:`FUNCTION_WORDS` (articles, prepositions, conjunctions, pronouns,
    number words). Deterministic, microseconds, no model.
    """
    out = []
    for token in _FALLBACK_TOKEN.findall(name.lower()):
        if token in FUNCTION_WORDS or _NUMBERISH.match(token) or not any(c.isalpha() for c in token):
            continue
        out.append(token)
    return out


@lru_cache(maxsize=1)
def _spacy_pipeline():
    if os.environ.get("MILEGPO_WEBSHOP_NOUNS", "").lower() == "fallback":
        return None
    try:
        import spacy
    except ImportError:
        return None
    for model in _SPACY_MODELS:
        try:
            return spacy.load(model, disable=["parser", "ner", "lemmatizer"])
        except (OSError, ImportError, ValueError):
            continue
    return None


def noun_backend() -> str:
    """``"spacy:<model>"`` when title nouns come from spaCy, else ``"fallback"``."""
    nlp = _spacy_pipeline()
    return "fallback" if nlp is None else f"spacy:{nlp.meta.get('lang', 'en')}_{nlp.meta.get('name', '?')}"


@lru_cache(maxsize=200_000)
def title_nouns(name: str) -> tuple[str, ...]:
    """The lower-cased NOUN / PROPN tokens of a product name (spaCy when importable, else the fallback)."""
    nlp = _spacy_pipeline()
    if nlp is None:
        return tuple(fallback_title_nouns(name))
    return tuple(t.text.lower() for t in nlp(name) if t.pos_ in _NOUN_TAGS)


# --------------------------------------------------------------------------- the four terms
def type_reward_from_parts(query_match: bool, category_match: bool, title_score: float) -> float:
    """r_type from its three tests (WebShop's order of overrides: 1.0; 0.5 without any match;
    0.1 when ``title_score < 0.1``; 0.0 when ``title_score == 0``)."""
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type


def _categories(product_category: str) -> set[str]:
    return {x.strip() for x in product_category.split("›")}


def get_type_reward(purchased_product: dict, goal: dict) -> dict:
    """Whether the purchase is the goal's kind of product: ``{r_type, query_match, category_match, title_score}``.

    query_match: same ``query``; category_match: at least 2 of the ``›``-separated category names
    shared (order ignored); title_score: share of the goal name's nouns found among the purchased
    name's nouns (0.2 when the goal name has none); r_type: :func:`type_reward_from_parts`.
    """
    query_match = purchased_product["query"] == goal["query"]
    category_match = len(_categories(purchased_product["product_category"]) & _categories(goal["product_category"])) >= 2
    purchased_nouns = title_nouns(purchased_product["name"])
    desired_nouns = title_nouns(goal["name"])
    if len(desired_nouns) == 0:
        title_score = 0.2
    else:
        title_score = len(set(purchased_nouns) & set(desired_nouns)) / len(desired_nouns)
    return dict(r_type=type_reward_from_parts(query_match, category_match, title_score), query_match=query_match,
                category_match=category_match, title_score=title_score)


def _attribute_found(goal_attr: str, purchased_product: dict) -> bool:
    if any(fuzzy_match(p_attr, goal_attr) for p_attr in purchased_product["Attributes"]):
        return True
    return (goal_attr in purchased_product["Title"].lower()
            or goal_attr in " ".join(purchased_product["BulletPoints"]).lower()
            or goal_attr in purchased_product["Description"].lower())


def get_attribute_reward(purchased_product: dict, goal: dict) -> tuple[float, int]:
    """``(r_attr, num_attr_matches)``: goal attributes fuzzy-matched by one of the product's Attributes,
    or else found as a substring of its lower-cased Title, joined BulletPoints or Description."""
    goal_attrs = goal["attributes"]
    num_attr_matches = sum(1 for g_attr in goal_attrs if _attribute_found(g_attr, purchased_product))
    return num_attr_matches / len(goal_attrs), num_attr_matches


def get_option_reward(purchased_options: Iterable[str], goal_options: Iterable[str]) -> tuple[float | None, int]:
    """``(r_option, num_option_matches)``: goal options fuzzy-matched by a purchased option value, both
    sides colour-normalised first; r_option is None when there are no goal options."""
    purchased = [normalize_color(o) for o in purchased_options]
    goal = [normalize_color(o) for o in goal_options]
    num_option_matches = sum(1 for g in goal if any(fuzzy_match(p, g) for p in purchased))
    r_option = num_option_matches / len(goal) if len(goal) > 0 else None
    return r_option, num_option_matches


def goal_option_values(goal: dict) -> list[str]:
    """The goal's options as a list (human goals: already a list; a dict of synthetic goals: its values)."""
    options = goal["goal_options"]
    return list(options.values()) if isinstance(options, dict) else list(options)


def get_reward(purchased_product: dict, goal: dict, price: float, options: dict, verbose: bool = False,
               **kwargs: Any):
    """WebShop's score of buying ``purchased_product`` at ``price`` with ``options`` (group -> value) for ``goal``.

    ``(n_attr + n_opt + r_price) / (len(attributes) + len(goal_options) + 1) * r_type``, in [0, 1].
    With ``verbose=True`` returns ``(total, info)``; info holds r_type, r_att, w_att, query_match,
    category_match, title_score, and r_option / w_option when the goal has options, r_price / w_price.
    """
    verbose = verbose or bool(kwargs.get("verbose", False))
    r_type_dict = get_type_reward(purchased_product, goal)
    r_price = (price <= goal["price_upper"]) if goal["price_upper"] > 0 else None
    r_att, num_attr_matches = get_attribute_reward(purchased_product, goal)
    r_option, num_option_matches = get_option_reward(list(options.values()), goal_option_values(goal))
    weight = len(goal["attributes"]) + len(goal["goal_options"]) + 1
    total_reward = (num_attr_matches + num_option_matches + (r_price or 0)) / weight
    total_reward *= r_type_dict["r_type"]
    if not verbose:
        return total_reward
    info = {"r_type": r_type_dict["r_type"], "r_att": r_att, "w_att": len(goal["attributes"]) / weight,
            "query_match": r_type_dict["query_match"], "category_match": r_type_dict["category_match"],
            "title_score": r_type_dict["title_score"]}
    if r_option is not None:
        info["r_option"] = r_option
        info["w_option"] = len(goal["goal_options"]) / weight
    if r_price is not None:
        info["r_price"] = r_price
        info["w_price"] = 1 / weight
    return total_reward, info


def option_hits(value: str, goal_options: Sequence[str]) -> frozenset[int]:
    """Indices of the goal options a purchased option value matches (colour-normalised, fuzzy)."""
    normalized = normalize_color(value)
    return frozenset(i for i, g in enumerate(goal_options) if fuzzy_match(normalized, normalize_color(g)))


def best_options(product: dict, goal_options: Sequence[str]) -> dict[str, str]:
    """One value per option group of ``product`` that matches the most goal options (groups whose
    values match none are left unselected): the options a perfect shopper would click. Privileged use only."""
    chosen: dict[str, str] = {}
    for group, values in product.get("options", {}).items():
        best, best_hits = None, 0
        for value in values:
            hits = len(option_hits(value, goal_options))
            if hits > best_hits:
                best, best_hits = value, hits
        if best is not None:
            chosen[group] = best
    return chosen


__all__ = ["get_reward", "get_type_reward", "get_attribute_reward", "get_option_reward", "normalize_color",
           "token_set_score", "fuzzy_match", "title_nouns", "fallback_title_nouns", "noun_backend",
           "type_reward_from_parts", "goal_option_values", "best_options", "option_hits", "COLOR_SET", "FUZZY_THRESHOLD",
           "FUNCTION_WORDS", "SPACY_MODEL"]
