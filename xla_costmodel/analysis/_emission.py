"""How XLA:GPU emits a kernel (XLA's `ir_emission_utils`, `reduction_utils`, `HloFusionAnalysis`):
fusion roots and heroes, tiled reductions and transposes, and the emitter a kernel gets.

The one home of these facts. Two callers read them:

- the cost models (`models/_launch.py`: launch grids; `models/_coalescing.py`),
  which follow `HloFusionAnalysis::GetEmitterFusionKind` at XLA's HEAD
  (device-aware, normalized "021" transposes, per-root shape checks);
- the fusion pass (`fusion/_legality.py`: `ChooseKind`, `CanFuse`'s
  reduction-epilogue rule, shared-memory budget), whose answers are the
  `fusion_pass_*` functions below.

The two views differ, and both stay: the pass's versions test reshapes for
bitcast-ness with unit dimensions ignored (`_shapes.reshape_is_bitcast`),
count only width-keeping bitcast-converts as elementwise, detect tiled
transposes on the layouts as they are (no "021" transposes that keep the
minor dimension), strip get-tuple-elements from fusion roots, ask a
reduction hero that is not the root for a single user, and decide without
a device (XLA's warp of 32) and without the per-root shape checks. The pass
reproduces the fusion decisions its tests pin (XLA's `CanFuse`), the models
the launch grids of `gpu_performance_model_test.cc`; swapping either view
for the other changes which pairs the pass fuses, or what a kernel costs.
Making them one is a fidelity change to check against XLA's tests, not a
refactoring. Everything they agree on (reduction geometry, the contiguity
and race-free tests, the search for a hero) is written once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from ..fusion_engine import select_in_body
from ._frontend import fusion_backend_kind, int_list_attribute
from ._opcodes import IS_ELEMENTWISE, LIBRARY_OPCODES, is_elementwise
from ._shapes import elements, elements_recursive, reshape_is_bitcast, transpose_is_bitcast

# XLA constants (ir_emission_utils.h, reduction_utils.h)
WARP_SIZE = 32  # every GPU XLA supports; the fusion pass decides with it, the models ask the device
MIN_DIM_TO_TRANSPOSE_TILED = 16
MIN_DIM_TO_TRANSPOSE_TILED2 = 8
MIN_TOTAL_DIMS_TO_TRANSPOSE_TILED = 64 * 128
MAX_BYTES_IN_MOST_MINOR_DIM = 8
MIN_THREADS_X_ROW_REDUCTION = 1024
BATCHED_REDUCTION_RACE_FREE_BOUND = 8
ROW_REDUCTION_TILE_X = 16
COLUMN_REDUCTION_TILE_Y = 128


def _dimensions(instr) -> tuple[int, ...]:
    return int_list_attribute(instr, "dimensions", ())


def warp_size(device) -> int:
    """The device's warp size (XLA's 32 when the spec leaves it out)."""
    return device.warp_size or WARP_SIZE


# ---------------------------------------------------------------------------
# Heroes: the op that decides a root's emitter (shared search)


def find_hero_matching(start, predicate, in_kernel, intermediate):
    """XLA's `FindNonTrivialHero(root, predicate)`: one matching op reachable through
    intermediate ops (up to 3 operands), with only intermediate ops between it and the root.

    `intermediate`: the `IsIntermediate` test to walk through (`is_intermediate`
    for the models, `fusion_pass_is_intermediate` for the pass).
    """
    hero = None
    seen = {id(start)}
    queue = [start]
    while queue:
        node = queue.pop(0)
        if predicate(node):
            if hero is not None:
                return None
            hero = node
            continue
        if not intermediate(node, 3):
            continue
        for o in node.operands:
            if in_kernel(o) and id(o) not in seen:
                seen.add(id(o))
                queue.append(o)
    if hero is None:
        return None
    # No non-trivial op may consume the hero on its way to the root.
    stack = list(hero.users)
    seen = set()
    while stack:
        u = stack.pop()
        if id(u) in seen or not in_kernel(u):
            continue
        seen.add(id(u))
        if u.opcode not in ("tuple", "parameter") and not intermediate(u, 3):
            return None
        stack.extend(u.users)
    return hero


# ---------------------------------------------------------------------------
# Reductions (reduction_utils.cc), shared


def _consecutive(shape, dims) -> bool:
    """`LayoutUtil::AreDimensionsConsecutive`: positions of `dims` in minor_to_major are contiguous."""
    if not dims:
        return True
    pos = {d: i for i, d in enumerate(shape.minor_to_major)}
    ps = sorted(pos[d] for d in dims)
    return ps[-1] - ps[0] + 1 == len(ps)


def _partition(shape, middle) -> list[int]:
    """`PartitionShapeByMiddleDimensions`: [major, middle, minor] sizes (`middle` consecutive)."""
    values = [1, 1, 1]
    seg = 2  # minor
    for d in shape.minor_to_major:
        if seg != 0:
            inside = d in middle
            if seg == 2 and inside:
                seg = 1
            elif seg == 1 and not inside:
                seg = 0
        values[seg] *= shape.dims[d]
    return values


def reduction_dimensions(reduce) -> tuple[bool, tuple[int, int, int]]:
    """XLA's `GetReductionKindAndContiguousComponents`: (is_row, (d0, d1, d2)).

    Row: (major reduced, kept, minor reduced); column: (major kept, reduced, minor kept).
    """
    shape = reduce.operands[0].shape
    reduced = set(_dimensions(reduce))
    keep = [d for d in range(len(shape.dims)) if d not in reduced]
    if not keep:
        return True, (1, 1, elements(shape))
    if _consecutive(shape, keep):
        p = _partition(shape, set(keep))
        if p[1] == 1:
            return True, (1, 1, p[0] * p[2])
        if p[2] == 1:
            return False, (1, p[0], p[1])
        return True, (p[0], p[1], p[2])
    p = _partition(shape, reduced)
    if p[2] == 1:
        return True, (1, p[0], p[1])
    return False, (p[0], p[1], p[2])


def faster_than_elemental(is_row: bool, dims, warp: int) -> bool:
    """Whether the tiled reduction emitter beats the elemental one (`IsUnnestedReductionFasterThanElemental`)."""
    if is_row:
        return dims[2] >= warp or (dims[2] > 0 and warp % dims[2] == 0)
    major, minor = dims[1], dims[2]
    prefer_elemental = (
        major < warp
        or (major < 2 * warp and minor < warp)
        or (major < 4 * warp and minor < 8)
        or (major < 8 * warp and minor < 3)
    )
    return not prefer_elemental


def is_contiguous_reduction(instr, warp: int = WARP_SIZE) -> bool:
    """XLA's `IsReductionFromOrToContiguousDimensions`: a reduce the tiled emitter handles, faster
    than the elemental one."""
    if instr.opcode != "reduce" or not instr.operands:
        return False
    shape = instr.operands[0].shape
    if not shape.is_array:
        return False
    reduced = set(_dimensions(instr))
    keep = [d for d in range(len(shape.dims)) if d not in reduced]
    if not (_consecutive(shape, keep) or _consecutive(shape, sorted(reduced))):
        return False
    is_row, dims = reduction_dimensions(instr)
    return faster_than_elemental(is_row, dims, warp)


def reduction_is_race_free(is_row: bool, dims, warp: int = WARP_SIZE) -> bool:
    """XLA's `ReductionIsRaceFree`: one block reduces each output element."""
    if is_row:
        return dims[2] <= MIN_THREADS_X_ROW_REDUCTION * ROW_REDUCTION_TILE_X and dims[0] <= BATCHED_REDUCTION_RACE_FREE_BOUND
    return dims[1] <= warp * COLUMN_REDUCTION_TILE_Y


