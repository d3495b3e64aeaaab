"""GEMM autotuning that a compile without a GPU cannot do, done with XLA's dot-fusion cost model.

Without a GPU, XLA:GPU keeps each Triton GEMM fusion's default configuration: the real run tries
its candidates on the device and keeps the fastest. `autotune_gemms` stands in for that step:

- **The candidates** (`gemm_search_space`) are XLA's `TritonDotFusionSearchSpace::GenerateConfigs`
  (`xla/service/gpu/autotuning/dot_search_space.cc`): output tiles from the minimum (16x8, or 64x8 for
  wgmma on Hopper and later when occupancy is not the concern) to the largest that fits the registers
  and the problem, square-ish where possible; warps from 2 (32-bit operands or occupancy) or 4 (wgmma)
  to one per 16x8 sub-tile; contracting tiles from max(128 bits, 16 elements, threads per side) to
  what the problem and the opt-in shared memory allow; 1 to min(iterations, shared memory, 5) stages;
  TMA on and off on Hopper and later; low-occupancy tilings dropped as XLA does when the space has 24
  or more entries. Split-K candidates are left out: XLA runs them as a rewritten fusion (an extra batch
  dimension) plus a reduction kernel, which the fusion as written does not contain. Unless `exhaustive`
  (XLA's `xla_gpu_exhaustive_tiling_search`, off by default), the space is then restricted to XLA's default
  configurations (`optimize_config_set`, XLA's `OptimizeConfigSet` with `GetDefaultTritonConfigs` as hints:
  36 configurations on Ampere and Hopper, each with and without TMA on Hopper, their tiles clamped into
  the space), as XLA's GEMM autotuner does before it times the candidates (`GemmFusionAutotunerImpl::
  GenerateTritonConfigs`, `TritonBackend::GetSupportedConfigs`): 2622 candidates become 36 for bf16
  4096^3 on the H100.
- **The price** of a candidate is the fusion's time under XLA's tiled model with XLA's dot-fusion model
  for its dot (`models._tiled.estimate`, `models._dot_fusion`), the same function the `xla-gpu` model
  prices a configured Triton fusion with. XLA's cuBLASLt backend estimates a GEMM with the dot model alone
  as the fastest of the same default-restricted set (`CublasLtBackend`: "the cost model is currently
  better tuned for the default set").
- **cuBLAS against Triton**: XLA's GEMM autotuner also times each fusion run by cuBLAS
  (`xla_gpu_cublas_fallback`, on by default): the fusion inlined, its dot a cuBLAS call, and what the
  fusion computed around the dot (operand conversions, broadcasts, the epilogue) as separate loop
  fusions. That alternative is built as HLO (`cublas_alternative`) and priced by the same model
  (the cuBLAS call from the measured GEMM table, the loop fusions by their emitter's model); with
  `cublas_fallback=True`, where it is faster than the best Triton configuration (both with their
  launches), the fusion is replaced by it, as the GPU run would have it (more kernels: the operand
  and epilogue fusions). It is off by default because the two prices are not alike: the dot-fusion
  model prices Triton GEMMs well above the measured cuBLAS table at every size (H100, bf16, the
  fastest configuration: 64^3 6.7 us against 5.0 us, 4096^3 366 us against 176 us; the tiled model
  rejects output tiles above 0.4 x the registers per block, and XLA's L2 term prices a 128x128 tiling
  at 2 GiB over 6.19 TB/s: `scripts/diagnose_gemm_prices.py` breaks it down), so the comparison
  picks cuBLAS nearly always, where the H100 capture's modules keep 378 of their 386 GEMMs in Triton
  (`scripts/bench_gpu_compile.py` scores both policies).
- **cuBLAS calls** XLA emitted itself are reported beside their table price
  (`models._library_calls.gemm_table_estimate`, measured) and the fastest Triton configuration of the
  same problem under the dot model; their module entry is not changed.

**Contract** (for the compile path, which applies it to the module XLA:GPU built without a GPU):
`autotune_gemms(module, device) -> AutotunedModule` returns a copy of `module` (the given module is never
changed) in which each Triton GEMM fusion's `backend_config` carries the chosen configuration:
`block_level_fusion_config` (`output_tiles`, `num_warps`, `num_stages`, `is_tma_allowed`) for nested GEMM
fusions, `triton_gemm_config` for legacy `__triton_gemm` fusions, and the dot's `sizes` (its contracting
tile). `AutotunedModule.choices` is a DataFrame with one row per GEMM kernel: `kernel`, `kind`
(`triton`, `cublas`, or `triton->cublas` for a fusion the cuBLAS alternative replaced), the problem (`b`, `m`, `n`, `k`, `dtype`), the configuration before and after
(`config_before`, `config_after`), `time_before_s` / `time_after_s` (per execution, the model's exec time
without launch overhead; for a replaced fusion, `time_after_s` is the cuBLAS alternative's kernels
with their launches), `triton_s` and `cublas_s` (the best Triton configuration and the cuBLAS
alternative, launches included, as compared; NaN where not compared), `candidates` (how many were priced) and `note`. Pricing the returned module with
`analyze(..., model="xla-gpu")` prices the chosen configurations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..analysis.library import backend_config, fusion_backend_kind
from ..analysis.tiling import TilingError, dims_of, propagate
from ..hlo import PRIMITIVE_BITS
from ._dot_fusion import DotProblem, dot_problem, dot_supported, estimate_dot

__all__ = ["AutotunedModule", "GemmConfig", "autotune_gemms", "best_gemm_config", "default_configs",
           "gemm_search_space", "optimize_config_set"]

GEMM_FUSION_KINDS = ("__triton_gemm", "__triton_nested_gemm_fusion")
# dot_search_space.h
_MIN_WARPS_FOR_OCCUPANCY = 2          # kMinWarpsPerCtaForOccupancy
_MIN_WARPS_FOR_WGMMA = 4              # kMinWarpsPerCtaForWgmma
_MAX_WARPS_PER_SCHEDULER = 5          # kMaxWarpsPerScheduler
_SCHEDULERS_PER_CORE = 4
_MIN_CONFIGS_FOR_OCCUPANCY_PRUNING = 24


@dataclass(frozen=True, slots=True)
class GemmConfig:
    """XLA's `TritonGemmConfig` (split_k and num_ctas are 1 here)."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int
    is_tma_allowed: bool = False

    def __str__(self) -> str:
        tma = ", tma" if self.is_tma_allowed else ""
        return (f"{self.block_m}x{self.block_n}x{self.block_k}, {self.num_warps} warps, "
                f"{self.num_stages} stages{tma}")


