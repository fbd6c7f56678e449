"""WebShopEnv: WebShop's text interface (WebAgentTextEnv, ``"simple"`` mode) as a :class:`~milegpo.envs.TextEnv`.

A Task is one goal: ``Task.seed`` is its index in the shuffled goal list of a catalog, the catalog
is named by the Task's options (``data_dir`` for WebShop's own files, else the embedded catalog
``catalog_size`` / ``catalog_seed``). Every process loads a catalog once (:func:`get_world`: the
products, the goals and the BM25 index from the disk cache) and every environment instance in it
shares it, so a reset costs microseconds.

Actions are ``name[argument]``, the argument lower-cased as WebShop does (:func:`canonical_action`;
the argument is all between the first ``[`` and the final ``]``, where WebShop's greedy
``(.+)\\[(.+)\\]`` would split an argument that holds brackets):
``search[<words>]`` where the page has the search box (every page with the Task option
``search_anywhere``: WebAgentTextEnv itself runs a search from any page, verl-agent lists it only
where the box is), ``click[<clickable>]`` on the page's clickables. Anything else, a blank search
and ``click[search]`` (WebAgentTextEnv refuses it too) change nothing: the same page comes back,
reward 0, ``info["invalid"]``. ``click[buy now]`` ends the episode: raw score = :func:`get_reward`
of the product on the page with the selected options at its price; a win when the score is 1.0, else
the episode ends lost. The reward of the purchase is the Task option ``reward`` (:data:`REWARDS`):
``"win"`` (the default, verl-agent's: 10 for a win, else 0) or ``"score"`` (10 x the raw score, WebShop's
own partial credit: a purchase that meets half the goal earns 5); every other step earns 0.
``info["score"]`` is the raw score on every step (0.0 before a purchase), ``info["reward_info"]`` its parts.
``info["milestone"]``: the step completed the next of BEACON's page phases (a search listing a product that can
meet the goal, opening one, selecting the goal's options, a purchase meeting the goal's constraints:
:mod:`milegpo.envs.webshop.phases`).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import UNWINNABLE, EnvError, Task, TextEnv
from .catalog import DEFAULT_PRODUCTS, DEFAULT_SEED, embedded_catalog
from .data import TEST_GOALS, ShopData, cache_root, load_shop, split_goals
from .pages import BACK_TO_SEARCH, END_BUTTON, NEXT_PAGE, PREV_PAGE, SEARCH_BOX, SUB_PAGES, Page, Session, render
from .phases import ShoppingPhases
from .reward import best_options, get_reward, goal_option_values, option_hits
from .search import PRODUCT_WINDOW, SEARCH_RETURN_N, SearchEngine, product_document

#: the reward of a winning purchase (verl-agent: 10 when the score is 1.0, else 0)
WIN_REWARD = 10.0
#: the values of the Task option ``reward`` (:func:`purchase_reward`); the first is the default
REWARDS = ("win", "score")
DEFAULT_REWARD = "win"
#: the default step budget of a WebShop task
DEFAULT_WEBSHOP_HORIZON = 30
#: the options that name a catalog (a Task carries them; the env reads them)
WORLD_OPTIONS = ("data_dir", "files", "catalog_size", "catalog_seed")
_SEARCH_CACHE = 4096


@dataclass
class World:
    """A loaded catalog: products, goals, the search engine, and per-query / per-goal caches."""

    shop: ShopData
    engine: SearchEngine
    fingerprint: str
    label: str
    _searches: OrderedDict = field(default_factory=OrderedDict)
    _winners: dict = field(default_factory=dict)

    def search(self, keywords: str) -> tuple[str, ...]:
        """The top-50 ASINs of a query (cached: the episodes of a group search alike)."""
        hit = self._searches.get(keywords)
        if hit is None:
            hit = self._searches[keywords] = tuple(self.engine.search(keywords, SEARCH_RETURN_N))
            if len(self._searches) > _SEARCH_CACHE:
                self._searches.popitem(last=False)
        return hit

    def goal(self, index: int) -> dict:
        if not 0 <= index < len(self.shop.goals):
            raise EnvError(f"WebShop goal index {index} is out of range: {self.label} has {len(self.shop.goals)} goals")
        return self.shop.goals[index]

    def purchase_score(self, asin: str, goal: dict, options: dict) -> tuple[float, dict]:
        """WebShop's raw score of buying ``asin`` with ``options`` for ``goal`` (at the price drawn at load)."""
        return get_reward(self.shop.by_asin[asin], goal, price=self.shop.prices[asin], options=options, verbose=True)

    def winners(self, index: int) -> list[tuple[str, dict]]:
        """Privileged: (ASIN, options to select) of every purchase that scores 1.0 on goal ``index`` (cached)."""
        if index not in self._winners:
            goal = self.goal(index)
            wanted = goal_option_values(goal)
            found = []
            for product in self.shop.products:
                asin = product["asin"]
                if self.shop.prices[asin] > goal["price_upper"]:
                    continue
                options = best_options(product, wanted)
                if get_reward(product, goal, self.shop.prices[asin], options) == 1.0:
                    found.append((asin, options))
            self._winners[index] = found
        return self._winners[index]


