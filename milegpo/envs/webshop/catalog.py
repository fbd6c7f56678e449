"""The offline catalog: WebShop-format data files generated from a seed.

:func:`generate_catalog` returns the four JSON documents WebShop reads (``items_shuffle_1000.json``,
``items_ins_v2_1000.json``, ``items_human_ins.json``, ``reviews.json``, in WebShop's own formats) and
:func:`write_catalog` writes them to a folder, which :func:`milegpo.envs.webshop.data.load_shop` then
reads like the real data. Same ``(n_products, seed)``, same bytes on every machine (only Python's
``random.Random`` and integer / fixed-point formatting are involved).

What is in it:

- :data:`PRODUCT_TYPES`: 40 product types (WebShop's ``query``) over 14 categories (WebShop's
  ``category``, with an Amazon-style ``product_category`` path), each with its own attribute
  vocabulary, option groups (colour, size, pack, scent, flavour, capacity...), price band, wording.
- Products come in *families* of one type: a base product and near misses of it, so that a goal
  needs searching and comparing: the same type with one attribute swapped for another (nowhere in
  its title, bullet points or description), the same type whose option group lacks the value the
  goal asks for (checked with the reward's own fuzzy matcher), the same product above the goal's
  price (at least 41 dollars dearer than the base, and WebShop's price limit is at most 40 above
  the price), and a few other products of the type. Every product has a brand, a title that names
  its attributes (as Amazon titles do), 3-5 bullet points, a description, 0-3 option groups, a
  single price or a price range (``"$a$b"``), 0-3 reviews.
- Human-style instructions (``items_human_ins.json``): 2-4 for the base product of each family, one
  for half of its attribute and option near misses (the base is then theirs), phrased like WebShop's
  crowd-sourced ones ("i'm looking for a sulfate free shampoo for dry hair in 16 fl oz"), with the
  attributes and option values they mention as ``instruction_attributes`` / ``instruction_options``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .data import HUMAN_FILE, REVIEWS_FILE, SMALL_FILES
from .reward import fuzzy_match, normalize_color

#: bump when the generator's output changes (it is part of the embedded catalog's cache key)
CATALOG_VERSION = 1
DEFAULT_PRODUCTS = 3000
DEFAULT_SEED = 0

_COLORS = ("Black|White|Navy Blue|Grey|Red|Forest Green|Beige|Pink|Brown|Silver|Burgundy|Olive|Teal|Ivory|"
           "Charcoal|Khaki|Sky Blue|Purple|Mustard Yellow|Coral")
_CLOTH_SIZES = "X-Small|Small|Medium|Large|X-Large|XX-Large|3X-Large"
_SHOE_SIZES = "6|6.5|7|7.5|8|8.5|9|9.5|10|10.5|11|12|13"
_PACKS = "Pack of 1|Pack of 2|Pack of 3|Pack of 4|Pack of 6|Pack of 12|Pack of 24"


@dataclass(frozen=True)
class ProductType:
    """One kind of product: WebShop's ``category`` / ``product_category`` / ``query`` and the words of its listings."""

    category: str
    path: str
    query: str
    nouns: tuple[str, ...]
    attributes: tuple[str, ...]
    options: tuple[tuple[str, tuple[str, ...]], ...]
    price: tuple[float, float]
    uses: tuple[str, ...]


def _ptype(category, path, query, nouns, attributes, options, price, uses) -> ProductType:
    return ProductType(category, path, query, tuple(nouns.split("|")), tuple(attributes.split("|")),
                       tuple((g, tuple(v.split("|"))) for g, v in options.items()), price, tuple(uses.split("|")))


