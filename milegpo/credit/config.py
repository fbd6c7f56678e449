"""CreditConfig: every parameter of docs/algorithm.md, and the presets: the paper's (table 5 under the paper's
reading, the defaults), the spec's reading of the same table, and what verl-agent's GiGPO / GraphGPO code computes.

The fields are declared, as :class:`~milegpo.credit.registry.ConfigField` (name, default, help with the equation,
kind, range check), in :data:`PAPER_FIELDS` here (the paper's four methods and the episode term every method
shares) and by the other methods in their own modules (``hgpo_*`` in :mod:`milegpo.credit.hgpo`, ``g2po_*`` in
:mod:`milegpo.credit.g2po`): :class:`CreditConfig` takes every field of the registry
(:data:`milegpo.credit.registry.CONFIG_FIELDS`), and which method reads which field is each method's declaration.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from milegpo_kernels.scoring import VARIANTS  # re-exported: the variants graph_scores computes

from .registry import CONFIG_FIELDS, ConfigField, config_checks, declare_fields, field_readers

NORMS = ("mean_std", "mean")
#: the largest count threshold (``min_node_support``, ``min_trap_visits``): int32's maximum, the width the Triton
#: kernels take a Python int scalar at; no batch holds more trajectories (a larger threshold overflowed there)
MAX_COUNT = 2 ** 31 - 1
#: where the invalid-action penalty enters a method's step term, one vocabulary for every method's
#: ``<term>_penalty`` field (``step_penalty``, ``graph_penalty``, ``hgpo_penalty``, ``g2po_penalty``); it enters the
#: episode score Z (eq. 22) in every case (``episode_penalty`` says how):
#: ``"none"``: nowhere else; ``"reward"``: off an invalid row's reward before the step return is discounted, so
#: the trajectory's earlier rows carry it too; ``"return"``: off an invalid row's own step-term target after
#: discounting (GiGPO's and HGPO's R_t, GraphGPO's and MileGPO's r^G, G2PO's reached value V')
PENALTY_PLACES = ("none", "reward", "return")


# ------------------------------------------------------------------------------------------ range checks
def unit_interval(name: str, v) -> None:
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"CreditConfig.{name} must be in [0, 1], got {v}")


def non_negative(name: str, v) -> None:
    if v < 0:
        raise ValueError(f"CreditConfig.{name} must be >= 0, got {v}")


def zero_or_one(name: str, v) -> None:
    if v not in (0, 1):
        raise ValueError(f"CreditConfig.{name} must be 0 or 1, got {v}")


def trajectory_count(name: str, v) -> None:
    if int(v) != v or not 1 <= v <= MAX_COUNT:
        raise ValueError(f"CreditConfig.{name} must be a whole number in [1, {MAX_COUNT}] (a count of "
                         f"trajectories), got {v}")


def _field(name: str, default: Any, kind: Any, help: str, check=None, every_method: bool = False) -> ConfigField:
    return ConfigField(name, default, " ".join(help.split()), kind, check, every_method)


# ------------------------------------------------------------------------------------------ the paper's fields
#: the fields of the paper's four methods and the episode term (spec section 8), in the order ``to_dict`` lists them
PAPER_FIELDS = (
    # GraphGPO return (eq. 1)
    _field("c", 10.0, float, "c of eq. 1, r^G = c * gamma_G^d(s_{t+1}, g), and of r^M (eq. 20).", non_negative),
    _field("gamma_g", 0.2, float, "gamma_G of eq. 1, the decay of r^G per hop to g.", unit_interval),
    _field("graph_distance_offset", 0, int, """hops added to d(s_{t+1}, g) in eq. 1, 0 or 1: 0 (the spec, and the
        public GraphGPO recipe: r^G = c * gamma_G^d(s_{t+1}, g), c on the winning row) or 1 (the GraphGPO paper's
        eq. 4: c * gamma_G^(d(s_{t+1}, g) + 1)). Unreachable stays unreachable.""", zero_or_one),
    _field("graph_unreachable", "zero", ("zero", "max_plus_one"), """r^G (eq. 1) of a row whose s_{t+1} cannot reach
        g: "zero" (the spec and the paper: the distance is infinite, r^G = 0; a group without a success has r^G = 0
        everywhere) or "max_plus_one" (verl-agent's GraphGPO recipe, all_to_target_shortest_paths: such a node is at
        distance (the largest finite d(., g) in its group, g's 0 included) + 1, then graph_distance_offset is added;
        in a group without a success every node is at 0 + 1, so r^G = c * gamma_G on every row, which normalises to
        0 unless graph_penalty moves some rows). Only r^G reads it: PCC's dd(e) (eq. 15) and the node table's dist
        keep the search's distances (-1: unreachable)."""),
    _field("graph_penalty", "none", ("none", "return"), """where invalid_penalty enters r^G (eq. 1; PENALTY_PLACES):
        "none" (the spec and the paper: the episode score only) or "return" (verl-agent's GraphGPO recipe trainer,
        its apply_invalid_action_penalty on step_rewards, which hold r^G there: r^G_t - invalid_penalty on an
        invalid row, in every group, an all-fail one too; r^M (eq. 20) is built on the penalised r^G)."""),
    # potentials and shaping (eqs. 7-10, 20)
    _field("omega", 0.2, float, "omega of eqs. 7, 8, 19: a potential's decay per hop to its candidate.",
           unit_interval),
    _field("gamma_phi", 1.0, float, "gamma_Phi of the shaping terms delta+ / delta- (eqs. 9-10).", unit_interval),
    _field("lam", 0.25, float, "lambda of r^M = r^G + c * lambda * (delta+ - delta-) (eq. 20).", non_negative),
    _field("w_pos", 1.0, float, "w+ of delta+ (eq. 9).", non_negative),
    _field("w_neg", 0.25, float, "w- of delta- (eq. 10).", non_negative),
    # milestone / trap scores (eqs. 2-6)
    _field("w_s", 1.0, float, "w_s, the weight of the lift l+(v) in S0+(v) (eq. 5).", non_negative),
    _field("w_m", 1.0, float, "w_m, the weight of the coverage m(v) in S0+(v) (eq. 5).", non_negative),
    _field("w_c", 0.25, float, "w_c, the weight of the centrality C(v) in S0+(v) (eq. 5).", non_negative),
    _field("w_f", 1.0, float, "w_f, the weight of the lift l-(v) in S-(v) (eq. 6).", non_negative),
    _field("w_l", 0.25, float, "w_l, the weight of f-(v) * L(v) in S-(v) (eq. 6).", non_negative),
    _field("min_node_support", 1, int, "won trajectories a milestone candidate needs (S+, eq. 2).",
           trajectory_count),
    _field("degree_self_loops", True, bool, """deg(v) of C(v) (eq. 5) counts a self-loop (v, v): once in the
        in-degree and once in the out-degree (the paper: C(v) is v's in-degree plus out-degree; spec section 12,
        point 2). False (the spec [decided]): self-loops not counted. Edges into g count either way."""),
    _field("degree_max_with_sink", True, bool, """the max of deg that C(v) (eq. 5) is divided by runs over the
        success-visited nodes with g among them (the paper: every won trajectory visits g; point 3): deg(g) = its
        distinct incoming edges. False (the spec [decided]): g is in no max-normaliser. g is never a milestone
        either way."""),
    _field("min_trap_visits", 2, int, "failed trajectories a trap candidate needs without a revisit (S-, eq. 6).",
           trajectory_count),
    _field("min_trap_score", 0.10, float, "the least S-(v) of a trap (eq. 6).", non_negative),
    # progress-contrastive calibration (eqs. 11-19)
    _field("evidence_self_loops", True, bool, """a self-loop (v, v) is an incoming edge of v in the branch evidence
        b(v) (eq. 14) and the progress evidence psi~(v) (eq. 16) (the paper: every incoming e = (u, v); point 4).
        False (the spec [decided]): u != v there. A self-loop is a branch of v in eq. 12 either way."""),
    _field("progress_max_with_sink", True, bool, """g's own psi~ (its incoming edges u -> g, eq. 16) is in the max
        over all nodes V_q that psi-bar is divided by (the paper; point 5), and psi-bar(g) is reported as psi~(g) /
        that max. False (the spec [decided]): the max over the nodes other than g, psi-bar(g) = 0. g is never a
        milestone either way."""),
    _field("a_d", 1.0, float, "a_d, the weight of the distance gain dd(e) in psi(e) (eq. 15).", non_negative),
    _field("a_s", 1.0, float, "a_s, the weight of p+(v) - p_q+ in psi(e) (eq. 15).", non_negative),
    _field("a_f", 1.0, float, "a_f, the weight of the failure lift l-(e) in psi(e) (eq. 15).", non_negative),
    _field("w_bc", 1.0, float, "w_bc, the weight of b(v) in E(v) (eq. 17).", non_negative),
    _field("w_pg", 1.0, float, "w_pg, the weight of psi-bar(v) in E(v) (eq. 17).", non_negative),
    _field("w_pcc", 1.0, float, "w_pcc of S_pcc+ = S0+ * (1 + w_pcc * E) (eq. 18).", non_negative),
    _field("theta_m", 1.1, float, "theta_m: a candidate with m(v) >= theta_m is retained (eq. 18).", non_negative),
    _field("kappa_bc", 0, int, "kappa_bc, 0 or 1: 1 retains a candidate with b(v) > 0 (eq. 18).", zero_or_one),
    _field("rho", 0.0, float, "rho: S_pcc+ = rho * S0+ for a candidate not retained (eq. 18).", non_negative),
    # advantage (eqs. 21-22)
    _field("eta", 0.20, float, "eta of A = w_step * (A^G + eta * A^res) + w_ep * Norm_q(Z) (eq. 22).", non_negative),
    _field("w_step", 1.0, float, "w_step of eq. 22 (GraphGPO, MileGPO).", non_negative),
    _field("w_ep", 1.0, float, "w_ep of eq. 22 (GraphGPO, MileGPO).", non_negative),
    _field("norm", "mean_std", NORMS, """Norm of eqs. 21-22 (and of every method's step groups): "mean_std" (x -
        mean) / (std + norm_eps), sample std, or "mean" x - mean.""", every_method=True),
    _field("norm_eps", 1e-6, float, "eps of Norm's std (eqs. 21-22).", non_negative, every_method=True),
    _field("invalid_penalty", 0.1, float, "subtracted from the episode score Z of an invalid row (eq. 22; "
           "episode_penalty says how; each method's <term>_penalty where else).", non_negative, every_method=True),
    _field("episode_penalty", "row", ("row", "trajectory"), """how invalid_penalty enters the episode score Z (eq.
        22): "row" (the spec): Z of a row is its trajectory's summed reward, minus invalid_penalty when that row is
        invalid; "trajectory" (the public GraphGPO recipe): every row of a trajectory gets its return, the summed
        reward minus invalid_penalty times the trajectory's number of invalid rows (10 * success - 0.1 * n_invalid
        on ALFWorld, where the winning row's reward is 10 and every other is 0).""", every_method=True),
    _field("episode_norm_over", "rows", ("rows", "trajectories"), """what Norm_q (eq. 22) standardises over in a
        task group: "rows" (the spec, and the recipe's original helper): the Z of every row, a trajectory's score
        counted once per row (long trajectories weigh more); "trajectories" (the public GraphGPO recipe): the K
        trajectory returns, once each, the value broadcast to the trajectory's rows. "trajectories" needs
        episode_penalty="trajectory" (one score per trajectory).""", every_method=True),
    _field("episode_single_value", "unit", ("unit", "zero"), """Norm_q (eq. 22) of a group holding one value (one
        row under "rows", one trajectory under "trajectories"): "unit" (the spec, verl-agent's episode_norm_reward:
        mean 0, std 1, the value itself / (1 + norm_eps)) or "zero" (the public GraphGPO recipe: 0, as for zero
        variance).""", every_method=True),
    # GiGPO baseline (spec section 9)
    _field("gamma", 0.95, float, "gamma of GiGPO's and HGPO's step return R_t = sum_k gamma^(k-t) r_k.",
           unit_interval),
    _field("step_weight", 1.0, float, "GiGPO's A = Norm_q(Z) + step_weight * Norm_{q,s}(R_t).", non_negative),
    _field("step_penalty", "none", PENALTY_PLACES, """where invalid_penalty enters GiGPO's step return R_t
        (PENALTY_PLACES): "none" (the spec: the episode score only); "reward" (the public GraphGPO recipe's GiGPO:
        R_t = sum_{k >= t} gamma^(k-t) (reward_k - invalid_penalty * invalid_k), so the penalty is discounted into
        the trajectory's earlier rows); "return" (verl-agent's trainer, apply_invalid_action_penalty on its
        step_rewards, on in its example scripts: R_t - invalid_penalty on an invalid row, after discounting)."""),
    _field("threshold_tol", 1e-12, float, """the thresholds "x > 0" and "x >= theta" of eqs. 6, 14, 16, 18 are taken
        as x > tol and x >= theta - tol, so that a value mathematically on the threshold is not moved across it by a
        rounding residue (e.g. a sibling mean of three equal 1/3s).""", non_negative),
)
declare_fields(*PAPER_FIELDS)

