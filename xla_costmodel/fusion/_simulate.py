"""`simulate_fusion`: XLA's priority fusion on a copy of a module, driven by any cost model."""

from __future__ import annotations

import dataclasses
import html
import itertools
import math
import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

import pandas as pd

from .._gc import gc_paused
from ..analysis import annotate_trip_counts
from ..analysis.opcodes import NOT_KERNELS_IN_FUSION_PASS
from ..analysis.shapes import reshape_is_bitcast, transpose_is_bitcast
from ..hlo import HloComputation, HloModule
from ..fusion_engine import discard_module, make_fusion, release_body_state
from ..hlo.editing import NameUniquifier, copy_module, inline_calls as _inline_calls
from ..hlo.editing import ContentIds
from ..models import prices_by_content
from ..models import DEFAULT_DEVICE, DEFAULT_MODEL, resolve_inputs
from ._constant_folding import fold_constants
from ._conditional import remove_unused_conditional_elements
from ._cse import eliminate_common_subexpressions
from ._conv_rewrite import ConvRewrite, rewrite_convolutions
from ._library_layouts import assign_library_layouts, layouts_assigned
from ._sharding_remover import remove_shardings
from ._gemm_fusion import GemmRewrite, decompose_dots, merge_dots, rewrite_gemms
from ._copy_insertion import fuse_copies, insert_root_copies
from ._loop_copies import insert_loop_copies
from ._legality import RULES, LegalityChecker
from ._multi_output import MultiOutputFusionPass, _sort_operands_first
from ._pair_cache import PairCache
from ._priority import FusionPass, LogEvent, PriorityFusionRun, StepRecord
from ._reduce_window import REDUCE_WINDOW_BASE_LENGTH, ReduceWindowRewrite, rewrite_reduce_windows as _rewrite_rws
from ._simplify import simplify as _simplify
from ._softmax_rewriter import NormalizationFusion, rewrite_normalizations
from ._sort_iota import fuse_sort_iotas
from ._scatter_expander import ScatterExpansion, expand_simple_scatters
from ._topk import TopkDecomposition, decompose_topks, sort_iotas_as_iotas
from ._tree_reduction import ReductionSplit, split_reductions
from ._while_loop_simplifier import simplify_while_loops, sink_constants
from ._xla_passes import BEFORE_FUSION_HINT, unsimulated_kernels

__all__ = [
    "FusionResult",
    "bitcasts_to_layout_changes",
    "fusible_computations",
    "kernels_of",
    "layout_changes_to_bitcasts",
    "layouts_assigned",
    "simulate_fusion",
]

STEP_COLUMNS = [
    "step", "computation", "producer", "producer_opcode", "consumers", "fusions",
    "priority_s", "time_unfused_s", "time_fused_s", "reason",
]
REJECTED_COLUMNS = ["computation", "producer", "opcode", "consumer", "rule", "detail"]
COPY_COLUMNS = ["computation", "index", "copy", "of", "reason", "fused_into"]
MULTI_OUTPUT_COLUMNS = ["computation", "kind", "parent", "into", "fused", "fusion", "time_unfused_s", "time_fused_s",
                        "fused_opcode"]
LOG_COLUMNS = ["event", "computation", "producer", "consumers", "time_unfused_s", "time_fused_s", "rule", "detail",
               "fusion", "incremental", "logged_unfused_s", "logged_fused_s"]

# Callers whose computations are control flow (fused like the entry), not embedded code.
_CONTROL_FLOW = frozenset({"while", "conditional"})
# Rounds of constant folding and simplification at most (XLA's `HloPassFix` runs its pipeline to a fixed point:
# a fold the simplifier enables takes a round more; on the H100 corpus the second round never folds anything).
_FOLDING_ROUNDS = 8


def fusible_computations(module: HloModule) -> list[HloComputation]:
    """`GetFusibleComputations`: computations priority fusion works on, callees first.

    Every computation except fusion bodies and computations called from
    embedded contexts (reducers, scatter/sort/map combiners, custom calls,
    `call` bodies without `_xla_stream_annotation`); while and conditional
    bodies are kept.
    """
    embedded: set[int] = set()
    for comp in module.computations:
        for instr in comp.instructions:
            called = instr.called_computations
            if not called:
                continue
            if instr.opcode in _CONTROL_FLOW:
                continue
            if instr.opcode == "call" and "_xla_stream_annotation" in instr.raw_attributes.get("frontend_attributes", ""):
                continue
            embedded.update(id(c) for c in called)
    return [c for c in module.computations if id(c) not in embedded]


def layout_change_kind(instr) -> str | None:
    """"reshape" / "transpose" when `instr` only relabels the layout (a bitcast once layouts are physical)."""
    op = instr.opcode
    if op not in ("reshape", "transpose") or len(instr.operands) != 1:
        return None
    src, dst = instr.operands[0].shape, instr.shape
    if not (dst.is_array and src.is_array):
        return None
    if op == "reshape":
        relabels = reshape_is_bitcast(src, dst)
    else:
        relabels = transpose_is_bitcast(src, dst, instr.attribute("dimensions", ()), ignore_unit_dims=True)
    return op if relabels else None


def layout_changes_to_bitcasts(module: HloModule, *, keep_attributes: bool = False) -> int:
    """Turn every layout-only reshape/transpose of `module` into a `bitcast`, in place.

    What XLA's `AlgebraicSimplifier` does (layout-sensitive, before fusion) with
    `ReshapeIsBitcast` / `TransposeIsBitcast`: the instruction keeps its name,
    shape and operand and loses its attributes. "Layout-only" is decided by the
    rules `analyze` uses to price them as free (`analysis._opcodes.is_free`:
    default layouts for a reshape, unit dimensions free for a transpose), so
    pricing before fusion does not change.
    Priority fusion then treats them as bitcasts (priority +inf, fused along
    into consumers, never a consumer of their own), as XLA does.

    **Arguments:** `keep_attributes`: keep the attributes (a transpose's
    `dimensions`), so that `bitcasts_to_layout_changes` can give each back its
    opcode; such a module is for the pass to decide on, not to print.

    **Returns:** how many instructions were rewritten.
    """
    n = 0
    for comp in module.computations:
        for instr in comp.instructions:
            if layout_change_kind(instr) is None:
                continue
            if not keep_attributes:
                for key in list(instr.raw_attributes):
                    instr.remove_attribute(key)
            instr.opcode = "bitcast"
            n += 1
    return n


