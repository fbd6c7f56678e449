"""CreditConfig: every parameter of docs/algorithm.md, and the presets: the paper's (table 5 under the paper's
reading, the defaults), the spec's reading of the same table, and what verl-agent's GiGPO / GraphGPO code computes."""

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
BOOL_FIELDS = ("invalid_penalty_on_step_return", "invalid_penalty_in_step_reward", "centrality_self_loops",
               "centrality_norm_with_sink", "incoming_self_loops", "progress_norm_with_sink",
               "invalid_penalty_on_graph_return")
#: the switches between the paper's text and the spec's [decided] reading (spec section 12, points 2-5): True is
#: the paper's (the defaults, ``ALFWORLD_PAPER``), False the spec's (``ALFWORLD_SPEC``)
PAPER_READING = ("centrality_self_loops", "centrality_norm_with_sink", "incoming_self_loops",
                 "progress_norm_with_sink")
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
#: BEACON's switch and choice (its fields close :class:`CreditConfig`; issue 47)
BOOL_FIELDS += ("beacon_step_penalty",)
CHOICES["beacon_mode"] = ("mean", "mean_std")


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
    #: r^G of a row whose s_{t+1} cannot reach g: ``"zero"`` (the spec and the paper: the distance is
    #: infinite, r^G = 0; a group without a success has r^G = 0 everywhere) or ``"max_plus_one"`` (verl-agent's
    #: GraphGPO recipe, ``all_to_target_shortest_paths``: such a node is at distance (the largest finite d(., g)
    #: in its group, g's 0 included) + 1, then ``graph_distance_offset`` is added; in a group without a success
    #: g is still at distance 0 and every node at 0 + 1, so r^G = c * gamma_G on every row, which normalises to
    #: 0 unless ``invalid_penalty_on_graph_return`` moves some rows). Only r^G reads it: PCC's dd(e) (eq. 15)
    #: and the node table's ``dist`` keep the search's distances (-1: unreachable).
    graph_unreachable: str = "zero"
    #: verl-agent's GraphGPO recipe trainer: ``invalid_penalty`` is also subtracted from an invalid row's graph
    #: return, r^G_t - invalid_penalty (its ``apply_invalid_action_penalty`` on ``step_rewards``, which hold
    #: r^G there), in every group, an all-fail one too; r^M (eq. 20) is built on the penalised r^G. Off (the
    #: spec and the paper): the penalty enters the episode score only.
    invalid_penalty_on_graph_return: bool = False
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
    #: deg(v) of C(v) (eq. 5) counts a self-loop (v, v): once in the in-degree and once in the out-degree (the
    #: paper: C(v) is v's in-degree plus out-degree; spec section 12, point 2). False (the spec [decided]):
    #: self-loops not counted. Edges into g count either way.
    centrality_self_loops: bool = True
    #: the success sink g belongs to the set C(v) is max-normalised over (the paper: the largest degree over
    #: the success-visited states, and every won trajectory visits g; point 3): deg(g) = its distinct incoming
    #: edges. False (the spec [decided]): g is in no max-normaliser. g is never a milestone either way.
    centrality_norm_with_sink: bool = True
    min_trap_visits: int = 2
    min_trap_score: float = 0.10
    # progress-contrastive calibration (eqs. 11-19)
    #: a self-loop (v, v) is an incoming edge of v in b(v) (eq. 14) and psi~(v) (eq. 16) (the paper: every
    #: incoming e = (u, v); point 4). False (the spec [decided]): u != v there. A self-loop is a branch of v in
    #: eq. 12 either way.
    incoming_self_loops: bool = True
    #: g's own psi~ (its incoming edges u -> g, eq. 16) belongs to psi-bar's normaliser, the max over all nodes
    #: V_q of the group (the paper; point 5), and psi-bar(g) is reported as psi~(g) / that max. False (the spec
    #: [decided]): the max over the nodes other than g, psi-bar(g) = 0. g is never a milestone either way.
    progress_norm_with_sink: bool = True
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
    # BEACON (docs/algorithm.md "BEACON"; defaults: the official ALFWorld script, ZJU-REAL/BEACON migpo/core_migpo.py;
    # presets beacon_webshop / beacon_scienceworld: its other scripts)
    #: gamma of the segment reward r_t = 10 * gamma^(m_k - t) toward the segment's milestone step m_k
    beacon_gamma: float = 0.9
    #: w in A = A_ep + w * A_seg
    beacon_weight: float = 10.0
    #: how both terms normalise (the code's ``mode``): ``"mean"`` (``mean_norm``, every script) or ``"mean_std"``
    #: (``mean_std_norm``: divided by the sample std + ``norm_eps``); BEACON reads it instead of ``norm``
    beacon_mode: str = "mean"
    #: take ``invalid_penalty`` off an invalid row's segment reward (the code's trainer); off: the milestones alone
    beacon_step_penalty: bool = True

    def __post_init__(self) -> None:
        import sys

        float_max = sys.float_info.max  # a number field given a larger int (c: 10**400) overflowed at the first step
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
            if f.type in ("int", int) and not isinstance(v, int):  # a count or a 0/1 switch: 1.0 failed in the kernels
                raise TypeError(f"CreditConfig.{f.name} must be an int, got {type(v).__name__} {v!r}")
            if isinstance(v, int) and f.type not in ("int", int) and not -float_max <= v <= float_max:
                shown = f"{str(v)[:12]}... ({len(str(abs(v)))} digits)" if len(str(v)) > 24 else str(v)
                raise ValueError(f"CreditConfig.{f.name} must be finite as a float (|x| <= {float_max:.4g}), got "
                                 f"{shown}")
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
        _check_beacon(self)

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


