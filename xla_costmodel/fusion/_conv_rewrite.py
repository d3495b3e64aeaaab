"""XLA:GPU's convolution passes before fusion: `convolution`s become cuDNN calls, with the pads, slices and
transposes XLA puts around them as instructions of their own (kernels, once fused).

XLA:GPU (openxla/xla `xla/service/gpu/transforms/`, read for these rules) runs, on every convolution:

1. `ConvRewriter` (`conv_rewriter.cc`): a custom call returning `(result, u8[0] scratch)` and a
   `get-tuple-element` of its result. Which call: `__cudnn$convBackwardInput` when the filter is a `reverse`
   of every spatial dimension (or a 1x1 / constant filter of a base-dilated convolution), no feature groups,
   stride 1 and no window dilation (`MatchBackwardInput`: the reverse is taken into the call, the window and
   labels become the forward convolution's); `__cudnn$convBackwardFilter` when it does not look like a forward
   convolution (batch or output features differ, or a kernel larger than the output) and has stride 1, no
   base dilation, no feature groups and at most one spatial dimension whose kernel is not larger than the
   output (`MatchBackwardFilter`); else `__cudnn$convForward` (`CanImplementAsGpuForwardConv`: at most 3
   spatial dimensions, no empty operand, all or no window reversal). Others stay convolutions.
2. `CudnnFusedConvRewriter` (`cudnn_fused_conv_rewriter.cc`), on non-depthwise forward calls whose result is
   read once: a product with a broadcast constant its `conv_result_scale` (`FuseConvAlpha`), then
   `add(result, broadcast of a vector along the output features)` becomes the bias of a
   `__cudnn$convBiasActivationForward`, any other addend its side input (twice: a bias and a side input), then
   `maximum(result, 0)` its ReLU.
3. `ConvPaddingLegalization` (`conv_padding_legalization.cc`): cuDNN pads evenly only. A forward call with
   uneven or negative padding or base dilation gets a `pad` (and a `slice`) of its input, and a window
   dilation that cannot stay a `pad` of its filter; a backward-filter call with uneven padding a `pad` of its
   input by the difference; a backward-input call with uneven padding a larger result and a `slice`.
4. `CudnnPadForConvolutions` (`cudnn_pad_for_convolutions.cc`): f16 forward and backward calls on Volta and
   later get their feature dimensions padded to multiples of 8 (3 input features and 32 or 64 output
   features: to 4) where no buffer grows by more than 1.35x: `pad`s of the operands, a `slice` of the result.
5. Layout assignment (`layout_assignment.cc`, `HeuristicLayoutAssignment`) puts the call's operands and
   result in cuDNN's layout: NHWC (filter OHWI) on Hopper and later unless f64 or more than 2 spatial
   dimensions (then NCHW / OIHW); before Hopper NHWC for f16 / bf16 2-D convolutions on Volta and later, NCHW
   otherwise; integer and f8 convolutions NHWC. Where the operand's dimensions are in another order, XLA
   copies it into that layout, and layout normalization makes the copy a `transpose` (a kernel unless it only
   moves dimensions of size 1: a bitcast). The call's result layout is propagated to its readers: an
   elementwise reader (its other operands scalar broadcasts or the same transpose) computes in the call's
   order, a reduce reads it with its dimensions renumbered, the next call's transpose into that order
   vanishes; a transpose back to the convolution's order is left only where a reader needs it (the
   entry's result, a dot, ...): XLA's copy there.

Here the calls are written as layout normalization leaves them: operands and result in cuDNN's dimension
order, row-major, with the labels that say so (`b01f_o01i->b01f`), which the library models price from
(`analysis.library`: a call's flops from its window and labels, its bytes from its operands and real
result). Not simulated: `ConvertBatchGroupedToFeatureGroupedConvolution` (a batch-grouped forward call is
left with its batch groups), the int8 passes (vectorized layouts, s8 padding), f8 graph convolutions, the
runtime-fused activations (ELU, ReLU6, leaky ReLU: off by default in XLA), and the simplifier swapping a
convolution's operands (`AlgebraicSimplifier`'s conv operand swap: XLA then transposes other operands).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from ..analysis.opcodes import is_elementwise
from ..hlo import HloComputation, HloInstruction, HloModule, Shape, Window

__all__ = ["ConvRewrite", "CUDNN_CONV_TARGETS", "rewrite_convolutions"]

FORWARD = "__cudnn$convForward"
BIAS_ACTIVATION = "__cudnn$convBiasActivationForward"
BACKWARD_INPUT = "__cudnn$convBackwardInput"
BACKWARD_FILTER = "__cudnn$convBackwardFilter"
#: The custom-call targets `ConvRewriter` and `CudnnFusedConvRewriter` make, and the names XLA gives the calls.
CUDNN_CONV_TARGETS = {FORWARD: "cudnn-conv", BIAS_ACTIVATION: "cudnn-conv-bias-activation",
                      BACKWARD_INPUT: "cudnn-conv-bw-input", BACKWARD_FILTER: "cudnn-conv-bw-filter"}

HOPPER = (9, 0)
VOLTA = (7, 0)
#: `CudnnPadForConvolutions`: no padded buffer may grow by more than this (`kMaxBytesTouchedBound`, f16).
MAX_BYTES_TOUCHED_BOUND = 1.35


@dataclass(frozen=True, slots=True)
class ConvRewrite:
    """One convolution rewritten before fusion (a row of `FusionResult.pre_fusion_rewrites`).

    `kind`: `"cudnn-conv"`; `instruction`: the convolution; `target`: the cuDNN call's target; `call`: its
    name; `layout`: `"NHWC"` or `"NCHW"`; `absorbed`: the instructions the call took in (a filter's reverse,
    a bias add, a ReLU); `added`: the pads, slices and transposes put around it (each a kernel unless fused
    or a bitcast).
    """

    kind: str
    instruction: str
    target: str
    call: str
    layout: str
    absorbed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()


@dataclass(slots=True)
class _Dims:
    """Convolution dimension numbers (mutable while the passes rewrite them)."""

    ib: int
    if_: int
    isp: list
    ki: int
    ko: int
    ksp: list
    ob: int
    of: int
    osp: list


@dataclass(slots=True)
class _Call:
    """A cuDNN call being built, in the convolution's own dimension order (logical shapes)."""

    conv: HloInstruction
    target: str
    window: Window
    dims: _Dims
    lhs: HloInstruction
    rhs: HloInstruction
    result: Shape  # logical result array
    groups: int
    bias: HloInstruction | None = None
    side_input: HloInstruction | None = None
    activation: str = "kNone"
    scale: str = ""  # conv_result_scale (`FuseConvAlpha`): the constant's text, "" for 1
    back: HloInstruction | None = None  # the transpose of the result back to the convolution's order
    replaces: HloInstruction | None = None  # the instruction whose readers read the call's result
    slice_result: tuple | None = None  # (start, limit) of the result to keep (padding legalization / CudnnPad)
    absorbed: list = field(default_factory=list)
    added: list = field(default_factory=list)


