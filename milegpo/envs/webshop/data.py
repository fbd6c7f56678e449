"""WebShop's data files, read unchanged, and its goals.

A data directory holds WebShop's own JSON files (as its ``setup.sh`` downloads them, or as
:func:`milegpo.envs.webshop.catalog.write_catalog` writes them):

- products: ``items_shuffle_1000.json`` (1,000 products) or ``items_shuffle.json`` (1.18M);
- attributes: ``items_ins_v2_1000.json`` or ``items_ins_v2.json`` (asin -> ``{"attributes": [...], ...}``);
- human goals: ``items_human_ins.json`` (asin -> ``[{"instruction", "instruction_attributes",
  "instruction_options"}, ...]``);
- optionally ``reviews.json`` (``[{"asin", "reviews": [...], "average_rating"}]``; verl-agent ships none,
  then every product has no reviews and the rating ``N.A.``).

:func:`load_products` does what WebShop's ``engine.load_products`` does (skip ``"nan"`` or over-long
ASINs and duplicates; Title / Description / BulletPoints; pricing ``"$a"`` or ``"$a$b"`` -> floats,
missing -> 100.0; option groups lower-cased, values stripped, ``/`` -> `` | ``, lower-cased;
``["DUMMY_ATTR"]`` for a product without attributes; ``query`` lower-cased and stripped).
:func:`product_prices` draws the price of a price range once (uniform between its ends) and
:func:`human_goals` builds WebShop's human goals (``get_human_goals``: goals without attributes are
skipped; price_upper: two of the first four of 10, 20, ..., 990 above the price, the larger, and
``", and price lower than {price_upper:.2f} dollars"`` after the instruction's trailing ``.`` is
stripped; else 1,000,000 and no text). WebShop draws those prices from Python's unseeded global
``random`` (verl-agent seeds it with its env seed); here both come from ``random.Random(233)``, then
the goals are shuffled as WebShop does, ``random.seed(233); random.shuffle(goals)``, so every machine
builds the same goals. verl-agent's splits: goals 0-499 are ``test``, the rest ``train``.

Every malformed input is an :class:`~milegpo.envs.EnvError` naming the file, the entry and the field (a product's
text fields must be strings, an attribute entry an object, an instruction's text a string and its attributes and
options lists of strings). What WebShop drops silently is counted and reported in one warning line
(:func:`goal_report`, logger ``milegpo.envs.webshop``): the instructions of an ASIN that has no product, those
without attributes, and the goals that cannot be won (their own product, with its best options, does not score
1.0: e.g. a catalog without ``customization_options`` for goals that ask for options); a catalog that leaves no
goal that can be won is refused.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path

from ..base import EnvError

SMALL_FILES = ("items_shuffle_1000.json", "items_ins_v2_1000.json")
FULL_FILES = ("items_shuffle.json", "items_ins_v2.json")
HUMAN_FILE = "items_human_ins.json"
REVIEWS_FILE = "reviews.json"

#: WebShop's PRICE_RANGE: 10, 20, ..., 990
PRICE_RANGE = [10.0 * i for i in range(1, 100)]
#: the seed of WebShop's goal shuffle (``random.seed(233)``), also used here for the price draws
GOAL_SEED = 233
#: verl-agent: goals 0..499 are the test split, the rest train
TEST_GOALS = 500
#: WebShop's splits (:func:`split_goals`), the one evaluated by default, and its task types: ``None``, the categories
#: of the catalog's goals (``webshop_tasks`` names them when asked for another); see milegpo.envs.task_space
SPLITS = ("train", "test")
EVAL_SPLITS = ("test",)
TASK_TYPES = None
NO_PRICE_LIMIT = 1000000

_REQUIRED = ("asin", "name", "full_description", "small_description", "category", "query", "product_category")
#: the product fields that must be strings (``small_description``: a string or a list of strings)
_TEXT_FIELDS = ("name", "full_description", "category", "query", "product_category")
_log = logging.getLogger("milegpo.envs.webshop")


def _strings(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def cache_root() -> Path:
    """``$MILEGPO_CACHE/webshop`` (default ``~/.cache/milegpo/webshop``): generated catalogs and search indexes."""
    root = os.environ.get("MILEGPO_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "milegpo")
    return Path(root) / "webshop"


def data_files(data_dir: str | os.PathLike, files: str = "auto") -> tuple[Path, Path, Path, Path | None]:
    """(products, attributes, human goals, reviews or None) of a WebShop data directory.

    files: ``"small"`` (the ``_1000`` pair), ``"full"``, or ``"auto"`` (the small pair when present, as
    WebShop's and verl-agent's defaults, else the full pair).
    """
    root = Path(os.path.expandvars(os.path.expanduser(str(data_dir))))
    if not root.is_dir():
        raise EnvError(f"WebShop data directory {root} does not exist (set env option data_dir or $WEBSHOP_DATA to "
                       f"a folder with {SMALL_FILES[0]}, {SMALL_FILES[1]} and {HUMAN_FILE}, or write one with "
                       f"milegpo.envs.webshop.write_catalog)")
    if files not in ("auto", "small", "full"):
        raise ValueError(f"WebShop files must be 'auto', 'small' or 'full', got {files!r}")
    pairs = {"small": SMALL_FILES, "full": FULL_FILES}
    if files == "auto":
        files = "small" if all((root / f).is_file() for f in SMALL_FILES) else "full"
    products, attrs = (root / f for f in pairs[files])
    missing = [p.name for p in (products, attrs, root / HUMAN_FILE) if not p.is_file()]
    if missing:
        raise EnvError(f"WebShop data directory {root} lacks {', '.join(missing)} (it needs {pairs[files][0]}, "
                       f"{pairs[files][1]} and {HUMAN_FILE})")
    reviews = root / REVIEWS_FILE
    return products, attrs, root / HUMAN_FILE, (reviews if reviews.is_file() else None)


def read_json(path: Path, kind: type):
    """The JSON value of ``path``; an EnvError naming the file when it is unreadable, not JSON, or not a ``kind``."""
    try:
        with open(path, encoding="utf-8") as fh:
            value = json.load(fh)
    except json.JSONDecodeError as err:
        raise EnvError(f"WebShop file {path} is not valid JSON: {err}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise EnvError(f"WebShop file {path} cannot be read: {err}") from None
    if not isinstance(value, kind):
        raise EnvError(f"WebShop file {path} must hold a JSON {'list' if kind is list else 'object'}, "
                       f"found {type(value).__name__}")
    return value


def parse_pricing(pricing, where: str) -> tuple[list[float], str]:
    """WebShop's pricing: (``[price]`` or ``[low, high]``, the price tag shown); missing or empty -> ``[100.0]``."""
    if pricing is None or not pricing:
        return [100.0], "$100.0"
    if not isinstance(pricing, str):
        raise EnvError(f"{where}: pricing must be a string like '$12.99' or '$10.00$20.00', got {pricing!r}")
    try:
        values = [float(Decimal(re.sub(r"[^\d.]", "", part))) for part in pricing.split("$")[1:]]
    except InvalidOperation:
        raise EnvError(f"{where}: pricing {pricing!r} is not '$<number>' or '$<number>$<number>'") from None
    if not values:
        raise EnvError(f"{where}: pricing {pricing!r} has no '$<number>'")
    if len(values) == 1:
        return values, f"${values[0]}"
    return values[:2], f"${values[0]} to ${values[1]}"


