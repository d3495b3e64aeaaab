"""How XLA:GPU runs a sort: its own bitonic emitter kernel by kernel, or CUB's radix sort (one home for both).

**XLA's bitonic emitter** (`EmitBitonicSortLLVMIR`, `xla/service/gpu/ir_emitter_unnested.cc` /
`backends/gpu/codegen/llvm`; `SortFusion::Emit`, `backends/gpu/codegen/sort.cc`), `bitonic_plan`:

- S = ceil(log2 n) stages over the sorted dimension of length n; stage s compares with the xor masks
  2^(s+1)-1, then 2^(s-1), ..., 1.
- The tile is the largest power of two <= min(4 x threads per block limit, shared memory per block / the
  bytes of one element of every operand, 2^S); a block of tile/4 threads (unroll factor 4) sorts one tile.
- Consecutive masks below the tile run in one shared-memory kernel (`tiled`): it loads every operand's
  tile, runs one compare-exchange stage per mask (each thread two pairs, then a barrier), and writes back.
  Each mask at or above the tile is its own kernel over global memory (`global`), batch x 2^(S-1) pairs.
  n <= tile: one kernel. Otherwise 1 + sum over s = log2(tile) .. S-1 of (s - log2(tile) + 2) kernels.
- Operands that are fusion parameters are copied to the output first (a device-to-device copy each),
  unless buffer assignment runs the sort in the operand's buffer (an intermediate the fusion alone uses);
  iota operands are made in the kernel.

**`sort_rewriter`** (`xla/service/gpu/transforms/sort_rewriter.cc`), `cub_sort_decision`: a sort goes to
CUB's radix sort when it has 1 or 2 operands with static shapes, sorts the minor-most dimension, its
comparator is a LT/GT compare of one operand pair (or JAX's NaN-canonicalising "numpy order" pattern), its
types have compiled CUB kernels, and, on Hopper and Blackwell, `IsCubSortFasterOnH100` holds for the key
width, batch and length (on Ampere `IsCubSortFasterOnA100`; elsewhere more than 16384 elements).

**CUB's radix sort** (`cub_radix_plan`; CUB's `DispatchRadixSort`, `AgentRadixSortHistogram`,
`AgentRadixSortOnesweep` and the sm_90 tuning in `tuning_radix_sort.cuh`, NVIDIA/cccl):

- batch 1, more keys than one tile: `DeviceRadixSort`'s onesweep path. A histogram kernel reads every key
  once and counts all digit passes at once (128 threads x 16 items of 4 bytes per tile, a grid-stride loop
  over SMs x resident blocks); an exclusive-sum kernel, one block of 256 threads per pass; then one onesweep
  kernel per 8 key bits over tiles of `threads x items` keys (sm_90: 384 threads, 17 items for a 4-byte key
  with values narrower than 8 bytes and 64-bit offsets, 29 with 8-byte values, 19 keys alone (18 for f32
  keys); 30 / 24 nominal for 8-byte keys; the small-key table for 1- and 2-byte keys; items scaled by the
  wider of key and value as `RegBoundScaling` does). Each onesweep block takes a tile index from an atomic
  counter, loads and ranks its keys, publishes its digit counts and walks back over its predecessors'
  counts (decoupled look-back) to its digits' global offsets, then scatters keys, then loads and scatters
  values. A pass of more than 2^28 keys is launched in portions.
- Memsets: the capture (CUB 3.2, `jax_random_sampling`) shows 6 per call for 4 passes: the histogram's bins
  and the tile counters, and each pass's look-back state (2 + passes).
- batch 1, one tile or less: one single-tile kernel (256 threads x 19 items, scaled).
- a batch (XLA's `CubSortPairs` / `CubSortKeys` with `batch_size > 1`) runs `DeviceSegmentedRadixSort` over
  all key bits: ceil(bits / 6) passes (5 / 4 for 1-byte keys), the first `passes x 6 - bits` of them of one
  bit fewer (the alternate policy, 384 threads x 11 items; the others 192 x 39, both scaled as above); each
  pass one kernel with one block per row, which counts its row's digits (reading the keys), scans them and
  then ranks and scatters its row tile by tile (reading keys and values, writing both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..hlo import PRIMITIVE_BITS
from ._rules import _attr_tuple
from ._shapes import first_array

__all__ = ["SortKernel", "SortPlan", "bitonic_plan", "cub_float_keys", "cub_radix_plan", "cub_sort_decision",
           "cub_sort_operands", "onesweep_tile", "sort_of", "xor_masks"]

UNROLL = 4          # kUnrollFactor
RADIX_BITS = 8      # CUB's digit width for the radix passes


@dataclass(frozen=True, slots=True)
class SortKernel:
    """One kernel (or copy) of a sort. `kind`: `tiled` (shared-memory stages), `global` (one mask in
    global memory), `copy` (a parameter copied to the output), `histogram`, `scan`, `pass` (a CUB
    onesweep pass), `single_tile`, `segmented` (a segmented radix pass), `memset`; `blocks` x `threads`;
    `shared_bytes` per block; `stages`: compare-exchange stages in shared memory (CUB: digit passes);
    `bytes_read` / `bytes_written` in global memory; `items`: a CUB kernel's keys per thread (a tile is
    `threads x items` keys)."""

    kind: str
    blocks: int
    threads: int
    shared_bytes: int
    stages: int
    bytes_read: int
    bytes_written: int
    items: int = 0          # CUB: keys per thread per tile


@dataclass(frozen=True, slots=True)
class SortPlan:
    """The kernels of one sort, with the facts they came from: `library` (`xla` or `cub`), `batch`, `n`
    (the sorted length), `element_bytes` (one element of every operand), `tile` (XLA's), `reason` and
    `value_bytes` (CUB: one value; 0 for keys alone)."""

    library: str
    kernels: tuple
    batch: int
    n: int
    element_bytes: int
    tile: int = 0
    reason: str = ""
    value_bytes: int = 0

    @property
    def launches(self) -> int:
        return sum(1 for k in self.kernels if k.kind not in ("copy", "memset"))


def sort_of(instr):
    """The sort an instruction runs: itself, or a fusion's sort root; None otherwise."""
    if instr.opcode == "sort":
        return instr
    comp = instr.fused_computation if instr.opcode == "fusion" else None
    if comp is not None and comp.root.opcode == "sort":
        return comp.root
    return None


def xor_masks(stages: int) -> list[int]:
    """The compare masks of a bitonic sort of 2^stages elements, in XLA's order."""
    out = []
    for s in range(stages):
        out.append((1 << (s + 1)) - 1)
        out.extend(1 << m for m in range(s - 1, -1, -1))
    return out


def _bytes(dtype: str) -> int:
    return max(PRIMITIVE_BITS[dtype] // 8, 1)


def _dims(sort):
    shape = first_array(sort.operands[0].shape)
    dim = _attr_tuple(sort, "dimensions")[0]
    n = shape.dims[dim]
    return dim, n, max(math.prod(shape.dims) // max(n, 1), 1)


def _copied(operand, fusion) -> bool:
    """Whether XLA copies a sort fusion's operand into its output first: unless buffer assignment lets the
    sort run in the operand's own buffer, which it does for an intermediate result the fusion alone uses
    (an entry parameter or a value used elsewhere must survive the sort)."""
    if operand.opcode in ("parameter", "constant", "get-tuple-element"):
        # an element of another kernel's tuple output was seen copied on the H100 (jax_random_sampling)
        return True
    return any(u is not fusion for u in operand.users)


def bitonic_plan(instr, device) -> SortPlan:
    """XLA's bitonic kernels for a sort (or sort fusion) `instr` on a GPU `device` (module docstring)."""
    sort = sort_of(instr)
    if sort is None:
        raise ValueError(f"{instr.name}: not a sort")
    _dim, n, batch = _dims(sort)
    elem = sum(_bytes(first_array(o.shape).element_type) for o in sort.operands)
    stages = max(n - 1, 0).bit_length()                     # Log2Ceiling
    kernels = []
    if instr.opcode == "fusion":
        for o in sort.operands:
            if o.opcode == "parameter" and _copied(instr.operands[o.parameter_number], instr):
                nbytes = first_array(o.shape).byte_size
                kernels.append(SortKernel("copy", 0, 0, 0, 0, nbytes, nbytes))
    if stages == 0:
        return SortPlan("xla", tuple(kernels), batch, n, elem, 1, "one element: nothing to sort")
    smem_limit = device.shared_memory_per_block_bytes or 49152
    limit = min((device.threads_per_block_limit or 1024) * UNROLL, smem_limit // elem, 1 << stages)
    tile = 1 << (max(limit, 1).bit_length() - 1)
    threads = max(1, tile // UNROLL)
    rounded = math.ceil(n / tile) * tile
    tiled_blocks = math.ceil(batch * math.ceil(rounded / UNROLL) / threads)
    pairs = batch * (1 << (stages - 1))
    standard_threads = min(device.threads_per_block_limit or 1024, 128)
    standard_blocks = math.ceil(math.ceil(pairs / UNROLL) / standard_threads)
    traffic = batch * n * elem                               # every operand, in bounds
    run = 0

    def flush():
        nonlocal run
        if run:
            kernels.append(SortKernel("tiled", tiled_blocks, threads, tile * elem, run, traffic, traffic))
            run = 0

    for mask in xor_masks(stages):
        if mask >= tile:
            flush()
            kernels.append(SortKernel("global", standard_blocks, standard_threads, 0, 0, traffic, traffic))
        else:
            run += 1
    flush()
    return SortPlan("xla", tuple(kernels), batch, n, elem, tile, "XLA's bitonic sort emitter")


# --------------------------------------------------------------------------- sort_rewriter


def _is_param_compare(c) -> tuple[int, int] | None:
    if c.opcode != "compare" or any(o.opcode != "parameter" for o in c.operands):
        return None
    return tuple(o.parameter_number for o in c.operands)


def _numpy_param(select) -> int:
    """`ParamNumberOfCanonicalizedZerosAndNans`: select(p != p, nan, select(p == 0, 0, p)) -> p's number."""
    if select.opcode != "select" or len(select.operands) != 3:
        return -1
    ne, nan, inner = select.operands
    if ne.opcode != "compare" or str(ne.attribute("direction", "")).upper() != "NE" or nan.opcode != "constant":
        return -1
    if (nan.literal_text or "").strip().lower() not in ("nan", "-nan"):     # MatchConstNan
        return -1
    a, b = ne.operands
    if a is not b or a.opcode != "parameter" or inner.opcode != "select":
        return -1
    return a.parameter_number


def _is_iota(instr) -> bool:
    """An iota, or a fusion that only makes one (XLA's `wrapped_iota`)."""
    if instr.opcode == "iota":
        return True
    comp = instr.fused_computation if instr.opcode == "fusion" else None
    return comp is not None and comp.root.opcode == "iota"


def _stable_tiebreak(sort):
    """`(operand, comparator root before it)` where the comparator is `StableSortExpander`'s: the original
    comparator's root `r`, then `select(compare(r, r with its parameters swapped, EQ), compare(iota_i,
    iota_j, LT), r)` on an iota operand. XLA:GPU runs that expander after `sort_rewriter`, on the sorts it
    kept; a compile without a GPU skips `sort_rewriter` (it lacks CUB's scratch sizes), so its stable
    sorts come out expanded. None for any other comparator."""
    root = sort.attribute("to_apply").root
    if root.opcode != "select" or len(root.operands) != 3:
        return None
    eq, tie, old = root.operands
    if eq.opcode != "compare" or str(eq.attribute("direction", "")).upper() != "EQ" or eq.operands[0] is not old:
        return None
    pair = _is_param_compare(tie)
    if pair is None or str(tie.attribute("direction", "")).upper() != "LT":
        return None
    i0, i1 = pair
    if i0 % 2 or i1 != i0 + 1 or i0 // 2 >= len(sort.operands) or not _is_iota(sort.operands[i0 // 2]):
        return None
    return i0 // 2, old


def _output_used(instr, index: int) -> bool:
    """Whether tuple element `index` of `instr`'s value is read (conservatively True when a user reads
    the whole tuple)."""
    for user in instr.users:
        if user.opcode != "get-tuple-element":
            return True
        if int(user.attribute("index", -1)) == index:
            return True
    return False


def cub_sort_operands(instr) -> tuple[list, object] | None:
    """The operands and comparator root of `instr`'s sort as `sort_rewriter` sees it on the GPU, before
    `StableSortExpander`: a tie-break iota the expander added (its sorted output unread) is dropped and
    the comparator is the one before the tie-break. None when `instr` runs no sort."""
    sort = sort_of(instr)
    if sort is None:
        return None
    ops = list(sort.operands)
    root = sort.attribute("to_apply").root
    expanded = _stable_tiebreak(sort)
    if expanded is not None:
        index, root = expanded
        if not _output_used(instr, index):
            ops.pop(index)
    return ops, root


def _comparator(sort, root=None) -> tuple[int, bool, str] | None:
    """`AnalyzeCompareOp`: (key operand, descending, order) or None. `root`: the comparator's root to read
    (default: the sort's own)."""
    root = sort.attribute("to_apply").root if root is None else root
    if root.opcode != "compare":
        return None
    direction = str(root.attribute("direction", "")).upper()
    if direction in ("EQ", "NE", ""):
        return None
    pair = _is_param_compare(root)
    order = "default"
    if pair is None:
        pair = tuple(_numpy_param(o) for o in root.operands)
        order = "numpy"
        if -1 in pair:
            return None
    i0, i1 = pair
    first = min(i0, i1)
    if first % 2 or max(i0, i1) != first + 1:
        return None
    descending = direction in ("GT", "GE")
    return first // 2, descending != (first != i0), order


def _faster_on_h100(bits: int, b: int, n: int, sms: int) -> bool:
    if bits == 8:
        return b == 1 or (n > 1300 and (b > 8 or n < 26000))
    if bits == 16:
        return ((b == 1 and n > 1 << 9) or (b > 12 and n > 1 << 16) or (b > 14 and n > 1 << 15)
                or (b > 16 and n > 1 << 14) or (b > 18 and n > 1 << 13) or (b > 33 and n > 1 << 12)
                or (b > 66 and n > 1 << 11))
    if bits == 32:
        return ((b == 1 and n > 22000) or (b > 26 and n > 1 << 17) or (b > 31 and n > 1 << 16)
                or (b > 38 and n > 1 << 15) or (b > 44 and n > 1 << 14) or (b > 52 and n > 1 << 13)
                or (88 < b <= sms and n > 1 << 12))
    if bits == 64:
        return ((b == 1 and n > 1 << 17) or (b > 55 and n > 1 << 17) or (b > 70 and n > 1 << 16)
                or (b > 92 and n > 1 << 15) or (((160 < b <= 2 * sms) or b > 354) and n > 1 << 14))
    return False


def _faster_on_a100(bits: int, b: int, n: int, sms: int) -> bool:
    if bits == 8:
        return b == 1 or (n > 1000 and (b > 5 or n < 43000))
    if bits == 16:
        return ((b == 1 and n > 1 << 16) or (b > 9 and n > 1 << 17) or (b > 13 and n > 1 << 13)
                or (b > 27 and n > 1 << 12) or (b > 54 and n > 1 << 11))
    if bits == 32:
        return ((b == 1 and n > 2 << 14) or (b > 24 and n > 1 << 17) or (b > 30 and n > 1 << 16)
                or (b > 36 and n > 1 << 15) or (b > 39 and n > 1 << 14) or (b > 52 and n > 1 << 13)
                or (b > 144 and n > 1 << 12))
    if bits == 64:
        return ((b == 1 and n > 1 << 16) or (b > 46 and n > 1 << 17) or (b > 55 and n > 1 << 16)
                or (b > 72 and n > 1 << 15) or (((138 < b <= 2 * sms) or b > 289) and n > 1 << 14))
    return False


_CUB_KEYS = frozenset({"bf16", "f16", "f32", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"})


def cub_sort_decision(instr, device) -> tuple[bool, str]:
    """Whether XLA's `sort_rewriter` sends the sort of `instr` (a sort or sort fusion) to CUB on `device`:
    `(goes to CUB, why)`. A fusion's operands are read through its parameters (a fused iota is an operand
    XLA had before `sort-iota-fusion`)."""
    sort = sort_of(instr)
    if sort is None:
        return False, "not a sort"
    if not device.compute_capability or device.kind != "gpu":
        return False, "not an NVIDIA GPU"
    ops, root = cub_sort_operands(instr)
    if len(ops) not in (1, 2):
        return False, f"{len(ops)} operands (CUB sorts keys or key-value pairs)"
    shape = first_array(ops[0].shape)
    dim = _attr_tuple(sort, "dimensions")[0]
    if dim != len(shape.dims) - 1:
        return False, "sorts a dimension that is not the minor-most"
    n = shape.dims[-1]
    if n == 0:
        return False, "empty"
    batch = math.prod(shape.dims) // n
    bits = PRIMITIVE_BITS[shape.element_type]
    major = device.compute_capability[0]
    if major in (9, 10):
        faster = _faster_on_h100(bits, batch, n, device.core_count)
        rule = "IsCubSortFasterOnH100"
    elif major == 8:
        faster = _faster_on_a100(bits, batch, n, device.core_count)
        rule = "IsCubSortFasterOnA100"
    else:
        faster = batch * n > 16384
        rule = "more than 16384 elements"
    if not faster:
        return False, f"{rule} does not hold for {bits}-bit keys, batch {batch}, length {n}"
    analysis = _comparator(sort, root)
    if analysis is None:
        return False, "the comparator is not a simple LT/GT of one operand pair"
    key_op, _descending, order = analysis
    key = first_array(ops[key_op].shape).element_type
    value = first_array(ops[1 - key_op].shape).element_type if len(ops) == 2 else None
    if order == "numpy":
        if key not in ("bf16", "f16", "f32", "f64"):
            return False, "numpy-order sort of a non-float key"
        if value is not None:
            if key not in ("f32", "f16", "bf16") or value not in ("s32", "s16"):
                return False, "numpy-order argsort needs f32/f16/bf16 keys and s32/s16 values"
            total = PRIMITIVE_BITS[key] + PRIMITIVE_BITS[value]
            key, value = f"u{PRIMITIVE_BITS[key]}", ("u32" if total <= 32 else "u64")
        else:
            key, value = f"u{PRIMITIVE_BITS[key]}", key
    if value is None:
        ok = key in _CUB_KEYS
    elif key in ("u8", "u16", "u32", "u64", "f32"):
        ok = PRIMITIVE_BITS[value] in (16, 32, 64)
    else:
        ok = key == "s32" and PRIMITIVE_BITS[value] == 32
    if not ok:
        return False, f"no compiled CUB kernel for keys {key} and values {value}"
    return True, f"{rule} holds for {bits}-bit keys, batch {batch}, length {n}"


def cub_float_keys(instr) -> bool:
    """Whether CUB sorts the keys of `instr`'s sort as f32 (its keys-only tile depends on it): f32 keys
    with a plain comparator; a numpy-order sort reaches CUB as unsigned keys."""
    sort = sort_of(instr)
    if sort is None:
        return False
    ops, root = cub_sort_operands(instr)  # as sort_rewriter reads it, before a stable sort's tie-break
    analysis = _comparator(sort, root)
    key = first_array(ops[analysis[0] if analysis else 0].shape).element_type
    return key == "f32" and (analysis is None or analysis[2] != "numpy")


#: CUB's sm_90 onesweep tuning for 1- and 2-byte keys (`sm90_small_key_tuning`, 64-bit offsets):
#: (key bytes, value bytes) -> (threads, nominal 4-byte items per thread).
_SM90_SMALL_KEYS = {(1, 0): (512, 19), (2, 0): (512, 19),
                    (1, 1): (448, 16), (1, 2): (512, 14), (1, 4): (512, 14), (1, 8): (384, 18),
                    (2, 1): (384, 16), (2, 2): (448, 16), (2, 4): (512, 12), (2, 8): (512, 23)}
ONESWEEP_PORTION = 1 << 28      # keys per onesweep launch at most
HISTOGRAM_THREADS, HISTOGRAM_ITEMS = 128, 16
SCAN_THREADS = 256
#: `DeviceSegmentedRadixSort`'s policies (threads, nominal items; radix bits 6, and 5 for the alternate passes;
#: 5 and 4 for 1-byte keys).
SEGMENTED, SEGMENTED_ALT = (192, 39), (384, 11)
SEGMENTED_RADIX_BITS = 6
SINGLE_TILE_THREADS, SINGLE_TILE_ITEMS = 256, 19
#: Registers per thread of CUB 3.2's sm_90 histogram kernel (the capture's launch record: 40), which bound
#: its resident blocks per SM (65536 / (40 x 128) = 12: the captured grid is 132 x 12 = 1584).
HISTOGRAM_REGISTERS = 40


def _reg_scaled(threads: int, items: int, dominant_bytes: int) -> tuple[int, int]:
    """CUB's `RegBoundScaling`: fewer items per thread for wider types, threads capped by 48 KiB per tile."""
    items = max(1, items * 4 // max(4, dominant_bytes))
    cap = ((48 * 1024 // (dominant_bytes * items)) + 31) // 32 * 32
    return min(threads, cap), items


def onesweep_tile(key_bytes: int, value_bytes: int, float_key: bool = False) -> tuple[int, int]:
    """(threads, items per thread) of CUB's sm_90 onesweep kernel (module docstring)."""
    dominant = max(key_bytes, value_bytes)
    if key_bytes < 4:
        threads, items = _SM90_SMALL_KEYS.get((key_bytes, value_bytes), (384, 23))
    elif key_bytes == 4:
        threads = 384
        if value_bytes == 0:
            items = 20 - 1 - int(float_key)
        else:
            items = 17 if value_bytes < 8 else 29
    else:
        threads, items = 384, (30 if value_bytes < 8 else 24)
    return _reg_scaled(threads, items, dominant)


def cub_radix_plan(batch: int, n: int, key_bytes: int, value_bytes: int, core_count: int = 0,
                   float_key: bool = False) -> SortPlan:
    """CUB's radix sort kernels (module docstring) of `batch` rows of `n` keys of `key_bytes` each with
    values of `value_bytes` (0: keys only); `core_count`: the GPU's SMs (the histogram's grid)."""
    elems = batch * n
    passes = math.ceil(8 * key_bytes / RADIX_BITS)
    pair = elems * (key_bytes + value_bytes)
    dominant = max(key_bytes, value_bytes)
    kernels = []
    if batch == 1:
        st_threads, st_items = _reg_scaled(SINGLE_TILE_THREADS, SINGLE_TILE_ITEMS, dominant)
        if n <= st_threads * st_items:
            kernels.append(SortKernel("single_tile", 1, st_threads, 0, passes, pair, pair, st_items))
            return SortPlan("cub", tuple(kernels), batch, n, key_bytes + value_bytes, 0,
                            f"CUB DeviceRadixSort, one tile: {passes} passes in one block", value_bytes)
        _, h_items = _reg_scaled(HISTOGRAM_THREADS, HISTOGRAM_ITEMS, key_bytes)
        per_sm = max(1, min(2048 // HISTOGRAM_THREADS, 65536 // (HISTOGRAM_REGISTERS * HISTOGRAM_THREADS)))
        h_blocks = max(core_count, 1) * per_sm
        threads, items = onesweep_tile(key_bytes, value_bytes, float_key)
        tile = threads * items
        for _ in range(2):
            kernels.append(SortKernel("memset", 0, 0, 0, 0, 0, 0))
        kernels.append(SortKernel("histogram", h_blocks, HISTOGRAM_THREADS, 0, passes, elems * key_bytes, 0,
                                  h_items))
        kernels.append(SortKernel("scan", passes, SCAN_THREADS, 0, 0, 0, 0))
        portion = ONESWEEP_PORTION // tile * tile
        for _ in range(passes):
            kernels.append(SortKernel("memset", 0, 0, 0, 0, 0, 0))
            for start in range(0, n, portion):
                m = min(portion, n - start)
                share = m * (key_bytes + value_bytes)
                kernels.append(SortKernel("pass", math.ceil(m / tile), threads, 0, 0, share, share, items))
        reason = (f"CUB DeviceRadixSort (onesweep), {passes} passes of {math.ceil(n / tile)} tiles of "
                  f"{threads}x{items} keys")
    else:
        bits = 8 * key_bytes
        radix = SEGMENTED_RADIX_BITS if key_bytes > 1 else SEGMENTED_RADIX_BITS - 1
        passes = max(math.ceil(bits / radix), 1)
        alt_passes = min(passes * radix - bits, passes)   # CUB starts with passes of one bit fewer
        alt_bits = min(bits, alt_passes * (radix - 1))
        main_passes = math.ceil((bits - alt_bits) / radix) if bits > alt_bits else 0
        read = elems * (2 * key_bytes + value_bytes)       # the upsweep reads the keys, the downsweep pairs
        for policy, count in ((SEGMENTED_ALT, alt_passes), (SEGMENTED, main_passes)):
            threads, items = _reg_scaled(*policy, dominant)
            for _ in range(count):
                kernels.append(SortKernel("segmented", batch, threads, 0, 0, read, pair, items))
        passes = alt_passes + main_passes
        reason = (f"CUB DeviceSegmentedRadixSort, {passes} passes ({alt_passes} of {radix - 1} bits, "
                  f"{main_passes} of {radix}), one block per row")
    return SortPlan("cub", tuple(kernels), batch, n, key_bytes + value_bytes, 0, reason, value_bytes)