#: the product types of the catalog (category, product_category path, query, nouns, attributes, options, price band, uses)
PRODUCT_TYPES = (
    _ptype("beauty", "Beauty & Personal Care › Hair Care › Shampoo & Conditioner › Shampoos", "shampoo",
           "Shampoo|Daily Shampoo|Clarifying Shampoo",
           "sulfate free|paraben free|tea tree|natural ingredients|dry hair|color safe|cruelty free|argan oil|"
           "hair growth|dandruff control",
           {"size": "8 Fl Oz|12 Fl Oz|16 Fl Oz|33.8 Fl Oz|16 Fl Oz (Pack of 2)", "scent": "Tea Tree|Lavender|Coconut|"
            "Unscented|Citrus|Eucalyptus Mint"}, (6, 45), "daily washing|oily scalp|curly hair|the whole family"),
    _ptype("beauty", "Beauty & Personal Care › Skin Care › Face › Creams & Moisturizers › Face Moisturizers",
           "face moisturizer", "Face Moisturizer|Facial Cream|Day Cream",
           "hyaluronic acid|sensitive skin|fragrance free|oil free|anti aging|vitamin c|non comedogenic|spf 30|"
           "dermatologist tested|long lasting",
           {"size": "1 Fl Oz|1.7 Fl Oz|2.5 Fl Oz|3.4 Fl Oz"}, (9, 60), "morning routines|dry winter skin|under makeup"),
    _ptype("beauty", "Beauty & Personal Care › Makeup › Eyes › Mascara", "mascara", "Mascara|Lengthening Mascara",
           "waterproof|long lasting|cruelty free|smudge proof|volumizing|easy to remove|vegan|sensitive eyes",
           {"color": "Black|Brown|Black Brown|Navy Blue|Plum", "size": "Pack of 1|Pack of 2|Pack of 3"}, (5, 30),
           "everyday looks|special events|long days"),
    _ptype("electronics", "Electronics › Headphones, Earbuds & Accessories › Headphones & Earbuds › Earbud Headphones",
           "wireless earbuds", "Wireless Earbuds|True Wireless Earbuds|Bluetooth Earbuds",
           "noise cancelling|bluetooth 5.3|long battery life|water resistant|fast charging|built in microphone|"
           "touch control|hands free|deep bass",
           {"color": "Black|White|Navy Blue|Grey|Pink|Forest Green"}, (18, 160), "workouts|commuting|calls at work"),
    _ptype("electronics", "Electronics › Computers & Accessories › Computer Accessories & Peripherals › Keyboards, Mice"
           " & Accessories › Mice", "wireless mouse", "Wireless Mouse|Ergonomic Mouse|Silent Mouse",
           "ergonomic design|rechargeable battery|silent click|usb receiver|adjustable dpi|plug and play|"
           "bluetooth 5.0|lightweight",
           {"color": "Black|White|Grey|Sky Blue|Pink|Red"}, (9, 70), "laptops|office work|travel"),
    _ptype("electronics", "Electronics › Cell Phones & Accessories › Accessories › Chargers & Power Adapters",
           "phone charger", "USB C Charger|Wall Charger|Fast Charger",
           "fast charging|usb c|compact design|overcharge protection|dual port|foldable plug|gan technology|"
           "universal compatibility",
           {"wattage": "20W|30W|45W|65W|100W", "color": "White|Black|Grey"}, (10, 65), "phones|tablets|travel"),
    _ptype("electronics", "Electronics › Portable Audio & Video › Portable Speakers & Docks › Portable Bluetooth "
           "Speakers", "bluetooth speaker", "Bluetooth Speaker|Portable Speaker|Outdoor Speaker",
           "waterproof|long battery life|stereo sound|deep bass|built in microphone|dustproof|shockproof|party lights",
           {"color": "Black|Navy Blue|Red|Teal|Grey|Olive"}, (20, 180), "the beach|camping trips|the shower"),
    _ptype("fashion", "Clothing, Shoes & Jewelry › Men › Clothing › Shirts › T-Shirts", "men's t-shirts",
           "T-Shirt|Crew Neck T-Shirt|Graphic Tee",
           "short sleeve|cotton|moisture wicking|relaxed fit|machine wash|slim fit|crew neck|tagless|quick dry",
           {"color": _COLORS, "size": _CLOTH_SIZES}, (8, 40), "the gym|casual weekends|layering"),
    _ptype("fashion", "Clothing, Shoes & Jewelry › Women › Clothing › Dresses › Casual", "women's dresses",
           "Summer Dress|Maxi Dress|Midi Dress|Wrap Dress",
           "short sleeve|v neck|high waist|floral print|with pockets|machine wash|loose fit|long sleeve|a line",
           {"color": _COLORS, "size": _CLOTH_SIZES}, (18, 75), "the beach|parties|work"),
    _ptype("fashion", "Clothing, Shoes & Jewelry › Men › Clothing › Jeans", "men's jeans",
           "Jeans|Straight Leg Jeans|Slim Jeans",
           "relaxed fit|stretch denim|button closure|machine wash|classic fit|slim fit|five pocket|zipper fly",
           {"color": "Dark Wash|Light Wash|Black|Medium Stonewash|Grey", "size": "30W x 30L|32W x 30L|32W x 32L|"
            "34W x 30L|34W x 32L|36W x 32L|38W x 30L"}, (20, 70), "work|everyday wear"),
    _ptype("fashion", "Clothing, Shoes & Jewelry › Women › Accessories › Scarves & Wraps", "women's scarves",
           "Scarf|Winter Scarf|Infinity Scarf", "soft warm|lightweight|cashmere feel|plaid pattern|oversized|"
           "hand wash|fringe trim|knit",
           {"color": _COLORS}, (9, 35), "cold weather|gifts|travel"),
    _ptype("shoes", "Clothing, Shoes & Jewelry › Men › Shoes › Athletic › Running", "men's running shoes",
           "Running Shoes|Road Running Shoe|Trail Running Shoes", "non slip|breathable mesh|lightweight|arch support|"
           "cushioned sole|rubber sole|wide toe box|shock absorbing",
           {"color": "Black|White|Grey|Navy Blue|Red|Black White|Olive", "size": _SHOE_SIZES}, (30, 140),
           "marathon training|the gym|walking"),
    _ptype("shoes", "Clothing, Shoes & Jewelry › Women › Shoes › Sandals › Flat Sandals", "women's sandals",
           "Flat Sandals|Slide Sandals|Strappy Sandals", "open toe|arch support|memory foam|ankle strap|non slip|"
           "waterproof|soft footbed|adjustable buckle",
           {"color": "Black|Tan|White|Brown|Gold|Silver|Pink", "size": _SHOE_SIZES}, (15, 70),
           "summer days|the pool|vacations"),
    _ptype("shoes", "Clothing, Shoes & Jewelry › Women › Shoes › Boots › Ankle & Bootie", "women's boots",
           "Ankle Boots|Chelsea Boots|Winter Boots", "faux leather|side zipper|block heel|water resistant|fur lined|"
           "non slip|pointed toe|lace up",
           {"color": "Black|Brown|Taupe|Grey|Burgundy|Tan", "size": _SHOE_SIZES}, (35, 150), "fall|snowy days|work"),
    _ptype("food", "Grocery & Gourmet Food › Snack Foods › Chips & Crisps", "snack chips",
           "Potato Chips|Kettle Chips|Veggie Chips", "gluten free|non gmo|low sodium|kosher|no artificial flavors|"
           "vegan|baked|family size",
           {"flavor name": "Sea Salt|Barbecue|Sour Cream & Onion|Jalapeno|Salt & Vinegar|Cheddar",
            "size": "5 Ounce (Pack of 4)|7.5 Ounce (Pack of 6)|1 Ounce (Pack of 24)|8 Ounce (Pack of 12)"}, (6, 40),
           "lunch boxes|parties|road trips"),
    _ptype("food", "Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Coffee › Ground Coffee",
           "ground coffee", "Ground Coffee|Medium Roast Coffee|Dark Roast Coffee", "fair trade|organic|100% arabica|"
           "low acid|decaf|single origin|kosher|whole bean",
           {"flavor name": "Breakfast Blend|French Roast|Colombian|Hazelnut|Vanilla|Espresso",
            "size": "12 Ounce|24 Ounce|2 Pound|12 Ounce (Pack of 3)"}, (8, 55), "drip coffee makers|french press|mornings"),
    _ptype("food", "Grocery & Gourmet Food › Pantry Staples › Nut Butters & Fruit Spreads › Peanut Butter",
           "peanut butter", "Peanut Butter|Creamy Peanut Butter|Natural Peanut Butter", "no sugar added|gluten free|"
           "non gmo|high protein|keto friendly|palm oil free|organic|low sodium",
           {"flavor name": "Creamy|Crunchy|Honey Roasted|Dark Chocolate", "size": "16 Ounce|28 Ounce|40 Ounce|"
            "16 Ounce (Pack of 2)"}, (5, 30), "sandwiches|smoothies|baking"),
    _ptype("food", "Grocery & Gourmet Food › Herbs, Spices & Seasonings › Single Herbs & Spices", "spices",
           "Ground Cinnamon|Smoked Paprika|Garlic Powder|Ground Turmeric", "organic|non gmo|kosher|gluten free|"
           "non irradiated|salt free|no fillers|resealable bag",
           {"size": "2.5 Ounce|4 Ounce|8 Ounce|1 Pound"}, (4, 25), "baking|curries|grilling"),
    _ptype("furniture", "Home & Kitchen › Furniture › Living Room Furniture › Tables › Coffee Tables", "coffee table",
           "Coffee Table|Lift Top Coffee Table|Round Coffee Table", "solid wood|easy assembly|storage shelf|"
           "industrial style|mid century|tempered glass|metal frame|rustic finish",
           {"color": "Walnut|Black|White|Rustic Brown|Grey Oak|Espresso"}, (60, 320), "living rooms|small apartments"),
    _ptype("furniture", "Home & Kitchen › Furniture › Home Office Furniture › Home Office Chairs › Desk Chairs",
           "office chair", "Office Chair|Ergonomic Desk Chair|Mesh Task Chair", "lumbar support|adjustable height|"
           "breathable mesh|padded armrests|swivel|easy assembly|high back|rolling wheels",
           {"color": "Black|Grey|White|Blue|Pink|Brown"}, (70, 380), "home offices|gaming|long work days"),
    _ptype("furniture", "Home & Kitchen › Furniture › Bedroom Furniture › Nightstands", "nightstand",
           "Nightstand|Bedside Table|End Table", "with drawer|charging station|easy assembly|solid wood|open shelf|"
           "modern design|small space|metal legs",
           {"color": "White|Black|Rustic Brown|Natural|Grey|Walnut", "size": "Set of 1|Set of 2"}, (35, 190),
           "bedrooms|guest rooms|dorms"),
    _ptype("home", "Home & Kitchen › Bedding › Sheets & Pillowcases › Sheet & Pillowcase Sets", "bed sheets",
           "Sheet Set|Bed Sheets|Microfiber Sheet Set", "deep pocket|breathable|wrinkle free|machine washable|"
           "egyptian cotton|cooling|hypoallergenic|fade resistant",
           {"color": _COLORS, "size": "Twin|Full|Queen|King|California King"}, (20, 120), "hot sleepers|guest beds"),
    _ptype("home", "Home & Kitchen › Kitchen & Dining › Cookware › Pots & Pans › Skillets", "frying pan",
           "Frying Pan|Nonstick Skillet|Cast Iron Skillet", "non stick|dishwasher safe|induction compatible|pfoa free|"
           "oven safe|stay cool handle|stainless steel|even heating",
           {"size": "8 Inch|10 Inch|12 Inch|3 Piece Set", "color": "Black|Grey|Red|Copper"}, (18, 110),
           "eggs|searing steaks|everyday cooking"),
    _ptype("home", "Home & Kitchen › Kitchen & Dining › Storage & Organization › Food Storage › Food Containers",
           "food storage containers", "Food Storage Containers|Glass Meal Prep Containers|Airtight Containers",
           "bpa free|leak proof|microwave safe|dishwasher safe|freezer safe|stackable|airtight lids|glass",
           {"size": "10 Pack|18 Pack|24 Piece Set|36 Piece Set", "color": "Clear|Grey|Blue|Green"}, (15, 60),
           "meal prep|leftovers|pantries"),
    _ptype("home", "Home & Kitchen › Home Décor › Candles & Holders › Candles › Jar Candles", "scented candles",
           "Scented Candle|Jar Candle|Soy Candle", "soy wax|long lasting|natural ingredients|lead free wick|"
           "aromatherapy|hand poured|clean burning",
           {"scent": "Lavender|Vanilla|Sandalwood|Eucalyptus Mint|Fresh Linen|Pumpkin Spice", "size": "8 Ounce|"
            "12 Ounce|16 Ounce|Pack of 3"}, (10, 50), "relaxing baths|gifts|living rooms"),
    _ptype("sports", "Sports & Outdoors › Exercise & Fitness › Yoga › Mats", "yoga mat", "Yoga Mat|Exercise Mat|"
           "Non Slip Yoga Mat", "non slip|extra thick|eco friendly|carrying strap|lightweight|sweat resistant|"
           "tpe material|alignment lines",
           {"color": "Purple|Black|Teal|Pink|Grey|Navy Blue|Olive", "size": "1/4 Inch|1/3 Inch|1/2 Inch"}, (15, 80),
           "hot yoga|pilates|home workouts"),
    _ptype("sports", "Sports & Outdoors › Outdoor Recreation › Camping & Hiking › Hydration › Water Bottles",
           "water bottle", "Water Bottle|Insulated Water Bottle|Sports Bottle", "bpa free|leak proof|vacuum insulated|"
           "stainless steel|dishwasher safe|wide mouth|straw lid|keeps cold 24 hours",
           {"color": "Black|White|Teal|Pink|Navy Blue|Forest Green|Coral", "capacity": "18 Ounce|24 Ounce|32 Ounce|"
            "40 Ounce|64 Ounce"}, (10, 45), "hiking|the gym|school"),
    _ptype("sports", "Sports & Outdoors › Outdoor Recreation › Camping & Hiking › Tents & Shelters › Backpacking "
           "Tents", "camping tent", "Camping Tent|Backpacking Tent|Dome Tent", "waterproof|easy setup|lightweight|"
           "rain fly|mesh windows|carry bag|double layer|uv protection",
           {"size": "2 Person|3 Person|4 Person|6 Person", "color": "Green|Grey|Orange|Blue"}, (40, 260),
           "backpacking|family camping|festivals"),
    _ptype("toys", "Toys & Games › Building Toys › Building Sets", "building blocks", "Building Blocks Set|"
           "Building Bricks Kit|Construction Set", "compatible with major brands|bpa free|stem learning|storage box|"
           "ages 6 and up|creative play|gift box|non toxic",
           {"size": "300 Pieces|500 Pieces|1000 Pieces|1500 Pieces"}, (15, 90), "birthdays|classrooms|rainy days"),
    _ptype("toys", "Toys & Games › Puzzles › Jigsaw Puzzles", "jigsaw puzzle", "Jigsaw Puzzle|Puzzle for Adults",
           "1000 pieces|thick pieces|poster included|random cut|family game|landscape art|glare free|eco friendly",
           {"size": "500 Pieces|1000 Pieces|1500 Pieces|2000 Pieces"}, (10, 40), "family nights|gifts|relaxation"),
    _ptype("toys", "Toys & Games › Stuffed Animals & Plush Toys › Stuffed Animals & Teddy Bears", "stuffed animal",
           "Plush Toy|Stuffed Animal|Teddy Bear", "super soft|machine washable|hypoallergenic|kids gift|"
           "embroidered eyes|huggable|safe for toddlers",
           {"color": "Brown|White|Pink|Grey|Beige", "size": "8 Inch|12 Inch|18 Inch|24 Inch"}, (8, 45),
           "bedtime|baby showers|valentines"),
    _ptype("pets", "Pet Supplies › Dogs › Beds & Furniture › Beds", "dog bed", "Dog Bed|Orthopedic Dog Bed|"
           "Calming Dog Bed", "machine washable|non slip bottom|orthopedic foam|removable cover|waterproof liner|"
           "raised rim|chew resistant",
           {"color": "Grey|Brown|Navy Blue|Beige|Black", "size": "Small|Medium|Large|X-Large|Jumbo"}, (20, 130),
           "senior dogs|crates|puppies"),
    _ptype("pets", "Pet Supplies › Cats › Litter & Housebreaking › Litter", "cat litter", "Cat Litter|Clumping "
           "Cat Litter|Clay Cat Litter", "odor control|low dust|clumping|unscented|multi cat|natural ingredients|"
           "flushable|lightweight",
           {"size": "10 Pound|20 Pound|25 Pound|40 Pound"}, (9, 45), "multi cat homes|apartments"),
    _ptype("pets", "Pet Supplies › Dogs › Toys › Chew Toys", "dog chew toy", "Dog Chew Toy|Squeaky Dog Toy|"
           "Rope Toy", "durable|non toxic|for aggressive chewers|dental care|squeaky|natural rubber|interactive",
           {"size": "Small|Medium|Large|Pack of 3|Pack of 6"}, (6, 35), "puppies|large breeds|teething"),
    _ptype("office", "Office Products › Office & School Supplies › Writing & Correction Supplies › Pens & Refills "
           "› Gel Ink Rollerball Pens", "gel pens", "Gel Pens|Retractable Gel Pens|Fine Point Pens",
           "quick drying|fine point|smooth writing|retractable|assorted colors|comfort grip|refillable|smear proof",
           {"color": "Black|Blue|Red|Assorted", "size": _PACKS}, (5, 30), "journaling|school|the office"),
    _ptype("office", "Office Products › Office & School Supplies › Paper › Notebooks & Writing Pads", "notebook",
           "Notebook|Spiral Notebook|Hardcover Journal", "college ruled|hardcover|lay flat|thick paper|elastic closure|"
           "inner pocket|dot grid|numbered pages",
           {"color": "Black|Navy Blue|Burgundy|Forest Green|Grey|Pink", "size": "A5|B5|Letter|Pack of 3"}, (6, 35),
           "students|bullet journals|meetings"),
    _ptype("health", "Health & Household › Vitamins, Minerals & Supplements › Vitamins › Multivitamins",
           "multivitamin", "Multivitamin|Daily Multivitamin|Gummy Vitamins", "gluten free|non gmo|vegan|sugar free|"
           "easy to swallow|third party tested|immune support|dairy free",
           {"size": "60 Count|90 Count|120 Count|180 Count", "flavor name": "Unflavored|Berry|Orange|Mixed Fruit"},
           (8, 50), "adults|women|men over 50"),
    _ptype("health", "Health & Household › Household Supplies › Laundry › Laundry Detergent", "laundry detergent",
           "Laundry Detergent|Liquid Laundry Detergent|Laundry Pods", "hypoallergenic|plant based|he compatible|"
           "fragrance free|concentrated|septic safe|cold water|stain remover",
           {"scent": "Free & Clear|Lavender|Fresh Linen|Citrus", "size": "50 Loads|100 Loads|64 Fl Oz|"
            "Pack of 2"}, (8, 45), "sensitive skin|baby clothes|large families"),
    _ptype("automotive", "Automotive › Interior Accessories › Seat Covers & Accessories › Seat Covers",
           "car seat covers", "Car Seat Covers|Front Seat Cover Set|Universal Seat Covers", "waterproof|universal fit|"
           "airbag compatible|breathable|easy install|faux leather|washable|non slip backing",
           {"color": "Black|Grey|Beige|Black Red|Blue", "size": "Front Pair|Full Set"}, (20, 120), "cars|suvs|trucks"),
    _ptype("tools", "Tools & Home Improvement › Power & Hand Tools › Power Tools › Drills › Drill Drivers",
           "cordless drill", "Cordless Drill|Drill Driver|Power Drill", "lithium ion battery|variable speed|led light|"
           "keyless chuck|brushless motor|fast charger|carrying case|compact",
           {"size": "12V|20V|20V with 2 Batteries", "color": "Black|Yellow|Red|Blue"}, (35, 200),
           "home repairs|furniture assembly|diy projects"),
)

