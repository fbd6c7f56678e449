"""The presets as CreditConfig values (see :mod:`milegpo.credit.config`, where each is documented):

- ``ALFWORLD_PAPER``, ``WEBSHOP_PAPER``: the paper's estimator, table 5 with the paper's reading of the points
  where its text and the spec differ; ``ALFWORLD`` / ``WEBSHOP`` are these (the defaults);
- ``ALFWORLD_SPEC``, ``WEBSHOP_SPEC``: table 5 under the spec's [decided] reading (what ``alfworld`` /
  ``webshop`` meant before 2026-12-03);
- ``GIGPO_REFERENCE`` / ``GIGPO_REFERENCE_WEBSHOP``, ``GRAPHGPO_REFERENCE`` / ``GRAPHGPO_REFERENCE_WEBSHOP``: what
  verl-agent's GiGPO code and GraphGPO recipe compute with their ALFWorld / WebShop scripts;
- ``GRAPHGPO_REPRODUCTION``: the GraphGPO recipe as a reproduction's docstrings describe it (issue 33);
- ``BEACON_ALFWORLD``, ``BEACON_WEBSHOP``, ``BEACON_SCIENCEWORLD``: BEACON's official scripts (gamma, w, p).

``PRESETS`` maps each lower-case name (``alfworld_paper``, ...) to its value; :func:`get_preset` looks one up."""

from .config import (
    ALFWORLD,
    ALFWORLD_PAPER,
    ALFWORLD_SPEC,
    BEACON_ALFWORLD,
    BEACON_SCIENCEWORLD,
    BEACON_WEBSHOP,
    GIGPO_REFERENCE,
    GIGPO_REFERENCE_WEBSHOP,
    GRAPHGPO_REFERENCE,
    GRAPHGPO_REFERENCE_WEBSHOP,
    GRAPHGPO_REPRODUCTION,
    PRESETS,
    WEBSHOP,
    WEBSHOP_PAPER,
    WEBSHOP_SPEC,
    get_preset,
)

__all__ = ["ALFWORLD", "WEBSHOP", "ALFWORLD_PAPER", "WEBSHOP_PAPER", "ALFWORLD_SPEC", "WEBSHOP_SPEC",
           "GRAPHGPO_REFERENCE", "GRAPHGPO_REFERENCE_WEBSHOP", "GIGPO_REFERENCE", "GIGPO_REFERENCE_WEBSHOP",
           "GRAPHGPO_REPRODUCTION", "BEACON_ALFWORLD", "BEACON_WEBSHOP", "BEACON_SCIENCEWORLD", "PRESETS", "get_preset"]
