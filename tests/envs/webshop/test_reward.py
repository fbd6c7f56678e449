"""WebShop's reward: every branch of the type term, attributes, options, price; values computed by hand."""

from __future__ import annotations

import pytest

from milegpo.envs.webshop import reward
from milegpo.envs.webshop.reward import (fallback_title_nouns, fuzzy_match, get_attribute_reward, get_option_reward,
                                         get_reward, get_type_reward, normalize_color, token_set_score)

CAT = "Beauty & Personal Care › Hair Care › Shampoos"


@pytest.fixture
def nouns(monkeypatch):
    """Title nouns from a table, so the type term is tested apart from the tagger."""
    table: dict[str, tuple[str, ...]] = {}
    monkeypatch.setattr(reward, "title_nouns", lambda name: table[name])
    return table


def _type(nouns, goal_nouns, bought_nouns, query=True, category=CAT):
    nouns["goal"], nouns["bought"] = tuple(goal_nouns), tuple(bought_nouns)
    goal = {"query": "shampoo", "product_category": CAT, "name": "goal"}
    bought = {"query": "shampoo" if query else "soap", "product_category": category, "name": "bought"}
    return get_type_reward(bought, goal)


def test_type_reward_every_branch(nouns):
    full = _type(nouns, ["tea", "shampoo"], ["shampoo", "tea", "oil"])
    assert full == {"r_type": 1.0, "query_match": True, "category_match": True, "title_score": 1.0}
    # no query, no category match, title_score 1/4 > 0.2: still 1.0
    r = _type(nouns, ["a", "b", "c", "d"], ["a"], query=False, category="Toys › Games")
    assert (r["r_type"], r["title_score"], r["query_match"], r["category_match"]) == (1.0, 0.25, False, False)
    # title_score exactly 0.2 is not > 0.2: no match at all -> 0.5
    r = _type(nouns, ["a", "b", "c", "d", "e"], ["a"], query=False, category="Toys › Games")
    assert (r["r_type"], r["title_score"]) == (0.5, 0.2)
    # 0 < title_score < 0.1 -> 0.1 even with a query and category match
    r = _type(nouns, list("abcdefghijk"), ["a"])
    assert r["r_type"] == 0.1 and r["title_score"] == pytest.approx(1 / 11)
    # no shared noun -> 0.0
    assert _type(nouns, ["tea"], ["mug"])["r_type"] == 0.0
    # a goal name without nouns scores 0.2: 1.0 with a query match, 0.5 without any match
    assert _type(nouns, [], ["mug"]) == {"r_type": 1.0, "query_match": True, "category_match": True, "title_score": 0.2}
    assert _type(nouns, [], ["mug"], query=False, category="Toys › Games")["r_type"] == 0.5


def test_category_match_needs_two_shared_names_in_any_order(nouns):
    assert _type(nouns, ["x"], ["x"], query=False, category="Shampoos › Hair Care › Other")["category_match"]
    assert not _type(nouns, ["x"], ["x"], query=False, category="Hair Care › Other › Things")["category_match"]
    # duplicates count once (WebShop's own example: "a › a › d" against "a › b › c" does not match)
    goal = {"query": "q", "product_category": "a › b › c", "name": "g"}
    nouns["g"] = nouns["p"] = ("x",)
    assert not get_type_reward({"query": "r", "product_category": "a › a › d", "name": "p"}, goal)["category_match"]
    assert get_type_reward({"query": "r", "product_category": "a › a › b", "name": "p"}, goal)["category_match"]


def test_title_score_counts_distinct_nouns_over_the_goal_nouns(nouns):
    r = _type(nouns, ["tea", "tree", "shampoo"], ["tea", "tea", "shampoo"])
    assert r["title_score"] == pytest.approx(2 / 3)