_DESCRIPTORS = ("Premium", "Classic", "Everyday", "Professional", "Deluxe", "Essential", "Original", "Signature",
                "Modern", "Upgraded", "Advanced", "Select")
_SYLLABLES = ("lu", "mo", "ra", "vel", "trix", "zen", "ka", "no", "vi", "ta", "sol", "bri", "qu", "ex", "ar", "lo",
              "mi", "dex", "pho", "ny", "sa", "ro", "ki", "vo", "ga", "lin", "ter", "ion", "ba", "do")
_OPENERS = ("i need", "i am looking for", "i'm looking for", "i want", "find me", "i would like", "looking for",
            "can you find me", "i'd like to buy", "i want to buy", "search for", "get me")
_REVIEW_TITLES = (("Love it", 5), ("Works as described", 4), ("Great value", 5), ("Pretty good", 4), ("It's okay", 3),
                  ("Not what I expected", 2), ("Would buy again", 5), ("Decent for the price", 3))
_REVIEW_BODIES = ("Exactly what I was looking for.", "Quality is better than I expected for the price.",
                  "Arrived quickly and well packaged.", "Does the job, nothing special.",
                  "I have bought this twice now.", "A little smaller than I thought, but fine.")


def _brand(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.choice((2, 2, 3)))).capitalize()


