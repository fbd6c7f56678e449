"""The offline catalog: WebShop's formats, determinism, breadth, near misses that make choosing matter."""

from __future__ import annotations

import json

import pytest

from milegpo.envs.webshop.catalog import (PRODUCT_TYPES, catalog_digest, embedded_catalog, generate_catalog,
                                          write_catalog)
from milegpo.envs.webshop.data import load_shop
from milegpo.envs.webshop.env import get_world, world_options
from milegpo.envs.webshop.reward import best_options, get_reward, goal_option_values

from .conftest import SMALL

#: blake2b of the files of generate_catalog(300, 0): a change here means every machine's catalog changed
#: (bump CATALOG_VERSION in catalog.py, then update this value)
DIGEST_300_0 = "4dda4b7098cc5ec370395b6e888c4e0d"


def test_same_seed_same_bytes_everywhere(tmp_path):
    assert catalog_digest(300, 0) == DIGEST_300_0
    a, b = write_catalog(tmp_path / "a", 120, 7), write_catalog(tmp_path / "b", 120, 7)
    for name in ("items_shuffle_1000.json", "items_ins_v2_1000.json", "items_human_ins.json", "reviews.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    assert catalog_digest(120, 8) != catalog_digest(120, 7)


def test_files_are_webshops_formats_and_load(tmp_path):
    folder = write_catalog(tmp_path, 200, 3)
    products = json.loads((folder / "items_shuffle_1000.json").read_text())
    assert isinstance(products, list) and len(products) == 200
    for p in products:
        assert {"asin", "name", "full_description", "small_description", "pricing", "customization_options",
                "category", "query", "product_category", "images"} <= set(p)
        assert len(p["asin"]) == 10 and p["asin"].isupper() and p["pricing"].startswith("$")
        assert " › " in p["product_category"] and isinstance(p["small_description"], list)
    human = json.loads((folder / "items_human_ins.json").read_text())
    assert all({"instruction", "instruction_attributes", "instruction_options"} <= set(i)
               for specs in human.values() for i in specs)
    shop = load_shop(folder)
    assert len(shop.products) == 200 and len(shop.goals) >= 100


def test_default_catalog_is_broad():
    products = generate_catalog()["items_shuffle_1000.json"]
    assert len(products) == 3000
    assert len({p["category"] for p in products}) >= 10 and len({p["query"] for p in products}) == len(PRODUCT_TYPES)
    ranges = [p for p in products if p["pricing"].count("$") == 2]
    assert 0.05 < len(ranges) / len(products) < 0.3
    groups = {g for p in products for g in (p["customization_options"] or {})}
    assert {"color", "size", "scent", "flavor name"} <= groups


def test_instructions_read_like_webshops():
    human = generate_catalog(300, 0)["items_human_ins.json"]
    texts = [i["instruction"] for specs in human.values() for i in specs]
    assert all(t == t.lower() for t in texts)
    assert sum(t.startswith(("i need", "i am looking for", "i'm looking for", "i want")) for t in texts) > len(texts) / 4
    for specs in human.values():
        for spec in specs:
            assert all(a in spec["instruction"] for a in spec["instruction_attributes"])
            # options are stored as WebShop normalises option values ("1/3 inch" -> "1 | 3 inch")
            assert all(o.replace(" | ", "/") in spec["instruction"] for o in spec["instruction_options"])


def test_goal_products_win_and_near_misses_exist():
    world = get_world(world_options(catalog_size=SMALL["catalog_size"], catalog_seed=SMALL["catalog_seed"]))
    kinds = {"attribute": 0, "option": 0, "price": 0}
    goals = world.shop.goals[:120]
    for goal in goals:
        own = world.shop.by_asin[goal["asin"]]
        assert get_reward(own, goal, world.shop.prices[own["asin"]], best_options(own, goal_option_values(goal))) == 1.0
        seen = set()
        for product in world.shop.products:
            if product["query"] != goal["query"] or product["asin"] == goal["asin"]:
                continue
            _, info = get_reward(product, goal, world.shop.prices[product["asin"]],
                                 best_options(product, goal_option_values(goal)), verbose=True)
            if info["r_type"] == 1.0:
                if info["r_att"] < 1 and info.get("r_option", 1) == 1 and info["r_price"]:
                    seen.add("attribute")
                if info["r_att"] == 1 and info.get("r_option", 1) < 1 and info["r_price"]:
                    seen.add("option")
                if info["r_att"] == 1 and info.get("r_option", 1) == 1 and not info["r_price"]:
                    seen.add("price")
        for kind in seen:
            kinds[kind] += 1
    # most goals have each kind of near miss in the catalog: same type, one thing wrong
    assert kinds["attribute"] > 0.8 * len(goals) and kinds["price"] > 0.6 * len(goals)
    assert kinds["option"] > 0.5 * len(goals)


def test_embedded_catalog_is_cached(tmp_path):
    folder = embedded_catalog(50, 1, cache=tmp_path)
    stamp = (folder / "items_shuffle_1000.json").stat().st_mtime_ns
    assert embedded_catalog(50, 1, cache=tmp_path) == folder
    assert (folder / "items_shuffle_1000.json").stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]  # no temporary folder left behind


def test_too_small_catalog_is_refused():
    with pytest.raises(ValueError, match="n_products must be >= 10"):
        generate_catalog(5)