def test_attribute_reward_fuzzy_then_texts():
    goal = {"attributes": ["tea tree", "essential oils", "natural ingredients"]}
    exact = {"Attributes": ["tea tree", "essential oil", "natural ingredients"], "Title": "", "BulletPoints": [],
             "Description": ""}
    assert get_attribute_reward(exact, goal) == (1.0, 3)  # "essential oil" scores 96 against "essential oils"
    partial = dict(exact, Attributes=["essential oil", "natural ingredients"])
    assert get_attribute_reward(partial, goal) == (pytest.approx(2 / 3), 2)
    texts = {"Attributes": [], "Title": "Shampoo", "BulletPoints": ["This shampoo has essential oils"],
             "Description": "Made with NATURAL INGREDIENTS"}  # the texts are lower-cased, the attribute is not
    assert get_attribute_reward(texts, goal) == (pytest.approx(2 / 3), 2)
    in_title = dict(texts, Title="Tea Tree Shampoo", BulletPoints=[], Description="")
    assert get_attribute_reward(in_title, goal) == (pytest.approx(1 / 3), 1)
    nothing = {"Attributes": ["tea bag", "earl gray"], "Title": "English tea", "BulletPoints": ["Soothing"],
               "Description": "Best tea"}
    assert get_attribute_reward(nothing, goal) == (0.0, 0)


def test_token_set_score_is_thefuzz_rounded_with_its_preprocessing():
    assert token_set_score("Essential-Oil!", "essential oils") == 96
    assert token_set_score("cool powder snow", "powder snow") == 100  # one token set inside the other
    # raw ratio 85.106 rounds to 85: not a match (thefuzz returns ints, WebShop tests > 85)
    assert token_set_score("abcdefghijklmnopqrstuvwxyza", "abcdefghijklmnopqrst") == 85
    assert not fuzzy_match("abcdefghijklmnopqrstuvwxyza", "abcdefghijklmnopqrst")
    assert token_set_score("pack 12", "pack 24 pack") == 86 and fuzzy_match("pack 12", "pack 24 pack")
    assert token_set_score("caf\u00e9", "caf") == 100  # U+0080..U+00FF are dropped (thefuzz's force_ascii)
    assert token_set_score(None, "x") == 0 and token_set_score("", "x") == 0


def test_normalize_color_first_listed_color_wins():
    assert normalize_color("jet black") == "black"
    assert normalize_color("navy blue") == "blue"  # "blue" comes before "navy" in WebShop's list
    assert normalize_color("ashy grey") == "ash"  # substring, in list order
    assert normalize_color("16 fl oz") == "16 fl oz"


def test_option_reward():
    assert get_option_reward(["pack of 12", "grey", "xl"], ["grey", "xl", "pack of 12"]) == (1.0, 3)
    assert get_option_reward(["pack of 12", "blue", "xl"], ["grey", "xl", "pack of 12"]) == (pytest.approx(2 / 3), 2)
    assert get_option_reward(["jet black"], ["black"]) == (1.0, 1)  # both sides colour-normalised
    assert get_option_reward(["navy blue"], ["navy"]) == (0.0, 0)  # "navy blue" -> "blue", "navy" stays
    assert get_option_reward(["goal 1"], []) == (None, 0)  # no goal options
    assert get_option_reward([], ["goal 1", "goal 2"]) == (0.0, 0)


def _product(**kw):
    base = {"query": "shampoo", "product_category": CAT, "name": "Tea Tree Shampoo", "Title": "Tea Tree Shampoo",
            "Attributes": ["tea tree", "sulfate free"], "BulletPoints": [], "Description": ""}
    base.update(kw)
    return base


def _goal(**kw):
    base = {"query": "shampoo", "product_category": CAT, "name": "Tea Tree Shampoo",
            "attributes": ["tea tree", "dry hair"], "goal_options": ["16 fl oz", "lavender"], "price_upper": 30.0}
    base.update(kw)
    return base


