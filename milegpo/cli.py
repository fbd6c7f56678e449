"""The ``milegpo`` command.

``milegpo train``          the main job: SFT warm start, evaluation (household: ID/OOD; ``--env webshop``: test,
                           with WebShop's score), MileGPO iterations, evaluation again, plots and a summary.
                           Flags: every MileGPOConfig / GRPOConfig field, plus ``--model_name_or_path`` (default:
                           a tiny Qwen2 built on the spot), ``--sft_epochs``... (``milegpo train --help``).
``milegpo eval``           success (and WebShop's score) of a saved policy on its evaluation splits, and the gap.
``milegpo generate-games`` write games: ``alfworld OUT_DIR --train N --id N --ood N`` (ALFWorld game files),
                           ``household OUT.jsonl --split S --n N`` (tasks with their expert walkthroughs) or
                           ``webshop DIR --size N --seed S`` (an offline catalog in WebShop's own file formats).
``milegpo demo``           credit on a generated rollout batch: every method side by side,
                           a table of per-step credit and the credit diagnostics.
``milegpo replay``         recompute credit and diagnostics for stored rollouts: one StepBatch (.npz) or a
                           run's ``batches/`` folder (one file per iteration).
``milegpo credit-quality`` ground-truth credit quality of every method on batches labelled by the world's
                           planner: ``--out DIR`` writes ``credit_quality.json`` and a plot.

A usage mistake (an unknown flag, a bad value, a model path that is not there) ends in one line on stderr and
exit status 2 (:class:`milegpo.usage.UsageError`); ``replay`` reports each file it cannot read in one line,
goes on with the others and exits 1 at the end.
"""

from __future__ import annotations

import argparse
import sys
import time

from milegpo.usage import OneLineParser, RunError, UsageError, check_range, check_writable


def _checked(prog: str, *checks) -> None:
    """Run each ``(check, *args)`` of ``checks`` (:func:`milegpo.usage.check_range`, ``check_writable``...); the
    first refusal is one :class:`UsageError` line that starts with ``prog``."""
    for check, *args in checks:
        try:
            check(*args)
        except UsageError as e:
            raise UsageError(f"{prog}: error: {e}") from None


def _plots_folder(flag: str, folder: str | None):
    """The check of a ``--plots`` folder ('' or None: no plots, nothing to check)."""
    return (check_writable, folder, flag) if folder else (lambda: None,)


#: the names of milegpo.credit.presets.PRESETS (tests/test_cli.py checks), without importing torch for --help
PRESET_NAMES = ("alfworld", "webshop", "scienceworld", "alfworld_paper", "webshop_paper", "alfworld_spec",
                "webshop_spec", "gigpo_reference", "gigpo_reference_webshop", "graphgpo_reference",
                "graphgpo_reference_webshop", "graphgpo_reproduction", "beacon_alfworld", "beacon_webshop",
                "beacon_scienceworld")
PRESET_HELP = ("alfworld = alfworld_paper, webshop = webshop_paper: paper table 5 under the paper's reading; "
               "scienceworld: alfworld's values, BEACON's ScienceWorld script's gamma and w; "
               "alfworld_spec, webshop_spec: the spec's reading; gigpo_reference[_webshop], "
               "graphgpo_reference[_webshop]: what verl-agent's GiGPO / GraphGPO code computes with its ALFWorld "
               "[WebShop] script; graphgpo_reproduction: the recipe as issue 33 described it; "
               "beacon_alfworld / _webshop / _scienceworld: BEACON's official scripts")


def _add_credit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default="alfworld", type=str.lower, choices=PRESET_NAMES,
                   help=f"credit preset ({PRESET_HELP})")
    p.add_argument("--variant", default="full", choices=["md", "rcs", "full"],
                   help="MileGPO's ablation (the methods of one variant run their own)")
    p.add_argument("--backend", default="auto", choices=["auto", "reference", "torch", "triton"])


