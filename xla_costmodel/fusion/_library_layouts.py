"""Layout assignment around XLA:GPU's library calls before fusion: the copies it leaves as kernels.

XLA's `LayoutAssignment` (openxla/xla `xla/service/layout_assignment.cc`, read for these rules) clears
every layout a module as JAX lowers it carries except the mandatory ones, then propagates constraints:

- a layout-constrained custom call (`operand_layout_constraints`: the cuSOLVER calls `cusolver_potrf_ffi`,
  `cusolver_getrf_ffi`, `cusolver_gesvdj_ffi`, `cusolver_syevd_ffi`, ...) keeps the layouts of its result
  and must get each operand in the layout its constraint names (`SetOperandLayout`, mandatory);
- XLA:GPU's `AddBackendConstraints` (`xla/service/gpu/transforms/layout_assignment.cc`) gives a
  `triangular-solve` (later the `__cublas$triangularSolve` call) both operands and its result in Fortran
  order: the two minor dimensions column-major, batch dimensions major (`SetFortranLayout`);
- the entry computation's parameters and result keep the entry computation layout, which JAX compiles
  with the default (row-major) layouts.

Where an operand's producer can take the layout asked of it (an elementwise op, a gather, ...), the
constraint propagates into it and it is computed in that layout: no kernel is added (the module here keeps
the producer as it is). Where the producer's layout is fixed (an entry parameter, another library call's
result), XLA inserts a `copy` into the asked layout, a kernel of its own (a transpose: the capture's
`wrapped_transpose` before a cuSOLVER call). Likewise a library call's result that reaches the entry's
result through nothing but bitcasts, in another layout than the default, is copied there (the capture's
`loop_transpose_fusion` after the last triangular solve of `cho_solve`).

Here those copies are added as `copy` instructions with the asked layout, and the triangular solves get
Fortran layouts. Not simulated: layouts of loop states and of computations other than the entry (their
parameters are taken as free), and the constraints of other backend rules (cuBLAS GEMMs and cuDNN
convolutions are `fusion._gemm_fusion`'s and `fusion._conv_rewrite`'s).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..hlo import HloComputation, HloInstruction, HloModule, Layout, Shape
from ._copy_insertion import forwarded

__all__ = ["LayoutCopy", "assign_library_layouts", "fortran_order", "layouts_assigned"]

#: the minor_to_major of each shape in `operand_layout_constraints={f32[64,64]{0,1}, s32[64]{0}}`
_CONSTRAINT = re.compile(r"[a-z]\w*\[[^\]]*\]\{([\d,\s]*)")


@dataclass(frozen=True)
class LayoutCopy:
    """A copy layout assignment leaves as a kernel: `copy` (its name) of `of` into `layout`
    (minor_to_major), for `call` (`reason`: "operand" of the call, or its "result" at the entry's output)."""

    kind: str
    call: str
    copy: str
    of: str
    layout: tuple[int, ...]
    reason: str


def fortran_order(rank: int) -> tuple[int, ...]:
    """`SetFortranLayout`'s minor_to_major: the two minor dimensions swapped, batch dimensions major."""
    if rank < 2:
        return tuple(range(rank - 1, -1, -1))
    return (rank - 2, rank - 1) + tuple(range(rank - 3, -1, -1))


def _default_order(rank: int) -> tuple[int, ...]:
    return tuple(range(rank - 1, -1, -1))


def _constraints(call: HloInstruction) -> list[tuple[int, ...] | None] | None:
    """The minor_to_major each operand of a layout-constrained custom call must have (None: unconstrained)."""
    if call.opcode == "triangular-solve":
        return [fortran_order(o.shape.rank) if o.shape.is_array else None for o in call.operands]
    if call.opcode != "custom-call" or not call.has_attribute("operand_layout_constraints"):
        return None
    text = call.raw_attributes["operand_layout_constraints"]
    found = [tuple(int(x) for x in m.split(",") if x.strip()) for m in _CONSTRAINT.findall(text)]
    if len(found) != len(call.operands):
        return None  # a tuple-shaped operand or an unread constraint: left as it is
    return list(found)


def _order(shape: Shape) -> tuple[int, ...] | None:
    return tuple(shape.layout.minor_to_major) if shape.is_array and shape.layout is not None else None


def _fixed(instr: HloInstruction, entry: HloComputation) -> bool:
    """Whether layout assignment cannot change the layout of the value `instr` holds: an entry parameter
    (the entry computation layout) or a layout-constrained library call's result."""
    src = forwarded(instr)
    if src.opcode == "parameter":
        return src.computation is entry
    if src.opcode == "get-tuple-element" and src.operands:
        src = forwarded(src.operands[0])
        if src.opcode == "parameter":
            return src.computation is entry
    return _constraints(src) is not None


def _with_order(shape: Shape, order: tuple[int, ...]) -> Shape:
    tail = shape.layout.tail if shape.layout is not None else ""
    return Shape(shape.element_type, shape.dims, shape.dynamic, Layout(order, tail))


def _physically_same(shape: Shape, order: tuple[int, ...]) -> bool:
    """The layout `order` lays `shape`'s elements out as its own layout does (dimensions of size 1 anywhere)."""
    mine = _order(shape)
    if mine is None:
        return True
    return [d for d in mine if shape.dims[d] != 1] == [d for d in order if shape.dims[d] != 1]


def _copy(comp: HloComputation, module: HloModule, of: HloInstruction, order: tuple[int, ...],
          before: HloInstruction) -> HloInstruction:
    copy = HloInstruction(module.unique_name("copy"), "copy", _with_order(of.shape, order), [of])
    comp.add_instruction(copy, before=before)
    return copy


def _outputs(root: HloInstruction):
    """(holder, operand index, value) of every array the entry returns (holder None: the root itself)."""
    if root.opcode != "tuple":
        yield None, 0, root
        return
    for i, op in enumerate(root.operands):
        if op.opcode == "tuple":
            for holder, j, value in _outputs(op):
                yield (op if holder is None else holder), j, value
        else:
            yield root, i, op


def assign_library_layouts(module: HloModule) -> list[LayoutCopy]:
    """Give `module`'s library calls the layouts XLA's layout assignment gives them, and add the copies it
    leaves as kernels (module docstring), in place. **Returns:** one `LayoutCopy` per copy added."""
    entry = module.entry
    if entry is None:
        return []
    out: list[LayoutCopy] = []
    fused = {i.fused_computation for c in module.computations for i in c.instructions if i.opcode == "fusion"}
    for comp in module.computations:
        if comp in fused:
            continue
        for call in list(comp.instructions):
            wanted = _constraints(call)
            if wanted is None:
                continue
            made: dict = {}  # (operand, order) -> its copy (an operand read twice is copied once)
            for i, (operand, order) in enumerate(zip(list(call.operands), wanted)):
                if order is None or _physically_same(operand.shape, order) or not _fixed(operand, entry):
                    continue
                key = (operand, order)
                if key not in made:
                    made[key] = _copy(comp, module, operand, order, call)
                    out.append(LayoutCopy(call.opcode, call.name, made[key].name, operand.name, order, "operand"))
                call.replace_operand(i, made[key])
            fortran = fortran_order(call.shape.rank) if call.shape.is_array else None
            if call.opcode == "triangular-solve" and fortran and not _physically_same(call.shape, fortran):
                # (a layout that lays the data out alike is kept: its readers' bitcasts stay bitcasts)
                call.shape = _with_order(call.shape, fortran)
    root = entry.root
    if root is None:
        return out
    for holder, slot, value in list(_outputs(root)):
        if not value.shape.is_array or value.opcode == "copy":
            continue
        order = _default_order(value.shape.rank)
        src = forwarded(value)
        if src.opcode == "get-tuple-element" and src.operands:
            call = forwarded(src.operands[0])
        else:
            call = src
        # (a chain of bitcasts between them only relabels: the output holds the call's data as it laid it out)
        if _constraints(call) is None or _physically_same(value.shape, order):
            continue
        copy = HloInstruction(module.unique_name("copy"), "copy", _with_order(value.shape, order), [value])
        entry.add_instruction(copy, before=holder)
        if holder is None:
            entry.root = copy
        else:
            holder.replace_operand(slot, copy)
        out.append(LayoutCopy(call.opcode, call.name, copy.name, value.name, order, "result"))
    return out


def layouts_assigned(module: HloModule) -> bool:
    """Whether `module` has been through XLA's layout assignment: its layouts are the physical
    ones and `bitcast` is a legal instruction in it.

    True for a scheduled module (`is_scheduled=true`, which XLA writes only at the end of its
    pipeline, as in `Compiled.as_text()`) and for one that already holds `bitcast`s or `fusion`s
    (XLA's CPU and GPU pipelines make both only after layout assignment). A module as JAX lowers
    it (`Lowered.as_text(dialect="hlo")`) is not: its layouts are defaults that layout assignment
    may still change, and layout assignment rejects a bitcast in it ("Unexpected bitcast
    operation seen during layout assignment").
    """
    if module.header_attributes.get("is_scheduled", "").strip().lower() == "true":
        return True
    return any(i.opcode in ("bitcast", "fusion") for _, i in module.instructions())
