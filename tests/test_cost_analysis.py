"""Cost analysis with XLA's semantics, checked against XLA's own HloCostAnalysis.

References nobody here wrote:

- the `.cost.json` files of `hlo_fixtures/` (jaxlib's `hlo_module_cost_analysis`
  on every fixture, pre- and post-optimization);
- jaxlib's `hlo_module_cost_analysis` run live on the hand-written modules of
  `tests/_hlo_programs.py`;
- XLA's own `known_trip_count` annotations, for our induction-variable rule;
- numbers worked by hand (dot, convolution, reduce-window, gather, scatter,
  dynamic-update-slice, fusion).
"""

from __future__ import annotations

import json
import os
import warnings

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import xla_costmodel as xc  # noqa: E402
from xla_costmodel.analysis import (  # noqa: E402
    CostAnalysisWarning,
    InstructionCost,
    cost_rule,
    instruction_cost_table,
    instruction_costs,
    module_cost,
    module_stats,
    registered_opcodes,
    rules,
    while_trip_count,
)

from _hlo_programs import PROGRAMS  # noqa: E402
from conftest import FIXTURES, fixture_paths  # noqa: E402

COST_FILES = fixture_paths("*.cost.json")
MAIN_KEYS = {"flops": "flops", "transcendentals": "transcendentals", "bytes accessed": "bytes_accessed"}


def _quiet_module_cost(module, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CostAnalysisWarning)
        return module_cost(module, **kwargs)


def _fixture_cases():
    cases = []
    for path in COST_FILES:
        data = json.loads(path.read_text())
        for stage in ("pre", "post"):
            cases.append(pytest.param(data, stage, id=f"{data['name']}.{stage}"))
    return cases


# ---------------------------------------------------------------------------
# Differential: every fixture, pre- and post-optimization


def test_fixtures_present():
    assert COST_FILES, f"no {FIXTURES}/*.cost.json; run scripts/make_fixtures.py"


@pytest.mark.parametrize("data,stage", _fixture_cases())
def test_fixture_totals_match_xla(data, stage):
    """flops, transcendentals and bytes accessed within 0.1% of jaxlib (in fact bit for bit)."""
    ref = data[stage]["hlo_module_cost_analysis"]
    module = xc.load_hlo(FIXTURES / data[stage]["file"])
    ours = _quiet_module_cost(module, trip_counts=False)
    for xla_key, our_key in MAIN_KEYS.items():
        want = ref.get(xla_key, 0.0)
        assert ours[our_key] == pytest.approx(want, rel=1e-3, abs=1e-9), (xla_key, ours[our_key], want)


@pytest.mark.parametrize("data,stage", _fixture_cases())
def test_fixture_every_xla_property_exact(data, stage):
    """Every key XLA reports (per-operand bytes and utilization, optimal_seconds, ...) equal, as float32."""
    ref = data[stage]["hlo_module_cost_analysis"]
    module = xc.load_hlo(FIXTURES / data[stage]["file"])
    ours = _quiet_module_cost(module, trip_counts=False)["xla_properties"]
    assert ours == ref


def test_fixture_compiled_cost_analysis_is_the_post_module():
    # What Compiled.cost_analysis() reports is the analysis of the optimized text.
    for path in COST_FILES:
        data = json.loads(path.read_text())
        compiled = data["post"].get("compiled_cost_analysis")
        if compiled is None:
            continue
        module = xc.load_hlo(FIXTURES / data["post"]["file"])
        assert _quiet_module_cost(module, trip_counts=False)["xla_properties"] == compiled, data["name"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CostAnalysisWarning)
            assert xc.cost_analysis(module) == compiled, data["name"]  # the user's name for it: jax's dict


def test_cost_analysis_is_what_jax_compiled_cost_analysis_gives():
    """`xc.cost_analysis` of the module jax compiled gives jax's `Compiled.cost_analysis()`, live: the same
    keys (XLA's names, per-operand ones included) and values, including a loop body counted once."""
    import jax
    import jax.numpy as jnp

    def f(x, w):
        y = jnp.tanh(x @ w)
        return jnp.sum(y * y, axis=0), jax.lax.fori_loop(0, 3, lambda i, c: c * 2.0 + 1.0, x)

    compiled = jax.jit(f).lower(jnp.ones((64, 32)), jnp.ones((32, 16))).compile()
    want = compiled.cost_analysis()
    got = xc.cost_analysis(xc.parse_hlo(compiled.as_text()))
    assert {"flops", "transcendentals", "bytes accessed", "bytes accessed0{}", "utilization1{}"} <= set(got)
    assert got == want