#: the switches between the paper's text and the spec's [decided] reading (spec section 12, points 2-5): True is
#: the paper's (the defaults, ``ALFWORLD_PAPER``), False the spec's (``ALFWORLD_SPEC``)
PAPER_READING = ("degree_self_loops", "degree_max_with_sink", "evidence_self_loops", "progress_max_with_sink")


def choices() -> dict[str, tuple[str, ...]]:
    """The CreditConfig fields that take one of a few names, with those names (the spec's first)."""
    return {name: f.kind for name, f in CONFIG_FIELDS.items() if isinstance(f.kind, tuple)}


def check_value(f: ConfigField, v: Any) -> None:
    """Refuse value ``v`` of field ``f``: a TypeError for the wrong kind, a ValueError out of range, each naming
    ``CreditConfig.<name>``."""
    name = f.name
    if isinstance(f.kind, tuple):
        if not isinstance(v, str) or v not in f.kind:
            raise ValueError(f"CreditConfig.{name} must be one of {f.kind}, got {v!r}")
        return
    if f.kind is bool:
        if not isinstance(v, bool):
            raise TypeError(f"CreditConfig.{name} must be a bool, got {type(v).__name__} {v!r}")
        return
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"CreditConfig.{name} must be a number, got {type(v).__name__} {v!r}")
    if f.kind is int and not isinstance(v, int):  # a count or a 0/1 switch: 1.0 failed in the kernels
        raise TypeError(f"CreditConfig.{name} must be an int, got {type(v).__name__} {v!r}")
    float_max = sys.float_info.max  # a number field given a larger int (c: 10**400) overflowed at the first step
    if isinstance(v, int) and f.kind is not int and not -float_max <= v <= float_max:
        shown = f"{str(v)[:12]}... ({len(str(abs(v)))} digits)" if len(str(v)) > 24 else str(v)
        raise ValueError(f"CreditConfig.{name} must be finite as a float (|x| <= {float_max:.4g}), got {shown}")
    if v != v or v in (math.inf, -math.inf):
        raise ValueError(f"CreditConfig.{name} must be finite, got {v}")
    if f.check is not None:
        f.check(name, v)


