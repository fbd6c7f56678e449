"""Fused log-prob gather + clipped policy loss (TRL 1.16 GRPO), forward and backward.

The (B, T, V) logits are never materialised. Active tokens (mask != 0) are projected
onto the vocabulary one ``(token_chunk, vocab_chunk)`` tile at a time (cuBLAS / torch
``mm``); a fold kernel keeps per-token online-logsumexp statistics (running max, sum of
exponentials, sum of ``exp * z`` for the entropy) and picks the target logit. A loss
kernel then turns those (n,) statistics into the per-token log-prob, gathers the
row's advantage per token, and evaluates the clipped loss, the k3 KL, the clip flags
and ``d loss / d logp``, all in one pass. The backward recomputes each tile and
overwrites it in place with ``d loss / d logits`` before the two gradient GEMMs, so
only one tile is ever alive.

Layout: Triton kernels, their torch twins (the CPU path; they also run float64), the
forward and backward host functions, one ``torch.autograd.Function``, the public
``fused_policy_loss``. The loss math itself lives in :mod:`.naive`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._backend import resolve, version_tuple
from .naive import PolicyLossStats, check_inputs, clipped_token_loss, token_weights

#: tokens per tile (rows of the projection GEMM), on CUDA / on CPU
TOKEN_CHUNK = 4096
TOKEN_CHUNK_CPU = 1024
#: vocabulary entries per tile (columns of the projection GEMM), on CUDA / on CPU: the
#: torch twin makes a few tile-sized temporaries, so its tiles are smaller
VOCAB_CHUNK = 32768
VOCAB_CHUNK_CPU = 4096
#: columns per Triton program step inside a tile
BLOCK_V = 1024
#: tokens per program of the loss kernel
BLOCK_N = 256


# --------------------------------------------------------------------------- Triton kernels


@triton.jit
def _fold_kernel(
    tile_ptr, tile_stride, bias_ptr, targets_ptr, max_ptr, sum_ptr, zsum_ptr, target_logit_ptr,
    vocab_start, n_cols, inv_t,
    HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr,
):
    """One program per token: fold one vocabulary tile into its online-logsumexp state."""
    row = tl.program_id(0).to(tl.int64)
    row_ptr = tile_ptr + row * tile_stride
    m = tl.load(max_ptr + row)
    s = tl.load(sum_ptr + row)
    zs = tl.load(zsum_ptr + row)
    local = tl.load(targets_ptr + row) - vocab_start
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        valid = offs < n_cols
        z = tl.load(row_ptr + offs, mask=valid, other=0.0).to(tl.float32)
        if HAS_BIAS:
            z += tl.load(bias_ptr + vocab_start + offs, mask=valid, other=0.0).to(tl.float32)
        z = tl.where(valid, z * inv_t, 0.0)
        new_m = tl.maximum(m, tl.max(tl.where(valid, z, -float("inf")), axis=0))
        scale = tl.exp(m - new_m)
        e = tl.where(valid, tl.exp(z - new_m), 0.0)
        s = s * scale + tl.sum(e, axis=0)
        zs = zs * scale + tl.sum(e * z, axis=0)
        m = new_m
    tl.store(max_ptr + row, m)
    tl.store(sum_ptr + row, s)
    tl.store(zsum_ptr + row, zs)
    if (local >= 0) & (local < n_cols):
        z = tl.load(row_ptr + local).to(tl.float32)
        if HAS_BIAS:
            z += tl.load(bias_ptr + vocab_start + local).to(tl.float32)
        tl.store(target_logit_ptr + row, z * inv_t)


@triton.jit
def _loss_kernel(
    max_ptr, sum_ptr, zsum_ptr, target_logit_ptr, idx_ptr, weight_ptr, mask_ptr, adv_ptr, old_ptr, ref_ptr,
    lse_ptr, logp_ptr, loss_ptr, dlogp_ptr, kl_ptr, ent_ptr, low_ptr, high_ptr,
    n, T, lo, hi, delta, beta,
    HAS_OLD: tl.constexpr, HAS_KL: tl.constexpr, HAS_DELTA: tl.constexpr, ADV_PER_TOKEN: tl.constexpr,
    BIAS_CORRECTION_KL: tl.constexpr, BLOCK: tl.constexpr,
):
    """Per active token: log-prob, clipped loss times its weight, d(loss)/d(logp), KL, entropy, clip flags.

    ``idx`` maps the k-th active token to its flat (B*T) position; the advantage of row
    ``idx // T`` (or of token ``idx`` when ``ADV_PER_TOKEN``) is gathered here.
    """
    k = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    valid = k < n
    i = tl.load(idx_ptr + k, mask=valid, other=0)
    m = tl.load(max_ptr + k, mask=valid, other=0.0)
    s = tl.load(sum_ptr + k, mask=valid, other=1.0)
    zs = tl.load(zsum_ptr + k, mask=valid, other=0.0)
    lse = m + tl.log(s)
    logp = tl.load(target_logit_ptr + k, mask=valid, other=0.0) - lse
    entropy = lse - zs / s
    w = tl.load(weight_ptr + i, mask=valid, other=0.0).to(tl.float32)
    mk = tl.load(mask_ptr + i, mask=valid, other=0.0).to(tl.float32)
    if ADV_PER_TOKEN:
        adv = tl.load(adv_ptr + i, mask=valid, other=0.0).to(tl.float32)
    else:
        adv = tl.load(adv_ptr + i // T, mask=valid, other=0.0).to(tl.float32)
    if HAS_OLD:
        old = tl.load(old_ptr + i, mask=valid, other=0.0).to(tl.float32)
    else:
        old = logp
    coef_1 = tl.exp(logp - old)
    coef_2 = tl.minimum(tl.maximum(coef_1, lo), hi)
    # torch.clamp passes the gradient where lo <= x <= hi (bounds included)
    g2 = tl.where((coef_1 >= lo) & (coef_1 <= hi), adv * coef_1, 0.0)
    if HAS_DELTA:
        c1 = tl.minimum(coef_1, delta)
        g1 = tl.where(coef_1 <= delta, adv * coef_1, 0.0)
    else:
        c1 = coef_1
        g1 = adv * coef_1
    l1 = c1 * adv
    l2 = coef_2 * adv
    # torch.min of two tensors splits the gradient evenly on ties
    dmin = tl.where(l1 == l2, 0.5 * (g1 + g2), tl.where(l1 < l2, g1, g2))
    loss = -tl.minimum(l1, l2)
    dloss = -dmin
    kl = tl.zeros_like(loss)
    if HAS_KL:
        d = tl.load(ref_ptr + i, mask=valid, other=0.0).to(tl.float32) - logp
        ed = tl.exp(d)
        kl = ed - d - 1.0
        dkl = 1.0 - ed
        if BIAS_CORRECTION_KL:
            dkl = (dkl + kl) * coef_1
            kl = kl * coef_1
        loss += beta * kl
        dloss += beta * dkl
    low = ((coef_1 < lo) & (adv < 0)).to(tl.float32)
    high = ((coef_1 > hi) & (adv > 0)).to(tl.float32)
    tl.store(lse_ptr + k, lse, mask=valid)
    tl.store(logp_ptr + k, logp, mask=valid)
    tl.store(loss_ptr + k, loss * w, mask=valid)
    tl.store(dlogp_ptr + k, dloss * w, mask=valid)
    tl.store(kl_ptr + k, kl * mk, mask=valid)
    tl.store(ent_ptr + k, entropy * mk, mask=valid)
    tl.store(low_ptr + k, low * mk, mask=valid)
    tl.store(high_ptr + k, high * mk, mask=valid)


@triton.jit
def _grad_tile_kernel(
    tile_ptr, tile_stride, bias_ptr, targets_ptr, lse_ptr, g_ptr, vocab_start, n_cols, inv_t,
    HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr,
):
    """Overwrite a block of the logits tile with d(loss)/d(logits) = g (onehot - p) / temperature."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    valid = offs < n_cols
    ptrs = tile_ptr + row * tile_stride + offs
    z = tl.load(ptrs, mask=valid, other=0.0).to(tl.float32)
    if HAS_BIAS:
        z += tl.load(bias_ptr + vocab_start + offs, mask=valid, other=0.0).to(tl.float32)
    p = tl.exp(z * inv_t - tl.load(lse_ptr + row))
    onehot = ((offs + vocab_start) == tl.load(targets_ptr + row)).to(tl.float32)
    grad = tl.load(g_ptr + row) * (onehot - p) * inv_t
    tl.store(ptrs, grad.to(tile_ptr.dtype.element_ty), mask=valid)


