"""The switch of the ops' host-side checks (milegpo_kernels.inputs.host_checks) and the host-read
guard (milegpo_kernels.testing.no_host_reads) that the GPU-layout test of the credit pipeline runs
under (tests/credit/test_triton_backend.py)."""

import pytest
import torch

from milegpo_kernels import ordered_rows, segment_normalize
from milegpo_kernels import interpreter_on
from milegpo_kernels.inputs import check_id_ranges, check_seg_range, host_checks
from milegpo_kernels.testing import no_host_reads


def test_host_checks_switch_the_id_checks_off_and_back():
    ids, seg = torch.tensor([0, 5]), torch.tensor([1, -1])
    with pytest.raises(ValueError, match=r"op: ids\[1\] = 5 is outside \[0, 3\)"):
        check_id_ranges({"ids": (ids, 3)}, "op")
    with host_checks(False):
        check_id_ranges({"ids": (ids, 3)}, "op")
        check_seg_range(seg, 2, "op")
        with host_checks(True), pytest.raises(ValueError, match=r"op: seg\[1\] = -1"):
            check_seg_range(seg, 2, "op")
        check_seg_range(seg, 2, "op")  # the inner block ended: off again
    with pytest.raises(ValueError, match=r"op: seg\[1\] = -1"):
        check_seg_range(seg, 2, "op")
    with pytest.raises(TypeError, match="enabled must be a bool"):
        with host_checks(0):
            pass


def test_an_op_with_host_checks_off_keeps_its_dtype_checks():
    order = torch.tensor([0, 1])
    cols = (order, order, order, order, torch.zeros(2, dtype=torch.bool), torch.zeros(2, dtype=torch.bool))
    with host_checks(False), pytest.raises(ValueError, match="ordered_rows: reward must be"):
        ordered_rows(order, *cols, torch.zeros(2, dtype=torch.float32))


def test_no_host_reads_names_the_reads_and_passes_a_clean_block():
    x = torch.arange(6, dtype=torch.float64)
    with pytest.raises(AssertionError, match=r"^sum: host reads \['_local_scalar_dense', 'nonzero'\]$"):
        with no_host_reads("sum"):
            float(x.sum())
            torch.nonzero(x)
    with no_host_reads() as seen:
        y = (x * 2).cumsum(0)
    assert seen == [] and y[-1].item() == 30.0


@pytest.mark.skipif(not interpreter_on(), reason="interpreter only")
def test_an_ops_host_checks_are_its_only_host_reads():
    """segment_normalize on CPU tensors: its id check reads the ids on the host (``nonzero``);
    with host checks off, as on CUDA tensors, the op (its launches) reads nothing there."""
    x = torch.randn(50, dtype=torch.float64)
    seg = torch.arange(50) % 4
    with pytest.raises(AssertionError, match=r"^segment_normalize: host reads \['nonzero'\]$"):
        with no_host_reads("segment_normalize"):
            segment_normalize(x, seg, 4, backend="triton")
    with host_checks(False), no_host_reads("segment_normalize") as seen:
        got = segment_normalize(x, seg, 4, backend="triton")
    assert seen == []
    torch.testing.assert_close(got, segment_normalize(x, seg, 4, backend="torch"), rtol=1e-12, atol=1e-12)
