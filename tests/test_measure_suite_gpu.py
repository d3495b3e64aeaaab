"""The measurement suite sized for a GPU, and its library routines (measured only on a GPU; built here on the CPU,
checked to compile to the routine they are named after)."""

from __future__ import annotations

import re

import jax
import numpy as np
import pytest

from xla_costmodel.measure._suite import GPU_LIBRARY_SUITE, SUITE, sizes_for, suite_cases


def test_gpu_sweeps_are_sized_for_a_gpu():
    cpu, gpu = suite_cases(), suite_cases(backend="gpu")
    stream = [k for k in SUITE if k.size_meaning == "elements" and k.kernel_class != "launch"]
    for k in stream:
        sizes = sizes_for(k, "gpu")
        assert min(sizes) >= 1 << 20 and max(sizes) == 1 << 28  # issue 24: streams of 2^24-2^28 elements
    assert max(sizes_for(next(k for k in SUITE if k.name == "matmul_square"), "gpu")) == 8192
    conv = next(k for k in SUITE if k.name == "conv3x3")
    assert max(sizes_for(conv, "gpu")) > max(conv.sizes)
    # The CPU suite is unchanged; the GPU one adds the library routines, each case once.
    assert {c.kernel.name for c in cpu} == {k.name for k in SUITE}
    assert {c.kernel.name for c in gpu} == {k.name for k in SUITE} | {k.name for k in GPU_LIBRARY_SUITE}
    assert len({c.case_id for c in gpu}) == len(gpu)
    assert {k.kernel_class for k in GPU_LIBRARY_SUITE} == {"linalg", "sort", "conv"}
    assert {k.name for k in GPU_LIBRARY_SUITE} >= {"cholesky", "lu", "qr", "eigh", "svd", "triangular_solve", "sort",
                                                   "top_k"}
    # The quick sweep is the same everywhere (tests and `scripts/run` measure it on any backend).
    assert [c.case_id for c in suite_cases(quick=True)] == [c.case_id for c in suite_cases(quick=True, backend="cpu")]
    assert suite_cases(only="svd", backend="gpu") and not [c for c in cpu if c.kernel.name == "svd"]


#: What each routine lowers to: the LAPACK routine of its custom call (here LAPACK's, `lapack_spotrf_ffi`; on a
#: GPU cuSolver's of the same name, `cusolver_potrf_ffi`; an SVD is `gesdd` here, `gesvdj` there), or the op.
LOWERED = {"cholesky": r"potrf", "lu": r"getrf", "qr": r"geqrf", "eigh": r"syevd", "svd": r"ges(dd|vd)",
           "triangular_solve": r"trsm", "sort": r"stablehlo\.sort", "top_k": r"chlo\.top_k",
           "conv3x3_c128": r"stablehlo\.convolution"}


@pytest.mark.parametrize("kernel", GPU_LIBRARY_SUITE, ids=lambda k: k.name)
def test_library_routines_build_and_lower_to_their_routine(kernel):
    rng = np.random.default_rng(0)
    fn, args = kernel.build(kernel.quick_sizes[0], "float32", rng)
    text = jax.jit(fn).lower(*args).as_text()
    assert re.search(LOWERED[kernel.name], text), kernel.name
