"""The parameter and result types, the input checks and the torch twin of
:func:`milegpo_kernels.graph_scores` (segment ops, term by term); the op is described in
:mod:`milegpo_kernels.scoring`."""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..graph import INF
from ..inputs import check_id_ranges, params_of
from ..segment import max_normalize, segment_count, segment_max, sibling_mean, stacked

F64 = torch.float64
VARIANTS = ("md", "rcs", "full")


class ScoreParams(NamedTuple):
    """The scalars of eqs. 2-18, named as the fields of ``milegpo.credit.CreditConfig``, whose
    presets hold their values (``ScoreParams.of(presets.ALFWORLD)``)."""

    min_node_support: int
    min_trap_visits: int
    min_trap_score: float
    w_s: float
    w_m: float
    w_c: float
    w_f: float
    w_l: float
    a_d: float
    a_s: float
    a_f: float
    w_bc: float
    w_pg: float
    w_pcc: float
    theta_m: float
    kappa_bc: int
    rho: float
    threshold_tol: float
    #: the readings of spec section 12 (CreditConfig's fields of the same names): deg(v) counts self-loops
    #: (eq. 5); g is in C(v)'s max-normaliser; a self-loop is an incoming edge in eqs. 14 and 16; g's psi~ is in
    #: psi-bar's normaliser (eq. 16). True: the paper's reading; False: the spec's.
    degree_self_loops: bool = True
    degree_max_with_sink: bool = True
    evidence_self_loops: bool = True
    progress_max_with_sink: bool = True

    of = classmethod(params_of)


class GraphScores(NamedTuple):
    """Per-node results, each (V,); ``seeds`` (V, 2): the seeds of Phi+ and Phi-."""

    coverage: torch.Tensor
    is_milestone: torch.Tensor
    is_trap: torch.Tensor
    s0_pos: torch.Tensor
    s_neg: torch.Tensor
    s_pcc: torch.Tensor
    b: torch.Tensor
    psi_bar: torch.Tensor
    retained: torch.Tensor
    seeds: torch.Tensor


def check_inputs(src, dst, edge_valid, node_group, node_valid, is_sink, dist, n_traj, n_pos, n_revisit, e_traj, e_pos,
                 k_count, k_pos, params, variant):
    """Raise naming the first input of :func:`milegpo_kernels.graph_scores` that is wrong: the variant, the
    params' type, a tensor's dtype / shape / device, or (on the host) an id outside its range."""
    if variant not in VARIANTS:
        raise ValueError(f"graph_scores: variant must be one of {VARIANTS}, got {variant!r}")
    if not isinstance(params, ScoreParams):
        raise TypeError(f"graph_scores: params must be a ScoreParams, got {type(params).__name__}")
    e, v, g = src.shape[0], node_group.shape[0], k_count.shape[0]
    shapes = {"src": (src, e, torch.int64), "dst": (dst, e, torch.int64), "edge_valid": (edge_valid, e, torch.bool),
              "e_traj": (e_traj, e, torch.int64), "e_pos": (e_pos, e, torch.int64),
              "node_group": (node_group, v, torch.int64), "node_valid": (node_valid, v, torch.bool),
              "is_sink": (is_sink, v, torch.bool), "dist": (dist, v, torch.int64), "n_traj": (n_traj, v, torch.int64),
              "n_pos": (n_pos, v, torch.int64), "n_revisit": (n_revisit, v, torch.int64),
              "k_count": (k_count, g, torch.int64), "k_pos": (k_pos, g, torch.int64)}
    for name, (t, size, dtype) in shapes.items():
        if t.dtype != dtype or t.dim() != 1 or t.shape[0] != size:
            raise ValueError(f"graph_scores: {name} must be ({size},) {dtype}, got {t.dtype} {tuple(t.shape)}")
        if t.device != src.device:
            raise ValueError(f"graph_scores: {name} is on {t.device}, src on {src.device}")
    check_id_ranges({"src": (src, v), "dst": (dst, v), "node_group": (node_group, g)}, "graph_scores")


