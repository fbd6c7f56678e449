"""The pages of WebShop's text mode: what each page shows and what can be clicked on it.

WebAgentTextEnv renders an HTML page (WebShop's Jinja templates, the versions verl-agent ships)
and, in its ``"simple"`` observation mode, joins the page's visible text nodes with ``" [SEP] "``;
the clickables are the lower-cased texts of the page's buttons and product links plus the values
of its option radio buttons. :func:`render` produces the same text nodes and clickables from a
:class:`Session` without HTML (whitespace-only nodes are left out, as verl-agent's WebShop
observations show: ``WebShop [SEP] Instruction: [SEP] <instruction> [SEP] Search``):

- search: ``WebShop``, ``Instruction:``, the instruction, ``Search`` (a button that
  WebAgentTextEnv refuses to click; here it is not listed) and the search box;
- results: ``Instruction:``, the instruction, ``Back to Search``, ``Page N (Total results: M)``,
  ``< Prev`` (from page 2 on), ``Next >`` (on every page, also past the last one, as WebShop's
  template shows it), then per product its ASIN (clickable), title and price;
- item: ``Instruction:``, the instruction, ``Back to Search``, ``< Prev``, each option group's name
  and its values (clickable), the title, ``Price: ...``, ``Rating: ...``, ``Description``,
  ``Features``, ``Reviews``, ``Attributes`` (only with ``show_attrs``, as WebShop's template; off in
  verl-agent), ``Buy Now``; the selected options are not shown (WebShop's simple mode shows no
  radio state);
- sub-pages: ``Instruction:``, the instruction, ``Back to Search``, ``< Prev`` and the text:
  the description, the bullet points, the reviews (``"title"``, score, body) or the attributes
  (then the product's category, query and product_category);
- done: the thank-you page with the purchase and the score.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .search import PRODUCT_WINDOW

END_BUTTON, NEXT_PAGE, PREV_PAGE, BACK_TO_SEARCH = "Buy Now", "Next >", "< Prev", "Back to Search"
#: the sub-page buttons of an item page (WebShop's ACTION_TO_TEMPLATE keys)
SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")
SEARCH_BOX = "search[<your query>]"
SEP = " [SEP] "


@dataclass
class Session:
    """Where the shopper is: the page and what it shows (WebShop's ``user_sessions[session_id]``)."""

    page: str = "search"  # search | results | item | sub | done
    keywords: list[str] = field(default_factory=list)
    page_num: int = 1
    results: tuple[str, ...] = ()  # ASINs of the last search, best first
    asin: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    sub_page: str = ""
    score: float = 0.0

    @property
    def listed(self) -> tuple[str, ...]:
        """The ASINs the results page on screen lists (page ``page_num``, :data:`PRODUCT_WINDOW` a page)."""
        start = (self.page_num - 1) * PRODUCT_WINDOW
        return self.results[start:start + PRODUCT_WINDOW]


@dataclass
class Page:
    """A rendered page: its visible texts, clickables (lower-cased text -> what a click does) and the search box."""

    texts: list[str]
    clickables: dict[str, tuple[str, str]]  # text -> (kind, payload): button / product / option <group>
    has_search_bar: bool

    @property
    def observation(self) -> str:
        """The ``"simple"`` observation: the non-empty visible texts, stripped, joined by ``" [SEP] "``."""
        return SEP.join(t for t in (str(t).strip() for t in self.texts) if t)

    def admissible(self, search_anywhere: bool = False) -> list[str]:
        """verl-agent's list: ``search[<your query>]`` where the search box is, then ``click[x]`` per clickable."""
        head = [SEARCH_BOX] if self.has_search_bar or search_anywhere else []
        return head + [f"click[{c}]" for c in self.clickables]


def _head(instruction: str) -> list[str]:
    return ["Instruction:", instruction]


def _button(page: Page, text: str) -> None:
    page.texts.append(text)
    page.clickables[text.lower()] = ("button", text)


def render(session: Session, instruction: str, products: dict[str, dict], show_attrs: bool = False) -> Page:
    """The page ``session`` is on (``products``: ASIN -> loaded product)."""
    if session.page == "search":
        page = Page(["WebShop", *_head(instruction)], {}, True)
        page.texts.append("Search")  # the search button: WebAgentTextEnv never clicks it
        return page
    if session.page == "done":
        return _done_page(session)
    page = Page(_head(instruction), {}, False)
    _button(page, BACK_TO_SEARCH)
    if session.page == "results":
        total = len(session.results)
        page.texts.append(f"Page {session.page_num} (Total results: {total})")
        if session.page_num > 1:
            _button(page, PREV_PAGE)
        _button(page, NEXT_PAGE)
        for asin in session.listed:
            product = products[asin]
            page.texts.extend([asin, product["Title"], product["Price"]])
            page.clickables.setdefault(asin.lower(), ("product", asin))
        return page
    product = products[session.asin]
    _button(page, PREV_PAGE)
    if session.page == "item":
        options = []
        for group, values in product["options"].items():
            page.texts.append(group)
            page.texts.extend(values)
            options.extend((value, group) for value in values)
        page.texts.extend([product["Title"], f"Price: {product['Price']}", f"Rating: {product['Rating']}"])
        for sub in SUB_PAGES:
            if sub != "Attributes" or show_attrs:
                _button(page, sub)
        _button(page, END_BUTTON)
        for value, group in options:  # radio buttons come after the buttons in WebShop's clickable dict
            page.clickables[value] = ("option", group)
        return page
    page.texts.extend(_sub_page_texts(product, session.sub_page))
    return page


def _sub_page_texts(product: dict, sub_page: str) -> list[str]:
    if sub_page == "Description":
        texts = [product["Description"]]
    elif sub_page == "Features":
        texts = list(product["BulletPoints"])
    elif sub_page == "Reviews":
        texts = []
        for review in product["Reviews"]:
            texts.extend([f'"{review.get("title", "")}"', str(review.get("score", "")), str(review.get("body", ""))])
    else:
        texts = [*product["Attributes"], product["category"], product["query"], product["product_category"]]
    return [str(t) for t in texts]


def _done_page(session: Session) -> Page:
    texts = ["Thank you for shopping with us!", "Your code:", "None", "(Paste it in your MTurk interface.)",
             "Purchased", "asin", str(session.asin), "options", json.dumps(session.options, sort_keys=True),
             "Your score (min 0.0, max 1.0)", str(session.score)]
    return Page(texts, {}, False)


__all__ = ["Session", "Page", "render", "END_BUTTON", "NEXT_PAGE", "PREV_PAGE", "BACK_TO_SEARCH", "SUB_PAGES",
           "SEARCH_BOX", "SEP"]