def _title_case(text: str) -> str:
    return " ".join(w if any(c.isdigit() for c in w) else w[:1].upper() + w[1:] for w in text.split())


def _asin(rng: random.Random, used: set[str]) -> str:
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    while True:
        asin = "B0" + "".join(rng.choice(alphabet) for _ in range(8))
        if asin not in used:
            used.add(asin)
            return asin


@dataclass
class _Spec:
    """A product before it is written out: what the family step decides."""

    ptype: ProductType
    brand: str
    noun: str
    attributes: list[str]
    options: dict[str, list[str]]
    low: float
    high: float | None = None
    goals: int = 0  # how many human instructions it gets


def _round_price(value: float) -> float:
    return max(1.99, int(value) + 0.99 if value % 1 > 0.5 else int(value) + 0.49)


def _base_spec(rng: random.Random, ptype: ProductType) -> _Spec:
    attributes = rng.sample(ptype.attributes, rng.randint(2, min(4, len(ptype.attributes))))
    groups = list(ptype.options)
    options = {}
    for name, values in rng.sample(groups, rng.randint(min(1, len(groups)), len(groups))):
        options[name] = rng.sample(values, rng.randint(2, min(5, len(values))))
    low = _round_price(rng.uniform(*ptype.price))
    high = _round_price(low * rng.uniform(1.2, 1.8)) if rng.random() < 0.15 else None
    return _Spec(ptype, _brand(rng), rng.choice(ptype.nouns), attributes, options, low, high)