_WORLDS: dict[tuple, World] = {}


def purchase_reward(score: float, reward: str = DEFAULT_REWARD) -> float:
    """The reward of a purchase of WebShop raw score ``score`` in [0, 1] under the Task option ``reward``:
    ``win`` (verl-agent's) :data:`WIN_REWARD` when ``score == 1.0`` else 0; ``score``: ``WIN_REWARD * score``."""
    if reward == "win":
        return WIN_REWARD if score == 1.0 else 0.0
    if reward == "score":
        return WIN_REWARD * float(score)
    raise ValueError(f"WebShop reward must be one of {list(REWARDS)}, got {reward!r}")


def world_options(data_dir: str | os.PathLike | None = None, files: str = "auto",
                  catalog_size: int = DEFAULT_PRODUCTS, catalog_seed: int = DEFAULT_SEED) -> tuple[tuple[str, Any], ...]:
    """The Task options that name a catalog: ``data_dir`` (else ``$WEBSHOP_DATA``) or the embedded one."""
    data_dir = data_dir or os.environ.get("WEBSHOP_DATA") or None
    if data_dir is not None:
        return (("data_dir", str(Path(os.path.expandvars(os.path.expanduser(str(data_dir)))).resolve())),
                ("files", str(files)))
    if int(catalog_size) < 10:
        raise ValueError(f"WebShop catalog_size must be >= 10, got {catalog_size}")
    return (("catalog_size", int(catalog_size)), ("catalog_seed", int(catalog_seed)))


def get_world(options: tuple[tuple[str, Any], ...] | dict = ()) -> World:
    """The catalog named by ``options`` (see :func:`world_options`), loaded once per process."""
    opts = dict(options)
    key = tuple((k, opts[k]) for k in WORLD_OPTIONS if k in opts) or world_options()
    if key in _WORLDS:
        return _WORLDS[key]
    spec = dict(key)
    if "data_dir" in spec:
        folder, label = Path(spec["data_dir"]), f"WebShop data {spec['data_dir']}"
    else:
        size, seed = int(spec.get("catalog_size", DEFAULT_PRODUCTS)), int(spec.get("catalog_seed", DEFAULT_SEED))
        folder, label = embedded_catalog(size, seed), f"embedded catalog ({size} products, seed {seed})"
    shop = load_shop(folder, spec.get("files", "auto"))
    asins = [p["asin"] for p in shop.products]
    documents = [product_document(p) for p in shop.products]
    engine = SearchEngine.cached(documents, asins, cache_root())
    world = _WORLDS[key] = World(shop, engine, SearchEngine.digest(documents, asins)[:16], label)
    return world


