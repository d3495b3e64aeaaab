"""Counting one kernel's features (`features_of`): access patterns and stride classes, operations,
library calls, launches and threads (see `_features` for what each feature means)."""

from __future__ import annotations

import math


from ..analysis.library import cholesky_flops, library_work, triangular_solve_flops
from ..analysis.opcodes import CONTROL_FLOW_OPCODES, NO_WORK_IN_KERNEL_OPCODES
from ..models import grouped_convolutions, runs_on_ynnpack

from ._features import (
    _add,
    FEATURES,
    FeatureError,
    MATMUL_DTYPES,
    TASK_BYTES,
    WIDTHS,
    _ELEMENTWISE,
    _LIBRARY_OPCODES,
    _PER_THREAD,
    _add_op,
    _compute_dtype,
    _dtype_group,
    _elements,
    _first_leaf,
    _kind,
    _leaves,
    _width,
    device_facts,
)


# --------------------------------------------------------------------------- access patterns


def _minor_dims(shape) -> list[int]:
    """Dimensions of size > 1, minor to major in the layout."""
    return [d for d in shape.minor_to_major if d < len(shape.dims) and shape.dims[d] > 1]


def _row_major(shape) -> bool:
    """Whether `shape`'s layout is the default one (dimension 0 major, the last minor)."""
    return tuple(shape.minor_to_major) == tuple(range(len(shape.dims) - 1, -1, -1))


def _physical_stride(shape, dim: int | None) -> int:
    """Elements between neighbours along logical dimension `dim` in `shape`'s layout (0: uniform)."""
    if dim is None:
        return 0
    stride = 1
    for d in shape.minor_to_major:
        if d == dim:
            return stride
        stride *= max(shape.dims[d], 1)
    return stride


def _attr(instr, name, default=None):
    try:
        return instr.attribute(name, default)
    except Exception:  # an attribute the parser cannot read is treated as absent
        return default


def _tuple_attr(instr, name) -> tuple:
    v = _attr(instr, name, ())
    if isinstance(v, int):
        return (v,)
    return tuple(v or ())


def _operand_inner(h, idx: int, inner: int | None):
    """Map the innermost iterated logical dim of `h` to its operand `idx`.

    **Returns:** `(inner_dim_of_operand | None, stride_factor, used_fraction, special)` where
    `special` is "" or "gather"/"s1" (forced class).
    """
    op = h.opcode
    o = h.operands[idx]
    if op in _ELEMENTWISE or op in ("copy", "map", "reverse", "pad", "concatenate", "clamp", "dynamic-slice",
                                    "dynamic-update-slice"):
        if o.shape.rank != h.shape.rank:
            return (_minor_dims(o.shape) or [None])[0], 1, 1.0, ""  # scalar operands of clamp/select, indices
        return inner, 1, 1.0, ""
    if op == "broadcast":
        dims = _tuple_attr(h, "dimensions")
        if inner is not None and inner in dims:
            return dims.index(inner), 1, 1.0, ""
        return None, 1, 1.0, ""
    if op == "transpose":
        perm = _tuple_attr(h, "dimensions")
        if inner is not None and inner < len(perm):
            return perm[inner], 1, 1.0, ""
        return inner, 1, 1.0, ""
    if op in ("reshape", "bitcast"):
        # A bitcast keeps the order of the elements in memory (so does a reshape between
        # row-major layouts): the operand dimension that steps through memory the way the
        # inner dimension does is the one with the same physical stride. (Mapping every
        # dimension to the operand's minor one read a transposed load through a bitcast as
        # contiguous.)
        if inner is not None and (op == "bitcast" or (_row_major(h.shape) and _row_major(o.shape))):
            stride = _physical_stride(h.shape, inner)
            for d in _minor_dims(o.shape):
                if _physical_stride(o.shape, d) == stride:
                    return d, 1, 1.0, ""
        return (_minor_dims(o.shape) or [None])[0], 1, 1.0, ""
    if op == "slice":
        sl = _attr(h, "slice", None)
        step = 1
        if sl is not None and inner is not None and inner < len(sl):
            step = int(sl[inner][2]) if len(sl[inner]) > 2 else 1
        n_in = max(_elements(o.shape), 1)
        return inner, max(step, 1), _elements(h.shape) / n_in, ""
    if op == "gather":
        if idx == 0:
            return None, 1, 1.0, "gather"
        return (_minor_dims(o.shape) or [None])[0], 1, 1.0, "s1"
    if op == "scatter":
        return (_minor_dims(o.shape) or [None])[0], 1, 1.0, "s1"
    # Reductions, dots, convolutions, windows, sorts: read their operands in order.
    return (_minor_dims(o.shape) or [None])[0], 1, 1.0, "s1"


