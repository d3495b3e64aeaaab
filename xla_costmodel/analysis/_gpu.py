"""XLA's `GpuHloCostAnalysis`: the flops, bytes and utilizations XLA's GPU performance model reads.

This is the analysis `GpuPerformanceModel` and the priority-fusion pass are
built on (reference: `xla/service/gpu/model/gpu_hlo_cost_analysis.cc`, and
section 3.2 of the project's research notes). It differs from the base
analysis (`module_cost`) in these ways:

- **Elementwise ops** cost `cycles(opcode, output dtype) x elements` "flops",
  from the device's clock-cycle profile (`hlo_op_profiles_data.h`, default 3
  per element), and never count transcendentals.
- **Concatenate** costs 6 per output element, or 400 when the concatenated
  dimension is not the major one and operand 0's extent there is not a
  multiple of 32.
- **Reduce**: each init value is read once per output element (bytes =
  out_elems x init size, utilization = out_elems).
- **`count_multiple_input_accesses`** (on in XLA's GPU pipeline): a broadcast
  reads its operand once per output element, a reduce-window once per window
  element.
- **Fusions**: utilization is propagated from the fusion root to the
  parameters (`FusionCalculateUtilizations`): an elementwise user passes its
  "elementwise use roots" on; any other user makes its operand a new root
  with utilization `ceil(user utilization x operand utilization x elems) /
  elems`. A fused instruction's flops count once per unit of utilization (so
  recomputation through broadcasts is counted), a parameter's bytes are
  `round(size x utilization)`, and the IR size counts how many times each
  instruction is emitted.
- **Custom calls** to cuBLAS gemms and cuDNN convolutions get dot /
  convolution flops and only their real output counted; a
  `cost_estimate_json` hint in the backend config is honoured; other custom
  calls are unknown (-1), as in the base analysis.
- **Collectives** get ring-algorithm byte counts, the number of participating
  devices and the bytes transferred.

For whoever ports XLA's `GpuPerformanceModel` onto this: XLA's calls map to
`GpuCostAnalysis` methods one to one (instructions or their names):

| XLA (`GpuHloCostAnalysis`)                | here                                      |
|-------------------------------------------|-------------------------------------------|
| `flop_count(instr)`                       | `flop_count(instr)`                       |
| `bytes_accessed(instr)`                   | `bytes_accessed(instr)`                   |
| `operand_bytes_accessed(instr, i, index)` | `operand_bytes_accessed(instr, i, index)` |
| `operand_utilization(instr, i, index)`    | `operand_utilization(instr, i, index)`    |
| `output_bytes_accessed(instr, index)`     | `output_bytes_accessed(instr, index)`     |
| `GetBytesRead` / `GetBytesWritten`        | `bytes_read` / `bytes_written`            |
| `GetShapeSize(shape)`                     | `shape_size(shape)`                       |
| `IrSize(instr)`                           | `ir_size(instr)`                          |
| `CommonElementwiseUtilization(a, b)`      | `common_elementwise_utilization(a, b)`    |
| `ProducerConsumerMergedTooLarge(p, c)`    | `producer_consumer_merged_too_large(p, c)`|
| `BytesTransferred`, `NumOfDevices`, `ScalingRatio` | `bytes_transferred`, `num_of_devices`, `scaling_ratio` |
| `RevisitInstruction`, `RemoveInstruction` | `revisit`, `remove`                       |
| `GetFlopsPerElementwiseOpElement`         | `flops_per_element(opcode, dtype)`        |

Inside a fusion, `utilization(fused_instr)` is XLA's `kUtilizationKey`
property (how many times the instruction is computed per fusion execution).
XLA's cost analysis does not model shared memory; launch dimensions and
shared-memory use belong to the performance model (reference section 1.2).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _fusion_growth
from . import _gpu_rules  # noqa: F401  (registers the GPU rules)
from . import _rules as R
from ._cost import (
    Analysis,
    InstructionCost,
    _dataframe,
    check_module,
    gc_paused,
)
from ._gpu_rules import DEFAULT_CYCLES
from ._opcodes import passes_elementwise_roots
from ._rules import (
    BYTES,
    FLOPS,
    IR,
    OPB,
    OPU,
    OUT,
    TRANS,
    UTIL,
    elements_recursive,
    get_extra,
)
from ._utilization_walk import exact_flops, integral_walk_step

if TYPE_CHECKING:
    from ..devices import DeviceSpec

__all__ = ["MAX_IR_SIZE", "GpuCostAnalysis", "gpu_cost_analysis"]

#: `GpuHloCostAnalysis::kMaxIRSize`: a producer-consumer merge above this is "too large"
#: (the fusion pass's `CanFuse` reads it too).
MAX_IR_SIZE = 10_000
_f32 = np.float32
_F32_STRUCT = struct.Struct("f")


# ---------------------------------------------------------------------------
# The analysis


def declares_exact_growth(an) -> bool:
    """Whether `an`'s class declares (`grows_exactly`, in its own body) that its fusion figures are
    the GPU walk's: `_fusion_growth` then gives them exactly, and the walk lists the body's
    parameters and constants (`fused_leaves`)."""
    return bool(type(an).__dict__.get("grows_exactly", False))


class _GpuAnalysis(Analysis):
    variant = "gpu"
    immediate_constant_max_elements = 8
    # The GPU analysis keeps per-fusion state (elementwise use roots) for every fused instruction.
    cache_fusions = False

    def __init__(self, module, op_profile: Mapping[tuple[str, str], float], **kwargs):
        # `kernel_cost` passes a table it resolved once and shares; anything else is copied.
        self.op_profile = op_profile if type(op_profile) is dict else dict(op_profile)
        super().__init__(module, **kwargs)
        self.ew_roots: dict[Any, set] = {}
        self.root_util: dict[Any, float] = {}
        self.root_ir: dict[Any, float] = {}
        # The last fusion walked: whether in exact integers, and its (parameters, constants).
        self.integral_walk = False
        self.fused_leaves: tuple[list, list] | None = None

    # Analyse a fusion that grew from the state its body was last analysed in (`_fusion_growth`).
    track_growth = False
    # Whether `_fusion_growth` gives this class's analysis of a grown fusion exactly (set by each
    # class that it does, in its own body: a subclass that changes the fusion figures must say so).
    grows_exactly = True

    def grown_fusion(self, p: list, before: list, clones: list) -> None:
        """Finish the record `p` of a fusion analysed from its state before a growth (`before`: its
        record then; `clones`: the instructions the growth added). Nothing more in this class."""

    def fusion(self, instr, p: list) -> None:
        if not self.track_growth or not declares_exact_growth(self):
            return super().fusion(instr, p)
        comp = instr.fused_computation
        growable = comp is not None and instr.fusion_kind != "kCustom"
        # Only the kernel itself follows growths: a fusion nested in its body is analysed afresh
        # (its state would replace the records the kernel's own analysis is filling).
        self.track_growth = False
        try:
            if growable and _fusion_growth.grow(self, instr, comp, p):
                return
            self.integral_walk = False
            self.fused_leaves = None
            super().fusion(instr, p)
        finally:
            self.track_growth = True
        if growable:
            _fusion_growth.remember(self, instr, comp, p)

    def fusion_utilizations(self, instr, comp, p: list) -> tuple[list, list]:
        """`GpuHloCostAnalysis::FusionCalculateUtilizations` (float32 arithmetic, as in XLA)."""
        order = list(reversed(self._post_order(comp)))
        self.integral_walk = False
        done = self._integral_utilizations(comp, order, p)
        if done is None:
            done = self._f32_utilizations(comp, order, p)
        self.fused_leaves = done
        return done

    def _integral_utilizations(self, comp, order: list, p: list) -> tuple[list, list] | None:
        """The common case in plain floats: while every utilization, IR size and flop sum is an
        integer below 2**24 or a fine fraction (`_records.exact_in_f32`), float32 arithmetic is exact
        and gives the same numbers. None (and nothing kept) as soon as a value is not such a number;
        then the float32 path runs."""
        records = self._records
        root = comp.root
        ew_roots: dict = {h: set() for h in order}
        root_util: dict = dict.fromkeys(order, 0.0)
        root_ir: dict = {}
        root_util[root] = 1.0
        root_ir[root] = 1.0
        ew_roots[root].add(root)
        ir_total = 0.0
        utils: list = []
        for h in order:
            r = records[h]
            step = integral_walk_step(h, r, ew_roots, root_util, root_ir, 0.0, ir_total, count_flops=False)
            if step is None:
                return None
            _, ir_total, util, ir = step
            utils.append((r, util, ir))
        # The flop sum: exact, or (sums past 2**24) added in float32 in the walk's order, as the float32
        # walk adds them (its utilizations are these, exact). Only an exact walk can be grown from.
        flops = 0.0
        for r, util, _ in utils:
            f = r[FLOPS]
            if f:
                flops = exact_flops(flops, util, f)
                if flops is None:
                    break
        if flops is None:
            flops = self._f32_flops(utils)
            if flops is None:
                return None
        else:
            self.integral_walk = True
        params = []
        constants = []
        for h, (r, util, ir) in zip(order, utils):
            r[UTIL] = util
            r[IR] = ir
            op = h.opcode
            if op == "parameter":
                params.append(h)
            elif op == "constant":
                constants.append(h)
        self.ew_roots.update(ew_roots)
        self.root_util.update(root_util)
        self.root_ir.update(root_ir)
        p[FLOPS] = flops
        p[IR] = ir_total
        params.sort(key=lambda h: h.parameter_number)
        return params, constants

    @staticmethod
    def _f32_flops(utils: list) -> float | None:
        """`_f32_utilizations_fast`'s flop sum from `(record, utilization, ir)` in walk order (a term of no
        flops adds nothing); None where a value leaves float32's range."""
        pack, unpack = _F32_STRUCT.pack, _F32_STRUCT.unpack
        flops = 0.0
        try:
            for r, util, _ in utils:
                f = r[FLOPS]
                if f:
                    flops = unpack(pack(flops + unpack(pack(util * unpack(pack(f))[0]))[0]))[0]
        except OverflowError:
            return None
        return flops

    def _f32_utilizations(self, comp, order: list, p: list) -> tuple[list, list]:
        try:
            return self._f32_utilizations_fast(comp, order, p)
        except OverflowError:  # a value beyond float32's range: numpy's arithmetic gives the infinities
            return self._f32_utilizations_numpy(comp, order, p)

    def _f32_utilizations_fast(self, comp, order: list, p: list) -> tuple[list, list]:
        """`_f32_utilizations_numpy`'s float32 arithmetic on Python floats: each float32 operation done in
        double precision and rounded to float32 (`_pack`/`_unpack`). For +, * and / of float32 values
        that is the float32 result to the bit (double rounding is harmless when the wider format has at
        least 2p+2 bits, 53 >= 2*24+2); numpy scalars cost several times more per operation, and this
        walk runs for every fused body whose figures are not small integers. Raises OverflowError
        (nothing kept) where a value leaves float32's range."""
        pack, unpack = _F32_STRUCT.pack, _F32_STRUCT.unpack
        records = self._records
        ew_roots = self.ew_roots
        root_util = self.root_util
        params, constants, root_ir = self._start_walk(comp, order)
        flops = 0.0
        ir_total = 0.0
        # (`root_util` and `root_ir` hold float32 values only, each stored rounded: read as they are)
        for h in order:
            r = records[h]
            roots_h = ew_roots[h]
            if len(roots_h) == 1:
                for rt in roots_h:  # 0 + x: x
                    util = root_util[rt]
                    ir = root_ir.get(rt, 0.0)
            else:
                util = 0.0
                ir = 0.0
                for rt in roots_h:
                    util = unpack(pack(util + root_util[rt]))[0]
                    ir = unpack(pack(ir + root_ir.get(rt, 0.0)))[0]
            r[UTIL] = util
            r[IR] = ir
            flops = unpack(pack(flops + unpack(pack(util * unpack(pack(r[FLOPS]))[0]))[0]))[0]
            ir_total = unpack(pack(ir_total + ir))[0]
            passes_roots = passes_elementwise_roots(h)
            opu_list = r[OPU]
            for k, operand in enumerate(h.operands):
                if passes_roots:
                    ew_roots[operand].update(roots_h)
                    continue
                ew_roots[operand].add(operand)
                opu = opu_list[k] if k < len(opu_list) else 0.0
                cur = unpack(pack(util * unpack(pack(opu))[0]))[0]
                n = elements_recursive(operand.shape)
                if n == 0:
                    cur = 0.0
                else:
                    nf = unpack(pack(n))[0]
                    up = unpack(pack(math.ceil(unpack(pack(cur * nf))[0])))[0]
                    cur = unpack(pack(up / nf))[0]
                root_util[operand] = unpack(pack(root_util[operand] + cur))[0]
                root_ir[operand] = unpack(pack(root_ir.get(operand, 0.0) + ir))[0]
        p[FLOPS] = flops
        p[IR] = ir_total
        params.sort(key=lambda h: h.parameter_number)
        return params, constants

    def _start_walk(self, comp, order: list) -> tuple[list, list, dict]:
        """Both walks' start: every instruction's figures zeroed, the root used once by itself; the
        parameters and constants of `order`, and the roots' IR sizes (the root's: 1)."""
        records = self._records
        params = []
        constants = []
        for h in order:
            r = records[h]
            r[UTIL] = 0.0
            r[IR] = 0.0
            self.ew_roots[h] = set()
            self.root_util[h] = 0.0
            if h.opcode == "parameter":
                params.append(h)
            elif h.opcode == "constant":
                constants.append(h)
        root = comp.root
        self.root_util[root] = 1.0
        self.ew_roots[root].add(root)
        return params, constants, {root: 1.0}

    def _f32_utilizations_numpy(self, comp, order: list, p: list) -> tuple[list, list]:
        records = self._records
        params, constants, root_ir = self._start_walk(comp, order)
        flops = _f32(0.0)
        ir_total = _f32(0.0)
        for h in order:
            r = records[h]
            util = _f32(0.0)
            ir = _f32(0.0)
            for rt in self.ew_roots[h]:
                util = _f32(util + _f32(self.root_util[rt]))
                ir = _f32(ir + _f32(root_ir.get(rt, 0.0)))
            r[UTIL] = float(util)
            r[IR] = float(ir)
            flops = _f32(flops + _f32(util * _f32(r[FLOPS])))
            ir_total = _f32(ir_total + ir)
            passes_roots = passes_elementwise_roots(h)
            for k, operand in enumerate(h.operands):
                if passes_roots:
                    self.ew_roots[operand].update(self.ew_roots[h])
                    continue
                self.ew_roots[operand].add(operand)
                opu = r[OPU][k] if k < len(r[OPU]) else 0.0
                cur = _f32(util * _f32(opu))
                n = elements_recursive(operand.shape)
                if n == 0:
                    cur = _f32(0.0)
                else:
                    cur = _f32(_f32(math.ceil(_f32(cur * _f32(n)))) / _f32(n))
                self.root_util[operand] = float(_f32(_f32(self.root_util[operand]) + cur))
                root_ir[operand] = float(_f32(root_ir.get(operand, 0.0)) + ir)
        p[FLOPS] = float(flops)
        p[IR] = float(ir_total)
        params.sort(key=lambda h: h.parameter_number)
        return params, constants

    def _post_order(self, comp) -> list:
        placed: set = set()
        for h in comp.instructions:
            for op in h.operands:
                if op not in placed:
                    return self.visit_order(comp)
            placed.add(h)
        return list(comp.instructions)

    def fusion_parameter_read_bytes(self, h) -> float:
        """`round(size x utilization)`; utilization capped at 1 unless counting multiple accesses."""
        util = self._records[h][UTIL]
        if not self.count_multiple_input_accesses:
            util = min(util, 1.0)
        value = float(_f32(self.size(h.shape)) * _f32(util))
        return float(math.floor(value + 0.5) if value >= 0 else -math.floor(-value + 0.5))