def _options(custom, where: str) -> dict[str, list[str]]:
    options: dict[str, list[str]] = {}
    if not custom:
        return options
    if not isinstance(custom, dict):
        raise EnvError(f"{where}: customization_options must be an object (group -> list of values) or null")
    for name, contents in custom.items():
        if contents is None:
            continue
        try:
            options[name.lower()] = [c["value"].strip().replace("/", " | ").lower() for c in contents]
        except (TypeError, KeyError, AttributeError):
            raise EnvError(f"{where}: customization_options[{name!r}] must be a list of {{'value': str, "
                           f"'image': ...}}") from None
    return options


def _reviews(reviews_path: Path | None) -> tuple[dict, dict]:
    all_reviews: dict = {}
    all_ratings: dict = {}
    if reviews_path is None:
        return all_reviews, all_ratings
    for i, entry in enumerate(read_json(reviews_path, list)):
        try:
            all_reviews[entry["asin"]] = entry["reviews"]
            all_ratings[entry["asin"]] = entry["average_rating"]
        except (TypeError, KeyError):
            raise EnvError(f"WebShop file {reviews_path}, entry {i}: needs 'asin', 'reviews' and 'average_rating'") from None
    return all_reviews, all_ratings


def load_products(products_path: Path, attrs_path: Path, human_path: Path | None,
                  reviews_path: Path | None = None, num_products: int | None = None) -> list[dict]:
    """The products of WebShop's files, as WebShop's ``load_products`` loads them (see the module docstring)."""
    raw = read_json(products_path, list)
    attributes = read_json(attrs_path, dict)
    human = read_json(human_path, dict) if human_path is not None else {}
    all_reviews, all_ratings = _reviews(reviews_path)
    if num_products is not None:
        raw = raw[:num_products]
    seen: set[str] = set()
    products = []
    for i, p in enumerate(raw):
        where = f"WebShop file {products_path.name}, product {i}"
        if not isinstance(p, dict):
            raise EnvError(f"{where}: must be an object, got {type(p).__name__}")
        missing = [k for k in _REQUIRED if k not in p]
        if missing:
            raise EnvError(f"{where} (asin {p.get('asin')!r}): missing field(s) {', '.join(missing)}")
        asin = p["asin"]
        if not isinstance(asin, str):
            raise EnvError(f"{where}: asin must be a string, got {asin!r}")
        if asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        where = f"WebShop file {products_path.name}, product {i} (asin {asin})"
        for name in _TEXT_FIELDS:
            if not isinstance(p[name], str):
                raise EnvError(f"{where}: {name} must be a string, got {p[name]!r}")
        if not (isinstance(p["small_description"], str) or _strings(p["small_description"])):
            raise EnvError(f"{where}: small_description must be a string or a list of strings, got "
                           f"{p['small_description']!r}")
        if p.get("images") is not None and not isinstance(p["images"], list):
            raise EnvError(f"{where}: images must be a list or null, got {p['images']!r}")
        pricing, price_tag = parse_pricing(p.get("pricing"), where)
        reviews = []
        for r in all_reviews.get(asin, []):
            r = dict(r)
            if "score" not in r:
                r["score"] = r.pop("stars", 0)
            r["body"] = r.pop("review") if "review" in r else ""  # as WebShop: no 'review', no body
            reviews.append(r)
        bullets = p["small_description"]
        attrs = attributes.get(asin)
        if attrs is not None and not isinstance(attrs, dict):
            raise EnvError(f"WebShop file {attrs_path.name}, asin {asin}: must be an object with 'attributes' (a list "
                           f"of strings), got {type(attrs).__name__}")
        if isinstance(attrs, dict) and "attributes" in attrs and not _strings(attrs["attributes"]):
            raise EnvError(f"WebShop file {attrs_path.name}, asin {asin}: attributes must be a list of strings, got "
                           f"{attrs['attributes']!r}")
        images = p.get("images") or [None]
        product = {
            "asin": asin, "name": p["name"], "category": p["category"], "query": str(p["query"]).lower().strip(),
            "product_category": p["product_category"], "Title": p["name"], "Description": p["full_description"],
            "BulletPoints": bullets if isinstance(bullets, list) else [bullets], "pricing": pricing,
            "Price": price_tag, "options": _options(p.get("customization_options"), where),
            "Attributes": attrs["attributes"] if isinstance(attrs, dict) and "attributes" in attrs else ["DUMMY_ATTR"],
            "Reviews": reviews, "Rating": all_ratings.get(asin, "N.A."), "MainImage": images[0],
        }
        if asin in human:
            product["instructions"] = human[asin]
        products.append(product)
    if not products:
        raise EnvError(f"WebShop file {products_path} has no usable product")
    return products


