"""What XLA:GPU's pipeline does around priority fusion that `simulate_fusion` does not.

`simulate_fusion` runs XLA's priority fusion only. XLA:GPU runs it on a module
that earlier passes already changed, and later passes change its result
again, so a module as JAX lowers it gets kernels that XLA:GPU would not make:

- before fusion, dots become Triton GEMM fusions (`GemmFusion`) or cuBLAS
  calls (`GemmRewriter`), convolutions cuDNN calls (`ConvRewriter`),
  triangular solves and Cholesky factorizations cuBLAS/cuSOLVER calls, large
  sorts CUB calls (the convolutions simulated on request, `simulate_fusion(conv_rewrites=True)`,
  `fusion._conv_rewrite`; the dots too, `gemm_rewrites=True`); normalizations and softmaxes may become Triton block-level
  fusions (`SoftmaxRewriterTriton`: simulated on request, `simulate_fusion(triton_softmax=True)`,
  `fusion._softmax_rewriter`); the simplifier, constant folding and CSE (simulated by default:
  `fusion._simplify`, `fusion._constant_folding`, `fusion._cse`) and layout assignment remove or
  merge instructions;
- after it, multi-output and horizontal fusion merge sibling kernels, and
  copy insertion adds copies.

`unsimulated_kernels(module)` lists the kernels of a fused module that come
from instructions such passes would have rewritten; `xla_gpu_kernel_kind`
sorts XLA:GPU's own kernels by the pass that made them (for comparisons with
an optimized module). The exact reference is the module XLA had right before
its fusion pass: `BEFORE_FUSION_HINT` says how to get it.
"""

from __future__ import annotations

import re
from typing import Iterable

import pandas as pd

from ..hlo import HloInstruction

__all__ = [
    "BEFORE_FUSION_HINT",
    "NOT_SIMULATED",
    "unsimulated_kernels",
    "xla_gpu_kernel_kind",
    "xla_gpu_kernels",
]

#: opcode -> (the XLA:GPU pass, before priority fusion, that rewrites it; what it makes of it)
NOT_SIMULATED: dict[str, tuple[str, str]] = {
    "dot": ("GemmFusion / GemmRewriter", "a Triton GEMM fusion or a cuBLAS call (or, when tiny, a loop fusion)"),
    "convolution": ("ConvRewriter", "a cuDNN call"),
    "triangular-solve": ("TriangularSolveRewriter", "a cuBLAS call"),
    "cholesky": ("CusolverRewriter", "a cuSOLVER call"),
    "sort": ("SortRewriter", "a CUB sort call when large enough"),
}

#: How to get the module XLA:GPU had right before priority fusion (the exact input for `simulate_fusion`).
BEFORE_FUSION_HINT = (
    "for XLA:GPU's own input to fusion, dump it and simulate that file: "
    "XLA_FLAGS='--xla_dump_to=DIR --xla_dump_hlo_pass_re=priority-fusion' "
    "(the file ending in .before_priority-fusion.txt)"
)


def unsimulated_kernels(kernels: Iterable[HloInstruction]) -> pd.DataFrame:
    """Which of `kernels` (a fused module's, as `kernels_of` lists them) XLA:GPU makes with passes
    `simulate_fusion` does not run.

    **Returns:** one row per such kernel (`computation`, `kernel`, `opcode`,
    `xla_pass`: the XLA:GPU pass before fusion that rewrites it, `xla_makes`:
    what XLA makes of it); a fusion holding a dot or convolution is listed
    under the dot's or convolution's pass.
    """
    rows = []
    for k in kernels:
        op = k.opcode
        if op == "fusion" and k.fused_computation is not None and k.fusion_kind != "kCustom":
            # (a kCustom fusion is what those passes make: `fusion._gemm_fusion`'s Triton GEMMs)
            inner = [i.opcode for i in k.fused_computation.instructions if i.opcode in NOT_SIMULATED]
            op = inner[0] if inner else op
        hit = NOT_SIMULATED.get(op)
        if hit is not None:
            comp = k.computation.name if k.computation is not None else ""
            rows.append((comp, k.name, op, hit[0], hit[1]))
    return pd.DataFrame(rows, columns=["computation", "kernel", "opcode", "xla_pass", "xla_makes"])


_KIND = re.compile(r'"kind"\s*:\s*"([^"]+)"')


def xla_gpu_kernel_kind(instr) -> str:
    """Which part of XLA:GPU's pipeline made a kernel of an optimized module.

    `"triton-gemm"` (a kCustom fusion holding a dot: `GemmFusion`), `"triton"`
    (another kCustom Triton fusion: `SoftmaxRewriterTriton` or the block-level
    rewriter), `"library"` (a custom call: cuBLAS, cuDNN, cuSOLVER, CUB, ...),
    `"copy"` (copy insertion, after fusion), `"multi-output"` (a loop or input
    fusion with several outputs: multi-output or horizontal fusion, after
    priority fusion), `"fusion"` (a loop or input fusion), else `"op"` (an
    unfused instruction).
    """
    op = instr.opcode
    if op == "async-start" and instr.called_computations:
        # an async fusion (`fusion-start`): what its wrapped computation runs
        root = instr.called_computations[0].root
        return xla_gpu_kernel_kind(root) if root is not None else "op"
    if op == "fusion" and instr.fused_computation is not None:
        body = instr.fused_computation
        if str(instr.attribute("kind", "")) == "kCustom":
            m = _KIND.search(instr.raw_attributes.get("backend_config", ""))
            kind = m.group(1) if m else ""
            if "gemm" in kind or any(i.opcode in ("dot", "scaled-dot") for i in body.instructions):
                return "triton-gemm"
            return "triton"
        return "multi-output" if body.root is not None and body.root.opcode == "tuple" else "fusion"
    if op == "custom-call":
        return "library"
    if op == "copy":
        return "copy"
    return "op"


def xla_gpu_kernels(kernels: Iterable[HloInstruction]) -> pd.Series:
    """How many of `kernels` (an XLA:GPU-optimized module's, as `kernels_of` lists them) are of each
    `xla_gpu_kernel_kind` (an async fusion's start and done are one kernel)."""
    counts: dict[str, int] = {}
    for k in kernels:
        if k.opcode == "async-done":
            continue
        kind = xla_gpu_kernel_kind(k)
        counts[kind] = counts.get(kind, 0) + 1
    return pd.Series(counts, dtype=int, name="kernels")