def _next_pow2(x: int) -> int:
    return 1 if x <= 0 else 1 << (int(x) - 1).bit_length()


def _prev_pow2(x: int) -> int:
    return 1 if x <= 0 else 1 << (int(x).bit_length() - 1)


def _is_hopper_or_later(device) -> bool:
    return bool(device.compute_capability) and device.compute_capability[0] >= 9


@dataclass(frozen=True, slots=True)
class _Limits:
    """The bounds `TritonDotFusionSearchSpace` derives from the problem and the device."""

    min_m: int
    min_n: int
    max_m: int
    max_n: int
    min_warps: int
    min_k_tile: int
    occupancy: bool


def _limits(problem: DotProblem, device) -> _Limits:
    """`GetMaxOutputTile`, `ShouldOptimizeForOccupancy`, `GetMinOutputTile`, `GetMinWarpsPerCta`,
    `GetMinContractingTileSize`, and the max tile raised to at least the min (the constructor)."""
    p = problem
    batch, lhs_par, rhs_par = max(p.b, 1), max(p.m, 1), max(p.n, 1)
    operand_bits = PRIMITIVE_BITS[p.lhs_type]
    compute_bits = PRIMITIVE_BITS[p.out_type]
    hopper = _is_hopper_or_later(device)
    desired_warps = _MAX_WARPS_PER_SCHEDULER * _SCHEDULERS_PER_CORE * device.core_count
    max_elements = device.registers_per_block_limit * 32 // compute_bits

    def fit_other(size):
        return _prev_pow2(max_elements // size)

    max_m = _prev_pow2(int(math.sqrt(max_elements)))
    max_n = fit_other(max_m)
    lhs_limit, rhs_limit = _next_pow2(lhs_par), _next_pow2(rhs_par)
    if lhs_limit < max_m:
        max_m, max_n = lhs_limit, min(fit_other(lhs_limit), rhs_limit)
    if rhs_limit < max_n:
        max_m, max_n = min(fit_other(rhs_limit), lhs_limit), rhs_limit
    tiles = batch * math.ceil(lhs_par / max_m) * math.ceil(rhs_par / max_n)
    occupancy = desired_warps // _MIN_WARPS_FOR_WGMMA > tiles
    min_m, min_n = (64, 8) if hopper and not occupancy else (16, 8)
    min_warps = (_MIN_WARPS_FOR_OCCUPANCY if operand_bits >= 32 or not hopper or occupancy
                 else _MIN_WARPS_FOR_WGMMA)
    min_k_tile = max(128 // operand_bits, 16)
    return _Limits(min_m, min_n, max(min_m, max_m), max(min_n, max_n), min_warps, min_k_tile, occupancy)


def _max_k_tile(problem: DotProblem, device, tm: int, tn: int, min_k_tile: int) -> int:
    """`GetMaxContractingTileSize` at split 1: the next power of two of k, at most what the opt-in shared
    memory holds for one stage of the tm x tn tiles."""
    smem_budget = device.shared_memory_per_block_optin_bytes or device.shared_memory_per_block_bytes
    limit = 8 * smem_budget // PRIMITIVE_BITS[problem.out_type] // (tm + tn)
    return max(min_k_tile, min(_next_pow2(max(problem.k, 1)), _prev_pow2(limit)))


def gemm_search_space(problem: DotProblem, device, *, exhaustive: bool = False,
                      expensive_lhs: bool = False, expensive_rhs: bool = False) -> list[GemmConfig]:
    """XLA's Triton GEMM candidates for `problem` on `device` (`TritonDotFusionSearchSpace::GenerateConfigs`),
    split-K left out (see the module docstring). `exhaustive`: XLA's `xla_gpu_exhaustive_tiling_search`
    (keeps low-occupancy tilings); `expensive_lhs` / `expensive_rhs`: an operand computes an expensive
    elementwise op (a wider tile on the other side is then allowed)."""
    p = problem
    k, batch = max(p.k, 1), max(p.b, 1)
    lhs_par, rhs_par = max(p.m, 1), max(p.n, 1)
    compute_bits = PRIMITIVE_BITS[p.out_type]
    hopper = _is_hopper_or_later(device)
    warp = device.warp_size or 32
    desired_warps = _MAX_WARPS_PER_SCHEDULER * _SCHEDULERS_PER_CORE * device.core_count

    def tiles(tm, tn):
        return batch * math.ceil(lhs_par / tm) * math.ceil(rhs_par / tn)

    lim = _limits(p, device)
    min_m, min_n, max_m, max_n = lim.min_m, lim.min_n, lim.max_m, lim.max_n
    min_warps, min_k_tile = lim.min_warps, lim.min_k_tile
    smem_budget = device.shared_memory_per_block_optin_bytes or device.shared_memory_per_block_bytes

    def k_limit_smem(tm, tn):
        return 8 * smem_budget // compute_bits // (tm + tn)

    def max_split(tm, tn):
        for_occupancy = _next_pow2(math.ceil((desired_warps // min_warps) / tiles(tm, tn)))
        return min(for_occupancy, _next_pow2(k // min_k_tile))

    # AddOutputTilings (split_k = 1 always passes GetMaxContractingSplit >= 1)
    tilings = []
    m = min_m
    while m <= max_m:
        lo, hi = min_n, max_n
        if m < lhs_par and not (m * 2 < lo or hi < m // 2):
            if not expensive_rhs:
                lo = max(m // 2, lo)
            if not expensive_lhs:
                hi = min(m * 2, hi)
        n = lo
        while n <= hi:
            if max_split(m, n) >= 1:
                tilings.append((m, n, tiles(m, n) < device.core_count))
            n *= 2
        m *= 2
    # EliminateLowOccupancyConfigs (counted, as XLA does, over the split-K variants too)
    if not exhaustive:
        top = max_split(max_m, max_n)
        # XLA's list holds each tiling once per power-of-two split it allows, up to the largest split.
        count = sum(sum(1 for e in range(top.bit_length()) if (1 << e) <= max_split(tm, tn)) for tm, tn, _ in tilings)
        if count >= _MIN_CONFIGS_FOR_OCCUPANCY_PRUNING:
            # Where only split-K tilings occupy every core, XLA would run split-K, which is not priced here:
            # the split-1 tilings are kept then.
            tilings = [t for t in tilings if not t[2]] or tilings
    out = []
    threads_limit = device.threads_per_block_limit or 1024
    for tm, tn, _ in tilings:
        # GetMaxWarpsPerCta
        max_w = max(min_warps, min(threads_limit // warp, math.ceil(tm / 16) * math.ceil(tn / 8)))
        w = min_warps
        while w <= max_w:
            # AddContractingTiling
            max_k = max(min_k_tile, min(_next_pow2(k), _prev_pow2(k_limit_smem(tm, tn))))
            threads = w * warp
            bk = max(min_k_tile, max(threads // tm, threads // tn))
            while bk <= max_k:
                # AddPipeliningParameter / GetMaxNumStages
                stages = min(math.ceil(k / bk), max(1, math.ceil(k_limit_smem(tm, tn) / bk)),
                             _MAX_WARPS_PER_SCHEDULER)
                for s in range(1, stages + 1):
                    out.append(GemmConfig(tm, tn, bk, w, s, False))
                    if hopper:
                        out.append(GemmConfig(tm, tn, bk, w, s, True))
                bk *= 2
            w *= 2
    return out


# xla/service/gpu/autotuning/triton_configs.h: XLA's default Triton GEMM configurations, as
# (block_m, block_n, block_k, split_k, num_stages, num_warps); the hints `OptimizeConfigSet` restricts the
# search space to unless `xla_gpu_exhaustive_tiling_search` is set.
_HOPPER_AMPERE_DEFAULTS = (
    (16, 16, 64, 1, 4, 2), (16, 16, 128, 1, 4, 4), (16, 16, 128, 128, 4, 2), (16, 16, 128, 16, 1, 2),
    (16, 256, 16, 1, 1, 2), (32, 32, 128, 16, 1, 4), (32, 256, 32, 1, 3, 4), (32, 256, 32, 16, 3, 8),
    (64, 16, 32, 1, 4, 2), (64, 16, 32, 16, 4, 2), (64, 16, 64, 1, 1, 4), (64, 16, 64, 4, 3, 2),
    (64, 16, 64, 16, 4, 4), (64, 16, 128, 1, 4, 2), (64, 16, 128, 16, 4, 4), (64, 32, 32, 1, 4, 4),
    (64, 32, 64, 16, 3, 4), (64, 32, 128, 1, 3, 2), (64, 32, 128, 128, 2, 4), (64, 64, 32, 1, 4, 4),
    (64, 64, 64, 1, 4, 4), (64, 64, 64, 4, 4, 4), (64, 64, 128, 16, 3, 4), (64, 64, 256, 16, 4, 8),
    (64, 128, 16, 1, 4, 2), (64, 128, 64, 1, 3, 4), (64, 128, 128, 8, 1, 4), (64, 256, 32, 1, 4, 4),
    (128, 16, 32, 8, 4, 2), (128, 16, 64, 16, 3, 2), (128, 16, 64, 16, 1, 4), (128, 32, 32, 8, 4, 2),
    (128, 128, 32, 8, 4, 8), (128, 256, 32, 1, 4, 8), (128, 256, 64, 1, 4, 8), (64, 8, 128, 2, 3, 4))
_BLACKWELL_DEFAULTS = (
    (128, 128, 32, 1, 4, 4), (128, 128, 64, 1, 1, 8), (128, 128, 64, 8, 3, 4), (128, 16, 16, 512, 4, 2),
    (128, 16, 32, 16, 3, 2), (128, 16, 64, 1, 5, 4), (128, 16, 64, 16, 3, 4), (128, 16, 64, 64, 1, 2),
    (128, 256, 64, 1, 4, 8), (128, 256, 64, 2, 4, 8), (128, 256, 64, 4, 3, 8), (128, 64, 64, 1, 3, 4),
    (128, 64, 64, 16, 4, 8), (128, 64, 64, 8, 4, 4), (16, 16, 128, 1, 3, 2), (16, 16, 16, 1, 1, 2),
    (16, 16, 64, 8, 3, 2), (16, 32, 64, 1, 3, 2), (256, 128, 64, 1, 3, 8), (256, 16, 16, 1, 1, 2),
    (256, 32, 32, 16, 3, 4), (32, 16, 32, 1, 4, 2), (32, 16, 512, 1, 1, 4), (32, 16, 64, 1, 1, 2),
    (32, 16, 64, 1, 4, 2), (64, 128, 16, 1, 1, 16), (64, 128, 16, 1, 3, 2), (64, 128, 64, 1, 4, 4),
    (64, 16, 64, 1, 2, 2), (64, 32, 128, 1, 3, 2), (64, 32, 32, 1, 4, 2), (64, 32, 64, 64, 3, 2),
    (64, 64, 128, 8, 1, 8), (64, 64, 16, 1, 1, 2), (64, 64, 16, 1, 3, 2))
_OTHER_CUDA_DEFAULTS = (
    (32, 32, 256, 1, 1, 4), (64, 32, 32, 16, 1, 4), (32, 64, 64, 4, 1, 4), (128, 128, 64, 4, 1, 4),
    (16, 16, 256, 1, 1, 4), (16, 128, 32, 16, 1, 4), (16, 64, 128, 1, 1, 4), (16, 128, 32, 8, 1, 4),
    (16, 16, 512, 1, 1, 4), (32, 16, 512, 1, 1, 4), (64, 32, 64, 1, 2, 8), (128, 256, 32, 1, 3, 8),
    (256, 128, 32, 1, 3, 8), (256, 64, 32, 1, 4, 4), (64, 256, 32, 1, 4, 4), (128, 64, 32, 1, 4, 4),
    (64, 128, 32, 1, 4, 4), (256, 128, 128, 1, 3, 8), (256, 64, 128, 1, 4, 4), (64, 256, 128, 1, 4, 4),
    (128, 128, 128, 1, 4, 4), (128, 64, 64, 1, 4, 4), (64, 128, 64, 1, 4, 4), (128, 32, 64, 1, 4, 4),
    (64, 32, 64, 1, 4, 4), (32, 128, 32, 1, 4, 4), (128, 128, 32, 1, 4, 4), (16, 16, 256, 1, 3, 4),
    (128, 128, 64, 2, 1, 8), (64, 64, 64, 1, 2, 4), (16, 64, 256, 8, 1, 4), (256, 256, 128, 1, 3, 8))


def default_configs(device) -> list[GemmConfig]:
    """XLA's `GetDefaultTritonConfigs` for `device` (split_k dropped: this search has none), each once
    without and once with TMA on Hopper and later."""
    major = device.compute_capability[0] if device.compute_capability else 0
    table = (_BLACKWELL_DEFAULTS if major >= 10 else _HOPPER_AMPERE_DEFAULTS if major in (8, 9)
             else _OTHER_CUDA_DEFAULTS)
    tma = (False, True) if _is_hopper_or_later(device) else (False,)
    return [GemmConfig(m, n, k, w, s, t) for m, n, k, _split, s, w in table for t in tma]


def optimize_config_set(configs: list[GemmConfig], problem: DotProblem, device) -> list[GemmConfig]:
    """XLA's `TritonDotFusionSearchSpace::OptimizeConfigSet` with the default configurations as hints: each
    hint's tile clamped into the search space's output-tile range and its contracting tile into
    [min, GetMaxContractingTileSize], warps and stages kept; the candidates equal to a clamped hint survive
    (all the hints, unclamped, where none does). What XLA's autotuner runs unless
    `xla_gpu_exhaustive_tiling_search` is set."""
    hints = default_configs(device)
    if not hints or not configs:
        return configs
    lim = _limits(problem, device)
    wanted = set()
    for h in hints:
        bm = min(max(h.block_m, lim.min_m), lim.max_m)
        bn = min(max(h.block_n, lim.min_n), lim.max_n)
        bk = min(max(h.block_k, lim.min_k_tile), _max_k_tile(problem, device, bm, bn, lim.min_k_tile))
        wanted.add(GemmConfig(bm, bn, bk, h.num_warps, h.num_stages, h.is_tma_allowed))
    kept = [c for c in configs if c in wanted]
    return kept or hints


def _gemm_dot(fusion):
    comp = fusion.fused_computation
    dots = [h for h in comp.instructions if h.opcode == "dot"] if comp is not None else []
    return dots[0] if len(dots) == 1 else None


def _expensive_parent(instr) -> bool:
    expensive = {"atan2", "cosine", "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic",
                 "power", "rsqrt", "sine", "sqrt", "tan", "tanh"}
    stack, seen = [instr], set()
    while stack:
        h = stack.pop()
        if id(h) in seen:
            continue
        seen.add(id(h))
        if h.opcode in expensive:
            return True
        stack.extend(h.operands)
    return False


def _tiled_for(fusion, cfg: GemmConfig):
    rank = len(dims_of(fusion))
    tile = (1,) * (rank - 2) + (cfg.block_m, cfg.block_n)
    return propagate(fusion, tile, block_k=cfg.block_k)


def _price_config(fusion, cfg: GemmConfig, device, model, tiled=None):
    """The model's exec time of `fusion` at `cfg`; `tiled`: its tiling at `cfg`'s tile sizes, when already
    propagated (it depends on the tile sizes only, not on warps, stages or TMA)."""
    from ._tiled import estimate

    tiled = _tiled_for(fusion, cfg) if tiled is None else tiled
    return estimate(tiled, device, cfg.num_warps, model, num_stages=cfg.num_stages,
                    is_tma_allowed=cfg.is_tma_allowed).exec_s


def _current_config(fusion, dot) -> GemmConfig | None:
    from ..analysis.tiling import configured_tiling

    cfg = configured_tiling(fusion)
    if cfg is None or len(cfg.output_tile) < 2:
        return None
    bk = cfg.block_k
    if bk is None:
        sizes = (backend_config(dot) or {}).get("sizes")
        bk = int(sizes[0]) if sizes else None
    if bk is None:
        return None
    return GemmConfig(cfg.output_tile[-2], cfg.output_tile[-1], bk, cfg.num_warps or 4, cfg.num_stages,
                      cfg.is_tma_allowed)


def best_gemm_config(fusion, device, model=None, *, exhaustive: bool = False):
    """The fastest configuration of XLA's search space for a Triton GEMM fusion under the `xla-gpu`
    model: `(GemmConfig, exec_s, candidates priced)`; `(None, inf, 0)` when no candidate tiles."""
    from ._base import get_model

    model = model or get_model("xla-gpu")
    dot = _gemm_dot(fusion)
    if dot is None or not dot_supported(dot):
        return None, math.inf, 0
    problem = dot_problem(dot)
    space = gemm_search_space(problem, device, exhaustive=exhaustive,
                              expensive_lhs=_expensive_parent(dot.operands[0]),
                              expensive_rhs=_expensive_parent(dot.operands[1]))
    if not exhaustive:
        space = optimize_config_set(space, problem, device)
    best, best_s, priced = None, math.inf, 0
    tilings: dict = {}   # (block_m, block_n, block_k) -> the propagated tiling, or the TilingError it raised
    for cfg in space:
        key = (cfg.block_m, cfg.block_n, cfg.block_k)
        if key not in tilings:
            try:
                tilings[key] = _tiled_for(fusion, cfg)
            except TilingError as exc:
                tilings[key] = exc
        tiled = tilings[key]
        if isinstance(tiled, TilingError):
            continue
        try:
            t = _price_config(fusion, cfg, device, model, tiled)
        except TilingError:
            continue
        priced += 1
        if t < best_s:
            best, best_s = cfg, t
    return best, best_s, priced


def _structure(fusion) -> tuple:
    """What a GEMM fusion's search depends on: its fused computation's instructions (opcode, shape, operand
    positions, attributes other than metadata and backend config)."""
    instrs = list(fusion.fused_computation.instructions)
    pos = {id(h): i for i, h in enumerate(instrs)}
    return tuple((h.opcode, str(h.shape), tuple(pos.get(id(o), -1) for o in h.operands),
                  tuple(sorted((k, str(v)) for k, v in h.raw_attributes.items()
                               if k not in ("metadata", "backend_config"))))
                 for h in instrs)


def _write_config(fusion, dot, cfg: GemmConfig) -> None:
    cfg_dict = dict(backend_config(fusion) or {})
    fc = dict(cfg_dict.get("fusion_backend_config") or {})
    rank = len(dims_of(fusion))
    tile = [str(s) for s in (1,) * (rank - 2) + (cfg.block_m, cfg.block_n)]
    if fc.get("kind") == "__triton_gemm":
        fc["triton_gemm_config"] = {"block_m": str(cfg.block_m), "block_n": str(cfg.block_n),
                                    "block_k": str(cfg.block_k), "split_k": "1", "num_stages": str(cfg.num_stages),
                                    "num_warps": str(cfg.num_warps), "num_ctas": "1"}
    else:
        blc = dict(fc.get("block_level_fusion_config") or {})
        blc.update({"output_tiles": [{"sizes": tile}], "num_warps": str(cfg.num_warps), "num_ctas": 1,
                    "num_stages": cfg.num_stages, "is_tma_allowed": cfg.is_tma_allowed})
        fc["block_level_fusion_config"] = blc
    cfg_dict["fusion_backend_config"] = fc
    fusion.set_attribute("backend_config", cfg_dict)
    dot_cfg = dict(backend_config(dot) or {})
    dot_cfg["sizes"] = [str(cfg.block_k)]
    dot.set_attribute("backend_config", dot_cfg)


# What XLA's layout assignment makes free around a dot run by cuBLAS: no kernel of its own.
_FREE_OPCODES = frozenset({"parameter", "bitcast", "reshape", "get-tuple-element"})
# Attributes a fused instruction's copy outside its fusion does not carry.
_DROPPED_ATTRIBUTES = ("metadata", "backend_config", "frontend_attributes")


def _ancestors(value, stop) -> list:
    """The instructions `value` is computed from inside its computation, back to parameters and `stop`
    (excluded), in an order where operands come first."""
    order, seen = [], set()

    def visit(h):
        if id(h) in seen or h is stop or h.opcode == "parameter":
            return
        seen.add(id(h))
        for o in h.operands:
            visit(o)
        order.append(h)

    visit(value)
    return order


def _line(instr, name: str, operands: list[str]) -> str:
    if instr.opcode == "constant":
        body = instr.literal_text or ""
    else:
        body = ", ".join(f"%{o}" for o in operands)
    attrs = "".join(f", {k}={v}" for k, v in instr.raw_attributes.items() if k not in _DROPPED_ATTRIBUTES)
    return f"%{name} = {instr.shape} {instr.opcode}({body}){attrs}"


def cublas_alternative(fusion, names) -> str | None:
    """HLO text of a module that runs the Triton GEMM `fusion` as XLA does when its autotuner picks
    cuBLAS: parameters as the fusion's operands; each dot operand computed by anything but free ops
    (`_FREE_OPCODES`) as a loop fusion; the dot a `__cublas$gemm` call; the fusion's epilogue, if any,
    a loop fusion of the call's result; ROOT the fusion's value. None where the fusion is not one dot,
    or calls computations (a reduction's region) outside its dot. Names come from `names` (a
    `NameUniquifier` of the module the result will be grafted into)."""
    from ..analysis.library import int_list_attribute

    comp = fusion.fused_computation
    dot = _gemm_dot(fusion)
    if comp is None or dot is None or len(dot.operands) != 2:
        return None
    if any(h.called_computations for h in comp.instructions if h is not dot):
        return None
    computations: list[str] = []
    entry: list[str] = []
    value_of: dict[int, str] = {}
    for p in comp.parameters:
        nm = names.instruction(f"{fusion.name}.operand")
        entry.append(f"%{nm} = {p.shape} parameter({p.parameter_number})")
        value_of[id(p)] = nm

    def emit(value, stop, stop_name=None) -> str:
        """Entry name of `value`: its free ops inline, any other work as one loop fusion."""
        body = _ancestors(value, stop)
        if not body:
            return stop_name if value is stop else value_of[id(value)]
        if all(h.opcode in _FREE_OPCODES for h in body):
            for h in body:
                nm = names.instruction(h.name)
                entry.append(_line(h, nm, [stop_name if o is stop else value_of[id(o)] for o in h.operands]))
                value_of[id(h)] = nm
            return value_of[id(value)]
        inputs = []   # (instruction inside the fusion, entry name)
        for h in body:
            for o in h.operands:
                if (o is stop or o.opcode == "parameter") and all(o is not i for i, _ in inputs):
                    inputs.append((o, stop_name if o is stop else value_of[id(o)]))
        local = {}
        lines = []
        for k, (o, _) in enumerate(inputs):
            local[id(o)] = names.instruction("param")
            lines.append(f"  %{local[id(o)]} = {o.shape} parameter({k})")
        for h in body:
            local[id(h)] = names.instruction(h.name)
            prefix = "ROOT " if h is value else ""
            lines.append("  " + prefix + _line(h, local[id(h)], [local[id(o)] for o in h.operands]))
        cname = names.computation(f"{fusion.name}.cublas_fused")
        signature = ", ".join(f"{local[id(o)]}: {o.shape}" for o, _ in inputs)
        computations.append(f"%{cname} ({signature}) -> {value.shape} {{\n" + "\n".join(lines) + "\n}")
        nm = names.instruction(f"loop_{value.opcode.replace('-', '_')}_fusion")
        entry.append(f"%{nm} = {value.shape} fusion({', '.join('%' + n for _, n in inputs)}), kind=kLoop, "
                     f"calls=%{cname}")
        return nm

    lhs, rhs = emit(dot.operands[0], None), emit(dot.operands[1], None)
    dims = {key: [str(d) for d in int_list_attribute(dot, attr)] for key, attr in (
        ("lhs_contracting_dimensions", "lhs_contracting_dims"), ("rhs_contracting_dimensions", "rhs_contracting_dims"),
        ("lhs_batch_dimensions", "lhs_batch_dims"), ("rhs_batch_dimensions", "rhs_batch_dims"))}
    config = {"gemm_backend_config": {"alpha_real": 1, "alpha_imag": 0, "beta": 0, "dot_dimension_numbers": dims,
                                      "epilogue": "DEFAULT"}}
    import json

    bias = _bias_epilogue(comp, dot)
    operands = [lhs, rhs]
    target = "__cublas$gemm"
    if bias is not None:
        # cuBLASLt adds a bias vector broadcast along the rows in its epilogue (GemmRewriter's BIAS).
        config["gemm_backend_config"]["epilogue"] = "BIAS"
        operands.append(value_of[id(bias[1])])
        target = "__cublas$lt$matmul"
    out_shape = bias[0].shape if bias is not None else dot.shape
    call = names.instruction(f"{fusion.name}.cublas")
    entry.append(f"%{call} = ({out_shape}, s8[0]{{0}}) custom-call({', '.join('%' + o for o in operands)}), "
                 f"custom_call_target=\"{target}\", backend_config={json.dumps(config, separators=(',', ':'))}")
    result = names.instruction(f"{fusion.name}.gemm")
    entry.append(f"%{result} = {out_shape} get-tuple-element(%{call}), index=0")
    root = emit(comp.root, bias[0] if bias is not None else dot, result)
    entry_name = names.computation(f"{fusion.name}.cublas_alternative")
    lines = [("  ROOT " if i == len(entry) - 1 and entry[-1].startswith(f"%{root} ") else "  ") + e
             for i, e in enumerate(entry)]
    if not entry[-1].startswith(f"%{root} "):
        nm = names.instruction(f"{fusion.name}.result")
        lines.append(f"  ROOT %{nm} = {comp.root.shape} bitcast(%{root})")
    text = "\n\n".join(computations + [f"ENTRY %{entry_name} {{\n" + "\n".join(lines) + "\n}"])
    return f"HloModule {entry_name}\n\n{text}\n"


def _bias_epilogue(comp, dot):
    """`(add, bias parameter)` where the fusion adds a parameter vector broadcast along the dot's last
    output dimension to the dot's result (through free ops), as cuBLASLt's BIAS epilogue does; else
    None. Only for the floating-point types cuBLASLt's bias epilogue takes."""
    if dot.shape.element_type not in ("f32", "bf16", "f16") or len(dot.shape.dims) < 2:
        return None
    users = [u for u in dot.users]
    while len(users) == 1 and users[0].opcode in ("bitcast", "reshape"):
        users = list(users[0].users)
    if len(users) != 1 or users[0].opcode != "add":
        return None
    add = users[0]
    if add.shape.dims != dot.shape.dims:
        return None
    others = [o for o in add.operands if o.opcode == "broadcast"]
    if len(others) != 1:
        return None
    bcast = others[0]
    src = bcast.operands[0]
    while src.opcode in ("bitcast", "reshape"):
        src = src.operands[0]
    from ..analysis.library import int_list_attribute

    last = len(dot.shape.dims) - 1
    if src.opcode != "parameter" or tuple(int_list_attribute(bcast, "dimensions")) != (last,):
        return None
    return add, src


def _kernels_time_s(module, device, model) -> float:
    """The model's time of the entry's kernels (fusions and custom calls), launches included."""
    total = 0.0
    for instr in module.entry.instructions:
        if instr.opcode in ("fusion", "custom-call"):
            est = model.estimate(instr, device)
            if not est.priced:
                return math.nan
            total += est.time_s
    return total


def _graft(module, fusion, alternative) -> None:
    """Replace `fusion` in `module` by the entry of the parsed `alternative` (its computations moved in,
    before the fusion's computation; every name in it was made unique for `module`)."""
    from ..hlo.editing import clone_instruction

    site_comp = fusion.computation
    for comp in list(alternative.computations):
        if comp is alternative.entry:
            continue
        alternative.remove_computation(comp)
        module.add_computation(comp, before=site_comp)
    value_of: dict[int, object] = {}
    clones = []
    for instr in alternative.entry.post_order():
        if instr.opcode == "parameter":
            value_of[id(instr)] = fusion.operands[instr.parameter_number]
            continue
        clone = clone_instruction(instr, [value_of[id(o)] for o in instr.operands])
        value_of[id(instr)] = clone
        clones.append(clone)
    site_comp.insert_instructions(clones, before=fusion)
    value = value_of[id(alternative.entry.root)]
    was_root = site_comp.root is fusion
    fusion.replace_all_uses_with(value)
    if was_root:
        site_comp.root = value
    site_comp.remove_instruction(fusion)


@dataclass(frozen=True)
class AutotunedModule:
    """`module`: the copy with the chosen configurations; `choices`: one row per GEMM kernel (see the
    module docstring)."""

    module: object
    choices: object


def autotune_gemms(module, device, *, model=None, exhaustive: bool = False,
                   cublas_fallback: bool = False) -> AutotunedModule:
    """Each Triton GEMM fusion of `module` set to the fastest configuration of XLA's search space under
    the `xla-gpu` model, or replaced by its cuBLAS alternative where that is faster
    (`cublas_fallback`, XLA's `xla_gpu_cublas_fallback`; off by default, see the module docstring), and
    each cuBLAS GEMM
    call reported with its table price (see the module docstring for the contract). `device`: a GPU
    `DeviceSpec` or preset name.

    **Raises** `ValueError` for a device that is not a GPU or an unknown preset name."""
    import pandas as pd

    from ..devices import get_device
    from ..hlo.editing import copy_module
    from ._base import get_model
    from ._gemm_table import gemm_spec, is_cublas_gemm
    from ._library_calls import gemm_table_estimate

    device = get_device(device) if isinstance(device, str) else device
    if device.kind != "gpu":
        raise ValueError(f"autotune_gemms: {device.name} is not a GPU; GEMM autotuning is XLA:GPU's")
    model = model or get_model("xla-gpu")
    from ..hlo import parse_hlo
    from ..hlo.editing import NameUniquifier

    out = copy_module(module)
    rows = []
    searched: dict = {}   # fusions of the same structure share their search
    alternatives: dict = {}   # and the price of their cuBLAS alternative
    names = NameUniquifier(out)
    for _comp, instr in list(out.instructions()):
        if instr.opcode == "fusion" and fusion_backend_kind(instr) in GEMM_FUSION_KINDS:
            dot = _gemm_dot(instr)
            row = {"kernel": instr.name, "kind": "triton"}
            if dot is None or not dot_supported(dot):
                rows.append({**row, "note": "not one dot XLA's dot-fusion model supports: left as written"})
                continue
            p = dot_problem(dot)
            row.update(b=p.b, m=p.m, n=p.n, k=p.k, dtype=p.lhs_type)
            before = _current_config(instr, dot)
            try:
                t_before = _price_config(instr, before, device, model) if before is not None else math.nan
            except TilingError:
                t_before = math.nan
            key = _structure(instr)
            if key not in searched:
                searched[key] = best_gemm_config(instr, device, model, exhaustive=exhaustive)
            best, t_best, n = searched[key]
            if best is None:
                rows.append({**row, "config_before": str(before) if before else "", "time_before_s": t_before,
                             "candidates": n, "note": "no candidate of XLA's search space tiles this fusion"})
                continue
            _write_config(instr, dot, best)
            row.update({"config_before": str(before) if before else "", "config_after": str(best),
                        "time_before_s": t_before, "time_after_s": t_best, "candidates": n, "note": ""})
            if cublas_fallback:
                text = cublas_alternative(instr, names)
                alternative = parse_hlo(text, source=f"<cuBLAS alternative of {instr.name}>") if text else None
                if key not in alternatives:
                    alternatives[key] = (_kernels_time_s(alternative, device, model) if alternative is not None
                                         else math.nan)
                t_cublas = alternatives[key]
                t_triton = model.estimate(instr, device).time_s
                row["cublas_s"], row["triton_s"] = t_cublas, t_triton
                if t_cublas < t_triton:
                    kernels = sum(1 for h in alternative.entry.instructions if h.opcode in ("fusion", "custom-call"))
                    _graft(out, instr, alternative)
                    row.update(kind="triton->cublas", config_after="cuBLAS", time_after_s=t_cublas,
                               note=f"cuBLAS ({kernels} kernel{'s' if kernels != 1 else ''}, {t_cublas * 1e6:.2f} us "
                                    f"with launches) beats the best Triton configuration ({best}, "
                                    f"{t_triton * 1e6:.2f} us)")
            rows.append(row)
        elif instr.opcode == "custom-call" and is_cublas_gemm(instr):
            spec = gemm_spec(instr)
            table = gemm_table_estimate(instr, device)
            row = {"kernel": instr.name, "kind": "cublas", "time_before_s": table.time_s if table else math.nan,
                   "time_after_s": table.time_s if table else math.nan, "candidates": 0,
                   "config_before": "cuBLAS", "config_after": "cuBLAS"}
            if spec is not None:
                row.update(b=spec.b, m=spec.m, n=spec.n, k=spec.k, dtype=spec.dtype_key)
                problem = spec
                best = min(((estimate_dot(problem, 1, c.block_m, c.block_n, c.block_k, c.num_warps, c.num_stages,
                                          device, c.is_tma_allowed).exec_s, c)
                            for c in optimize_config_set(gemm_search_space(problem, device), problem, device)),
                           key=lambda pair: pair[0])
                row["note"] = (f"measured table {row['time_before_s'] * 1e6:.2f} us; XLA's cuBLASLt estimate "
                               f"(fastest Triton configuration, {best[1]}) {best[0] * 1e6:.2f} us")
            else:
                row["note"] = "dimensions not readable from gemm_backend_config"
            rows.append(row)
    cols = ["kernel", "kind", "b", "m", "n", "k", "dtype", "config_before", "config_after", "time_before_s",
            "time_after_s", "triton_s", "cublas_s", "candidates", "note"]
    return AutotunedModule(out, pd.DataFrame(rows, columns=cols))