def bitcasts_to_layout_changes(module: HloModule) -> int:
    """Undo `layout_changes_to_bitcasts(keep_attributes=True)`, in place, clones in fused bodies included.

    Every `bitcast` of `module` becomes the transpose (it kept its `dimensions`) or
    the reshape it was made from. Only for a module whose bitcasts all came from
    there (one that was not layout-assigned, `layouts_assigned`).

    **Returns:** how many instructions were rewritten.
    """
    n = 0
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode == "bitcast":
                instr.opcode = "transpose" if "dimensions" in instr.raw_attributes else "reshape"
                n += 1
    return n


# How layout-only reshapes and transposes are handled (`bitcast_layout_changes`):
# "emit": they become bitcasts, in the output too (a layout-assigned input, or the caller says so);
# "decide": they are bitcasts while the pass decides, as XLA has them then, and the fused
#           module gives them back their opcodes (an input not through layout assignment);
# "off": they stay reshapes/transposes throughout, priced and fused as such.
def bitcast_mode(module: HloModule, bitcast_layout_changes: bool | None) -> str:
    """`"emit"`, `"decide"` or `"off"` for `bitcast_layout_changes` (None: from `layouts_assigned`)."""
    if bitcast_layout_changes is None:
        return "emit" if layouts_assigned(module) else "decide"
    return "emit" if bitcast_layout_changes else "off"


def kernels_of(module: HloModule, computations: list[HloComputation] | None = None):
    """Top-level instructions that run as kernels (fusions and unfused ops) in `computations`;
    reshapes and transposes that only relabel the layout are not kernels (bitcasts to XLA)."""
    comps = fusible_computations(module) if computations is None else computations
    for comp in comps:
        for instr in comp.instructions:
            if instr.opcode not in NOT_KERNELS_IN_FUSION_PASS and layout_change_kind(instr) is None:
                yield instr


def _price(model, device, kernels, cache: dict) -> tuple[float, int, int]:
    total = 0.0
    n = unpriced = 0
    for k in kernels:
        t = cache.get(k)
        if t is None:
            t = cache[k] = model.estimate(k, device).time_s
        n += 1
        if math.isnan(t):
            unpriced += 1
        else:
            total += t
    return total, n, unpriced


def _totals(module, dev, cost_model, price: bool, cache: dict, versions: dict,
            content: ContentIds | None = None) -> tuple[float, int, int]:
    """`(time, kernels, unpriced kernels)` of `module` as `analyze` prices it (NaN time when not `price`).

    With `content`, kernels of the same content share one estimate (only the totals are kept,
    so an estimate's details naming another copy's operands do not matter here).
    """
    from ..models.pricing import is_free_site, kernel_sites, module_time

    if not price:
        return math.nan, sum(1 for site in kernel_sites(module) if not is_free_site(site[0])), 0
    version = _getter(versions)
    key = (lambda instr: ("kernel", content.kernel(instr))) if content is not None else None
    return module_time(module, dev, cost_model, cache=cache, version=version, key=key, warn_stacklevel=4)


