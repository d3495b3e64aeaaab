"""The launch dimensions of a kernel under the XLA:GPU emitter it gets.

The emitter is `analysis._emission.emitter_kind`'s (XLA's
`HloFusionAnalysis::GetEmitterFusionKind`); the grid follows the emitters' own
`launch_dimensions()` (loop with unrolling, row / multi-row / column / small
column reductions, the shared-memory and packed transposes, concatenate, the
two scatter emitters, in-place dynamic-update-slice, the bitonic sort's tiled
kernel, XLA's TopK custom kernel), a Triton fusion's grid from the tiling its
backend config names (one block per output tile, 32 x `num_warps` threads),
with XLA's fallback of 128 threads per block and one thread per output element
for everything else (library calls, custom fusions, Triton fusions without a
config).

Checked kernel by kernel against the grids in XLA:GPU's own thunk sequence
(`fusion._launch_conformance`, `scripts/fusion_conformance.py --grids`).

A kernel is a `fusion` instruction or a lone instruction, which XLA analyses
as a fusion of one instruction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..analysis.emission import (
    MIN_THREADS_X_ROW_REDUCTION,
    LaunchFacts,
    ROW_REDUCTION_TILE_X,
    TransposeDescription,
    emitter_kind,
    fused_roots,
    hero_search_reach,
    is_intermediate,
    is_real_reduction_hero,
    may_prevent_vectorization,
    reduction_dimensions,
    tiled_transpose,
    warp_size,
)
from ..analysis.library import custom_call_target, real_outputs
from ..analysis.shapes import array_leaves, element_bits, elements, elements_recursive, first_array
from ..analysis.sort import bitonic_plan
from ..analysis.tiling import TilingError, configured_tiling, dims_of, propagate
from ..fusion_engine import select_in_body

# XLA constants (transpose.cc, reduction_utils.h, launch_dimensions.cc); the emitter facts'
# own (tiled transposes, race-free reductions) are in `analysis._emission`.
TRANSPOSE_TILE = 32
# The MLIR transpose emitter XLA:GPU runs today (emitters/transpose.cc): 4 rows of 32 threads
# per block (128), and vectorized loads of at most 4 bytes. The 8-row, 16-byte constants are an
# older revision's; XLA's own thunk sequence (fusion._launch_conformance) launches 128 threads.
TRANSPOSE_ROWS = 4
TRANSPOSE_MAX_VECTOR_BYTES = 4
THREADS_PER_BLOCK_TARGET = 256
WARP_SCHEDULERS = 4
FALLBACK_THREADS = 128


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


def _ceil(a: int, b: int) -> int:
    return -(-a // b) if b else 0


def _round_up(a: int, b: int) -> int:
    return _ceil(a, b) * b


# ---------------------------------------------------------------------------
# Launch dimensions


def _calculate(num_elements: int, unroll: int, device) -> tuple[int, int]:
    """XLA's `CalculateLaunchDimensions`: (blocks, threads per block)."""
    if num_elements <= 1:
        return 1, 1
    n = _ceil(num_elements, max(unroll, 1))
    threads = min(warp_size(device) * WARP_SCHEDULERS, n)
    return _ceil(n, threads), threads


def _smallest_output_bits(roots) -> int:
    bits = [element_bits(leaf) for r in roots for _, leaf in array_leaves(r.shape)]
    return min(bits) if bits else 32


def input_facts(operands) -> tuple[int | None, bool]:
    """What a reduction's grid looks at in a kernel's operands (the same whatever their order or
    repeats): the smallest element width of their arrays (None when there is none), and whether one's
    first array is complex."""
    bits = [element_bits(leaf) for o in operands for _, leaf in array_leaves(o.shape)]
    complex_ = any(first_array(o.shape).element_type in ("c64", "c128") for o in operands)
    return (min(bits) if bits else None), complex_


