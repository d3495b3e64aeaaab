"""XLA:GPU's GEMM rewriting before fusion (`GemmFusion`, the dots left to cuBLAS) as `simulate_fusion` can run
it (`fusion._gemm_fusion`): checked against the module XLA:GPU itself has right before priority fusion in a
deviceless compile for h100-sxm (where jax's CUDA plugin is installed), and for what it must leave alone."""

from __future__ import annotations

import json
from collections import Counter

import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from xla_costmodel import analyze  # noqa: E402
from xla_costmodel.devices import get_device  # noqa: E402
from xla_costmodel.fusion import kernels_of, simulate_fusion  # noqa: E402
import numpy as np  # noqa: E402

from xla_costmodel.fusion._execute import run_on_cpu  # noqa: E402
from xla_costmodel.fusion._gemm_fusion import (  # noqa: E402
    choose_split_k, decompose_dots, merge_dots, rewrite_gemms, split_k_dots, strength_reduce_dots,
)
from xla_costmodel.gpu_compile import gpu_compile_available  # noqa: E402
from _xla_gpu_dumps import first_dump, xla_gpu_pass_dumps  # noqa: E402
from xla_costmodel.hlo import from_jax, parse_hlo  # noqa: E402


def mlp_gelu(x, w, b):  # split-K 4: the GEMM fusion ends at the split's reduce, bias and gelu go with the reduce
    return jax.nn.gelu(x @ w.T + b)


def bf16_dense(x, w):  # f32 activations converted to bf16 before the dot: the convert is fused (split-K 8:
    return (x.astype(jnp.bfloat16) @ w).astype(jnp.float32)  # the output converts go with the reduce)


def bf16_weight_grad(x, g):  # a widening convert read only by the root tuple: fused as the GEMM's epilogue
    xb, gb = x.astype(jnp.bfloat16), g.astype(jnp.bfloat16)  # (`CanNotBeFusedIntoAUser`, though it writes more)
    return (xb.T @ gb).astype(jnp.float32), gb.sum()


def scaled_scores(q, k):  # batched dot with a scaled operand: the multiply by a broadcast constant is fused
    return jnp.einsum("bqd,bkd->bqk", q * 0.125, k)


def tanh_operand(x, w):  # an elementwise producer of a dot operand, also used elsewhere: copied into the fusion
    t = jnp.tanh(x)
    return t @ w, t.sum()


def f64_matmul(x, w):  # f64: a Triton GEMM too in the XLA of jaxlib 0.10.2
    return x @ w


def highest_precision(x, w):  # non-default operand precision: a Triton GEMM too
    return jnp.dot(x, w, precision="highest")


def complex_matmul(x, w):  # not a Triton type: a cuBLAS call
    return x @ w


def tiny_dot(x, w):  # (M + N) * K < 100: left to the classical emitter
    return x @ w


def matvec(x, v):  # a small matrix-vector dot: the simplifier makes it a multiply and a reduce
    return x @ v


def big_matvec(x, v):  # (M + N) * K over 10M: a Triton GEMM (the vector side a unit dimension), split-K
    return x @ v


def big_matvec_highest(x, v):  # the same at precision highest: Triton's GEMM refuses it, a multiply and a reduce
    return jnp.dot(x, v, precision="highest")


def qkv(x, wq, wk, wv):  # three dots sharing x: DotMerger makes them one GEMM over the concatenated weights
    return x @ wq, x @ wk, x @ wv


def qkv_heads(x, wq, wk, wv):  # the same with [d, heads, head_dim] kernels (flax's multi-head attention)
    return tuple(jnp.einsum("bsd,dhk->bshk", x, w) for w in (wq, wk, wv))


def attention(q, k, v):  # jax.nn.dot_product_attention's einsums: DotDecomposer makes q, k and v [b, n, t, h];
    s = jnp.einsum("btnh,bsnh->bnts", q, k)  # those transposes split the merged batch dimension (b, n), so
    return jnp.einsum("bnts,bsnh->btnh", s, v)  # GemmFusion leaves them (and the output's) out: kernels of their own


def outer(x, y):  # no contracting dimension: a multiply
    return jnp.einsum("bi,bj->bij", x, y)


