"""Which XLA:GPU emitter a kernel gets, and its launch dimensions.

Follows `HloFusionAnalysis::GetEmitterFusionKind` and the emitters' own
`launch_dimensions()` (loop with unrolling, row / multi-row / column / small
column reductions, the shared-memory transpose, concatenate, scatter, in-place
dynamic-update-slice), with XLA's fallback of 128 threads per block and one
thread per output element for everything else (library calls, custom fusions).

A kernel is a `fusion` instruction or a lone instruction, which XLA analyses
as a fusion of one instruction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._kernel_costs import (
    IS_ELEMENTWISE,
    LIBRARY_OPCODES,
    _attr_tuple,
    array_leaves,
    element_bits,
    elements,
    elements_recursive,
    first_array,
    reshape_is_bitcast,
    transpose_is_bitcast,
)

# XLA constants (ir_emission_utils.h, reduction_utils.h, transpose.cc, launch_dimensions.cc)
MIN_DIM_TO_TRANSPOSE_TILED = 16
MIN_DIM_TO_TRANSPOSE_TILED2 = 8
MIN_TOTAL_DIMS_TO_TRANSPOSE_TILED = 64 * 128
MAX_BYTES_IN_MOST_MINOR_DIM = 8
TRANSPOSE_TILE = 32
TRANSPOSE_ROWS = 8
MIN_THREADS_X_ROW_REDUCTION = 1024
BATCHED_REDUCTION_RACE_FREE_BOUND = 8
ROW_REDUCTION_TILE_X = 16
COLUMN_REDUCTION_TILE_Y = 128
THREADS_PER_BLOCK_TARGET = 256
WARP_SCHEDULERS = 4
FALLBACK_THREADS = 128
MAX_CONCAT_OPERANDS_FOR_UNROLLING = 10


@dataclass(frozen=True, slots=True)
class LaunchDimensions:
    """The emitter XLA would use for a kernel and its grid.

    **Attributes:** `emitter` (`"loop"`, `"reduction"`, `"transpose"`,
    `"concatenate"`, `"scatter"`, `"dynamic-update-slice"`, `"sort"`,
    `"library"`, `"custom"`, `"triton"`, `"cudnn"`), `num_blocks`,
    `threads_per_block`, `unroll` (loop emitter), `hero` (the name of the
    instruction that decided the emitter), `detail` (e.g. the reduction shape).
    """

    emitter: str
    num_blocks: int
    threads_per_block: int
    unroll: int = 1
    hero: str = ""
    detail: str = ""


def _warp(device) -> int:
    return device.warp_size or 32


def _ceil(a: int, b: int) -> int:
    return -(-a // b) if b else 0


def _round_up(a: int, b: int) -> int:
    return _ceil(a, b) * b


# ---------------------------------------------------------------------------
# Roots and heroes


def fused_roots(kernel) -> list:
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
        return reshape_is_bitcast(instr)
    if op == "transpose":
        return transpose_is_bitcast(instr)
    return False


def _find_hero_matching(start, predicate, in_kernel, intermediate=is_intermediate):
    """XLA's `FindNonTrivialHero(root, predicate)`: one matching op reachable through
    intermediate ops (up to 3 operands), with only intermediate ops between it and the root.

    `intermediate`: the `IsIntermediate` test to walk through (the fusion
    simulator passes its own, see `fusion._legality.is_intermediate`).
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
    t = _find_hero_matching(hero, lambda n: tiled_transpose(n) is not None, in_kernel)
    if t is not None:
        return t
    c = _find_hero_matching(hero, lambda n: n.opcode == "concatenate", in_kernel)
    if c is not None:
        return c
    if hero.opcode != "reduce":
        return root
    return hero


# ---------------------------------------------------------------------------
# Reductions (reduction_utils.cc)


def _consecutive(shape, dims) -> bool:
    if not dims:
        return True
    pos = {d: i for i, d in enumerate(shape.minor_to_major)}
    ps = sorted(pos[d] for d in dims)
    return ps[-1] - ps[0] + 1 == len(ps)


def _partition(shape, middle) -> list[int]:
    """`PartitionShapeByMiddleDimensions`: [major, middle, minor] sizes."""
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
    reduced = set(_attr_tuple(reduce, "dimensions"))
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


def _faster_than_elemental(is_row: bool, dims, warp: int) -> bool:
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


def is_contiguous_reduction(instr, device) -> bool:
    """XLA's `IsReductionFromOrToContiguousDimensions`."""
    if instr.opcode != "reduce":
        return False
    shape = instr.operands[0].shape
    reduced = set(_attr_tuple(instr, "dimensions"))
    keep = [d for d in range(len(shape.dims)) if d not in reduced]
    if not (_consecutive(shape, keep) or _consecutive(shape, sorted(reduced))):
        return False
    is_row, dims = reduction_dimensions(instr)
    return _faster_than_elemental(is_row, dims, _warp(device))


