"""Potential-based shaping and the MileGPO step advantage, in one op (spec eqs. 9-10, 20-22).

:func:`shaped_advantage` takes the potentials Phi+ / Phi- of the rollout graph's nodes,
each row's node and next node, its graph return r^G and its episode advantage, and
returns the shaping terms, the shaped return, both returns normalised inside their
(group, state) node, the residual and the final advantage:

- ``delta_pos = max(gamma_phi * w_pos * Phi+(s') - w_pos * Phi+(s), 0)`` (eq. 9), and
  ``delta_neg`` likewise with Phi- and w_neg (eq. 10);
- ``r_shaped = r^G + c * lam * (delta_pos - delta_neg)`` (eq. 20);
- ``a_graph = Norm_{q,s}(r^G)``, ``a_mix = Norm_{q,s}(r_shaped)``, ``a_res = a_mix - a_graph``
  (eq. 21), normalised as :func:`~milegpo_kernels.segment_normalize` does (singletons 0);
- ``adv = w_step * (a_graph + eta * a_res) + w_ep * episode_adv`` (eq. 22).

The torch twin is ~30 small ops and two segment normalisations; the Triton path
(:mod:`milegpo_kernels.shaping.triton_ops`) is three passes over the rows after one memset.

Inputs: ``phi`` (V, 2) float64 (Phi+, Phi-); ``node``, ``next_node`` (N,) int64 in
``[0, V)``; ``r_graph``, ``episode_adv`` (N,) float64.
"""

from __future__ import annotations

from .._backend import resolve
from .torch_ops import ShapedAdvantage, ShapingParams, check_inputs, shaped_advantage_torch

__all__ = ["ShapedAdvantage", "ShapingParams", "shaped_advantage", "shaped_advantage_torch"]


def shaped_advantage(phi, node, next_node, r_graph, episode_adv, params: ShapingParams, *,
                     backend: str = "auto") -> ShapedAdvantage:
    """Shaping terms, shaped return, normalised returns and the advantage: see the module."""
    args = (phi, node, next_node, r_graph, episode_adv, params)
    check_inputs(*args)
    if resolve(backend, phi, node) == "triton":
        from .triton_ops import shaped_advantage_triton

        return shaped_advantage_triton(*args)
    return shaped_advantage_torch(*args)
