"""Where the time of one GPU credit call goes: kernels launched, GPU time, eager vs CUDA graph.

    python scripts/credit_profile.py [--rows 6400 64000] [--method milegpo]

Prints the number of CUDA kernels one eager ``estimate(..., backend="triton")`` call
launches, their summed GPU time against the call's wall time (the rest is launch
overhead on the host), the kernels taking most GPU time, and the wall time of the same
call replayed as a CUDA graph (``cuda_graph=True``). Needs a CUDA device.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from milegpo.credit import estimate, presets  # noqa: E402
from milegpo.credit.synthetic import benchmark_batch  # noqa: E402


def wall(fn, reps: int = 30) -> float:
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[6400, 64000],
                    help="rows (multiples of 400: groups of 8 x 50 steps)")
    ap.add_argument("--method", default="milegpo")
    ap.add_argument("--dump", type=Path, default=None,
                    help="also write every kernel of the eager call, in launch order, to DUMP/credit_kernels_<rows>.txt")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA device")
        return 1
    for rows in args.rows:
        profile_rows(rows, args.method, args.dump)
    return 0


def profile_rows(rows: int, method: str, dump: Path | None = None) -> None:
    from torch.profiler import ProfilerActivity, profile

    batch = benchmark_batch(n_groups=rows // 400, group_size=8, horizon=50, seed=0).to("cuda")

    def eager():
        return estimate(batch, method, presets.ALFWORLD, backend="triton").advantages

    def graphed():
        return estimate(batch, method, presets.ALFWORLD, backend="triton", cuda_graph=True).advantages

    eager(), graphed()  # compile, capture
    torch.testing.assert_close(graphed(), eager(), atol=1e-12, rtol=1e-12)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        eager()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    by_name: dict[str, list[float]] = defaultdict(list)
    for e in kernels:
        by_name[e.name[:90]].append(e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total)
    gpu_us = sum(sum(v) for v in by_name.values())
    t_eager, t_graph = wall(eager), wall(graphed)
    print(f"credit {method}, {len(batch)} rows, {torch.cuda.get_device_name(0)}")
    print(f"eager triton: {t_eager * 1e3:.3f} ms wall; {len(kernels)} GPU kernels/copies, {gpu_us / 1e3:.3f} ms GPU time "
          f"({gpu_us / 1e3 / (t_eager * 1e3):.0%} of the wall time)")
    print(f"cuda graph:   {t_graph * 1e3:.3f} ms wall ({t_eager / t_graph:.1f}x faster than eager)")
    print("GPU time by kernel (top 15): total us, calls")
    for name, v in sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:15]:
        print(f"  {sum(v):9.1f} {len(v):5d}  {name}")
    if dump is not None:  # after the summary: a failure here loses nothing above
        try:
            dump.mkdir(parents=True, exist_ok=True)
            t0 = min((e.time_range.start for e in kernels), default=0)
            with open(dump / f"credit_kernels_{rows}.txt", "w") as f:
                f.write("start_us duration_us kernel\n")
                for e in sorted(kernels, key=lambda e: e.time_range.start):
                    dur = e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
                    f.write(f"{e.time_range.start - t0:9.1f} {dur:8.1f} {e.name[:120]}\n")
        except Exception as e:  # noqa: BLE001 - a diagnostics extra
            print(f"kernel dump failed: {e!r}")


if __name__ == "__main__":
    sys.exit(main())