def _dims_of(conv) -> _Dims:
    d = conv.attribute("dim_labels")
    return _Dims(d.input_batch, d.input_feature, list(d.input_spatial), d.kernel_input_feature,
                 d.kernel_output_feature, list(d.kernel_spatial), d.output_batch, d.output_feature,
                 list(d.output_spatial))


def _int_attr(instr, name: str, default: int = 1) -> int:
    return int(instr.attribute(name, default)) if instr.has_attribute(name) else default


def _ints(instr, name: str) -> tuple[int, ...]:
    v = instr.attribute(name, ())
    return tuple(v) if isinstance(v, (tuple, list)) else (int(v),)


def _wdim(window: Window, i: int, **changes) -> Window:
    dims = list(window.dimensions)
    dims[i] = replace(dims[i], **changes)
    return replace(window, dimensions=tuple(dims))


def _looks_like_forward(conv, d: _Dims) -> bool:
    """`LooksLikeForwardConvolution`."""
    lhs, rhs, out = conv.operands[0].shape, conv.operands[1].shape, conv.shape
    if lhs.dims[d.ib] != out.dims[d.ob] or rhs.dims[d.ko] != out.dims[d.of]:
        return False
    return all(rhs.dims[k] <= out.dims[o] for k, o in zip(d.ksp, d.osp))


def _conv1d_as_2d(conv, d: _Dims) -> bool:
    """`MaybeConv1dToConv2d`: a 2-D convolution whose filter is a reshape inserting one spatial dimension of 1."""
    f = conv.operands[1]
    if len(d.ksp) != 2 or f.opcode != "reshape":
        return False
    a, b = list(f.operands[0].shape.dims), list(f.shape.dims)
    if len(b) != len(a) + 1:
        return False
    for k in d.ksp:  # the inserted dimension of size 1 is one of the kernel's spatial dimensions
        if b[k] == 1 and b[:k] + b[k + 1:] == a:
            return True
    return False


def _match_backward_filter(conv, d: _Dims, window: Window):
    """`MatchBackwardFilter`: (window, dims) of the backward-filter call, or None."""
    if _int_attr(conv, "feature_group_count") > 1 or _looks_like_forward(conv, d):
        return None
    for w in window.dimensions:
        if w.stride != 1 or w.base_dilation != 1 or w.padding_low < 0 or w.window_reversal:
            return None
    small = sum(conv.operands[1].shape.dims[k] <= conv.shape.dims[o] for k, o in zip(d.ksp, d.osp))
    dilated = any(w.window_dilation != 1 for w in window.dimensions)
    if (not d.ksp or small > 1 or (not _conv1d_as_2d(conv, d) and small == 1)) and not dilated:
        return None
    new = []
    for i, w in enumerate(window.dimensions):
        size = conv.shape.dims[d.osp[i]]
        stride = w.window_dilation
        input_size = conv.operands[0].shape.dims[d.isp[i]]
        min_high = size + (w.size - 1) * stride - input_size - w.padding_low
        max_high = min_high + stride - 1
        high = w.padding_low if min_high <= w.padding_low <= max_high else (
            min_high if w.padding_low < min_high else max_high)
        if high < 0:
            return None
        new.append(replace(w, size=size, stride=stride, padding_high=high, base_dilation=1, window_dilation=1))
    dims = _Dims(d.if_, d.ib, list(d.isp), d.ob, d.of, list(d.osp), d.ki, d.ko, list(d.ksp))
    return replace(window, dimensions=tuple(new)), dims