@dataclass(frozen=True)
class FusionResult:
    """What `simulate_fusion` did.

    **Attributes:**

    - `module`: the fused module (a new object; fusions are kLoop / kInput,
      named `fusion`, `fusion.1`, ... with bodies `fused_computation`, ...).
    - `steps`: one row per dequeued producer: `step`, `computation`,
      `producer`, `producer_opcode`, `consumers` (comma-separated), `fusions`
      (the fusions it went into), `priority_s`, `time_unfused_s`,
      `time_fused_s` (over all its users, launches included) and `reason`.
    - `rejected`: producers left unfused, with the rule that last blocked
      each (`rule` is a key of `RULES`; `negative-priority` when fusing would
      not pay), the consumer it concerned and a `detail`.
    - `time_before_s`, `time_after_s`: the predicted time of one execution of
      the module before and after, priced exactly as `analyze` prices it
      (`analyze(module, device=, model=).total_time_s` of the input as given and
      of `module`: the same free instructions, bitcast-like reshapes and
      transposes included; `while` bodies times their trip counts); NaN when
      not priced. `kernels_before`, `kernels_after`: `analyze`'s kernel
      counts (rows that are not free); `unpriced_before`, `unpriced_after`:
      kernels the model could not price (left out of the totals). What XLA's
      passes before fusion change (the simplifier, constant folding, the
      rewrites of `pre_fusion_rewrites`, CSE) is part of the difference, as
      it is between `analyze` of the lowered module and of XLA's.

      The step priorities need not add up to `time_before_s - time_after_s`.
      Like XLA's, each priority is a local estimate made when its producer is
      dequeued: the producer against its users as they are at that moment
      (`EstimateRunTimes`), each fused pair priced on its own. Later steps
      change those users again (they grow, absorb other producers, share
      operands), so what a step was expected to save is not what the final
      kernels save; only re-pricing the fused module, as here, gives the
      module's time.
    - `model`, `device`: names; `elapsed_s`: time spent fusing (totals excluded);
      `model_calls`: pair prices asked of the model (of each member, for a
      combination priced by pair; a model with `prices_by_content` is asked
      once per distinct pair of kernel contents, so repeated layers add none).
    - `origin`: instruction name in `module` -> name of the input instruction
      it was cloned from (only for names that differ).
    - `input_through_xla`: whether the input had been through XLA's passes
      before fusion (`layouts_assigned`). When not, XLA:GPU would have
      rewritten some of its kernels before fusing (`not_simulated`), and
      merged or removed others: `notes` says so, and how to get XLA's own input
      to its fusion pass.
    - `log`: the pass's log, entry by entry in the order XLA's
      `priority_fusion_dump.txt` has them (`_priority.LogEvent`): `event` is
      `"price"` (a producer's priority computed, at queue start or on an
      update: `consumers` are all its users, `time_unfused_s` and
      `time_fused_s` the prices over them, XLA's `update_priority`),
      `"ineligible"` (not priced: `rule`, `detail`, the consumer concerned in
      `consumers`; XLA's `producer_ineligible`) or `"fusion"` (`producer`
      fused into `consumers`, making or growing `fusion`). Producer and
      consumer names are the input's until a fusion is made. On an update
      XLA logs only the change of a queued producer's prices (`incremental`):
      `logged_unfused_s`, `logged_fused_s` are the figures XLA's log would
      show (`_priority.LogEvent`).
    - `multi_output`: the merges of multi-output fusion, the pass XLA:GPU runs
      right after priority fusion (`fusion._multi_output`), one row each:
      `computation`, `kind` ("sibling": `fused` absorbed by `into`, both
      reading `parent`; "producer-consumer": the producer `fused` kept as an
      output of its consumer `into`), `fusion` (the multi-output fusion made),
      the model's `time_unfused_s`, `time_fused_s` (NaN for siblings,
      which XLA merges without its model) and `fused_opcode`. Empty when not run
      (`simulate_fusion(multi_output=False)`). Each merge is also a row of
      `steps` (its `reason` starts "multi-output fusion") and an event
      `"multi-output"` of `log`.
    - `pre_fusion_rewrites`: what the simulated passes that XLA:GPU runs before
      fusion changed (today `ReduceWindowRewriter`: long scans made a tree of
      16-wide windows, `fusion._reduce_window.ReduceWindowRewrite`; `ReductionSplitter` and
      `TreeReductionRewriter`: reductions that are not race-free split in two,
      `fusion._tree_reduction.ReductionSplit`; `SoftmaxRewriterTriton`: normalization diamonds made
      Triton fusions, `fusion._softmax_rewriter.NormalizationFusion`, one per diamond matched, kept
      or not: `fusion` names the Triton fusion, else `reason` says why not; `GemmFusion` and
      the dots left to cuBLAS, `fusion._gemm_fusion.GemmRewrite`; `TopkDecomposer`: a top_k XLA:GPU
      does not run as `__gpu$TopK` made a sort and two slices, `fusion._topk.TopkDecomposition`); the step
      log starts after them, and `time_before_s` prices the input as given, before them.
    - `copies`: one row per copy copy insertion added (`simulate_fusion(copy_insertion=)`):
      `computation`, `index` (the output, loop-state or branch element), `copy`, `of`, `reason`
      (`fusion._loop_copies`: "body-read-after-write", "body-moved", "body-replicated",
      "init-live", "init-replicated", "branch-forwarded"; both: "read-only"; at the entry root:
      "replicated") and `fused_into` (the fusion copy fusion made it an output of, or "").
    """

    module: HloModule
    steps: pd.DataFrame
    rejected: pd.DataFrame
    time_before_s: float
    time_after_s: float
    kernels_before: int
    kernels_after: int
    unpriced_before: int
    unpriced_after: int
    model: str
    device: str
    elapsed_s: float
    model_calls: int = 0
    origin: Mapping[str, str] = field(default_factory=dict, repr=False)
    input_through_xla: bool = True
    pre_fusion_rewrites: tuple[ReduceWindowRewrite | ReductionSplit | GemmRewrite | ConvRewrite | NormalizationFusion
                               | TopkDecomposition | ScatterExpansion, ...] = ()
    log: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=LOG_COLUMNS), repr=False)
    multi_output: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=MULTI_OUTPUT_COLUMNS),
                                       repr=False)
    multi_output_run: bool = False
    copies: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=COPY_COLUMNS), repr=False)

    @property
    def not_simulated(self) -> pd.DataFrame:
        """Kernels of `module` that XLA:GPU makes with passes this simulation does not run (a dot
        becomes a Triton GEMM fusion or a cuBLAS call before fusion, ...): `_xla_passes.unsimulated_kernels`."""
        return unsimulated_kernels(kernels_of(self.module))

    @property
    def notes(self) -> list[str]:
        """What a user should know before comparing these kernels with XLA:GPU's, one line each."""
        out = []
        scans = [r for r in self.pre_fusion_rewrites if isinstance(r, ReduceWindowRewrite) and r.kind == "scan-tree"]
        if scans:
            out.append(f"{len(scans)} long reduce-window{'s' if len(scans) != 1 else ''} (scans: "
                       + ", ".join(f"{r.instruction} of {r.length}" for r in scans[:5])
                       + (", ..." if len(scans) > 5 else "")
                       + f") rewritten before fusion as XLA:GPU's ReduceWindowRewriter does: a tree of "
                       f"{REDUCE_WINDOW_BASE_LENGTH}-wide windows")
        splits = [r for r in self.pre_fusion_rewrites if isinstance(r, ReductionSplit)]
        if splits:
            out.append(f"{len(splits)} reduction{'s' if len(splits) != 1 else ''} not race-free split in two before "
                       "fusion as XLA:GPU's ReductionSplitter and TreeReductionRewriter do (each half a kernel): "
                       + ", ".join(f"{r.instruction} over {r.length}" for r in splits[:5])
                       + (", ..." if len(splits) > 5 else ""))
        gemms = [r for r in self.pre_fusion_rewrites if isinstance(r, GemmRewrite)]
        if gemms:
            n_triton = sum(r.kind == "triton-gemm" for r in gemms)
            out.append(f"{len(gemms)} dot{'s' if len(gemms) != 1 else ''} rewritten before fusion as XLA:GPU's "
                       f"GemmFusion and GemmRewriter do: {n_triton} Triton GEMM fusion{'s' if n_triton != 1 else ''} "
                       f"(with {sum(len(r.absorbed) for r in gemms)} operand and epilogue instructions), "
                       f"{len(gemms) - n_triton} cuBLAS call{'s' if len(gemms) - n_triton != 1 else ''}")
        scatters = [r for r in self.pre_fusion_rewrites if isinstance(r, ScatterExpansion)]
        if scatters:
            out.append(f"{len(scatters)} scatter{'s' if len(scatters) != 1 else ''} of one index vector made "
                       "elementwise code before fusion as XLA's ScatterExpander (and the loop removal after it) "
                       "does: " + ", ".join(r.instruction for r in scatters[:5])
                       + (", ..." if len(scatters) > 5 else ""))
        topks = [r for r in self.pre_fusion_rewrites if isinstance(r, TopkDecomposition)]
        if topks:
            out.append(f"{len(topks)} top_k{'s' if len(topks) != 1 else ''} made a sort and two slices (three "
                       "kernels) before fusion as XLA:GPU's TopkDecomposer does where its own TopK kernel does not "
                       "apply: " + ", ".join(r.instruction for r in topks[:5]) + (", ..." if len(topks) > 5 else ""))
        triton = [r for r in self.pre_fusion_rewrites if isinstance(r, NormalizationFusion) and r.fusion]
        if triton:
            out.append(f"{len(triton)} normalization diamond{'s' if len(triton) != 1 else ''} (softmax, layer "
                       "norm: a reduction and its broadcast back) made Triton fusions before fusion as XLA:GPU's "
                       "SoftmaxRewriterTriton does: " + ", ".join(r.instruction for r in triton[:5])
                       + (", ..." if len(triton) > 5 else ""))
        ns = self.not_simulated
        if len(ns):
            parts = ", ".join(f"{n} {op} ({ns[ns.opcode == op].xla_pass.iloc[0]}: {ns[ns.opcode == op].xla_makes.iloc[0]})"
                              for op, n in ns.opcode.value_counts().items())
            out.append(f"{len(ns)} kernel{'s' if len(ns) != 1 else ''} come from passes XLA:GPU runs before fusion "
                       f"and this simulation does not: {parts}")
        if not self.input_through_xla:
            after = "horizontal fusion" if self.multi_output_run else "multi-output and horizontal fusion"
            out.append("the input has not been through XLA's passes before fusion (simplification, CSE, GEMM "
                       "and Triton rewriting, layout assignment), nor will the result go through those after it "
                       f"({after}): XLA:GPU may make fewer kernels; " + BEFORE_FUSION_HINT)
        return out

    @property
    def speedup(self) -> float:
        """time_before_s / time_after_s."""
        return self.time_before_s / self.time_after_s if self.time_after_s else math.nan

    def summary(self) -> dict[str, Any]:
        """The headline numbers as a dict."""
        return {
            "module": self.module.name,
            "model": self.model,
            "device": self.device,
            "fusion_steps": int(len(self.steps)),
            "kernels_before": self.kernels_before,
            "kernels_after": self.kernels_after,
            "time_before_s": self.time_before_s,
            "time_after_s": self.time_after_s,
            "unpriced_before": self.unpriced_before,
            "unpriced_after": self.unpriced_after,
            "rejected": int(len(self.rejected)),
            "multi_output_merges": int(len(self.multi_output)),
            "elapsed_s": self.elapsed_s,
        }

    def rejected_by_rule(self) -> pd.Series:
        """How many producers each rule left unfused."""
        if self.rejected.empty:
            return pd.Series(dtype=int, name="producers")
        return self.rejected["rule"].value_counts().rename("producers")

    def __repr__(self) -> str:
        return (
            f"FusionResult({self.module.name!r}, model={self.model!r}, device={self.device!r}, "
            f"steps={len(self.steps)}, kernels {self.kernels_before} -> {self.kernels_after}, "
            f"time {self.time_before_s * 1e6:.3f} us -> {self.time_after_s * 1e6:.3f} us)"
        )

    def _repr_html_(self) -> str:
        s = self.summary()
        rows = [
            ("module", s["module"]),
            ("model / device", f"{s['model']} / {s['device']}"),
            ("fusion steps", s["fusion_steps"]),
            ("kernels", f"{s['kernels_before']} &rarr; {s['kernels_after']}"),
            ("predicted time", f"{s['time_before_s'] * 1e6:,.3f} &micro;s &rarr; {s['time_after_s'] * 1e6:,.3f} &micro;s"),
            ("unpriced kernels", f"{s['unpriced_before']} &rarr; {s['unpriced_after']}"),
            ("producers left unfused", s["rejected"]),
            ("multi-output merges", s["multi_output_merges"] if self.multi_output_run else "not run"),
            ("simulation time", f"{s['elapsed_s']:.3f} s"),
        ]
        table = "".join(f"<tr><th style='text-align:left'>{html.escape(str(k))}</th><td>{v}</td></tr>" for k, v in rows)
        by_rule = self.rejected_by_rule()
        rules = "".join(
            f"<tr><td>{html.escape(rule)}</td><td>{n}</td><td>{html.escape(RULES.get(rule, ''))}</td></tr>"
            for rule, n in by_rule.items()
        )
        steps = self.steps.head(20).to_html(index=False, float_format=lambda x: f"{x:.4g}")
        return (
            f"<div><b>Priority fusion</b><table>{table}</table>"
            f"<p><b>Unfused producers by rule</b></p><table><tr><th>rule</th><th>producers</th><th>meaning</th></tr>{rules}</table>"
            f"<p><b>First steps</b> (of {len(self.steps)})</p>{steps}</div>"
        )