def test_get_reward_formula():
    opts = {"size": "16 fl oz", "scent": "coconut"}
    # (1 attribute + 1 option + price) / (2 + 2 + 1), r_type 1
    assert get_reward(_product(), _goal(), 25.0, opts) == pytest.approx(3 / 5)
    assert get_reward(_product(), _goal(), 30.0, opts) == pytest.approx(3 / 5)  # price <= price_upper
    assert get_reward(_product(), _goal(), 30.01, opts) == pytest.approx(2 / 5)
    full = _product(Attributes=["tea tree", "dry hair"])
    assert get_reward(full, _goal(), 10.0, {"size": "16 fl oz", "scent": "lavender"}) == 1.0
    # no goal options: (attributes + price) / (attributes + 1)
    total, info = get_reward(_product(), _goal(goal_options=[]), 10.0, {}, verbose=True)
    assert total == pytest.approx(2 / 3)
    assert "r_option" not in info and info["w_att"] == pytest.approx(2 / 3) and info["w_price"] == pytest.approx(1 / 3)


def test_get_reward_scales_by_type_and_reports_parts(nouns):
    nouns["Tea Tree Shampoo"], nouns["Soap Bar"] = ("tea", "tree", "shampoo"), ("soap", "bar")
    other = _product(query="soap", product_category="Soap › Bars", name="Soap Bar")
    assert get_reward(other, _goal(), 10.0, {"size": "16 fl oz"}) == 0.0  # r_type 0
    nouns["Tea Soap Bar"] = ("tea", "soap", "bar")
    weak = _product(query="soap", product_category="Soap › Bars", name="Tea Soap Bar")
    total, info = get_reward(weak, _goal(), 10.0, {"size": "16 fl oz"}, verbose=True)
    assert info["title_score"] == pytest.approx(1 / 3) and info["r_type"] == 1.0  # 1/3 > 0.2
    assert total == pytest.approx(3 / 5)
    assert set(info) == {"r_type", "r_att", "w_att", "query_match", "category_match", "title_score", "r_option",
                         "w_option", "r_price", "w_price"}
    assert info["r_att"] == 0.5 and info["r_option"] == 0.5 and info["r_price"] is True
    assert info["w_option"] == pytest.approx(2 / 5)


def test_webshop_own_get_reward_examples():
    """WebShop's tests/web-agent-site/engine/test_goal.py cases that do not depend on the tagger."""
    goal = {"query": "Query 1", "product_category": "a › b › c",
            "name": "Mens D.O.N. Issue 2 Gca Basketball Sneakers Shoes Casual - Off White",
            "attributes": ["tea tree", "essential oils", "natural ingredients"],
            "goal_options": {"color": "grey", "size": "XL"}, "price_upper": 40.00}
    bought = {"query": "Query 1", "product_category": "a › b › c", "name": goal["name"],
              "Attributes": ["tea tree", "essential oil", "natural ingredients"], "Title": "", "BulletPoints": [],
              "Description": ""}
    options = {"color": "grey", "size": "XL"}
    assert get_reward(bought, goal, 35, options) == 1
    bought.update(Attributes=[], BulletPoints="This shampoo has essential oils and smells like lemons",
                  Description="Best shampoo on the market, made with natural ingredients")
    assert get_reward(bought, goal, 35, options) == pytest.approx(2 / 3, abs=1e-2)
    goal["goal_options"] = {"color": "grey", "size": "XL", "amount": "pack of 12"}
    assert get_reward(bought, goal, 35, options) == pytest.approx(0.5714, abs=1e-2)


def test_fallback_title_nouns():
    assert fallback_title_nouns("adidas Unisex-Adult D.o.n. Issue 2 Basketball Shoe") == [
        "adidas", "unisex", "adult", "d.o.n", "issue", "basketball", "shoe"]
    assert fallback_title_nouns("Shampoo for Dry Hair, 16 Fl Oz (Pack of 2)") == ["shampoo", "dry", "hair", "fl", "oz", "pack"]
    assert fallback_title_nouns("2 of the 3") == []
