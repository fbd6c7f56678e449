"""Count what one ``estimate(..., backend="triton")`` call launches, on CPU.

    python scripts/credit_op_count.py [--rows 6400] [--method milegpo] [--no-row-order]

A CUDA graph replays the pipeline's kernels back to back, so a call's time on a GPU is
about the number of kernels times a few microseconds: this count is the device-free
measure of that cost. It runs the Triton path under Triton's interpreter with the
GPU's static array layout and counts, by name, the ATen ops that launch work (views
and metadata excluded) and the Triton kernel launches. On a GPU an ATen op is one
kernel, except a sort (~18: radix passes and their memsets, half as many for 32-bit
keys), cumsum (2) and a few others; ``scripts/credit_profile.py`` counts the real
kernels there.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections import Counter
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from milegpo.credit import StepBatch, presets  # noqa: E402
from milegpo.credit.synthetic import benchmark_batch  # noqa: E402
from milegpo.credit.vectorized import estimate_vectorized  # noqa: E402
from milegpo_kernels.inputs import host_checks  # noqa: E402
from milegpo_kernels.testing import hooked_kernels, in_kernel  # noqa: E402

#: ATen ops that launch nothing on a GPU (views, metadata, allocation without a fill)
FREE = {"view", "_unsafe_view", "slice", "select", "unsqueeze", "squeeze", "expand", "as_strided", "t",
        "transpose", "permute", "alias", "detach", "empty", "empty_like", "empty_strided", "unbind", "split",
        "chunk", "narrow", "lift_fresh", "_to_copy_noop", "new_empty", "new_empty_strided", "set_", "resize_",
        "is_nonzero", "_local_scalar_dense", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset",
        "_reshape_alias", "reshape", "split_with_sizes", "item",
        "scalar_tensor"}  # a Python scalar operand, wrapped as a 0-d CPU tensor: a kernel argument on a GPU


class _Count(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name not in FREE and not in_kernel():  # the interpreter's own copies are not the pipeline's ops
            self.ops[name] += 1
        return func(*args, **(kwargs or {}))


def count(rows: int, method: str, variant: str = "full", row_order: bool = True,
          read_nodes: bool = False) -> tuple[Counter, Counter]:
    """row_order=False: a batch without the row order validation found (the pipeline sorts the rows).
    read_nodes: also read the node table and the rows' node ids (their canonical order is found on
    first read: a sort the advantages do not need)."""
    batch = benchmark_batch(n_groups=max(1, rows // 400), group_size=8, horizon=50, seed=0)
    if not row_order:
        batch = StepBatch(**batch.as_dict(), validate=False)
    launches: Counter = Counter()
    mode = _Count()
    with contextlib.ExitStack() as stack:
        stack.enter_context(host_checks(False))  # as on CUDA tensors
        stack.enter_context(hooked_kernels(lambda module, name, *_: launches.update([name])))
        with mode:
            result = estimate_vectorized(batch, method, presets.ALFWORLD, variant, backend="triton",
                                         static_shapes=True)
            if read_nodes:
                for table in (result.rows, result.nodes):
                    for k in table:
                        table[k]
    return mode.ops, launches


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1200, help="rows (groups of 8 x 50 steps; the count barely "
                                                          "depends on it, the interpreter's time does)")
    ap.add_argument("--method", default="milegpo")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--no-row-order", action="store_true", help="a batch built with validate=False: no row order "
                                                                  "from validation, the pipeline sorts the rows")
    ap.add_argument("--read-nodes", action="store_true", help="also read the node table and the rows' node ids "
                                                                "(their canonical order is sorted on first read)")
    args = ap.parse_args()
    ops, launches = count(args.rows, args.method, row_order=not args.no_row_order, read_nodes=args.read_nodes)
    print(f"estimate({args.method}, backend='triton'), {args.rows} rows, GPU layout"
          f"{', unvalidated batch' if args.no_row_order else ''}{', node table read' if args.read_nodes else ''}: "
          f"{sum(ops.values())} ATen ops that launch work ({ops['sort']} sorts), "
          f"{sum(launches.values())} Triton launches")
    print("ATen ops:", ", ".join(f"{k} {v}" for k, v in ops.most_common(args.top)))
    print("Triton:", ", ".join(f"{k} {v}" for k, v in launches.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