def _relabelled(work: HloModule) -> dict[tuple[str, str], str]:
    """(computation, name) -> "reshape"/"transpose" for the bitcasts `layout_changes_to_bitcasts(keep_attributes=True)`
    made in `work` (the step log names them by their own opcode)."""
    return {
        (comp.name, i.name): ("transpose" if "dimensions" in i.raw_attributes else "reshape")
        for comp in work.computations for i in comp.instructions if i.opcode == "bitcast"
    }


def _relabelled_reason(reason: str) -> str:
    return reason.replace("bitcast: fused first", "layout-only, a bitcast to XLA: fused first", 1)


def _getter(versions: dict):
    get = versions.get
    return lambda instr: get(instr, 0)


def working_copy(module: HloModule, inline_calls: bool, mode: str,
                 rewrites: list | None = None, splits: list | None = None,
                 gemms: list | None = None, gemm_device=None, *, simplify: bool = False,
                 constant_folding: bool = False,
                 convs: list | None = None, topks: list | None = None,
                 layouts: list | None = None) -> HloModule:
    """The copy a fusion pass works on: calls inlined, sharding annotations removed (XLA's `ShardingRemover`),
    loops' trip counts recorded on them, long scans rewritten as XLA's `ReduceWindowRewriter` does (when `rewrites` is a list: what was rewritten is
    appended to it), reductions that are not race-free split as XLA's `TreeReductionRewriter` does (when
    `splits` is a list, likewise), first simplified as XLA's `AlgebraicSimplifier` does when `simplify`
    (`fusion._simplify`), and layout-only changes made bitcasts (`mode`, see `bitcast_mode`), as XLA has it
    when its fusion passes run. The counts must be written before fusing: fusion hides the compare and
    the increment they are read from (XLA's `WhileLoopTripCountAnnotator` runs before fusion for the
    same reason)."""
    work = copy_module(module)
    if inline_calls and any(i.opcode == "call" for _, i in work.instructions()):
        work = _inline_calls(work, copy=False)
    remove_shardings(work)  # XLA's ShardingRemover, the first pass of a single-device compile (`fusion._sharding_remover`)
    annotate_trip_counts(work)
    scatters: list = []
    if simplify and gemm_device is not None:
        # ScatterExpander(kEliminateSimpleScatters) runs in XLA:GPU's simplification pipeline, before the
        # simplifier, CSE and constant folding that tidy its index code (`fusion._scatter_expander`)
        scatters = expand_simple_scatters(work)
    if gemms is not None and gemm_device is not None:  # XLA's DotDecomposer, before its simplifier (`_gemm_fusion`)
        decompose_dots(work)
    if simplify:  # XLA's AlgebraicSimplifier and TupleSimplifier, before these passes (`fusion._simplify`)
        _simplify(work)
    if constant_folding or simplify:
        # HloConstantFolding (`fusion._constant_folding`), which XLA always runs, and its WhileLoopSimplifier
        # (`fusion._while_loop_simplifier`), in the same fixed point of XLA's simplification pipeline as the
        # simplifier, when that is simulated
        for _ in range(_FOLDING_ROUNDS):
            # WhileLoopConstantSinking, then WhileLoopSimplifier, as XLA's pipeline orders them
            changed = simplify and bool(sink_constants(work))
            changed = simplify and simplify_while_loops(work).changed or changed
            # ConditionalSimplifier's unused results and operands (its TryRemoveConditional is `_simplify`'s)
            changed = simplify and bool(remove_unused_conditional_elements(work)) or changed
            if constant_folding:
                changed = fold_constants(work).changed or changed
            if not changed or not simplify:
                break
            _simplify(work)
    if simplify:
        merge_dots(work)  # XLA's DotMerger: the pass right after its simplification pipeline (`_gemm_fusion`)
    if gemm_device is not None:  # XLA:GPU's TopkDecomposer / TopkSpecializer (`fusion._topk`)
        decomposed = decompose_topks(work)
        # ScatterExpander(kEliminateSimpleScatters) and the passes that remove its loop (`fusion._scatter_expander`)
        decomposed += scatters + expand_simple_scatters(work)
        if topks is not None:
            topks.extend(decomposed)
        sort_iotas_as_iotas(work)  # AlgebraicSimplifier's broadcast(iota) -> iota, for SortIotaFusion
    if convs is not None and gemm_device is not None:  # ConvRewriter .. layout assignment (`fusion._conv_rewrite`)
        convs.extend(rewrite_convolutions(work, gemm_device.compute_capability))
    if layouts is not None and gemm_device is not None and not layouts_assigned(work):
        # layout assignment's copies around the cuSOLVER / cuBLAS triangular-solve calls (`fusion._library_layouts`;
        # XLA's own input to fusion has them)
        layouts.extend(assign_library_layouts(work))
    if rewrites is not None and any(i.opcode == "reduce-window" for _, i in work.instructions()):
        rewrites.extend(_rewrite_rws(work))
    if splits is not None:  # XLA:GPU's ReductionSplitter and TreeReductionRewriter (`fusion._tree_reduction`)
        splits.extend(split_reductions(work))
    if gemms is not None and gemm_device is not None:  # SplitkRewriter, GemmFusion, GemmRewriter (`fusion._gemm_fusion`)
        gemms.extend(rewrite_gemms(work, gemm_device.compute_capability, gemm_device.core_count,
                                   merge=not simplify, decompose=False))  # merged above with the simplifier
    if mode != "off":
        layout_changes_to_bitcasts(work, keep_attributes=mode == "decide")
    return work