PROGRAMS = {
    "mlp_gelu": (mlp_gelu, [((256, 128), "float32"), ((64, 128), "float32"), ((64,), "float32")]),
    "bf16_dense": (bf16_dense, [((128, 256), "float32"), ((256, 64), "bfloat16")]),
    "bf16_weight_grad": (bf16_weight_grad, [((64, 256), "float32"), ((64, 256), "float32")]),
    "scaled_scores": (scaled_scores, [((4, 128, 64), "float32"), ((4, 128, 64), "float32")]),
    "tanh_operand": (tanh_operand, [((128, 64), "float32"), ((64, 32), "float32")]),
    "f64_matmul": (f64_matmul, [((64, 64), "float64"), ((64, 64), "float64")]),
    "highest_precision": (highest_precision, [((256, 128), "float32"), ((128, 256), "float32")]),
    "complex_matmul": (complex_matmul, [((64, 64), "complex64"), ((64, 64), "complex64")]),
    "big_matvec": (big_matvec, [((4096, 4096), "float32"), ((4096,), "float32")]),
    "big_matvec_highest": (big_matvec_highest, [((4096, 4096), "float32"), ((4096,), "float32")]),
    "qkv": (qkv, [((512, 256), "float32")] + [((256, 256), "float32")] * 3),
    "qkv_heads": (qkv_heads, [((2, 32, 64), "float32")] + [((64, 4, 16), "float32")] * 3),
    "attention": (attention, [((2, 64, 4, 32), "float32")] * 3),
    "outer": (outer, [((16, 32), "float32"), ((16, 8), "float32")]),
    "tiny_dot": (tiny_dot, [((2, 3), "float32"), ((3, 4), "float32")]),
    "matvec": (matvec, [((256, 128), "float32"), ((128,), "float32")]),
}

_NOT_COUNTED = {"parameter", "dot", "bitcast", "reshape", "transpose", "copy"}


def _specs(name):
    return [jax.ShapeDtypeStruct(s, d) for s, d in PROGRAMS[name][1]]


def _lowered(name):
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)  # f64_matmul's f64 (the others do not change)
    try:
        return from_jax(PROGRAMS[name][0], *_specs(name), optimized=False)
    finally:
        jax.config.update("jax_enable_x64", before)


def _gemms(module) -> tuple[Counter, list]:
    """What the GEMM rewriting left in `module`'s non-fusion computations: counts of Triton GEMM fusions,
    cuBLAS calls and plain dots, and per GEMM fusion the sorted opcodes fused with the dot (data
    movement that layout assignment and the simplifier turn into bitcasts left out)."""
    counts, bodies = Counter(), []
    fused = {id(i.fused_computation) for _, i in module.instructions() if i.opcode == "fusion"}
    for comp in module.computations:
        if id(comp) in fused:
            continue
        for i in comp.instructions:
            if i.opcode == "fusion" and any(j.opcode == "dot" for j in i.fused_computation.instructions):
                counts["triton-gemm"] += 1
                bodies.append(sorted(j.opcode for j in i.fused_computation.instructions
                                     if j.opcode not in _NOT_COUNTED and not (j.opcode == "constant" and not j.shape.dims)))
            elif i.opcode == "custom-call" and "cublas" in str(i.attribute("custom_call_target", "")):
                counts["cublas"] += 1
            elif i.opcode == "dot":
                counts["dot"] += 1
    return counts, sorted(bodies)


def test_mlp_gemm_takes_its_bias_and_not_its_activation():
    module = _lowered("mlp_gelu")
    done = rewrite_gemms(module)
    assert [r.kind for r in done] == ["triton-gemm"]
    counts, bodies = _gemms(module)
    assert counts == Counter({"triton-gemm": 1})
    assert "add" in bodies[0] and "broadcast" in bodies[0]
    assert not {"tanh", "multiply"} & set(bodies[0])
    # the fusion is XLA's kind: kCustom with a __triton_gemm backend config, priced by analyze
    fusion = next(i for _, i in module.instructions() if i.name == done[0].fusion)
    assert fusion.fusion_kind == "kCustom" and "__triton_gemm" in fusion.raw_attributes["backend_config"]
    parse_hlo(module.to_text())  # prints and parses back
    result = analyze(module, device="h100-sxm", model="xla-gpu")
    assert result.total_time_s > 0


def test_complex_goes_to_cublas_and_tiny_or_matvec_dots_stay():
    module = _lowered("complex_matmul")
    assert [(r.kind, r.reason) for r in rewrite_gemms(module)] == [("cublas", "c64 output")]
    assert _gemms(module)[0] == Counter({"cublas": 1})
    for name in ("highest_precision", "f64_matmul"):
        assert [(r.kind, r.reason) for r in rewrite_gemms(_lowered(name))] == [("triton-gemm", "")]
    module = _lowered("tiny_dot")
    assert rewrite_gemms(module) == []
    assert _gemms(module)[0] == Counter({"dot": 1})
    module = _lowered("matvec")
    assert rewrite_gemms(module) == []
    assert _gemms(module)[0] == Counter()
    assert [i.opcode for _, i in module.instructions() if i.opcode in ("multiply", "reduce")] == ["multiply", "reduce"]


