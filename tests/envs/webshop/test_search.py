"""The BM25 engine: WebShop's documents, top 50, only matching documents, the disk cache."""

from __future__ import annotations

from milegpo.envs.webshop.data import load_shop
from milegpo.envs.webshop.search import SearchEngine, analyze, product_document


def test_documents_are_built_as_webshop_builds_them(fixture_dir):
    tea = load_shop(fixture_dir).products[0]
    assert product_document(tea) == (
        "herbal essence tea tree shampoo for dry hair, sulfate free, 16 fl oz a gentle shampoo made with natural "
        "ingredients and tea tree oil. sulfate free: cleans without stripping size: 8 fl oz, 16 fl oz | pack of 2, "
        "and scent: tea tree, lavender")


def test_analyzer_is_lucene_like():
    assert analyze(["The Shoes for Running, and a Dog's toy"])[0] == ["shoe", "run", "dog", "toi"]


def _engine():
    docs = ["red running shoes for men", "blue running shoes", "red cotton t-shirt", "coffee mug ceramic",
            "red red red mug"]
    return SearchEngine.build(docs, ["A1", "A2", "A3", "A4", "A5"])


def test_ranking_matches_only_and_ties():
    engine = _engine()
    assert engine.search("running shoes") == ["A2", "A1"]  # the shorter document first
    assert set(engine.search("red")) == {"A1", "A3", "A5"} and engine.search("red")[0] == "A5"
    assert engine.search("zebra") == [] and engine.search("the and of") == [] and engine.search("") == []
    assert len(engine.search("red", k=2)) == 2


def test_top_50_of_many():
    docs = [f"shampoo number {i} " + "extra " * (i % 7) for i in range(120)]
    engine = SearchEngine.build(docs, [f"B{i:09d}" for i in range(120)])
    hits = engine.search("shampoo")
    assert len(hits) == 50 and len(set(hits)) == 50


def test_index_is_cached_on_disk(tmp_path):
    docs, asins = ["alpha beta", "beta gamma", "gamma delta"], ["X1", "X2", "X3"]
    first = SearchEngine.cached(docs, asins, tmp_path)
    folders = list((tmp_path / "index").iterdir())
    assert len(folders) == 1 and (folders[0] / "asins.json").exists()
    again = SearchEngine.cached(docs, asins, tmp_path)  # loaded, not rebuilt
    assert list((tmp_path / "index").iterdir()) == folders
    assert again.search("beta gamma") == first.search("beta gamma") == ["X2", "X1", "X3"]
    SearchEngine.cached(docs + ["epsilon"], asins + ["X4"], tmp_path)
    assert len(list((tmp_path / "index").iterdir())) == 2  # another catalog, another index
