"""Reading WebShop's own files (a hand-written fixture in their exact formats) and building its goals."""

from __future__ import annotations

import json
import random

import pytest

from milegpo.envs import EnvError
from milegpo.envs.webshop.data import (GOAL_SEED, data_files, load_shop, parse_pricing, price_limit, split_goals)


def test_products_load_as_webshop_loads_them(fixture_dir):
    shop = load_shop(fixture_dir)
    # "nan", the duplicate and the 13-character ASIN are skipped, the order kept
    assert [p["asin"] for p in shop.products] == ["B000TEA001", "B000TEA002", "B000MUG003"]
    tea, cheap, mug = shop.products
    assert tea["Title"] == tea["name"] and tea["Description"].startswith("A gentle shampoo")
    assert tea["query"] == "shampoo"  # lower-cased and stripped
    assert tea["options"] == {"size": ["8 fl oz", "16 fl oz | pack of 2"], "scent": ["tea tree", "lavender"]}
    assert tea["Attributes"] == ["sulfate free", "tea tree", "dry hair"]
    assert (tea["pricing"], tea["Price"]) == ([12.99], "$12.99")
    assert tea["Rating"] == 4.5 and tea["MainImage"] == "http://img/1.jpg"
    assert tea["Reviews"] == [{"title": "Love it", "score": 5, "body": "Smells great."},
                              {"title": "Okay", "score": 3, "body": ""}]  # no 'review': no body, as WebShop
    assert cheap["BulletPoints"] == ["One bullet as a string"] and cheap["options"] == {}
    assert (cheap["pricing"], cheap["Price"]) == ([5.0, 9.0], "$5.0 to $9.0")
    assert cheap["Attributes"] == ["DUMMY_ATTR"] and cheap["Rating"] == "N.A." and cheap["Reviews"] == []
    assert (mug["pricing"], mug["Price"]) == ([100.0], "$100.0")  # empty pricing
    assert mug["options"] == {"color": ["jet black", "white"]}  # a null group is dropped


def test_goals_prices_and_shuffle_follow_webshop(fixture_dir):
    shop = load_shop(fixture_dir)
    rng = random.Random(GOAL_SEED)  # WebShop: prices, then goal price limits, from one random stream
    cheap_price = rng.uniform(5.0, 9.0)
    assert shop.prices == {"B000TEA001": 12.99, "B000TEA002": cheap_price, "B000MUG003": 100.0}
    expected = []
    for asin, text, attrs, opts, price in [
            ("B000TEA001", "i need a sulfate free tea tree shampoo for dry hair in 16 fl oz.", ["sulfate free", "dry hair"],
             ["16 fl oz | pack of 2", "tea tree"], 12.99),
            ("B000TEA002", "find me a clarifying shampoo", ["clarifying"], [], cheap_price),
            ("B000MUG003", "i want a dishwasher safe coffee mug in black", ["dishwasher safe"], ["black"], 100.0)]:
        steps = [p for p in [10.0 * i for i in range(1, 100)] if p > price][:4]
        upper = max(rng.sample(steps, 2))
        expected.append({"asin": asin, "instruction_text": text.strip(".") + f", and price lower than {upper:.2f} dollars",
                         "attributes": attrs, "goal_options": opts, "price_upper": upper})
    random.Random(GOAL_SEED).shuffle(expected)  # random.seed(233); random.shuffle(goals)
    got = [{k: g[k] for k in expected[0]} for g in shop.goals]
    assert got == expected  # the instruction without attributes ("shampoo please") is skipped
    first = next(g for g in shop.goals if g["asin"] == "B000TEA001")
    assert first["instruction_text"].startswith("i need a sulfate free tea tree shampoo for dry hair in 16 fl oz, and")
    assert first["query"] == "shampoo" and first["category"] == "beauty" and first["name"].startswith("Herbal")


def test_price_limit_rules():
    rng = random.Random(1)
    upper, text = price_limit(12.99, rng)
    assert upper in (30.0, 40.0, 50.0) and text == f", and price lower than {upper:.2f} dollars"
    assert price_limit(975.0, random.Random(0)) == (990.0, ", and price lower than 990.00 dollars")  # 980, 990
    assert price_limit(985.0, random.Random(0)) == (1000000, "")  # only 990 above: no limit, no text
    assert price_limit(30.0, random.Random(0))[0] in (50.0, 60.0, 70.0)  # strictly above: 40, 50, 60, 70