def _variants(rng: random.Random, base: _Spec) -> list[_Spec]:
    """The near misses of a base product (see the module docstring), then 0-2 other products of its type."""
    ptype, out = base.ptype, []
    spare = [a for a in ptype.attributes if a not in base.attributes]
    if spare:  # same type, one attribute swapped
        attrs = list(base.attributes)
        attrs[0] = rng.choice(spare)
        out.append(_Spec(ptype, _brand(rng), rng.choice(ptype.nouns), attrs, dict(base.options),
                         _round_price(base.low * rng.uniform(0.8, 1.0))))
    if base.options:  # same type, the asked-for value of an option group missing
        group = next(iter(base.options))
        wanted = [normalize_color(v.lower()) for v in base.options[group]]
        pool = [v for v in dict(ptype.options)[group]
                if not any(fuzzy_match(normalize_color(v.lower()), w) for w in wanted)]
        options = dict(base.options)
        if pool:
            options[group] = rng.sample(pool, min(len(pool), rng.randint(2, 4)))
        else:
            del options[group]
        out.append(_Spec(ptype, _brand(rng), rng.choice(ptype.nouns), list(base.attributes), options,
                         _round_price(base.low * rng.uniform(0.85, 1.0))))
    dearer = (base.high or base.low) + rng.uniform(45, 90)  # above any price limit of a goal on the base
    out.append(_Spec(ptype, _brand(rng), base.noun, list(base.attributes), dict(base.options), _round_price(dearer)))
    for _ in range(rng.randint(0, 2)):
        out.append(_base_spec(rng, ptype))
    # the base product is the family's goal product; the first two near misses are goal products half of the
    # time (the base is then their near miss), the dearer twin and the others never (nothing dearer follows them)
    base.goals = rng.randint(2, 4)
    for near in out[:2]:
        near.goals = int(rng.random() < 0.5)
    return out