# ---------------------------------------------------------------------------
# Differential: hand-written modules, jaxlib run live


@pytest.fixture(scope="module")
def xla_cost():
    from xla_costmodel._jaxlib_oracle import xla_cost_analysis

    return xla_cost_analysis


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs_match_jaxlib(name, xla_cost):
    text = PROGRAMS[name]
    ref = xla_cost(text)
    ours = _quiet_module_cost(xc.parse_hlo(text), trip_counts=False)["xla_properties"]
    assert ours == ref


# ---------------------------------------------------------------------------
# Hand-computed


def _costs(text):
    """Costs by instruction name (the names used below are unique in their module)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CostAnalysisWarning)
        return {name: cost for (_comp, name), cost in instruction_costs(xc.parse_hlo(text)).items()}


def test_dot_with_batch_dimensions_by_hand():
    c = _costs(PROGRAMS["dot_batch"])["d"]
    # out f32[4,8,32] = 1024 elements, each a 16-long dot product: 2 flops per FMA.
    assert c.flops == 2 * 4 * 8 * 32 * 16
    assert c.transcendentals == 0
    assert c.operand_bytes_accessed == (4 * 8 * 16 * 4, 4 * 16 * 32 * 4)
    assert c.output_bytes_accessed == 4 * 8 * 32 * 4
    assert c.bytes_accessed == (4 * 8 * 16 + 4 * 16 * 32 + 4 * 8 * 32) * 4


def test_dot_two_contracting_dims_by_hand():
    c = _costs(PROGRAMS["dot_two_contracting"])["d"]
    assert c.flops == 2 * (6 * 3) * (5 * 7)


def test_convolution_by_hand():
    costs = _costs(PROGRAMS["conv_padded_strided"])
    # 9 wide, 3-tap window, stride 2, padding 1 each side -> 5 outputs; input index 2o-1+k:
    # tap 0 is valid for o=1..4 (4), tap 1 for o=0..4 (5), tap 2 for o=0..3 (4): 13 pairs per dim.
    pairs = 13 * 13
    assert costs["c"].flops == 2 * 3 * 8 * 2 * pairs
    # Feature groups: 6 input features in 3 groups of 2, 12 outputs, 8x8 'same' 3x3 window.
    same = sum(min(8 + 1 - k, 8) - max(1 - k, 0) for k in range(3))  # 7 + 8 + 7 = 22
    assert _costs(PROGRAMS["conv_feature_groups"])["c"].flops == 2 * (6 // 3) * 12 * 2 * same * same
    # Batch groups: 4 batches in 4 groups, valid 3x3 window on 6x6 -> 4x4 outputs x 9 taps.
    assert _costs(PROGRAMS["conv_batch_groups"])["c"].flops == 2 * 2 * 4 * (4 // 4) * (4 * 3) ** 2
    # 1x1 convolution: a matmul per pixel.
    assert _costs(PROGRAMS["conv_1x1_nchw"])["c"].flops == 2 * 16 * 32 * 2 * 7 * 7


def test_reduce_window_by_hand():
    pool = _costs(PROGRAMS["reduce_window_pool"])["r"]
    out = 2 * 4 * 4 * 3
    assert pool.flops == (2 * 2 - 1) * out  # max over a 2x2 window: 3 comparisons per output
    assert pool.bytes_accessed == 4 * (2 * 8 * 8 * 3) + 4 + 4 * out
    # A cumulative sum (window 16, padded 15 on one side): 15 adds for each of 64 outputs.
    assert _costs(PROGRAMS["reduce_window_cumsum"])["r"].flops == 15 * 64
    # XLA's reduce-then-broadcast pattern (window 2n-1, padded n-1 both sides): 64/16 + 15.
    assert _costs(PROGRAMS["reduce_window_reduce_broadcast"])["r"].flops == 64 // 16 + 15


def test_gather_by_hand():
    g = _costs(PROGRAMS["gather_rows"])["g"]
    out = 10 * 16 * 4
    assert g.flops == 0
    assert g.bytes_accessed == 2 * out + 10 * 4  # the rows taken, written, and the indices
    assert g.operand_bytes_accessed == (out, 40)
    assert g.operand_utilization[0] == pytest.approx(160 / 1600)


def test_scatter_by_hand():
    s = _costs(PROGRAMS["scatter_add"])["s"]
    upd = 10 * 16 * 4
    assert s.flops == 10 * 16  # the combiner (one add) per update element
    assert s.bytes_accessed == 3 * upd + 40  # read input rows, write them, read updates; indices
    assert s.output_bytes_accessed == upd
    assert s.operand_bytes_accessed == (upd, 40, upd)


def test_dynamic_update_slice_is_costed_by_the_update():
    d = _costs(PROGRAMS["dynamic_slices"])["dus"]
    upd = 1 * 4 * 8 * 4
    assert d.bytes_accessed == 2 * upd + 4  # update read and written, plus the first start index
    assert d.output_bytes_accessed == upd
    assert d.operand_bytes_accessed[:2] == (0, upd)  # in place: operand 0 not read
    assert d.operand_utilization[0] == pytest.approx((384 - 32) / 384)
    ds = _costs(PROGRAMS["dynamic_slices"])["ds"]
    assert ds.bytes_accessed == 2 * upd + 4
    assert ds.operand_utilization[0] == pytest.approx(32 / 384)


def test_fusion_reads_only_its_slices_by_hand():
    f = _costs(PROGRAMS["fusion_slices_broadcast"])["f"]
    # p0 f32[64,32] is read through two [16,32] slices; p1 f32[32] through a broadcast.
    assert f.operand_bytes_accessed == (2 * 16 * 32 * 4, 32 * 4)
    assert f.output_bytes_accessed == 16 * 32 * 4
    assert f.bytes_accessed == 2 * 16 * 32 * 4 + 32 * 4 + 16 * 32 * 4
    assert f.flops == 2 * 16 * 32  # the add and the multiply


def test_fusion_tuple_output_with_in_place_update():
    costs = _costs(PROGRAMS["fusion_tuple_dus"])
    f = costs["f"]
    # Output 0 is a dynamic-update-slice: only its 1x8 update is written.
    assert f.extra["bytes accessedout{0}"] == 8 * 4
    assert f.extra["bytes accessedout{1}"] == 8 * 4
    assert f.output_bytes_accessed == 2 * 8 * 4
    assert costs["d"].operand_utilization[0] == 0  # set by the fusion: the rest is not read


# ---------------------------------------------------------------------------
# Per-instruction table


def test_parameter_utilization():
    module = xc.parse_hlo(PROGRAMS["data_movement"])
    result = _quiet_module_cost(module)
    # x f32[8,6] has 10 readers: pad, concatenate, two transposes, broadcast, bitcast, copy,
    # convert, bitcast-convert, reduce-precision. XLA records utilization 1 for each (10.0),
    # but the bitcast and the transpose that only relabels the layout ({1,0} -> {0,1}) move no
    # bytes: 8 full reads of 192 bytes. y is read by concatenate and reshape.
    assert result["parameter_utilization"] == {0: 10.0, 1: 2.0}
    assert result["parameter_bytes_accessed"] == {0: 8 * 192.0, 1: 2 * 192.0}


def test_cost_analysis_dataframe():
    module = xc.load_hlo(FIXTURES / "mlp_grad.post.hlo")
    df = instruction_cost_table(module)
    assert len(df) == sum(len(c.instructions) for c in module.computations)
    for col in ("computation", "name", "opcode", "flops", "transcendentals", "bytes_accessed",
                "output_bytes_accessed", "operand_bytes_accessed", "operand_utilization", "utilization",
                "in_entry", "fused", "loop_multiplier", "unpriced"):
        assert col in df.columns
    entry = df[df.in_entry]
    total = _quiet_module_cost(module)
    assert entry.flops.sum() == total["flops"]
    assert entry.bytes_accessed.sum() == total["bytes_accessed"]
    fused = df[df.fused]
    assert (fused.utilization == 1.0).all()  # base analysis: every fused instruction produced once
    assert not df.unpriced.any()


def test_shared_costs_of_look_alike_computations_change_nothing(monkeypatch):
    """Identical reducers and fusions are costed once; every record must equal a from-scratch costing."""
    from xla_costmodel.analysis import _interpreter

    for name in ("transformer_grad.post", "transformer_grad.pre", "cnn_grad.post", "gather_scatter.post"):
        module = xc.load_hlo(FIXTURES / f"{name}.hlo")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CostAnalysisWarning)
            shared = instruction_cost_table(module)
            monkeypatch.setattr(_interpreter.Analysis, "cache_fusions", False)
            monkeypatch.setattr(_interpreter, "_SMALL_COMPUTATION", -1)
            fresh = instruction_cost_table(module)
            monkeypatch.undo()
        assert shared.equals(fresh), name


def test_instruction_cost_adds_like_xla_properties():
    a = InstructionCost(flops=2, bytes_accessed=10, output_bytes_accessed=4, operand_bytes_accessed=(6,),
                        operand_utilization=(1.0,))
    b = InstructionCost(flops=3, transcendentals=1, bytes_accessed=20, operand_bytes_accessed=(8, 4),
                        operand_utilization=(0.5, 1.0), unpriced=("custom-call:x",))
    s = a + b
    assert (s.flops, s.transcendentals, s.bytes_accessed) == (5, 1, 30)
    assert s.operand_bytes_accessed == (14, 4)
    assert s.operand_utilization == (1.5, 1.0)
    assert s.unpriced == ("custom-call:x",) and not s.priced
    assert sum([a, b]) == s
    assert s.to_xla_dict()["bytes accessed1{}"] == 4
    with pytest.raises(Exception):
        a.flops = 1  # frozen


def test_sum_over_entry_rows_is_the_module_total():
    text = PROGRAMS["while_counted"]
    module = xc.parse_hlo(text)
    costs = instruction_costs(module)
    entry = sum(costs[(module.entry.name, i.name)] for i in module.entry.instructions)
    assert entry.to_xla_dict() == _quiet_module_cost(module)["xla_properties"]


# ---------------------------------------------------------------------------
# Unpriced instructions are reported, never silently zero


def test_custom_call_is_reported_unpriced():
    module = xc.parse_hlo(PROGRAMS["call_and_custom_call"])
    with pytest.warns(CostAnalysisWarning, match="custom-call:my_kernel"):
        result = module_cost(module)
    assert result["unpriced"] == {"custom-call:my_kernel": 1}
    assert result["flops"] == -1  # XLA: tanh's 0 flops plus the custom call's -1 ("unknown")
    with pytest.warns(CostAnalysisWarning):
        df = instruction_cost_table(module)
    row = df.set_index("name").loc["cc"]
    assert row.unpriced and row.unpriced_ops == ("custom-call:my_kernel",)


def test_unknown_opcode_warns_and_is_flagged():
    module = xc.parse_hlo(PROGRAMS["select_clamp_compare"])
    # Make one instruction an opcode no rule knows.
    instr = module.entry.instruction("a")
    instr.opcode = "frobnicate"
    with pytest.warns(CostAnalysisWarning, match="frobnicate"):
        result = module_cost(module)
    assert result["unpriced"] == {"frobnicate": 1}
    df = instruction_cost_table(module, warn=False)
    assert df.set_index("name").loc["a"].unpriced


def test_every_hlo_opcode_has_a_rule():
    from jax._src.lib import hlo as _hlo

    ours = registered_opcodes()
    # XLA's opcode enum, spelled as in HLO text.
    spelled = {
        "kAbs": "abs", "kAcos": "acos", "kAcosh": "acosh", "kAdd": "add", "kAddDependency": "add-dependency",
        "kAfterAll": "after-all", "kAllGather": "all-gather", "kAllGatherDone": "all-gather-done",
        "kAllGatherStart": "all-gather-start", "kAllReduce": "all-reduce", "kAllReduceDone": "all-reduce-done",
        "kAllReduceStart": "all-reduce-start", "kAllToAll": "all-to-all", "kAnd": "and", "kAsin": "asin",
        "kAsinh": "asinh", "kAsyncDone": "async-done", "kAsyncStart": "async-start",
        "kAsyncUpdate": "async-update", "kAtan2": "atan2", "kAtanh": "atanh",
        "kBatchNormGrad": "batch-norm-grad", "kBatchNormInference": "batch-norm-inference",
        "kBatchNormTraining": "batch-norm-training", "kBitcast": "bitcast", "kBitcastConvert": "bitcast-convert",
        "kBroadcast": "broadcast", "kCall": "call", "kCbrt": "cbrt", "kCeil": "ceil", "kCholesky": "cholesky",
        "kClamp": "clamp", "kClz": "count-leading-zeros", "kCollectiveBroadcast": "collective-broadcast",
        "kCollectivePermute": "collective-permute", "kCollectivePermuteDone": "collective-permute-done",
        "kCollectivePermuteStart": "collective-permute-start", "kCompare": "compare", "kComplex": "complex",
        "kConcatenate": "concatenate", "kConditional": "conditional", "kConstant": "constant",
        "kConvert": "convert", "kConvolution": "convolution", "kCopy": "copy", "kCopyDone": "copy-done",
        "kCopyStart": "copy-start", "kCos": "cosine", "kCosh": "cosh", "kCustomCall": "custom-call",
        "kDivide": "divide", "kDomain": "domain", "kDot": "dot", "kDynamicReshape": "dynamic-reshape",
        "kDynamicSlice": "dynamic-slice", "kDynamicUpdateSlice": "dynamic-update-slice", "kErf": "erf",
        "kExp": "exponential", "kExpm1": "exponential-minus-one", "kFft": "fft", "kFloor": "floor",
        "kFusion": "fusion", "kGather": "gather", "kGetDimensionSize": "get-dimension-size",
        "kGetTupleElement": "get-tuple-element", "kImag": "imag", "kInfeed": "infeed", "kIota": "iota",
        "kIsFinite": "is-finite", "kLog": "log", "kLog1p": "log-plus-one", "kLogistic": "logistic",
        "kMap": "map", "kMaximum": "maximum", "kMinimum": "minimum", "kMulhi": "mulhi", "kMultiply": "multiply",
        "kNegate": "negate", "kNot": "not", "kOptimizationBarrier": "opt-barrier", "kOr": "or",
        "kOutfeed": "outfeed", "kPad": "pad", "kParameter": "parameter", "kPartitionId": "partition-id",
        "kPopulationCount": "popcnt", "kPower": "power", "kRaggedAllToAll": "ragged-all-to-all",
        "kRaggedDot": "ragged-dot", "kReal": "real", "kRecv": "recv", "kRecvDone": "recv-done",
        "kReduce": "reduce", "kReducePrecision": "reduce-precision", "kReduceScatter": "reduce-scatter",
        "kReduceWindow": "reduce-window", "kRemainder": "remainder", "kReplicaId": "replica-id",
        "kReshape": "reshape", "kReverse": "reverse", "kRng": "rng", "kRngBitGenerator": "rng-bit-generator",
        "kRngGetAndUpdateState": "rng-get-and-update-state", "kRoundNearestAfz": "round-nearest-afz",
        "kRoundNearestEven": "round-nearest-even", "kRsqrt": "rsqrt", "kScaledDot": "scaled-dot", "kScan": "scan",
        "kScatter": "scatter", "kSelect": "select", "kSelectAndScatter": "select-and-scatter", "kSend": "send",
        "kSendDone": "send-done", "kSetDimensionSize": "set-dimension-size", "kShiftLeft": "shift-left",
        "kShiftRightArithmetic": "shift-right-arithmetic", "kShiftRightLogical": "shift-right-logical",
        "kSign": "sign", "kSin": "sine", "kSinh": "sinh", "kSlice": "slice", "kSort": "sort", "kSqrt": "sqrt",
        "kStochasticConvert": "stochastic-convert", "kSubtract": "subtract", "kTan": "tan", "kTanh": "tanh",
        "kTopK": "topk", "kTranspose": "transpose", "kTriangularSolve": "triangular-solve", "kTuple": "tuple",
        "kWhile": "while", "kXor": "xor",
    }
    xla_opcodes = [n for n in dir(_hlo.HloOpcode) if n.startswith("k")]
    unknown = [n for n in xla_opcodes if n not in spelled]
    assert not unknown, f"new XLA opcodes without a spelling here: {unknown}"
    missing = sorted(spelled[n] for n in xla_opcodes if spelled[n] not in ours)
    assert not missing, f"opcodes without a cost rule: {missing}"


def test_rule_registry_decorator():
    table_before = rules("xla")
    assert table_before["dot"].complete and not table_before["while"].complete

    @cost_rule("my-test-op", note="test only")
    def _rule(an, instr, p):
        p[0] = 7.0

    try:
        module = xc.parse_hlo(PROGRAMS["select_clamp_compare"])
        module.entry.instruction("a").opcode = "my-test-op"
        assert module_cost(module)["flops"] == 32 * 3 + 7
    finally:
        from xla_costmodel.analysis import _rules

        del _rules._REGISTRY["xla"]["my-test-op"]


# ---------------------------------------------------------------------------
# Trip counts


def test_trip_count_from_induction_variable_matches_xla_known_trip_count():
    """Our pattern rule on the unoptimized module agrees with XLA's own annotation after optimization."""
    checked = 0
    for name in ("scan_rnn", "linalg", "rng"):
        pre = xc.load_hlo(FIXTURES / f"{name}.pre.hlo")
        post = xc.load_hlo(FIXTURES / f"{name}.post.hlo")
        ours = sorted(while_trip_count(i)[0] for _, i in pre.instructions() if i.opcode == "while")
        xla = [while_trip_count(i) for _, i in post.instructions() if i.opcode == "while"]
        assert all(source == "backend_config" for _, source in xla)
        assert set(ours) == {n for n, _ in xla}
        checked += 1
    assert checked == 3


