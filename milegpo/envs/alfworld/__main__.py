"""``python -m milegpo.envs.alfworld OUT_DIR --train N --id N --ood N [--seed S] [--task-types ...]``

Writes solvable ALFWorld games offline (see :mod:`milegpo.envs.alfworld.generator`) under
``OUT_DIR/json_2.1.1/{train,valid_seen,valid_unseen}``; point ``$ALFWORLD_DATA`` at OUT_DIR.
"""

from __future__ import annotations

import sys
import time

from ...usage import OneLineParser, UsageError, check_range, check_writable
from .generator import TASK_TYPES, generate


def main(argv: list[str] | None = None, prog: str = "python -m milegpo.envs.alfworld") -> int:
    """Write the games; a usage mistake is a one-line :class:`~milegpo.usage.UsageError` that starts with ``prog``."""
    p = OneLineParser(prog=prog, description=__doc__.split("\n\n")[1])
    p.add_argument("out_dir", help="root of the game tree (what $ALFWORLD_DATA will point to)")
    p.add_argument("--train", type=int, default=0, help="games for train (train scenes)")
    p.add_argument("--id", type=int, default=0, help="games for valid_seen (train scenes, other games)")
    p.add_argument("--ood", type=int, default=0, help="games for valid_unseen (held-out scenes)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--task-types", nargs="+", choices=TASK_TYPES, default=None)
    p.add_argument("--max-expert-steps", type=int, default=50)
    p.add_argument("--max-instances", type=int, default=2)
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    if not (args.train or args.id or args.ood):
        p.error("ask for at least one game: --train N, --id N or --ood N")
    try:
        for flag in ("train", "id", "ood"):
            check_range(f"--{flag}", getattr(args, flag), 0)
        check_range("--max-expert-steps", args.max_expert_steps, 1)
        check_range("--max-instances", args.max_instances, 1)
        check_writable(args.out_dir, "OUT_DIR")
    except UsageError as e:
        raise UsageError(f"{p.prog}: error: {e}") from None
    for split, n in (("train", args.train), ("valid_seen", args.id), ("valid_unseen", args.ood)):
        if n:
            t0 = time.perf_counter()
            paths = generate(args.out_dir, n, seed=args.seed, split=split, task_types=args.task_types,
                             max_expert_steps=args.max_expert_steps, max_instances=args.max_instances,
                             verbose=args.verbose)
            print(f"{split}: {len(paths)} games in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except UsageError as e:
        print(e, file=sys.stderr)
        sys.exit(2)