def test_split_k_follows_xlas_cost_estimate():
    """`ChooseSplitK` on an H100 (132 SMs): what XLA's deviceless dumps show for these shapes."""
    module = _lowered("mlp_gelu")  # 256 x 64, K = 128: split 4 (XLA's dump: f32[4,256,64] and a reduce)
    dot = next(i for _, i in module.instructions() if i.opcode == "dot")
    assert choose_split_k(dot, 132, (9, 0)) == 4
    # 1024 x 512, K = 512: not split (the corpus's equinox MLP, XLA's dump)
    module = from_jax(lambda x, w: x @ w, jax.ShapeDtypeStruct((1024, 512), "float32"),
                      jax.ShapeDtypeStruct((512, 512), "float32"), optimized=False)
    dot = next(i for _, i in module.instructions() if i.opcode == "dot")
    assert choose_split_k(dot, 132, (9, 0)) == 1
    # a vector side is a side of one row to it (`DotDecomposer`): numpyro's logistic regression gradient,
    # 200000 by 200000 x 64, is split 256 on the H100 (the capture's gemm_fusion_dot.2: f32[256,1,64])
    module = from_jax(lambda r, x: r @ x, jax.ShapeDtypeStruct((200000,), "float32"),
                      jax.ShapeDtypeStruct((200000, 64), "float32"), optimized=False)
    assert [split for _, _, split in split_k_dots(module, 132, (9, 0))] == [256]


@pytest.mark.parametrize("name", ["mlp_gelu", "bf16_dense", "matvec", "qkv", "qkv_heads", "outer", "attention"])
def test_rewrites_before_gemm_fusion_compute_the_same(name):
    """Dot decomposition, strength reduction, dot merging and split-K leave plain HLO: run it on jaxlib's CPU client."""
    fn, shapes = PROGRAMS[name]
    module = _lowered(name)
    done = (decompose_dots(module) + strength_reduce_dots(module) + merge_dots(module)
            + split_k_dots(module, 132, (9, 0)))
    assert done, "expected a rewrite"
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(d) if d != "bfloat16" else rng.standard_normal(s).astype(jnp.bfloat16)
            for s, d in shapes]
    want = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
    got = run_on_cpu(module.to_text(), args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), rtol=2e-2, atol=2e-2)


def test_simulate_fusion_option_and_notes():
    x, w, b = (jnp.ones(s, d) for s, d in PROGRAMS["mlp_gelu"][1])
    on = simulate_fusion(mlp_gelu, x, w, b, device="h100-sxm", price_totals=False, gemm_rewrites=True)
    off = simulate_fusion(mlp_gelu, x, w, b, device="h100-sxm", price_totals=False)
    assert [r.kind for r in on.pre_fusion_rewrites if hasattr(r, "absorbed")] == ["triton-gemm"]
    assert any("GemmFusion" in n for n in on.notes)
    kinds_on = Counter(k.opcode for k in kernels_of(on.module))
    assert "dot" not in kinds_on and on.not_simulated.empty
    assert "dot" in Counter(k.opcode for k in kernels_of(off.module))
    # on a CPU device nothing is rewritten (XLA:CPU has no such pass)
    cpu = simulate_fusion(mlp_gelu, x, w, b, device="cpu-host", price_totals=False, gemm_rewrites=True) \
        if _has_device("cpu-host") else None
    assert cpu is None or not [r for r in cpu.pre_fusion_rewrites if hasattr(r, "absorbed")]


def _has_device(name):
    from xla_costmodel.devices import device_names
    return name in device_names()




def _xla_before_fusion(name: str) -> str:
    """XLA:GPU's module right before its fusion pipeline (GEMM rewriting done) in a deviceless compile."""
    dumps = xla_gpu_pass_dumps(__file__, name, "variadic-op-splitter", x64=True)
    text = first_dump(dumps, "*.before_variadic-op-splitter.txt", contains="jit_" + name)
    assert text is not None, f"no dump before variadic-op-splitter in {sorted(dumps)[:5]}"
    return text


# Measured differences, left as known gaps (strict: they fail once fixed):
_KNOWN_GAPS = {
}


