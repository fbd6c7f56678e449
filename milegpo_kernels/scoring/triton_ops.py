"""Triton kernels of :func:`milegpo_kernels.graph_scores`: seven passes instead of ~170 ops.

Passes (E: one program per 1024 edges; N: per 1024 nodes), each a barrier the next
one needs:

1. E ``_edge_sums``: node degrees (self-loops counted in and out, or not at all: ``degree_self_loops``); per source node the count of
   its branches and the sums of their success / failure rates (eq. 12's means).
2. N ``_node_terms``: lift, coverage, candidates, S- and the trap candidates; the
   group maxima of the degree (for centrality) and of S- (eq. 8).
3. E ``_edge_terms``: the branch margin c~ (eq. 12) and its group maximum; psi (eq. 15)
   and its maximum per destination node (psi~).
4. E ``_branch_contrast``: c = c~ / max|c~| (eq. 13), b = its maximum per destination
   (eq. 14).
5. N ``_node_scores``: centrality and S0+ (eqs. 2-5) and its group maximum; the group
   maximum of psi~ (eq. 16).
6. N ``_node_pcc``: psi-bar, evidence, the retained set, S_PCC (eqs. 16-18) and its
   group maximum; the md / rcs seeds.
7. N ``_node_seeds`` (variant ``full``): the max-normalised S_PCC seed (eq. 19).

Every maximum is taken over values >= 0 (or over those that pass a ``> tol`` test), so
an integer ``atomic_max`` on the float bits from a zero-filled slot is exact and gives
the twin's "0 where nothing qualifies". All accumulators live in one zero-filled int64
workspace (one memset). The float scalars travel as the int64 bit patterns of their
float64 values (a Python float argument would reach a kernel as float32), and the
kernels are compiled without FMA contraction, so every formula rounds as the torch
twin's does.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..graph import INF
from ..triton_helpers import f64_bits, f64_scalar, segment_block
from .torch_ops import F64, GraphScores, ScoreParams

BLOCK = 1024
SEM = "relaxed"  # the atomics only accumulate; the next pass reads them after the launch boundary
VARIANT_CODE = {"md": 0, "rcs": 1, "full": 2}


#: warps of ``_node_terms_kernel``: at 4 (8 of a block's rows per thread) Triton 3.6 compiles it for
#: sm_90 to 255 registers and a 72-byte stack frame (spills); at 8, 164 registers and none
#: (``scripts/compile_kernels.py``; its speed on a GPU not measured yet)
NODE_TERMS_WARPS = 8


@triton.jit
def _ids(ptr, n, bound, BLOCK: tl.constexpr):
    """This program's slots, which are in bounds, and their ids (0 where out of [0, bound))."""
    slots, inb, ids, ok = segment_block(ptr, n, bound, BLOCK)
    return slots, inb, tl.where(ok, ids, 0), ok


@triton.jit
def _live(valid_ptr, sink_ptr, slots, inb, ok):
    """Nodes that are real (not padding) and not the sink."""
    valid = tl.load(valid_ptr + slots, mask=inb, other=0) != 0
    return ok & valid & (tl.load(sink_ptr + slots, mask=inb, other=1) == 0)


@triton.jit
def _edges(src_ptr, dst_ptr, valid_ptr, E, V, BLOCK: tl.constexpr):
    """Edge slots, which are valid (and in range), src, dst, and which are valid non-self edges."""
    slots, inb, s, ok_s = _ids(src_ptr, E, V, BLOCK)
    d = tl.load(dst_ptr + slots, mask=inb, other=0)
    ok = ok_s & (d >= 0) & (d < V) & (tl.load(valid_ptr + slots, mask=inb, other=0) != 0)
    d = tl.where(ok, d, 0)
    s = tl.where(ok, s, 0)
    return slots, ok, s, d, ok & (s != d)


@triton.jit
def _rates(et_ptr, ep_ptr, slots, ok):
    """An edge's success and failure rates |T+(e)| / |T(e)|, |T-(e)| / |T(e)|."""
    et = tl.load(et_ptr + slots, mask=ok, other=1)
    ep = tl.load(ep_ptr + slots, mask=ok, other=0)
    et_f = tl.maximum(et, 1).to(tl.float64)
    return ep.to(tl.float64) / et_f, (et - ep).to(tl.float64) / et_f, ep


