"""Triton kernels of :func:`milegpo_kernels.shaped_advantage`: three passes over the rows.

1. ``_shape_stats``: gather Phi+ / Phi- at each row's node and next node, form the shaping
   terms and the shaped return (eqs. 9, 10, 20), and accumulate both returns' segment
   statistics per node (count, sum, max / min keys) for the normalisation.
2. ``_shape_var`` (mode ``mean_std``): the sums of squared deviations of both returns.
3. ``_shape_out``: both normalised returns, the residual and the advantage (eqs. 21-22).

The normalisation is :mod:`milegpo_kernels.triton_helpers`' (the passes of ``segment_normalize``,
one memset for all accumulators); float scalars travel as float64 bit patterns and the kernels are
compiled without FMA contraction, so each row's arithmetic rounds as the torch twin's.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..triton_helpers import (
    f64_bits,
    f64_scalar,
    norm_accumulate,
    norm_scalars,
    norm_square,
    norm_value,
    norm_workspace,
    segment_block,
)
from .torch_ops import ShapedAdvantage, ShapingParams

BLOCK = 1024


@triton.jit
def _shape_stats_kernel(phi_ptr, u_ptr, v_ptr, rg_ptr, dp_ptr, dn_ptr, rs_ptr, cnt_ptr, sum0_ptr, max0_ptr, min0_ptr,
                        sum1_ptr, max1_ptr, min1_ptr, N, V, gw_pos, w_pos, gw_neg, w_neg, c_lam,
                        BLOCK: tl.constexpr):
    rows, inb, u, ok = segment_block(u_ptr, N, V, BLOCK)
    nv = tl.load(v_ptr + rows, mask=inb, other=0)
    ok_v = ok & (nv >= 0) & (nv < V)
    u = tl.where(ok, u, 0)
    nv = tl.where(ok_v, nv, 0)
    pu0 = tl.load(phi_ptr + 2 * u, mask=ok, other=0.0)
    pu1 = tl.load(phi_ptr + 2 * u + 1, mask=ok, other=0.0)
    pv0 = tl.load(phi_ptr + 2 * nv, mask=ok_v, other=0.0)
    pv1 = tl.load(phi_ptr + 2 * nv + 1, mask=ok_v, other=0.0)
    dp = tl.maximum(f64_scalar(gw_pos) * pv0 - f64_scalar(w_pos) * pu0, 0.0)  # eq. 9
    dn = tl.maximum(f64_scalar(gw_neg) * pv1 - f64_scalar(w_neg) * pu1, 0.0)  # eq. 10
    rg = tl.load(rg_ptr + rows, mask=inb, other=0.0)
    rs = rg + f64_scalar(c_lam) * (dp - dn)  # eq. 20
    tl.store(dp_ptr + rows, dp, mask=inb)
    tl.store(dn_ptr + rows, dn, mask=inb)
    tl.store(rs_ptr + rows, rs, mask=inb)
    norm_accumulate(rg, u, ok, cnt_ptr, sum0_ptr, max0_ptr, min0_ptr, True, True)
    norm_accumulate(rs, u, ok, cnt_ptr, sum1_ptr, max1_ptr, min1_ptr, False, True)


@triton.jit
def _shape_var_kernel(u_ptr, rg_ptr, rs_ptr, cnt_ptr, sum0_ptr, sq0_ptr, sum1_ptr, sq1_ptr, N, V,
                      BLOCK: tl.constexpr):
    rows, inb, u, ok = segment_block(u_ptr, N, V, BLOCK)
    u = tl.where(ok, u, 0)
    norm_square(tl.load(rg_ptr + rows, mask=ok, other=0.0), u, ok, cnt_ptr, sum0_ptr, sq0_ptr)
    norm_square(tl.load(rs_ptr + rows, mask=ok, other=0.0), u, ok, cnt_ptr, sum1_ptr, sq1_ptr)


@triton.jit
def _shape_out_kernel(u_ptr, rg_ptr, rs_ptr, ez_ptr, cnt_ptr, sum0_ptr, sq0_ptr, max0_ptr, min0_ptr, sum1_ptr,
                      sq1_ptr, max1_ptr, min1_ptr, ag_ptr, am_ptr, ar_ptr, adv_ptr, N, V, eps, one_eps, tol, eta,
                      w_step, w_ep, MEAN_STD: tl.constexpr, BLOCK: tl.constexpr):
    rows, inb, u, ok = segment_block(u_ptr, N, V, BLOCK)
    u = tl.where(ok, u, 0)
    rg = tl.load(rg_ptr + rows, mask=inb, other=0.0)
    rs = tl.load(rs_ptr + rows, mask=inb, other=0.0)
    eps_f, one_eps_f, tol_f = f64_scalar(eps), f64_scalar(one_eps), f64_scalar(tol)
    a_graph = norm_value(rg, u, ok, cnt_ptr, sum0_ptr, sq0_ptr, max0_ptr, min0_ptr, eps_f, one_eps_f, tol_f,
                         MEAN_STD, False, True)
    a_mix = norm_value(rs, u, ok, cnt_ptr, sum1_ptr, sq1_ptr, max1_ptr, min1_ptr, eps_f, one_eps_f, tol_f,
                       MEAN_STD, False, True)
    a_res = a_mix - a_graph  # eq. 21
    ez = tl.load(ez_ptr + rows, mask=inb, other=0.0)
    adv = f64_scalar(w_step) * (a_graph + f64_scalar(eta) * a_res) + f64_scalar(w_ep) * ez  # eq. 22
    tl.store(ag_ptr + rows, a_graph, mask=inb)
    tl.store(am_ptr + rows, a_mix, mask=inb)
    tl.store(ar_ptr + rows, a_res, mask=inb)
    tl.store(adv_ptr + rows, adv, mask=inb)


def shaped_advantage_triton(phi, node, next_node, r_graph, episode_adv,
                            params: ShapingParams) -> ShapedAdvantage:
    """See :func:`milegpo_kernels.shaped_advantage` (inputs checked there)."""
    p = params
    n, v = node.shape[0], phi.shape[0]
    out = ShapedAdvantage(*(torch.empty(n, dtype=torch.float64, device=phi.device) for _ in range(7)))
    if n == 0:
        return out
    dp, dn, rs, ag, am, ar, adv = out
    cnt, sum0, sq0, max0, min0, sum1, sq1, max1, min1 = norm_workspace(max(v, 1), torch.float64, phi.device, 2)
    phi, node, next_node = phi.contiguous(), node.contiguous(), next_node.contiguous()
    r_graph, episode_adv = r_graph.contiguous(), episode_adv.contiguous()
    grid = (triton.cdiv(n, BLOCK),)
    kw = {"BLOCK": BLOCK, "enable_fp_fusion": False}
    _shape_stats_kernel[grid](phi, node, next_node, r_graph, dp, dn, rs, cnt, sum0, max0, min0, sum1, max1, min1,
                              n, v, f64_bits(p.gamma_phi * p.w_pos), f64_bits(p.w_pos),
                              f64_bits(p.gamma_phi * p.w_neg), f64_bits(p.w_neg), f64_bits(p.c * p.lam), **kw)
    if p.norm == "mean_std":
        _shape_var_kernel[grid](node, r_graph, rs, cnt, sum0, sq0, sum1, sq1, n, v, **kw)
    _shape_out_kernel[grid](node, r_graph, rs, episode_adv, cnt, sum0, sq0, max0, min0, sum1, sq1, max1, min1, ag, am,
                            ar, adv, n, v, *norm_scalars(p.norm_eps), f64_bits(p.eta), f64_bits(p.w_step),
                            f64_bits(p.w_ep), MEAN_STD=p.norm == "mean_std", **kw)
    return out