def test_trip_count_aware_totals():
    text = PROGRAMS["while_counted"]
    module = xc.parse_hlo(text)
    result = _quiet_module_cost(module)
    assert result["while_loops"] == [{"name": "w", "computation": "e", "trip_count": 10,
                                      "source": "induction variable"}]
    # body: i+1 (1 flop) and multiply (16); exp: 16 transcendentals; condition: 1 compare.
    assert result["flops"] == 1 + 16 + 1
    assert result["flops_trip_count_aware"] == 10 * 17 + 11 * 1
    assert result["transcendentals_trip_count_aware"] == 10 * 16
    assert result["trip_counts_known"]
    df = instruction_cost_table(module)
    body = df[df.computation == "body"]
    assert (body.loop_multiplier == 10).all()
    assert (df[df.computation == "cond"].loop_multiplier == 11).all()
    assert df.set_index("name").loc["w"].trip_count == 10


def test_scan_trip_count_aware_totals():
    module = xc.parse_hlo(PROGRAMS["scan_op"])
    result = _quiet_module_cost(module)
    # XLA multiplies the body (add + negate[3] = 4 flops, 1 exp) by elements(operand 1) = 15;
    # the scan runs 5 times.
    assert (result["flops"], result["transcendentals"]) == (4 * 15, 15)
    assert (result["flops_trip_count_aware"], result["transcendentals_trip_count_aware"]) == (4 * 5, 5)
    assert result["while_loops"][0]["trip_count"] == 5