def _ours_and_xla_before_fusion(name: str):
    """Program `name` lowered and through our GEMM rewriting for h100-sxm, and XLA:GPU's deviceless module
    before its fusion pipeline (skips without jax's CUDA plugin)."""
    if not gpu_compile_available():
        pytest.skip("jax_plugins.xla_cuda12 is not installed: no deviceless XLA:GPU compile")
    xla = parse_hlo(_xla_before_fusion(name))
    h100 = get_device("h100-sxm")
    ours = _lowered(name)
    rewrite_gemms(ours, h100.compute_capability, h100.core_count)
    return ours, xla


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(reason=_KNOWN_GAPS[n], strict=True))
                                  if n in _KNOWN_GAPS else n for n in PROGRAMS])
def test_same_gemms_as_xla_gpu_before_its_fusion(name):
    """Deviceless XLA:GPU compile for h100-sxm: the module before its fusion pipeline has the same Triton GEMM
    fusions (fusing the same operations), cuBLAS calls and plain dots as ours from the lowered module; and our
    pass leaves XLA's module as it is (its dots are those XLA left)."""
    ours, xla = _ours_and_xla_before_fusion(name)
    assert _gemms(ours) == _gemms(xla), json.dumps({"ours": repr(_gemms(ours)), "xla": repr(_gemms(xla))})
    h100 = get_device("h100-sxm")
    assert rewrite_gemms(xla, h100.compute_capability, h100.core_count) == []


def _transposes_outside_gemms(module, inside: bool = False) -> int:
    """Transposes left outside the GEMM fusions, or (`inside`) in them (those that move only unit
    dimensions are bitcasts)."""
    fused = {id(i.fused_computation) for _, i in module.instructions() if i.opcode == "fusion"}
    n = 0
    for comp in module.computations:
        if (id(comp) in fused) != inside:
            continue
        for i in comp.instructions:
            if i.opcode == "transpose":
                perm = [int(p) for p in i.attribute("dimensions", ())]
                moved = [p for p in perm if i.operands[0].shape.dims[p] != 1]
                n += moved != sorted(moved)
    return n


@pytest.mark.parametrize("name", ["attention", "scaled_scores", "qkv_heads", "mlp_gelu"])
def test_transposes_gemm_fusion_leaves_out_as_xla(name):
    """`DotDecomposer`'s transposes and the ones jax lowers: those that would split a dot dimension
    (`fusion._dim_order`) stay out of the GEMM fusion, as many as in XLA:GPU's module before its fusion."""
    ours, xla = _ours_and_xla_before_fusion(name)
    assert _transposes_outside_gemms(ours) == _transposes_outside_gemms(xla)
    # and the ones left in: `TransposeFolding` has folded the probabilities' into the second dot
    assert _transposes_outside_gemms(ours, inside=True) == _transposes_outside_gemms(xla, inside=True)


def test_dimension_orders_refuse_a_split_batch_dimension():
    """Without XLA: a transpose that keeps each dot dimension contiguous is fused into the GEMM (its
    batch and non-contracting dimensions swapped), one that interleaves the two batch dimensions with
    the non-contracting one is not."""
    def swapped(x, w):  # x [t, b, k] -> [b, t, k]: B and M each one contiguous fragment
        return jnp.einsum("tbk,bkn->btn", x, w)

    for fn, a, want in ((swapped, (64, 8, 32), 0), (attention, (2, 64, 4, 32), 4)):  # q, k, v and the output
        args = [jax.ShapeDtypeStruct(a, "float32")] * 2 if fn is swapped else [jax.ShapeDtypeStruct(a, "float32")] * 3
        if fn is swapped:
            args[1] = jax.ShapeDtypeStruct((8, 32, 16), "float32")
        module = from_jax(fn, *args, optimized=False)
        rewrite_gemms(module, (9, 0), 132)
        assert _transposes_outside_gemms(module) == want, fn.__name__


def _physical_offsets(dims, m2m) -> list[int]:
    """Each element's offset in memory, by its row-major (logical) linear index: brute force."""
    out = []
    for linear in range(int(np.prod(dims))):
        index, rest = [0] * len(dims), linear
        for d in reversed(range(len(dims))):
            index[d], rest = rest % dims[d], rest // dims[d]
        offset, scale = 0, 1
        for d in m2m:
            offset, scale = offset + index[d] * scale, scale * dims[d]
        out.append(offset)
    return out


