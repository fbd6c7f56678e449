# Triton's interpreter must be switched on before triton is first imported, so that the
# Triton kernels run on machines without a GPU. Where CUDA is present the kernels run
# compiled (set TRITON_INTERPRET=1 yourself to force the interpreter there).
import os
import zlib

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from .properties import load as load_hypothesis_profile  # noqa: E402

load_hypothesis_profile()  # derandomized unless MILEGPO_HYPOTHESIS=explore (tests/properties.py)


def pytest_addoption(parser):
    parser.addoption(
        "--grid-order", default="shuffle", choices=("sequential", "reverse", "shuffle"),
        help="order in which Triton's interpreter runs a launch's programs (default: a permutation per launch, "
             "seeded by the test's id; see milegpo_kernels.testing.grid_order)")
    parser.addoption(
        "--grid-seed", default=0, type=int,
        help="mixed into each test's shuffle seed: another run of the suite with other program and lane orders, "
             "as another GPU run would have")


@pytest.fixture(autouse=True)
def _triton_grid_order(request):
    """Under the interpreter every test runs each kernel launch's programs, and each atomic's
    lanes, in a shuffled order (reproducible: seeded by the test's id and ``--grid-seed``): a GPU
    runs them in no set order, and a kernel or test that relies on the interpreter's 0, 1, 2, ...
    would pass here and fail there. Every load, store
    and atomic is also held to the tensors its kernel was given (``bounds_check``): on a GPU a
    stray one is an illegal address or reads another tensor; the interpreter would read or write
    whatever memory the pointer hits. A masked load without ``other`` reads NaN / garbage in its
    masked-off lanes (``poison_masked_loads``), as a GPU may, where the interpreter reads 0."""
    from milegpo_kernels import interpreter_on

    if not interpreter_on():
        yield
        return
    from milegpo_kernels.testing import bounds_check, grid_order, poison_masked_loads

    seed = zlib.crc32(request.node.nodeid.encode()) ^ request.config.getoption("--grid-seed")
    with grid_order(request.config.getoption("--grid-order"), seed), \
            bounds_check(), poison_masked_loads():
        yield


@pytest.fixture(scope="session")
def private_webshop_cache(tmp_path_factory):
    """Generated WebShop catalogs and indexes go to a folder of this test session, never to ~/.cache, and
    ``$WEBSHOP_DATA`` is unset (the embedded catalog is played)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("MILEGPO_CACHE", str(tmp_path_factory.mktemp("milegpo-cache")))
    mp.delenv("WEBSHOP_DATA", raising=False)
    yield
    mp.undo()
