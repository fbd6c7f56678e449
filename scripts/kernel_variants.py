"""Time the tuning variants of the credit pipeline's Triton kernels on the inputs one
``estimate`` call really gives them (a GPU is needed).

    python scripts/kernel_variants.py [--rows 6400 64000] [--reps 30]

- ``dense_ids``: every call of one ``milegpo`` estimate (group ids, node ids, edge ids,
  the two distinct-count groupings) with the insert kernel's atomics ``acq_rel`` or
  ``relaxed``, reading the slot before the compare-and-swap (``peek``) or not.
- ``dense_ids`` again, relaxed without peek: the hash table at 2x (the default), 4x and 8x
  the rows (shorter probe chains), and 1024 (the default) or 256 rows per insert program
  (a program loops until its slowest row is placed).
- graph relaxations: one program for the whole edge list or one per task group
  (``edge_offsets``), ``acq_rel`` or ``relaxed`` atomics, against the torch twin.
- ``segment_normalize``: every call of the estimate (the episode term over task groups,
  rows sorted by group), with the first pass's atomics per row or per run of equal
  segment ids in the block (``runs``).

Each variant's output is checked equal to the default's before it is timed.
Medians of CUDA-event timings of CUDA-graph replays (GPU time, no launch overhead; the
torch twins, which read convergence on the host, run eagerly), in microseconds. Without a GPU, with
``TRITON_INTERPRET=1``, it runs on CPU (wall times of the interpreter: a dry run of
the script, e.g. ``--rows 400 --reps 1``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import milegpo_kernels.counting.triton_ops as tcount  # noqa: E402
import milegpo_kernels.graph.triton_ops as tgraph  # noqa: E402
import milegpo_kernels.grouping.triton_ops as tgroup  # noqa: E402
import milegpo_kernels.segment.triton_ops as tseg  # noqa: E402
from milegpo.credit import estimate, presets  # noqa: E402
from milegpo.credit.synthetic import benchmark_batch  # noqa: E402
from milegpo_kernels import interpreter_on  # noqa: E402
from milegpo_kernels.graph.torch_ops import hop_distance_torch, max_times_potential_torch  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def time_us(fn, reps: int, graph: bool = True) -> float:
    """Median time of fn; on a GPU replayed from a CUDA graph (the GPU time, without
    Python's launch overhead, as inside ``estimate(..., cuda_graph=True)``) unless
    ``graph=False`` (for code that syncs with the host, like the torch twins)."""
    fn()
    times = []
    if not torch.cuda.is_available():
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e6)
        return statistics.median(times)
    run = fn
    if graph:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        run = g.replay
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


def record(rows: int):
    """Inputs of every dense_ids / relaxation / segment_normalize call of one estimate on a benchmark batch."""
    calls = {"dense_ids": [], "hop": [], "max_times": [], "normalize": []}
    orig = (tgroup.dense_ids_triton, tgraph.hop_distance_triton, tgraph.max_times_potential_triton,
            tseg.segment_normalize_triton)

    def norm(x, seg, num_segments, *a, **kw):
        calls["normalize"].append((x, seg, num_segments, *a))
        return orig[3](x, seg, num_segments, *a, **kw)

    def dense(*cols, **kw):
        calls["dense_ids"].append(cols)
        return orig[0](*cols, **kw)

    def hop(src, dst, target, edge_offsets=None, **kw):
        calls["hop"].append((src, dst, target, edge_offsets))
        return orig[1](src, dst, target, edge_offsets, **kw)

    def mt(src, dst, seed, factor, edge_offsets=None, **kw):
        calls["max_times"].append((src, dst, seed, factor, edge_offsets))
        return orig[2](src, dst, seed, factor, edge_offsets, **kw)

    tgroup.dense_ids_triton = tcount.dense_ids_triton = dense
    tgraph.hop_distance_triton, tgraph.max_times_potential_triton = hop, mt
    tseg.segment_normalize_triton = norm
    try:
        batch = benchmark_batch(n_groups=rows // 400, group_size=8, horizon=50, seed=0).to(DEVICE)
        estimate(batch, "milegpo", presets.ALFWORLD, backend="triton")
    finally:
        tgroup.dense_ids_triton = tcount.dense_ids_triton = orig[0]
        tgraph.hop_distance_triton, tgraph.max_times_potential_triton = orig[1], orig[2]
        tseg.segment_normalize_triton = orig[3]
    return calls


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[6400, 64000])
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    if DEVICE == "cpu" and not interpreter_on():
        print("needs a CUDA device (or TRITON_INTERPRET=1 for a dry run on CPU)")
        return 1
    name = torch.cuda.get_device_name(0) if DEVICE == "cuda" else "CPU, Triton's interpreter"
    print(f"# kernel variants on {name} (median us of {args.reps} reps)")
    for rows in args.rows:
        calls = record(rows)
        print(f"\n## {rows:,} rows\n")
        print("| dense_ids call (rows x cols, distinct) | acq_rel | relaxed | acq_rel + peek | relaxed + peek |")
        print("|---|---|---|---|---|")
        for cols in calls["dense_ids"]:
            ref = tgroup.dense_ids_triton(*cols)
            cells = []
            for peek in (False, True):
                for sem in ("acq_rel", "relaxed"):
                    out = tgroup.dense_ids_triton(*cols, sem=sem, peek=peek)
                    assert torch.equal(out.ids, ref.ids) and torch.equal(out.is_first, ref.is_first)
                    cells.append(time_us(lambda: tgroup.dense_ids_triton(*cols, sem=sem, peek=peek), args.reps))
            print(f"| {cols[0].shape[0]} x {len(cols)}, {int(ref.count)} | " + " | ".join(f"{c:.1f}" for c in cells)
                  + " |")
        print("\n| dense_ids call (rows x cols) | table 2x, block 1024 | 4x, 1024 | 8x, 1024 | 2x, 256 | 4x, 256 |")
        print("|---|---|---|---|---|---|")
        for cols in calls["dense_ids"]:
            ref = tgroup.dense_ids_triton(*cols)
            cells = []
            base = max(16, 1 << (2 * cols[0].shape[0] - 1).bit_length())  # the default table: next_pow2(2 M)
            for factor, block in ((1, 1024), (2, 1024), (4, 1024), (1, 256), (2, 256)):
                kw = {"table_size": base * factor, "insert_block": block}
                out = tgroup.dense_ids_triton(*cols, **kw)
                assert torch.equal(out.ids, ref.ids) and torch.equal(out.is_first, ref.is_first)
                cells.append(time_us(lambda kw=kw: tgroup.dense_ids_triton(*cols, **kw), args.reps))
            print(f"| {cols[0].shape[0]} x {len(cols)} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
        print("\n| relaxation (edges, groups) | one program acq_rel | one program relaxed | per group acq_rel "
              "| per group relaxed | torch twin on CUDA |")
        print("|---|---|---|---|---|---|")
        for name, items in (("hop", calls["hop"]), ("max_times", calls["max_times"])):
            for args_ in items:
                fn = tgraph.hop_distance_triton if name == "hop" else tgraph.max_times_potential_triton
                twin = hop_distance_torch if name == "hop" else max_times_potential_torch
                *head, off = args_
                ref = fn(*head, off)
                cells = []
                for o in (None, off):
                    for sem in ("acq_rel", "relaxed"):
                        assert torch.equal(fn(*head, o, sem=sem), ref)
                        cells.append(time_us(lambda: fn(*head, o, sem=sem), args.reps))
                assert torch.equal(twin(*head), ref)
                cells.append(time_us(lambda: twin(*head), max(3, args.reps // 5), graph=False))
                print(f"| {name} ({head[0].shape[0]}, {off.shape[0] - 1}) | " + " | ".join(f"{c:.1f}" for c in cells)
                      + " |")
        print("\n| segment_normalize (rows, segments) | atomics per row | per run (runs=True) |")
        print("|---|---|---|")
        for x, seg, num_segments, *rest in calls["normalize"]:
            ref = orig_normalize(x, seg, num_segments, *rest)
            torch.testing.assert_close(orig_normalize(x, seg, num_segments, *rest, runs=True), ref, rtol=1e-12,
                                       atol=1e-12)
            cells = [time_us(lambda r=r: orig_normalize(x, seg, num_segments, *rest, runs=r), args.reps)
                     for r in (False, True)]
            print(f"| {x.shape[0]}, {num_segments} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
    return 0


orig_normalize = tseg.segment_normalize_triton


if __name__ == "__main__":
    sys.exit(main())
