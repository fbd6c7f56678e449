"""Fused policy loss vs TRL 1.16's path vs the plain torch path: forward + backward.

Paths (same inputs, loss ``dapo`` with old/ref log-probs, ``beta=0.04``):
  fused  ``milegpo_kernels.policy_loss.fused_policy_loss`` (backend auto: Triton on CUDA,
         the chunked torch twin on CPU)
  trl    TRL's chunked LM head ``trl.kernels.ChunkedLogProbFunction`` (log-probs + entropy,
         as ``add_fused_lm_head`` calls it: active tokens only on CUDA, all on CPU, where
         its tiles fold in torch), then TRL's own ``GRPOTrainer._compute_loss``
  plain  full (B, T, V) logits, ``log_softmax``, gather, loss (``naive_policy_loss``)

Each path is timed by pytest-benchmark; its peak memory (CUDA: ``max_memory_allocated``
above the inputs; CPU: the largest running
total of the CPU allocator reported by the torch profiler) goes to ``extra_info``.
A module fixture measures all three paths once in the same run (median wall time and
peak memory) and checks that they agree; only then does ``extra_info`` carry the ratios
``speedup_vs_trl``, ``speedup_vs_plain``, ``mem_plain_over_fused``, ``mem_trl_over_fused``.
CPU runs use one intra-op thread. No assertion on time. Goals (H200, B=8 T=1024 H=1536
V=151936 bf16): speedup_vs_trl >= 1, mem_plain_over_fused >= 3. That shape runs only with CUDA; on CPU a small one.

    pytest bench/test_policy_loss.py --benchmark-only
"""

import importlib.util
import statistics
import time
from pathlib import Path

import pytest
import torch

from milegpo_kernels.policy_loss import fused_policy_loss, naive_policy_loss

# the TRL reference of the tests, so bench and tests share one definition
_spec = importlib.util.spec_from_file_location(
    "_policy_loss_reference", Path(__file__).resolve().parents[1] / "tests" / "kernels" / "test_policy_loss.py")
ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ref)

from trl.kernels import ChunkedLogProbFunction  # noqa: E402
from trl.trainer.utils import _CHUNKED_LOGPROB_CHUNK_SIZE  # noqa: E402

CUDA = torch.cuda.is_available()
SHAPES = {  # name: (B, T, H, V, dtype, device)
    "cpu-small": (2, 128, 64, 32003, torch.float32, "cpu"),
    "h200-qwen1.5b": (8, 1024, 1536, 151936, torch.bfloat16, "cuda"),
}
LOSS_KW = dict(loss_type="dapo", beta=0.04, temperature=0.8, epsilon_low=0.2, epsilon_high=0.28)
PATHS = ("fused", "trl", "plain")