# --------------------------------------------------------------------------- torch twins


def _fold_torch(tile, bias, targets, run_max, sum_exp, z_sum, target_logit, vocab_start, inv_t):
    """`_fold_kernel` on the whole tile at once, in the statistics' dtype (fp32 or fp64).

    The tile is scratch after the fold, so fp32/fp64 tiles are worked on in place."""
    n_cols = tile.shape[1]
    z = tile if tile.dtype == run_max.dtype else tile.to(run_max.dtype)
    if bias is not None:
        z.add_(bias[vocab_start:vocab_start + n_cols].to(z.dtype))
    z.mul_(inv_t)
    local = targets - vocab_start
    inside = (local >= 0) & (local < n_cols)
    tz = z.gather(-1, local.clamp(0, n_cols - 1).unsqueeze(-1)).squeeze(-1)
    target_logit.copy_(torch.where(inside, tz, target_logit))
    new_m = torch.maximum(run_max, z.amax(-1))
    scale = torch.exp(run_max - new_m)
    e = torch.exp(z - new_m.unsqueeze(-1))
    sum_exp.mul_(scale).add_(e.sum(-1))
    z_sum.mul_(scale).add_(torch.bmm(e.unsqueeze(1), z.unsqueeze(2)).view(-1))  # sum_v e_v z_v, no temporary
    run_max.copy_(new_m)