def reduction_is_race_free(is_row: bool, dims, device) -> bool:
    if is_row:
        return dims[2] <= MIN_THREADS_X_ROW_REDUCTION * ROW_REDUCTION_TILE_X and dims[0] <= BATCHED_REDUCTION_RACE_FREE_BOUND
    return dims[1] <= _warp(device) * COLUMN_REDUCTION_TILE_Y


def is_real_reduction_hero(root, hero, device) -> bool:
    if not is_contiguous_reduction(hero, device):
        return False
    if root is hero:
        return True
    is_row, dims = reduction_dimensions(hero)
    return reduction_is_race_free(is_row, dims, device)


def is_input_fusible_reduction(instr, device) -> bool:
    """XLA's `IsInputFusibleReduction`: a tiled reduce, or a fusion with a tiled-reduction root."""
    if instr.opcode == "fusion" and instr.fused_computation is not None:
        return any(is_real_reduction_hero(r, find_hero(r, instr), device) for r in fused_roots(instr))
    return is_contiguous_reduction(instr, device)


# ---------------------------------------------------------------------------
# Transposes


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
    perm = _attr_tuple(instr, "dimensions") if instr.opcode == "transpose" else tuple(range(len(dst.dims)))
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


# ---------------------------------------------------------------------------
# Emitter kind


def _custom_kind(kernel) -> str:
    cfg = kernel.attribute("backend_config", None) if kernel.has_attribute("backend_config") else None
    kind = ""
    if isinstance(cfg, dict):
        fc = cfg.get("fusion_backend_config") or cfg.get("fusion_config") or {}
        if isinstance(fc, dict):
            kind = str(fc.get("kind", ""))
    if kind.startswith("__triton"):
        return "triton"
    if "cudnn" in kind:
        return "cudnn"
    return "custom"


def emitter_kind(kernel, device) -> tuple[str, list, list]:
    """(emitter, roots, heroes) for `kernel`, after `HloFusionAnalysis::GetEmitterFusionKind`."""
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
        if is_real_reduction_hero(r, h, device):
            reduce_hero = h
            break
    if reduce_hero is not None:
        want = reduction_dimensions(reduce_hero)
        n_in = elements(reduce_hero.operands[0].shape)
        ok = True
        for r, h in zip(roots, heroes):
            if is_real_reduction_hero(r, h, device):
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


# ---------------------------------------------------------------------------
# Launch dimensions


def _calculate(num_elements: int, unroll: int, device) -> tuple[int, int]:
    """XLA's `CalculateLaunchDimensions`: (blocks, threads per block)."""
    if num_elements <= 1:
        return 1, 1
    n = _ceil(num_elements, max(unroll, 1))
    threads = min(_warp(device) * WARP_SCHEDULERS, n)
    return _ceil(n, threads), threads


def _may_prevent_vectorization(kernel) -> bool:
    comp = kernel.fused_computation if kernel.opcode == "fusion" else None
    instrs = comp.instructions if comp is not None else [kernel]
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


def _smallest_output_bits(roots) -> int:
    bits = [element_bits(leaf) for r in roots for _, leaf in array_leaves(r.shape)]
    return min(bits) if bits else 32


def _smallest_input_bits(kernel) -> int | None:
    bits = [element_bits(leaf) for o in kernel.operands for _, leaf in array_leaves(o.shape)]
    return min(bits) if bits else None


def loop_launch(kernel, roots, device, shape=None, max_unroll: int = 4,
                may_prevent_vectorization: bool | None = None) -> tuple[int, int, int]:
    """`ComputeLoopFusionConfig` + `CalculateLaunchDimensions`: (blocks, threads, unroll).

    `may_prevent_vectorization`: `_may_prevent_vectorization(kernel)` when already
    known (`kernel` is then not looked at).
    """
    if shape is None:
        shape = first_array(roots[0].shape)
    n = elements(shape)
    unroll = 1
    if n >= device.threads_per_core_limit * device.core_count and not (
        _may_prevent_vectorization(kernel) if may_prevent_vectorization is None else may_prevent_vectorization
    ):
        f = max_unroll
        while f > 1 and n % f:
            f //= 2
        unroll = max(f, 1)
    unroll = max(unroll, _ceil(8, _smallest_output_bits(roots)))
    blocks, threads = _calculate(n, unroll, device)
    return blocks, threads, unroll


