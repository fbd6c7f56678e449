"""Helpers the fused ops share: their parameter records and their host-side id checks."""

from __future__ import annotations

import torch


def params_of(cls, config):
    """A NamedTuple of scalars (``cls``) filled from the same-named attributes of ``config`` (a
    ``milegpo.credit.CreditConfig``): the ops' parameter records take their values from it."""
    return cls(**{f: getattr(config, f) for f in cls._fields})


def check_id_ranges(ids: dict, op: str) -> None:
    """Raise ValueError naming the first id outside its range, for ``{name: (ids, bound)}`` on
    the host; CUDA ids are not read (a host sync): the kernels skip out-of-range ids."""
    for name, (ids, bound) in ids.items():
        if ids.is_cuda:
            continue
        bad = torch.nonzero((ids < 0) | (ids >= bound))
        if bad.numel():
            i = int(bad[0, 0])
            raise ValueError(f"{op}: {name}[{i}] = {int(ids[i])} is outside [0, {bound})")
