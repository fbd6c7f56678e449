"""A guard against host reads: what on CUDA tensors would be a host sync, caught on CPU.

:func:`no_host_reads` fails a block that makes an ATen op which reads a tensor's value on the
host (``item``, ``nonzero``, ``equal``, ...) or builds a tensor from Python data (a
host-to-device copy): run on CPU tensors with the ops' host-side checks off
(``milegpo_kernels.inputs.host_checks(False)``, as on CUDA tensors), it shows, without a GPU,
that a pipeline would make no host sync there. The interpreter's own reads inside a kernel
launch are not the caller's (:func:`~milegpo_kernels.testing.in_kernel`).
"""

from __future__ import annotations

import contextlib

from .launches import hooked_kernels, in_kernel

#: ATen ops that read a device tensor's value on the host (a sync on CUDA), or build a tensor
#: from Python data (a host-to-device copy on CUDA)
HOST_READS = {"_local_scalar_dense", "item", "is_nonzero", "equal", "nonzero", "masked_select", "unique_dim",
              "_unique", "_unique2", "unique_consecutive", "repeat_interleave", "lift_fresh"}


@contextlib.contextmanager
def no_host_reads(what: str = "the block"):
    """Inside the block every ATen op of :data:`HOST_READS` made outside a kernel launch is
    recorded (the block gets the list); leaving the block raises AssertionError naming them,
    ``f"{what}: host reads [...]"``. Under the interpreter kernels run hooked
    (:func:`~milegpo_kernels.testing.hooked_kernels`) to tell their reads apart."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: list[str] = []

    class HostReads(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            if name in HOST_READS and not in_kernel():  # the interpreter's own copies are not the caller's
                seen.append(name)
            return func(*args, **(kwargs or {}))

    with hooked_kernels(lambda *a: None), HostReads():
        yield seen
    if seen:
        raise AssertionError(f"{what}: host reads {seen}")
