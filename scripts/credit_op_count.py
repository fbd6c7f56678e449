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
import importlib
import os
import sys
from collections import Counter
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from milegpo.credit import StepBatch, presets  # noqa: E402
from milegpo.credit.synthetic import benchmark_batch  # noqa: E402
from milegpo.credit.vectorized import estimate_vectorized  # noqa: E402

MODULES = ["milegpo_kernels.triton_grouping", "milegpo_kernels.triton_counting", "milegpo_kernels.triton_graph",
           "milegpo_kernels.triton_segment", "milegpo_kernels.triton_scoring",
           "milegpo_kernels.triton_shaping", "milegpo_kernels.triton_returns",
           "milegpo_kernels.triton_rows", "milegpo_kernels.triton_graph_build"]
#: ATen ops that launch nothing on a GPU (views, metadata, allocation without a fill)
FREE = {"view", "_unsafe_view", "slice", "select", "unsqueeze", "squeeze", "expand", "as_strided", "t",
        "transpose", "permute", "alias", "detach", "empty", "empty_like", "empty_strided", "unbind", "split",
        "chunk", "narrow", "lift_fresh", "_to_copy_noop", "new_empty", "new_empty_strided", "set_", "resize_",
        "is_nonzero", "_local_scalar_dense", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset",
        "_reshape_alias", "reshape", "split_with_sizes", "item",
        "scalar_tensor"}  # a Python scalar operand, wrapped as a 0-d CPU tensor: a kernel argument on a GPU


_IN_KERNEL = [0]  # > 0 while the interpreter runs a Triton kernel (its own copies are not the pipeline's ops)


class _Count(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name not in FREE and not _IN_KERNEL[0]:
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
    patched = []
    for mod_name in MODULES:
        mod = importlib.import_module(mod_name)
        for name in dir(mod):
            kernel = getattr(mod, name)
            if type(kernel).__name__ == "InterpretedFunction":
                patched.append((mod, name, kernel))
                setattr(mod, name, _Launches(name, kernel, launches))
    for mod_name in ("milegpo_kernels.triton_segment", "milegpo_kernels.triton_counting"):
        mod = importlib.import_module(mod_name)  # the segment-id range check runs on CPU tensors only
        patched.append((mod, "check_seg_range", mod.check_seg_range))
        mod.check_seg_range = lambda *a: None
    # the same check of ids in the fused ops
    for mod_name in ("milegpo_kernels.scoring", "milegpo_kernels.shaping", "milegpo_kernels.rows"):
        mod = importlib.import_module(mod_name)
        patched.append((mod, "check_id_ranges", mod.check_id_ranges))
        mod.check_id_ranges = lambda *a: None
    for mod_name, check in (("milegpo_kernels.graph_build", "_check"), ("milegpo_kernels.returns",
                                                                         "_check_graph_return")):
        mod = importlib.import_module(mod_name)  # their id checks read CPU ids (none on CUDA)
        patched.append((mod, check, getattr(mod, check)))
        setattr(mod, check, lambda *a: None)
    mode = _Count()
    try:
        with mode:
            result = estimate_vectorized(batch, method, presets.ALFWORLD, variant, backend="triton",
                                         static_shapes=True)
            if read_nodes:
                for table in (result.rows, result.nodes):
                    for k in table:
                        table[k]
    finally:
        for mod, name, kernel in patched:
            setattr(mod, name, kernel)
    return mode.ops, launches


class _Launches:
    def __init__(self, name, kernel, counter):
        self.name, self.kernel, self.counter = name, kernel, counter

    def __call__(self, *args, **kwargs):  # a @triton.jit helper called from inside a kernel
        return self.kernel(*args, **kwargs)

    def __getattr__(self, name):  # e.g. .fn of a scan's combine function
        return getattr(self.kernel, name)

    def __getitem__(self, grid):
        self.counter[self.name] += 1
        launch = self.kernel[grid]

        def run(*args, **kwargs):
            _IN_KERNEL[0] += 1
            try:
                return launch(*args, **kwargs)
            finally:
                _IN_KERNEL[0] -= 1

        return run


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