def _title(rng: random.Random, spec: _Spec) -> str:
    attrs = [_title_case(a) for a in spec.attributes]
    lead, rest = attrs[: rng.randint(1, 2)], attrs[2:] if len(attrs) > 2 else []
    if len(lead) < len(attrs) and not rest:
        lead, rest = attrs[:1], attrs[1:]
    title = f"{spec.brand} {rng.choice(_DESCRIPTORS)} {' '.join(lead)} {spec.noun}"
    if rest:
        title += f" with {', '.join(rest[:-1]) + ' and ' if len(rest) > 1 else ''}{rest[-1]}"
    return f"{title} for {_title_case(rng.choice(spec.ptype.uses))}" if rng.random() < 0.5 else title


def _texts(rng: random.Random, spec: _Spec) -> tuple[str, list[str]]:
    noun = spec.noun.lower()
    attrs = spec.attributes
    listing = (", ".join(attrs[:-1]) + " and " if len(attrs) > 1 else "") + attrs[-1]
    description = (f"The {spec.brand} {noun} is made for {rng.choice(spec.ptype.uses)}. Key features: {listing}. "
                   + rng.choice(("Backed by a one year warranty.", "Ships in recyclable packaging.",
                                 "Designed and tested by our own team.", "A customer favorite since launch.")))
    bullets = [f"{a.upper()}: " + rng.choice((f"one of the reasons customers choose this {noun}.",
                                               f"tested by our team on every {noun} we ship.",
                                               "just what you asked for, every time.")) for a in attrs]
    bullets.append(f"GREAT FOR {rng.choice(spec.ptype.uses).upper()}: a {noun} you can rely on every day.")
    bullets.append(rng.choice(("SATISFACTION GUARANTEE: contact us for a replacement or refund.",
                               f"WHAT YOU GET: one {noun} and a quick start guide.")))
    rng.shuffle(bullets)
    return description, bullets[: rng.randint(3, 5)]