def _is_constant(instr) -> bool:
    return instr.opcode == "constant"


def _match_backward_input(conv, d: _Dims, window: Window):
    """`MatchBackwardInput`: (window, dims, filter) of the backward-input call, or None."""
    groups = _int_attr(conv, "feature_group_count")
    if groups > 1:  # XLA leaves grouped backward-input convolutions forward (the early return above the rest)
        return None
    f = conv.operands[1]
    reversed_filter = f.opcode == "reverse" and sorted(_ints(f, "dimensions")) == sorted(d.ksp)
    reversed_1d = _conv1d_as_2d(conv, d) and f.operands[0].opcode == "reverse"
    one_by_one = all(w.size == 1 for w in window.dimensions)
    base_dilated = any(w.base_dilation != 1 for w in window.dimensions)
    if not reversed_filter and not reversed_1d and not (base_dilated and (_is_constant(f) or one_by_one)):
        return None
    for w in window.dimensions:
        if w.stride != 1 or w.window_dilation != 1 or w.window_reversal:
            return None
    new = []
    for i, w in enumerate(window.dimensions):
        stride = w.base_dilation
        low = w.size - 1 - w.padding_low
        if low < 0:
            return None
        unpadded = conv.shape.dims[d.osp[i]]
        out_size = conv.operands[0].shape.dims[d.isp[i]]
        min_high = w.size + stride * (out_size - 1) - unpadded - low
        max_high = min_high + stride - 1
        high = low if min_high <= low <= max_high else (min_high if low < min_high else max_high)
        if high < 0:
            return None
        new.append(replace(w, stride=stride, base_dilation=1, padding_low=low, padding_high=high))
    dims = _Dims(d.ob, d.of, list(d.osp), d.ko, d.ki, list(d.ksp), d.ib, d.if_, list(d.isp))
    rhs = f.operands[0] if f.opcode == "reverse" else f  # one reverse is the call's own (1x1 / constant: none)
    if reversed_1d and not reversed_filter:
        rhs = f  # reshape(reverse(filter)): XLA reshapes the filter itself; the reverse stays a kernel here
    return replace(window, dimensions=tuple(new)), dims, rhs


def _forward_ok(conv, d: _Dims, window: Window) -> bool:
    """`CanImplementAsGpuForwardConv`."""
    if len(d.isp) > 3:
        return False
    if any(0 in o.shape.dims for o in conv.operands[:2]):
        return False
    rev = [w.window_reversal for w in window.dimensions]
    if len(d.isp) == 2:
        return all(rev) or not any(rev)
    return not any(rev)


def _labels_of(d: _Dims, ranks: tuple[int, int, int]) -> str:
    """The `dim_labels` text of dimension numbers (operand and result ranks)."""
    def side(rank, first, first_c, second, second_c, spatial):
        chars = ["?"] * rank
        chars[first], chars[second] = first_c, second_c
        for i, s in enumerate(spatial):
            chars[s] = str(i)
        return "".join(chars)
    return (side(ranks[0], d.ib, "b", d.if_, "f", d.isp) + "_" + side(ranks[1], d.ko, "o", d.ki, "i", d.ksp)
            + "->" + side(ranks[2], d.ob, "b", d.of, "f", d.osp))


def _swap_operands(comp, conv, module) -> HloInstruction | None:
    """`AlgebraicSimplifier::SwapConvOperands` (on for CUDA, before `ConvRewriter`): a convolution whose kernel
    has more spatial elements than its input becomes one of the input over the (reversed) kernel. **Returns:**
    the new convolution (replacing `conv`), or None."""
    if _int_attr(conv, "feature_group_count") > 1 or _int_attr(conv, "batch_group_count") > 1:
        return None
    if len(conv.operands) != 2 or not conv.has_attribute("dim_labels") or not conv.has_attribute("window"):
        return None
    d = _dims_of(conv)
    window = conv.attribute("window")
    x, k = conv.operands
    kernel_product = swapped_product = 1
    reverse: list[int] = []
    new = []
    for i, w in enumerate(window.dimensions):
        plain = not w.window_reversal and w.padding_low == 0 and w.padding_high == 0 and w.window_dilation == 1
        group = plain and w.base_dilation == w.size and w.stride == w.size - 1
        n = x.shape.dims[d.isp[i]]
        if group or (w.size == n and plain and w.base_dilation == 1 and w.stride == 1):
            new.append(w)
            continue
        dk = 1 + (w.size - 1) * w.window_dilation
        dn = 1 + (n - 1) * w.base_dilation
        kernel_product *= w.size
        one = (n == 1 and w.stride == 1 and w.window_dilation == 1 and w.padding_high == w.size - 1
               and w.padding_low == w.size - 1)
        swapped_product *= w.size if one else n
        if not w.window_reversal:
            reverse.append(d.ksp[i])
        new.append(replace(w, size=n, window_reversal=True, base_dilation=w.window_dilation,
                           window_dilation=w.base_dilation, padding_low=dn + w.padding_low - dk,
                           padding_high=dn + w.padding_high - dk))
    if kernel_product <= swapped_product:
        return None
    sd = _Dims(d.ko, d.ki, list(d.ksp), d.if_, d.ib, list(d.isp), d.of, d.ob, list(d.osp))
    swapped_window = replace(window, dimensions=tuple(new))
    rev = [w.window_reversal for w in swapped_window.dimensions]
    if len(sd.isp) > 3 or (all(rev) is False and any(rev) and len(sd.isp) == 2) or (len(sd.isp) != 2 and any(rev)):
        # `ConvIsLowerable` of the swapped convolution: its forward form must be (backward forms need a
        # stride of 1 and no reversal, which this window has)
        return None
    if reverse:
        k = HloInstruction(module.unique_name("reverse"), "reverse", k.shape, [k])
        k.set_attribute("dimensions", "{" + ",".join(map(str, sorted(reverse))) + "}")
        comp.add_instruction(k, before=conv)
    swapped = HloInstruction(module.unique_name(conv.name), "convolution", conv.shape, [k, x])
    swapped.set_attribute("window", swapped_window)
    swapped.set_attribute("dim_labels", _labels_of(sd, (k.shape.rank, x.shape.rank, conv.shape.rank)))
    if conv.has_attribute("metadata"):
        swapped.set_attribute("metadata", conv.raw_attributes["metadata"])
    comp.add_instruction(swapped, before=conv)
    conv.replace_all_uses_with(swapped)
    comp.remove_instruction(conv)
    return swapped


