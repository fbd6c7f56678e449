"""WebShop (Yao et al., 2022) as a :class:`~milegpo.envs.TextEnv`: its text interface, data files and reward.

- :class:`WebShopEnv` (env kind ``"webshop"``) and :func:`webshop_tasks`: WebAgentTextEnv's
  ``"simple"`` text mode as verl-agent trains on it (:mod:`.env`, :mod:`.pages`).
- :func:`get_reward`, :func:`get_type_reward`, :func:`get_attribute_reward`,
  :func:`get_option_reward`, :func:`normalize_color`: WebShop's reward, same names, arguments and
  return values (:mod:`.reward`).
- :func:`load_shop`: WebShop's own files read unchanged, goals built as WebShop builds them (:mod:`.data`).
- :func:`generate_catalog` / :func:`write_catalog`: the offline catalog in WebShop's formats, the
  default when no data is given (:mod:`.catalog`); :class:`SearchEngine`: BM25 (bm25s) over WebShop's
  product documents, cached on disk (:mod:`.search`).
- :class:`ShoppingExpert`: a non-privileged expert (:mod:`.expert`); :meth:`WebShopEnv.steps_to_win`
  the privileged count.

    >>> from milegpo.envs.webshop import WebShopEnv, webshop_tasks
    >>> task = webshop_tasks("test", 1)[0]            # the embedded catalog unless $WEBSHOP_DATA is set
    >>> env = WebShopEnv(); obs, actions, info = env.reset(task)
    >>> while not env.done: obs, r, terminated, truncated, info = env.step(env.expert_action())
"""

from .catalog import embedded_catalog, generate_catalog, write_catalog
from .data import EVAL_SPLITS, SPLITS, TASK_TYPES, ShopData, load_shop
from .env import WebShopEnv, get_world, webshop_tasks
from .expert import ShoppingExpert
from .reward import get_attribute_reward, get_option_reward, get_reward, get_type_reward, normalize_color
from .search import SearchEngine

__all__ = ["WebShopEnv", "webshop_tasks", "get_world", "get_reward", "get_type_reward", "get_attribute_reward",
           "get_option_reward", "normalize_color", "load_shop", "ShopData", "generate_catalog", "write_catalog",
           "embedded_catalog", "SearchEngine", "ShoppingExpert", "SPLITS", "EVAL_SPLITS", "TASK_TYPES"]