def loop_launch(kernel, roots, device, shape=None, max_unroll: int = 4,
                no_vectorize: bool | None = None) -> tuple[int, int, int]:
    """`ComputeLoopFusionConfig` + `CalculateLaunchDimensions`: (blocks, threads, unroll).

    `no_vectorize`: `may_prevent_vectorization(kernel)` when already known
    (`kernel` is then not looked at).
    """
    if shape is None:
        shape = first_array(roots[0].shape)
    n = elements(shape)
    unroll = 1
    if n >= device.threads_per_core_limit * device.core_count and not (
        may_prevent_vectorization(kernel) if no_vectorize is None else no_vectorize
    ):
        f = max_unroll
        while f > 1 and n % f:
            f //= 2
        unroll = max(f, 1)
    unroll = max(unroll, _ceil(8, _smallest_output_bits(roots)))
    blocks, threads = _calculate(n, unroll, device)
    return blocks, threads, unroll


def _reduction_vector_size(inputs: tuple[int | None, bool], minor: int, threads: int) -> int:
    """`GetVectorSizeForMlir` (`inputs`: the kernel's `input_facts`)."""
    if minor % 2 or threads * 2 > minor:
        return 1
    bits, complex_ = inputs
    if complex_:
        return 1
    if bits is None or bits >= 32:
        return 2
    if threads * 4 > minor:
        return 2
    return 4 if minor % 4 == 0 else 2