def _instruction(rng: random.Random, spec: _Spec, options: dict[str, list[str]]) -> dict:
    """One human-style instruction for a product: the attributes and option values it asks for.

    It always asks for the first attribute and (85 % of the time) a value of the first option group:
    what the family's near misses lack (see :func:`_variants`)."""
    asked = [spec.attributes[0], *rng.sample(spec.attributes[1:], rng.randint(0, min(2, len(spec.attributes) - 1)))]
    groups = list(options.items())
    picked = {g: rng.choice(v) for i, (g, v) in enumerate(groups) if rng.random() < (0.85 if i == 0 else 0.5)}
    noun = spec.noun.lower() if rng.random() < 0.5 else spec.ptype.query
    plural = noun.endswith("s") and not noun.endswith("ss")
    article = "" if plural or asked[0].startswith("a ") else rng.choice(("a ", "a ", ""))
    if len(asked) == 1:
        text = f"{rng.choice(_OPENERS)} {article}{asked[0]} {noun}"
    elif rng.random() < 0.5:
        text = f"{rng.choice(_OPENERS)} {article}{' and '.join(asked[:2])} {noun}"
        if len(asked) > 2:
            text += f" that is {asked[2]}"
    else:
        text = f"{rng.choice(_OPENERS)} {article}{asked[0]} {noun} that is {' and '.join(asked[1:])}"
    clauses = []
    for group, value in picked.items():
        value = value.lower()
        if group == "color":
            clauses.append(rng.choice((f"in {value}", f"in {value} color", f"and the color should be {value}")))
        elif group == "size":
            clauses.append(rng.choice((f"in size {value}", f"in {value}", f"and size {value}")))
        elif group == "flavor name":
            clauses.append(rng.choice((f"in {value} flavor", f"with {value} flavor")))
        else:
            clauses.append(rng.choice((f"in {value}", f"with {group} {value}")))
    for i, clause in enumerate(clauses):
        text += " " + clause if i == 0 else (", " if clause.startswith("and ") else " and ") + clause
    return {"instruction": text + rng.choice(("", ".", "")), "instruction_attributes": asked,
            "instruction_options": [v.strip().replace("/", " | ").lower() for v in picked.values()]}