#: The largest magnitude of a G2PO value or weight (see :func:`_check_hgpo_g2po`).
G2PO_MAX = 1e100


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
    import math
    import sys

    # (H5) L^alpha with L up to K + 1 + shift, summed over K + 2 items, must stay a finite float64 (1e300 was an
    # OverflowError at the first credit step)
    longest = int(config.hgpo_history) + 1 + config.hgpo_weight_shift
    if longest > 1:
        top = math.log(sys.float_info.max / (int(config.hgpo_history) + 2)) / math.log(longest)
        if config.hgpo_alpha > top:
            raise ValueError(f"CreditConfig.hgpo_alpha must be at most {top:.4g} with hgpo_history="
                             f"{config.hgpo_history} (L^alpha of the longest context, L = {longest}, must be a "
                             f"finite float64), got {config.hgpo_alpha}")
    # (G3, G7) values and weight whose squares in the group statistics overflow gave NaN / inf advantages
    for name in ("g2po_success_value", "g2po_failure_value", "g2po_w"):
        if abs(getattr(config, name)) > G2PO_MAX:
            raise ValueError(f"CreditConfig.{name} must be at most {G2PO_MAX:g} in magnitude (larger values "
                             f"overflow float64 in the group statistics), got {getattr(config, name)}")


def _check_beacon(config: CreditConfig) -> None:
    """The ranges of the BEACON fields (their types are checked with the others')."""
    if not 0.0 <= config.beacon_gamma <= 1.0:
        raise ValueError(f"CreditConfig.beacon_gamma must be in [0, 1], got {config.beacon_gamma}")
    if not 0.0 <= config.beacon_weight <= G2PO_MAX:  # its square in no statistic, but w * A_seg must stay finite
        raise ValueError(f"CreditConfig.beacon_weight must be in [0, {G2PO_MAX:g}], got {config.beacon_weight}")


#: The paper's estimator on ALFWorld: table 5's values and the paper's reading of the four points where its text
#: and the spec's [decided] items differ (spec section 12, points 2-5: every field of :data:`PAPER_READING` on).
#: The episode term keeps the row convention of the framework the paper ran on (point 1).
ALFWORLD_PAPER = CreditConfig()
#: The paper's estimator on WebShop: table 5's WebShop column, the paper's reading; BEACON's WebShop script's gamma
#: and w (its own fields: no other method reads them).
WEBSHOP_PAPER = ALFWORLD_PAPER.replace(theta_m=0.5, kappa_bc=1, rho=0.5, eta=1.0, norm="mean", beacon_gamma=0.95,
                                       beacon_weight=1.0)