def _resolve_profile(device: "DeviceSpec | str | Mapping | None") -> tuple[dict[tuple[str, str], float], str]:
    """`(profile table, description)` for the `device` argument of `gpu_cost_analysis` and `kernel_cost`.

    `device`: a `DeviceSpec` (its `op_profile`, else XLA's table for its
    compute capability, else XLA's default), a device name for `get_device`,
    a `{(opcode, dtype): cycles}` mapping (an explicit profile, such as
    `devices.load_op_profile("sm_90")`), or None (XLA's default profile).
    """
    from ..devices import DEFAULT_OP_PROFILE, DeviceSpec, get_device, load_op_profile

    if device is None:
        return dict(load_op_profile(DEFAULT_OP_PROFILE)), f"XLA's default profile {DEFAULT_OP_PROFILE}"
    if isinstance(device, str):
        device = get_device(device)
    if isinstance(device, Mapping):
        return {(str(op), str(dt).lower()): float(v) for (op, dt), v in device.items()}, "custom op profile"
    if not isinstance(device, DeviceSpec):
        raise TypeError(f"device must be a DeviceSpec, a device name, an op profile mapping or None, "
                        f"not {type(device).__name__}")
    if device.op_profile:
        return {(op, dt.lower()): float(v) for (op, dt), v in device.op_profile.items()}, device.name
    if device.compute_capability:
        return dict(load_op_profile(tuple(device.compute_capability))), device.name
    return dict(load_op_profile(DEFAULT_OP_PROFILE)), f"{device.name} (XLA's default profile {DEFAULT_OP_PROFILE})"