@triton.jit
def _normed(x, mx_bits):
    """x / max where the max is positive, else 0 (max_normalize)."""
    mx = f64_scalar(mx_bits)
    pos = mx > 0
    return tl.where(pos, x / tl.where(pos, mx, 1.0), 0.0)


@triton.jit
def _edge_sums_kernel(src_ptr, dst_ptr, valid_ptr, et_ptr, ep_ptr, deg_ptr, nbr_ptr, sum_pos_ptr, sum_neg_ptr, E, V,
                      DEGREE_SELF_LOOPS: tl.constexpr, BLOCK: tl.constexpr, SEM: tl.constexpr):
    slots, ok, s, d, non_self = _edges(src_ptr, dst_ptr, valid_ptr, E, V, BLOCK)
    one = tl.full((BLOCK,), 1, tl.int64)
    degree_edge = ok if DEGREE_SELF_LOOPS else non_self  # a self-loop: once in, once out (eq. 5)
    tl.atomic_add(deg_ptr + s, one, mask=degree_edge, sem=SEM)
    tl.atomic_add(deg_ptr + d, one, mask=degree_edge, sem=SEM)
    ep_pos, ep_neg, _ = _rates(et_ptr, ep_ptr, slots, ok)
    tl.atomic_add(nbr_ptr + s, one, mask=ok, sem=SEM)
    tl.atomic_add(sum_pos_ptr + s, ep_pos, mask=ok, sem=SEM)
    tl.atomic_add(sum_neg_ptr + s, ep_neg, mask=ok, sem=SEM)


@triton.jit
def _node_terms_kernel(gid_ptr, valid_ptr, sink_ptr, nt_ptr, np_ptr, nre_ptr, kc_ptr, kp_ptr, deg_ptr,
                       lift_raw_ptr, lift_neg_ptr, cov_ptr, s_neg_ptr, cand_pos_ptr, cand_neg_ptr,
                       max_deg_ptr, s_neg_max_ptr, V, G, min_support, min_trap_visits, trap_floor, w_f, w_l,
                       DEGREE_MAX_WITH_SINK: tl.constexpr, BLOCK: tl.constexpr, SEM: tl.constexpr):
    slots, inb, g, ok = _ids(gid_ptr, V, G, BLOCK)
    live = _live(valid_ptr, sink_ptr, slots, inb, ok)
    real = ok & (tl.load(valid_ptr + slots, mask=inb, other=0) != 0)  # g included
    nt = tl.load(nt_ptr + slots, mask=inb, other=0)
    npos = tl.load(np_ptr + slots, mask=inb, other=0)
    nre = tl.load(nre_ptr + slots, mask=inb, other=0)
    kc = tl.load(kc_ptr + g, mask=ok, other=0)
    kp = tl.load(kp_ptr + g, mask=ok, other=0)
    kp_f = kp.to(tl.float64)
    pq_pos = kp_f / tl.maximum(kc, 1).to(tl.float64)
    pq_neg = 1.0 - pq_pos
    nneg = nt - npos
    nt_f = tl.maximum(nt, 1).to(tl.float64)
    p_pos = npos.to(tl.float64) / nt_f
    p_neg = nneg.to(tl.float64) / nt_f
    cand_pos = live & (npos >= min_support)
    lift_raw = p_pos - pq_pos
    coverage = npos.to(tl.float64) / tl.maximum(kp_f, 1.0)
    deg = tl.load(deg_ptr + slots, mask=inb, other=0)
    norm_set = real if DEGREE_MAX_WITH_SINK else live  # C(v)'s normaliser: the success-visited nodes
    tl.atomic_max(max_deg_ptr + g, deg, mask=norm_set & (npos >= 1), sem=SEM)
    trap_pre = live & (npos == 0) & ((nneg >= min_trap_visits) | (nre > 0))
    lift_neg = tl.maximum(p_neg - pq_neg, 0.0)
    freq_neg = nneg.to(tl.float64) / tl.maximum((kc - kp).to(tl.float64), 1.0)
    loop_rate = nre.to(tl.float64) / nt_f
    s_neg = tl.where(trap_pre, f64_scalar(w_f) * lift_neg + f64_scalar(w_l) * freq_neg * loop_rate, 0.0)
    cand_neg = trap_pre & (s_neg >= f64_scalar(trap_floor))
    tl.atomic_max(s_neg_max_ptr + g, s_neg.to(tl.int64, bitcast=True), mask=cand_neg, sem=SEM)
    tl.store(lift_raw_ptr + slots, lift_raw, mask=inb)
    tl.store(lift_neg_ptr + slots, lift_neg, mask=inb)
    tl.store(cov_ptr + slots, coverage, mask=inb)
    tl.store(s_neg_ptr + slots, s_neg, mask=inb)
    tl.store(cand_pos_ptr + slots, cand_pos.to(tl.int8), mask=inb)
    tl.store(cand_neg_ptr + slots, cand_neg.to(tl.int8), mask=inb)