def reduction_launch(kernel, roots, hero, device, inputs: tuple[int | None, bool] | None = None
                     ) -> tuple[int, int, str]:
    """(blocks, threads, description) of XLA's reduction emitters. The kernel itself is only looked at
    for its operands' `input_facts` (`inputs`, when already known: `kernel` is then not looked at)."""
    if inputs is None:
        inputs = input_facts(kernel.operands)
    is_row, dims = reduction_dimensions(hero)
    warp = warp_size(device)
    d0, d1, d2 = dims
    if is_row:
        mr = _multirow(inputs, roots, dims, device)
        if mr is not None:
            return mr
        threads_reduced = min(MIN_THREADS_X_ROW_REDUCTION, _round_up(_ceil(d2, ROW_REDUCTION_TILE_X), warp))
        threads_kept = 1
        if threads_reduced * 2 <= THREADS_PER_BLOCK_TARGET:
            threads_kept = d1 if d1 * threads_reduced <= THREADS_PER_BLOCK_TARGET else THREADS_PER_BLOCK_TARGET // threads_reduced
        vec = _reduction_vector_size(inputs, d2, threads_reduced)
        minor_vec = max(d2 // vec, 1)
        tile = min(ROW_REDUCTION_TILE_X // vec, _ceil(minor_vec, threads_reduced))
        blocks = _ceil(d1, threads_kept) * _ceil(minor_vec, max(tile, 1) * threads_reduced)
        return blocks, threads_kept * threads_reduced, f"row reduction {list(dims)}"
    if d2 and warp % d2 == 0:
        vec = _reduction_vector_size(inputs, d1 * d2, TRANSPOSE_TILE)
        threads = 128
        shared_rows = vec * threads // d2
        while shared_rows > TRANSPOSE_TILE and vec > 1:
            vec //= 2
            shared_rows //= 2
        if shared_rows > TRANSPOSE_TILE:
            threads //= shared_rows // TRANSPOSE_TILE
        return max(d0, 1), threads, f"small column reduction {list(dims)}"
    vec = _reduction_vector_size(inputs, d2, TRANSPOSE_TILE)
    blocks = max(d0, 1) * _ceil(d2, TRANSPOSE_TILE * vec)
    return blocks, TRANSPOSE_TILE * TRANSPOSE_TILE, f"column reduction {list(dims)}"


def _multirow(inputs, roots, dims, device):
    d0, d1, d2 = dims
    if d2 <= 0 or d2 & (d2 - 1):
        return None
    out_bits = _smallest_output_bits(roots)
    in_bits = inputs[0]
    smallest = min(out_bits, in_bits) if in_bits is not None else out_bits
    largest = max(out_bits, in_bits) if in_bits is not None else out_bits
    vec = min(d2, 64 // max(smallest, 1))
    if largest >= 32:
        vec = min(128 // largest, vec)
    vec = max(vec, 1)
    warp = warp_size(device)
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


SHMEM_BANKS = 32
SHMEM_BANK_BITS = 32


def packed_transpose_blocks(tr: TransposeDescription) -> int | None:
    """Blocks of XLA's `PackedTranspose` emitter (`GetPackedTransposeTileSizes`), which XLA:GPU
    picks over the plain transpose emitter for elements narrower than a shared-memory bank
    (4 bytes) when the tile fills enough of its (32 x vector)^2 shared-memory square; None when
    it does not apply.

    The normalized transpose is put in XLA's canonical form [..., T2, A, T1, B] (a unit B when
    the minor dimension moves, a unit A when none sits between the two swapped dimensions);
    T1, A and T2 are tiled up to the square's side, and the grid is one block per output tile.
    """
    bits = 8 * tr.element_bytes
    if bits >= SHMEM_BANK_BITS or bits <= 0:
        return None
    out = list(tr.dimensions)
    perm = list(tr.permutation)
    if perm[-1] != len(out) - 1:  # the minor dimension moves: a unit B after it
        perm.append(len(out))
        out.append(1)
    rank = len(out)
    if perm[rank - 3] != rank - 3:  # no A between the swapped dimensions: a unit one
        out.insert(rank - 2, 1)
        perm = [p + 1 if p > rank - 3 else p for p in perm]
        perm.insert(rank - 2, rank - 2)
        rank += 1
    inv = [0] * rank
    for i, p in enumerate(perm):
        inv[p] = i
    inp = [out[inv[i]] for i in range(rank)]
    t1_in, t2_in, a_id = rank - 2, perm[rank - 2], rank - 3
    t1_out, t2_out = inv[rank - 2], rank - 2
    dim_t1, dim_t2, dim_a, dim_b = inp[t1_in], inp[t2_in], out[a_id], out[rank - 1]
    vector = SHMEM_BANK_BITS // bits
    side = SHMEM_BANKS * vector
    tile_t1 = min(dim_t1, side)
    tile_a = min(dim_a, side // max(tile_t1, 1))
    tile_t2 = min(dim_t2, side)
    rows, cols = tile_t2, tile_a * tile_t1
    if cols < 10 * vector or rows < 10 * vector:
        return None
    if dim_b != 1 or rows % vector or cols % vector or (dim_t2 % tile_t2) % vector:
        return None
    tile = [1] * rank
    tile[t1_out], tile[t2_out], tile[a_id] = tile_t1, tile_t2, tile_a
    return math.prod(_ceil(d, t) for d, t in zip(out, tile))


def transpose_launch(tr: TransposeDescription, device) -> tuple[int, int]:
    """XLA's transpose emitters' launch: the packed transpose's grid for narrow elements where it
    applies (`packed_transpose_blocks`), else `TransposeFusion`'s tiles of 32 (x vector); 4 x 32
    threads either way."""
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
    packed = packed_transpose_blocks(tr)
    if packed is not None:
        return max(packed, 1), threads
    if minor_unchanged:
        counts = counts_for(in_shape[-1])
    else:
        counts = counts_for(1)
        vec = TRANSPOSE_MAX_VECTOR_BYTES // max(size, 1)
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


SCATTER_WARPS_PER_BLOCK = 4
SCATTER_MAX_VECTOR_BITS = 128


def _flag(instr, name: str) -> bool:
    return bool(instr.attribute(name, False))


def scatter_launch(kernel, roots, scatter, device, max_unroll: int = 4) -> tuple[int, int, str]:
    """XLA's `CreateScatterFusion` (emitters/scatter.cc): (blocks, threads, detail).

    Sorted, non-unique indices with more slices than 4 warps per SM can hold get the
    distributed-indices emitter (4 warps per block, several indices per warp); every other
    scatter distributes its updates like a loop over the first update operand, with the
    vector size the slice allows, and whole warps per block.
    """
    warp = warp_size(device)
    n = (len(scatter.operands) - 1) // 2
    indices = first_array(scatter.operands[n].shape)
    updates = first_array(scatter.operands[n + 1].shape)
    output = first_array(scatter.operands[0].shape)
    num_slices = indices.dims[0] if indices.dims else 1
    index_vector_length = indices.dims[1] if len(indices.dims) > 1 else 1
    slice_shape = list(updates.dims[1:])
    per_slice = math.prod(slice_shape)
    max_active_warps = SCATTER_WARPS_PER_BLOCK * device.core_count
    if _flag(scatter, "indices_are_sorted") and not _flag(scatter, "unique_indices") and num_slices > max_active_warps:
        valid = 1
        for i in range(index_vector_length):
            valid *= output.dims[i] - (slice_shape[i] if i < len(slice_shape) else 1) + 1
        per_warp = _ceil(num_slices, max(max_active_warps, valid))
        max_indices = SCATTER_MAX_VECTOR_BITS // max(element_bits(indices), 1)
        if index_vector_length == 1 and per_warp > max_indices:
            per_warp = _round_up(per_warp, max_indices)
        blocks = _ceil(num_slices, per_warp * SCATTER_WARPS_PER_BLOCK)
        return blocks, SCATTER_WARPS_PER_BLOCK * warp, f"scatter, distributed indices ({per_warp} per warp)"
    _, _, unroll = loop_launch(kernel, roots, device, shape=updates, max_unroll=max_unroll)
    vector = math.gcd(per_slice, unroll) if per_slice else 1
    blocks, threads = _calculate(elements(updates), vector, device)
    return blocks, _round_up(threads, warp), f"scatter, distributed updates (vector {vector})"




def sort_launch(sort, device) -> tuple[int, int, str]:
    """XLA's bitonic sort kernel (`llvm_ir::EmitSortInPlace`) for the masks below its
    shared-memory tile: (blocks, threads, detail).

    The plan of XLA's sort kernels has one home (`analysis._sort.bitonic_plan`: the tile is the
    sorted dimension rounded up to a power of two, capped by the block's thread limit x 4 and the
    shared memory one element of each operand takes; a block sorts a tile with tile/4 threads). A
    sort longer than its tile also runs one untiled kernel per larger mask; this is the launch of
    the tiled kernel, the one every sort of more than one element has.
    """
    plan = bitonic_plan(sort, device)
    tiled = next((k for k in plan.kernels if k.kind == "tiled"), None)
    if tiled is None:  # one element: XLA still launches the tiled kernel once per row
        return max(plan.batch, 1), 1, f"sort of {plan.n}: nothing to sort"
    dim = int(sort.attribute("dimensions", (0,))[0])
    return tiled.blocks, tiled.threads, f"sort of {plan.n} along dimension {dim}, tile {plan.tile}"


TOPK_TARGET = "__gpu$TopK"
TOPK_THREADS_PER_K = 512 * 16  # kEstimatedThreadsPerBlock x kMaxKValue
TOPK_MAX_THREADS = 1024


def topk_launch(call) -> tuple[int, int, str]:
    """XLA's TopK custom kernel (`topk_custom_kernel.cc`): one block per batch row, threads
    `min(8192 // k, 1024, bit_floor(n / bit_ceil(k)))` (k values stay in registers, and each
    thread needs a slice of at least k)."""
    operand = first_array(call.operands[0].shape)
    out = first_array(call.shape)
    n = operand.dims[-1] if operand.dims else 1
    k = max(out.dims[-1] if out.dims else 1, 1)
    batch = elements(operand) // max(n, 1)
    min_slice = n // (1 << (k - 1).bit_length())
    min_slice = 1 << (min_slice.bit_length() - 1) if min_slice else 0
    threads = max(min(TOPK_THREADS_PER_K // k, TOPK_MAX_THREADS, min_slice), 1)
    return max(batch, 1), threads, f"TopK of {k} in {n}"


def fallback_launch(roots) -> tuple[int, int]:
    """XLA's fallback: 128 threads per block, one thread per element of root 0 (of a library call's
    real outputs: the workspace and status leaves of its result tuple are not work)."""
    root = roots[0]
    n = sum(elements(leaf) for leaf in real_outputs(root)) if root.opcode == "custom-call" else \
        elements_recursive(root.shape)
    return max(_ceil(n, FALLBACK_THREADS), 1), FALLBACK_THREADS


def triton_launch(kernel, device) -> tuple[int, int, str] | None:
    """`(blocks, threads, detail)` of a Triton fusion under its configured tiling, or None without one.

    Blocks = ∏⌈dim / tile⌉ over the tiled root, threads = 32 x `num_warps`
    (XLA's `EstimateNumWarps` when the config has none).
    """
    cfg = configured_tiling(kernel)
    if cfg is None:
        return None
    try:
        tiled = propagate(kernel, cfg.output_tile, block_k=cfg.block_k)
    except TilingError:
        return None
    warps = cfg.num_warps
    if warps is None:

        warps = num_warps_for(tiled)
    root = next((r for r, t in tiled.roots if t.sizes == tuple(cfg.output_tile)), tiled.roots[0][0])
    detail = f"tile {list(cfg.output_tile)} of {list(dims_of(root))}, {warps} warps"
    return tiled.num_blocks, warps * warp_size(device), detail


# What can make a fused instruction other than a root the hero of a kernel.
_HERO_OPCODES = frozenset({"reduce", "concatenate", "transpose", "copy"})


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
    for h in select_in_body(comp, _HERO_OPCODES):
        op = h.opcode
        if op == "reduce" or op == "concatenate":
            return None
        if (op == "transpose" or op == "copy") and tiled_transpose(h) is not None:
            return None
    roots = fused_roots(kernel)
    if not roots or (len(roots) == 1 and roots[0].opcode in ("scatter", "sort", "dynamic-update-slice")):
        return None
    return roots


def _sort_root(kind: str, roots):
    """The sort a sort kernel runs: a lone sort, or the sort root of a fusion XLA made around it
    (a `kCustom` fusion with no backend kind, its iota operands fused in)."""
    if kind not in ("sort", "custom") or len(roots) != 1:
        return None
    root = roots[0]
    if root.opcode == "sort":
        return root
    return None


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
    kind, roots, heroes = emitter_kind(kernel, warp_size(device))
    if kind == "loop":
        blocks, threads, unroll = loop_launch(kernel, roots, device, max_unroll=max_unroll)
        return LaunchDimensions(kind, blocks, threads, unroll, roots[0].name)
    if kind == "reduction":
        hero = next(h for r, h in zip(roots, heroes) if is_real_reduction_hero(r, h, warp_size(device)))
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
        if (len(scatter.operands) - 1) // 2 >= 1:
            blocks, threads, detail = scatter_launch(kernel, roots, scatter, device, max_unroll)
            return LaunchDimensions(kind, blocks, threads, 1, scatter.name, detail)
        blocks, threads = _calculate(elements(first_array(scatter.shape)), 1, device)
        return LaunchDimensions(kind, blocks, threads, 1, scatter.name)
    sort = _sort_root(kind, roots)
    if sort is not None:
        blocks, threads, detail = sort_launch(sort, device)
        return LaunchDimensions("sort", blocks, threads, 1, sort.name, detail)
    if kind == "dynamic-update-slice":
        upd = first_array(roots[0].operands[1].shape)
        blocks, threads = _calculate(elements(upd), 1, device)
        return LaunchDimensions(kind, blocks, threads, 1, roots[0].name)
    if kind == "triton":
        grid = triton_launch(kernel, device)
        if grid is not None:
            return LaunchDimensions(kind, grid[0], grid[1], 1, roots[0].name, grid[2])
    if kind == "library" and custom_call_target(kernel) == TOPK_TARGET:
        blocks, threads, detail = topk_launch(kernel)
        return LaunchDimensions(kind, blocks, threads, 1, kernel.name, detail)
    blocks, threads = fallback_launch(roots)
    return LaunchDimensions(kind, blocks, threads, 1, heroes[0].name if heroes else "")


def fused_loop_launch(producer, consumer, device, pf: LaunchFacts, cf: LaunchFacts,
                      max_unroll: int, memo: dict | None = None) -> LaunchDimensions | None:
    """`launch_dimensions(materialize_fusion(producer, consumer))` (`models._base`) when it can be told
    from the two sides' `LaunchFacts` (`pf`, `cf`) and the pair's operands alone; else None.

    With no reduce, concatenate or tiled transpose on either side, every hero is its
    root, so the emitter is decided by the consumer's roots (the fused kernel's roots)
    and the loop grid by their shapes and whether either side prevents vectorization.
    With such ops in the consumer (a fusion) but none the hero search can reach in the
    producer (`pf.exposed` False, or the search from the consumer's roots never reaches the
    parameters bound to it: `hero_search_reach`), the fused kernel's roots and heroes are the
    consumer's: the search enters the producer only through its value, and finds nothing there. The
    emitter is then the consumer's own (`emitter_kind`), and so is the grid of the loop, concatenate
    and transpose emitters (the roots, the hero and the vectorization flag); a reduction's grid also
    looks at the fused kernel's operands (`input_facts`: the consumer's other operands and the
    producer's, each bound to a parameter of the fused body). A lone consumer that is not an
    intermediate op (`is_intermediate`: a reduce, a slice, ...) is the fused kernel's root and its own
    hero, whatever the producer holds: the hero search walks from a root only through intermediate
    ops; the emitter is then the lone consumer's own, as a library call's is not.

    `memo`: a dict kept for this version of `consumer` (and `device`, `max_unroll`): the grid
    is then worked out once per consumer and vectorization flag (and, for a reduction, the
    pair's `input_facts`), not once per producer (a fusion with many operands is priced with
    each of them).
    """
    if consumer.opcode == "tuple":
        return None
    if producer not in consumer.operands:  # (instructions compare by identity)
        return None  # read through get-tuple-elements
    if consumer.opcode == "fusion":
        if pf.exposed and _reaches_producer(producer, consumer, memo):
            return None
        kind = "hero" if cf[0] else "loop"
    elif pf.exposed or cf[0]:
        # (a library call's emitter is its own alone: `_consumer_hero_launch` tells none)
        if is_intermediate(consumer, 3) or (producer.opcode == "fusion" and producer.fused_computation is None):
            return None
        kind = "lone"
    else:
        kind = "loop"
    no_vectorize = pf[2] or cf[2]
    make = _consumer_loop_launch if kind == "loop" else _consumer_hero_launch
    if memo is None:
        ld = make(consumer, device, no_vectorize, max_unroll)
    else:
        key = (kind, no_vectorize)
        ld = memo.get(key, memo)
        if ld is memo:
            ld = memo[key] = make(consumer, device, no_vectorize, max_unroll)
    if ld is not _BY_INPUTS:
        return ld
    inputs = input_facts([o for o in consumer.operands if o is not producer] + list(producer.operands))
    if memo is None:
        return make(consumer, device, no_vectorize, max_unroll, inputs)
    key = (kind, no_vectorize, inputs)
    ld = memo.get(key, memo)
    if ld is memo:
        ld = memo[key] = make(consumer, device, no_vectorize, max_unroll, inputs)
    return ld


# `_consumer_hero_launch`'s answer for a reduction when the fused kernel's operands were not given.
_BY_INPUTS = LaunchDimensions("reduction", 0, 0, 0, "", "needs the fused kernel's operands")


def _reaches_producer(producer, consumer, memo: dict | None) -> bool:
    """Whether the fused kernel's hero search could enter `producer` from `consumer` (a lone consumer: taken
    as yes): it enters through the consumer's parameters bound to the producer, if it reaches them."""
    comp = consumer.fused_computation if consumer.opcode == "fusion" else None
    if comp is None:
        return True
    reached = None if memo is None else memo.get("reach")
    if reached is None:
        reached = hero_search_reach(comp)[1]
        if memo is not None:
            memo["reach"] = reached
    return any(j in reached for j, o in enumerate(consumer.operands) if o is producer)


def _consumer_hero_launch(consumer, device, no_vectorize: bool, max_unroll: int,
                          inputs: tuple[int | None, bool] | None = None) -> LaunchDimensions | None:
    """`fused_loop_launch`'s grid for a consumer with heroes of its own (a fusion, or a lone consumer
    that is no intermediate op): that of the emitter `emitter_kind` of the consumer picks, as
    `launch_dimensions` gives it, for the loop, concatenate, transpose and reduction emitters (a
    reduction's with the fused kernel's `inputs`; `_BY_INPUTS` when not given); else None."""
    comp = consumer.fused_computation if consumer.opcode == "fusion" else None
    if consumer.opcode == "fusion" and (comp is None or consumer.fusion_kind == "kCustom"):
        return None
    if any(r.opcode == "parameter" for r in fused_roots(consumer)):
        return None  # the producer's value could be a root
    kind, roots, heroes = emitter_kind(consumer, warp_size(device))
    if kind == "loop":
        blocks, threads, unroll = loop_launch(None, roots, device, max_unroll=max_unroll, no_vectorize=no_vectorize)
        return LaunchDimensions(kind, blocks, threads, unroll, roots[0].name)
    if kind == "concatenate":
        hero = heroes[0]
        largest = max((first_array(o.shape) for o in hero.operands), key=elements)
        blocks, threads, unroll = loop_launch(None, roots, device, shape=largest, max_unroll=max_unroll,
                                              no_vectorize=no_vectorize)
        return LaunchDimensions(kind, blocks, threads, unroll, hero.name)
    if kind == "transpose":
        hero = next(h for h in heroes if tiled_transpose(h) is not None)
        tr = tiled_transpose(hero)
        blocks, threads = transpose_launch(tr, device)
        return LaunchDimensions(kind, blocks, threads, 1, hero.name,
                                f"transpose {list(tr.dimensions)} perm {list(tr.permutation)}")
    if kind == "reduction":
        if inputs is None:
            return _BY_INPUTS
        hero = next(h for r, h in zip(roots, heroes) if is_real_reduction_hero(r, h, warp_size(device)))
        blocks, threads, detail = reduction_launch(None, roots, hero, device, inputs)
        return LaunchDimensions(kind, blocks, threads, 1, hero.name, detail)
    return None


def _consumer_loop_launch(consumer, device, no_vectorize: bool, max_unroll: int) -> LaunchDimensions | None:
    """`fused_loop_launch`'s grid: the loop emitter's over `consumer`'s roots, None where they rule it out."""
    if consumer.opcode == "fusion":
        root = consumer.fused_computation.root
        roots = list(root.operands) if root.opcode == "tuple" else [root]
    else:
        roots = [consumer]
    if not roots:
        return None
    for r in roots:
        if r.opcode == "parameter":
            return None
    if len(roots) == 1 and roots[0].opcode in ("scatter", "sort", "dynamic-update-slice"):
        return None
    blocks, threads, unroll = loop_launch(None, roots, device, max_unroll=max_unroll, no_vectorize=no_vectorize)
    return LaunchDimensions("loop", blocks, threads, unroll, roots[0].name)


def num_warps_for(tiled) -> int:
    """XLA's `EstimateNumWarps`: from the largest padded tile anywhere in the computation."""
    largest = max([1, *(ti.tile.padded for ti in tiled.instructions)])
    return 1 if largest <= 256 else 2 if largest <= 1024 else 4 if largest <= 4096 else 8