def simulate_fusion(
    module: Any,
    *args: Any,
    device: Any = DEFAULT_DEVICE,
    model: Any = DEFAULT_MODEL,
    inline_calls: bool = True,
    incremental: bool = True,
    price_totals: bool = True,
    bitcast_layout_changes: bool | None = None,
    rewrite_reduce_windows: bool = True,
    unique_ids: Mapping[str, int] | None = None,
    multi_output: bool = True,
    copy_insertion: bool | None = None,
    cse: bool | None = None,
    tree_reductions: bool | None = None,
    gemm_rewrites: bool = False,
    triton_softmax: bool = False,
    simplify: bool = True,
    conv_rewrites: bool = True,
    constant_folding: bool = True,
    **kwargs: Any,
) -> FusionResult:
    """Run XLA's GPU priority-fusion pass on a copy of `module`, priced by `model`.

    **Arguments:**

    - `module`: an unfused `HloModule` (e.g. `from_jax(fn, *args, optimized=False)`),
      the path of an HLO text file, HLO text, or a function to trace with
      `*args` / `**kwargs` (its module as lowered, unfused). Never modified.
      (The same inputs `analyze` takes: `models.resolve_inputs`.)
    - `device`: a `DeviceSpec` or a device name (`xla_costmodel.devices.device_names()`;
      default `"h100-sxm"`).
    - `model`: a `CostModel` or a registered model name (`xla_costmodel.models.model_names()`;
      default `"xla-gpu"`).
    - `inline_calls`: inline `call`s first, as XLA's `CallInliner` does before fusion.
    - `incremental`: price each (producer, consumer) pair once and compose
      priorities from the cached pair prices, as XLA does (needs models that
      fill `FusionEstimate.producer_s`; others are priced per producer anyway).
    - `price_totals`: price every kernel before and after (for `time_before_s`
      / `time_after_s`); False skips that.
    - `bitcast_layout_changes`: how reshapes and transposes that only relabel the
      layout are fused. XLA's algebraic simplifier makes them `bitcast`s before
      fusion (`layout_changes_to_bitcasts`), so the pass decides with bitcasts
      (priority +inf, fused along into every consumer, never a consumer alone).
      None (default): the fused module keeps them as bitcasts only when
      `module` has been through layout assignment (`layouts_assigned`: scheduled,
      or holding bitcasts or fusions, as XLA's optimized modules do); otherwise
      they get their reshape/transpose back in the fused module, so that it
      runs on a backend that assigns layouts itself (a bitcast is illegal before
      layout assignment), with the same decisions and totals. True: emit
      bitcasts whatever the input (its layouts are physical); False: fuse
      them as the plain reshapes/transposes they are, each priced as a kernel.
    - `rewrite_reduce_windows`: first rewrite every long scan-like `reduce-window`
      (`jnp.cumsum`, `lax.cummax`, ...) into the tree of 16-wide windows XLA:GPU's
      `ReduceWindowRewriter` makes of it before fusion (a no-op on XLA's own
      input to fusion, which has been through it); False fuses the window as
      written. `FusionResult.pre_fusion_rewrites` lists what changed.
    - `unique_ids`: XLA's unique ids of the input's instructions, by name (from a
      module dumped as a proto, `fusion._conformance.read_unique_ids`): priority
      ties go to the larger id, as in XLA. Default: the text order.
    - `multi_output`: then run multi-output fusion, as XLA:GPU does right after
      priority fusion (`fusion._multi_output`: sibling kernels reading the same
      operand merged into one, then producers kept as an extra output of a
      consumer where the model says it pays); False stops after priority fusion
      (the module XLA dumps as `after_priority-fusion`).
    - `copy_insertion`: last, add the copies XLA's copy insertion leaves: around `while` loops
      and in `conditional` branches (`fusion._loop_copies`: a loop element whose old value is
      still read after its new one is written, an init still read after the loop or read-only, a
      branch returning its operand), then at the entry's root (`fusion._copy_insertion`: an
      output that is a constant or an unaliased parameter, or a buffer already at an earlier
      output, gets its own `copy` kernel); XLA:GPU's copy fusion then folds the entry's copies
      of a fusion's output into that fusion; `FusionResult.copies` lists them (`reason` says why).
      None (default): when the pipeline runs to its end (`multi_output`); False leaves the
      root as fusion made it.
    - `cse`: before fusing, merge identical instructions and remove unread ones, as XLA's
      `HloCSE` and `HloDCE` do before fusion (`fusion._cse`). None (default): for an input not
      yet through XLA's passes (`layouts_assigned` is False: a module as JAX lowers it); XLA's
      own input to fusion has been through them. False fuses the instructions as written.
      `time_before_s` prices the input as given either way.
    - `tree_reductions`: before fusing, split every reduction XLA:GPU cannot emit race-free in
      two, as its `ReductionSplitter` and `TreeReductionRewriter` do (`fusion._tree_reduction`: a
      row reduction over more than 16384 elements or a batch over 8, a column reduction over more
      than 4096, a reduction over non-contiguous dimensions); each half is a kernel.
      `FusionResult.pre_fusion_rewrites` lists them. None (default): for an input not yet through
      XLA's passes, as `cse` (on XLA's own input to fusion it is a no-op); False fuses them as written.
    - `gemm_rewrites`: before fusing, rewrite the dots as XLA:GPU does before fusion for the device
      (`fusion._gemm_fusion`, in XLA's order): `DotDecomposer` (canonical dots: the operands transposed and
      reshaped), the simplifier's dot strength reduction (vector and small
      matrix-vector dots, outer products: a multiply and a reduce), `DotMerger` (dots sharing an operand:
      one dot over the concatenated other operands, sliced), `TransposeFolding`, `SplitkRewriter` (where its cost estimate
      says so: a dot over a split contracting dimension, then a reduce), then `GemmFusion`: a Triton
      GEMM fusion (`__triton_gemm`, kCustom: priority fusion neither grows it nor fuses it elsewhere)
      with the operand converts, broadcasts, transposes and epilogue XLA pulls in (where Triton's tiling
      can follow each dot dimension through them, `fusion._dim_order`), or a `__cublas$gemm`
      call where Triton cannot emit the dot; tiny dots stay dots. Only on a GPU with a compute
      capability; on XLA's own input to fusion it changes nothing. `FusionResult.pre_fusion_rewrites`
      lists the GEMMs. Off by default. On the H100 corpus (`scripts/bench_pipeline.py --gemm-rewrites`,
      `simplify` on) the modules within 10% of XLA's kernel count go 83 -> 98 of 114 (108 with
      `triton_softmax`), but the programs priced by `xla-gpu` within 1.25x of their measured H100 time
      fall from 49.1% to 35.1% (`scripts/bench_gpu.py`'s laptop path): XLA's dot-fusion model prices the
      corpus's small Triton GEMMs at a median 1.9x their measured time (its latency tax per K iteration
      and the small-transfer end of its HBM curve, `scripts/diagnose_gemm_prices.py`), as it prices XLA's
      own modules (36.8%). Priced by `xla-gpu-tables` the same programs go 49.1% -> 57.0%.
    - `triton_softmax`: after CSE, make each normalization diamond (softmax, layer norm: a row
      reduction broadcast back into an elementwise op with its input) a generic Triton fusion where
      the tiled model prices it below the same instructions fused without it, as XLA:GPU's
      `SoftmaxRewriterTriton` does on Ampere and later (`fusion._softmax_rewriter`); priority fusion
      then grows them; on a GPU of compute capability 8.0 or more only. `FusionResult.pre_fusion_rewrites`
      lists the diamonds. Off by default, as `gemm_rewrites`, which it needs: on its own it takes the
      modules within 10% of XLA's kernel count from 83 to 80 of 114 (dots left outside the GEMM fusions
      XLA makes, its diamonds grow where XLA's do not). With `gemm_rewrites`
      the modules within 10% of XLA's kernel count go 98 -> 108 of 114 (`scripts/bench_pipeline.py
      --gemm-rewrites --triton-softmax`), the laptop path 35.1% -> 36.0% (`xla-gpu`; remeasured with dimension orders that follow layouts) and 57.0% -> 55.3%
      (`xla-gpu-tables`); XLA's own input to fusion has been through it already.

    - `simplify`: first apply the rules of XLA's `AlgebraicSimplifier` and `TupleSimplifier` that
      change kernels on a module as JAX lowers it (`fusion._simplify`: tuple elements read back,
      identity broadcasts/reshapes/transposes/converts, reductions over dimensions of size 1 made
      reshapes, `x + 0`, `max(x, -inf)`, `A / c`, dot strength reduction, cheap conditionals made
      selects, ...; a no-op on XLA's own input to fusion), with XLA's `WhileLoopConstantSinking` and
      `WhileLoopSimplifier` (`fusion._while_loop_simplifier`: loop-invariant constants sunk into loop
      bodies, dead loop-state elements removed, induction variables merged into the trip counter) and
      `ConditionalSimplifier`'s removal of unused conditional results and operands, folding constants
      with them to a fixed point when `constant_folding`; then XLA's `DotMerger`, where XLA runs it:
      right after its simplification pipeline (`fusion._gemm_fusion.merge_dots`: dots sharing an
      operand made one dot over their other operands concatenated, sliced; not run again by
      `gemm_rewrites`). On by default, as XLA:GPU always runs these passes before fusion (each rule
      checked against its dumps); figures in the README's "Data and benchmarks"
      (`scripts/bench_pipeline.py`; `--no-simplify` turns it off). `time_before_s` still prices the
      input as given, so the saving includes what the simplifier removes (and what a merged dot's
      concatenate adds). False fuses the module as written (`search_fusion` takes the same switch).

    - `constant_folding`: fold what XLA's `HloConstantFolding` folds before fusion
      (`fusion._constant_folding`: every instruction whose operands are all constants, broadcasts of
      constants or iotas, but not broadcasts, iotas, whiles or results over 45M elements; evaluated
      where our evaluator can, left alone where it cannot; checked against XLA's dumps). On by default,
      as XLA always runs it: 62 -> 63 of 114 modules within 10% of XLA's kernel count, the laptop path
      unchanged, and the diffrax modules' simulation from 1.6-2.0 s to 0.2-0.7 s of CPU (their
      `nextafter` constants each fed about 100 selects).

    - `conv_rewrites`: before fusing, rewrite the convolutions as XLA:GPU does for the device
      (`fusion._conv_rewrite`: `ConvRewriter`'s cuDNN calls, `CudnnFusedConvRewriter`'s bias, side input
      and ReLU, `ConvPaddingLegalization`'s and `CudnnPadForConvolutions`' pads and slices, and the
      transposes layout assignment's cuDNN layouts make); on a GPU with a compute capability only.
      `FusionResult.pre_fusion_rewrites` lists them. On by default: on the H100 corpus
      (`scripts/bench_pipeline.py`) modules within 10% of XLA's kernel count go 52 -> 60 of 114 with it alone,
      63 -> 73 with `gemm_rewrites` and `simplify` (every module with a convolution then at XLA's count), and
      the programs priced within 1.25x of their measured H100 time go from 47.4% to 50.9% (within 2x: 72.8% to
      80.7%; `scripts/bench_gpu.py`'s laptop path). The calls price as XLA's own do (the same routines,
      flops and bytes on the corpus's convolution modules). The module it gives cannot run on a CPU (cuDNN
      calls), as with `gemm_rewrites`' cuBLAS calls; `conv_rewrites=False` keeps the convolutions.

    **Returns:** a `FusionResult` (fused module, step log, rejections, totals).
    """
    module, dev, cost_model = resolve_inputs("simulate_fusion", module, args, kwargs, device=device, model=model,
                                             optimized=False)
    mode = bitcast_mode(module, bitcast_layout_changes)
    if cse is None:
        cse = not layouts_assigned(module)
    if tree_reductions is None:
        tree_reductions = not layouts_assigned(module)
    if copy_insertion is None:
        copy_insertion = bool(multi_output)
    if triton_softmax:  # XLA:GPU runs it on Ampere and later only
        cc = dev.compute_capability
        triton_softmax = cc is not None and tuple(cc) >= (8, 0)
    with gc_paused():  # see xla_costmodel._gc
        result = _simulate(module, dev, cost_model, inline_calls, incremental, price_totals, mode,
                           rewrite_reduce_windows, unique_ids, multi_output, copy_insertion, cse,
                           tree_reductions, triton_softmax, gemm_rewrites, simplify, conv_rewrites,
                           constant_folding)
    release_body_state(result.module)  # the pass's per-body state would keep its module alive
    return dataclasses.replace(result, input_through_xla=layouts_assigned(module))