@triton.jit
def _edge_terms_kernel(src_ptr, dst_ptr, valid_ptr, et_ptr, ep_ptr, nbr_ptr, sum_pos_ptr, sum_neg_ptr, gid_ptr,
                       dist_ptr, lift_raw_ptr, lift_neg_ptr, c_tilde_ptr, c_max_ptr, psi_max_ptr, E, V, G,
                       tol, a_d, a_s, a_f, EVIDENCE_SELF_LOOPS: tl.constexpr, INF: tl.constexpr,
                       BLOCK: tl.constexpr, SEM: tl.constexpr):
    slots, ok, s, d, non_self = _edges(src_ptr, dst_ptr, valid_ptr, E, V, BLOCK)
    ep_pos, ep_neg, ep = _rates(et_ptr, ep_ptr, slots, ok)
    n = tl.load(nbr_ptr + s, mask=ok, other=0)
    others = tl.maximum(n - 1, 1).to(tl.float64)
    branched = n > 1
    mu_pos = tl.where(ok & branched, (tl.load(sum_pos_ptr + s, mask=ok, other=0.0) - ep_pos) / others, 0.0)
    mu_neg = tl.where(ok & branched, (tl.load(sum_neg_ptr + s, mask=ok, other=0.0) - ep_neg) / others, 0.0)
    tol_f = f64_scalar(tol)
    c_tilde = tl.where(ok & branched, ep_pos - mu_pos, 0.0)  # eq. 12
    c_tilde = tl.where(tl.abs(c_tilde) > tol_f, c_tilde, 0.0)
    tl.store(c_tilde_ptr + slots, c_tilde, mask=slots < E)
    g = tl.load(gid_ptr + s, mask=ok, other=0)
    g_ok = ok & (g >= 0) & (g < G)
    tl.atomic_max(c_max_ptr + tl.where(g_ok, g, 0), tl.abs(c_tilde).to(tl.int64, bitcast=True), mask=g_ok, sem=SEM)
    d_src = tl.load(dist_ptr + s, mask=ok, other=INF)
    d_dst = tl.load(dist_ptr + d, mask=ok, other=INF)
    dd = tl.where((d_src < INF) & (d_dst < INF), (d_src - d_dst).to(tl.float64), 0.0)
    lneg = tl.where(branched, tl.maximum(ep_neg - mu_neg, 0.0), tl.load(lift_neg_ptr + d, mask=ok, other=0.0))
    lift_dst = tl.load(lift_raw_ptr + d, mask=ok, other=0.0)
    psi = f64_scalar(a_d) * dd + f64_scalar(a_s) * lift_dst - f64_scalar(a_f) * lneg  # eq. 15
    incoming = ok if EVIDENCE_SELF_LOOPS else non_self  # eq. 16's incoming edges
    tl.atomic_max(psi_max_ptr + d, psi.to(tl.int64, bitcast=True), mask=incoming & (ep >= 1) & (psi > tol_f),
                  sem=SEM)


@triton.jit
def _branch_contrast_kernel(src_ptr, dst_ptr, valid_ptr, gid_ptr, c_tilde_ptr, c_max_ptr, b_max_ptr, E, V, G, tol,
                            EVIDENCE_SELF_LOOPS: tl.constexpr, BLOCK: tl.constexpr, SEM: tl.constexpr):
    slots, ok, s, d, non_self = _edges(src_ptr, dst_ptr, valid_ptr, E, V, BLOCK)
    g = tl.load(gid_ptr + s, mask=ok, other=0)
    g_ok = ok & (g >= 0) & (g < G)
    c_tilde = tl.load(c_tilde_ptr + slots, mask=ok, other=0.0)
    c_edge = _normed(c_tilde, tl.load(c_max_ptr + tl.where(g_ok, g, 0), mask=g_ok, other=0))  # eq. 13
    incoming = ok if EVIDENCE_SELF_LOOPS else non_self  # eq. 14's incoming edges
    tl.atomic_max(b_max_ptr + d, c_edge.to(tl.int64, bitcast=True), mask=incoming & (c_edge > f64_scalar(tol)), sem=SEM)