#: Table 5 under the spec's [decided] reading of the four points (every field of :data:`PAPER_READING` off):
#: C(v) counts no self-loop and is max-normalised over success-visited nodes other than g; a self-loop enters
#: neither b(v) (eq. 14) nor psi~(v) (eq. 16); psi-bar is normalised over the nodes other than g. It is what
#: ``alfworld`` meant before the paper's full text was read (2026-12-03); it stays so that those runs and
#: figures can be reproduced and compared, paired, with the paper's reading. It changes C(v) of looping states,
#: b(v) / psi~(v) where a state's best incoming edge is its own loop, and the scale of psi-bar (hence E(v)) in
#: most groups with a success; r^G, the episode term and every baseline are the same.
ALFWORLD_SPEC = ALFWORLD_PAPER.replace(**{name: False for name in PAPER_READING})
#: WebShop's column of table 5 under the spec's reading (see :data:`ALFWORLD_SPEC`).
WEBSHOP_SPEC = WEBSHOP_PAPER.replace(**{name: False for name in PAPER_READING})
#: The benchmarks' default presets: the paper's estimator.
ALFWORLD = ALFWORLD_PAPER
WEBSHOP = WEBSHOP_PAPER
#: What verl-agent's GiGPO code computes with its ALFWorld script (``gigpo/core_gigpo.py`` and its trainer):
#: the row episode score Z = summed reward - 0.1 on an invalid row, standardised over the task group's rows
#: (sample std, + 1e-6; one row: mean 0, std 1), R_t discounted with 0.95 and 0.1 subtracted from an invalid
#: row's R_t after discounting, step groups by exact state, A = episode + step (weight 1): the paper's preset
#: with ``invalid_penalty_on_step_return``. Not reproduced: float32 arithmetic and its zero-variance residue,
#: the trainer's random duplicate rows (docs/algorithm.md section 9).
GIGPO_REFERENCE = ALFWORLD_PAPER.replace(invalid_penalty_on_step_return=True)
#: verl-agent's GiGPO with its WebShop script: as :data:`GIGPO_REFERENCE`, mean normalisation (``mean_norm``).
GIGPO_REFERENCE_WEBSHOP = WEBSHOP_PAPER.replace(invalid_penalty_on_step_return=True)
#: What verl-agent's GraphGPO recipe computes with its ALFWorld script (``recipe/GraphGPO/core_graph.py`` as its
#: trainer calls it): GiGPO's episode term, r^G = 10 * 0.1^d(s_{t+1}, g) with a node that cannot reach g at the
#: group's largest finite distance + 1 (a group without a success: 10 * 0.1 on every row), 0.1 subtracted from
#: an invalid row's r^G, standardised per (group, state); A = graph + episode (weights 1). ``milegpo`` under it
#: runs the paper's shaping on that r^G. Not reproduced: float32 and its zero-variance residue (up to 0.0074).
GRAPHGPO_REFERENCE = ALFWORLD_PAPER.replace(gamma_g=0.1, graph_unreachable="max_plus_one",
                                            invalid_penalty_on_graph_return=True)
#: verl-agent's GraphGPO recipe with its WebShop script: as :data:`GRAPHGPO_REFERENCE` with gamma_G 0.2 and
#: ``mean_std_norm`` (the recipe's, not table 5's mean), on WebShop's table-5 shaping values.
GRAPHGPO_REFERENCE_WEBSHOP = WEBSHOP_PAPER.replace(gamma_g=0.2, norm="mean_std", graph_unreachable="max_plus_one",
                                                   invalid_penalty_on_graph_return=True)
