"""Turn pytest-benchmark json files into markdown tables with speed-up ratios.

Usage: ``python scripts/bench_table.py a.json [b.json ...] > table.md``

Benchmarks that record ``extra_info`` ``op``, ``impl`` and ``rows`` (bench/test_kernels.py
does) become one table per op: one line per size, the median time of each
implementation, and ratios (how many times faster the second is than the first):
``python/torch``, ``torch/triton`` (CPU torch vs Triton), ``torch_cuda/triton``, and the
same against ``triton_graph`` (the Triton pipeline replayed as a CUDA graph).
Any other benchmark is listed in a plain table per benchmark group (median, min,
rounds), so every suite in bench/ shows up.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict

IMPL_ORDER = ["python", "torch", "torch_cuda", "triton"]
RATIOS = [("python", "torch"), ("torch", "triton"), ("torch_cuda", "triton"), ("python", "triton"),
          ("torch", "triton_graph"), ("torch_cuda", "triton_graph"), ("python", "triton_graph"),
          ("python", "triton_graph_nodes")]


def _fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} us"


def _fmt_ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b <= 0:
        return "-"
    r = a / b
    return f"{r:.1f}x" if r >= 1 else f"{r:.2f}x"


def load(paths: list[str]) -> list[dict]:
    out = []
    for p in paths:
        try:
            with open(p) as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            print(f"<!-- {p}: unreadable ({e}) -->", file=sys.stderr)
            continue
        for b in data.get("benchmarks", []):
            b["_file"] = p
            out.append(b)
    return out


def op_tables(benches: list[dict]) -> list[str]:
    by_op: dict[str, dict[int, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for b in benches:
        info = b.get("extra_info", {})
        by_op[info["op"]][int(info["rows"])][info["impl"]] = b["stats"]["median"]
    lines = []
    for op, sizes in by_op.items():
        impls = [i for i in IMPL_ORDER if any(i in s for s in sizes.values())]
        impls += sorted({i for s in sizes.values() for i in s} - set(impls))
        ratios = [(a, b) for a, b in RATIOS if a in impls and b in impls]
        lines.append(f"### {op}\n")
        head = ["rows"] + [f"{i} (median)" for i in impls] + [f"{a}/{b}" for a, b in ratios]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for rows in sorted(sizes):
            t = sizes[rows]
            cells = [f"{rows:,}"] + [_fmt_time(t.get(i)) for i in impls]
            cells += [_fmt_ratio(t.get(a), t.get(b)) for a, b in ratios]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def other_tables(benches: list[dict]) -> list[str]:
    by_group: dict[str, list[dict]] = defaultdict(list)
    for b in benches:
        by_group[b.get("group") or b["_file"]].append(b)
    lines = []
    for group, items in by_group.items():
        lines.append(f"### {group}\n")
        lines.append("| benchmark | median | min | rounds | extra |")
        lines.append("|---|---|---|---|---|")
        for b in sorted(items, key=lambda b: b["stats"]["median"]):
            s = b["stats"]
            extra = ", ".join(f"{k}={v}" for k, v in (b.get("extra_info") or {}).items())
            lines.append(f"| `{b['name']}` | {_fmt_time(s['median'])} | {_fmt_time(s['min'])} | {s['rounds']} | {extra} |")
        lines.append("")
    return lines


def main(paths: list[str]) -> str:
    benches = load(paths)
    if not benches:
        return "_no benchmark results_\n"
    keyed = [b for b in benches if {"op", "impl", "rows"} <= set(b.get("extra_info") or {})]
    rest = [b for b in benches if b not in keyed]
    lines = []
    if keyed:
        lines.append("Median times; `a/b` = how many times faster b is than a.\n")
        lines += op_tables(keyed)
    lines += other_tables(rest)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python scripts/bench_table.py BENCH.json [BENCH.json ...]")
    sys.stdout.write(main(sys.argv[1:]))
