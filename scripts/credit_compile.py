"""Try ``torch.compile`` on the credit pipeline: does Inductor's fusion of the elementwise
steps beat the hand-written CUDA-graph replay? (An experiment for a GPU session.)

    python scripts/credit_compile.py [--rows 6400 64000] [--mode max-autotune-no-cudagraphs]

On CUDA it compiles ``estimate_vectorized(..., backend="triton", static_shapes=True)``
(the Triton kernels are user kernels to Dynamo; Inductor fuses the torch ops between them),
checks the advantages against the eager call, and prints compile time and median wall
times of: eager, ``cuda_graph=True`` replay, compiled, and compiled with
``mode="reduce-overhead"`` (Inductor's own CUDA graphs). Graph breaks are counted with
``torch._dynamo.explain``. Every failure is printed, not raised: the point is to learn.
Without a GPU, ``--device cpu --backend torch`` runs the same steps on CPU (Inductor's
C++ backend) as a dry run of the script.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from milegpo.credit import estimate, presets  # noqa: E402
from milegpo.credit.synthetic import benchmark_batch  # noqa: E402
from milegpo.credit.vectorized import estimate_vectorized  # noqa: E402


def wall_ms(fn, reps: int) -> float:
    cuda = torch.cuda.is_available()
    times = []
    for _ in range(reps):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[6400, 64000])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--backend", default="triton", help="the ops' backend (triton on CUDA; torch for a CPU dry run)")
    ap.add_argument("--modes", nargs="+", default=["default", "reduce-overhead"])
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    cfg = presets.ALFWORLD
    for rows in args.rows:
        batch = benchmark_batch(n_groups=max(1, rows // 400), group_size=8, horizon=50, seed=0).to(args.device)

        def eager(b=batch):
            return estimate_vectorized(b, "milegpo", cfg, "full", backend=args.backend, static_shapes=True).advantages

        want = eager()
        print(f"== {rows} rows on {args.device}, ops backend {args.backend}")
        print(f"eager: {wall_ms(eager, args.reps):.3f} ms")
        if args.device == "cuda" and args.backend in ("triton", "auto"):
            def graphed(b=batch):
                return estimate(b, "milegpo", cfg, backend="triton", cuda_graph=True).advantages
            graphed()
            print(f"cuda_graph=True replay: {wall_ms(graphed, args.reps):.3f} ms")
        try:
            explain = torch._dynamo.explain(eager)()
            print(f"dynamo: {explain.graph_count} graphs, {explain.graph_break_count} graph breaks; first reasons: "
                  + "; ".join(str(b.reason)[:120] for b in explain.break_reasons[:3]))
        except Exception as e:  # noqa: BLE001 - an experiment: report and go on
            print(f"dynamo explain failed: {e!r}")
        for mode in args.modes:
            torch._dynamo.reset()
            try:
                fn = torch.compile(eager, mode=None if mode == "default" else mode, dynamic=False)
                t0 = time.perf_counter()
                got = fn()
                if args.device == "cuda":
                    torch.cuda.synchronize()
                t_compile = time.perf_counter() - t0
                torch.testing.assert_close(got, want, atol=1e-9, rtol=1e-9)
                print(f"compiled ({mode}): first call {t_compile:.1f} s, then {wall_ms(fn, args.reps):.3f} ms; "
                      "advantages equal eager's")
            except Exception:  # noqa: BLE001 - an experiment: report and go on
                print(f"compiled ({mode}) failed:\n" + "".join(traceback.format_exc().splitlines(True)[-8:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