def product_prices(products: list[dict], rng: random.Random) -> dict[str, float]:
    """WebShop's ``generate_product_prices``: the price, or a uniform draw between a range's two ends."""
    prices = {}
    for product in products:
        pricing = product["pricing"]
        prices[product["asin"]] = 100.0 if not pricing else (pricing[0] if len(pricing) == 1
                                                               else rng.uniform(*pricing[:2]))
    return prices


def price_limit(price: float, rng: random.Random) -> tuple[float, str]:
    """WebShop's goal price: (price_upper, the text appended to the instruction)."""
    price_range = [p for p in PRICE_RANGE if p > price][:4]
    if len(price_range) >= 2:
        _, price_upper = sorted(rng.sample(price_range, 2))
        return price_upper, f", and price lower than {price_upper:.2f} dollars"
    return NO_PRICE_LIMIT, ""


def human_goals(products: list[dict], prices: dict[str, float], rng: random.Random,
                dropped: Counter | None = None) -> list[dict]:
    """WebShop's ``get_human_goals``: one goal per human instruction with attributes, in product order; the
    instructions without attributes are skipped (counted in ``dropped["no attributes"]``). An instruction whose
    text is no string, or whose attributes or options are no list of strings, is an EnvError naming it."""
    goals = []
    for item in products:
        asin = item["asin"]
        instructions = item.get("instructions")
        if instructions is None:
            continue
        if not isinstance(instructions, list):
            raise EnvError(f"WebShop file {HUMAN_FILE}, asin {asin}: must be a list of instructions")
        for j, spec in enumerate(instructions):
            try:
                attributes, text, options = spec["instruction_attributes"], spec["instruction"], spec["instruction_options"]
            except (TypeError, KeyError):
                raise EnvError(f"WebShop file {HUMAN_FILE}, asin {asin}, instruction {j}: needs 'instruction', "
                               f"'instruction_attributes' and 'instruction_options'") from None
            where = f"WebShop file {HUMAN_FILE}, asin {asin}, instruction {j}"
            if not isinstance(text, str):
                raise EnvError(f"{where}: instruction must be a string, got {text!r}")
            if not _strings(attributes):
                raise EnvError(f"{where}: instruction_attributes must be a list of strings, got {attributes!r}")
            if not (_strings(options) or isinstance(options, dict) and _strings(list(options.values()))):
                raise EnvError(f"{where}: instruction_options must be a list of strings, got {options!r}")
            if len(attributes) == 0:
                if dropped is not None:
                    dropped["no attributes"] += 1
                continue
            price_upper, price_text = price_limit(prices[asin], rng)
            goals.append({"asin": asin, "category": item["category"], "query": item["query"], "name": item["name"],
                          "product_category": item["product_category"],
                          "instruction_text": text.strip(".") + price_text, "attributes": attributes,
                          "price_upper": price_upper, "goal_options": options, "weight": 1})
    return goals