def _check_episode_term(config: "CreditConfig") -> None:
    if config.episode_norm_over == "trajectories" and config.episode_penalty != "trajectory":
        raise ValueError("CreditConfig.episode_norm_over='trajectories' needs episode_penalty='trajectory' (one "
                         f"score per trajectory to standardise), got episode_penalty={config.episode_penalty!r}")


class CreditConfig:
    """Parameters of the MileGPO estimator and its baselines (spec section 8): one value per field of the registry
    (:data:`milegpo.credit.registry.CONFIG_FIELDS`; :func:`help_text` lists them with their help), read as attributes.

    Field names follow the spec's symbols: ``lam`` is lambda, ``w_pos``/``w_neg`` are w+/w-, ``gamma_g`` is
    gamma_G, ``gamma_phi`` is gamma_Phi. Frozen, compared and hashed by value; every value is checked where it
    enters (a TypeError or ValueError naming ``CreditConfig.<field>``). A field declared after a config was built
    (a method registered later) reads its default there.

    :attr:`changed`: the fields named since the preset this config came from (``CreditConfig(eta=0.5)``,
    ``.replace(eta=0.5)``, ``from_dict``), which :func:`milegpo.credit.estimate` refuses when the method does not
    read them (:func:`milegpo.credit.check_fields`); a preset changes none (:meth:`as_preset`)."""

    def __init__(self, **values: Any) -> None:
        unknown = sorted(set(values) - set(CONFIG_FIELDS))
        if unknown:
            raise TypeError(f"CreditConfig got unknown field(s) {unknown}; known fields: {sorted(CONFIG_FIELDS)}")
        self._build(values, frozenset(values), None)

    def _build(self, values: dict[str, Any], changed: frozenset, world: str | None) -> None:
        for name, f in CONFIG_FIELDS.items():
            v = values.get(name, f.default_in(world))
            check_value(f, v)
            object.__setattr__(self, name, v)
        object.__setattr__(self, "_changed", changed)
        object.__setattr__(self, "_world", world)
        _check_episode_term(self)
        for check in config_checks():
            check(self)

    def __getattr__(self, name: str) -> Any:
        # only for a name the instance lacks: a field declared after it was built reads its default there (its
        # world's, :attr:`ConfigField.world_defaults`, in a world's preset)
        if not name.startswith("_") and name in CONFIG_FIELDS:
            return CONFIG_FIELDS[name].default_in(self.__dict__.get("_world"))
        raise AttributeError(f"CreditConfig has no field {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot assign to field {name!r}: a CreditConfig is frozen (use .replace)")

    __delattr__ = __setattr__

    @property
    def world(self) -> str | None:
        """The benchmark whose preset this config comes from (``"alfworld"``, ``"webshop"``; None for one built from
        nothing, ``CreditConfig(...)``): a method's field whose official value differs per benchmark reads that
        world's value (:attr:`~milegpo.credit.registry.ConfigField.world_defaults`) when this config does not set
        it. Kept by :meth:`replace` and :meth:`as_preset`."""
        return self.__dict__.get("_world")

    @property
    def changed(self) -> frozenset:
        """The fields named since the preset this config came from (empty for a preset)."""
        return self._changed

    def values(self) -> dict[str, Any]:
        """field -> value of every declared field, in declaration order."""
        return {name: getattr(self, name) for name in CONFIG_FIELDS}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CreditConfig):
            return NotImplemented
        return self.values() == other.values()

    def __hash__(self) -> int:
        # the fields off their defaults: the hash stays when a method registered later declares more fields
        return hash(tuple((name, v) for name, v in self.values().items() if v != CONFIG_FIELDS[name].default))

    def __repr__(self) -> str:
        return f"CreditConfig({', '.join(f'{name}={v!r}' for name, v in self.values().items())})"

    def replace(self, **changes: Any) -> "CreditConfig":
        """A copy with some fields changed (they join :attr:`changed`); an unknown field name is an error."""
        unknown = sorted(set(changes) - set(CONFIG_FIELDS))
        if unknown:
            raise ValueError(f"unknown CreditConfig field(s) {unknown}; known fields: {sorted(CONFIG_FIELDS)}")
        out = object.__new__(CreditConfig)
        out._build({**self.values(), **changes}, self._changed | frozenset(changes), self.world)
        return out

    def as_preset(self) -> "CreditConfig":
        """The same values as a preset: no field counts as changed (a config shared by several methods, each of
        which reads its own fields)."""
        out = object.__new__(CreditConfig)
        out._build(self.values(), frozenset(), self.world)
        return out

    def in_world(self, world: str) -> "CreditConfig":
        """The same values as a preset of ``world`` (see :attr:`world`)."""
        out = object.__new__(CreditConfig)
        out._build(self.values(), frozenset(), world)
        return out

    @classmethod
    def from_dict(cls, values: dict[str, Any], base: "CreditConfig | None" = None) -> "CreditConfig":
        return (base or cls()).replace(**values)

    def to_dict(self) -> dict[str, Any]:
        return self.values()