def webshop_tasks(split: str = "train", n: int | None = 100, start: int = 0, task_type: str = "",
                  horizon: int = DEFAULT_WEBSHOP_HORIZON, data_dir: str | os.PathLike | None = None,
                  files: str = "auto", catalog_size: int = DEFAULT_PRODUCTS, catalog_seed: int = DEFAULT_SEED,
                  test_goals: int = TEST_GOALS, show_attrs: bool = False, search_anywhere: bool = False,
                  reward: str = DEFAULT_REWARD, max_goal_options: int | None = None) -> list[Task]:
    """``n`` WebShop goals of ``split`` as Tasks, from the ``start``-th goal of the split on.

    split: ``test`` (the first ``test_goals`` goals, verl-agent's 500) or ``train`` (the rest);
    task_type: keep only goals of this WebShop category (``beauty``, ``electronics``...); n: None for all;
    data_dir: WebShop's data folder (default ``$WEBSHOP_DATA``; neither: the embedded catalog of
    ``catalog_size`` products from ``catalog_seed``); files: ``auto`` / ``small`` / ``full``;
    show_attrs / search_anywhere: see :class:`WebShopEnv`; reward: the reward of a purchase, ``win`` (10 for a
    perfect one, else 0: verl-agent's) or ``score`` (10 x WebShop's score), see :data:`REWARDS`; max_goal_options:
    keep only the goals whose instruction asks at most this many options (WebShop's ``goal_options``; 0: goals won
    by the right product at the right price, no option to choose; None: every goal), a selection inside the split
    like ``task_type`` (the split's goal indices stay those of the whole list). Fewer than ``n`` goals left is an
    error.
    """
    if reward not in REWARDS:
        raise ValueError(f"WebShop reward must be one of {list(REWARDS)} ('win': 10 for a purchase of score 1.0, "
                         f"else 0; 'score': 10 x the score), got {reward!r}")
    if isinstance(test_goals, bool) or not isinstance(test_goals, int) or test_goals < 0:
        raise ValueError(f"WebShop test_goals must be an int >= 0 (the first test_goals goals are the test split, "
                         f"the rest train; verl-agent's {TEST_GOALS}), got {test_goals!r}")
    catalog = world_options(data_dir, files, catalog_size, catalog_seed)
    world = get_world(catalog)
    indices = list(split_goals(len(world.shop.goals), split, int(test_goals)))
    if task_type:
        categories = sorted({goal["category"] for goal in world.shop.goals})
        if task_type not in categories:
            raise ValueError(f"WebShop task_type (a goal category) must be one of the {world.label}'s {categories}, "
                             f"got {task_type!r}")
        indices = [i for i in indices if world.shop.goals[i]["category"] == task_type]
    if max_goal_options is not None:
        if isinstance(max_goal_options, bool) or not isinstance(max_goal_options, int) or max_goal_options < 0:
            raise ValueError(f"WebShop max_goal_options must be an int >= 0 (or None: every goal), got "
                             f"{max_goal_options!r}")
        indices = [i for i in indices if len(world.shop.goals[i]["goal_options"]) <= max_goal_options]
    chosen = indices[start:] if n is None else indices[start:start + n]
    if n is not None and len(chosen) < n:
        within = (f" / category {task_type!r}" if task_type else "") + (
            f" / at most {max_goal_options} goal options" if max_goal_options is not None else "")
        raise EnvError(f"WebShop split {split!r}{within} of the {world.label} has {len(indices)} goals; asked for "
                       f"{n} from goal {start} on")
    options = catalog + tuple((k, v) for k, v in (("show_attrs", bool(show_attrs)),
                                                   ("search_anywhere", bool(search_anywhere))) if v)
    if reward != DEFAULT_REWARD:  # the default is not written: the Tasks (and their ids' options) stay as before
        options += (("reward", reward),)
    return [Task(task_id=f"webshop/{world.fingerprint}/{split}/{i}", env="webshop", seed=i,
                 task_type=world.shop.goals[i]["category"], split=split, horizon=horizon, options=options)
            for i in chosen]


def split_action(action: str) -> tuple[str, str | None]:
    """``(name, argument)`` of ``name[argument]`` (argument None when the action has no ``[...]`` at its end)."""
    name, bracket, rest = action.strip().partition("[")
    if not bracket or not rest.endswith("]"):
        return action.strip(), None
    return name, rest[:-1]


def canonical_action(action: str) -> str:
    """``name[argument]`` with the argument lower-cased (WebShop lower-cases every action's argument)."""
    name, arg = split_action(action)
    return name if arg is None else f"{name}[{arg.lower()}]"


