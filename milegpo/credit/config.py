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
#: the CreditConfig switches (every other field is a number, or one of :data:`CHOICES`)
BOOL_FIELDS = ("invalid_penalty_on_step_return", "invalid_penalty_in_step_reward")
#: the CreditConfig fields that take one of a few names, with those names (the spec's first)
CHOICES = {
    "norm": NORMS,
    "episode_penalty": ("row", "trajectory"),
    "episode_norm_over": ("rows", "trajectories"),
    "episode_single_value": ("unit", "zero"),
    "graph_unreachable": ("zero", "max_plus_one"),
}
#: HGPO's and G2PO's switches and choices (their fields close :class:`CreditConfig`; issue 42)
BOOL_FIELDS += ("hgpo_base_group", "g2po_nc_penalty")
CHOICES.update({
    "hgpo_std": ("population", "sample"),
    "hgpo_penalty": ("step_return", "reward", "none"),
    "g2po_episode": ("row", "trajectory"),
    "g2po_failure_next": ("zero", "node"),
})


@dataclass(frozen=True)
class CreditConfig:
    """Parameters of the MileGPO estimator and its baselines (spec section 8).

    Field names follow the spec's symbols: ``lam`` is lambda, ``w_pos``/``w_neg`` are
    w+/w-, ``gamma_g`` is gamma_G, ``gamma_phi`` is gamma_Phi.
    """

    # GraphGPO return (eq. 1)
    c: float = 10.0
    gamma_g: float = 0.2
    #: hops added to d(s_{t+1}, g) in eq. 1, 0 or 1: 0 (the spec, and the public GraphGPO recipe:
    #: r^G = c * gamma_G^d(s_{t+1}, g), c on the winning row) or 1 (the GraphGPO paper's eq. 4:
    #: c * gamma_G^(d(s_{t+1}, g) + 1)). Unreachable stays unreachable.
    graph_distance_offset: int = 0
    #: r^G of a row whose s_{t+1} cannot reach g, in a group with a success: ``"zero"`` (the spec: the
    #: distance is infinite, r^G = 0) or ``"max_plus_one"`` (the public GraphGPO recipe: such a node is at
    #: distance (the largest finite d(., g) in its group) + 1, then ``graph_distance_offset`` is added).
    #: A group without a success has r^G = 0 either way. Only r^G reads it: PCC's dd(e) (eq. 15) and the
    #: node table's ``dist`` keep the search's distances (-1: unreachable).
    graph_unreachable: str = "zero"
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
    #: where ``invalid_penalty`` enters the episode score Z (eq. 22): ``"row"`` (the spec): Z of a row is its
    #: trajectory's summed reward, minus ``invalid_penalty`` when that row is invalid; ``"trajectory"`` (the
    #: public GraphGPO recipe): every row of a trajectory gets its return, the summed reward minus
    #: ``invalid_penalty`` times the trajectory's number of invalid rows (10 * success - 0.1 * n_invalid on
    #: ALFWorld, where the winning row's reward is 10 and every other is 0)
    episode_penalty: str = "row"
    #: what Norm_q (eq. 22) standardises over in a task group: ``"rows"`` (the spec, and the recipe's original
    #: helper): the Z of every row, a trajectory's score counted once per row (long trajectories weigh more);
    #: ``"trajectories"`` (the public GraphGPO recipe): the K trajectory returns, once each, the value
    #: broadcast to the trajectory's rows. ``"trajectories"`` needs ``episode_penalty="trajectory"`` (one
    #: score per trajectory).
    episode_norm_over: str = "rows"
    #: Norm_q of a group holding one value (one row under ``"rows"``, one trajectory under
    #: ``"trajectories"``): ``"unit"`` (the spec, verl-agent's episode_norm_reward: mean 0, std 1, the value
    #: itself / (1 + norm_eps)) or ``"zero"`` (the public GraphGPO recipe: 0, as for zero variance)
    episode_single_value: str = "unit"
    # GiGPO baseline (spec section 9)
    gamma: float = 0.95
    step_weight: float = 1.0
    #: verl-agent parity (GiGPO): also subtract ``invalid_penalty`` from an invalid row's step return R_t,
    #: after discounting, as verl-agent's trainer does (``apply_invalid_action_penalty`` on its
    #: ``step_rewards``, on in its example scripts). Off (the spec): the penalty enters the episode score only.
    invalid_penalty_on_step_return: bool = False
    #: the public GraphGPO recipe's GiGPO: a row's immediate reward is its reward minus ``invalid_penalty`` when
    #: it is invalid, before discounting (so the penalty is discounted into the trajectory's earlier rows:
    #: R_t = sum_{k >= t} gamma^(k-t) (reward_k - invalid_penalty * invalid_k)). Off (the spec): R_t sums the
    #: rewards alone. Not together with ``invalid_penalty_on_step_return`` (the penalty would count twice).
    invalid_penalty_in_step_reward: bool = False
    #: thresholds "x > 0" and "x >= theta" are taken as x > tol and x >= theta - tol
    #: so that a value that is mathematically on the threshold is not moved across
    #: it by a rounding residue (e.g. a sibling mean of three equal 1/3s).
    threshold_tol: float = 1e-12
    # HGPO (docs/algorithm.md "HGPO"; defaults: the official ALFWorld / WebShop scripts, verl-agent recipe/hgpo)
    #: K, the depths of history: steps are grouped by their last m states, m = 1..K + 1 (0: GiGPO's step groups)
    hgpo_history: int = 2
    #: alpha, the exponent of a level's weight L^alpha (0: the levels weigh the same)
    hgpo_alpha: float = 1.0
    #: the std of a level's mean_std normalisation: ``"population"`` (the code: divide by n) or ``"sample"``
    hgpo_std: str = "population"
    #: L = m + ``hgpo_weight_shift`` for the group of the last m states: 1 (the code: 2 : 3 : 4 for K = 2) or 0
    #: (the paper's k + 1: 1 : 2 : 3)
    hgpo_weight_shift: int = 1
    #: the code's ``base_group``: GRPO's Norm_q(Z) enters the weighted mean as one more level (L = 1); off in the scripts
    hgpo_base_group: bool = False
    #: where ``invalid_penalty`` enters HGPO's step return: ``"step_return"`` (the code: off the invalid row's own
    #: discounted return), ``"reward"`` (off its reward, before discounting) or ``"none"``
    hgpo_penalty: str = "step_return"
    #: the eps of the level weights' denominator, sum of the kept L^alpha + eps
    hgpo_weight_eps: float = 1e-6
    # G2PO (docs/algorithm.md "G2PO"; defaults: the official scripts, Nala-YN/G2PO g2po/core_g2po.py)
    #: w in A = A_EP + w * (A_NC + A_EC) (0: GRPO)
    g2po_w: float = 1.0
    #: the discount of a visit's value v = gamma^(T - t) * R (the code's literal 0.95, not ``gamma``)
    g2po_gamma: float = 0.95
    #: V' of a won trajectory's last row (the code's SUCCESS_REWARD, undiscounted)
    g2po_success_value: float = 10.0
    #: V' of a lost trajectory's last row
    g2po_failure_value: float = 0.0
    #: A_EP: ``"row"`` (the code: GRPO's Norm_q(Z), ``episode_*`` fields) or ``"trajectory"`` (the paper: the
    #: trajectories' summed rewards, once each, no penalty; one trajectory: 0)
    g2po_episode: str = "row"
    #: take ``invalid_penalty`` off an invalid row's x = V' in A_NC (the code); off: the paper
    g2po_nc_penalty: bool = True
    #: V' of a lost trajectory's last row: ``"zero"`` (the code: ``g2po_failure_value``) or ``"node"`` (V of the
    #: node of its last next_state, ``g2po_failure_value`` where no row of the group is in that state)
    g2po_failure_next: str = "zero"

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name in CHOICES:
                if v not in CHOICES[f.name]:
                    raise ValueError(f"CreditConfig.{f.name} must be one of {CHOICES[f.name]}, got {v!r}")
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
        for name in ("kappa_bc", "graph_distance_offset"):
            if getattr(self, name) not in (0, 1):
                raise ValueError(f"CreditConfig.{name} must be 0 or 1, got {getattr(self, name)}")
        if self.episode_norm_over == "trajectories" and self.episode_penalty != "trajectory":
            raise ValueError("CreditConfig.episode_norm_over='trajectories' needs episode_penalty='trajectory' (one "
                             f"score per trajectory to standardise), got episode_penalty={self.episode_penalty!r}")
        if self.invalid_penalty_in_step_reward and self.invalid_penalty_on_step_return:
            raise ValueError("CreditConfig.invalid_penalty_in_step_reward and invalid_penalty_on_step_return are both "
                             "on: the step return would take the invalid-action penalty twice; choose one")
        _check_hgpo_g2po(self)

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


