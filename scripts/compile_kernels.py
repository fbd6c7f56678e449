"""Compile every Triton kernel variant the project launches for an H100/H200 (sm_90), on a
machine without a GPU: Triton's front end plus ptxas, no driver needed.

Step 1 (``--record``, under TRITON_INTERPRET=1): run every public op on small inputs and
record each kernel launch's argument types and constexpr values.
Step 2 (default): replay those signatures through ``triton.compile`` for sm_90.
The interpreter runs kernels as Python and so misses errors of compiled mode (a Python
global read inside a kernel, an unsupported op, a type clash); this catches them.

    python scripts/compile_kernels.py            # both steps, exit 1 on any failure
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

def _type_of(value) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        names = {torch.float32: "fp32", torch.float64: "fp64", torch.bfloat16: "bf16", torch.float16: "fp16",
                 torch.int64: "i64", torch.int32: "i32", torch.int8: "i8", torch.uint8: "u8", torch.bool: "i1",
                 torch.uint64: "u64", torch.uint32: "u32"}
        return "*" + names[value.dtype]
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    raise TypeError(f"cannot type argument {value!r}")


def record(path: str) -> None:
    import inspect

    from milegpo_kernels._launch_hooks import hooked_kernels

    launches: dict[str, dict] = {}

    def on_launch(module, name, kernel, args, kwargs):
        fn = kernel.fn
        params = list(inspect.signature(fn).parameters)
        bound = dict(zip(params, args))
        bound.update(kwargs)
        annotations = fn.__annotations__
        sig, const = {}, {}
        for p in params:
            if "constexpr" in str(annotations.get(p, "")):
                sig[p] = "constexpr"
                const[p] = bound[p]
            else:
                sig[p] = _type_of(bound[p])
        key = f"{module}.{name}:" + json.dumps([sig, const], sort_keys=True, default=str)
        launches[key] = {"module": module, "kernel": name, "signature": sig, "constexprs": const}

    with hooked_kernels(on_launch):
        _launch_every_op()
    with open(path, "w") as f:
        json.dump(list(launches.values()), f, indent=1, default=str)
    print(f"recorded {len(launches)} distinct kernel launches")


def _launch_every_op() -> None:
    """Every public op on small inputs, in each variant its kernels compile to."""
    import torch

    from milegpo_kernels import (count_distinct, dense_ids, fused_policy_loss, hop_distance, max_normalize,
                                 max_times_potential, segment_max, segment_normalize, sibling_mean)
    from milegpo_kernels.triton_segment import segment_normalize_triton

    tb = {"backend": "triton"}
    gen = torch.Generator().manual_seed(0)
    n = 300
    a = torch.randint(0, 5, (n,), generator=gen)
    b = torch.randint(-50, 50, (n,), generator=gen)
    c = torch.randint(-50, 50, (n,), generator=gen)
    dense_ids(a, **tb), dense_ids(a, b, **tb), dense_ids(a, b, c, **tb)
    dense_ids(a, b, insert_block=256, **tb)
    count_distinct(a, b, b > 0, 5, **tb)
    src, dst = torch.randint(0, 40, (n,), generator=gen), torch.randint(0, 40, (n,), generator=gen)
    hop_distance(src, dst, torch.arange(40) == 3, **tb)
    whole = torch.tensor([0, n])  # one component: the one-program-per-component launch (block 1024)
    hop_distance(src, dst, torch.arange(40) == 3, whole, **tb)
    for dt in (torch.float64, torch.float32):
        x = torch.rand(n, generator=gen, dtype=torch.float64).to(dt)
        max_times_potential(src, dst, torch.rand(40, generator=gen, dtype=torch.float64).to(dt), 0.5, **tb)
        max_times_potential(src, dst, torch.rand(40, 2, generator=gen, dtype=torch.float64).to(dt), 0.5, **tb)
        for k in (1, 2):
            seed = torch.rand(40, k, generator=gen, dtype=torch.float64).to(dt).squeeze(1)
            max_times_potential(src, dst, seed, 0.5, whole, **tb)
        for mode in ("mean_std", "mean"):
            for single in ("zero", "unit"):
                segment_normalize(x, a, 5, mode, 1e-6, single, **tb)
        segment_normalize_triton(x, a, 5, runs=True)
        for valid in (None, b > 0):
            sibling_mean(x, a, 5, valid, **tb)
            max_normalize(x.abs(), a, 5, valid, **tb)
            segment_max(x - 0.5, a, 5, valid, **tb)
    from milegpo.credit.presets import ALFWORLD
    from milegpo_kernels import ScoreParams, graph_scores

    v, g = 40, 4
    node_group = torch.arange(v) % g
    n_traj = torch.randint(0, 8, (v,), generator=gen)
    for kappa in (0, 1):
        for variant in ("md", "rcs", "full"):
            graph_scores(src, dst, b > 0, node_group, torch.arange(v) < 35, torch.arange(v) == 3,
                         torch.randint(0, 5, (v,), generator=gen), n_traj, n_traj // 2, n_traj % 3,
                         torch.full((n,), 4), torch.randint(0, 5, (n,), generator=gen), torch.full((g,), 8),
                         torch.full((g,), 3), ScoreParams.of(ALFWORLD)._replace(kappa_bc=kappa), variant, **tb)
    from milegpo_kernels import ShapingParams, shaped_advantage

    phi = torch.rand(v, 2, generator=gen, dtype=torch.float64)
    for norm in ("mean_std", "mean"):
        params = ShapingParams.of(ALFWORLD)._replace(norm=norm)
        shaped_advantage(phi, src % v, dst % v, torch.rand(n, generator=gen, dtype=torch.float64),
                         torch.rand(n, generator=gen, dtype=torch.float64), params, **tb)
    from milegpo_kernels import discounted_returns

    discounted_returns(torch.rand(n, generator=gen, dtype=torch.float64), b > 30, 0.95, **tb)
    from milegpo_kernels import INF, episode_scores, graph_return

    episode_scores(torch.rand(n, generator=gen, dtype=torch.float64), b > 0, b > 30, 0.1, **tb)
    graph_return(torch.where(a > 0, a, INF), a, 10.0, 0.2, **tb)
    from milegpo_kernels import ordered_rows

    ordered_rows(torch.randperm(n, generator=gen), a, b, c, c, b > 0, c > 0, torch.rand(n, dtype=torch.float64), **tb)
    from milegpo_kernels import graph_arrays

    u = torch.arange(n) % v  # dense ids: v nodes, v edges (e = u), g groups in runs
    gid = torch.arange(n) * g // n
    new_group = torch.ones(n, dtype=torch.bool)
    new_group[1:] = gid[1:] != gid[:-1]
    counts = (torch.tensor(v), torch.tensor(v), torch.tensor(g))
    graph_arrays(u, (u + 1) % v, u, gid, gid * 7, b, c, new_group, torch.arange(n) % 10 == 0, b > 0, *counts, 2 * n,
                 n, n, (1 << 63) - 1, **tb)
    B, T, H, V = 2, 5, 16, 67
    for dt in (torch.float32, torch.bfloat16):
        for adv_shape in ((B,), (B, T)):
            for old, ref, beta, delta, bias in ((False, False, 0.0, None, False), (True, True, 0.04, 2.0, True)):
                hidden = torch.randn(B, T, H, generator=gen).to(dt).requires_grad_()
                weight = torch.randn(V, H, generator=gen).to(dt).requires_grad_()
                ids = torch.randint(0, V, (B, T), generator=gen)
                mask = torch.ones(B, T)
                mask[0, -1] = 0
                adv = torch.randn(*adv_shape, generator=gen)
                loss, _ = fused_policy_loss(
                    hidden, weight, ids, mask, adv,
                    torch.randn(B, T, generator=gen) - 3 if old else None,
                    torch.randn(B, T, generator=gen) - 3 if ref else None,
                    bias=torch.randn(V, generator=gen).to(dt).requires_grad_() if bias else None,
                    beta=beta, delta=delta, backend="triton", vocab_chunk=32)
                loss.backward()


def compile_all(path: str) -> int:
    import importlib

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    target = GPUTarget("cuda", 90, 32)
    failures = 0
    with open(path) as f:
        launches = json.load(f)
    for item in launches:
        fn = getattr(importlib.import_module(item["module"]), item["kernel"])
        name = f"{item['kernel']} {item['constexprs']} {sorted(set(item['signature'].values()) - {'constexpr'})}"
        try:
            k = triton.compile(ASTSource(fn=fn, signature=item["signature"], constexprs=item["constexprs"]),
                               target=target)
            print(f"OK   {name}  ({len(k.asm['cubin'])} B cubin)")
        except Exception as e:  # report every failure, then exit non-zero
            failures += 1
            print(f"FAIL {name}: {type(e).__name__}: {str(e)[:2000]}")
    print(f"{len(launches) - failures} of {len(launches)} kernel variants compiled for sm_90")
    return 1 if failures else 0


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--record":
        record(sys.argv[2])
        return 0
    if len(sys.argv) > 2 and sys.argv[1] == "--compile":
        return compile_all(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "launches.json")
        env = dict(os.environ, TRITON_INTERPRET="1")
        subprocess.run([sys.executable, __file__, "--record", path], check=True, env=env)
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        return subprocess.run([sys.executable, __file__, "--compile", path], env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