def test_unknown_trip_count_keeps_xla_figure():
    module = xc.load_hlo(FIXTURES / "while_loop.pre.hlo")
    result = _quiet_module_cost(module)
    assert not result["trip_counts_known"]
    assert result["flops_trip_count_aware"] == result["flops"]
    assert all(loop["trip_count"] is None for loop in result["while_loops"])
    df = instruction_cost_table(module)
    assert df[df.loop_multiplier.isna()].shape[0] > 0


# ---------------------------------------------------------------------------
# Stats for the CLI


def test_module_stats():
    module = xc.load_hlo(FIXTURES / "scan_rnn.pre.hlo")
    stats = module_stats(module)
    data = json.loads((FIXTURES / "scan_rnn.cost.json").read_text())["pre"]["hlo_module_cost_analysis"]
    assert stats["computations"] == len(module.computations)
    assert stats["instructions"] == sum(stats["opcodes"].values()) == sum(len(c) for c in module.computations)
    assert stats["opcodes"]["while"] == 1
    assert stats["flops"] == data["flops"]
    assert stats["transcendentals"] == data["transcendentals"]
    assert stats["bytes_accessed"] == data["bytes accessed"]
    assert stats["flops_trip_count_aware"] > stats["flops"]
    json.dumps(stats)  # JSON-ready


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="HloModule"):
        module_cost("HloModule m")


def test_float32_accumulation_matches_xla_on_large_values(xla_cost):
    # Values above 2**24 are rounded by XLA's float properties; ours must round the same way.
    text = PROGRAMS["big_dot_f32_rounding"]
    ours = _quiet_module_cost(xc.parse_hlo(text), trip_counts=False)
    assert ours["flops"] == xla_cost(text)["flops"]
    exact = 2 * 1023 * 999 * 1001 + 1023 * 999
    assert ours["flops"] != exact and ours["flops"] == pytest.approx(exact, rel=1e-6)