def generate_catalog(n_products: int = DEFAULT_PRODUCTS, seed: int = DEFAULT_SEED) -> dict[str, list | dict]:
    """The catalog's four WebShop files as JSON-ready values: ``{file name: content}`` (see the module docstring).

    n_products: how many products (>= 10); seed: any int. Deterministic in (n_products, seed).
    """
    if int(n_products) < 10:
        raise ValueError(f"generate_catalog: n_products must be >= 10, got {n_products}")
    rng = random.Random(f"milegpo-webshop-catalog-{CATALOG_VERSION}-{int(seed)}")
    specs: list[_Spec] = []
    while len(specs) < n_products:
        base = _base_spec(rng, rng.choice(PRODUCT_TYPES))
        specs.extend([base, *_variants(rng, base)])
    specs = specs[:n_products]
    order = list(range(len(specs)))
    rng.shuffle(order)  # WebShop's items_shuffle is shuffled; families are not contiguous
    used: set[str] = set()
    products, attributes, human, reviews = [], {}, {}, []
    for k in order:
        spec = specs[k]
        asin = _asin(rng, used)
        title = _title(rng, spec)
        description, bullets = _texts(rng, spec)
        pricing = f"${spec.low:.2f}" + (f"${spec.high:.2f}" if spec.high else "")
        custom = {g: [{"value": v, "image": None} for v in values] for g, values in spec.options.items()}
        products.append({"asin": asin, "name": title, "full_description": description, "small_description": bullets,
                         "pricing": pricing, "customization_options": custom or None, "category": spec.ptype.category,
                         "query": spec.ptype.query, "product_category": spec.ptype.path,
                         "images": [f"https://images.invalid/{asin}.jpg"], "brand": spec.brand})
        attributes[asin] = {"attributes": list(spec.attributes), "instruction": None, "instruction_attributes": None}
        if spec.goals:
            human[asin] = [_instruction(rng, spec, spec.options) for _ in range(spec.goals)]
        picks = rng.sample(_REVIEW_TITLES, rng.randint(0, 3))
        reviews.append({"asin": asin, "average_rating": round(sum(s for _, s in picks) / len(picks), 1) if picks
                        else "N.A.", "reviews": [{"title": t, "stars": s, "review": rng.choice(_REVIEW_BODIES)}
                                                 for t, s in picks]})
    return {SMALL_FILES[0]: products, SMALL_FILES[1]: attributes, HUMAN_FILE: human, REVIEWS_FILE: reviews}


def write_catalog(folder: str | os.PathLike, n_products: int = DEFAULT_PRODUCTS, seed: int = DEFAULT_SEED) -> Path:
    """Write the catalog of ``(n_products, seed)`` into ``folder`` (created; files replaced atomically). Returns it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in generate_catalog(n_products, seed).items():
        fd, tmp = tempfile.mkstemp(prefix=f".{name}-", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(content, fh, ensure_ascii=False, sort_keys=True)
        os.replace(tmp, folder / name)
    return folder


def embedded_catalog(n_products: int = DEFAULT_PRODUCTS, seed: int = DEFAULT_SEED, cache: Path | None = None) -> Path:
    """The folder of the embedded catalog ``(n_products, seed)`` in the cache (``<cache>/webshop/catalog/``, keyed
    by the generator's version and source), written on first use (atomically)."""
    from .data import cache_root

    root = Path(cache) if cache is not None else cache_root() / "catalog"
    # the generator's own source is part of the key: an edited generator never reuses an old catalog
    code = hashlib.blake2b(Path(__file__).read_bytes(), digest_size=4).hexdigest()
    folder = root / f"v{CATALOG_VERSION}-{code}-n{int(n_products)}-s{int(seed)}"
    if all((folder / f).is_file() for f in (*SMALL_FILES, HUMAN_FILE, REVIEWS_FILE)):
        return folder
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=root))
    try:
        write_catalog(tmp, n_products, seed)
        os.replace(tmp, folder)
    except OSError:
        if not (folder / HUMAN_FILE).is_file():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def catalog_digest(n_products: int = DEFAULT_PRODUCTS, seed: int = DEFAULT_SEED) -> str:
    """blake2b-128 of the catalog's files as written (to check that two machines generate the same bytes)."""
    h = hashlib.blake2b(digest_size=16)
    for name, content in sorted(generate_catalog(n_products, seed).items()):
        h.update(name.encode() + b"\x00" + json.dumps(content, ensure_ascii=False, sort_keys=True).encode())
    return h.hexdigest()


__all__ = ["generate_catalog", "write_catalog", "embedded_catalog", "catalog_digest", "PRODUCT_TYPES", "ProductType",
           "CATALOG_VERSION", "DEFAULT_PRODUCTS", "DEFAULT_SEED"]