def help_text(name: str) -> str:
    """The help of CreditConfig field ``name``, with the methods that read it."""
    f = CONFIG_FIELDS[name]
    return f"{f.help} Read by: {'every method' if f.every_method else ', '.join(field_readers(name)) or 'no method'}."


def _preset(base: CreditConfig, **changes: Any) -> CreditConfig:
    return base.replace(**changes).as_preset()


#: The paper's estimator on ALFWorld: table 5's values and the paper's reading of the four points where its text
#: and the spec's [decided] items differ (spec section 12, points 2-5: every field of :data:`PAPER_READING` on).
#: The episode term keeps the row convention of the framework the paper ran on (point 1).
ALFWORLD_PAPER = CreditConfig().in_world("alfworld")
#: The paper's estimator on WebShop: table 5's WebShop column, the paper's reading (a preset of the world
#: ``webshop``: a method's field whose WebShop script differs, BEACON's gamma and w, reads its WebShop value here).
WEBSHOP_PAPER = _preset(ALFWORLD_PAPER, theta_m=0.5, kappa_bc=1, rho=0.5, eta=1.0, norm="mean").in_world("webshop")
#: ScienceWorld, which table 5 has no column for: the ALFWorld values as a preset of the world ``scienceworld``, so
#: that a method whose ScienceWorld script differs reads its ScienceWorld value here (BEACON's gamma 0.95 and w 1:
#: the ALFWorld script's w 10 made its long-cell runs collapse, notes/milestone_truth.md). ``milegpo train --env
#: scienceworld`` and the evidence tools default to it.
SCIENCEWORLD = ALFWORLD_PAPER.in_world("scienceworld")
#: Table 5 under the spec's [decided] reading of the four points (every field of :data:`PAPER_READING` off):
#: C(v) counts no self-loop and is max-normalised over success-visited nodes other than g; a self-loop enters
#: neither b(v) (eq. 14) nor psi~(v) (eq. 16); psi-bar is normalised over the nodes other than g. It is what
#: ``alfworld`` meant before the paper's full text was read (2026-12-03); it stays so that those runs and
#: figures can be reproduced and compared, paired, with the paper's reading. It changes C(v) of looping states,
#: b(v) / psi~(v) where a state's best incoming edge is its own loop, and the scale of psi-bar (hence E(v)) in
#: most groups with a success; r^G, the episode term and every baseline are the same.
ALFWORLD_SPEC = _preset(ALFWORLD_PAPER, **{name: False for name in PAPER_READING})
#: WebShop's column of table 5 under the spec's reading (see :data:`ALFWORLD_SPEC`).
WEBSHOP_SPEC = _preset(WEBSHOP_PAPER, **{name: False for name in PAPER_READING})
#: The benchmarks' default presets: the paper's estimator.
ALFWORLD = ALFWORLD_PAPER
WEBSHOP = WEBSHOP_PAPER
#: What verl-agent's GiGPO code computes with its ALFWorld script (``gigpo/core_gigpo.py`` and its trainer):
#: the row episode score Z = summed reward - 0.1 on an invalid row, standardised over the task group's rows
#: (sample std, + 1e-6; one row: mean 0, std 1), R_t discounted with 0.95 and 0.1 subtracted from an invalid
#: row's R_t after discounting, step groups by exact state, A = episode + step (weight 1): the paper's preset
#: with ``step_penalty="return"``. Not reproduced: float32 arithmetic and its zero-variance residue, the trainer's
#: random duplicate rows (docs/algorithm.md section 9).
GIGPO_REFERENCE = _preset(ALFWORLD_PAPER, step_penalty="return")
#: verl-agent's GiGPO with its WebShop script: as :data:`GIGPO_REFERENCE`, mean normalisation (``mean_norm``).
GIGPO_REFERENCE_WEBSHOP = _preset(WEBSHOP_PAPER, step_penalty="return")
#: What verl-agent's GraphGPO recipe computes with its ALFWorld script (``recipe/GraphGPO/core_graph.py`` as its
#: trainer calls it): GiGPO's episode term, r^G = 10 * 0.1^d(s_{t+1}, g) with a node that cannot reach g at the
#: group's largest finite distance + 1 (a group without a success: 10 * 0.1 on every row), 0.1 subtracted from
#: an invalid row's r^G, standardised per (group, state); A = graph + episode (weights 1). ``milegpo`` under it
#: runs the paper's shaping on that r^G. Not reproduced: float32 and its zero-variance residue (up to 0.0074).
GRAPHGPO_REFERENCE = _preset(ALFWORLD_PAPER, gamma_g=0.1, graph_unreachable="max_plus_one", graph_penalty="return")
#: verl-agent's GraphGPO recipe with its WebShop script: as :data:`GRAPHGPO_REFERENCE` with gamma_G 0.2 and
#: ``mean_std_norm`` (the recipe's, not table 5's mean), on WebShop's table-5 shaping values.
GRAPHGPO_REFERENCE_WEBSHOP = _preset(WEBSHOP_PAPER, gamma_g=0.2, norm="mean_std", graph_unreachable="max_plus_one",
                                     graph_penalty="return")