def _simulate(module, dev, cost_model, inline_calls, incremental, price_totals, mode="decide",
              rewrite_reduce_windows=True, unique_ids=None, multi_output=False,
              copy_insertion=False, cse=False, tree_reductions=False, triton_softmax=False,
              gemm_rewrites=False, simplify=False, conv_rewrites=False, constant_folding=False) -> FusionResult:
    model_name = cost_model.name
    t0 = time.perf_counter()
    rewrites: list | None = [] if rewrite_reduce_windows else None
    splits: list | None = [] if tree_reductions else None
    gemms: list | None = [] if gemm_rewrites else None
    gpu = dev if dev.kind == "gpu" and dev.compute_capability is not None else None
    convs: list | None = [] if conv_rewrites else None
    topks: list = []
    layouts: list = []
    work = working_copy(module, inline_calls, mode, rewrites, splits, gemms, gpu, simplify=simplify,
                        constant_folding=constant_folding, convs=convs, topks=topks, layouts=layouts)
    # (computation, name) -> opcode of the layout-only reshapes/transposes the pass sees as bitcasts
    relabelled = _relabelled(work) if mode == "decide" else {}
    comps = fusible_computations(work)
    elapsed = time.perf_counter() - t0

    versions: dict = {}
    # Content ids of kernels (`hlo._structure`): legality facts are shared between kernels of equal
    # content, and so are prices when the model allows it (repeated layers then cost one model call).
    content = ContentIds()  # every in-place change goes through PriorityFusionRun._fuse (record_fused)
    content_cache: dict = {}
    # `time_before_s` is `analyze` of the input as given: what XLA's passes before fusion change (the
    # simplifier, constant folding, the rewrites, CSE) is part of the saving. The totals have their own
    # caches; by content when the model allows it, so that a kernel fusion leaves as it was is priced once.
    totals_cache: dict = {}
    totals_content = ContentIds() if prices_by_content(cost_model) else None
    before, n_before, unpriced_before = _totals(module, dev, cost_model, price_totals, totals_cache, {},
                                                totals_content)
    if price_totals:
        release_body_state(module)  # what pricing cached for the input's fusion bodies would keep it alive

    t0 = time.perf_counter()
    if cse:  # XLA's HloCSE and HloDCE, right before fusion
        cse_result = eliminate_common_subexpressions(work)
        if cse_result.merged or cse_result.removed:
            comps = fusible_computations(work)
            # the caches know instructions whose operands were merged: start them afresh
            versions, content_cache = {}, {}
            content = ContentIds()
    names = NameUniquifier(work)
    normalizations: list = []
    if triton_softmax:  # XLA:GPU's SoftmaxRewriterTriton (`fusion._softmax_rewriter`), after CSE as in XLA
        normalizations = rewrite_normalizations(work, dev, lambda m: _unfused_exec_s(m, dev), names=names,
                                                cache=_SOFTMAX_DECISIONS.setdefault(dev, {}))
        # afresh even where it fused nothing: its simplification (`simplify_for_matching`, a no-op only after
        # simplify=True) drops the computations it leaves unreachable, a dead scatter's combiner say
        comps = fusible_computations(work)
    # XLA:GPU's SortIotaFusion, the fusion pipeline's pass right before priority fusion (`fusion._sort_iota`)
    sort_iotas = fuse_sort_iotas(comps, names)
    if any(n.fusion for n in normalizations) or sort_iotas:
        versions, content_cache = {}, {}
        content = ContentIds()
    checker = LegalityChecker(dev.shared_memory_per_block_bytes, version=versions, content=content)
    if unique_ids:
        # XLA's own ids break ties between equal priorities (the larger first); new fusions get larger ones
        counter = itertools.count(max(unique_ids.values(), default=0) + 1)
        uids = {instr: unique_ids[instr.name] if instr.name in unique_ids else next(counter)
                for _, instr in work.instructions()}
    else:
        counter = itertools.count()
        uids = {instr: next(counter) for _, instr in work.instructions()}
    origin: dict = {}
    fusion_pass = FusionPass(cost_model, dev, checker, names, uids, counter.__next__, version=versions,
                             incremental=incremental, origin=origin, pair_cache=PairCache(), content=content,
                             content_cache=content_cache, log=[])
    steps, rejected = [], []
    calls = 0
    for comp in comps:
        run = PriorityFusionRun(comp, fusion_pass, step0=len(steps))
        steps.extend(run.run())
        calls += run.model_calls
        for producer, consumer, why in run.live_rejections():
            rejected.append(
                (comp.name, producer.name, producer.opcode, consumer.name if consumer is not None else "",
                 why.rule, why.detail)
            )
    mof_rows: list = []
    if multi_output:
        # XLA runs it on the module as priority fusion left it (bitcasts included)
        mof = MultiOutputFusionPass(cost_model, dev, names=names, origin=origin)
        for st in mof.run(comps):
            mof_rows.append(st)
            steps.append(_mof_step(len(steps) + 1, st))
            fusion_pass.log.append(_mof_event(st))
        calls += mof.model_calls
    if mode == "decide":  # back to the input's vocabulary
        bitcasts_to_layout_changes(work)
    # XLA inserts copies after all its fusion passes, on the module with its layouts
    copies = _insert_copies(work, cost_model, dev, names, origin) if copy_insertion else []
    elapsed += time.perf_counter() - t0

    after, n_after, unpriced_after = _totals(work, dev, cost_model, price_totals, totals_cache, {},
                                             totals_content)

    live_origin = {}
    for clone, name in origin.items():
        if clone.computation is not None and clone.computation.module is work and clone.name != name:
            live_origin[clone.name] = name
    steps_df = pd.DataFrame(
        [
            (s.step, s.computation, s.producer, relabelled.get((s.computation, s.producer), s.producer_opcode),
             ", ".join(s.consumers), ", ".join(s.fusions), s.priority_s, s.time_unfused_s, s.time_fused_s,
             _relabelled_reason(s.reason) if (s.computation, s.producer) in relabelled else s.reason)
            for s in steps
        ],
        columns=STEP_COLUMNS,
    )
    rejected_df = pd.DataFrame(rejected, columns=REJECTED_COLUMNS)
    log_df = pd.DataFrame(
        [(e.event, e.computation, e.producer, ", ".join(e.consumers), e.time_unfused_s, e.time_fused_s, e.rule,
          e.detail, e.fusion, e.incremental, e.logged_unfused_s, e.logged_fused_s) for e in fusion_pass.log],
        columns=LOG_COLUMNS,
    )
    return FusionResult(
        module=work,
        steps=steps_df,
        rejected=rejected_df,
        time_before_s=before,
        time_after_s=after,
        kernels_before=n_before,
        kernels_after=n_after,
        unpriced_before=unpriced_before,
        unpriced_after=unpriced_after,
        model=model_name,
        device=dev.name,
        elapsed_s=elapsed,
        model_calls=calls,
        origin=MappingProxyType(live_origin),
        pre_fusion_rewrites=tuple(rewrites or ()) + tuple(splits or ()) + tuple(gemms or ()) + tuple(convs or ())
        + tuple(topks) + tuple(layouts) + tuple(normalizations) + tuple(sort_iotas),
        log=log_df,
        multi_output=pd.DataFrame([dataclasses.astuple(st) for st in mof_rows], columns=MULTI_OUTPUT_COLUMNS),
        multi_output_run=bool(multi_output),
        copies=pd.DataFrame(copies, columns=COPY_COLUMNS),
    )


