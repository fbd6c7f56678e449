"""Weight sync into a colocated vLLM engine that repacks its weights (vLLM on CPU).

TRL's colocate sync (``VLLMGeneration.sync_weights``) hands every parameter to the engine
model's ``load_weights``, which copies it into the engine's parameter through that
parameter's ``weight_loader``. On vLLM's CPU platform a linear layer's weights are prepared
for a GEMM library once they are loaded (``dispatch_cpu_unquantized_gemm(layer,
remove_weight=True)``): where oneDNN, the AMX sgl-kernel or zentorch takes the layer
(AVX-512 / AMX / Zen CPUs, for example an EPYC with ``avx512_bf16``), the library keeps a
packed copy and the layer's ``weight`` becomes an empty ``Parameter`` without
``weight_loader``, so the next ``load_weights`` fails (``AttributeError: 'Parameter' object
has no attribute 'weight_loader'``). Where none of them takes the layer (an AVX2-only CPU)
the weight stays and TRL's sync works.

:func:`sync_weights_by_reload` goes through vLLM's own way of updating weights after
loading, the in-place reload (``Worker.reload_weights(weights_iterator=...,
is_checkpoint_format=True)``, vLLM's ``model_loader/reload``): the layers are put back in
their checkpoint layout, the weights are loaded through their loaders, the layer is
processed again (repacked for the CPU GEMM that took it) and the result lands in the
engine's tensors. It works whichever CPU GEMM path took a layer, so on vLLM's CPU platform
the trainer always syncs this way (the same code on every CPU); on a GPU TRL's own sync
stays (nothing is repacked there, and it is cheaper).
"""

from __future__ import annotations

import types

import milegpo.trl_seam as trl_seam  # isort: skip


def _worker(generation):
    return generation.llm.llm_engine.model_executor.driver_worker


def _engine_model(generation):
    return _worker(generation).model_runner.model


def vllm_on_cpu() -> bool:
    """Whether vLLM runs on its CPU platform."""
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def repacked_parameters(model) -> list[str]:
    """Names of the engine model's parameters a GEMM library emptied (their values live in a packed copy)."""
    return [name for name, p in model.named_parameters() if p.numel() == 0]


def sync_weights_by_reload(generation) -> None:
    """TRL's colocate ``sync_weights`` (sleep-mode wake-up, every parameter, prefix-cache reset) with the
    weights loaded by vLLM's in-place reload instead of ``load_weights``.

    generation: TRL's ``VLLMGeneration`` in ``colocate`` mode. Each parameter is cloned as it goes in:
    the reload keeps a layer's tensors until the layer is complete, and TRL's iterator may change the
    trainer's tensors in place afterwards (PEFT unmerges its adapters)."""
    if generation.enable_sleep_mode:
        trl_seam.vllm_weights_awake(generation)
    weights = ((name, param.detach().clone()) for name, param in trl_seam.vllm_named_params(generation))
    _worker(generation).reload_weights(weights_iterator=weights, is_checkpoint_format=True)
    generation.llm.reset_prefix_cache()


def install_weight_sync(generation) -> str:
    """Pick the colocate weight sync for this engine and install it on ``generation``; returns which
    (``"reload"`` or ``"trl"``). Raises RuntimeError, naming the cause, where neither can reach the
    engine's weights."""
    if generation.mode != "colocate":
        return "trl"
    worker = _worker(generation)
    if vllm_on_cpu() and callable(getattr(worker, "reload_weights", None)):
        generation.sync_weights = types.MethodType(sync_weights_by_reload, generation)
        return "reload"
    emptied = repacked_parameters(_engine_model(generation))
    if emptied:
        import vllm

        raise RuntimeError(
            f"use_vllm=True (colocate): this vLLM {vllm.__version__} engine packed {len(emptied)} weights for its "
            f"GEMM library and emptied them (e.g. {emptied[0]}), and it has no in-place reload "
            "(Worker.reload_weights), so the trained weights cannot reach it; use a vLLM with "
            "model_loader/reload (0.32 has it), vllm_mode='server', or use_vllm=False")
    return "trl"


__all__ = ["install_weight_sync", "repacked_parameters", "sync_weights_by_reload", "vllm_on_cpu"]