def _stride_class(stride: int, used: float, special: str) -> str:
    if special:
        return special
    if stride == 0:
        return "s0"
    if stride == 1:
        return "s1"
    d = min(stride, 4)
    num = int(min(max(math.ceil(used * d - 1e-9), 1), d))
    return f"{num}of{d}"


def _parameter_classes(root, is_param) -> dict:
    """For each parameter (or kernel operand) reached from `root`, its load stride class.

    Walks from the root towards the parameters, carrying the logical dimension
    that the innermost loop runs over, the accumulated slice stride and the
    used fraction of the footprint. The first path to reach a parameter
    decides its class.
    """
    first = _minor_dims(_first_leaf(root.shape))
    start = first[0] if first else None
    out: dict = {}
    seen: set = set()
    stack = [(root, start, 1, 1.0, "")]
    while stack:
        h, inner, step, used, special = stack.pop()
        key = (id(h), inner, step, special)
        if key in seen:
            continue
        seen.add(key)
        if is_param(h):
            if h not in out:
                stride = _physical_stride(_first_leaf(h.shape), inner) * step if inner is not None else 0
                if inner is not None and stride == 0:
                    stride = step
                out[h] = _stride_class(stride, used, special)
            continue
        if h.opcode in ("parameter", "constant", "iota"):
            continue
        if h.opcode == "tuple" or h.opcode == "get-tuple-element":
            for o in h.operands:
                stack.append((o, (_minor_dims(_first_leaf(o.shape)) or [None])[0], step, used, special))
            continue
        for i in range(len(h.operands)):
            oi, st, fr, sp = _operand_inner(h, i, inner)
            stack.append((h.operands[i], oi, step * st, used * fr, sp or special))
    return out


# --------------------------------------------------------------------------- counting


def _analysis(kernel):
    """The project's HloCostAnalysis of one kernel, variant "base" (XLA's counts, GPU fusion accounting)."""
    from ..analysis import kernel_cost

    return kernel_cost(kernel, "base")


def _utilization(kernel, comp):
    """Per fused instruction, how often it is evaluated per output element (XLA's utilization)."""
    costs = _analysis(kernel)
    util = {}
    for h in comp.instructions:
        try:
            util[h] = float(costs.instruction_counts(h)[2])
        except (KeyError, AttributeError, TypeError):
            util[h] = 0.0
    return costs, util


def _computation_ops(comp, acc: dict, scale: float, depth: int = 0, reducer: bool = True) -> None:
    """Ops of a called computation (reducer, comparator, combiner), each `scale` times.

    Their cheap combining ops (add, multiply, min/max, compare/select) are
    counted apart from elementwise ops (`red_<dtype>`): each folds into a
    running value, a dependency chain that vectorizes differently.
    """
    if depth > 16:
        return
    for h in comp.instructions:
        if h.opcode in _ELEMENTWISE:
            dt = _dtype_group(_compute_dtype(h))
            kind = _kind(h.opcode)
            # Cheap combining ops (add, multiply, min/max, select) are the running
            # reduction; transcendentals and divisions cost what they cost anywhere.
            if reducer and kind in ("add", "mul", "other"):
                _add(acc, f"red_{dt}", scale * max(_elements(h.shape), 1))
            else:
                _add_op(acc, h.opcode, dt, scale * max(_elements(h.shape), 1))
        for c in _called(h):
            _computation_ops(c, acc, scale, depth + 1, reducer)


def _called(h) -> list:
    try:
        return list(h.called_computations)
    except Exception:
        return []