@triton.jit
def _node_scores_kernel(gid_ptr, valid_ptr, sink_ptr, deg_ptr, max_deg_ptr, lift_raw_ptr, cov_ptr, cand_pos_ptr,
                        psi_tilde_ptr, s0_ptr, s0_max_ptr, psi_max_ptr, V, G, w_s, w_m, w_c,
                        PROGRESS_MAX_WITH_SINK: tl.constexpr, BLOCK: tl.constexpr, SEM: tl.constexpr):
    slots, inb, g, ok = _ids(gid_ptr, V, G, BLOCK)
    live = _live(valid_ptr, sink_ptr, slots, inb, ok)
    deg = tl.load(deg_ptr + slots, mask=inb, other=0).to(tl.float64)
    max_deg = tl.load(max_deg_ptr + g, mask=ok, other=0).to(tl.float64)
    centrality = tl.where(max_deg > 0, deg / tl.where(max_deg > 0, max_deg, 1.0), 0.0)
    lift = tl.maximum(tl.load(lift_raw_ptr + slots, mask=inb, other=0.0), 0.0)
    coverage = tl.load(cov_ptr + slots, mask=inb, other=0.0)
    cand_pos = ok & (tl.load(cand_pos_ptr + slots, mask=inb, other=0) != 0)
    s0 = tl.where(cand_pos, f64_scalar(w_s) * lift + f64_scalar(w_m) * coverage + f64_scalar(w_c) * centrality, 0.0)
    tl.store(s0_ptr + slots, s0, mask=inb)
    tl.atomic_max(s0_max_ptr + g, s0.to(tl.int64, bitcast=True), mask=cand_pos, sem=SEM)
    psi_bits = tl.load(psi_tilde_ptr + slots, mask=inb, other=0)
    psi_nodes = live
    if PROGRESS_MAX_WITH_SINK:  # psi-bar's normaliser over V_q, g included (eq. 16)
        psi_nodes = ok & (tl.load(valid_ptr + slots, mask=inb, other=0) != 0)
    tl.atomic_max(psi_max_ptr + g, psi_bits, mask=psi_nodes, sem=SEM)


