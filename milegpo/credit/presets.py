"""The paper's presets (table 5) as CreditConfig values: ``presets.ALFWORLD``, ``presets.WEBSHOP``."""

from .config import ALFWORLD, PRESETS, WEBSHOP, get_preset

__all__ = ["ALFWORLD", "WEBSHOP", "PRESETS", "get_preset"]