def test_pricing_parse():
    assert parse_pricing("$1,299.99", "x") == ([1299.99], "$1299.99")
    assert parse_pricing(None, "x") == ([100.0], "$100.0")
    assert parse_pricing("$10.00$20.00$30.00", "x") == ([10.0, 20.0], "$10.0 to $20.0")
    with pytest.raises(EnvError, match="product 7"):
        parse_pricing("$1.2.3", "product 7")
    with pytest.raises(EnvError, match="no '\\$<number>'"):
        parse_pricing("twelve", "product 7")


def test_splits_are_verl_agents():
    assert split_goals(1200, "test") == range(0, 500)
    assert split_goals(1200, "train") == range(500, 1200)
    assert split_goals(30, "test", test_goals=10) == range(10) and split_goals(30, "train", 10) == range(10, 30)
    with pytest.raises(ValueError, match="'train' or 'test'"):
        split_goals(10, "valid")


def test_file_choice(fixture_dir):
    products, attrs, human, reviews = data_files(fixture_dir)
    assert (products.name, attrs.name, human.name, reviews.name) == (
        "items_shuffle_1000.json", "items_ins_v2_1000.json", "items_human_ins.json", "reviews.json")
    with pytest.raises(EnvError, match="lacks items_shuffle.json, items_ins_v2.json"):
        data_files(fixture_dir, "full")
    (fixture_dir / "reviews.json").unlink()
    assert data_files(fixture_dir)[3] is None


def test_missing_or_broken_data_dir_is_one_clear_error(fixture_dir, tmp_path):
    with pytest.raises(EnvError, match=f"{tmp_path / 'nowhere'} does not exist"):
        load_shop(tmp_path / "nowhere")
    (fixture_dir / "items_human_ins.json").unlink()
    with pytest.raises(EnvError, match="lacks items_human_ins.json"):
        load_shop(fixture_dir)


@pytest.mark.parametrize("name,content,message", [
    ("items_shuffle_1000.json", "[{", "items_shuffle_1000.json is not valid JSON"),
    ("items_shuffle_1000.json", "{}", "must hold a JSON list"),
    ("items_ins_v2_1000.json", "[]", "must hold a JSON object"),
    ("items_shuffle_1000.json", json.dumps([{"asin": "B1", "name": "x"}]), "product 0 .asin 'B1'.: missing field"),
    ("items_shuffle_1000.json", json.dumps([{"asin": "B1", "name": "x", "full_description": "", "small_description": [],
                                             "category": "c", "query": "q", "product_category": "p", "pricing": "$x",
                                             "customization_options": None}]), "product 0 .asin B1.: pricing"),
    ("items_shuffle_1000.json", json.dumps([{"asin": "B1", "name": "x", "full_description": "", "small_description": [],
                                             "category": "c", "query": "q", "product_category": "p", "pricing": "$1",
                                             "customization_options": {"color": ["red"]}}]), "customization_options"),
    ("items_human_ins.json", json.dumps({"B000TEA001": [{"instruction": "x"}]}), "asin B000TEA001, instruction 0"),
    ("reviews.json", json.dumps([{"asin": "B000TEA001"}]), "reviews.json, entry 0"),
])
def test_malformed_files_name_file_row_and_field(fixture_dir, name, content, message):
    (fixture_dir / name).write_text(content)
    with pytest.raises(EnvError, match=message):
        load_shop(fixture_dir)


# ---------------------------------------------------------------- issue 36: wrong types, dropped and unwinnable goals
def _edit(folder, name, change):
    path = folder / name
    content = json.loads(path.read_text())
    change(content)
    path.write_text(json.dumps(content))