# Decisions of the softmax rewriter per device, by diamond (its module's text): the same in every module.
_SOFTMAX_DECISIONS: dict = {}


def _unfused_exec_s(diamond, dev) -> float:
    """XLA's `EstimateOptimizedHloRunTimeWithoutSoftMaxRewriterTriton`: a diamond's module (XLA's
    layouts) with its reductions split and XLA's fusion passes run, each kernel's run time by XLA's
    GPU model without its launch, summed."""
    from ..models import get_model

    model = get_model("xla-gpu")
    fused = _simulate(diamond, dev, model, False, True, False, "emit", rewrite_reduce_windows=False,
                      multi_output=True, tree_reductions=True).module
    total = 0.0
    for k in kernels_of(fused):
        e = model.estimate(k, dev)
        total += e.time_s - e.launch_s
    discard_module(fused)  # throwaway: its per-body state would keep it alive, its cycles linger
    return total


def _insert_copies(work: HloModule, cost_model, dev, names, origin) -> list[tuple]:
    """Copy insertion (around loops, then at the entry root), then XLA:GPU's copy fusion: rows of
    `FusionResult.copies`."""
    added = insert_loop_copies(work) + insert_root_copies(work)
    if not added:
        return []
    merger = MultiOutputFusionPass(cost_model, dev, names=names, origin=origin)
    merger.comp = work.entry

    def merge(copies, producer):
        kind = producer.fusion_kind if producer.opcode == "fusion" else "kLoop"
        into = make_fusion(copies[0], kind, names=names)
        for copy in copies[1:]:  # the copies first merge as siblings (all read the producer)
            into = merger._merge(into, make_fusion(copy, kind, names=names), None)
        return merger._merge(into, producer, None)

    into = dict(fuse_copies(work, merge))
    if into:
        _sort_operands_first(work.entry)  # a merged fusion sits where the copy was, after its users' reads
    return [dataclasses.astuple(c) + (into.get(c.copy, ""),) for c in added]