def make_inputs(B, T, H, V, dtype, device):
    g = torch.Generator().manual_seed(0)
    hidden = (torch.randn(B, T, H, generator=g) * 0.5).to(dtype)
    weight = (torch.randn(V, H, generator=g) * H**-0.5 * 4).to(dtype)
    ids = torch.randint(0, V, (B, T), generator=g)
    mask = (torch.arange(T) < (T - torch.arange(B) * (T // (4 * B))).unsqueeze(1)).long()  # some padding
    adv = torch.randn(B, generator=g)
    old = -torch.rand(B, T, generator=g) * 8 - 4
    reflp = old + 0.1 * torch.randn(B, T, generator=g)
    c = dict(hidden=hidden, weight=weight, bias=None, ids=ids, mask=mask, adv=adv, old=old, ref=reflp)
    return {k: (v.to(device) if torch.is_tensor(v) else v) for k, v in c.items()}


def step(path, c, leaves):
    """One forward + backward; returns the loss."""
    h, w = leaves
    h.grad = w.grad = None
    if path == "fused":
        loss, _ = fused_policy_loss(h, w, c["ids"], c["mask"], c["adv"], c["old"], c["ref"], **LOSS_KW)
    elif path == "plain":
        loss, _ = naive_policy_loss(h, w, c["ids"], c["mask"], c["adv"], c["old"], c["ref"], **LOSS_KW)
    else:
        mask = c["mask"].bool()
        compact = h.is_cuda  # as trl.trainer.utils.add_fused_lm_head does
        hs = h[mask] if compact else h.reshape(-1, h.shape[-1])
        targets = c["ids"][mask] if compact else c["ids"].reshape(-1)
        logps, ent, *_ = ChunkedLogProbFunction.apply(hs, w, None, targets, LOSS_KW["temperature"],
                                                      _CHUNKED_LOGPROB_CHUNK_SIZE, None, 1.0,
                                                      ("log_probs", "entropy"))
        if compact:
            logps = logps.new_zeros(mask.shape).masked_scatter(mask, logps)
            ent = ent.new_zeros(mask.shape).masked_scatter(mask, ent)
        else:
            logps, ent = logps.view(mask.shape) * mask, ent.view(mask.shape) * mask
        kw = {k: v for k, v in LOSS_KW.items() if k != "temperature"}
        loss, _ = ref.trl_grpo_loss(logps, ent.detach(), c, **kw)
    loss.backward()
    return loss


def _sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def peak_memory(path, c, leaves, device):
    """Peak bytes allocated during one step, above what was allocated before it."""
    if device == "cuda":
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step(path, c, leaves)
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step(path, c, leaves)
    allocs = []  # (time, bytes, bytes allocated in total right after) of every allocation and free

    def walk(node):
        if node.tag == _EventType.Allocation:
            f = node.extra_fields
            allocs.append((node.start_time_ns, f.alloc_size, f.total_allocated))
        for child in node.children:
            walk(child)

    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root)
    if not allocs:
        return 0
    allocs.sort()
    base = allocs[0][2] - allocs[0][1]
    return max(total for _, _, total in allocs) - base


def leaves_for(c):
    return c["hidden"].clone().requires_grad_(True), c["weight"].clone().requires_grad_(True)


@pytest.fixture(scope="module", autouse=True)
def one_cpu_thread():
    """CPU runs use one intra-op thread: on a shared 2-core machine two threads oversubscribe
    and every op's time becomes noise. All three paths run under the same setting."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module", params=list(SHAPES))
def shape_run(request):
    B, T, H, V, dtype, device = SHAPES[request.param]
    if device == "cuda" and not CUDA:
        pytest.skip("the H200 shape needs CUDA")
    c = make_inputs(B, T, H, V, dtype, device)
    leaves = leaves_for(c)
    out, reps = {}, (3 if device == "cpu" else 5)
    results = {}
    for path in PATHS:
        loss = step(path, c, leaves)  # warm-up (Triton compile) and the values checked below
        results[path] = (loss.detach().float().item(), leaves[0].grad.float().clone(),
                         leaves[1].grad.float().clone())
        times = []
        for _ in range(reps):
            _sync(device)
            t0 = time.perf_counter()
            step(path, c, leaves)
            _sync(device)
            times.append(time.perf_counter() - t0)
        out[path] = {"time_s": statistics.median(times), "peak_bytes": peak_memory(path, c, leaves, device)}
    # agreement check: a speed-up of a path that computes something else is not reported
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-4
    base = results["plain"]
    agree = {}
    for path in ("fused", "trl"):
        loss, gh, gw = results[path]
        errs = [abs(loss - base[0]) / max(abs(base[0]), 1e-6)] + [
            ((a - b).abs().max() / b.abs().max()).item() for a, b in ((gh, base[1]), (gw, base[2]))]
        agree[path] = max(errs) <= tol
        out[path]["max_rel_err_vs_plain"] = max(errs)
    info = {"shape": request.param, "B": B, "T": T, "H": H, "V": V, "dtype": str(dtype), "device": device,
            "active_tokens": int(c["mask"].sum()), "agree": agree}
    for path in PATHS:
        for k, v in out[path].items():
            info[f"{path}_{k}"] = v
    if all(agree.values()):
        info["speedup_vs_trl"] = out["trl"]["time_s"] / out["fused"]["time_s"]
        info["speedup_vs_plain"] = out["plain"]["time_s"] / out["fused"]["time_s"]
        info["mem_plain_over_fused"] = out["plain"]["peak_bytes"] / out["fused"]["peak_bytes"]
        info["mem_trl_over_fused"] = out["trl"]["peak_bytes"] / out["fused"]["peak_bytes"]
    return c, leaves, info, device


@pytest.mark.parametrize("path", PATHS)
def test_policy_loss_fwd_bwd(benchmark, shape_run, path, record_ratio):
    c, leaves, info, device = shape_run
    benchmark.group = f"policy_loss[{info['shape']}]"
    benchmark.extra_info.update(info)
    benchmark.extra_info["path"] = path
    benchmark.extra_info["peak_bytes"] = info[f"{path}_peak_bytes"]
    if path == "fused":  # the end-of-session table of bench/conftest.py
        for name in ("speedup_vs_trl", "speedup_vs_plain", "mem_plain_over_fused", "mem_trl_over_fused"):
            if name in info:
                record_ratio(benchmark, name, info[name])

    def run():
        step(path, c, leaves)
        _sync(device)

    benchmark.pedantic(run, rounds=3 if device == "cpu" else 10, iterations=1, warmup_rounds=1)
