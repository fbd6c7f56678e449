"""The credit methods, one registry: every list of methods reads :data:`METHODS`.

A method is a :class:`CreditMethod`: its name, its two estimators (the plain-Python oracle and the
vectorised pipeline), the arrays its result carries, its variants and the settings the quality tables
measure it under. :func:`milegpo.credit.estimate` dispatches through it, :class:`~milegpo.credit.CreditResult`
reads its keys, ``MileGPOConfig.credit_method`` and ``milegpo credit`` take its names, and the ground-truth
tables (:func:`milegpo.evidence.quality.credit_quality`), the job's advantage plot and the experiments take
:func:`method_variants`.

Adding a method is one module and one registration::

    from milegpo.credit import register, CreditMethod
    from milegpo.credit.reference import ReferenceTerms
    from milegpo.credit.vectorized import method_tables

    def my_reference(terms: ReferenceTerms) -> list[float]:      # fill terms.row_vals, return N advantages
        ...
    def my_tables(rows, row_values, config, variant):          # GroupOrderedRows -> Tables
        return method_tables("mine", rows, advantage, row_values)

    register(CreditMethod("mine", "what its advantage is", my_reference, my_tables,
                          row_keys=("episode_score", "episode_adv")))

The four methods of the paper are registered at the bottom of this module; their estimators are the
stage functions of :mod:`.reference` and :mod:`.vectorized`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from . import reference, vectorized
from .config import VARIANTS


@dataclass(frozen=True)
class CreditMethod:
    """One credit method.

    name: what ``estimate(batch, name)`` and ``--credit_method`` take.
    summary: one line, what its advantage is (the spec's equation).
    reference: ``(ReferenceTerms) -> list[float]``, the N advantages by the plain-Python oracle
      (:func:`milegpo.credit.reference.estimate_reference` hands it the batch's rows, task groups and
      Norm_q(Z); it fills ``row_vals`` / ``node_vals``).
    vectorized: ``(GroupOrderedRows, row_values, CreditConfig, variant) -> Tables``, the same on the
      torch / Triton pipeline (:func:`milegpo.credit.vectorized.credit_tables` hands it the ordered rows
      with ``episode_score`` / ``episode_adv``).
    row_keys: the per-row arrays of its result (``CreditResult.rows``), in this order.
    node_keys: its per-node arrays (``CreditResult.nodes``; empty: no rollout graph).
    variants: the variants whose advantages differ (MileGPO's ``md`` / ``rcs`` / ``full``); a method with
      one variant ignores ``variant``.
    settings: more settings the quality tables measure it under: label -> CreditConfig changes.
    """

    name: str
    summary: str
    reference: Callable[..., list]
    vectorized: Callable[..., Any]
    row_keys: tuple[str, ...]
    node_keys: tuple[str, ...] = ()
    variants: tuple[str, ...] = ("full",)
    settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self):
        unknown = [v for v in self.variants if v not in VARIANTS]
        if not self.name or not self.variants or unknown:
            raise ValueError(f"CreditMethod {self.name!r}: needs a name and variants of {VARIANTS}, got "
                             f"{self.variants}")

    def display_name(self, variant: str) -> str:
        """How the job names a run of it: ``milegpo/full`` for a method of several variants, else its name."""
        return f"{self.name}/{variant}" if len(self.variants) > 1 else self.name

    def labels(self) -> dict[str, tuple[str, str, dict]]:
        """label -> (method, variant, CreditConfig changes): one per variant (``milegpo-md``...; the name
        alone for a method of one variant), then its :attr:`settings`."""
        several = len(self.variants) > 1
        out = {f"{self.name}-{v}" if several else self.name: (self.name, v, {}) for v in self.variants}
        out.update({label: (self.name, self.variants[-1], dict(changes)) for label, changes in self.settings.items()})
        return out


#: name -> CreditMethod, in registration order (the order every table and plot lists them)
METHODS: dict[str, CreditMethod] = {}


def register(method: CreditMethod, replace: bool = False) -> CreditMethod:
    """Add ``method`` to :data:`METHODS` (a name taken is an error unless ``replace``); returns it."""
    if not isinstance(method, CreditMethod):
        raise TypeError(f"register: expected a CreditMethod, got {type(method).__name__}")
    if method.name in METHODS and not replace:
        raise ValueError(f"register: a credit method {method.name!r} is registered already (replace=True to "
                         "replace it)")
    METHODS[method.name] = method
    return method


def get_method(name: str) -> CreditMethod:
    """The registered method ``name``; an unknown name is a ValueError listing the known ones."""
    try:
        return METHODS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown credit method {name!r}; expected one of {tuple(METHODS)}") from None


def check_advantages(method: str, advantages, n: int, values: bool = True):
    """What the registered method ``method`` returned for a batch of ``n`` rows, checked: ``advantages`` (a list of
    numbers, the ``reference`` estimator's, or a tensor) must be ``n`` values of a floating dtype, and with
    ``values`` every one finite (that reads the values: off inside a CUDA-graph capture). A ValueError naming the
    method and what it returned; returns the advantages as a tensor (a list: float64)."""
    import torch

    where = f"credit method {method!r} returned"
    if not isinstance(advantages, torch.Tensor):
        try:
            advantages = torch.tensor(advantages, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError, OverflowError) as e:
            raise ValueError(f"{where} advantages that are not a list of numbers ({type(e).__name__}: "
                             f"{str(e).splitlines()[0] if str(e) else ''}); expected {n} floats, one per row") from None
    if tuple(advantages.shape) != (n,):
        raise ValueError(f"{where} advantages of shape {tuple(advantages.shape)} for a batch of {n} rows; expected "
                         f"({n},): one per row")
    if not advantages.is_floating_point():
        raise ValueError(f"{where} {advantages.dtype} advantages; expected a floating dtype (float32 / float64)")
    if values and n:
        finite = torch.isfinite(advantages)
        if not bool(finite.all()):
            row = int((~finite).nonzero()[0, 0])
            raise ValueError(f"{where} a non-finite advantage ({float(advantages[row])}) at row {row} of {n}; every "
                             "advantage must be finite")
    return advantages


def check_method(method: str, variant: str) -> None:
    """A ValueError for an unknown method or an unknown variant (any method takes any of :data:`VARIANTS`)."""
    get_method(method)
    if variant not in VARIANTS:
        raise ValueError(f"unknown MileGPO variant {variant!r}; expected one of {VARIANTS}")


def method_variants(settings: bool = True) -> dict[str, tuple[str, str, dict]]:
    """label -> (method, variant, CreditConfig changes) of every registered method's variants, and with
    ``settings`` their extra settings: the rows of the quality tables, the job's advantage plot and the
    method comparisons (``grpo``, ``gigpo``, ``gigpo-verl``, ``graphgpo``, ``milegpo-md``, ``milegpo-rcs``,
    ``milegpo-full``)."""
    out: dict[str, tuple[str, str, dict]] = {}
    for method in METHODS.values():
        labels = method.labels()
        out.update(labels if settings else {k: v for k, v in labels.items() if k not in method.settings})
    return out


# ------------------------------------------------------------------------------------------ the paper's four
register(CreditMethod(
    "grpo", "A = Norm_q(Z): the episode term alone (eq. 22 with w_step = 0)",
    reference.grpo_reference, vectorized.grpo_tables, row_keys=("episode_score", "episode_adv")))
register(CreditMethod(
    "gigpo", "A = Norm_q(Z) + step_weight * Norm_{q,s}(R_t): GiGPO's step groups of one state (spec section 9)",
    reference.gigpo_reference, vectorized.gigpo_tables,
    row_keys=("episode_score", "episode_adv", "step_return", "step_adv"),
    # verl-agent's trainer: the penalty after discounting, in place of a preset's in the step reward (graphgpo_reproduction)
    settings={"gigpo-verl": {"invalid_penalty_on_step_return": True, "invalid_penalty_in_step_reward": False}}))
register(CreditMethod(
    "graphgpo", "A = w_step * A^G + w_ep * Norm_q(Z): the rollout graph's return (eqs. 1, 21-22 with eta = 0)",
    reference.graphgpo_reference, vectorized.graphgpo_tables,
    row_keys=("episode_score", "episode_adv", "r_graph", "a_graph", "node", "next_node"),
    node_keys=("group", "key", "is_sink", "dist")))
register(CreditMethod(
    "milegpo", "A = w_step * (A^G + eta * A^res) + w_ep * Norm_q(Z): milestone / trap shaping (eqs. 1-22)",
    reference.milegpo_reference, vectorized.milegpo_tables,
    row_keys=("episode_score", "episode_adv", "r_graph", "a_graph", "node", "next_node", "r_shaped", "a_mix",
              "a_res", "delta_pos", "delta_neg"),
    node_keys=("group", "key", "is_sink", "dist", "n_traj", "n_pos", "n_revisit", "coverage", "is_milestone",
               "is_trap", "s0_pos", "s_neg", "s_pcc", "b", "psi_bar", "retained", "phi_pos", "phi_neg"),
    variants=("md", "rcs", "full")))


# ------------------------------------------------------------------------------------------ the field's methods
from . import beacon, g2po, hgpo  # noqa: E402  (they import reference / vectorized, never this module at import time)

register(CreditMethod(
    "hgpo", "A = sum_m w_m * Norm_{q, last m states}(R_t), w_m ~ (m + 1)^alpha: GiGPO's step groups at depths "
    "of history 1..K+1 (HGPO, arXiv 2602.22817)",
    hgpo.hgpo_reference, hgpo.hgpo_tables, row_keys=hgpo.ROW_KEYS))
register(CreditMethod(
    "g2po", "A = Norm_q(Z) + w * (Norm_{q,s}(V') + Norm_q(V' - V(s))): node values on the group's state graph "
    "(G2PO, arXiv 2606.22995)",
    g2po.g2po_reference, g2po.g2po_tables, row_keys=g2po.ROW_KEYS))

register(CreditMethod(
    "beacon", "A = Norm_q(Z) + w * Norm_{q, segment}(10 * gamma^(m_k - t)): segments between the environment's "
    "milestones (BEACON, the official code's dynamic-milestone path)",
    beacon.beacon_reference, beacon.beacon_tables, row_keys=beacon.ROW_KEYS))

__all__ = ["CreditMethod", "METHODS", "register", "get_method", "check_method", "check_advantages", "method_variants"]
