"""CreditConfig: every parameter of docs/algorithm.md, and the paper's presets (table 5)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from milegpo_kernels.scoring import VARIANTS  # re-exported: the variants graph_scores computes

NORMS = ("mean_std", "mean")
#: the largest count threshold (``min_node_support``, ``min_trap_visits``): int32's maximum, the width the Triton
#: kernels take a Python int scalar at; no batch holds more trajectories (a larger threshold overflowed there)
MAX_COUNT = 2 ** 31 - 1
#: the CreditConfig switches (every other field is a number, or ``norm``)
BOOL_FIELDS = ("invalid_penalty_on_step_return",)


@dataclass(frozen=True)
class CreditConfig:
    """Parameters of the MileGPO estimator and its baselines (spec section 8).

    Field names follow the spec's symbols: ``lam`` is lambda, ``w_pos``/``w_neg`` are
    w+/w-, ``gamma_g`` is gamma_G, ``gamma_phi`` is gamma_Phi.
    """

    # GraphGPO return (eq. 1)
    c: float = 10.0
    gamma_g: float = 0.2
    # potentials and shaping (eqs. 7-10, 20)
    omega: float = 0.2
    gamma_phi: float = 1.0
    lam: float = 0.25
    w_pos: float = 1.0
    w_neg: float = 0.25
    # milestone / trap scores (eqs. 5-6)
    w_s: float = 1.0
    w_m: float = 1.0
    w_c: float = 0.25
    w_f: float = 1.0
    w_l: float = 0.25
    min_node_support: int = 1
    min_trap_visits: int = 2
    min_trap_score: float = 0.10
    # progress-contrastive calibration (eqs. 11-19)
    a_d: float = 1.0
    a_s: float = 1.0
    a_f: float = 1.0
    w_bc: float = 1.0
    w_pg: float = 1.0
    w_pcc: float = 1.0
    theta_m: float = 1.1
    kappa_bc: int = 0
    rho: float = 0.0
    # advantage (eqs. 21-22)
    eta: float = 0.20
    w_step: float = 1.0
    w_ep: float = 1.0
    norm: str = "mean_std"
    norm_eps: float = 1e-6
    invalid_penalty: float = 0.1
    # GiGPO baseline (spec section 9)
    gamma: float = 0.95
    step_weight: float = 1.0
    #: verl-agent parity (GiGPO): also subtract ``invalid_penalty`` from an invalid row's step return R_t,
    #: after discounting, as verl-agent's trainer does (``apply_invalid_action_penalty`` on its
    #: ``step_rewards``, on in its example scripts). Off (the spec): the penalty enters the episode score only.
    invalid_penalty_on_step_return: bool = False
    #: thresholds "x > 0" and "x >= theta" are taken as x > tol and x >= theta - tol
    #: so that a value that is mathematically on the threshold is not moved across
    #: it by a rounding residue (e.g. a sibling mean of three equal 1/3s).
    threshold_tol: float = 1e-12

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "norm":
                if v not in NORMS:
                    raise ValueError(f"CreditConfig.norm must be one of {NORMS}, got {v!r}")
                continue
            if f.name in BOOL_FIELDS:
                if not isinstance(v, bool):
                    raise TypeError(f"CreditConfig.{f.name} must be a bool, got {type(v).__name__} {v!r}")
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise TypeError(f"CreditConfig.{f.name} must be a number, got {type(v).__name__} {v!r}")
            if v != v or v in (float("inf"), float("-inf")):
                raise ValueError(f"CreditConfig.{f.name} must be finite, got {v}")
        for name in ("gamma_g", "omega", "gamma_phi", "gamma"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"CreditConfig.{name} must be in [0, 1], got {v}")
        for name in (
            "c", "lam", "w_pos", "w_neg", "w_s", "w_m", "w_c", "w_f", "w_l", "min_trap_score",
            "a_d", "a_s", "a_f", "w_bc", "w_pg", "w_pcc", "theta_m", "rho", "eta", "w_step",
            "w_ep", "norm_eps", "invalid_penalty", "step_weight", "threshold_tol",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"CreditConfig.{name} must be >= 0, got {getattr(self, name)}")
        for name in ("min_node_support", "min_trap_visits"):
            v = getattr(self, name)
            if int(v) != v or not 1 <= v <= MAX_COUNT:
                raise ValueError(f"CreditConfig.{name} must be a whole number in [1, {MAX_COUNT}] (a count of "
                                 f"trajectories), got {v}")
        if self.kappa_bc not in (0, 1):
            raise ValueError(f"CreditConfig.kappa_bc must be 0 or 1, got {self.kappa_bc}")

    def replace(self, **changes: Any) -> "CreditConfig":
        """A copy with some fields changed; an unknown field name is an error."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise ValueError(f"unknown CreditConfig field(s) {unknown}; known fields: {sorted(known)}")
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, values: dict[str, Any], base: "CreditConfig | None" = None) -> "CreditConfig":
        return (base or cls()).replace(**values)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


ALFWORLD = CreditConfig()
WEBSHOP = CreditConfig(theta_m=0.5, kappa_bc=1, rho=0.5, eta=1.0, norm="mean")
PRESETS = {"alfworld": ALFWORLD, "webshop": WEBSHOP}


def get_preset(name: str) -> CreditConfig:
    try:
        return PRESETS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown credit preset {name!r}; known: {sorted(PRESETS)}") from None


__all__ = ["ALFWORLD", "WEBSHOP", "PRESETS", "CreditConfig", "get_preset", "VARIANTS", "NORMS", "MAX_COUNT"]
