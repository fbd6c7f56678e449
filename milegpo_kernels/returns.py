"""Discounted returns inside trajectories (GiGPO's step return): one op.

``discounted_returns(reward, last, gamma)``: rows of a trajectory are consecutive and in
step order; ``last`` marks each trajectory's last row (the batch's last row ends one in
any case). ``R_t = reward_t + gamma * R_{t+1}``, ``R = reward`` at a last row.

The torch twin is a segmented linear-recurrence scan (Hillis-Steele doubling,
ceil(log2 N) rounds of a few ops each); the Triton kernel walks each trajectory
backward from its last row, one lane per trajectory, as the plain-Python reference
does (``running = reward + gamma * running``), so its results are the reference's to
the last bit.
"""

from __future__ import annotations

import math

import torch

from ._backend import resolve


def _check(reward, last, gamma):
    if reward.dtype != torch.float64 or reward.dim() != 1:
        raise ValueError(f"discounted_returns: reward must be (N,) torch.float64, got {reward.dtype} "
                         f"{tuple(reward.shape)}")
    if last.dtype != torch.bool or last.shape != reward.shape or last.device != reward.device:
        raise ValueError(f"discounted_returns: last must be a bool tensor like reward ({tuple(reward.shape)} on "
                         f"{reward.device}), got {last.dtype} {tuple(last.shape)} on {last.device}")
    if not math.isfinite(gamma):
        raise ValueError(f"discounted_returns: gamma must be finite, got {gamma}")


def discounted_returns(reward: torch.Tensor, last: torch.Tensor, gamma: float, *, backend: str = "auto"):
    """See the module. reward: (N,) float64; last: (N,) bool. Returns (N,) float64."""
    _check(reward, last, gamma)
    if resolve(backend, reward) == "triton":
        from .triton_returns import discounted_returns_triton

        return discounted_returns_triton(reward, last, gamma)
    return discounted_returns_torch(reward, last, gamma)


def discounted_returns_torch(reward: torch.Tensor, last: torch.Tensor, gamma: float) -> torch.Tensor:
    """The torch twin of :func:`discounted_returns`: no host sync, no loop over rows."""
    n = reward.shape[0]
    if n == 0:
        return reward.clone()
    same_next = ~last
    same_next[-1] = False  # the batch's last row ends a trajectory
    a = reward.clone()
    b = torch.where(same_next, torch.full_like(reward, gamma), torch.zeros_like(reward))
    # nxt[i]: the row whose value R_i still depends on (i + 2^k inside the trajectory)
    idx = torch.arange(n, device=reward.device)
    nxt = torch.where(same_next, idx + 1, idx)
    live = same_next.clone()
    for _ in range(max(1, math.ceil(math.log2(max(n, 2))))):
        a = torch.where(live, a + b * a.index_select(0, nxt), a)
        b = torch.where(live, b * b.index_select(0, nxt), b)
        live_next = live & live.index_select(0, nxt)
        nxt = torch.where(live, nxt.index_select(0, nxt), nxt)
        live = live_next
    return a
