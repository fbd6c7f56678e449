"""The paper's presets (table 5) as CreditConfig values: ``presets.ALFWORLD``, ``presets.WEBSHOP``; and the public
GraphGPO recipe's credit, for parity with verl-agent runs: ``presets.GRAPHGPO_REFERENCE``,
``presets.GIGPO_REFERENCE`` (the same values; see :mod:`milegpo.credit.config`)."""

from .config import ALFWORLD, GIGPO_REFERENCE, GRAPHGPO_REFERENCE, PRESETS, WEBSHOP, get_preset

__all__ = ["ALFWORLD", "WEBSHOP", "GRAPHGPO_REFERENCE", "GIGPO_REFERENCE", "PRESETS", "get_preset"]