# ===========================================================================
# As the cost models see a kernel (XLA's HEAD)


def fused_roots(kernel) -> list:
    """The roots of a kernel: a fusion's root, or the operands of its root tuple; a lone instruction itself."""
    comp = kernel.fused_computation if kernel.opcode == "fusion" else None
    if comp is None:
        return [kernel]
    root = comp.root
    if root.opcode == "tuple":
        return list(root.operands)
    return [root]


def is_intermediate(instr, allowed_operands: int = 1) -> bool:
    """XLA's `IsIntermediate`: elementwise or bitcast-like, with 1..allowed operands."""
    n = len(instr.operands)
    if n == 0 or n > allowed_operands:
        return False
    op = instr.opcode
    if op in IS_ELEMENTWISE:
        if op == "copy":
            return instr.shape == instr.operands[0].shape
        return True
    if op == "bitcast":
        return True
    if op == "reshape":
        return reshape_is_bitcast(instr.operands[0].shape, instr.shape)
    if op == "transpose":
        return transpose_is_bitcast(instr.operands[0].shape, instr.shape, _dimensions(instr), ignore_unit_dims=True)
    return False


def find_hero(root, kernel):
    """XLA's `FindNonTrivialHero`: the op that decides the emitter for `root`."""
    if kernel.opcode != "fusion":
        return root
    comp = kernel.fused_computation

    def in_kernel(x):
        return x.opcode != "parameter" and x.computation is comp

    hero = root
    while is_intermediate(hero, 1) and in_kernel(hero.operands[0]):
        hero = hero.operands[0]
    t = find_hero_matching(hero, lambda n: tiled_transpose(n) is not None, in_kernel, is_intermediate)
    if t is not None:
        return t
    c = find_hero_matching(hero, lambda n: n.opcode == "concatenate", in_kernel, is_intermediate)
    if c is not None:
        return c
    if hero.opcode != "reduce":
        return root
    return hero


