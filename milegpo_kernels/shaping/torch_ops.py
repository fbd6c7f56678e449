"""The parameter and result types, the input checks and the torch twin of
:func:`milegpo_kernels.shaped_advantage`; the op is described in :mod:`milegpo_kernels.shaping`."""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..inputs import check_id_ranges, params_of
from ..segment import NORM_MODES, segment_normalize, stacked


class ShapingParams(NamedTuple):
    """The scalars of eqs. 9-10 and 20-22, named as the fields of ``milegpo.credit.CreditConfig``,
    whose presets hold their values (``ShapingParams.of(presets.ALFWORLD)``)."""

    gamma_phi: float
    w_pos: float
    w_neg: float
    c: float
    lam: float
    eta: float
    w_step: float
    w_ep: float
    norm: str
    norm_eps: float

    of = classmethod(params_of)


class ShapedAdvantage(NamedTuple):
    """Per-row results, each (N,) float64."""

    delta_pos: torch.Tensor
    delta_neg: torch.Tensor
    r_shaped: torch.Tensor
    a_graph: torch.Tensor
    a_mix: torch.Tensor
    a_res: torch.Tensor
    adv: torch.Tensor


def check_inputs(phi, node, next_node, r_graph, episode_adv, params):
    """Raise naming the first input of :func:`milegpo_kernels.shaped_advantage` that is wrong: the params'
    type or norm, a tensor's dtype / shape / device, or (on the host) a node id outside ``[0, V)``."""
    if not isinstance(params, ShapingParams):
        raise TypeError(f"shaped_advantage: params must be a ShapingParams, got {type(params).__name__}")
    if params.norm not in NORM_MODES:
        raise ValueError(f"shaped_advantage: params.norm must be one of {NORM_MODES}, got {params.norm!r}")
    if phi.dtype != torch.float64 or phi.dim() != 2 or phi.shape[1] != 2:
        raise ValueError(f"shaped_advantage: phi must be (V, 2) torch.float64, got {phi.dtype} {tuple(phi.shape)}")
    n = node.shape[0]
    for name, t, dtype in (("node", node, torch.int64), ("next_node", next_node, torch.int64),
                           ("r_graph", r_graph, torch.float64), ("episode_adv", episode_adv, torch.float64)):
        if t.dtype != dtype or t.dim() != 1 or t.shape[0] != n:
            raise ValueError(f"shaped_advantage: {name} must be ({n},) {dtype}, got {t.dtype} {tuple(t.shape)}")
        if t.device != phi.device:
            raise ValueError(f"shaped_advantage: {name} is on {t.device}, phi on {phi.device}")
    check_id_ranges({"node": (node, phi.shape[0]), "next_node": (next_node, phi.shape[0])}, "shaped_advantage")


def shaped_advantage_torch(phi, node, next_node, r_graph, episode_adv,
                           params: ShapingParams) -> ShapedAdvantage:
    """The torch twin of :func:`shaped_advantage`."""
    p = params
    phi_v, phi_u = phi.index_select(0, next_node), phi.index_select(0, node)  # both potentials per gather
    delta_pos = (p.gamma_phi * p.w_pos * phi_v[:, 0] - p.w_pos * phi_u[:, 0]).clamp(min=0.0)  # eq. 9
    delta_neg = (p.gamma_phi * p.w_neg * phi_v[:, 1] - p.w_neg * phi_u[:, 1]).clamp(min=0.0)  # eq. 10
    r_shaped = r_graph + p.c * p.lam * (delta_pos - delta_neg)  # eq. 20
    a_graph, a_mix = stacked(segment_normalize, [r_graph, r_shaped], node, phi.shape[0], mode=p.norm,
                             eps=p.norm_eps, singleton="zero", backend="torch")
    a_res = a_mix - a_graph  # eq. 21
    adv = p.w_step * (a_graph + p.eta * a_res) + p.w_ep * episode_adv  # eq. 22
    return ShapedAdvantage(delta_pos, delta_neg, r_shaped, a_graph, a_mix, a_res, adv)