#: The GraphGPO recipe as a third-party reproduction's docstrings describe it (issue 33), which is NOT what
#: verl-agent's code computes (``GRAPHGPO_REFERENCE`` is): a trajectory's return 10 * success - 0.1 * n_invalid
#: on all its rows, standardised once per trajectory (one trajectory or zero variance: 0); r^G = 10 *
#: 0.1^d(s_{t+1}, g), max + 1 for unreachable nodes, no penalty on r^G; GiGPO's immediate reward -0.1 on an
#: invalid row, discounted with 0.95. Kept so that the issue-33 measurements (notes/parity.md) stay reproducible.
GRAPHGPO_REPRODUCTION = _preset(ALFWORLD_SPEC, gamma_g=0.1, graph_unreachable="max_plus_one",
                                episode_penalty="trajectory", episode_norm_over="trajectories",
                                episode_single_value="zero", step_penalty="reward")
#: every preset by its name (``get_preset``, ``--credit_preset``, ``--preset``, recipes, task files)
PRESETS = {"alfworld": ALFWORLD, "webshop": WEBSHOP, "scienceworld": SCIENCEWORLD, "alfworld_paper": ALFWORLD_PAPER,
           "webshop_paper": WEBSHOP_PAPER, "alfworld_spec": ALFWORLD_SPEC, "webshop_spec": WEBSHOP_SPEC,
           "gigpo_reference": GIGPO_REFERENCE, "gigpo_reference_webshop": GIGPO_REFERENCE_WEBSHOP,
           "graphgpo_reference": GRAPHGPO_REFERENCE, "graphgpo_reference_webshop": GRAPHGPO_REFERENCE_WEBSHOP,
           "graphgpo_reproduction": GRAPHGPO_REPRODUCTION}