def _check_hgpo_g2po(config: CreditConfig) -> None:
    """The ranges of the HGPO and G2PO fields (their types are checked with the others')."""
    if int(config.hgpo_history) != config.hgpo_history or not 0 <= config.hgpo_history <= 64:
        raise ValueError(f"CreditConfig.hgpo_history must be a whole number in [0, 64] (previous states), got "
                         f"{config.hgpo_history}")
    if config.hgpo_weight_shift not in (0, 1):
        raise ValueError(f"CreditConfig.hgpo_weight_shift must be 0 or 1, got {config.hgpo_weight_shift}")
    for name in ("hgpo_alpha", "hgpo_weight_eps", "g2po_w"):
        if getattr(config, name) < 0:
            raise ValueError(f"CreditConfig.{name} must be >= 0, got {getattr(config, name)}")
    if not 0.0 <= config.g2po_gamma <= 1.0:
        raise ValueError(f"CreditConfig.g2po_gamma must be in [0, 1], got {config.g2po_gamma}")


ALFWORLD = CreditConfig()
WEBSHOP = CreditConfig(theta_m=0.5, kappa_bc=1, rho=0.5, eta=1.0, norm="mean")
#: The public GraphGPO recipe's credit as its reproductions document it (issue 33; README "Reference parity"),
#: on ALFWorld's rewards (10 on the winning row): a trajectory's return 10 * success - 0.1 * n_invalid on all
#: its rows, standardised once per trajectory in the task group (sample std, (x - mean) / (std + 1e-6); one
#: trajectory or zero variance: 0); r^G = 10 * 0.1^d(s_{t+1}, g) with a node that cannot reach g at the
#: group's largest finite distance + 1 (no success: 0), standardised per (group, state); GiGPO's immediate
#: reward -0.1 on an invalid row plus the env's reward, discounted with 0.95. ``grpo`` gives the recipe's
#: episode advantage alone, ``gigpo`` and ``graphgpo`` add their step / graph advantage (w = 1): every
#: baseline on the one convention. ``milegpo`` runs on the same episode and graph terms with the paper's
#: shaping parameters (table 5).
GRAPHGPO_REFERENCE = ALFWORLD.replace(gamma_g=0.1, graph_unreachable="max_plus_one", episode_penalty="trajectory",
                                      episode_norm_over="trajectories", episode_single_value="zero",
                                      invalid_penalty_in_step_reward=True)
#: The same values as :data:`GRAPHGPO_REFERENCE`: the recipe's GiGPO is one of its three baselines, under
#: one credit convention; the second name lets a run be named after the method it reproduces.
GIGPO_REFERENCE = GRAPHGPO_REFERENCE.replace()
PRESETS = {"alfworld": ALFWORLD, "webshop": WEBSHOP, "graphgpo_reference": GRAPHGPO_REFERENCE,
           "gigpo_reference": GIGPO_REFERENCE}


def get_preset(name: str) -> CreditConfig:
    try:
        return PRESETS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown credit preset {name!r}; known: {sorted(PRESETS)}") from None


__all__ = ["ALFWORLD", "WEBSHOP", "GRAPHGPO_REFERENCE", "GIGPO_REFERENCE", "PRESETS", "CHOICES", "CreditConfig",
           "get_preset", "VARIANTS", "NORMS", "MAX_COUNT"]