def _match(conv) -> _Call | None:
    """`ConvRewriter`'s choice for one convolution."""
    if len(conv.operands) != 2 or not conv.shape.is_array or not conv.has_attribute("dim_labels"):
        return None
    d = _dims_of(conv)
    window = conv.attribute("window") if conv.has_attribute("window") else Window(dimensions=())
    groups = _int_attr(conv, "feature_group_count")
    m = _match_backward_input(conv, d, window)
    if m is not None:
        w, dims, rhs = m
        call = _Call(conv, BACKWARD_INPUT, w, dims, conv.operands[0], rhs, conv.shape, groups)
        if rhs is not conv.operands[1]:
            call.absorbed.append(conv.operands[1].name)
        return call
    m = _match_backward_filter(conv, d, window)
    if m is not None:
        w, dims = m
        return _Call(conv, BACKWARD_FILTER, w, dims, conv.operands[0], conv.operands[1], conv.shape,
                     _int_attr(conv, "batch_group_count"))
    if _forward_ok(conv, d, window):
        return _Call(conv, FORWARD, window, d, conv.operands[0], conv.operands[1], conv.shape, groups)
    return None


# ---------------------------------------------------------------------------
# CudnnFusedConvRewriter


def _depthwise(call: _Call) -> bool:
    return call.groups > 1 and call.lhs.shape.dims[call.dims.if_] == call.groups


def _sole_reader(instr) -> HloInstruction | None:
    """The one reader of `instr` reading it once (`WithOneUse`), else None."""
    if len(instr.users) != 1 or instr.is_root:
        return None
    user = instr.users[0]
    return user if sum(o is instr for o in user.operands) == 1 else None


def _zero_scalar(instr) -> bool:
    """`ConstantEffectiveScalar(0)`: a constant whose every element is 0."""
    if instr.opcode != "constant":
        return False
    text = (instr.literal_text or "").replace("{", " ").replace("}", " ").replace(",", " ").split()
    try:
        return bool(text) and all(float(t) == 0.0 for t in text)
    except ValueError:
        return False


def _bias_source(addend, call: _Call) -> HloInstruction | None:
    """The vector a broadcast along the output features broadcasts (after the simplifier: its operand's other
    dimensions of size 1 are reshaped away, a bitcast), else None."""
    if addend.opcode != "broadcast" or addend.shape.element_type != call.result.element_type:
        return None
    src = addend.operands[0]
    mapped = _ints(addend, "dimensions")
    big = [m for m, n in zip(mapped, src.shape.dims) if n != 1]
    if big == [call.dims.of] or (not big and call.dims.of in mapped):
        return _through_relabelling(src)
    return None


def _through_relabelling(x) -> HloInstruction:
    """`x` without the reshapes and identity broadcasts above its values (JAX lowers a bias as
    reshape(broadcast(reshape(b)))): XLA's simplifier removes them before `ConvRewriter` runs, so the call
    reads the vector itself, whether or not `simplify` simulates it here."""
    while x.opcode in ("reshape", "broadcast") and x.operands and x.operands[0].shape.num_elements == \
            x.shape.num_elements and x.shape.element_type == x.operands[0].shape.element_type:
        if x.opcode == "broadcast" and list(_ints(x, "dimensions")) != list(range(x.shape.rank)):
            break
        x = x.operands[0]
    return x