@dataclass
class ShopData:
    """A loaded catalog: products (load order), by ASIN, prices, and the shuffled goals."""

    root: Path
    products: list[dict]
    prices: dict[str, float]
    goals: list[dict]
    by_asin: dict[str, dict] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_asin = {p["asin"]: p for p in self.products}


def load_shop(data_dir: str | os.PathLike, files: str = "auto", seed: int = GOAL_SEED) -> ShopData:
    """Read a WebShop data directory: products, prices and goals as WebShop builds them (see the module docstring)."""
    products_path, attrs_path, human_path, reviews_path = data_files(data_dir, files)
    products = load_products(products_path, attrs_path, human_path, reviews_path)
    rng = random.Random(seed)
    prices = product_prices(products, rng)
    dropped: Counter = Counter()
    known = {p["asin"] for p in products}
    for asin, instructions in read_json(human_path, dict).items():
        if asin not in known:
            dropped["no product"] += len(instructions) if isinstance(instructions, list) else 1
    goals = human_goals(products, prices, rng, dropped)
    if not goals:
        raise EnvError(f"WebShop data directory {products_path.parent}: {HUMAN_FILE} gives no goal for the products "
                       f"of {products_path.name}{goal_drops_text(dropped)}")
    random.Random(seed).shuffle(goals)
    shop = ShopData(products_path.parent, products, prices, goals)
    unwinnable = sum(1 for goal in goals if not own_product_wins(shop, goal))
    if unwinnable == len(goals):
        raise EnvError(f"WebShop data directory {products_path.parent}: none of its {len(goals)} goals can be won "
                       f"(no goal's own product scores 1.0 with its best options; does {products_path.name} give "
                       f"the products the customization_options their goals ask for?){goal_drops_text(dropped)}")
    report = goal_report(len(goals), dropped, unwinnable)
    if report and multiprocessing.parent_process() is None:  # once, by the main process, not by every worker
        _log.warning(f"WebShop data {products_path.parent}: {report}")
    return shop


