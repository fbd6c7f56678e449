"""The ``milegpo`` command.

``milegpo demo``   credit on a generated rollout batch: every method side by side,
                   a table of per-step credit and the credit diagnostics.
``milegpo replay`` recompute credit and diagnostics for a stored StepBatch (.npz).
"""

from __future__ import annotations

import argparse
import sys
import time


def _add_credit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default="alfworld", choices=["alfworld", "webshop"], help="credit preset (table 5)")
    p.add_argument("--variant", default="full", choices=["md", "rcs", "full"], help="MileGPO ablation")
    p.add_argument("--backend", default="auto", choices=["auto", "reference", "torch", "triton"])


def _run_methods(batch, preset: str, variant: str, backend: str, show_rows: int, plots: str | None = None) -> int:
    import torch
    from tqdm.auto import tqdm

    from milegpo.credit import METHODS, diagnostics, estimate, presets
    from milegpo.credit.diagnose import format_diagnostics

    config = presets.get_preset(preset)
    results = {}
    timings = {}
    for method in tqdm(METHODS, desc="credit", unit="method"):
        t0 = time.perf_counter()
        results[method] = estimate(batch, method, config, variant=variant, backend=backend)
        timings[method] = time.perf_counter() - t0
    n = len(batch)
    n_traj = len(torch.unique(batch.traj))
    n_groups = len(torch.unique(batch.group))
    n_won = len(torch.unique(batch.traj[batch.success]))
    print(f"\nbatch: {n} steps, {n_traj} trajectories ({n_won} successful), {n_groups} task groups; "
          f"preset {preset}, variant {variant}")
    print(f"\n{'method':<10} {'time ms':>9} {'adv mean':>9} {'adv std':>9} {'adv min':>9} {'adv max':>9}")
    for m, r in results.items():
        a = r.advantages
        print(f"{m:<10} {timings[m] * 1e3:>9.2f} {a.mean():>9.4f} {a.std():>9.4f} {a.min():>9.4f} {a.max():>9.4f}")
    mile = results["milegpo"]
    if show_rows:
        print(f"\nper-step MileGPO credit (first {show_rows} rows by group, trajectory, step):")
        print(mile.table(max_rows=show_rows))
    print("\ncredit diagnostics (spec section 11):")
    print(format_diagnostics(diagnostics(mile)))
    if plots:
        from milegpo.plots import plot_advantages

        path = plot_advantages(results, f"{plots}/advantages_by_method.png",
                               title=f"advantages by method ({n} steps, preset {preset})")
        print(f"\nwrote {path}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from milegpo.credit.synthetic import random_batch

    batch = random_batch(n_groups=args.groups, group_size=args.group_size, horizon=args.horizon, seed=args.seed)
    if args.save:
        batch.save(args.save)
        print(f"saved the rollout batch to {args.save}")
    return _run_methods(batch, args.preset, args.variant, args.backend, args.rows, args.plots)


def cmd_replay(args: argparse.Namespace) -> int:
    from milegpo.credit import StepBatch

    batch = StepBatch.load(args.batch)
    return _run_methods(batch, args.preset, args.variant, args.backend, args.rows, args.plots)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="milegpo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="credit of every method on a generated rollout batch")
    p.add_argument("--groups", type=int, default=4, help="task groups")
    p.add_argument("--group-size", type=int, default=8, help="trajectories per group")
    p.add_argument("--horizon", type=int, default=20, help="maximum steps per trajectory")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rows", type=int, default=24, help="rows of the per-step table to print")
    p.add_argument("--save", default=None, help="also write the generated StepBatch to this .npz file")
    p.add_argument("--plots", default="milegpo_demo", help="folder for the PNG plots ('' for none)")
    _add_credit_args(p)
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("replay", help="recompute credit and diagnostics for a stored StepBatch (.npz)")
    p.add_argument("batch", help="a StepBatch .npz file")
    p.add_argument("--rows", type=int, default=24)
    p.add_argument("--plots", default="", help="folder for the PNG plots ('' for none)")
    _add_credit_args(p)
    p.set_defaults(func=cmd_replay)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
