"""CreditResult: advantages plus every intermediate of the estimators, its lazy views, and the checks of what a
method returns (:func:`check_advantages`, :func:`check_finite`).

The vectorised pipeline (:mod:`milegpo.credit.vectorized`) hands its outputs over as
:class:`Tables` (plain tensors, node ids as slot numbers; what
:mod:`milegpo.credit.cuda_graph` keeps as a CUDA graph's outputs), which
:meth:`Tables.result` wraps in a :class:`CreditResult` whose ``rows`` and ``nodes`` are
read-only views (:class:`LazyRows`, :class:`LazyNodes`): the canonical node order
(:class:`NodeOrder`) is sorted, and the node table trimmed, only when a reader asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from milegpo_kernels import lexsort

from .batch import StepBatch
from .config import CreditConfig

#: the per-row and per-node arrays of int64 and bool dtype (every other is float64); each method's arrays are its
#: ``row_keys`` / ``node_keys`` (:class:`milegpo.credit.registry.CreditMethod`): per row (N,) in input row order, per node (V,)
#: sorted by (group, key) ascending (signed int64)
INT_KEYS = ("node", "next_node", "group", "key", "dist", "n_traj", "n_pos", "n_revisit", "segment")
BOOL_KEYS = ("is_sink", "is_milestone", "is_trap", "retained")


@dataclass
class CreditResult:
    """What :func:`milegpo.credit.estimate` returns.

    advantages: (N,) float64 in input row order.
    rows: per-row intermediates (input order): ``episode_score`` Z, ``episode_adv``
      Norm_q(Z), ``step_return`` / ``step_adv`` (GiGPO R_t and Norm_{q,s}(R_t)),
      ``r_graph`` r^G, ``a_graph`` A^G, ``r_shaped`` r^M, ``a_mix`` A^mix,
      ``a_res`` A^res, ``delta_pos`` delta+, ``delta_neg`` delta-, ``node`` /
      ``next_node`` (int64 index into ``nodes`` of s_t and s_{t+1}).
    nodes: per-node values, nodes sorted by (group, key): ``group``, ``key``,
      ``is_sink``, ``dist`` (hops to g, -1 when unreachable), ``n_traj`` |T(v)|,
      ``n_pos`` |T+(v)|, ``n_revisit`` n_re(v), ``coverage`` m(v), ``is_milestone``
      (v in S+), ``is_trap`` (v in S-), ``s0_pos`` S0+, ``s_neg`` S-, ``s_pcc``
      S_pcc+ (before max-normalisation), ``b``, ``psi_bar``, ``retained`` z(v),
      ``phi_pos`` / ``phi_neg`` the potentials of the chosen variant.

    From the vectorised backends ``rows`` and ``nodes`` are read-only mappings: the Triton
    pipeline numbers nodes by first occurrence and sorts them into (group, key) order only
    when the node table or the rows' ``node`` / ``next_node`` are first read (the advantages
    need no sort); the table is trimmed to the node count on that read (a host sync on CUDA).
    """

    method: str
    variant: str
    config: CreditConfig
    backend: str
    batch: StepBatch
    advantages: torch.Tensor
    rows: dict[str, torch.Tensor] = field(default_factory=dict)
    nodes: dict[str, torch.Tensor] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.advantages.shape[0])

    def cpu(self) -> "CreditResult":
        return CreditResult(self.method, self.variant, self.config, self.backend, self.batch.to("cpu"),
                            self.advantages.cpu(), {k: v.cpu() for k, v in self.rows.items()},
                            {k: v.cpu() for k, v in self.nodes.items()})

    def table(self, max_rows: int | None = None) -> str:
        """A plain-text table of the per-row values, ordered by (group, traj, t)."""
        b = self.batch
        keys = [k for k in ("r_graph", "r_shaped", "delta_pos", "delta_neg", "a_graph", "a_mix",
                            "step_return", "segment_reward", "segment_adv", "episode_adv") if k in self.rows]
        order = torch.argsort(b.group * 0 + b.t, stable=True)
        order = order[torch.argsort(b.traj[order], stable=True)]
        order = order[torch.argsort(b.group[order], stable=True)]
        head = ["group", "traj", "t", "ok", "inv"] + keys + ["advantage"]
        lines = [" ".join(f"{h:>10}" for h in head)]
        for n, i in enumerate(order.tolist()):
            if max_rows is not None and n >= max_rows:
                lines.append(f"... {len(order) - max_rows} more rows")
                break
            vals = [int(b.group[i]), int(b.traj[i]), int(b.t[i]), "y" if b.success[i] else "n",
                    "y" if b.invalid[i] else "n"]
            vals += [float(self.rows[k][i]) for k in keys] + [float(self.advantages[i])]
            lines.append(" ".join(f"{v:>10.4f}" if isinstance(v, float) else f"{v!s:>10}" for v in vals))
        return "\n".join(lines)


class NodeOrder:
    """The canonical node order, (group, key) ascending with padding slots last, of nodes
    numbered by slot (the Triton ops number them by first occurrence), found on first use:
    the sort runs only for a caller that reads the node table or the rows' node ids, never
    for the advantages."""

    def __init__(self, node_gid: torch.Tensor, node_valid: torch.Tensor, key: torch.Tensor):
        self.keys = (node_gid, node_valid, key)
        self._perm = self._rank = None

    def perm(self) -> torch.Tensor:
        """perm[i]: the slot of the i-th node in canonical order."""
        if self._perm is None:
            node_gid, node_valid, key = self.keys
            # group ids < capacity: int32 radix passes
            group_then_pad = torch.where(node_valid, node_gid, key.shape[0]).to(torch.int32)
            self._perm = lexsort(group_then_pad, key)
        return self._perm

    def rank(self) -> torch.Tensor:
        """rank[slot]: the slot's node index in canonical order."""
        if self._rank is None:
            perm = self.perm()
            self._rank = torch.empty_like(perm).scatter_(0, perm, torch.arange(perm.shape[0], device=perm.device))
        return self._rank