def _run_methods(batch, preset: str, variant: str, backend: str, show_rows: int, plots: str | None = None) -> int:
    import torch
    from tqdm.auto import tqdm

    from milegpo.credit import METHODS, diagnostics, estimate, presets
    from milegpo.credit.diagnostic_metrics import diagnostics_text
    from milegpo.credit.registry import run_variant

    config = presets.get_preset(preset)
    results = {}
    timings = {}
    for method in tqdm(METHODS, desc="credit", unit="method"):
        t0 = time.perf_counter()
        results[method] = estimate(batch, method, config, variant=run_variant(method, variant), backend=backend)
        timings[method] = time.perf_counter() - t0
    n = len(batch)
    if n == 0:
        print(f"\nbatch: 0 steps (an empty StepBatch): no credit to show; preset {preset}, variant {variant}")
        return 0
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
    print(diagnostics_text(diagnostics(mile)))
    if plots:
        from milegpo.job.plots import plot_advantages

        path = plot_advantages(results, f"{plots}/advantages_by_method.png",
                               title=f"advantages by method ({n} steps, preset {preset})")
        print(f"\nwrote {path}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from milegpo.credit.synthetic import random_batch

    _checked("milegpo demo", (check_range, "--groups", args.groups, 1), (check_range, "--group-size", args.group_size, 2),
             (check_range, "--horizon", args.horizon, 1), (check_range, "--rows", args.rows, 0),
             (check_range, "--seed", args.seed, 0, 2 ** 32 - 1), _plots_folder("--plots", args.plots),
             (check_writable, args.save, "--save", "file") if args.save else (lambda: None,))

    batch = random_batch(n_groups=args.groups, group_size=args.group_size, horizon=args.horizon, seed=args.seed)
    if args.save:
        print(f"saved the rollout batch to {batch.save(args.save)}")
    return _run_methods(batch, args.preset, args.variant, args.backend, args.rows, args.plots)


def _load_batch(path):
    """(the StepBatch of ``path``, None), or (None, the one-line reason it cannot be read)."""
    from milegpo.credit import BatchError, StepBatch

    try:
        return StepBatch.load(path), None
    except (OSError, BatchError) as e:
        return None, str(e)


def cmd_replay(args: argparse.Namespace) -> int:
    from pathlib import Path

    _checked("milegpo replay", (check_range, "--rows", args.rows, 0), _plots_folder("--plots", args.plots))
    path = Path(args.batch)
    if path.is_dir():
        return _replay_run(sorted(path.glob("*.npz")), args)
    batch, problem = _load_batch(path)
    if problem is not None:
        print(f"milegpo replay: {problem}", file=sys.stderr)
        return 1
    return _run_methods(batch, args.preset, args.variant, args.backend, args.rows, args.plots)


def _replay_run(files, args: argparse.Namespace) -> int:
    """Credit diagnostics of every iteration of a run (``<output_dir>/batches``), then the last one in detail.

    A file that cannot be read is reported in one line (stderr) and skipped; the others are replayed, and the
    exit status is 1 when any was skipped."""
    import math
    import re

    from tqdm.auto import tqdm

    from milegpo.credit import diagnostics, estimate, presets

    if not files:
        print(f"milegpo replay: no .npz StepBatch files in {args.batch}", file=sys.stderr)
        return 2
    config = presets.get_preset(args.preset)
    history, batches, bad = [], {}, []
    for i, f in enumerate(tqdm(files, desc="replay", unit="iteration")):
        batch, problem = _load_batch(f)
        if problem is not None:
            tqdm.write(f"milegpo replay: skipped {problem}", file=sys.stderr)
            bad.append(f)
            continue
        batches[f] = batch
        m = re.search(r"(\d+)", f.stem)
        d = diagnostics(estimate(batch, "milegpo", config, variant=args.variant, backend=args.backend))
        history.append({"iteration": int(m.group(1)) if m else i + 1, **d})
    if not history:
        print(f"milegpo replay: none of the {len(files)} files in {args.batch} could be read", file=sys.stderr)
        return 1
    keys = ("rows", "shared_state_coverage", "tie_share", "tie_correction_rate", "candidates", "pcc_progress_share",
            "pcc_branch_share")
    print(f"\nMileGPO ({args.variant}) credit diagnostics per iteration, preset {args.preset}:")
    print(f"{'iteration':>9} " + " ".join(f"{k:>22}" for k in keys))
    for h in history:
        cells = []
        for k in keys:
            v = h.get(k, float("nan"))
            cells.append(f"{'nan' if v is None or (isinstance(v, float) and math.isnan(v)) else f'{v:.4g}':>22}")
        print(f"{h['iteration']:>9} " + " ".join(cells))
    if args.plots:
        from milegpo.job.plots import plot_credit_diagnostics

        print(f"wrote {plot_credit_diagnostics(history, f'{args.plots}/credit_diagnostics.png')}")
    last = list(batches)[-1]
    print(f"\nlast iteration ({last.name}) by method:")
    status = _run_methods(batches[last], args.preset, args.variant, args.backend, args.rows, args.plots)
    if bad:
        print(f"milegpo replay: {len(bad)} of {len(files)} files could not be read: "
              f"{', '.join(f.name for f in bad)}", file=sys.stderr)
        return 1
    return status


def cmd_train(argv: list[str]) -> int:
    from milegpo.job import parse, run_train
    from milegpo.job.arguments import refuse_repeated_flags
    from milegpo.job.flags import check_run_environment

    refuse_repeated_flags(argv, "milegpo train")
    job, cfg = parse(argv)
    try:  # what the run needs from this machine (vLLM, the Hub, TensorBoard's folder), before any model is built
        check_run_environment(job.model_name_or_path, cfg)
    except UsageError as e:
        raise UsageError(f"milegpo train: error: {e}") from None
    run_train(job, cfg)
    return 0


def cmd_eval(argv: list[str]) -> int:
    from milegpo.job import parse, run_eval
    from milegpo.job.arguments import refuse_repeated_flags
    from milegpo.job.flags import check_run_environment

    refuse_repeated_flags(argv, "milegpo eval")
    job, cfg = parse(argv, prog="milegpo eval")
    try:  # what the run needs from this machine (vLLM, the Hub, TensorBoard's folder), before any model is built
        check_run_environment(job.model_name_or_path, cfg)
    except UsageError as e:
        raise UsageError(f"milegpo eval: error: {e}") from None
    run_eval(job, cfg)
    return 0


def cmd_generate_games(args: argparse.Namespace) -> int:
    if args.world == "alfworld":
        from milegpo.envs.alfworld.__main__ import main as alfworld_main

        return alfworld_main([args.out, *args.rest], prog="milegpo generate-games alfworld")
    if args.world == "webshop":
        return _generate_webshop(args.out, args.rest)
    import json

    from tqdm.auto import tqdm

    from milegpo.envs import HouseholdEnv, household_tasks

    p = OneLineParser(prog="milegpo generate-games household OUT.jsonl")
    p.add_argument("--split", default="train", choices=["train", "id", "ood"])
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--start", type=int, default=0, help="first seed")
    p.add_argument("--task-type", default="")
    p.add_argument("--horizon", type=int, default=50)
    opts = p.parse_args(args.rest)
    _checked(p.prog, (check_range, "--n", opts.n, 1), (check_range, "--start", opts.start, 0),
             (check_range, "--horizon", opts.horizon, 1), (check_writable, args.out, "OUT.jsonl", "file"))
    if opts.task_type:
        from milegpo.envs.household import TASK_TYPES

        if opts.task_type not in TASK_TYPES:
            raise UsageError(f"{p.prog}: error: --task-type {opts.task_type!r}: not a household task type; one of "
                             f"{', '.join(TASK_TYPES)} (or none: all)")
    tasks = household_tasks(opts.split, opts.n, start=opts.start, task_type=opts.task_type, horizon=opts.horizon)
    env = HouseholdEnv()
    lengths = []
    with open(args.out, "w") as f:
        for task in tqdm(tasks, desc="games", unit="game"):
            obs, _, info = env.reset(task)
            walk = env.walkthrough(task)
            lengths.append(len(walk))
            f.write(json.dumps({**task.to_dict(), "goal": info["goal"], "first_observation": obs,
                                "walkthrough": walk}) + "\n")
    print(f"wrote {len(tasks)} household games ({opts.split}) to {args.out}; expert walkthrough "
          f"{min(lengths)}-{max(lengths)} steps, mean {sum(lengths) / len(lengths):.1f}")
    return 0


def cmd_credit_quality(args: argparse.Namespace) -> int:
    import json

    from milegpo.evidence.quality import quality_tasks, run_credit_quality
    from milegpo.envs import EnvError, env_class
    from milegpo.envs.anchors import check_state_anchor
    from milegpo.evidence.labelled import default_expert
    from milegpo.state_sketches import StateSimilarity

    # what the command line names is checked before anything is played: a mistake is one line
    prog = "milegpo credit-quality"
    low, high = args.epsilon
    _checked(prog, (check_range, "--groups", args.groups, 1), (check_range, "--group-size", args.group_size, 2),
             *(((check_range, "--horizon", args.horizon, 1),) if args.horizon is not None else ()),
             (check_range, "--epsilon LO", low, 0, 1), (check_range, "--epsilon HI", high, 0, 1),
             (check_range, "--invalid-share", args.invalid_share, 0, 1),
             (check_range, "--temperature", args.temperature, 0, None, True),
             *(((check_range, "--checkpoint-seeds", args.checkpoint_seeds, 1),) if args.checkpoint_seeds is not None
               else ()),
             (check_range, "--resamples", args.resamples, 1), (check_range, "--similarity-shingle",
                                                                 args.similarity_shingle, 1),
             *((check_range, "--seeds", seed, 0, 2 ** 32 - 1) for seed in args.seeds),
             (check_writable, args.out, "--out"))
    if low > high:
        raise UsageError(f"{prog}: error: --epsilon {low:g} {high:g}: LO must be <= HI")
    if len(set(args.seeds)) != len(args.seeds):
        raise UsageError(f"{prog}: error: --seeds {' '.join(map(str, args.seeds))}: a seed given twice (its batches "
                         "would count twice)")
    if args.checkpoint is not None:
        from milegpo.job.flags import check_model_path

        _checked(prog, (check_model_path, args.checkpoint, "--checkpoint"))
    try:
        try:
            options = json.loads(args.env_options)
        except json.JSONDecodeError as e:
            raise ValueError(f"--env-options {args.env_options}: not valid JSON ({e})") from None
        if not isinstance(options, dict):
            raise ValueError(f"--env-options {args.env_options}: expected a JSON object such as "
                             "'{\"max_receptacles\": 4}'")
        from milegpo.rollout.tasks import check_env_options

        check_env_options(args.env, options)
        expert = args.expert or default_expert(args.env)
        if expert != "planner" and expert not in env_class(args.env).experts:
            raise ValueError(f"--expert {expert!r}: the {args.env} world's experts are "
                             f"{sorted(env_class(args.env).experts)} (or 'planner')")
        for seed in args.seeds:
            quality_tasks(args.env, args.split, args.groups, seed, args.horizon, options)
        for threshold in args.state_similarity:
            StateSimilarity(threshold, shingle_width=args.similarity_shingle)
        check_state_anchor(args.state_anchor)
    except (EnvError, ValueError) as e:
        raise UsageError(f"milegpo credit-quality: error: {e}") from None
    run_credit_quality(args.out, env=args.env, seeds=args.seeds, groups=args.groups, group_size=args.group_size,
                       horizon=args.horizon, epsilon=tuple(args.epsilon), expert=expert,
                       invalid_share=args.invalid_share, checkpoint=args.checkpoint, temperature=args.temperature,
                       checkpoint_seeds=args.checkpoint_seeds,
                       preset=args.preset, backend=args.backend, n_resamples=args.resamples, split=args.split,
                       options=options, state_anchor=args.state_anchor,
                       state_similarity=args.state_similarity, similarity_shingle=args.similarity_shingle)
    return 0


def _add_credit_quality(sub) -> None:
    from milegpo.envs.anchors import DEFAULT_STATE_ANCHOR, STATE_ANCHORS

    p = sub.add_parser("credit-quality", help="ground-truth credit quality of every method (same-state AUC, "
                                              "group AUC, accuracy on GraphGPO's ties) on labelled batches, and the "
                                              "milestone truth of every method's step scores")
    p.add_argument("--out", default="milegpo_quality", help="folder for credit_quality.json and the plot")
    p.add_argument("--env", default="household", help="environment kind (the step-label figures need its TextEnv's "
                                                      "steps_to_win; without one only the milestone truth and the "
                                                      "diagnostics are measured)")
    p.add_argument("--split", default="train", help="task split (household: train / id / ood; webshop: train / test)")
    p.add_argument("--env-options", default="{}", help="task generator settings as JSON ({}: full-size rooms)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="one batch per seed and source")
    p.add_argument("--groups", type=int, default=16, help="task groups per batch (paper: 16)")
    p.add_argument("--group-size", type=int, default=8, help="trajectories per group (paper: 8)")
    p.add_argument("--horizon", type=int, default=None, help="steps per episode (default the world's: household 50 "
                                                             "as ALFWorld, webshop 30)")
    p.add_argument("--epsilon", type=float, nargs=2, default=[0.1, 0.9], metavar=("LO", "HI"),
                   help="random-action rate of the mixed expert, drawn per trajectory from [LO, HI]")
    p.add_argument("--expert", default=None, choices=["oracle", "search", "planner"],
                   help="the mixed expert's expert (default: the world's oracle, else its search expert: webshop)")
    p.add_argument("--invalid-share", type=float, default=0.1, help="share of the random actions that are invalid")
    p.add_argument("--checkpoint", default=None, help="also play a saved policy (e.g. milegpo_run/final)")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of the saved policy")
    p.add_argument("--checkpoint-seeds", type=int, default=None,
                   help="the saved policy plays only the first N seeds' batches (default: all)")
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples over groups")
    p.add_argument("--state-anchor", default=DEFAULT_STATE_ANCHOR, metavar="NAME",
                   help=f"what the rows' state keys are made of: {', '.join(STATE_ANCHORS)} or a dotted path to a "
                        f"callable (default {DEFAULT_STATE_ANCHOR}, the trainer's); credit_quality.json's 'states' "
                        "reports its distinct states and aliased share")
    p.add_argument("--state-similarity", type=float, nargs="+", default=[], metavar="T",
                   help="also measure every method with near-duplicate states merged at each threshold T "
                        "(token-shingle Jaccard >= T inside a task group, as MileGPOConfig.state_similarity)")
    p.add_argument("--similarity-shingle", type=int, default=2, help="tokens per shingle of --state-similarity")
    p.add_argument("--preset", default=None, type=str.lower, choices=PRESET_NAMES,
                   help=f"credit preset (default webshop for webshop, scienceworld for scienceworld, else "
                        f"alfworld; {PRESET_HELP})")
    p.add_argument("--backend", default="auto", choices=["auto", "reference", "torch", "triton"])
    p.set_defaults(func=cmd_credit_quality)


def _generate_webshop(out: str, rest: list[str]) -> int:
    """``generate-games webshop DIR``: the offline catalog in WebShop's own files, read back as the env reads it."""
    from milegpo.envs.webshop import load_shop, write_catalog
    from milegpo.envs.webshop.catalog import DEFAULT_PRODUCTS, DEFAULT_SEED
    from milegpo.envs.webshop.data import TEST_GOALS

    p = OneLineParser(prog="milegpo generate-games webshop DIR")
    p.add_argument("--size", type=int, default=DEFAULT_PRODUCTS, help="products in the catalog (>= 10)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="catalog seed (same seed, same files)")
    opts = p.parse_args(rest)
    _checked(p.prog, (check_range, "--size", opts.size, 10), (check_writable, out, "DIR"))
    folder = write_catalog(out, opts.size, opts.seed)
    shop = load_shop(folder)
    test = min(TEST_GOALS, len(shop.goals))
    files = ", ".join(sorted(f.name for f in folder.glob("*.json")))
    print(f"wrote a WebShop catalog to {folder}: {len(shop.products)} products in "
          f"{len({p['category'] for p in shop.products})} categories, {len(shop.goals)} goals ({test} test, "
          f"{len(shop.goals) - test} train; option test_goals changes the split); files: {files}\n"
          f"play it: milegpo train --env webshop --env_options '{{\"data_dir\": \"{folder}\"}}' "
          f"(or WEBSHOP_DATA={folder})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="milegpo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("train", add_help=False,
                   help="SFT warm start + MileGPO training + ID/OOD evaluation + plots (flags: milegpo train --help)")
    sub.add_parser("eval", add_help=False, help="evaluate a saved policy on the ID / OOD splits (milegpo eval --help)")
    p = sub.add_parser("generate-games", help="write games: alfworld OUT_DIR --train N ... | household OUT.jsonl ... | "
                                              "webshop DIR --size N --seed S")
    p.add_argument("world", choices=["alfworld", "household", "webshop"])
    p.add_argument("out", help="alfworld: root folder of the game tree; household: a .jsonl file; webshop: the "
                               "folder of the catalog's WebShop files")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="options of the generator (--help after OUT)")
    p.set_defaults(func=cmd_generate_games)
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
    p.add_argument("batch", help="a StepBatch .npz file, or a folder of them (a run's batches/)")
    p.add_argument("--rows", type=int, default=24)
    p.add_argument("--plots", default="", help="folder for the PNG plots ('' for none)")
    _add_credit_args(p)
    p.set_defaults(func=cmd_replay)
    _add_credit_quality(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``milegpo`` command; a usage mistake prints one line on stderr and returns 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        # train / eval take the trainer's dataclass flags (TrlParser), parsed by the job itself
        if argv and argv[0] == "train":
            return cmd_train(argv[1:])
        if argv and argv[0] == "eval":
            return cmd_eval(argv[1:])
        args = build_parser().parse_args(argv)
        return args.func(args)
    except UsageError as e:
        print(str(e), file=sys.stderr)
        return 2
    except RunError as e:  # a run that cannot go on (a user's anchor failing at a step...): one line, exit 1
        print(f"milegpo {argv[0]}: error: {e} (the run stopped there)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