@pytest.mark.parametrize("name, change, message", [
    ("items_human_ins.json", lambda h: h["B000TEA001"][0].update(instruction=42),
     r"^WebShop file items_human_ins.json, asin B000TEA001, instruction 0: instruction must be a string, got 42$"),
    ("items_human_ins.json", lambda h: h["B000MUG003"][0].update(instruction_attributes=None),
     r"asin B000MUG003, instruction 0: instruction_attributes must be a list of strings, got None$"),
    ("items_human_ins.json", lambda h: h["B000MUG003"][0].update(instruction_options="black"),
     r"asin B000MUG003, instruction 0: instruction_options must be a list of strings, got 'black'$"),
    ("items_human_ins.json", lambda h: h.update(B000MUG003={"instruction": "x"}),
     r"asin B000MUG003: must be a list of instructions"),
    ("items_shuffle_1000.json", lambda p: p[0].update(name=None),
     r"^WebShop file items_shuffle_1000.json, product 0 \(asin B000TEA001\): name must be a string, got None$"),
    ("items_shuffle_1000.json", lambda p: p[1].update(category=7), r"product 1 \(asin B000TEA002\): category must be "
                                                                   r"a string, got 7$"),
    ("items_shuffle_1000.json", lambda p: p[0].update(small_description=[1, 2]),
     r"product 0 \(asin B000TEA001\): small_description must be a string or a list of strings, got \[1, 2\]$"),
    ("items_shuffle_1000.json", lambda p: p[0].update(images="http://img/1.jpg"), r"images must be a list or null"),
    ("items_ins_v2_1000.json", lambda a: a.update(B000TEA001=["sulfate free"]),
     r"^WebShop file items_ins_v2_1000.json, asin B000TEA001: must be an object with 'attributes' \(a list of "
     r"strings\), got list$"),
    ("items_ins_v2_1000.json", lambda a: a["B000MUG003"].update(attributes="dishwasher safe"),
     r"asin B000MUG003: attributes must be a list of strings, got 'dishwasher safe'$"),
])
def test_wrong_types_are_one_line_naming_file_entry_and_field(fixture_dir, name, change, message):
    import re

    _edit(fixture_dir, name, change)
    with pytest.raises(EnvError) as raised:
        load_shop(fixture_dir)
    assert re.search(message, str(raised.value)) and "\n" not in str(raised.value), str(raised.value)


def test_dropped_and_unwinnable_goals_are_counted_in_one_warning(fixture_dir, caplog):
    import logging

    with caplog.at_level(logging.WARNING, logger="milegpo.envs.webshop"):
        load_shop(fixture_dir)  # the fixture: one instruction without attributes, as WebShop skips
    assert [r.getMessage() for r in caplog.records] == [
        f"WebShop data {fixture_dir}: 3 goals; dropped 1 without attributes (WebShop skips those)"]
    caplog.clear()
    _edit(fixture_dir, "items_human_ins.json", lambda h: h.update(B0NOSUCH01=[h["B000MUG003"][0]] * 2))
    with caplog.at_level(logging.WARNING, logger="milegpo.envs.webshop"):
        shop = load_shop(fixture_dir)
    assert len(shop.goals) == 3  # the unknown ASIN's goals are dropped, as WebShop does, and said so
    assert [r.getMessage() for r in caplog.records] == [
        f"WebShop data {fixture_dir}: 3 goals; dropped 2 instruction(s) of an ASIN with no product; dropped 1 "
        "without attributes (WebShop skips those)"]


def test_goals_no_product_can_win_are_reported_and_a_catalog_without_one_is_refused(fixture_dir, caplog):
    import logging

    def no_options(products):
        for product in products:
            product["customization_options"] = None

    _edit(fixture_dir, "items_shuffle_1000.json", no_options)  # the goals that ask for options cannot be won
    with caplog.at_level(logging.WARNING, logger="milegpo.envs.webshop"):
        shop = load_shop(fixture_dir)
    assert len(shop.goals) == 3
    assert caplog.records[-1].getMessage().endswith("; 2 of them cannot be won (their own product, with its best "
                                                    "options, does not score 1.0)")
    _edit(fixture_dir, "items_human_ins.json", lambda h: h.pop("B000TEA002"))  # the one goal without options
    with pytest.raises(EnvError, match=r"none of its 2 goals can be won .*customization_options"):
        load_shop(fixture_dir)


def test_a_truncated_file_is_one_line(fixture_dir):
    path = fixture_dir / "items_shuffle_1000.json"
    path.write_text(path.read_text()[:300])
    with pytest.raises(EnvError, match=r"^WebShop file .*items_shuffle_1000.json is not valid JSON: "):
        load_shop(fixture_dir)


def test_train_with_a_broken_data_dir_is_one_line_exit_2(fixture_dir, capsys, tmp_path):
    from milegpo.cli import main

    _edit(fixture_dir, "items_human_ins.json", lambda h: h["B000TEA001"][0].update(instruction=42))
    for data_dir, message in ((tmp_path / "nope", "does not exist"), (fixture_dir, "instruction must be a string")):
        assert main(["train", "--env", "webshop", "--env_options", json.dumps({"data_dir": str(data_dir)}),
                     "--output_dir", str(tmp_path / "run")]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith("milegpo train: error: the train tasks of --env "
                                                             "webshop") and message in err, err
    assert not (tmp_path / "run").exists()