@triton.jit
def _node_pcc_kernel(gid_ptr, valid_ptr, sink_ptr, cov_ptr, cand_pos_ptr, cand_neg_ptr, s0_ptr, s_neg_ptr,
                     psi_tilde_ptr, b_bits_ptr, s0_max_ptr, s_neg_max_ptr, psi_max_ptr, s_pcc_max_ptr,
                     b_ptr, psi_bar_ptr, retained_ptr, s_pcc_ptr, seeds_ptr, V, G, tol, theta_floor, w_bc, w_pg,
                     w_pcc, rho, KAPPA_BC: tl.constexpr, PROGRESS_MAX_WITH_SINK: tl.constexpr, VARIANT: tl.constexpr,
                     BLOCK: tl.constexpr, SEM: tl.constexpr):
    slots, inb, g, ok = _ids(gid_ptr, V, G, BLOCK)
    sink = tl.load(sink_ptr + slots, mask=inb, other=1) != 0
    live = _live(valid_ptr, sink_ptr, slots, inb, ok)
    cand_pos = ok & (tl.load(cand_pos_ptr + slots, mask=inb, other=0) != 0)
    cand_neg = ok & (tl.load(cand_neg_ptr + slots, mask=inb, other=0) != 0)
    tol_f = f64_scalar(tol)
    psi_tilde = f64_scalar(tl.load(psi_tilde_ptr + slots, mask=inb, other=0))
    psi_nodes = live
    if PROGRESS_MAX_WITH_SINK:  # psi-bar(g) = psi~(g) / max too
        psi_nodes = ok & (tl.load(valid_ptr + slots, mask=inb, other=0) != 0)
    psi_bar = tl.where(psi_nodes, _normed(psi_tilde, tl.load(psi_max_ptr + g, mask=ok, other=0)), 0.0)  # eq. 16
    b = tl.where(sink, 0.0, f64_scalar(tl.load(b_bits_ptr + slots, mask=inb, other=0)))
    evidence = f64_scalar(w_bc) * b + f64_scalar(w_pg) * psi_bar  # eq. 17
    coverage = tl.load(cov_ptr + slots, mask=inb, other=0.0)
    keep = (psi_bar > tol_f) | (coverage >= f64_scalar(theta_floor))
    if KAPPA_BC:
        keep = keep | (b > tol_f)
    retained = cand_pos & keep
    s0 = tl.load(s0_ptr + slots, mask=inb, other=0.0)
    s_pcc = tl.where(cand_pos, tl.where(retained, s0 * (1.0 + f64_scalar(w_pcc) * evidence), f64_scalar(rho) * s0), 0.0)
    tl.atomic_max(s_pcc_max_ptr + g, s_pcc.to(tl.int64, bitcast=True), mask=cand_pos, sem=SEM)
    s_neg = tl.load(s_neg_ptr + slots, mask=inb, other=0.0)
    s_neg_bar = tl.where(cand_neg, _normed(s_neg, tl.load(s_neg_max_ptr + g, mask=ok, other=0)), 0.0)
    if VARIANT == 0:
        tl.store(seeds_ptr + 2 * slots, cand_pos.to(tl.float64), mask=inb)
        tl.store(seeds_ptr + 2 * slots + 1, cand_neg.to(tl.float64), mask=inb)
    else:
        if VARIANT == 1:
            s0_bar = tl.where(cand_pos, _normed(s0, tl.load(s0_max_ptr + g, mask=ok, other=0)), 0.0)
            tl.store(seeds_ptr + 2 * slots, s0_bar, mask=inb)
        tl.store(seeds_ptr + 2 * slots + 1, s_neg_bar, mask=inb)
    tl.store(b_ptr + slots, b, mask=inb)
    tl.store(psi_bar_ptr + slots, psi_bar, mask=inb)
    tl.store(retained_ptr + slots, retained.to(tl.int8), mask=inb)
    tl.store(s_pcc_ptr + slots, s_pcc, mask=inb)


@triton.jit
def _node_seeds_kernel(gid_ptr, cand_pos_ptr, s_pcc_ptr, s_pcc_max_ptr, seeds_ptr, V, G, BLOCK: tl.constexpr):
    slots, inb, g, ok = _ids(gid_ptr, V, G, BLOCK)
    cand_pos = ok & (tl.load(cand_pos_ptr + slots, mask=inb, other=0) != 0)
    s_pcc = tl.load(s_pcc_ptr + slots, mask=inb, other=0.0)
    bar = tl.where(cand_pos, _normed(s_pcc, tl.load(s_pcc_max_ptr + g, mask=ok, other=0)), 0.0)
    tl.store(seeds_ptr + 2 * slots, bar, mask=inb)