def is_real_reduction_hero(root, hero, warp: int = WARP_SIZE) -> bool:
    """XLA's `IsRealReductionHero`: a tiled reduce that is the root, or race-free."""
    if not is_contiguous_reduction(hero, warp):
        return False
    if root is hero:
        return True
    is_row, dims = reduction_dimensions(hero)
    return reduction_is_race_free(is_row, dims, warp)


_REDUCE = frozenset({"reduce"})


def is_input_fusible_reduction(instr, warp: int = WARP_SIZE) -> bool:
    """XLA's `IsInputFusibleReduction`: a tiled reduce, or a fusion with a tiled-reduction root."""
    if instr.opcode == "fusion" and instr.fused_computation is not None:
        if not select_in_body(instr.fused_computation, _REDUCE):
            # (a real reduction hero is a reduce of the body: no hero walks through a body without one,
            # which `select_in_body` tells from the body's growths)
            return False
        return any(is_real_reduction_hero(r, find_hero(r, instr), warp) for r in fused_roots(instr))
    return is_contiguous_reduction(instr, warp)


@dataclass(frozen=True, slots=True)
class TransposeDescription:
    """A physical transpose, normalized: output dims (major to minor) and, for each,
    the index of the input dimension it comes from."""

    dimensions: tuple[int, ...]
    permutation: tuple[int, ...]
    element_bytes: int

    @property
    def input_dimensions(self) -> tuple[int, ...]:
        inv = [0] * len(self.permutation)
        for i, p in enumerate(self.permutation):
            inv[p] = i
        return tuple(self.dimensions[inv[j]] for j in range(len(self.permutation)))


