"""WebShop's milestones: BEACON's four page phases of a purchase, passed in order.

BEACON (``ZJU-REAL/BEACON``, its WebShop milestone detector) marks a step as a milestone when it completes the
phase the episode is in; the phases come one after the other, each at most once:

1. **search**: a results page (of a search, or turned to) that lists a product that can meet the goal;
2. **detail**: a click that opens a product that can meet the goal;
3. **options**: the option click that completes the goal's options (every goal option matched by a value
   clicked since the detail phase was passed; skipped, with no milestone of its own, when the goal asks no
   option);
4. **purchase**: ``buy now`` of a purchase that meets the goal's attributes, options and price.

A product *can meet the goal* when it holds every goal attribute, offers a value for every goal option, and its
price is within the goal's limit. The tests are this world's own, the terms of WebShop's reward
(:mod:`milegpo.envs.webshop.reward`): an attribute is found as ``get_attribute_reward`` finds it, an option
value matches a goal option as ``option_hits`` (WebShop's fuzzy, colour-normalised match) says.

Where this differs from BEACON's detector, and why: BEACON's search phase is passed only by a ``search`` whose
first page lists such a product, so an episode that finds its product on page 2 has no milestone at all, its
winning purchase included (1 of 60 expert episodes on the embedded catalog); here a results page turned to
counts too. BEACON matches option values by exact text (lower case, whitespace collapsed) where this world's
reward matches them fuzzily (a milestone here means what the score means); and BEACON judges the purchase by the product opened in the detail phase (with the session's verbose
reward as a fallback), where here it is judged by what was bought, with the options selected at the purchase
(the purchase's reward terms ``r_att``, ``r_option``, ``r_price`` all 1). A purchase milestone is not a win: the
win also needs the product's type to match (``r_type``).
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from .reward import get_attribute_reward, goal_option_values, option_hits


class World(Protocol):
    """What the phases read of :class:`milegpo.envs.webshop.env.World` (a Protocol, so that this module does not
    import the env that imports it): its shop, ``shop.by_asin`` (asin -> product) and ``shop.prices``."""

    shop: Any

#: the phases in order; ``complete`` follows the purchase
PHASES = ("search", "detail", "options", "purchase", "complete")


def can_meet_goal(world: World, goal: dict, asin: str) -> bool:
    """Whether product ``asin`` can meet ``goal``: every goal attribute found in it (``get_attribute_reward``),
    every goal option matched by one of its option values (``option_hits``), its price within
    ``goal["price_upper"]`` (no limit when it is 0)."""
    product = world.shop.by_asin[asin]
    attributes = goal["attributes"]
    if attributes and get_attribute_reward(product, goal)[1] < len(attributes):
        return False
    wanted = goal_option_values(goal)
    offered: set[int] = set()
    for values in product.get("options", {}).values():
        for value in values:
            offered |= option_hits(value, wanted)
    if len(offered) < len(wanted):
        return False
    return goal["price_upper"] <= 0 or world.shop.prices[asin] <= goal["price_upper"]


class ShoppingPhases:
    """The phase of one WebShop episode (module docstring): :meth:`listed` when a results page is on screen
    after a step, :meth:`clicked` after a click that ran; each returns whether the step completed the current
    phase."""

    def __init__(self, world: World, goal: dict) -> None:
        self.world, self.goal = world, goal
        self.wanted = goal_option_values(goal)
        self.phase = "search"
        self.matched: set[int] = set()  # goal options matched by the values clicked in the options phase
        self._can_meet: dict[str, bool] = {}

    def _meets(self, asin: str) -> bool:
        if asin not in self._can_meet:
            self._can_meet[asin] = can_meet_goal(self.world, self.goal, asin)
        return self._can_meet[asin]

    def _advance(self) -> bool:
        self.phase = PHASES[PHASES.index(self.phase) + 1]
        if self.phase == "options" and not self.wanted:
            self.phase = "purchase"
        return True

    def listed(self, shown: Sequence[str]) -> bool:
        """A results page is on screen after the step (a search ran, a page was turned); ``shown``: the ASINs
        it lists."""
        return self.phase == "search" and any(self._meets(asin) for asin in shown) and self._advance()

    def clicked(self, kind: str, payload: str, text: str, purchase: dict | None) -> bool:
        """A click ran: ``kind`` / ``payload`` of the clickable (``product`` / its ASIN, ``option`` / its group,
        ``button``), ``text`` the clicked text; ``purchase``: the reward terms of ``buy now`` (else None)."""
        if self.phase == "detail":
            return kind == "product" and self._meets(payload) and self._advance()
        if self.phase == "options":
            if kind != "option":
                return False
            self.matched |= option_hits(text, self.wanted)
            return len(self.matched) == len(self.wanted) and self._advance()
        if self.phase == "purchase" and purchase is not None:
            met = (purchase.get("r_att") == 1 and purchase.get("r_option", 1) == 1
                   and purchase.get("r_price", True) == 1)
            return bool(met) and self._advance()
        return False


__all__ = ["ShoppingPhases", "can_meet_goal", "PHASES"]