def own_product_wins(shop: "ShopData", goal: dict) -> bool:
    """Whether the goal's own product, bought with the options that match the goal best, scores 1.0."""
    from .reward import best_options, get_reward, goal_option_values

    product = shop.by_asin[goal["asin"]]
    options = best_options(product, goal_option_values(goal))
    return get_reward(product, goal, shop.prices[goal["asin"]], options) == 1.0


def _drops(dropped: Counter) -> list[str]:
    parts = []
    if dropped["no product"]:
        parts.append(f"{dropped['no product']} instruction(s) of an ASIN with no product")
    if dropped["no attributes"]:
        parts.append(f"{dropped['no attributes']} without attributes (WebShop skips those)")
    return parts


def goal_drops_text(dropped: Counter) -> str:
    """`` (dropped: ...)`` of the instructions that gave no goal, or ""."""
    parts = _drops(dropped)
    return f" (dropped: {'; '.join(parts)})" if parts else ""


def goal_report(n_goals: int, dropped: Counter, unwinnable: int) -> str:
    """One line of what the goals lost: instructions dropped (no product, no attributes) and goals that cannot be
    won; "" when nothing was."""
    parts = [f"dropped {part}" for part in _drops(dropped)]
    if unwinnable:
        parts.append(f"{unwinnable} of them cannot be won (their own product, with its best options, does not score "
                     "1.0)")
    return f"{n_goals} goals; " + "; ".join(parts) if parts else ""


def split_goals(n_goals: int, split: str, test_goals: int = TEST_GOALS) -> range:
    """Goal indices of a split (verl-agent: ``test`` = the first ``test_goals``, ``train`` = the rest)."""
    if split == "test":
        return range(min(test_goals, n_goals))
    if split == "train":
        return range(min(test_goals, n_goals), n_goals)
    raise ValueError(f"WebShop split must be 'train' or 'test', got {split!r}")


__all__ = ["ShopData", "load_shop", "load_products", "product_prices", "human_goals", "goal_report", "own_product_wins", "price_limit", "split_goals",
           "SPLITS", "EVAL_SPLITS", "TASK_TYPES", "data_files", "parse_pricing", "read_json", "cache_root", "SMALL_FILES", "FULL_FILES", "HUMAN_FILE",
           "REVIEWS_FILE", "PRICE_RANGE", "GOAL_SEED", "TEST_GOALS", "NO_PRICE_LIMIT"]