def _mof_step(number: int, st) -> StepRecord:
    """A multi-output merge as a row of the step log."""
    if st.kind == "sibling":
        reason = f"multi-output fusion: sibling of '{st.into}' (both read '{st.parent}')"
    else:
        reason = f"multi-output fusion: kept as an output of its consumer '{st.into}'"
    return StepRecord(step=number, computation=st.computation, producer=st.fused, producer_opcode=st.fused_opcode,
                      consumers=(st.into,), fusions=(st.fusion,),
                      priority_s=st.time_unfused_s - st.time_fused_s, time_unfused_s=st.time_unfused_s,
                      time_fused_s=st.time_fused_s, reason=reason)


def _mof_event(st) -> LogEvent:
    return LogEvent("multi-output", st.computation, st.fused, (st.into,), st.time_unfused_s, st.time_fused_s,
                    rule=st.kind, fusion=st.fusion)


def simulated_gpu_kernels(module: HloModule, dev, cost_model) -> HloModule:
    """The fused module `simulate_fusion` makes of an unfused `module` for `dev` and `cost_model`, totals
    left out: what `analyze` prices for a function on a GPU while jax compiles for the CPU
    (`front._resolve.resolve_priced_module` calls this)."""
    return simulate_fusion(module, device=dev, model=cost_model, price_totals=False).module
