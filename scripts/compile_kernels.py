"""Compile every Triton kernel variant the project launches for an H100/H200 (sm_90), on a
machine without a GPU: Triton's front end plus ptxas, no driver needed.

Step 1 (``--record``, under TRITON_INTERPRET=1): run every public op on small inputs and
record each kernel launch's argument types, constexpr values and compile options
(``num_warps``, ``enable_fp_fusion``, ...).
Step 2 (default): replay those signatures through ``triton.compile`` for sm_90, with the same
options; a kernel needing more shared memory than an sm_90 block has fails. Each line reports
the registers per thread and the stack frame (cuobjdump): spills show there before a GPU runs.
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

#: keyword arguments of a launch that are compile options, not kernel parameters
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "enable_fp_fusion")


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

    from milegpo_kernels.testing import hooked_kernels

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
        # the launch's compile options (num_warps=16 for a wide block, enable_fp_fusion=False, ...)
        options = {k: kwargs[k] for k in LAUNCH_OPTIONS if k in kwargs}
        key = f"{module}.{name}:" + json.dumps([sig, const, options], sort_keys=True, default=str)
        launches[key] = {"module": module, "kernel": name, "signature": sig, "constexprs": const, "options": options}

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
    from milegpo_kernels.segment.triton_ops import segment_normalize_triton

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


#: the most shared memory one block may use on an H100 / H200 (227 KiB, opted in)
SM90_SHARED_MAX = 232448


def _source(ast_source, fn, signature: dict, constexprs: dict):
    """The kernel's source for ``triton.compile``: Triton >= 3.3 takes the constexprs in the
    signature (as "constexpr") and apart; 3.1-3.2 only apart, as ``constants``."""
    import inspect

    if "constexprs" in inspect.signature(ast_source.__init__).parameters:
        return ast_source(fn=fn, signature=signature, constexprs=constexprs)
    return ast_source(fn=fn, signature={k: v for k, v in signature.items() if v != "constexpr"},
                      constants=constexprs)


def compile_all(path: str) -> int:
    import importlib

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    target = GPUTarget("cuda", 90, 32)
    failures, spills = 0, []
    with open(path) as f:
        launches = json.load(f)
    for item in launches:
        fn = getattr(importlib.import_module(item["module"]), item["kernel"])
        options = item.get("options", {})
        name = (f"{item['kernel']} {item['constexprs']} {sorted(set(item['signature'].values()) - {'constexpr'})}"
                + (f" {options}" if options else ""))
        try:
            k = triton.compile(_source(ASTSource, fn, item["signature"], item["constexprs"]), target=target,
                               options=options)
            shared = int(k.metadata.shared)
            if shared > SM90_SHARED_MAX:  # the launch would fail with OutOfResources on the device
                raise RuntimeError(f"needs {shared} B of shared memory, an sm_90 block has at most {SM90_SHARED_MAX}")
            use = _resource_usage(k.asm["cubin"])
            if use.get("STACK") or use.get("LOCAL"):  # register spills, or calls (fp64 division ...)
                spills.append(f"{name}: {use}")
            print(f"OK   {name}  ({len(k.asm['cubin'])} B cubin, {shared} B shared, {k.metadata.num_warps} warps, "
                  + ", ".join(f"{v} {u}" for u, v in use.items()) + ")")
        except Exception as e:  # report every failure, then exit non-zero
            failures += 1
            print(f"FAIL {name}: {type(e).__name__}: {str(e)[:2000]}")
    print(f"{len(launches) - failures} of {len(launches)} kernel variants compiled for sm_90")
    print(f"{len(spills)} use a stack frame or local memory (register spills or calls: slower, not wrong)"
          + "".join(f"\n  {s}" for s in spills))
    return 1 if failures else 0


def _resource_usage(cubin: bytes) -> dict:
    """Registers per thread and bytes of stack frame / local memory (register spills, or calls)
    from cuobjdump, which ships with Triton's NVIDIA backend; {} where it is missing."""
    import re

    import triton

    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    if not os.path.exists(tool):
        return {}
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:\d+ LOCAL:(\d+)", out)
    return {} if m is None else {"REG": int(m.group(1)), "STACK": int(m.group(2)), "LOCAL": int(m.group(3))}


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