def _fuse_bias_side_input_relu(call: _Call) -> None:
    """`FuseBiasOrSideInput` (twice) and `FuseRelu` on a forward call whose result is read once."""
    if call.target not in (FORWARD, BIAS_ACTIVATION) or _depthwise(call):
        return
    mul = _sole_reader(call.conv)  # `FuseConvAlpha`: times a broadcast constant scalar
    if mul is not None and mul.opcode == "multiply":
        other = mul.operands[1] if mul.operands[0] is call.conv else mul.operands[0]
        if other.opcode == "broadcast" and other.operands[0].opcode == "constant" \
                and other.operands[0].shape.rank == 0 and call.result.element_type in ("f16", "bf16", "f32", "f64"):
            call.scale = other.operands[0].literal_text or ""
            call.target = BIAS_ACTIVATION
            call.absorbed.append(mul.name)
            call.replaces = mul
    for _ in range(2):
        cur = call.replaces or call.conv
        add = _sole_reader(cur)
        if add is None or add.opcode != "add" or add.shape.element_type != call.result.element_type:
            break
        addend = add.operands[1] if add.operands[0] is cur else add.operands[0]
        src = _bias_source(addend, call) if call.bias is None else None
        if src is not None:
            call.bias = src
        elif call.side_input is None:
            call.side_input = addend
        else:
            break
        call.target = BIAS_ACTIVATION
        call.absorbed.append(add.name)
        call.replaces = add
    cur = call.replaces or call.conv
    mx = _sole_reader(cur)
    if mx is not None and mx.opcode == "maximum":
        other = mx.operands[1] if mx.operands[0] is cur else mx.operands[0]
        if other.opcode == "broadcast" and _zero_scalar(other.operands[0]):
            call.target = BIAS_ACTIVATION
            call.activation = "kRelu"
            call.absorbed.append(mx.name)
            call.replaces = mx


# ---------------------------------------------------------------------------
# Building instructions


def _row_major(rank: int) -> tuple[int, ...]:
    return tuple(range(rank - 1, -1, -1))


class _Builder:
    def __init__(self, comp: HloComputation, module: HloModule, anchor: HloInstruction, call: _Call):
        self.comp, self.module, self.anchor, self.call = comp, module, anchor, call

    def add(self, prefix, opcode, shape, operands, record=True, **attributes) -> HloInstruction:
        instr = HloInstruction(self.module.unique_name(prefix), opcode, shape, list(operands))
        for key, value in attributes.items():
            instr.set_attribute(key, value)
        self.comp.add_instruction(instr, before=self.anchor)
        if record:
            self.call.added.append(instr.name)
        return instr

    def zero(self, t: str) -> HloInstruction:
        c = self.add("constant", "constant", Shape.array(t, []), [], record=False)
        c.literal_text = "false" if t == "pred" else "0"
        return c

    def pad(self, x, config: list[tuple[int, int, int]]) -> HloInstruction:
        """`pad(x, 0)` with (low, high, interior) per dimension; `x` itself when all are 0."""
        if not any(any(c) for c in config):
            return x
        dims = [n + lo + hi + max(n - 1, 0) * it for n, (lo, hi, it) in zip(x.shape.dims, config)]
        text = "x".join(f"{lo}_{hi}" + (f"_{it}" if it else "") for lo, hi, it in config)
        t = x.shape.element_type
        return self.add("pad", "pad", Shape.array(t, dims, _row_major(len(dims))), [x, self.zero(t)], padding=text)

    def slice(self, x, start, limit) -> HloInstruction:
        if list(start) == [0] * len(start) and list(limit) == list(x.shape.dims):
            return x
        dims = [b - a for a, b in zip(start, limit)]
        text = "{" + ", ".join(f"[{a}:{b}]" for a, b in zip(start, limit)) + "}"
        return self.add("slice", "slice", Shape.array(x.shape.element_type, dims, _row_major(len(dims))), [x],
                        slice=text)

    def transpose(self, x, perm) -> HloInstruction:
        if list(perm) == list(range(len(perm))):
            return x
        dims = [x.shape.dims[p] for p in perm]
        if x.opcode == "broadcast" and x.operands and x.operands[0].shape.rank == 0:  # the simplifier's rule
            return self.add("broadcast", "broadcast", Shape.array(x.shape.element_type, dims, _row_major(len(dims))),
                            [x.operands[0]], dimensions="{}")
        return self.add("transpose", "transpose", Shape.array(x.shape.element_type, dims, _row_major(len(dims))),
                        [x], dimensions="{" + ",".join(map(str, perm)) + "}")


# ---------------------------------------------------------------------------
# ConvPaddingLegalization and CudnnPadForConvolutions


def _symmetric(window: Window) -> bool:
    return all(w.padding_low == w.padding_high for w in window.dimensions)