def test_reshape_keeps_layout_and_align_layouts_against_brute_force():
    """Without XLA: `reshape_keeps_layout` (XLA's `ReshapeIsBitcast` on any layouts) says whether every
    element stays where it is, and `AlignLayouts` (`fusion._dim_order`) finds a layout that makes the
    reshape keep them whenever one of the layouts tried does, over every layout of small shapes."""
    import itertools

    from xla_costmodel.analysis.shapes import reshape_keeps_layout
    from xla_costmodel.fusion._dim_order import _align_layouts
    from xla_costmodel.hlo import Shape

    pairs = [((2, 3, 4), (6, 4)), ((2, 3, 4), (2, 12)), ((4, 6), (2, 2, 6)), ((2, 1, 6), (12,)), ((3, 4), (4, 3)),
             ((2, 3, 1, 4), (6, 4, 1))]
    checked = aligned = 0
    for a, b in pairs:
        for ma in itertools.permutations(range(len(a))):
            found = None
            for mb in itertools.permutations(range(len(b))):
                same = _physical_offsets(a, ma) == _physical_offsets(b, mb)
                assert reshape_keeps_layout(Shape.array("f32", a, ma), Shape.array("f32", b, mb)) == same, (a, ma, b, mb)
                checked += 1
                found = found or same
            got = _align_layouts(a, ma, b)
            if got is not None:
                aligned += 1
                assert reshape_keeps_layout(Shape.array("f32", a, ma), Shape.array("f32", b, got)), (a, ma, b, got)
            # with unit dimensions XLA's AlignLayouts may miss a layout; without, it finds one when there is one
            assert got is not None or not found or 1 in a or 1 in b, (a, ma, b)
    assert checked > 100 and aligned > 10


_LAID_OUT = """HloModule laid_out, entry_computation_layout={(f32[64,64]{1,0}, f32[2,64,32]{2,1,0})->f32[64,64]{1,0}}

ENTRY main {
  w = f32[64,64]{1,0} parameter(0)
  a = f32[2,64,32]{2,1,0} parameter(1)
  t = f32[2,32,64]{%s} transpose(a), dimensions={0,2,1}
  r = f32[64,64]{1,0} reshape(t)
  ROOT d = f32[64,64]{1,0} dot(%s), lhs_contracting_dims={1}, rhs_contracting_dims={1}
}
"""


def _fused_opcodes(layout: str, operands: str) -> set:
    module = parse_hlo(_LAID_OUT % (layout, operands))
    rewrite_gemms(module, (9, 0))
    gemm = module.entry.root
    assert gemm.opcode == "fusion"
    return {i.opcode for i in gemm.fused_computation.instructions} & {"transpose", "reshape"}


def test_dimension_orders_follow_layouts():
    """Without XLA: the dimension orders read each tensor in its own layout (XLA's
    `triton_tiling_propagation`). The rows (2, 32) of `r` are two fragments in memory with the 64
    columns between them, a split GemmFusion takes on the LHS non-contracting dimension and refuses on
    the RHS one. With `t` laid out as its operand (`{1,2,0}`: a transpose that moves nothing) the
    reshape after it is the physical transpose (followed as `ReshapeDecomposer`'s copy and bitcast):
    on the RHS it stays out of the GEMM with `t` (equinox's attention output, which XLA leaves a
    transpose kernel before its GEMM). In the default layout `t` is the physical transpose, and the
    reshape a bitcast that is fused on either side."""
    assert _fused_opcodes("1,2,0", "r, w") == {"transpose", "reshape"}
    assert _fused_opcodes("1,2,0", "w, r") == set()
    assert _fused_opcodes("2,1,0", "r, w") == {"transpose", "reshape"}
    assert _fused_opcodes("2,1,0", "w, r") == {"reshape"}


_BIAS = """HloModule bias, entry_computation_layout={(f32[64,128]{1,0}, f32[256,128]{1,0}, f32[64]{0})->f32[256,64]{1,0}}

ENTRY main {
  w = f32[64,128]{1,0} parameter(0)
  x = f32[256,128]{1,0} parameter(1)
  b = f32[64]{0} parameter(2)
  d = f32[64,256]{1,0} dot(w, x), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  t = f32[256,64]{0,1} transpose(d), dimensions={1,0}
  bb = f32[256,64]{1,0} broadcast(b), dimensions={1}
  s = f32[256,64]{0,1} add(t, bb)
  ROOT n = f32[256,64]{1,0} negate(s)
}
"""


def test_dimension_orders_take_an_elementwise_operand_in_its_users_layout():
    """Without XLA: JAX lowers `x @ w.T + b` as a dot, a transpose laid out to move nothing and an
    add in that layout whose bias broadcast keeps the default one (equinox's MLP). Layout assignment
    gives an elementwise op's operands its own layout, so the broadcast is read in the add's and joins
    the GEMM's epilogue with the transpose and the add (read in its own layout, it is refused)."""
    module = parse_hlo(_BIAS)
    rewrite_gemms(module, (9, 0))
    (gemm,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert {"transpose", "add", "broadcast"} <= {i.opcode for i in gemm.fused_computation.instructions}