#: The GraphGPO recipe as a third-party reproduction's docstrings describe it (issue 33), which is NOT what
#: verl-agent's code computes (``GRAPHGPO_REFERENCE`` is): a trajectory's return 10 * success - 0.1 * n_invalid
#: on all its rows, standardised once per trajectory (one trajectory or zero variance: 0); r^G = 10 *
#: 0.1^d(s_{t+1}, g), max + 1 for unreachable nodes, no penalty on r^G; GiGPO's immediate reward -0.1 on an
#: invalid row, discounted with 0.95. Kept so that the issue-33 measurements (notes/parity.md) stay reproducible.
GRAPHGPO_REPRODUCTION = ALFWORLD_SPEC.replace(gamma_g=0.1, graph_unreachable="max_plus_one",
                                              episode_penalty="trajectory", episode_norm_over="trajectories",
                                              episode_single_value="zero", invalid_penalty_in_step_reward=True)
#: BEACON's official scripts (``ZJU-REAL/BEACON`` ``examples/migpo_trainer/run_{alfworld,webshop,sciworld}.sh``): gamma,
#: w, the invalid-action penalty p (the trainer's ``invalid_action_penalty_coef``, on the episode score and the
#: segment reward alike), ``mean_norm`` everywhere; each on its world's preset of the paper (ScienceWorld, which
#: has none: the ALFWorld one). ``ALFWORLD`` / ``WEBSHOP`` hold their world's gamma and w already (p stays the
#: paper's 0.1). In a ``milegpo train`` run ``--invalid_action_penalty`` sets p: the recipes give it.
BEACON_ALFWORLD = ALFWORLD_PAPER.replace(beacon_gamma=0.9, beacon_weight=10.0, beacon_mode="mean", invalid_penalty=0.1)
BEACON_WEBSHOP = WEBSHOP_PAPER.replace(beacon_gamma=0.95, beacon_weight=1.0, beacon_mode="mean", invalid_penalty=1.0)
BEACON_SCIENCEWORLD = ALFWORLD_PAPER.replace(beacon_gamma=0.95, beacon_weight=1.0, beacon_mode="mean",
                                             invalid_penalty=0.1)
#: every preset by its name (``get_preset``, ``--credit_preset``, ``--preset``, recipes, task files)
PRESETS = {"alfworld": ALFWORLD, "webshop": WEBSHOP, "alfworld_paper": ALFWORLD_PAPER, "webshop_paper": WEBSHOP_PAPER,
           "alfworld_spec": ALFWORLD_SPEC, "webshop_spec": WEBSHOP_SPEC, "gigpo_reference": GIGPO_REFERENCE,
           "gigpo_reference_webshop": GIGPO_REFERENCE_WEBSHOP, "graphgpo_reference": GRAPHGPO_REFERENCE,
           "graphgpo_reference_webshop": GRAPHGPO_REFERENCE_WEBSHOP, "graphgpo_reproduction": GRAPHGPO_REPRODUCTION,
           "beacon_alfworld": BEACON_ALFWORLD, "beacon_webshop": BEACON_WEBSHOP,
           "beacon_scienceworld": BEACON_SCIENCEWORLD}


def get_preset(name: str) -> CreditConfig:
    """The preset ``name`` (any case); an unknown name is a ValueError listing the known ones, a name that is no str a
    TypeError (None was an AttributeError)."""
    if not isinstance(name, str):
        raise TypeError(f"a credit preset is named by a str (one of {sorted(PRESETS)}), got {type(name).__name__} "
                        f"{name!r}")
    try:
        return PRESETS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown credit preset {name!r}; known: {sorted(PRESETS)}") from None


__all__ = ["ALFWORLD", "WEBSHOP", "ALFWORLD_PAPER", "WEBSHOP_PAPER", "ALFWORLD_SPEC", "WEBSHOP_SPEC",
           "GRAPHGPO_REFERENCE", "GRAPHGPO_REFERENCE_WEBSHOP", "GIGPO_REFERENCE", "GIGPO_REFERENCE_WEBSHOP",
           "GRAPHGPO_REPRODUCTION", "BEACON_ALFWORLD", "BEACON_WEBSHOP", "BEACON_SCIENCEWORLD", "PRESETS", "PAPER_READING", "CHOICES", "CreditConfig", "get_preset", "VARIANTS",
           "NORMS", "MAX_COUNT"]