def add_preset(name: str, config: CreditConfig) -> CreditConfig:
    """Name a preset of a method's own (``beacon_webshop``, registered by :mod:`milegpo.credit.beacon`): ``config``
    as a preset under the lower-case ``name``, which every place that takes a preset's name then takes (a name
    taken is an error). Returns the preset."""
    if not isinstance(name, str) or not name or name.lower() != name or name in PRESETS:
        raise ValueError(f"add_preset: {name!r} must be a new lower-case name (taken: {sorted(PRESETS)})")
    PRESETS[name] = config.as_preset()
    return PRESETS[name]


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


__all__ = ["ALFWORLD", "WEBSHOP", "SCIENCEWORLD", "ALFWORLD_PAPER", "WEBSHOP_PAPER", "ALFWORLD_SPEC", "WEBSHOP_SPEC",
           "GRAPHGPO_REFERENCE", "GRAPHGPO_REFERENCE_WEBSHOP", "GIGPO_REFERENCE", "GIGPO_REFERENCE_WEBSHOP",
           "GRAPHGPO_REPRODUCTION", "PRESETS", "PAPER_READING", "PAPER_FIELDS", "PENALTY_PLACES", "CreditConfig",
           "get_preset", "add_preset", "choices", "check_value", "help_text", "unit_interval", "non_negative",
           "zero_or_one", "trajectory_count", "VARIANTS", "NORMS", "MAX_COUNT"]