def _loss_torch(run_max, sum_exp, z_sum, target_logit, idx, w, mask, adv, adv_per_token, old, ref, T, p):
    """`_loss_kernel` in torch; d(loss)/d(logp) by autograd through :func:`clipped_token_loss`."""
    acc = run_max.dtype
    lse = run_max + torch.log(sum_exp)
    logp = target_logit - lse
    entropy = lse - z_sum / sum_exp
    a = (adv[idx] if adv_per_token else adv[idx // T]).to(acc)
    o = None if old is None else old[idx].to(acc)
    r = None if ref is None else ref[idx].to(acc)
    wk, mk = w[idx].to(acc), mask[idx].to(acc)
    with torch.enable_grad():
        lp = logp.detach().requires_grad_(True)
        ptl, kl, coef_1 = clipped_token_loss(lp, o, r, a, epsilon_low=p["epsilon_low"],
                                             epsilon_high=p["epsilon_high"], delta=p["delta"],
                                             beta=p["beta"], bias_correction_kl=p["bias_correction_kl"])
        (dlogp,) = torch.autograd.grad((ptl * wk).sum(), lp)
    coef_1 = coef_1.detach()
    low = ((coef_1 < 1 - p["epsilon_low"]) & (a < 0)).to(acc)
    high = ((coef_1 > 1 + p["epsilon_high"]) & (a > 0)).to(acc)
    kl = torch.zeros_like(logp) if kl is None else kl.detach()
    return lse, logp, ptl.detach() * wk, dlogp, kl * mk, entropy * mk, low * mk, high * mk


def _grad_tile_torch(tile, bias, targets, lse, g, vocab_start, inv_t):
    """`_grad_tile_kernel` on the whole tile at once, in place for fp32/fp64 tiles."""
    n_cols = tile.shape[1]
    z = tile if tile.dtype == lse.dtype else tile.to(lse.dtype)
    if bias is not None:
        z.add_(bias[vocab_start:vocab_start + n_cols].to(z.dtype))
    gs = g * inv_t
    z.mul_(inv_t).sub_(lse.unsqueeze(-1)).exp_().mul_(-gs.unsqueeze(-1))  # -g p / temperature
    local = targets - vocab_start
    rows = torch.nonzero((local >= 0) & (local < n_cols)).squeeze(-1)
    z[rows, local[rows]] += gs[rows]
    if z is not tile:
        tile.copy_(z)


# --------------------------------------------------------------------------- host functions


#: ``torch.addmm(..., out_dtype=torch.float32)`` from bf16/fp16 inputs (CUDA, torch >= 2.8)
_MM_OUT_DTYPE = version_tuple(torch.__version__) >= (2, 8)


def _addmm_acc(acc, a, b):
    """``acc += a @ b`` into an fp32/fp64 ``acc`` without rounding the product to a's dtype."""
    if _MM_OUT_DTYPE and acc.device.type == "cuda" and a.dtype in (torch.float16, torch.bfloat16):
        torch.addmm(acc, a, b, out_dtype=acc.dtype, out=acc)
    else:
        acc.addmm_(a.to(acc.dtype), b.to(acc.dtype))


def _stats_dtype(x):
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def policy_loss_fwd(hidden, weight, bias, targets, idx, w, mask, adv, adv_per_token, old, ref, T, p,
                    backend, token_chunk, vocab_chunk):
    """Forward over active tokens. ``hidden`` (n, H), ``targets`` (n,) int64, ``idx`` (n,) int64 flat
    positions; ``w``, ``mask``, ``old``, ``ref`` flat (B*T,); ``adv`` flat (B,) or (B*T,).
    Returns the per-token outputs of the loss kernel (each (n,), fp32 or fp64)."""
    n, V = hidden.shape[0], weight.shape[0]
    acc = _stats_dtype(hidden)
    dev = hidden.device
    run_max = torch.full((n,), float("-inf"), device=dev, dtype=acc)
    sum_exp = torch.zeros((n,), device=dev, dtype=acc)
    z_sum = torch.zeros((n,), device=dev, dtype=acc)
    target_logit = torch.zeros((n,), device=dev, dtype=acc)
    if n > 0:
        buf = torch.empty((min(n, token_chunk), min(V, vocab_chunk)), device=dev, dtype=hidden.dtype)
        for v0 in range(0, V, vocab_chunk):
            v1 = min(v0 + vocab_chunk, V)
            w_chunk = weight[v0:v1]
            for t0 in range(0, n, token_chunk):
                t1 = min(t0 + token_chunk, n)
                tile = buf[: t1 - t0, : v1 - v0]
                torch.mm(hidden[t0:t1], w_chunk.t(), out=tile)
                if backend == "triton":
                    _fold_kernel[(t1 - t0,)](
                        tile, tile.stride(0), bias if bias is not None else tile, targets[t0:t1],
                        run_max[t0:t1], sum_exp[t0:t1], z_sum[t0:t1], target_logit[t0:t1],
                        v0, v1 - v0, p["inv_t"], HAS_BIAS=bias is not None, BLOCK=p["block_v"],
                    )
                else:
                    _fold_torch(tile, bias, targets[t0:t1], run_max[t0:t1], sum_exp[t0:t1], z_sum[t0:t1],
                                target_logit[t0:t1], v0, p["inv_t"])
    if backend == "triton":
        outs = [torch.empty((n,), device=dev, dtype=acc) for _ in range(8)]
        if n > 0:
            _loss_kernel[(triton.cdiv(n, BLOCK_N),)](
                run_max, sum_exp, z_sum, target_logit, idx, w, mask, adv,
                old if old is not None else w, ref if ref is not None else w, *outs,
                n, T, 1 - p["epsilon_low"], 1 + p["epsilon_high"],
                p["delta"] if p["delta"] is not None else 0.0, p["beta"],
                HAS_OLD=old is not None, HAS_KL=p["beta"] != 0.0, HAS_DELTA=p["delta"] is not None,
                ADV_PER_TOKEN=adv_per_token, BIAS_CORRECTION_KL=p["bias_correction_kl"], BLOCK=BLOCK_N,
            )
        return outs
    return list(_loss_torch(run_max, sum_exp, z_sum, target_logit, idx, w, mask, adv, adv_per_token,
                            old, ref, T, p))


def policy_loss_bwd(grad_loss, hidden, weight, bias, targets, lse, dlogp, needs, p, backend, token_chunk,
                    vocab_chunk):
    """Backward: recompute each tile, turn it into d(loss)/d(logits), accumulate the GEMMs in fp32.

    Returns ``(grad_hidden (n, H), grad_weight (V, H), grad_bias (V,))`` in the inputs' dtypes
    (``None`` where not needed)."""
    n, V = hidden.shape[0], weight.shape[0]
    acc = lse.dtype
    dev = hidden.device
    g = (dlogp * grad_loss.to(acc)).contiguous()
    grad_hidden = torch.zeros((n, hidden.shape[1]), device=dev, dtype=acc) if needs[0] else None
    grad_weight = torch.empty_like(weight) if needs[1] else None
    grad_bias = torch.zeros((V,), device=dev, dtype=acc) if needs[2] else None
    if n == 0:
        if grad_weight is not None:
            grad_weight.zero_()
        return (None if grad_hidden is None else grad_hidden.to(hidden.dtype), grad_weight,
                None if grad_bias is None else grad_bias.to(bias.dtype))
    buf = torch.empty((min(n, token_chunk), min(V, vocab_chunk)), device=dev, dtype=hidden.dtype)
    for v0 in range(0, V, vocab_chunk):
        v1 = min(v0 + vocab_chunk, V)
        w_chunk = weight[v0:v1]
        # one fp32 slice of the weight gradient at a time, not the whole (V, H) in fp32
        gw = torch.zeros((v1 - v0, weight.shape[1]), device=dev, dtype=acc) if grad_weight is not None else None
        for t0 in range(0, n, token_chunk):
            t1 = min(t0 + token_chunk, n)
            tile = buf[: t1 - t0, : v1 - v0]
            torch.mm(hidden[t0:t1], w_chunk.t(), out=tile)
            if backend == "triton":
                grid = (t1 - t0, triton.cdiv(v1 - v0, p["block_v"]))
                _grad_tile_kernel[grid](
                    tile, tile.stride(0), bias if bias is not None else tile, targets[t0:t1], lse[t0:t1],
                    g[t0:t1], v0, v1 - v0, p["inv_t"], HAS_BIAS=bias is not None, BLOCK=p["block_v"],
                )
            else:
                _grad_tile_torch(tile, bias, targets[t0:t1], lse[t0:t1], g[t0:t1], v0, p["inv_t"])
            if grad_hidden is not None:
                _addmm_acc(grad_hidden[t0:t1], tile, w_chunk)
            if gw is not None:
                _addmm_acc(gw, tile.t(), hidden[t0:t1])
            if grad_bias is not None:
                grad_bias[v0:v1] += tile.sum(0, dtype=acc)
        if gw is not None:
            grad_weight[v0:v1] = gw.to(weight.dtype)
    return (None if grad_hidden is None else grad_hidden.to(hidden.dtype), grad_weight,
            None if grad_bias is None else grad_bias.to(bias.dtype))


class FusedPolicyLossFunction(torch.autograd.Function):
    """Loss and stats of :func:`fused_policy_loss`; gradients into hidden (n, H), weight, bias."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, idx, w, mask, adv, adv_per_token, old, ref, T, p,
                backend, token_chunk, vocab_chunk):
        outs = policy_loss_fwd(hidden, weight, bias, targets, idx, w, mask, adv, adv_per_token, old, ref, T,
                               p, backend, token_chunk, vocab_chunk)
        lse, _, loss_tok, dlogp, kl, ent, low, high = outs
        ctx.save_for_backward(hidden, weight, bias, targets, lse, dlogp)
        ctx.cfg = (p, backend, token_chunk, vocab_chunk)
        sums = torch.stack([loss_tok.sum(), kl.sum(), ent.sum(), low.sum(), high.sum()])
        ctx.mark_non_differentiable(sums)
        return sums[0].clone(), sums

    @staticmethod
    def backward(ctx, grad_loss, _grad_sums):
        hidden, weight, bias, targets, lse, dlogp = ctx.saved_tensors
        p, backend, token_chunk, vocab_chunk = ctx.cfg
        gh, gw, gb = policy_loss_bwd(grad_loss, hidden, weight, bias, targets, lse, dlogp,
                                     ctx.needs_input_grad[:3], p, backend, token_chunk, vocab_chunk)
        return (gh, gw, gb) + (None,) * 13


def fused_policy_loss(hidden, weight, completion_ids, completion_mask, advantages, old_logps=None,
                      ref_logps=None, *, bias=None, temperature=1.0, epsilon_low=0.2, epsilon_high=0.2,
                      delta=None, beta=0.0, loss_type="dapo", num_items_in_batch=None,
                      max_completion_length=None, bias_correction_kl=True, backend="auto",
                      token_chunk=None, vocab_chunk=None):
    """GRPO policy loss of TRL 1.16 from hidden states, without materialising the logits.

    Args:
        hidden: (B, T, H) last hidden states at the completion positions (the state that
            predicts ``completion_ids[:, t]``); bf16, fp16, fp32 (fp64 with backend torch).
        weight: (V, H) LM head; ``bias``: (V,) or None.
        completion_ids: (B, T) integer token ids; completion_mask: (B, T) 0/1 (int, bool or float).
        advantages: (B,) per row, gathered per token in the kernel, or (B, T) per token.
        old_logps, ref_logps: (B, T) float or None. ``old_logps=None`` is on-policy
            (``old = logps.detach()``); ``ref_logps`` is needed when ``beta != 0``.
        temperature, epsilon_low, epsilon_high, delta, beta: as in ``GRPOConfig``.
        loss_type: ``"grpo" | "bnpo" | "dr_grpo" | "dapo"``, token-level importance sampling.
        num_items_in_batch: ``dapo`` normaliser (default: active tokens in this batch).
            To match TRL pass ``num_items_in_batch / num_processes * grad_accum / steps_per_generation``.
        max_completion_length: ``dr_grpo`` normaliser is ``B * max_completion_length`` (default T).
        bias_correction_kl: multiply the KL by the ratio (``GRPOConfig.use_bias_correction_kl``, default True).
        backend: ``"auto" | "torch" | "triton"``; token_chunk / vocab_chunk: tile shape (default
            4096 x 32768 on CUDA, as TRL's chunked LM head; 1024 x 4096 on CPU).

    Returns:
        ``(loss, stats)``: ``loss`` 0-dim fp32 (fp64 for fp64 inputs), differentiable into
        ``hidden``, ``weight``, ``bias``; TRL divides further by its gradient-accumulation steps
        for grpo/bnpo/dr_grpo, the caller does. ``stats``: :class:`PolicyLossStats`.
    """
    check_inputs(hidden, weight, completion_ids, completion_mask, advantages, old_logps, ref_logps,
                 bias, temperature, beta, loss_type)
    backend = resolve(backend, hidden, weight)
    if backend == "triton" and hidden.dtype == torch.float64:
        raise TypeError("backend='triton' takes bf16/fp16/fp32 hidden; use backend='torch' for float64")
    if weight.dtype != hidden.dtype or (bias is not None and bias.dtype != hidden.dtype):
        raise TypeError(f"hidden, weight and bias must share a dtype, got {hidden.dtype}, {weight.dtype}, "
                        f"{None if bias is None else bias.dtype}")
    B, T, H = hidden.shape
    acc = _stats_dtype(hidden)
    mask = completion_mask.reshape(-1).to(acc)
    w = token_weights(completion_mask.to(acc), loss_type, num_items_in_batch,
                      max_completion_length).reshape(-1).contiguous()
    idx = torch.nonzero(mask != 0).squeeze(-1)  # one host sync: tiles cover active tokens only
    flat_h = hidden.reshape(-1, H)
    flat_ids = completion_ids.reshape(-1).long()
    if idx.numel() == B * T:
        h_act, targets = flat_h, flat_ids
    else:
        h_act, targets = flat_h.index_select(0, idx), flat_ids.index_select(0, idx)
    if torch.any((targets < 0) | (targets >= weight.shape[0])):
        raise ValueError(f"completion_ids of active tokens must lie in [0, {weight.shape[0]})")
    p = dict(epsilon_low=float(epsilon_low), epsilon_high=float(epsilon_high),
             delta=None if delta is None else float(delta), beta=float(beta),
             bias_correction_kl=bool(bias_correction_kl), inv_t=1.0 / float(temperature), block_v=BLOCK_V)
    adv = advantages.reshape(-1).to(acc).contiguous()
    old = None if old_logps is None else old_logps.reshape(-1).to(acc).contiguous()
    ref = None if ref_logps is None else ref_logps.reshape(-1).to(acc).contiguous()
    loss, sums = FusedPolicyLossFunction.apply(
        h_act.contiguous(), weight.contiguous(), None if bias is None else bias.contiguous(), targets.contiguous(),
        idx, w, mask.contiguous(), adv, advantages.dim() == 2, old, ref, T, p, backend,
        token_chunk or (TOKEN_CHUNK if hidden.is_cuda else TOKEN_CHUNK_CPU),
        vocab_chunk or (VOCAB_CHUNK if hidden.is_cuda else VOCAB_CHUNK_CPU),
    )
    n = mask.sum().clamp(min=1.0)
    s = (sums[1:] / n).float()
    return loss, PolicyLossStats(s[0], s[1], s[2], s[3], s[2] + s[3])
