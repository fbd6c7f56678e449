"""CreditResult: advantages plus every intermediate of the estimators."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .batch import StepBatch
from .config import CreditConfig

#: per-row tensors (N,), input row order, float64 unless noted
ROW_KEYS = {
    "grpo": ("episode_score", "episode_adv"),
    "gigpo": ("episode_score", "episode_adv", "step_return", "step_adv"),
    "graphgpo": ("episode_score", "episode_adv", "r_graph", "a_graph", "node", "next_node"),
    "milegpo": ("episode_score", "episode_adv", "r_graph", "a_graph", "node", "next_node",
                "r_shaped", "a_mix", "a_res", "delta_pos", "delta_neg"),
}
#: per-node tensors (V,), nodes sorted by (group, key) ascending (signed int64)
NODE_KEYS = {
    "grpo": (),
    "gigpo": (),
    "graphgpo": ("group", "key", "is_sink", "dist"),
    "milegpo": ("group", "key", "is_sink", "dist", "n_traj", "n_pos", "n_revisit", "coverage",
                "is_milestone", "is_trap", "s0_pos", "s_neg", "s_pcc", "b", "psi_bar", "retained",
                "phi_pos", "phi_neg"),
}
INT_KEYS = ("node", "next_node", "group", "key", "dist", "n_traj", "n_pos", "n_revisit")
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
                            "step_return", "episode_adv") if k in self.rows]
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