def _window_size(h) -> int:
    w = _attr(h, "window", None)
    dims = getattr(w, "dimensions", ()) if w is not None else ()
    return int(math.prod(d.size for d in dims)) if dims else 1


def _instruction_ops(h, acc: dict, util: float) -> None:
    """Operations of one instruction inside a kernel, `util` evaluations per element."""
    op = h.opcode
    if op in _ELEMENTWISE:
        _add_op(acc, op, _dtype_group(_compute_dtype(h)), util * _elements(h.shape))
        return
    if op in ("dot", "scaled-dot", "ragged-dot", "convolution"):
        lhs = h.operands[0].shape
        # 2 flops per multiply-add over the valid window positions, as XLA counts them.
        flops = float(_analysis(h).flops)
        if op != "convolution":
            try:
                _add(acc, "matmul_batch", util * _dot_dims(h)[0])
            except (IndexError, TypeError):
                pass
        dt = _dtype_group(lhs.element_type)
        _add(acc, f"matmul_{dt if dt in MATMUL_DTYPES else 'f32'}", util * flops)
        return
    if op == "reduce":
        to_apply = _attr(h, "to_apply", None)
        count = _elements(h.operands[0].shape) - _elements(_first_leaf(h.shape))
        if to_apply is not None:
            _computation_ops(to_apply, acc, util * max(count, 0))
        return
    if op == "reduce-window":
        to_apply = _attr(h, "to_apply", None)
        count = (_window_size(h) - 1) * _elements(_first_leaf(h.shape))
        if to_apply is not None:
            _computation_ops(to_apply, acc, util * max(count, 0))
        return
    if op == "select-and-scatter":
        n_src = _elements(h.operands[1].shape)
        sel, sca = _attr(h, "select", None), _attr(h, "scatter", None)
        if sel is not None:
            _computation_ops(sel, acc, util * n_src * max(_window_size(h) - 1, 0))
        if sca is not None:
            _computation_ops(sca, acc, util * n_src)
        return
    if op == "scatter":
        ops = h.operands
        n = (len(ops) - 1) // 2
        to_apply = _attr(h, "to_apply", None)
        if to_apply is not None and n >= 1:
            _computation_ops(to_apply, acc, util * _elements(ops[n + 1].shape))
        return
    if op == "map":
        to_apply = _attr(h, "to_apply", None)
        if to_apply is not None:
            _computation_ops(to_apply, acc, util * _elements(h.shape), reducer=False)
        return
    if op == "sort":
        dims = _tuple_attr(h, "dimensions")
        s = _first_leaf(h.operands[0].shape)
        d = s.dims[dims[0]] if dims and dims[0] < len(s.dims) else (s.dims[-1] if s.dims else 1)
        _add(acc, "sort_cmp", util * s.num_elements * max(math.ceil(math.log2(max(d, 1))), 1))
        return
    if op == "topk":
        s = _first_leaf(h.operands[0].shape)
        k = int(_attr(h, "k", 1) or 1)
        _add(acc, "sort_cmp", util * s.num_elements * max(math.ceil(math.log2(max(k, 2))), 1))
        return
    if op == "fft":
        s = _first_leaf(h.operands[0].shape)
        lengths = _tuple_attr(h, "fft_length")
        n = math.prod(lengths) if lengths else 1
        transforms = s.num_elements / max(n, 1)
        _add(acc, "fft_flops", util * 5.0 * transforms * n * math.log2(max(n, 2)))
        return
    if op == "cholesky":
        _add(acc, "solver_flops", util * cholesky_flops(h.operands[0].shape))
        return
    if op == "triangular-solve":
        _add(acc, "solver_flops", util * triangular_solve_flops(h.operands[0].shape, h.operands[1].shape))
        return
    if op == "custom-call":
        # Flops of the library routine, from the one table (`analysis._library`).
        work = library_work(h)
        if work is not None and (work.library in ("lapack", "cusolver") or work.routine == "trsm"):
            _add(acc, "solver_flops", util * work.flops)
        return
    if op in ("rng", "rng-bit-generator"):
        _add(acc, f"op_special_{_dtype_group(_first_leaf(h.shape).element_type)}", util * _elements(h.shape))
        return