class LazyNodes(Mapping):
    """Per-node arrays held at capacity in slot order; put in canonical order (when ``order``
    is given) and trimmed to ``count`` nodes on first read."""

    def __init__(self, padded: dict[str, torch.Tensor], count: torch.Tensor, order: NodeOrder | None = None):
        self.padded, self.count, self.order, self._trimmed = padded, count, order, None

    def _table(self) -> dict[str, torch.Tensor]:
        if self._trimmed is None:
            padded = self.padded
            if self.order is not None:
                perm = self.order.perm()
                padded = apply_by_dtype(padded, lambda x: x.index_select(1, perm))
            n = int(self.count)
            self._trimmed = {k: v[:n] for k, v in padded.items()}
        return self._trimmed

    def __getitem__(self, key):
        return self._table()[key]

    def unordered(self) -> dict[str, torch.Tensor]:
        """The per-node arrays trimmed to the node count, in slot order: the same nodes as the
        table without the sort that puts them in canonical order (for order-free statistics)."""
        if self.order is None:
            return self._table()
        n = int(self.count)
        return {k: v[:n] for k, v in self.padded.items()}

    def __contains__(self, key):  # without the table (Mapping's would build it)
        return key in self.padded

    def __iter__(self):
        return iter(self.padded)

    def __len__(self):
        return len(self.padded)


class LazyRows(Mapping):
    """Per-row arrays; the node ids among them (``slots``: slot numbers) are mapped to the
    canonical node order on first read."""

    def __init__(self, keys: tuple[str, ...], plain: dict[str, torch.Tensor], slots: dict[str, torch.Tensor],
                 order: NodeOrder | None):
        self.keys, self.plain, self.slots, self.order = keys, plain, slots, order
        self._mapped: dict[str, torch.Tensor] = {}

    def __getitem__(self, key):
        if key in self.plain:
            return self.plain[key]
        if key not in self._mapped:
            x = self.slots[key]  # KeyError for a key that is not a row array
            self._mapped[key] = x if self.order is None else self.order.rank().index_select(0, x)
        return self._mapped[key]

    def __contains__(self, key):
        return key in self.keys

    def __iter__(self):
        return iter(self.keys)

    def __len__(self):
        return len(self.keys)