def normalized_transpose(instr) -> TransposeDescription | None:
    """The physical transpose a `transpose` or layout-changing `copy` does, with unit
    dimensions dropped and runs of dimensions that stay together merged; None when it
    moves no data (a bitcast)."""
    if instr.opcode not in ("transpose", "copy") or not instr.operands:
        return None
    src, dst = instr.operands[0].shape, instr.shape
    if src.element_type in ("tuple", "token") or len(src.dims) != len(dst.dims):
        return None
    perm = _dimensions(instr) if instr.opcode == "transpose" else tuple(range(len(dst.dims)))
    if len(perm) != len(dst.dims):
        return None
    in_major = list(reversed(src.minor_to_major))
    in_pos = {d: i for i, d in enumerate(in_major)}
    out_major = [d for d in reversed(dst.minor_to_major) if dst.dims[d] != 1]
    phys = [in_pos[perm[d]] for d in out_major]
    sizes = [dst.dims[d] for d in out_major]
    if not phys:
        return None
    # Rank the input positions densely, then merge runs of output dimensions that
    # are also adjacent, in the same order, in the input.
    rank = {p: i for i, p in enumerate(sorted(phys))}
    phys = [rank[p] for p in phys]
    groups: list[list[int]] = [[phys[0], sizes[0]]]
    for p, s in zip(phys[1:], sizes[1:]):
        if p == groups[-1][0] + 1:
            groups[-1][0] = p
            groups[-1][1] *= s
        else:
            groups.append([p, s])
    rank = {p: i for i, p in enumerate(sorted(g[0] for g in groups))}
    perm_out = tuple(rank[g[0]] for g in groups)
    if list(perm_out) == sorted(perm_out):
        return None
    return TransposeDescription(tuple(g[1] for g in groups), perm_out, max((src.element_bits + 7) // 8, 1))


def tiled_transpose(instr) -> TransposeDescription | None:
    """XLA's `GetDescriptionForTiledTransposeEmitter` (the shared-memory transpose emitter)."""
    tr = normalized_transpose(instr)
    if tr is None:
        return None
    dims, perm = tr.dimensions, tr.permutation
    in_dims = tr.input_dimensions
    if len(dims) < 2:
        return None
    if perm[-1] == len(dims) - 1:
        operand_minor = in_dims[-2]
        width = tr.element_bytes * dims[-1]
        if width <= MAX_BYTES_IN_MOST_MINOR_DIM and width * min(operand_minor, dims[-2]) >= MIN_DIM_TO_TRANSPOSE_TILED:
            return tr
        return None
    operand_minor = in_dims[-1]
    if (operand_minor >= MIN_DIM_TO_TRANSPOSE_TILED and dims[-1] >= MIN_DIM_TO_TRANSPOSE_TILED) or (
        operand_minor >= MIN_DIM_TO_TRANSPOSE_TILED2
        and dims[-1] >= MIN_DIM_TO_TRANSPOSE_TILED2
        and operand_minor * dims[-1] >= MIN_TOTAL_DIMS_TO_TRANSPOSE_TILED
    ):
        return tr
    return None


def _custom_kind(kernel) -> str:
    kind = fusion_backend_kind(kernel)
    if kind.startswith("__triton"):
        return "triton"
    if "cudnn" in kind:
        return "cudnn"
    return "custom"


def emitter_kind(kernel, warp: int = WARP_SIZE) -> tuple[str, list, list]:
    """(emitter, roots, heroes) for `kernel`, after `HloFusionAnalysis::GetEmitterFusionKind`.

    **Arguments:** a fusion, or a lone instruction (taken as a fusion of one);
    `warp`: the device's warp size. **Returns:** the emitter (`"loop"`,
    `"reduction"`, `"transpose"`, `"concatenate"`, `"scatter"`, `"sort"`,
    `"dynamic-update-slice"`, `"library"`, `"custom"`, `"triton"`, `"cudnn"`),
    the kernel's roots and their heroes.
    """
    if kernel.opcode == "fusion":
        if kernel.fused_computation is None:
            return "custom", [kernel], [kernel]
        if kernel.fusion_kind == "kCustom":
            return _custom_kind(kernel), fused_roots(kernel), fused_roots(kernel)
    elif kernel.opcode in LIBRARY_OPCODES:
        return "library", [kernel], [kernel]
    roots = fused_roots(kernel)
    heroes = [find_hero(r, kernel) for r in roots]

    reduce_hero = None
    for r, h in zip(roots, heroes):
        if is_real_reduction_hero(r, h, warp):
            reduce_hero = h
            break
    if reduce_hero is not None:
        want = reduction_dimensions(reduce_hero)
        n_in = elements(reduce_hero.operands[0].shape)
        ok = True
        for r, h in zip(roots, heroes):
            if is_real_reduction_hero(r, h, warp):
                ok = ok and reduction_dimensions(h) == want
            else:
                ok = ok and elements_recursive(r.shape) == n_in
        if ok:
            return "reduction", roots, heroes

    descs = [tiled_transpose(h) for h in heroes]
    first = next((d for d in descs if d is not None), None)
    if first is not None:
        ok = all(
            (d is not None and d.dimensions == first.dimensions and d.permutation == first.permutation)
            or (d is None and elements_recursive(r.shape) == math.prod(first.dimensions))
            for d, r in zip(descs, roots)
        )
        if ok:
            return "transpose", roots, heroes

    if len(roots) > 1:
        return "loop", roots, heroes
    root, hero = roots[0], heroes[0]
    if root.opcode == "scatter":
        return "scatter", roots, heroes
    if root.opcode == "sort":
        return "sort", roots, heroes
    if hero.opcode == "concatenate" and len(hero.operands) <= 4 and not hero.shape.element_type == "tuple":
        return "concatenate", roots, heroes
    if root.opcode == "dynamic-update-slice":
        return "dynamic-update-slice", roots, heroes
    return "loop", roots, heroes


# ===========================================================================
# As the fusion pass sees a kernel (see the module docstring for how it differs)


def fusion_pass_is_intermediate(instr, allowed_operands: int = 1) -> bool:
    """`IsIntermediate` as the pass asks it: elementwise (`is_elementwise`; layout-keeping copies
    only) or bitcast-like with unit dimensions ignored, with 1..N operands."""
    n = len(instr.operands)
    if n == 0 or n > allowed_operands:
        return False
    if is_elementwise(instr):
        if instr.opcode == "copy":
            return instr.shape == instr.operands[0].shape
        return True
    op = instr.opcode
    if op == "bitcast":
        return True
    if op == "reshape":
        return reshape_is_bitcast(instr.operands[0].shape, instr.shape, ignore_unit_dims=True)
    if op == "transpose":
        return transpose_is_bitcast(instr.operands[0].shape, instr.shape, _dimensions(instr), ignore_unit_dims=True)
    return False


def fusion_pass_is_tiled_transpose(instr) -> bool:
    """Whether `instr` is a transpose (or copy) the shared-memory transpose emitter would tile:
    `tiled_transpose` (XLA's `GetDescriptionForTiledTransposeEmitter`, after unit dimensions are
    dropped and dimensions that stay together merged), which the fusion pass's analysis asks too."""
    return tiled_transpose(instr) is not None


def fusion_pass_roots(comp) -> list:
    """A fused computation's roots, get-tuple-elements stripped, each once."""
    root = comp.root
    if root.opcode == "tuple":
        out: list = []
        for o in root.operands:
            while o.opcode == "get-tuple-element" and o.operands:
                o = o.operands[0]
            if o not in out:
                out.append(o)
        return out
    return [root]


def fusion_pass_find_hero(root, inside, transposes: bool = True, concats: bool = True):
    """`FindNonTrivialHero` as the pass asks it.

    `transposes` / `concats`: False when the kernel has none (skips the searches).
    """
    hero = root
    while fusion_pass_is_intermediate(hero, 1) and inside(hero.operands[0]):
        hero = hero.operands[0]
    if transposes:
        found = find_hero_matching(hero, fusion_pass_is_tiled_transpose, inside, fusion_pass_is_intermediate)
        if found is not None:
            return found
    if concats:
        found = find_hero_matching(hero, lambda n: n.opcode == "concatenate", inside, fusion_pass_is_intermediate)
        if found is not None:
            return found
    return hero if hero.opcode == "reduce" else root


def fusion_pass_is_real_reduction_hero(root, hero) -> bool:
    """`IsRealReductionHero` as the pass asks it: a tiled reduce that is the root, or reaches it
    alone (one user) and race-free."""
    if hero.opcode != "reduce" or not is_contiguous_reduction(hero):
        return False
    return hero is root or (len(hero.users) == 1 and reduction_is_race_free(*reduction_dimensions(hero)))


def fusion_pass_emitter_kind(kernel, transposes: bool = True, concats: bool = True) -> str:
    """The emitter XLA's GPU backend would use for `kernel` as the pass decides it (`ChooseKind`).

    **Arguments:** a fusion, or any instruction (taken as a fusion of one);
    `transposes` / `concats`: False when the kernel is known to have no tiled
    transpose / concatenate (saves searching for heroes it lacks).
    **Returns:** "reduction", "transpose", "loop", "scatter", "sort" or "concatenate".
    """
    fused = kernel.fused_computation
    if fused is not None:
        roots = fusion_pass_roots(fused)

        def inside(x):
            return x.computation is fused and x.opcode != "parameter"

    else:
        roots = [kernel]

        def inside(x):
            return x is kernel

    heroes = [fusion_pass_find_hero(r, inside, transposes, concats) for r in roots]
    for r, h in zip(roots, heroes):
        if fusion_pass_is_real_reduction_hero(r, h):
            return "reduction"
    for h in heroes:
        if fusion_pass_is_tiled_transpose(h):
            return "transpose"
    if len(roots) > 1:
        return "loop"
    root = roots[0]
    if root.opcode == "scatter":
        return "scatter"
    if root.opcode == "sort":
        return "sort"
    if heroes[0].opcode == "concatenate" and len(heroes[0].operands) <= 4:
        return "concatenate"
    return "loop"


#: The fusion kind XLA's `ChooseKind` writes for each emitter the pass tells apart.
FUSION_KIND = {
    "loop": "kLoop",
    "reduction": "kInput",
    "transpose": "kInput",
    "concatenate": "kInput",
    "scatter": "kInput",
    "sort": "kInput",
}


# ===========================================================================
# What pricing a fused pair needs from each side (the models' pair pricer)


def most_minor_non_trivial(shape) -> tuple[int, int]:
    """`(the most minor dimension of extent > 1, its position in minor_to_major)`; -1 if none."""
    pos = 0
    for d in shape.minor_to_major:
        if shape.dims[d] > 1:
            return d, pos
        pos += 1
    return -1, pos


def strided_minor_slice(slice_instr) -> bool:
    """A slice that strides along the most minor dimension of extent > 1 (its reads are not coalesced)."""
    src = slice_instr.operands[0].shape
    spec = slice_instr.attribute("slice", ())
    d, _ = most_minor_non_trivial(src)
    if d < 0 or d >= len(spec):
        return False
    entry = spec[d]
    return len(entry) > 2 and entry[2] > 1


class LaunchFacts(NamedTuple):
    """What a fused pair's launch grid and coalescing need from one side of it, without building
    the fusion (see `models._launch.fused_loop_launch`).

    `special`: a reduce, concatenate or tiled transpose is in it (it could become the fused
    kernel's hero); `access`: a gather or a slice strided along the minor dimension is in it
    (the per-operand access rule of `models._coalescing` could apply);
    `no_vectorize`: something in it may prevent the loop emitter's vectorization;
    `exposed`: one of those special ops is reachable from a root through intermediate ops
    (`is_intermediate`, up to 3 operands), so that the hero search of a kernel it is fused
    into could reach it (`find_hero`); False when `special` is.
    """

    special: bool
    access: bool
    no_vectorize: bool
    exposed: bool = True


MAX_CONCAT_OPERANDS_FOR_UNROLLING = 10


_MAY_PREVENT_VECTORIZATION = frozenset({"dot", "sort", "concatenate", "reduce", "reduce-window"})
_LAUNCH_FACT_OPCODES = frozenset({"reduce", "concatenate", "transpose", "copy", "gather", "slice"})


def may_prevent_vectorization(kernel) -> bool:
    """XLA's `MayPreventVectorization`: dots, sorts, long concatenates, variadic reduces, large windows."""
    comp = kernel.fused_computation if kernel.opcode == "fusion" else None
    instrs = select_in_body(comp, _MAY_PREVENT_VECTORIZATION) if comp is not None else [kernel]
    for h in instrs:
        op = h.opcode
        if op in ("dot", "sort"):
            return True
        if op == "concatenate" and len(h.operands) > MAX_CONCAT_OPERANDS_FOR_UNROLLING:
            return True
        if op == "reduce" and h.shape.element_type == "tuple" and len(h.shape.tuple_shapes) > 1:
            return True
        if op == "reduce-window":
            window = h.attribute("window", None)
            if window is not None and math.prod(d.size for d in window.dimensions) > 8:
                return True
    return False


def launch_facts(instr) -> LaunchFacts:
    """`instr`'s `LaunchFacts`."""
    comp = instr.fused_computation if instr.opcode == "fusion" else None
    if instr.opcode == "fusion" and comp is None:
        return LaunchFacts(True, True, True, True)
    special = access = False
    for h in select_in_body(comp, _LAUNCH_FACT_OPCODES) if comp is not None else (instr,):
        if _is_special(h):
            special = True
        elif h.opcode == "gather" or (h.opcode == "slice" and strided_minor_slice(h)):
            access = True
    # A lone instruction is its own root: special, it is exposed.
    exposed = special and (comp is None or hero_search_reach(comp)[0])
    return LaunchFacts(special, access, may_prevent_vectorization(instr), exposed)


def _is_special(h) -> bool:
    """A reduce, concatenate or tiled transpose: an op that could become a fused kernel's hero."""
    op = h.opcode
    return op == "reduce" or op == "concatenate" or (op in ("transpose", "copy") and tiled_transpose(h) is not None)


def hero_search_reach(comp) -> tuple[bool, frozenset]:
    """What `find_hero`'s two walks could reach in fused body `comp`, in `comp` or in a kernel it is part of:
    `(special, parameters)`, whether a special op (a reduce, concatenate or tiled transpose) is reachable
    from its roots through intermediate ops (up to 3 operands), and the numbers of the parameters read by
    an op so reached (where a producer fused into `comp` would take over). The walks enter a body at its
    roots and go on only through intermediate ops; matching ops stop `find_hero_matching`, here they are
    looked through too, which can only reach more."""
    root = comp.root
    stack = list(root.operands) if root.opcode == "tuple" else [root]
    seen = {id(h) for h in stack}
    special = False
    params = set()
    while stack:
        node = stack.pop()
        if node.opcode == "parameter":
            params.add(node.parameter_number)
            continue
        if not special and _is_special(node):
            special = True
        if not is_intermediate(node, 3):
            continue
        for o in node.operands:
            if id(o) not in seen:
                seen.add(id(o))
                stack.append(o)
    return special, frozenset(params)