_DOTS = frozenset({"dot", "scaled-dot", "ragged-dot"})


def _dot_dims(h) -> tuple[int, int, int, int]:
    """(batch, m, n, k) of a dot: products of the batch, lhs-free, rhs-free and contracting dims."""
    lhs, rhs = h.operands[0].shape, h.operands[1].shape
    lb, lc = _tuple_attr(h, "lhs_batch_dims"), _tuple_attr(h, "lhs_contracting_dims")
    rb, rc = _tuple_attr(h, "rhs_batch_dims"), _tuple_attr(h, "rhs_contracting_dims")
    batch = math.prod(lhs.dims[d] for d in lb) if lb else 1
    k = math.prod(lhs.dims[d] for d in lc) if lc else 1
    m = math.prod(d for i, d in enumerate(lhs.dims) if i not in lb and i not in lc) if lhs.dims else 1
    n = math.prod(d for i, d in enumerate(rhs.dims) if i not in rb and i not in rc) if rhs.dims else 1
    return int(batch), int(m), int(n), int(k)


def _conv_transposed(h) -> bool:
    """The convolution's input is not batch-major and feature-minor (`dim_labels` not `b…f_`), the form
    XLA:CPU gives weight-gradient convolutions and Eigen runs through a generic, much slower path."""
    dn = _attr(h, "dim_labels", None)
    text = str(getattr(dn, "text", None) or h.raw_attributes.get("dim_labels", "") or "")
    lhs = text.split("_", 1)[0]
    return bool(lhs) and not (lhs.startswith("b") and lhs.endswith("f"))


def _conv_shape_features(h, acc: dict) -> None:
    """Eigen convolution costs that flops miss: window positions, and feature groups run one by one."""
    out = _first_leaf(h.shape)
    dn = _attr(h, "dim_labels", None)
    win = _window_size(h)
    try:
        spatial = math.prod(out.dims[d] for d in dn.output_spatial) if dn is not None else out.num_elements
        batch = out.dims[dn.output_batch] if dn is not None else 1
    except (AttributeError, IndexError, TypeError):
        spatial, batch = out.num_elements, 1
    _add(acc, "conv_windows", float(batch * spatial * win))
    groups = int(_attr(h, "feature_group_count", 1) or 1) * int(_attr(h, "batch_group_count", 1) or 1)
    if groups > 1:
        # Each group is its own small convolution over every window position.
        _add(acc, "conv_groups", float(groups * batch * spatial * win))


def _first_kernel(kernel) -> bool:
    """The kernel is the first instruction of its module's entry that runs code.

    The first thunk of a run pays the per-run costs (waking the runtime,
    argument and result buffers): on the reference host a small kernel
    takes about 0.31 µs as the first of its program (or the only one) and
    0.22 µs among others (the supplementary kernels, measured in chains of
    four, show it in every chain). This replaced an `alone` feature (the
    only kernel of its program), which cross-validation over the training
    kernels gave no weight next to it. The entry of a compiled module is
    scheduled, so its text order is the order thunks are issued.
    """
    comp = kernel.computation
    if comp is None:
        return False
    module = getattr(comp, "module", None)
    entry = getattr(module, "entry", None) if module is not None else None
    if entry is not None and entry is not comp:
        return False
    for h in comp.instructions:
        if h.opcode not in NO_WORK_IN_KERNEL_OPCODES:
            return h is kernel
    return False


def emitter(kernel) -> str:
    """How XLA:CPU runs a kernel: `"loop"` (code it emits), `"ynn"` (a YNNPACK
    fusion), `"eigen"` (an Eigen matmul/convolution) or `"other"` (a runtime
    call: FFT, sort, LAPACK, top-k, or a custom fusion of another library).
    Which fusion YNNPACK runs is `models._xla_cpu_convolution.runs_on_ynnpack`'s.

    A dot on its own goes to Eigen unless it is a matrix-vector product or
    tiny (m·n·k ≤ 8), which XLA emits as a loop (its GEMV / naive emitters).
    """
    op = kernel.opcode
    if op == "fusion":
        if kernel.fusion_kind != "kCustom":
            return "loop"
        return "ynn" if runs_on_ynnpack(kernel) else "other"
    if op in _DOTS:
        try:
            _, m, n, k = _dot_dims(kernel)
        except (IndexError, TypeError):
            return "eigen"
        return "loop" if (m == 1 or n == 1 or m * n * k <= 8) else "eigen"
    if op == "convolution":
        return "eigen"
    if op in _LIBRARY_OPCODES:
        return "other"
    return "loop"