@dataclass
class Tables:
    """What the pipeline computes, as plain tensors (:mod:`milegpo.credit.cuda_graph` keeps these
    as a CUDA graph's outputs); :meth:`result` wraps them in a :class:`CreditResult`.

    adv: (N,) float64, input row order.
    rows: the per-row arrays of the method's ``row_keys`` but the node ids, (N,) float64, input order.
    slots: ``node`` / ``next_node`` (N,) int64, node ids as slot numbers (graph methods only).
    nodes: the per-node arrays of the method's ``node_keys`` at capacity (V_cap,), in slot order.
    count: () int64, the node count (None: a method without a graph).
    order_keys: the nodes' group ids (V_cap,) int64 (numbered in the order of the raw group ids)
      and valid flags (V_cap,) bool, which with their keys sort them into canonical order
      (None: slots are in that order already).
    row_keys: the method's ``row_keys``: the order of the result's rows (node ids included).
    """

    adv: torch.Tensor
    rows: dict[str, torch.Tensor]
    slots: dict[str, torch.Tensor]
    nodes: dict[str, torch.Tensor]
    count: torch.Tensor | None
    order_keys: tuple[torch.Tensor, torch.Tensor] | None
    row_keys: tuple[str, ...]

    def tensors(self) -> list[torch.Tensor]:
        return [self.adv, *self.rows.values(), *self.slots.values(), *self.nodes.values(),
                *([] if self.count is None else [self.count]), *(self.order_keys or ())]

    def like(self, tensors: list[torch.Tensor]) -> Tables:
        """The same tables holding ``tensors`` (as :meth:`tensors` lists them)."""
        it = iter(tensors)
        adv = next(it)
        rows, slots, nodes = ({k: next(it) for k in d} for d in (self.rows, self.slots, self.nodes))
        count = None if self.count is None else next(it)
        order_keys = None if self.order_keys is None else (next(it), next(it))
        return Tables(adv, rows, slots, nodes, count, order_keys, self.row_keys)

    def result(self, batch, method: str, config, variant, backend) -> CreditResult:
        order = None if self.order_keys is None else NodeOrder(*self.order_keys, self.nodes["key"])
        rows = LazyRows(self.row_keys, self.rows, self.slots, order)
        nodes = {} if self.count is None else LazyNodes(self.nodes, self.count, order)
        return CreditResult(method, variant, config, backend, batch, self.adv, rows, nodes)


def check_advantages(method: str, advantages, n: int) -> torch.Tensor:
    """What the method ``method`` returned for a batch of ``n`` rows, checked where it enters the pipeline (the
    oracle's list, the vectorised estimator's tensor): ``n`` values of a floating dtype. Reads no value (the
    values are :func:`check_finite`'s, once per estimate). A ValueError naming the method and what it returned;
    returns the advantages as a tensor (a list: float64)."""
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
    return advantages


def check_finite(method: str, advantages: torch.Tensor) -> None:
    """Every advantage of method ``method`` finite (a read of the values: a host sync on CUDA, once per
    :func:`milegpo.credit.estimate`); a ValueError naming the method and the first row that is not."""
    n = advantages.shape[0]
    if n:
        finite = torch.isfinite(advantages)
        if not bool(finite.all()):
            row = int((~finite).nonzero()[0, 0])
            raise ValueError(f"credit method {method!r} returned a non-finite advantage ({float(advantages[row])}) "
                             f"at row {row} of {n}; every advantage must be finite")


def apply_by_dtype(xs: dict[str, torch.Tensor], fn) -> dict[str, torch.Tensor]:
    """``fn`` applied to the arrays of each dtype stacked as rows of one 2-d tensor
    (one kernel for all of them instead of one each); returns rows of the results."""
    groups: dict[torch.dtype, list[str]] = {}
    for k, x in xs.items():
        groups.setdefault(x.dtype, []).append(k)
    out = {}
    for keys in groups.values():
        out.update(zip(keys, fn(torch.stack([xs[k] for k in keys])).unbind(0)))
    return {k: out[k] for k in xs}