def graph_scores_triton(src, dst, edge_valid, node_group, node_valid, is_sink, dist, n_traj, n_pos, n_revisit,
                        e_traj, e_pos, k_count, k_pos, params: ScoreParams,
                        variant: str = "full") -> GraphScores:
    """See :func:`milegpo_kernels.graph_scores` (inputs checked there)."""
    p = params
    v, e, g = node_group.shape[0], src.shape[0], k_count.shape[0]
    dev = src.device
    coverage, s0, s_neg, s_pcc, b, psi_bar = (torch.empty(v, dtype=F64, device=dev) for _ in range(6))
    cand_pos, cand_neg, retained = (torch.empty(v, dtype=torch.bool, device=dev) for _ in range(3))
    seeds = torch.empty(v, 2, dtype=F64, device=dev)
    out = GraphScores(coverage, cand_pos, cand_neg, s0, s_neg, s_pcc, b, psi_bar, retained, seeds)
    if v == 0:
        return out
    # accumulators, zero-filled at once: per node deg, branches, psi~ bits, b bits, sum+, sum-;
    # per group max deg and the bits of max S-, max |c~|, max psi~, max S0+, max S_PCC
    ws = torch.zeros(6 * v + 6 * max(g, 1), dtype=torch.int64, device=dev)
    deg, nbr, psi_t, b_bits, sum_pos, sum_neg = ws[:6 * v].view(6, v).unbind(0)
    sum_pos, sum_neg = sum_pos.view(F64), sum_neg.view(F64)
    max_deg, s_neg_max, c_max, psi_max, s0_max, s_pcc_max = ws[6 * v:].view(6, -1).unbind(0)
    lift_raw, lift_neg = torch.empty(v, dtype=F64, device=dev), torch.empty(v, dtype=F64, device=dev)
    c_tilde = torch.empty(e, dtype=F64, device=dev)
    src, dst, node_group, dist, n_traj, n_pos, n_revisit, e_traj, e_pos, k_count, k_pos = (
        t.contiguous() for t in (src, dst, node_group, dist, n_traj, n_pos, n_revisit, e_traj, e_pos, k_count, k_pos))
    ev = edge_valid.contiguous().view(torch.int8)
    nv, sink = node_valid.contiguous().view(torch.int8), is_sink.contiguous().view(torch.int8)
    cp, cn, ret = cand_pos.view(torch.int8), cand_neg.view(torch.int8), retained.view(torch.int8)
    tol = f64_bits(p.threshold_tol)
    kw = {"BLOCK": BLOCK, "enable_fp_fusion": False}
    node_grid, edge_grid = (triton.cdiv(v, BLOCK),), (triton.cdiv(e, BLOCK),)
    if e:
        _edge_sums_kernel[edge_grid](src, dst, ev, e_traj, e_pos, deg, nbr, sum_pos, sum_neg, e, v,
                                     DEGREE_SELF_LOOPS=bool(p.degree_self_loops), SEM=SEM, **kw)
    _node_terms_kernel[node_grid](
        node_group, nv, sink, n_traj, n_pos, n_revisit, k_count, k_pos, deg, lift_raw, lift_neg, coverage, s_neg,
        cp, cn, max_deg, s_neg_max, v, g, p.min_node_support, p.min_trap_visits,
        f64_bits(p.min_trap_score - p.threshold_tol), f64_bits(p.w_f), f64_bits(p.w_l),
        DEGREE_MAX_WITH_SINK=bool(p.degree_max_with_sink), SEM=SEM, num_warps=NODE_TERMS_WARPS, **kw)
    if e:
        _edge_terms_kernel[edge_grid](
            src, dst, ev, e_traj, e_pos, nbr, sum_pos, sum_neg, node_group, dist, lift_raw, lift_neg, c_tilde,
            c_max, psi_t, e, v, g, tol, f64_bits(p.a_d), f64_bits(p.a_s), f64_bits(p.a_f),
            EVIDENCE_SELF_LOOPS=bool(p.evidence_self_loops), INF=INF, SEM=SEM, **kw)
        _branch_contrast_kernel[edge_grid](src, dst, ev, node_group, c_tilde, c_max, b_bits, e, v, g, tol,
                                           EVIDENCE_SELF_LOOPS=bool(p.evidence_self_loops), SEM=SEM, **kw)
    _node_scores_kernel[node_grid](
        node_group, nv, sink, deg, max_deg, lift_raw, coverage, cp, psi_t, s0, s0_max, psi_max, v, g,
        f64_bits(p.w_s), f64_bits(p.w_m), f64_bits(p.w_c), PROGRESS_MAX_WITH_SINK=bool(p.progress_max_with_sink),
        SEM=SEM, **kw)
    _node_pcc_kernel[node_grid](
        node_group, nv, sink, coverage, cp, cn, s0, s_neg, psi_t, b_bits, s0_max, s_neg_max, psi_max, s_pcc_max,
        b, psi_bar, ret, s_pcc, seeds, v, g, tol, f64_bits(p.theta_m - p.threshold_tol), f64_bits(p.w_bc),
        f64_bits(p.w_pg), f64_bits(p.w_pcc), f64_bits(p.rho), KAPPA_BC=p.kappa_bc == 1,
        PROGRESS_MAX_WITH_SINK=bool(p.progress_max_with_sink), VARIANT=VARIANT_CODE[variant], SEM=SEM, **kw)
    if variant == "full":
        _node_seeds_kernel[node_grid](node_group, cp, s_pcc, s_pcc_max, seeds, v, g, **kw)
    return out