def features_of(kernel, device="host", *, task_bytes: int = TASK_BYTES) -> dict[str, float]:
    """The feature counts of one kernel (see the module docstring).

    **Arguments:** `kernel`, an `HloInstruction` run as one kernel (a fusion or
    a lone instruction); `device`, a `DeviceSpec` or name (cache sizes and core
    count; default the measured host); `task_bytes`: output bytes per parallel
    task of an emitted loop.

    **Returns:** a dict with every name of `FEATURES`.
    **Raises:** `FeatureError` for an instruction that is not a kernel
    (`while`, `conditional`, `call`: their time is that of their kernels).
    """
    dev = device_facts(device)
    op = kernel.opcode
    if op in CONTROL_FLOW_OPCODES:
        raise FeatureError(f"'{kernel.name}' is a {op}, not a kernel: its time is that of the kernels it runs")
    acc: dict[str, float] = {}
    acc["launch"] = 1.0
    if op in NO_WORK_IN_KERNEL_OPCODES:
        return _finish(acc)
    how = emitter(kernel)
    library = how != "loop"
    if library:
        acc[f"lib_{how}"] = 1.0
    elif op != "copy":
        # XLA:CPU runs a lone copy as a copy thunk; everything else it emits
        # is a compiled kernel, whose call costs a little more.
        acc["kernel_thunk"] = 1.0
    if _first_kernel(kernel):
        acc["first"] = 1.0

    comp = kernel.fused_computation if op == "fusion" else None
    loads: dict[int, float] = {}
    stores: dict[int, float] = {}
    load_bytes = store_bytes = 0.0
    if comp is not None:
        if library:
            # A library runs the fused graph op by op, each once, and reads each operand once:
            # the elemental re-computation XLA's utilization counts (a value broadcast back over
            # the elements it was reduced from) happens only in emitted loops.
            costs, util = None, dict.fromkeys(comp.instructions, 1.0)
        else:
            costs, util = _utilization(kernel, comp)
        _fusion_ops(comp, util, acc)
        if how == "ynn":
            _add(acc, "ynn_grouped_conv_elements", sum(g.stencil_elements for g in grouped_convolutions(kernel)))
        params = comp.parameters
        classes = _parameter_classes(comp.root, lambda h: h.opcode == "parameter" and h.computation is comp)
        for i, p in enumerate(params):
            if library:
                nbytes = float(p.shape.byte_size)
            else:
                nbytes = float(costs.operand_bytes[i]) if i < len(costs.operand_bytes) else 0.0
            for leaf in _leaves(p.shape):
                bits = max(leaf.element_bits, 1)
                w, k = _width(bits)
                n = nbytes / max(bits / 8.0, 1e-9) * (leaf.byte_size / max(p.shape.byte_size, 1)) if p.shape.is_tuple else nbytes / (bits / 8.0)
                cls = classes.get(p, "s1")
                _add(acc, f"ld_{w}b_{cls}", n * k)
                loads[w] = loads.get(w, 0.0) + n * k
                load_bytes += n * bits / 8.0
        root = comp.root
        outs = list(root.operands) if root.opcode == "tuple" else [root]
    else:
        _instruction_ops(kernel, acc, 1.0)
        if op in _DOTS or op == "convolution":
            flops = sum(acc.pop(f"matmul_{d}", 0.0) for d in MATMUL_DTYPES)
            if how == "loop":
                # An emitted dot (GEMV or tiny) is a vectorized loop of multiply-adds.
                dt = _dtype_group(kernel.operands[0].shape.element_type)
                _add(acc, f"op_mul_{dt}", flops / 2)
                _add(acc, f"op_add_{dt}", flops / 2)
                acc.pop("matmul_batch", None)
            else:
                if op == "convolution":
                    _add(acc, "conv_flops_transposed" if _conv_transposed(kernel) else "conv_flops", flops)
                else:
                    _add(acc, "dot_flops", flops)
                if op == "convolution":
                    _conv_shape_features(kernel, acc)
        classes = _parameter_classes(kernel, lambda h: h is not kernel and any(h is o for o in kernel.operands))
        costs = _analysis(kernel)
        for i, o in enumerate(kernel.operands):
            nbytes = float(costs.operand_bytes[i]) if i < len(costs.operand_bytes) else 0.0
            leaf = _first_leaf(o.shape)
            bits = max(leaf.element_bits, 1)
            w, k = _width(bits)
            n = nbytes / (bits / 8.0)
            cls = classes.get(o, "s1")
            _add(acc, f"ld_{w}b_{cls}", n * k)
            loads[w] = loads.get(w, 0.0) + n * k
            load_bytes += nbytes
        outs = [kernel]
    for r in outs:
        if r.opcode == "dynamic-update-slice" and len(r.operands) > 1:
            s, cls = r.operands[1].shape, "s1"
        elif r.opcode == "scatter" and len(r.operands) >= 3:
            s, cls = r.operands[(len(r.operands) - 1) // 2 + 1].shape, "scatter"
        else:
            s, cls = r.shape, "s1"
        for leaf in _leaves(s):
            bits = max(leaf.element_bits, 1)
            w, k = _width(bits)
            n = float(leaf.num_elements)
            _add(acc, f"st_{w}b_{cls}", n * k)
            stores[w] = stores.get(w, 0.0) + n * k
            store_bytes += n * bits / 8.0
    if op == "copy" and kernel.operands and kernel.operands[0].shape == kernel.shape:
        # A lone copy that keeps the layout is a memcpy thunk: bytes moved at memcpy's own rate.
        for f in list(acc):
            if f.startswith(("ld_", "st_", "minldst_")):
                del acc[f]
        _add(acc, "memcpy_bytes", load_bytes + store_bytes)
    elif library:
        # A library call moves its operands its own way: one count of elements
        # in and out, no stride classes; its reductions are its own business.
        _add(acc, "lib_elements", sum(loads.values()) + sum(stores.values()))
        for f in list(acc):
            if f.startswith(("ld_", "st_", "red_")):
                del acc[f]
    else:
        for w in WIDTHS:
            _add(acc, f"minldst_{w}b", min(loads.get(w, 0.0), stores.get(w, 0.0)))

    footprint = sum(float(o.shape.byte_size) for o in kernel.operands) + float(kernel.shape.byte_size)
    moved = load_bytes + store_bytes
    l1 = dev.get("l1", 32 * 1024)
    l2 = dev.get("l2", 1 << 20)
    l3 = dev.get("l3", 0) or l2
    if footprint > l1:
        _add(acc, "bytes_l2", moved)
    if footprint > l2:
        _add(acc, "bytes_l3", moved)
    if footprint > l3:
        _add(acc, "bytes_dram", moved)

    tasks = 1
    if not library:
        tasks = int(min(max(int(kernel.shape.byte_size) // max(int(task_bytes), 1), 1), dev.get("cores", 1)))
    if tasks > 1:
        for f in list(acc):
            if f in _PER_THREAD:
                acc[f] /= tasks
        acc["tasks"] = float(tasks - 1)
    return _finish(acc)


def _fusion_ops(comp, util: dict, acc: dict, scale: float = 1.0, depth: int = 0) -> None:
    for h in comp.instructions:
        u = util.get(h, 0.0) * scale
        if not u:
            continue
        if h.opcode == "fusion" and h.fused_computation is not None and depth < 8:
            # A nested fusion: its instructions run once per element of its result, times its own use.
            inner_util = {g: 1.0 for g in h.fused_computation.instructions}
            _fusion_ops(h.fused_computation, inner_util, acc, u, depth + 1)
            continue
        _instruction_ops(h, acc, u)


def _finish(acc: dict) -> dict[str, float]:
    return {f: float(acc.get(f, 0.0)) for f in FEATURES}