class WebShopEnv(TextEnv):
    """WebShop's text interface over one catalog per task (see the module docstring)."""

    kind = "webshop"
    experts = {"search": "expert_action"}  # the ShoppingExpert reads only the pages it was shown
    has_score = True

    def __init__(self) -> None:
        super().__init__()
        self.world: World | None = None
        self.goal: dict = {}
        self.goal_index = -1
        self.session = Session()
        self.page: Page | None = None
        self.show_attrs = False
        self.search_anywhere = False
        self.reward = DEFAULT_REWARD
        self.trace: list[tuple[str, tuple, str]] = []  # (observation, admissible, action) so far, for the expert

    # ------------------------------------------------------------------ hooks
    def _reset(self, task: Task):
        if task.seed is None:
            raise EnvError(f"webshop task {task.task_id!r} has no seed (the goal index)")
        self.world = get_world(task.options)
        self.goal_index = int(task.seed)
        self.goal = self.world.goal(self.goal_index)
        self.show_attrs = bool(task.option("show_attrs", False))
        self.search_anywhere = bool(task.option("search_anywhere", False))
        reward = task.option("reward", DEFAULT_REWARD)
        if reward not in REWARDS:
            raise EnvError(f"webshop task {task.task_id!r}: option reward must be one of {list(REWARDS)}, "
                           f"got {reward!r}")
        self.reward = reward
        self.session, self.trace = Session(), []
        self.phases = ShoppingPhases(self.world, self.goal)
        self._render()
        return self.page.observation, self._admissible(), {
            "goal": self.goal["instruction_text"], "game_id": f"webshop-{self.world.fingerprint}-{self.goal_index}",
            "task_type": self.goal["category"], "score": 0.0}

    def make_tracker(self):
        """The query, results page, product and selected options (:class:`~milegpo.envs.webshop.tracker.WebShopTracker`)."""
        from .tracker import WebShopTracker

        return WebShopTracker(self)

    def _render(self) -> None:
        self.page = render(self.session, self.goal["instruction_text"], self.world.shop.by_asin, self.show_attrs)

    def _admissible(self) -> list[str]:
        return [] if self.session.page == "done" else self.page.admissible(self.search_anywhere)

    def read_action(self, action: str) -> str:
        """The action with its argument lower-cased, as WebShop reads it (:func:`canonical_action`)."""
        return canonical_action(action)

    def _step(self, action: str):
        before, options = self.page.observation, tuple(self.admissible)
        reward, won, info = 0.0, False, {"score": 0.0}
        name, arg = split_action(action)
        milestone = False
        if name == "search" and arg is not None and arg.strip() and (self.page.has_search_bar or self.search_anywhere):
            self._search(arg.split(" "), 1)
            milestone = self.phases.listed(self.session.listed)
        elif name == "click" and arg in self.page.clickables and arg != "search":
            kind, payload = self.page.clickables[arg]
            info = self._click(arg)
            if self.session.page == "done":
                won = info["score"] == 1.0
                reward = purchase_reward(info["score"], self.reward)
                info["lost"] = not won
            milestone = self.phases.clicked(kind, payload, arg, info.get("reward_info"))
            if self.session.page == "results":  # a page turned (or back from a product)
                milestone = self.phases.listed(self.session.listed) or milestone
        self.trace.append((before, options, action))
        return self.page.observation, reward, won, self._admissible(), {**info, "milestone": milestone}

    def _search(self, keywords: list[str], page_num: int) -> None:
        s = self.session
        s.page, s.keywords, s.page_num, s.asin, s.options = "results", keywords, page_num, None, {}
        s.results = self.world.search(" ".join(keywords))
        self._render()

    def _click(self, text: str) -> dict:
        kind, payload = self.page.clickables[text]
        s, info = self.session, {"score": 0.0}
        if text == END_BUTTON.lower():
            s.score, parts = self.world.purchase_score(s.asin, self.goal, s.options)
            s.page = "done"
            info = {"score": s.score, "reward_info": parts, "purchased": s.asin, "purchased_options": dict(s.options)}
        elif text == BACK_TO_SEARCH.lower():
            self.session = Session()
        elif text == NEXT_PAGE.lower() and s.page == "results":
            self._search(s.keywords, s.page_num + 1)
            return info
        elif text == PREV_PAGE.lower() and s.page == "results":
            self._search(s.keywords, s.page_num - 1)
            return info
        elif text == PREV_PAGE.lower() and s.page == "sub":
            s.page = "item"
        elif text == PREV_PAGE.lower() and s.page == "item":
            self._search(s.keywords, s.page_num)
            return info
        elif text in (p.lower() for p in SUB_PAGES):
            s.page, s.sub_page = "sub", next(p for p in SUB_PAGES if p.lower() == text)
        elif kind == "product":
            s.page, s.asin = "item", payload
        elif kind == "option":
            s.options[payload] = text
        self._render()
        return info

    # ------------------------------------------------------------------ experts
    def expert_action(self) -> str | None:
        """The non-privileged shopping expert's next action (:class:`~milegpo.envs.webshop.expert.ShoppingExpert`)."""
        from .expert import ShoppingExpert

        if self.done or self.page is None:
            return None
        return ShoppingExpert().act(self.page.observation, self.admissible, self.trace)

    def playable_actions(self, admissible) -> list[str]:
        """The admissible actions with the search box's ``search[<your query>]`` filled in by the shopping
        expert's query (:func:`~milegpo.envs.webshop.expert.search_query` of the instruction): the one search a
        chooser that writes no text can make, the one the walkthroughs that warm-start a policy search."""
        from .expert import search_query

        query = f"search[{search_query(self.goal.get('instruction_text', ''))}]"
        return [query if action == SEARCH_BOX else action for action in admissible]

    def steps_to_win(self) -> int | None:
        """Privileged: the fewest actions from here to a purchase that scores 1.0 (UNWINNABLE if none).

        Counted on WebShop's page graph: a search costs 1 (from another page 1 more for ``back to
        search``, or ``search_anywhere``), each result page turned 1, opening a product 1, each
        option group whose selected value matches fewer goal options than the best value 1, ``buy now`` 1; ``< prev`` costs 1
        (from a sub-page back to its item, options kept; from an item back to its results page).
        A winning product is reached by the better of two queries, its own title and the
        instruction (whichever ranks it on an earlier page of the top 50); winners of neither query's
        top 50 count only when they are on the results page at hand.
        """
        if self.world is None:
            return None
        if self.session.page == "done":
            return 0 if self.won else UNWINNABLE
        winners = self.world.winners(self.goal_index)
        if not winners:
            return UNWINNABLE
        return min(self._cost(asin, options) for asin, options in winners)

    def _search_cost(self, asin: str) -> int:
        """1 search + page turns + open + from the search page, for the better of the two queries."""
        best = UNWINNABLE
        for query in (self.world.shop.by_asin[asin]["Title"].lower(), self.goal["instruction_text"]):
            results = self.world.search(" ".join(query.split(" ")))
            if asin in results:
                best = min(best, 1 + results.index(asin) // PRODUCT_WINDOW + 1)
        return best

    def _cost(self, asin: str, options: dict) -> int:
        s = self.session
        finish = len(options) + 1  # select the needed values, buy
        from_search = self._search_cost(asin) + finish
        if s.page == "search":
            return from_search
        back = 0 if self.search_anywhere else 1  # click[back to search] before a new search
        best = back + from_search
        if s.page in ("item", "sub") and s.asin == asin:
            wanted = goal_option_values(self.goal)
            unselected = sum(1 for g, v in options.items()  # a selected value as good as the best one counts
                             if g not in s.options or not option_hits(s.options[g], wanted) >= option_hits(v, wanted))
            best = min(best, (1 if s.page == "sub" else 0) + unselected + 1)
        listing = s.results if s.page == "results" else ()
        if s.page in ("item", "sub"):
            listing = s.results  # '< prev' leads back to the results page it came from
        if asin in listing:
            page_of = listing.index(asin) // PRODUCT_WINDOW + 1
            to_results = {"results": 0, "item": 1, "sub": 2}[s.page]
            best = min(best, to_results + abs(page_of - s.page_num) + 1 + finish)
        return best


__all__ = ["WebShopEnv", "webshop_tasks", "get_world", "world_options", "World", "split_action", "canonical_action",
           "WIN_REWARD", "REWARDS", "DEFAULT_REWARD", "purchase_reward",
           "DEFAULT_WEBSHOP_HORIZON"]