def _legalize_padding(call: _Call, b: _Builder) -> None:
    w, d = call.window, call.dims
    if call.target in (FORWARD, BIAS_ACTIVATION):
        negative = any(x.padding_low < 0 or x.padding_high < 0 for x in w.dimensions)
        base = any(x.base_dilation != 1 for x in w.dimensions)
        wdil = any(x.window_dilation != 1 for x in w.dimensions)
        if _symmetric(w) and not negative and not base:
            return  # canonical (a window dilation stays in the call)
        x = call.lhs
        if not _symmetric(w) or base:
            config = [(0, 0, 0)] * x.shape.rank
            for i, dim in enumerate(d.isp):
                wd = w.dimensions[i]
                config[dim] = (max(wd.padding_low, 0), max(wd.padding_high, 0), wd.base_dilation - 1)
                w = _wdim(w, i, padding_low=min(wd.padding_low, 0), padding_high=min(wd.padding_high, 0),
                          base_dilation=1)
            x = b.pad(x, config)
        if any(x_.padding_low < 0 or x_.padding_high < 0 for x_ in w.dimensions):
            start, limit = [0] * x.shape.rank, list(x.shape.dims)
            for i, dim in enumerate(d.isp):
                wd = w.dimensions[i]
                start[dim] += -min(wd.padding_low, 0)
                limit[dim] -= -min(wd.padding_high, 0)
                w = _wdim(w, i, padding_low=max(wd.padding_low, 0), padding_high=max(wd.padding_high, 0))
            x = b.slice(x, start, limit)
        call.lhs = x
        if wdil:  # not preserved: the filter is dilated by a pad
            config = [(0, 0, 0)] * call.rhs.shape.rank
            for i, dim in enumerate(d.ksp):
                config[dim] = (0, 0, w.dimensions[i].window_dilation - 1)
            call.rhs = b.pad(call.rhs, config)
            for i, dim in enumerate(d.ksp):
                w = _wdim(w, i, size=call.rhs.shape.dims[dim], window_dilation=1)
        call.window = w
    elif call.target == BACKWARD_FILTER:
        if _symmetric(w) or any(x.padding_low < 0 or x.padding_high < 0 for x in w.dimensions):
            return
        config = [(0, 0, 0)] * call.lhs.shape.rank
        for i, dim in enumerate(d.isp):
            wd = w.dimensions[i]
            even = min(wd.padding_low, wd.padding_high)
            config[dim] = (wd.padding_low - even, wd.padding_high - even, 0)
            w = _wdim(w, i, padding_low=even, padding_high=even)
        call.lhs = b.pad(call.lhs, config)
        call.window = w
    elif call.target == BACKWARD_INPUT:
        if _symmetric(w) or any(x.padding_low < 0 or x.padding_high < 0 for x in w.dimensions):
            return
        dims = list(call.result.dims)
        start, limit = [0] * len(dims), list(dims)
        for i, dim in enumerate(d.isp):
            wd = w.dimensions[i]
            lo, hi = wd.padding_low, wd.padding_high
            grow = abs(lo - hi)
            if lo > hi:
                start[dim] = grow
                w = _wdim(w, i, padding_low=hi)
            elif lo < hi:
                w = _wdim(w, i, padding_high=lo)
            dims[dim] += grow
            limit[dim] = start[dim] + call.result.dims[dim]
        call.result = Shape.array(call.result.element_type, dims, _row_major(len(dims)))
        call.slice_result = (start, limit)
        call.window = w


