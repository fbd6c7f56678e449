"""The presets as CreditConfig values (see :mod:`milegpo.credit.config`, where each is documented):

- ``ALFWORLD_PAPER``, ``WEBSHOP_PAPER``: the paper's estimator, table 5 with the paper's reading of the points
  where its text and the spec differ; ``ALFWORLD`` / ``WEBSHOP`` are these (the defaults);
- ``ALFWORLD_SPEC``, ``WEBSHOP_SPEC``: table 5 under the spec's [decided] reading (what ``alfworld`` /
  ``webshop`` meant before 2026-12-03);
- ``SCIENCEWORLD``: the ALFWorld values in the world ``scienceworld`` (BEACON reads its ScienceWorld script's
  gamma and w there);
- ``GIGPO_REFERENCE`` / ``GIGPO_REFERENCE_WEBSHOP``, ``GRAPHGPO_REFERENCE`` / ``GRAPHGPO_REFERENCE_WEBSHOP``: what
  verl-agent's GiGPO code and GraphGPO recipe compute with their ALFWorld / WebShop scripts;
- ``GRAPHGPO_REPRODUCTION``: the GraphGPO recipe as a reproduction's docstrings describe it (issue 33);
- ``BEACON_ALFWORLD``, ``BEACON_WEBSHOP``, ``BEACON_SCIENCEWORLD``: BEACON's official scripts (gamma, w, p),
  named by :mod:`milegpo.credit.beacon` when it registers (a method's presets: :func:`add_preset`); read here
  as ``presets.BEACON_WEBSHOP`` like the others.

``PRESETS`` maps each lower-case name (``alfworld_paper``, ...) to its value; :func:`get_preset` looks one up."""

from .config import (
    ALFWORLD,
    ALFWORLD_PAPER,
    ALFWORLD_SPEC,
    GIGPO_REFERENCE,
    GIGPO_REFERENCE_WEBSHOP,
    GRAPHGPO_REFERENCE,
    GRAPHGPO_REFERENCE_WEBSHOP,
    GRAPHGPO_REPRODUCTION,
    PRESETS,
    SCIENCEWORLD,
    WEBSHOP,
    WEBSHOP_PAPER,
    WEBSHOP_SPEC,
    add_preset,
    get_preset,
)


def __getattr__(name: str):
    """A method's preset by its upper-case name (``presets.BEACON_WEBSHOP`` is ``PRESETS["beacon_webshop"]``): the
    presets a method names when it registers (:func:`add_preset`) are read as the others are."""
    if name.isupper() and name.lower() in PRESETS:
        return PRESETS[name.lower()]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ALFWORLD", "WEBSHOP", "SCIENCEWORLD", "ALFWORLD_PAPER", "WEBSHOP_PAPER", "ALFWORLD_SPEC", "WEBSHOP_SPEC",
           "GRAPHGPO_REFERENCE", "GRAPHGPO_REFERENCE_WEBSHOP", "GIGPO_REFERENCE", "GIGPO_REFERENCE_WEBSHOP",
           "GRAPHGPO_REPRODUCTION", "PRESETS", "add_preset", "get_preset"]