class GpuCostAnalysis:
    """XLA's `GpuHloCostAnalysis` over a module: the per-instruction figures of XLA's GPU performance model.

    Build it with `gpu_cost_analysis(module, device)`. Every computation that
    is not a fusion body is analysed (the entry, loop bodies, branches, ...),
    and fused instructions get XLA's nested figures plus their utilization and
    IR size. Accessors take an `HloInstruction` of the module, or its name.

    Method names follow XLA's (`flop_count` is `flop_count`, `IrSize` is
    `ir_size`, ...). With no instruction, `flop_count()`,
    `transcendental_count()` and `bytes_accessed()` are the module totals (sum
    over the entry computation).

    **Attributes:** `module`; `device` (what was passed); `op_profile`
    (`{(opcode, dtype): cycles}` in use); `profile_source`;
    `count_multiple_input_accesses`.
    """

    def __init__(self, module, device=None, *, count_multiple_input_accesses: bool = True,
                 warn: bool = True):
        check_module(module)
        self.module = module
        self.device = device
        self.op_profile, self.profile_source = _resolve_profile(device)
        self.count_multiple_input_accesses = bool(count_multiple_input_accesses)
        self._an = _GpuAnalysis(module, self.op_profile,
                                count_multiple_input_accesses=self.count_multiple_input_accesses, warn=warn)
        fused = {id(i.fused_computation) for _, i in module.instructions() if i.fused_computation is not None}
        with gc_paused():
            self._an.entry_sum()
            for comp in module.computations:
                if id(comp) not in fused and not self._an._reached(comp):
                    self._an.subcomputation(comp)
        self._an.emit_warnings(stacklevel=3)

    # -- lookup -------------------------------------------------------------
    def _instr(self, instr):
        if isinstance(instr, str):
            name = instr.lstrip("%")
            for comp in self.module.computations:
                if name in comp:
                    return comp.instruction(name)
            raise KeyError(f"module '{self.module.name}' has no instruction '{instr}'")
        return instr

    def _rec(self, instr) -> list:
        instr = self._instr(instr)
        try:
            return self._an.record(instr)
        except KeyError:
            raise KeyError(
                f"instruction '{instr.name}' was not analysed (it is not in module '{self.module.name}', "
                f"or was added after the analysis: call revisit() on it)"
            ) from None

    # -- per-instruction figures -------------------------------------------
    def cost(self, instr) -> InstructionCost:
        """All properties of an instruction as an `InstructionCost`."""
        return InstructionCost._from_record(self._rec(instr))

    def flop_count(self, instr=None) -> float:
        """Flops (for elementwise ops: profile cycles x elements; for a fusion: utilization-weighted)."""
        if instr is None:
            return float(self._an.entry_sum()[FLOPS])
        return float(self._rec(instr)[FLOPS])

    def transcendental_count(self, instr=None) -> float:
        if instr is None:
            return float(self._an.entry_sum()[TRANS])
        return float(self._rec(instr)[TRANS])

    def bytes_accessed(self, instr=None) -> float:
        """Bytes read and written (for a fusion: output + each parameter's size x utilization + large constants)."""
        if instr is None:
            return float(self._an.entry_sum()[BYTES])
        return float(self._rec(instr)[BYTES])

    def output_bytes_accessed(self, instr, index: tuple[int, ...] = ()) -> float:
        """Bytes written to output `index` (`()` = all of it)."""
        p = self._rec(instr)
        if not index:
            return float(p[OUT])
        return float(get_extra(p, R.output_bytes_key(tuple(index))))

    def operand_bytes_accessed(self, instr, operand: int, index: tuple[int, ...] = ()) -> float:
        """Bytes read from operand `operand` (for a tuple operand, leaf `index`)."""
        p = self._rec(instr)
        if index:
            return float(get_extra(p, R.operand_bytes_key(operand, tuple(index))))
        return float(p[OPB][operand]) if operand < len(p[OPB]) else 0.0

    def operand_utilization(self, instr, operand: int, index: tuple[int, ...] = ()) -> float:
        """How many times each element of operand `operand` is read, on average (may exceed 1)."""
        p = self._rec(instr)
        if index:
            return float(get_extra(p, R.operand_utilization_key(operand, tuple(index))))
        return float(p[OPU][operand]) if operand < len(p[OPU]) else 0.0

    def utilization(self, instr) -> float:
        """Inside a fusion: how many times the instruction's output is produced per fusion execution."""
        return float(self._rec(instr)[UTIL])

    def ir_size(self, instr) -> float:
        """XLA's `IrSize`: 1 for an unfused instruction; for a fusion, instructions emitted counting replication."""
        return float(self._rec(instr)[IR])

    def common_elementwise_utilization(self, a, b) -> float:
        """Sum of the utilizations of the elementwise use roots that fused instructions `a` and `b` share."""
        a, b = self._instr(a), self._instr(b)
        roots_a = self._an.ew_roots.get(a)
        roots_b = self._an.ew_roots.get(b)
        if roots_a is None or roots_b is None:
            raise KeyError(f"'{a.name}' and '{b.name}' must be instructions of an analysed fusion")
        total = _f32(0.0)
        for r in roots_a:
            if r in roots_b:
                total = _f32(total + _f32(self._an.root_util[r]))
        return float(total)

    def producer_consumer_merged_too_large(self, producer, consumer) -> bool:
        """XLA's `ProducerConsumerMergedTooLarge`: would fusing `producer` into `consumer` exceed 10,000 IR?"""
        producer, consumer = self._instr(producer), self._instr(consumer)
        replication = 1.0
        if consumer.opcode == "fusion":
            index = consumer.operands.index(producer)
            replication = self.ir_size(consumer.fused_computation.parameter(index))
        return int(self.ir_size(producer) * replication + self.ir_size(consumer)) > MAX_IR_SIZE

    def bytes_transferred(self, instr) -> float:
        """Collectives: bytes moved between devices."""
        return float(get_extra(self._rec(instr), R.KEY_COLL_BYTES))

    def num_of_devices(self, instr) -> int:
        """Collectives: participants of the largest group."""
        return int(get_extra(self._rec(instr), R.KEY_COLL_DEVICES))

    def scaling_ratio(self, instr) -> float:
        """Collectives: the ring algorithm's bandwidth scaling ratio."""
        return float(get_extra(self._rec(instr), R.KEY_COLL_SCALE))

    def bytes_read(self, instr) -> float:
        """XLA's `GetBytesRead`: operand bytes summed over every operand's leaves."""
        instr = self._instr(instr)
        total = 0.0
        for i, operand in enumerate(instr.operands):
            for index, _leaf in R.all_leaves(operand.shape):
                total += self.operand_bytes_accessed(instr, i, index)
        return total

    def bytes_written(self, instr) -> float:
        """XLA's `GetBytesWritten`: output bytes summed over the output's leaves."""
        instr = self._instr(instr)
        return float(sum(self.output_bytes_accessed(instr, index) for index, _ in R.all_leaves(instr.shape)))

    def shape_size(self, shape) -> int:
        """XLA's `GetShapeSize`: bytes of a shape's top level (8 per element of a tuple's pointer table)."""
        return self._an.size(shape)

    def flops_per_element(self, opcode: str, dtype: str) -> float:
        """`GetFlopsPerElementwiseOpElement`: profile cycles of `(opcode, dtype)`, 3 when not profiled."""
        return float(self.op_profile.get((opcode, dtype.lower()), DEFAULT_CYCLES))

    # -- updates ---------------------------------------------------------------
    def revisit(self, instr) -> InstructionCost:
        """Re-cost an instruction after the graph changed (XLA's `RevisitInstruction`).

        Use it for instructions created or edited after the analysis, e.g. a
        fusion built by a fusion pass; its fused computation is costed afresh.
        """
        instr = self._instr(instr)
        an = self._an
        for comp in instr.called_computations:
            an._subs.pop(id(comp), None)
            an._orders.pop(id(comp), None)
        if instr.computation is not None:
            an._subs.pop(id(instr.computation), None)
            an._orders.pop(id(instr.computation), None)
            if instr.computation is self.module.entry:
                an._entry_sum = None
        with gc_paused():
            p = an.visit(instr)
        return InstructionCost._from_record(p)

    def remove(self, instr) -> None:
        """Forget an instruction's figures (XLA's `RemoveInstruction`)."""
        instr = self._instr(instr)
        self._an._records.pop(instr, None)
        if instr.computation is not None:
            self._an._subs.pop(id(instr.computation), None)
            if instr.computation is self.module.entry:
                self._an._entry_sum = None

    # -- tables ----------------------------------------------------------------
    def to_dataframe(self):
        """One row per analysed instruction: the base table's columns plus `ir_size` and the collective figures."""
        extra = [
            ("ir_size", lambda instr, p: float(p[IR])),
            ("bytes_transferred", lambda instr, p: float(get_extra(p, R.KEY_COLL_BYTES))),
        ]
        df = _dataframe(self._an, extra_columns=extra, analyze=False)
        df.attrs["op_profile"] = self.profile_source
        return df

    def __repr__(self) -> str:
        return (f"<GpuCostAnalysis of module '{self.module.name}' ({self.profile_source}): "
                f"{self.flop_count():.4g} flops, {self.bytes_accessed():.4g} bytes accessed>")

    def _repr_html_(self) -> str:
        import html

        rows = [
            ("module", self.module.name),
            ("op profile", self.profile_source),
            ("count_multiple_input_accesses", str(self.count_multiple_input_accesses)),
            ("flops (entry)", f"{self.flop_count():,.0f}"),
            ("transcendentals (entry)", f"{self.transcendental_count():,.0f}"),
            ("bytes accessed (entry)", f"{self.bytes_accessed():,.0f}"),
            ("unpriced", ", ".join(f"{k} x{v}" for k, v in self._an.unpriced.items()) or "none"),
        ]
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                       for k, v in rows)
        return f"<table><caption>GpuCostAnalysis</caption>{body}</table>"


def gpu_cost_analysis(module, device=None, *, count_multiple_input_accesses: bool = True,
                      warn: bool = True) -> GpuCostAnalysis:
    """XLA's `GpuHloCostAnalysis` of a module, as XLA's GPU performance model and priority fusion use it.

    **Arguments:**

    - `module`: an `HloModule`.
    - `device`: where the per-op clock-cycle profile comes from: a
      `DeviceSpec` (its `op_profile`, or the table for its compute
      capability), a device name such as `"h100-sxm"`, a mapping
      `{(opcode, dtype): cycles}` (e.g. one of XLA's tables,
      `devices.load_op_profile("sm_90")`), or None for XLA's default (`sm_86`).
    - `count_multiple_input_accesses`: XLA's option; True as in XLA's GPU
      fusion pipeline and tests.
    - `warn`: warn about instructions whose cost is unknown.

    **Returns:** a `GpuCostAnalysis` (per-instruction accessors, totals,
    `to_dataframe()`).
    """
    return GpuCostAnalysis(module, device, count_multiple_input_accesses=count_multiple_input_accesses, warn=warn)