def _reduction_vector_size(kernel, minor: int, threads: int) -> int:
    """`GetVectorSizeForMlir`."""
    if minor % 2 or threads * 2 > minor:
        return 1
    for o in kernel.operands:
        if first_array(o.shape).element_type in ("c64", "c128"):
            return 1
    bits = _smallest_input_bits(kernel)
    if bits is None or bits >= 32:
        return 2
    if threads * 4 > minor:
        return 2
    return 4 if minor % 4 == 0 else 2


def reduction_launch(kernel, roots, hero, device) -> tuple[int, int, str]:
    """(blocks, threads, description) of XLA's reduction emitters."""
    is_row, dims = reduction_dimensions(hero)
    warp = _warp(device)
    d0, d1, d2 = dims
    if is_row:
        mr = _multirow(kernel, roots, dims, device)
        if mr is not None:
            return mr
        threads_reduced = min(MIN_THREADS_X_ROW_REDUCTION, _round_up(_ceil(d2, ROW_REDUCTION_TILE_X), warp))
        threads_kept = 1
        if threads_reduced * 2 <= THREADS_PER_BLOCK_TARGET:
            threads_kept = d1 if d1 * threads_reduced <= THREADS_PER_BLOCK_TARGET else THREADS_PER_BLOCK_TARGET // threads_reduced
        vec = _reduction_vector_size(kernel, d2, threads_reduced)
        minor_vec = max(d2 // vec, 1)
        tile = min(ROW_REDUCTION_TILE_X // vec, _ceil(minor_vec, threads_reduced))
        blocks = _ceil(d1, threads_kept) * _ceil(minor_vec, max(tile, 1) * threads_reduced)
        return blocks, threads_kept * threads_reduced, f"row reduction {list(dims)}"
    if d2 and warp % d2 == 0:
        vec = _reduction_vector_size(kernel, d1 * d2, TRANSPOSE_TILE)
        threads = 128
        shared_rows = vec * threads // d2
        while shared_rows > TRANSPOSE_TILE and vec > 1:
            vec //= 2
            shared_rows //= 2
        if shared_rows > TRANSPOSE_TILE:
            threads //= shared_rows // TRANSPOSE_TILE
        return max(d0, 1), threads, f"small column reduction {list(dims)}"
    vec = _reduction_vector_size(kernel, d2, TRANSPOSE_TILE)
    blocks = max(d0, 1) * _ceil(d2, TRANSPOSE_TILE * vec)
    return blocks, TRANSPOSE_TILE * TRANSPOSE_TILE, f"column reduction {list(dims)}"


def _multirow(kernel, roots, dims, device):
    d0, d1, d2 = dims
    if d2 <= 0 or d2 & (d2 - 1):
        return None
    out_bits = _smallest_output_bits(roots)
    in_bits = _smallest_input_bits(kernel)
    smallest = min(out_bits, in_bits) if in_bits is not None else out_bits
    largest = max(out_bits, in_bits) if in_bits is not None else out_bits
    vec = min(d2, 64 // max(smallest, 1))
    if largest >= 32:
        vec = min(128 // largest, vec)
    vec = max(vec, 1)
    warp = _warp(device)
    if d2 > warp * vec:
        return None

    def threads_for(v):
        reduced = d2 // v
        kept = d1 if d1 * reduced <= THREADS_PER_BLOCK_TARGET else max(THREADS_PER_BLOCK_TARGET // reduced, 1)
        return kept, reduced

    while vec > 1 and _ceil(d1, threads_for(vec)[0]) < device.core_count:
        vec //= 2
    if d2 > warp * vec:
        return None
    kept, reduced = threads_for(vec)
    return _ceil(d1, kept), kept * reduced, f"multi-row reduction {list(dims)}"


def transpose_launch(tr: TransposeDescription, device) -> tuple[int, int]:
    """XLA's `TransposeFusion` launch: tiles of 32 (x vector) and 8 x 32 threads."""
    in_shape = list(tr.input_dimensions)
    perm = tr.permutation
    r = len(in_shape)
    minor_unchanged = perm[-1] == r - 1
    size = tr.element_bytes * (in_shape[-1] if minor_unchanged else 1)
    shmem = TRANSPOSE_TILE * (TRANSPOSE_TILE + 1) * size

    def counts_for(v):
        bs = [1] * r
        if minor_unchanged:
            bs[-1] = v
            bs[-2] = TRANSPOSE_TILE
            bs[perm[-2]] = TRANSPOSE_TILE
        else:
            b = TRANSPOSE_TILE * v
            bs[-1] = b
            bs[perm[-1]] = b
        return [_ceil(in_shape[i], bs[i]) for i in range(r)]

    threads = TRANSPOSE_ROWS * TRANSPOSE_TILE
    if minor_unchanged:
        counts = counts_for(in_shape[-1])
    else:
        counts = counts_for(1)
        vec = 16 // max(size, 1)
        while vec > 1:
            elems = vec * vec
            enough_work = math.prod(counts) * threads >= elems * device.core_count * device.threads_per_core_limit
            enough_shmem = shmem * elems <= (device.shared_memory_per_block_bytes or 48 * 1024)
            aligned = in_shape[-1] % vec == 0 and in_shape[perm[-1]] % vec == 0
            if enough_work and enough_shmem and aligned:
                counts = counts_for(vec)
                break
            vec //= 2
    return max(math.prod(counts), 1), threads


def fallback_launch(roots) -> tuple[int, int]:
    """XLA's fallback: 128 threads per block, one thread per element of root 0."""
    n = elements_recursive(roots[0].shape)
    return max(_ceil(n, FALLBACK_THREADS), 1), FALLBACK_THREADS


def _loop_fusion_roots(kernel) -> list | None:
    """The roots of a fusion that `emitter_kind` certainly gives the loop emitter, found
    without looking for heroes; None when that takes the full analysis.

    With no reduce, concatenate or tiled transpose in the body, every root is its own
    hero, so only a single scatter, sort or dynamic-update-slice root picks another emitter.
    """
    if kernel.opcode != "fusion":
        return None
    comp = kernel.fused_computation
    if comp is None or kernel.fusion_kind == "kCustom":
        return None
    for h in comp.instructions:
        op = h.opcode
        if op == "reduce" or op == "concatenate":
            return None
        if (op == "transpose" or op == "copy") and tiled_transpose(h) is not None:
            return None
    roots = fused_roots(kernel)
    if not roots or (len(roots) == 1 and roots[0].opcode in ("scatter", "sort", "dynamic-update-slice")):
        return None
    return roots


def launch_dimensions(kernel, device, *, max_unroll: int = 4) -> LaunchDimensions:
    """The emitter XLA:GPU would pick for `kernel` and its launch grid.

    **Arguments:** `kernel` (a fusion, or a lone instruction); `device` (a GPU
    `DeviceSpec`); `max_unroll` (XLA's `MaxUnrollFactor`, 4).

    **Returns:** `LaunchDimensions`.
    """
    roots = _loop_fusion_roots(kernel)
    if roots is not None:
        blocks, threads, unroll = loop_launch(kernel, roots, device, max_unroll=max_unroll)
        return LaunchDimensions("loop", blocks, threads, unroll, roots[0].name)
    kind, roots, heroes = emitter_kind(kernel, device)
    if kind == "loop":
        blocks, threads, unroll = loop_launch(kernel, roots, device, max_unroll=max_unroll)
        return LaunchDimensions(kind, blocks, threads, unroll, roots[0].name)
    if kind == "reduction":
        hero = next(h for r, h in zip(roots, heroes) if is_real_reduction_hero(r, h, device))
        blocks, threads, detail = reduction_launch(kernel, roots, hero, device)
        return LaunchDimensions(kind, blocks, threads, 1, hero.name, detail)
    if kind == "transpose":
        hero = next(h for h in heroes if tiled_transpose(h) is not None)
        tr = tiled_transpose(hero)
        blocks, threads = transpose_launch(tr, device)
        return LaunchDimensions(kind, blocks, threads, 1, hero.name, f"transpose {list(tr.dimensions)} perm {list(tr.permutation)}")
    if kind == "concatenate":
        hero = heroes[0]
        largest = max((first_array(o.shape) for o in hero.operands), key=elements)
        blocks, threads, unroll = loop_launch(kernel, roots, device, shape=largest, max_unroll=max_unroll)
        return LaunchDimensions(kind, blocks, threads, unroll, hero.name)
    if kind == "scatter":
        scatter = roots[0]
        n = (len(scatter.operands) - 1) // 2
        upd = first_array(scatter.operands[n + 1].shape) if n >= 1 else first_array(scatter.shape)
        blocks, threads = _calculate(elements(upd), 1, device)
        return LaunchDimensions(kind, blocks, threads, 1, scatter.name)
    if kind == "dynamic-update-slice":
        upd = first_array(roots[0].operands[1].shape)
        blocks, threads = _calculate(elements(upd), 1, device)
        return LaunchDimensions(kind, blocks, threads, 1, roots[0].name)
    blocks, threads = fallback_launch(roots)
    return LaunchDimensions(kind, blocks, threads, 1, heroes[0].name if heroes else "")
