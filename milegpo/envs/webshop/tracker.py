"""The WebShop state tracker: the query, the results page, the product and the options selected so far.

WebShop's simple-mode item page does not show the options selected on it (an option click answers the same
page), and its results page shows no query: two situations at different distances from a purchase read
alike. Every field here is what the agent's own actions set (a search sets the query and page 1 and
clears the product and options, ``next >`` / ``< prev`` turn the page, a product link opens the product, an
option click selects that value of its group, ``back to search`` clears everything), read from the session
those actions built (:class:`~milegpo.envs.webshop.pages.Session`), so an action the world refused (a blank
search, a click on what the page does not show) leaves it as it was; nothing here can raise on an action.
The context line::

    Query: 3.4 fl oz oil free moisturizer. Results page: 2. Product: b07xyz1234. Options selected: size: 3.4 fl oz.

On the search page (nothing searched yet, or after ``back to search``) it reads ``Query: none.``.
"""

from __future__ import annotations

from typing import Protocol

from ..anchors import StateTracker
from .pages import Session


class HasSession(Protocol):
    """What the tracker reads of its environment (a :class:`~milegpo.envs.webshop.WebShopEnv`): its session."""

    session: Session


class WebShopTracker(StateTracker):
    """The WebShop tracker of one environment (see the module docstring)."""

    def __init__(self, env: HasSession) -> None:
        self.env = env

    def context(self) -> str:
        session = self.env.session
        if not session.keywords:
            return "Query: none."
        line = f"Query: {' '.join(session.keywords)}. Results page: {session.page_num}."
        if session.asin is not None:
            chosen = "; ".join(f"{group}: {value}" for group, value in sorted(session.options.items()))
            line += f" Product: {session.asin.lower()}. Options selected: {chosen or 'none'}."
        return line


__all__ = ["WebShopTracker"]