def _round_up(n: int, k: int) -> int:
    return -(-n // k) * k


def _pad_for_tensor_cores(call: _Call, b: _Builder, cc: tuple[int, int]) -> None:
    """`CudnnPadForConvolutions::TryResolvePaddedShapesForTensorCore` (f16, Volta and later, not fused)."""
    if tuple(cc) < VOLTA or call.result.element_type != "f16" or call.target == BIAS_ACTIVATION:
        return
    if call.groups > 1 or call.slice_result is not None:
        return
    d = call.dims
    lhs, rhs, out = list(call.lhs.shape.dims), list(call.rhs.shape.dims), list(call.result.dims)
    # which of (lhs, rhs, result) is the input, the filter, the output
    role = {FORWARD: (0, 1, 2), BACKWARD_INPUT: (2, 1, 0), BACKWARD_FILTER: (0, 2, 1)}[call.target]
    shapes = [list(lhs), list(rhs), list(out)]
    inp, fil, outp = (shapes[role[0]], shapes[role[1]], shapes[role[2]])
    if inp[d.if_] == 3 and outp[d.of] in (32, 64):
        inp[d.if_] = 4
        fil[d.ki] = 4
    else:
        inp[d.if_] = _round_up(inp[d.if_], 8)
        fil[d.ki] = _round_up(fil[d.ki], 8)
        fil[d.ko] = _round_up(fil[d.ko], 8)
        outp[d.of] = _round_up(outp[d.of], 8)
        for old, new in zip((lhs, rhs, out), shapes):
            if _prod(new) > _prod(old) * MAX_BYTES_TOUCHED_BOUND:
                return
    if shapes == [lhs, rhs, out]:
        return
    call.lhs = b.pad(call.lhs, [(0, n - o, 0) for o, n in zip(lhs, shapes[0])])
    call.rhs = b.pad(call.rhs, [(0, n - o, 0) for o, n in zip(rhs, shapes[1])])
    if shapes[2] != out:
        call.result = Shape.array(call.result.element_type, shapes[2], _row_major(len(out)))
        call.slice_result = ([0] * len(out), out)


def _prod(dims) -> int:
    p = 1
    for n in dims:
        p *= n
    return p


# ---------------------------------------------------------------------------
# Layout assignment


def cudnn_layout(call_input_type: str, spatial: int, compute_capability: tuple[int, int]) -> str:
    """`HeuristicLayoutAssignment`: `"NHWC"` or `"NCHW"` for a convolution of `call_input_type` with `spatial`
    spatial dimensions on a CUDA GPU of `compute_capability`."""
    t = call_input_type
    if t.startswith(("s", "u")) and t[1:].isdigit():
        return "NHWC"
    if t.startswith("f8"):
        return "NHWC"
    cc = tuple(compute_capability)
    if cc >= HOPPER:
        return "NCHW" if t == "f64" or spatial > 2 else "NHWC"
    if t not in ("f16", "bf16") or cc < VOLTA or spatial != 2:
        return "NCHW"
    return "NHWC"


def _activation_order(batch: int, feature: int, spatial: list, layout: str) -> list[int]:
    return [batch, *spatial, feature] if layout == "NHWC" else [batch, feature, *spatial]


def _labels(n: int, layout: str) -> str:
    sp = "".join(str(i) for i in range(n))
    if layout == "NHWC":
        return f"b{sp}f_o{sp}i->b{sp}f"
    return f"bf{sp}_oi{sp}->bf{sp}"


def _inverse(perm: list[int]) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def _materialize(call: _Call, b: _Builder, layout: str) -> tuple[HloInstruction, HloInstruction]:
    """The call in cuDNN's dimension order, transposes around it: (the call, what replaces `call.replaces`)."""
    d = call.dims
    act_in = _activation_order(d.ib, d.if_, d.isp, layout)
    act_out = _activation_order(d.ob, d.of, d.osp, layout)
    kernel = [d.ko, *d.ksp, d.ki] if layout == "NHWC" else [d.ko, d.ki, *d.ksp]
    lhs_perm, rhs_perm, out_perm = {FORWARD: (act_in, kernel, act_out), BIAS_ACTIVATION: (act_in, kernel, act_out),
                                    BACKWARD_INPUT: (act_out, kernel, act_in),
                                    BACKWARD_FILTER: (act_in, act_out, kernel)}[call.target]
    operands = [b.transpose(call.lhs, lhs_perm), b.transpose(call.rhs, rhs_perm)]
    t = call.result.element_type
    if call.target == BIAS_ACTIVATION:
        f = call.result.dims[d.of]
        bias = call.bias
        if bias is not None and bias.shape.dims != (f,):
            bias = b.add("reshape", "reshape", Shape.array(bias.shape.element_type, [f], (0,)), [bias], record=False)
        if bias is None:  # `EnsureIsConvBiasActivation`: a broadcast zero bias (a kernel in XLA's module too)
            bias = b.add("broadcast", "broadcast", Shape.array(t, [f], (0,)), [b.zero(t)], dimensions="{}")
        operands.append(bias)
        if call.side_input is not None:
            operands.append(b.transpose(call.side_input, out_perm))
    out_dims = [call.result.dims[p] for p in out_perm]
    shape = Shape.tuple_of([Shape.array(t, out_dims, _row_major(len(out_dims))), Shape.array("u8", [0], (0,))])
    config = {"cudnn_conv_backend_config": {"activation_mode": call.activation,
                                            "conv_result_scale": _number(call.scale) if call.scale else 1,
                                            "side_input_scale": 1 if call.side_input is not None else 0,
                                            "leakyrelu_alpha": 0}}
    attrs = {"window": call.window, "dim_labels": _labels(len(d.isp), layout)}
    if call.groups > 1:
        attrs["feature_group_count"] = str(call.groups)
    custom = HloInstruction(b.module.unique_name(CUDNN_CONV_TARGETS[call.target]), "custom-call", shape, operands)
    for key, value in attrs.items():
        custom.set_attribute(key, value)
    custom.set_attribute("custom_call_target", json.dumps(call.target))
    if call.conv.has_attribute("metadata"):
        custom.set_attribute("metadata", call.conv.raw_attributes["metadata"])
    custom.set_attribute("backend_config", json.dumps(config, separators=(",", ":")))
    b.comp.add_instruction(custom, before=b.anchor)
    gte = b.add("get-tuple-element", "get-tuple-element", shape.tuple_shapes[0], [custom], record=False, index="0")
    out = b.transpose(gte, _inverse(out_perm))
    if out is not gte:
        call.back = out
    if call.slice_result is not None:
        out = b.slice(out, *call.slice_result)
    return custom, out


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 1.0


def _remove_dead(comp: HloComputation, seeds) -> None:
    """Remove `seeds` and the operands they leave unread (not parameters, not the root)."""
    stack = list(seeds)
    while stack:
        instr = stack.pop()
        if instr.computation is not comp or instr.users or instr is comp.root or instr.opcode == "parameter":
            continue
        if instr.opcode in ("fusion", "call", "while", "conditional", "async-start"):
            continue  # (never one of ours)
        ops = list(instr.operands)
        comp.remove_instruction(instr)
        stack.extend(ops)


def _perm(t) -> list[int]:
    return list(_ints(t, "dimensions"))


def _scalar_broadcast(instr) -> bool:
    return instr.opcode == "broadcast" and instr.operands and instr.operands[0].shape.rank == 0


def _sink(comp: HloComputation, module: HloModule, t: HloInstruction) -> list[HloInstruction]:
    """Layout assignment's propagation of a call's result layout to its readers, on the transpose that
    brings the result back to the convolution's dimension order: each reader that takes any layout reads the
    call's order instead (an elementwise op whose other operands are scalar broadcasts or the same transpose
    of something: it computes in that order and the transpose moves below it; a reduce: its dimensions
    renumbered; the inverse transpose: both vanish). Where a reader needs the logical order (the entry's
    result, a dot, another call), the transpose stays: XLA's copy into that layout. **Returns:** the
    transposes made below (to sink in turn)."""
    x, p = t.operands[0], _perm(t)
    made = []
    for user in list(t.users):
        if user.computation is not comp:
            continue
        if user.opcode == "transpose":
            q = _perm(user)
            if all(p[q[k]] == k for k in range(len(q))):
                user.replace_all_uses_with(x)
                _remove_dead(comp, [user])
            continue
        if user.opcode == "reduce" and len(user.operands) == 2 and user.operands[0] is t:
            dims = _ints(user, "dimensions")
            kept = [p[j] for j in range(len(p)) if j not in dims]
            if kept != sorted(kept):
                continue
            new = HloInstruction(module.unique_name(user.name), "reduce", user.shape, [x, user.operands[1]])
            for key, value in user.raw_attributes.items():
                new.set_attribute(key, value)
            new.set_attribute("to_apply", user.attribute("to_apply"))
            new.set_attribute("dimensions", "{" + ",".join(str(d) for d in sorted(p[d] for d in dims)) + "}")
            comp.add_instruction(new, before=user)
            user.replace_all_uses_with(new)
            _remove_dead(comp, [user])
            continue
        if not is_elementwise(user) or user.shape.dims != t.shape.dims or user.is_root:
            continue
        operands = []
        for o in user.operands:
            if o is t:
                operands.append(x)
            elif o.opcode == "transpose" and _perm(o) == p and o.operands[0].shape.dims == x.shape.dims:
                operands.append(o.operands[0])
            elif _scalar_broadcast(o):
                b = HloInstruction(module.unique_name(o.name), "broadcast",
                                   Shape.array(o.shape.element_type, x.shape.dims, _row_major(x.shape.rank)),
                                   [o.operands[0]])
                b.set_attribute("dimensions", "{}")
                comp.add_instruction(b, before=user)
                operands.append(b)
            else:
                break
        else:
            new = HloInstruction(module.unique_name(user.name), user.opcode,
                                 Shape.array(user.shape.element_type, x.shape.dims, _row_major(x.shape.rank)),
                                 operands)
            for key, value in user.raw_attributes.items():
                new.set_attribute(key, value)
            comp.add_instruction(new, before=user)
            below = HloInstruction(module.unique_name("transpose"), "transpose", user.shape, [new])
            below.set_attribute("dimensions", "{" + ",".join(map(str, p)) + "}")
            comp.add_instruction(below, before=user)
            user.replace_all_uses_with(below)
            _remove_dead(comp, [user])
            made.append(below)
    return made


def _propagate_layouts(comp: HloComputation, module: HloModule, transposes: list) -> None:
    """`_sink` each of `transposes` and the transposes that makes, until none moves."""
    todo = list(transposes)
    while todo:
        t = todo.pop()
        if t.computation is not comp:
            continue
        todo.extend(_sink(comp, module, t))
        _remove_dead(comp, [t])


def _nonfusion_computations(module: HloModule) -> list[HloComputation]:
    fused = {i.fused_computation for c in module.computations for i in c.instructions if i.opcode == "fusion"}
    return [c for c in module.computations if c not in fused]


def rewrite_convolutions(module: HloModule, compute_capability: tuple[int, int]) -> list[ConvRewrite]:
    """Rewrite every convolution of `module`'s non-fusion computations as XLA:GPU does before fusion for a CUDA
    GPU of `compute_capability` (module docstring), in place. **Returns:** one `ConvRewrite` per convolution
    rewritten (in text order); convolutions cuDNN cannot run stay as they are."""
    out: list[ConvRewrite] = []
    for comp in _nonfusion_computations(module):
        convs = [i for i in comp.instructions if i.opcode == "convolution"]
        convs = [_swap_operands(comp, c, module) or c for c in convs]
        calls = [c for c in (_match(conv) for conv in convs) if c is not None]
        for call in calls:
            _fuse_bias_side_input_relu(call)
        backs: list = []
        done: list = []
        now: dict = {}  # an instruction a call replaced -> what replaced it (later calls may read it)
        for call in calls:
            for name in ("lhs", "rhs", "bias", "side_input"):
                old = getattr(call, name)
                while old in now:
                    old = now[old]
                setattr(call, name, old)
            replaced = call.replaces or call.conv
            anchor = replaced
            b = _Builder(comp, module, anchor, call)
            _legalize_padding(call, b)
            _pad_for_tensor_cores(call, b, compute_capability)
            layout = cudnn_layout(call.lhs.shape.element_type, len(call.dims.isp), compute_capability)
            custom, result = _materialize(call, b, layout)
            # every operand of the call must come before it: the absorbed instructions' operands do (the
            # anchor is the last of them in text order), and so do the call's own
            replaced.replace_all_uses_with(result)
            now[replaced] = result
            dead = [replaced, call.conv] + [comp.instruction(n) for n in call.absorbed if n in comp]
            _remove_dead(comp, dead)
            if call.back is not None and call.slice_result is None:
                backs.append(call.back)
            done.append((call, custom, layout))
        _propagate_layouts(comp, module, backs)
        for call, custom, layout in done:  # (the transposes layout propagation removed are not listed)
            out.append(ConvRewrite("cudnn-conv", call.conv.name, call.target, custom.name, layout,
                                   tuple(call.absorbed), tuple(n for n in call.added if n in comp)))
    return out