def graph_scores_torch(src, dst, edge_valid, node_group, node_valid, is_sink, dist, n_traj, n_pos, n_revisit,
                       e_traj, e_pos, k_count, k_pos, params: ScoreParams,
                       variant: str = "full") -> GraphScores:
    """The torch twin of :func:`graph_scores`: segment ops, term by term."""
    p = params
    ops = {"backend": "torch"}
    vcap, ecap, gcap = node_group.shape[0], src.shape[0], k_count.shape[0]
    dev, tol = src.device, p.threshold_tol
    node_gid = node_group
    zero_v = torch.zeros(vcap, dtype=F64, device=dev)
    zero_e = torch.zeros(ecap, dtype=F64, device=dev)
    k_all = k_count.clamp(min=1).to(F64)
    k_pos_f = k_pos.to(F64)
    k_neg = (k_count - k_pos).to(F64)
    pq_pos = (k_pos_f / k_all).index_select(0, node_gid)  # p_q+
    pq_neg = 1.0 - pq_pos  # p_q-
    n_neg = n_traj - n_pos
    n_traj_f = n_traj.clamp(min=1).to(F64)
    p_pos = n_pos.to(F64) / n_traj_f
    p_neg = n_neg.to(F64) / n_traj_f
    live = node_valid & ~is_sink

    # Milestone scores S0+ (eqs. 2-5)
    cand_pos = live & (n_pos >= p.min_node_support)
    lift_raw = p_pos - pq_pos  # also read per edge at its dst (eq. 15)
    lift = lift_raw.clamp(min=0.0)
    coverage = n_pos.to(F64) / k_pos_f.clamp(min=1.0).index_select(0, node_gid)
    non_self = edge_valid & (src != dst)
    degree_edges = edge_valid if p.degree_self_loops else non_self  # a self-loop: in + out, or neither
    incoming = edge_valid if p.evidence_self_loops else non_self  # the incoming edges of eqs. 14 and 16
    deg = segment_count(torch.cat([src, dst]), vcap, valid=degree_edges.repeat(2)).to(F64)
    norm_set = (node_valid if p.degree_max_with_sink else live) & (n_pos >= 1)  # the success-visited nodes
    max_deg = segment_max(deg, node_gid, gcap, valid=norm_set, **ops).index_select(0, node_gid)
    centrality = torch.where(max_deg > 0, deg / torch.where(max_deg > 0, max_deg, 1.0), zero_v)
    s0_pos = torch.where(cand_pos, p.w_s * lift + p.w_m * coverage + p.w_c * centrality, zero_v)

    # Trap scores S- (eq. 6)
    trap_pre = live & (n_pos == 0) & ((n_neg >= p.min_trap_visits) | (n_revisit > 0))
    lift_neg = (p_neg - pq_neg).clamp(min=0.0)
    freq_neg = n_neg.to(F64) / k_neg.clamp(min=1.0).index_select(0, node_gid)
    loop_rate = n_revisit.to(F64) / n_traj_f
    s_neg = torch.where(trap_pre, p.w_f * lift_neg + p.w_l * freq_neg * loop_rate, zero_v)
    cand_neg = trap_pre & (s_neg >= p.min_trap_score - tol)

    # Reliability calibration: max-normalised scores (eq. 8)
    s0_bar, s_neg_bar = stacked(max_normalize, [s0_pos, s_neg], node_gid, gcap, [cand_pos, cand_neg], **ops)

    # Progress-contrastive calibration (eqs. 11-18)
    e_traj_f = e_traj.clamp(min=1).to(F64)
    ep_pos = e_pos.to(F64) / e_traj_f
    ep_neg = (e_traj - e_pos).to(F64) / e_traj_f
    (mu_pos, n_branch), (mu_neg, _) = stacked(sibling_mean, [ep_pos, ep_neg], src, vcap, edge_valid, **ops)
    c_tilde = torch.where(edge_valid & (n_branch > 1), ep_pos - mu_pos, zero_e)  # eq. 12
    c_tilde = torch.where(c_tilde.abs() > tol, c_tilde, zero_e)  # a rounding residue of mu+ is no margin
    edge_gid = node_gid.index_select(0, src)
    c_max = segment_max(c_tilde.abs(), edge_gid, gcap, valid=edge_valid, **ops).index_select(0, edge_gid)
    c_edge = torch.where(c_max > 0, c_tilde / torch.where(c_max > 0, c_max, 1.0), zero_e)  # eq. 13
    b = segment_max(c_edge, dst, vcap, valid=incoming & (c_edge > tol), **ops)  # eq. 14
    b = torch.where(is_sink, zero_v, b)  # g is never a candidate: no evidence is reported for it
    d_src, d_dst = dist.index_select(0, src), dist.index_select(0, dst)
    dd = torch.where((d_src < INF) & (d_dst < INF), (d_src - d_dst).to(F64), zero_e)
    lneg_edge = torch.where(n_branch > 1, (ep_neg - mu_neg).clamp(min=0.0), lift_neg.index_select(0, dst))
    psi = p.a_d * dd + p.a_s * lift_raw.index_select(0, dst) - p.a_f * lneg_edge  # eq. 15
    psi_tilde = segment_max(psi, dst, vcap, valid=incoming & (e_pos >= 1) & (psi > tol), **ops)
    psi_nodes = node_valid if p.progress_max_with_sink else live  # V_q, or the nodes other than g
    psi_bar = max_normalize(psi_tilde, node_gid, gcap, valid=psi_nodes, **ops)  # eq. 16
    evidence = p.w_bc * b + p.w_pg * psi_bar  # eq. 17
    retained = cand_pos & ((psi_bar > tol) | (coverage >= p.theta_m - tol) | ((p.kappa_bc == 1) & (b > tol)))
    s_pcc = torch.where(cand_pos, torch.where(retained, s0_pos * (1.0 + p.w_pcc * evidence), p.rho * s0_pos),
                        zero_v)  # eq. 18

    if variant == "md":
        seeds = torch.stack([cand_pos.to(F64), cand_neg.to(F64)], 1)
    elif variant == "rcs":
        seeds = torch.stack([s0_bar, s_neg_bar], 1)
    else:  # eq. 19: Phi+ seeded by the calibrated PCC score
        seeds = torch.stack([max_normalize(s_pcc, node_gid, gcap, valid=cand_pos, **ops), s_neg_bar], 1)
    return GraphScores(coverage, cand_pos, cand_neg, s0_pos, s_neg, s_pcc, b, psi_bar, retained, seeds)
