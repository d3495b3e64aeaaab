"""Our priority fusion against XLA:GPU's own, step by step (issue: fusion conformance).

XLA:GPU compiles for a GPU preset on a machine without a GPU (the CUDA plugin's
compile-only devices), and its dumps hold the module right before and right
after priority fusion and the pass's own log (`*.priority_fusion_dump.txt`).
This module

- compiles one program per process with those dumps (`compile_with_fusion_dumps`,
  through `gpu_compile.compile_for_gpu` in the child; the dump flags, the proto
  dump included, are read from `XLA_FLAGS` once per process), keeping only the
  small dumps;
- reads XLA's log (`read_fusion_log`);
- runs `simulate_fusion` with `model="xla-gpu"` on XLA's exact input and
  compares (`compare_fusion_logs`): every candidate price XLA logged against
  ours for the same producer and consumers, the ineligibilities, the order of
  fusions, and the final partition into kernels with their kinds; the report
  names the first step where the two runs diverge and its cause.

Instructions are identified across the two runs by the set of input
instructions they hold (a fusion is named differently by each run): a fusion
event adds the producer's members to the consumer's.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..gpu_compile import GpuCompileError

__all__ = [
    "FusionConformance",
    "GpuCompileDump",
    "MultiOutputConformance",
    "HARNESS_PROGRAMS",
    "compare_fusion_logs",
    "compare_multi_output",
    "compile_with_fusion_dumps",
    "read_dump_dir",
    "read_fusion_log",
    "read_unique_ids",
    "summarize",
    "summarize_multi_output",
]

# What XLA dumps that the comparison reads (everything else is deleted: LLVM IR and PTX are large).
_KEEP = re.compile(r"(before_priority-fusion|after_priority-fusion|before_multi_output_fusion|"
                   r"after_multi_output_fusion|priority_fusion_dump|thunk_sequence|gpu_target_config|"
                   r"gpu_after_optimizations)(\.[\w-]+)?\.(txt|pbtxt)$|before_priority-fusion\.hlo\.pb$")
XLA_FLAGS = ("--xla_dump_hlo_as_text --xla_dump_hlo_as_proto --xla_dump_hlo_pass_re=priority-fusion|multi_output_fusion")


# ---------------------------------------------------------------------------
# Programs written for the harness: what the zoo and corpus lack (attention, convolutions, scans,
# sorts, scatters, mixed precision). Each builder returns (fn, args) like a zoo program.

def _attention():
    import jax
    import jax.numpy as jnp
    import numpy as np

    r = np.random.default_rng(0)
    q, k, v = (jnp.asarray(r.standard_normal((4, 8, 128, 64)), jnp.bfloat16) for _ in range(3))

    def attention(q, k, v):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k).astype(jnp.float32) / 8.0
        mask = jnp.tril(jnp.ones((128, 128), bool))
        p = jax.nn.softmax(jnp.where(mask, s, -1e9), axis=-1)
        return jnp.einsum("bhqk,bhkd->bhqd", p.astype(jnp.bfloat16), v)
    return attention, (q, k, v)


def _conv_block():
    import jax
    import jax.numpy as jnp
    import numpy as np

    r = np.random.default_rng(1)
    x = jnp.asarray(r.standard_normal((8, 32, 32, 16)), jnp.float32)
    w = jnp.asarray(r.standard_normal((3, 3, 16, 32)), jnp.float32)

    def conv_block(x, w):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = jax.nn.relu(y - y.mean(axis=(0, 1, 2)))
        return jax.lax.reduce_window(y, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    return conv_block, (x, w)


def _scans():
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    x = jnp.asarray(np.random.default_rng(2).standard_normal((64, 1000)), jnp.float32)

    def scans(x):
        return jnp.cumsum(x, axis=1) + lax.cummax(x, axis=0) + jnp.cumsum(x[::-1], axis=0)
    return scans, (x,)


def _unique():
    import jax.numpy as jnp
    import numpy as np

    x = jnp.asarray(np.random.default_rng(3).integers(0, 500, 4096), jnp.int32)
    return (lambda x: jnp.unique(x, size=512, fill_value=0)), (x,)


def _sort_topk():
    import jax
    import jax.numpy as jnp
    import numpy as np

    x = jnp.asarray(np.random.default_rng(4).standard_normal((32, 2048)), jnp.float32)

    def sort_topk(x):
        return jnp.sort(x, axis=-1)[:, :8] + jax.lax.top_k(x, 8)[0]
    return sort_topk, (x,)


def _scatter_add():
    import jax.numpy as jnp
    import numpy as np

    r = np.random.default_rng(5)
    table = jnp.asarray(r.standard_normal((1024, 64)), jnp.float32)
    idx = jnp.asarray(r.integers(0, 1024, 4096), jnp.int32)
    upd = jnp.asarray(r.standard_normal((4096, 64)), jnp.float32)

    def scatter_add(table, idx, upd):
        return table.at[idx].add(jnp.tanh(upd)) * 2.0
    return scatter_add, (table, idx, upd)


def _mixed_precision_mlp():
    import jax
    import jax.numpy as jnp
    import numpy as np

    r = np.random.default_rng(6)
    x = jnp.asarray(r.standard_normal((256, 512)), jnp.bfloat16)
    w1 = jnp.asarray(r.standard_normal((512, 1024)) * 0.05, jnp.bfloat16)
    w2 = jnp.asarray(r.standard_normal((1024, 512)) * 0.05, jnp.bfloat16)

    def loss(x, w1, w2):
        h = jax.nn.gelu(jnp.dot(x, w1, preferred_element_type=jnp.float32)).astype(jnp.bfloat16)
        y = jnp.dot(h, w2, preferred_element_type=jnp.float32)
        return jnp.mean(jnp.square(y - x.astype(jnp.float32)))
    return jax.grad(loss, argnums=(1, 2)), (x, w1, w2)


def _layernorm():
    import jax
    import jax.numpy as jnp
    import numpy as np

    x = jnp.asarray(np.random.default_rng(7).standard_normal((512, 768)), jnp.float32)

    def layernorm(x):
        mu = x.mean(-1, keepdims=True)
        var = jnp.square(x - mu).mean(-1, keepdims=True)
        return jax.nn.relu((x - mu) * jax.lax.rsqrt(var + 1e-5)).T
    return layernorm, (x,)


def _sibling_reductions():
    """Two reductions and an elementwise op of one input: XLA's multi-output fusion merges the siblings."""
    import jax.numpy as jnp
    import numpy as np

    x = jnp.asarray(np.random.default_rng(8).standard_normal((1024, 512)), jnp.float32)

    def stats(x):
        return jnp.sum(x, axis=1), jnp.max(x, axis=1), jnp.exp(x) * 2.0
    return stats, (x,)


def _elementwise_and_reduce():
    """An elementwise result also reduced: XLA keeps it as a second output of the reduction."""
    import jax.numpy as jnp
    import numpy as np

    x = jnp.asarray(np.random.default_rng(9).standard_normal((1024, 512)), jnp.float32)

    def exp_and_sum(x):
        e = jnp.exp(x)
        return e, jnp.sum(e, axis=1)
    return exp_and_sum, (x,)


def cumsum_axis0(x):
    """`jnp.cumsum(x, axis=0)`, importable by name (a compile process imports what it compiles)."""
    import jax.numpy as jnp

    return jnp.cumsum(x, axis=0)


HARNESS_PROGRAMS = {
    "attention": _attention,
    "conv_block": _conv_block,
    "scans": _scans,
    "unique": _unique,
    "sort_topk": _sort_topk,
    "scatter_add": _scatter_add,
    "mixed_precision_mlp_grad": _mixed_precision_mlp,
    "layernorm_transpose": _layernorm,
    "sibling_reductions": _sibling_reductions,
    "elementwise_and_reduce": _elementwise_and_reduce,
}


def _build(program: str):
    """(fn, args) of a program reference: `zoo:NAME`, `corpus:NAME[:SIZE]`, `harness:NAME`, or
    `fn:MODULE:QUALNAME` (its args come separately)."""
    kind, _, rest = program.partition(":")
    if kind == "zoo":
        from ..zoo import get_program

        return get_program(rest).build()
    if kind == "corpus":
        from ..corpus import get_program

        name, _, size = rest.partition(":")
        return get_program(name).build(size or None)
    if kind == "harness":
        if rest not in HARNESS_PROGRAMS:
            raise ValueError(f"unknown harness program {rest!r}; known: {', '.join(HARNESS_PROGRAMS)}")
        return HARNESS_PROGRAMS[rest]()
    if kind == "fn":
        mod, _, qual = rest.partition(":")
        obj: Any = importlib.import_module(mod)
        for part in qual.split("."):
            obj = getattr(obj, part)
        return obj, ()
    raise ValueError(f"program reference {program!r}: expected zoo:NAME, corpus:NAME[:SIZE], harness:NAME "
                     "or fn:MODULE:QUALNAME")


def _reference_of(fn) -> str:
    """`fn:MODULE:QUALNAME` for a function importable by its name (the compile runs in another process)."""
    mod, qual = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if mod and qual and "<" not in qual:
        try:
            obj: Any = importlib.import_module(mod)
            for part in qual.split("."):
                obj = getattr(obj, part)
            if obj is fn:
                return f"fn:{mod}:{qual}"
        except (ImportError, AttributeError):
            pass
    raise TypeError(f"compile_with_fusion_dumps: {fn!r} is not importable by name (a lambda or a local function); "
                    "pass a module-level function or a program reference (zoo:NAME, corpus:NAME:SIZE, harness:NAME)")


def _child_main(spec: dict) -> None:
    """In the compile process: build the program, compile it with XLA:GPU for the preset
    (`gpu_compile.compile_for_gpu`; the dumps come from this process's `XLA_FLAGS`), write the
    optimized module to `spec["out"]`."""
    import jax

    from ..gpu_compile import compile_for_gpu

    fn, args = _build(spec["program"])
    if spec.get("args") is not None:
        args = tuple(jax.ShapeDtypeStruct(tuple(s), d) for s, d in spec["args"])
    Path(spec["out"]).write_text(compile_for_gpu(fn, *args, device=spec["device"]).text)


def _compile_in_child(program: str, args, device: str, dump_dir: Path, timeout_s: float) -> float:
    """Run one deviceless compile with dumps into `dump_dir`; returns its wall time (s)."""
    spec = {"program": program, "args": args, "device": device, "out": str(dump_dir / "optimized.txt")}
    env = dict(os.environ)
    env.update(JAX_SKIP_CUDA_CONSTRAINTS_CHECK="1", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3",
               XLA_FLAGS=f"--xla_dump_to={dump_dir} {XLA_FLAGS}")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "xla_costmodel.fusion._conformance", json.dumps(spec)],
                          env=env, capture_output=True, text=True, timeout=timeout_s)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "cuda" not in ln.lower()
                 and not ln.startswith(("WARNING: All log", "I0000"))]
        raise GpuCompileError(f"XLA:GPU compile of {program} failed (exit {proc.returncode}): "
                              + " | ".join(lines[-3:]))
    return elapsed


@dataclass(frozen=True)
class GpuCompileDump:
    """What one deviceless XLA:GPU compile left: the texts the comparison reads.

    `before_fusion_text`, `after_fusion_text`: the module right before and after priority fusion;
    `fusion_log_text`: `priority_fusion_dump.txt`; `before_mof_text`, `after_mof_text`: around
    multi-output fusion; `thunk_text`: `thunk_sequence.txt`; `optimized_text`: the compiled module;
    `compile_s`: wall time of the compile process (start-up included).
    """

    program: str
    device: str
    dump_dir: str
    before_fusion_text: str
    after_fusion_text: str
    fusion_log_text: str
    before_mof_text: str = ""
    after_mof_text: str = ""
    thunk_text: str = ""
    optimized_text: str = ""
    compile_s: float = math.nan
    unique_ids: dict = field(default_factory=dict, repr=False)

    @property
    def kernel_count(self) -> int:
        """Kernel launches in XLA's thunk sequence (lines with a grid)."""
        return sum(1 for ln in self.thunk_text.splitlines() if "grid:" in ln)


def _pick(files: list[Path], suffix: str) -> str:
    hits = sorted(f for f in files if f.name.endswith(suffix))
    if not hits:
        return ""
    # the main module's dump (the largest: XLA may also dump small helper modules)
    return max(hits, key=lambda f: f.stat().st_size).read_text()


def read_dump_dir(path: str | os.PathLike, program: str = "", device: str = "") -> GpuCompileDump:
    """The `GpuCompileDump` of a directory XLA dumped into (`compile_with_fusion_dumps(dump_dir=...)` keeps one)."""
    out = Path(path)
    files = [f for f in out.iterdir() if f.is_file()]
    protos = [f for f in files if f.name.endswith(".before_priority-fusion.hlo.pb")]
    before = _pick(files, ".before_priority-fusion.txt")
    if not before:
        raise GpuCompileError(f"{out}: no module before priority fusion was dumped ({program})")
    if not device:
        cfg = _pick(files, ".gpu_target_config.pbtxt")
        m = re.search(r'device_description_str:\s*"([^"]*)"', cfg)
        device = m.group(1) if m else ""
    return GpuCompileDump(
        program=program, device=device, dump_dir=str(out),
        before_fusion_text=before,
        after_fusion_text=_pick(files, ".after_priority-fusion.before_cse.txt")
        or _pick(files, ".after_priority-fusion.txt"),
        fusion_log_text=_pick(files, ".priority_fusion_dump.txt"),
        before_mof_text=_pick(files, ".before_multi_output_fusion.txt"),
        after_mof_text=_pick(files, ".after_multi_output_fusion.before_cse.txt"),
        thunk_text=_pick(files, ".thunk_sequence.txt"),
        optimized_text=(out / "optimized.txt").read_text() if (out / "optimized.txt").exists() else "",
        unique_ids=read_unique_ids(max(protos, key=lambda f: f.stat().st_size)) if protos else {},
    )


def _varint(b: bytes, i: int) -> tuple[int, int]:
    r = s = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return r, i


def _fields(b: bytes):
    """(field number, wire type, value) of a protobuf message, undecoded below the top level."""
    i, n = 0, len(b)
    while i < n:
        key, i = _varint(b, i)
        f, t = key >> 3, key & 7
        if t == 0:
            v, i = _varint(b, i)
        elif t == 1:
            v, i = b[i:i + 8], i + 8
        elif t == 5:
            v, i = b[i:i + 4], i + 4
        elif t == 2:
            ln, i = _varint(b, i)
            v, i = b[i:i + ln], i + ln
        else:
            raise ValueError(f"unsupported protobuf wire type {t}")
        yield f, t, v


def read_unique_ids(path: str | os.PathLike) -> dict[str, int]:
    """Instruction name -> XLA's unique id (within its computation) from a dumped `*.hlo.pb`
    (`HloProto.hlo_module` (1) -> `computations` (3) -> `instructions` (2) -> `name` (1), `id` (35);
    the id's low 32 bits number the instruction in its computation). Read with a minimal
    protobuf wire reader: jaxlib ships no HLO proto classes."""
    data = Path(path).read_bytes()
    module = next(v for f, t, v in _fields(data) if f == 1 and t == 2)
    out: dict[str, int] = {}
    for f, t, comp in _fields(module):
        if f != 3 or t != 2:
            continue
        for f2, t2, instr in _fields(comp):
            if f2 != 2 or t2 != 2:
                continue
            name = uid = None
            for f3, t3, v in _fields(instr):
                if f3 == 1 and t3 == 2:
                    name = v.decode()
                elif f3 == 35 and t3 == 0:
                    uid = v & 0xFFFFFFFF
            if name is not None and uid is not None:
                out[name] = uid
    return out


def compile_with_fusion_dumps(program: Any, args=None, *, device: Any = "h100-sxm",
                              dump_dir: str | os.PathLike | None = None, timeout_s: float = 600.0) -> GpuCompileDump:
    """Compile a program with XLA:GPU for a GPU preset, without a GPU, keeping its fusion dumps.

    **Arguments:** `program`: a reference (`"zoo:NAME"`, `"corpus:NAME:SIZE"`, `"harness:NAME"`) or
    a module-level function with `args` (arrays or `jax.ShapeDtypeStruct`s); `device`: a GPU preset;
    `dump_dir`: where the dumps stay (default: a temporary directory, deleted). Each compile runs in
    its own process (`XLA_FLAGS` are read once per process).

    **Raises:** `gpu_compile.GpuCompileUnavailable` when jax's CUDA plugin is missing (it names the
    extra to install), `gpu_compile.GpuCompileError` when XLA fails; `TypeError` for a function the
    compile process cannot import; `ValueError` for a device that is not a GPU preset.
    """
    from ..devices import get_device
    from ..gpu_compile import GpuCompileUnavailable, gpu_compile_unavailable_reason

    reason = gpu_compile_unavailable_reason()
    if reason is not None:
        raise GpuCompileUnavailable(reason)
    dev = get_device(device) if isinstance(device, str) else device
    if dev.kind != "gpu" or dev.name not in _preset_names():
        raise ValueError(f"compile_with_fusion_dumps: {dev.name!r} is not a GPU preset (the compile process "
                         f"finds the device by its preset name)")
    arg_specs = None
    if not isinstance(program, str):
        ref = _reference_of(program)
        arg_specs = [(list(a.shape), str(a.dtype)) for a in (args or ())]
        program = ref
    keep = dump_dir is not None
    out = Path(dump_dir) if keep else Path(tempfile.mkdtemp(prefix="xla_fusion_"))
    out.mkdir(parents=True, exist_ok=True)
    try:
        elapsed = _compile_in_child(program, arg_specs, dev.name, out, timeout_s)
        files = [f for f in out.iterdir() if f.is_file()]
        for f in files:
            if f.name != "optimized.txt" and not _KEEP.search(f.name):
                f.unlink()
        dump = read_dump_dir(out, program, dev.name)
        return GpuCompileDump(**{**dump.__dict__, "dump_dir": str(out) if keep else "", "compile_s": elapsed})
    finally:
        if not keep:
            shutil.rmtree(out, ignore_errors=True)


# ---------------------------------------------------------------------------
# XLA's log

_FIELD = re.compile(r'^\s*(\w+):\s*(?:"((?:[^"\\]|\\.)*)"|(\S+))\s*$')


def read_fusion_log(text: str) -> pd.DataFrame:
    """XLA's `priority_fusion_dump.txt` (text proto of `fusion_steps`) as a table in our log's columns:
    `event` (`price` for `update_priority`, `ineligible` for `producer_ineligible`, `fusion`),
    `producer`, `consumers` (comma-separated), `time_unfused_s`, `time_fused_s`, `detail` (XLA's
    reason), `fusion`."""
    rows = []
    current: dict | None = None
    depth = 0
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if s.endswith("{"):
            depth += 1
            if depth == 2:
                current = {"kind": s[:-1].strip(), "consumers": []}
            continue
        if s == "}":
            if depth == 2 and current is not None:
                rows.append(current)
                current = None
            depth -= 1
            continue
        m = _FIELD.match(line)
        if m and current is not None:
            key, value = m.group(1), m.group(2) if m.group(2) is not None else m.group(3)
            if key == "consumer_names" or key == "consumer_name":
                current["consumers"].append(value)
            else:
                current[key] = value
    out = []
    for r in rows:
        kind = r["kind"]
        if kind == "update_priority":
            out.append(("price", r.get("producer_name", ""), ", ".join(r["consumers"]),
                        float(r.get("us_unfused", "nan")) * 1e-6, float(r.get("us_fused", "nan")) * 1e-6, "", ""))
        elif kind == "producer_ineligible":
            out.append(("ineligible", r.get("producer_name", ""), "", math.nan, math.nan, r.get("reason", ""), ""))
        elif kind == "fusion":
            out.append(("fusion", r.get("producer_name", ""), ", ".join(r["consumers"]), math.nan, math.nan, "",
                        r.get("fusion_name", "")))
    return pd.DataFrame(out, columns=["event", "producer", "consumers", "time_unfused_s", "time_fused_s", "detail",
                                      "fusion"])


# XLA's ineligibility reasons (`priority_fusion.cc`, `gpu_fusible.cc`), by the words that name them -> our rule
_XLA_REASONS = (
    ("the producer is not fusible", "producer-not-fusible"),
    ("the consumer is not fusible", "consumer-not-fusible"),
    ("only bitcast users", "only-bitcast-users"),
    ("no users", "no-users"),
    ("into output of a reduce fusion", "reduction-epilogue"),
    ("into the output of scatter", "scatter-output"),
    ("uses the in-place operand of a scatter", "scatter-in-place-reader"),
    ("in-place operand of scatter", "scatter-in-place-operand"),
    ("both the producer and the consumer contain a reduce", "reduce-into-reduce"),
    ("shared memory", "shared-memory"),
    ("unnested reduction", "unnested-reductions"),
    ("operands", "operand-limit"),
    ("too large", "code-size"),
    ("overly large code duplication", "code-size"),
    ("in-place", "in-place"),
    ("is the root", "root"),
    ("bitcast consumer", "bitcast-consumer"),
    # Triton (`CanFuseTriton`, pairs with a generic Triton fusion: `fusion._triton_fusion`)
    ("symbolictileanalysis", "triton-not-tilable"),
    ("tiledruntimedataorerror", "triton-not-tilable"),
    ("unsupported", "triton-unsupported"),
    ("only scalar constants", "triton-unsupported"),
    ("only high padding", "triton-unsupported"),
    ("no-op pad", "triton-unsupported"),
    ("row-reduction", "triton-unsupported"),
    ("not enabled yet", "triton-unsupported"),
    ("only bitcasts with the same number", "triton-unsupported"),
    ("s4 is not supported", "triton-unsupported"),
    ("nested gemm", "triton-unsupported"),
    ("triton", "triton: other"),
)


def xla_reason_rule(reason: str) -> str:
    """Our rule name (`fusion.RULES`) for one of XLA's ineligibility reasons, or `"other: <reason>"`."""
    low = reason.lower()
    for words, rule in _XLA_REASONS:
        if words in low:
            return rule
    return "other: " + reason


# ---------------------------------------------------------------------------
# The comparison

class _Members:
    """Instruction name -> the set of input instructions it holds, following one run's fusion events."""

    def __init__(self):
        self.of: dict[str, frozenset] = {}
        # Producers fused away (and not made again by a later fusion): in the final module such a name
        # is another instruction where a run reuses names (ours frees a removed instruction's name).
        self.fused_away: set[str] = set()

    def key(self, name: str) -> frozenset:
        return self.of.get(name) or frozenset((name,))

    def fuse(self, producer: str, consumer: str, fusion: str) -> None:
        self.of[fusion] = self.key(consumer) | self.key(producer)
        self.fused_away.add(producer)
        self.fused_away.discard(fusion)


def _canonical(log: pd.DataFrame) -> list[tuple]:
    """Events with names replaced by member sets: (event, producer key, consumer keys, unfused, fused, rule,
    producer, consumers, full unfused, full fused): the prices as XLA's log has them (incremental updates
    as differences), then over all users."""
    members = _Members()
    out = []
    for e in log.itertuples(index=False):
        consumers = [c for c in str(e.consumers).split(", ") if c]
        pk = members.key(e.producer)
        cks = frozenset(members.key(c) for c in consumers)  # XLA lists users in its own order
        rule = getattr(e, "rule", "") or ""
        if e.event == "ineligible" and not rule:
            rule = xla_reason_rule(e.detail)
        unfused, fused = e.time_unfused_s, e.time_fused_s
        if hasattr(e, "logged_unfused_s") and e.event == "price":
            unfused, fused = e.logged_unfused_s, e.logged_fused_s  # as XLA's log has them
        out.append((e.event, pk, cks, unfused, fused, rule, e.producer, tuple(consumers), e.time_unfused_s,
                    e.time_fused_s))
        if e.event == "fusion":
            members.fuse(e.producer, consumers[0], e.fusion)
    return out


def _segments(events: list[tuple]) -> list[list[tuple]]:
    """Rounds of the pass: the queue start, then each step's fusions followed by the updates they caused."""
    segs: list[list[tuple]] = [[]]
    prev_fusion = False
    for e in events:
        is_fusion = e[0] == "fusion"
        if is_fusion and not prev_fusion and segs[-1]:
            segs.append([])
        segs[-1].append(e)
        prev_fusion = is_fusion
    return segs


def _close(a: float, b: float, rtol: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= rtol * max(abs(a), abs(b))


def _fmt(e: tuple) -> str:
    if e[0] == "price":
        return (f"price {e[6]} -> [{', '.join(e[7])}]: unfused {e[3] * 1e6:.4g} us, fused {e[4] * 1e6:.4g} us")
    if e[0] == "ineligible":
        return f"ineligible {e[6]}: {e[5]}"
    return f"fusion {e[6]} -> {', '.join(e[7])}"


def _match_segment(xs: list[tuple], os_: list[tuple], rtol: float, seen: set, triton: frozenset,
                   priority_of=lambda key: "?") -> tuple[str, str] | None:
    """The first disagreement of one round (cause, what), or None. Events are compared as multisets:
    XLA prices a round's producers in parallel. `seen`: producers our log ever names (XLA also queues
    instructions we never consider, such as library calls, only to find them not fusible);
    `triton`: XLA's generic Triton fusions in the input (a disagreement over a pair with one of
    them is named "triton fusion: <cause>")."""
    d = _first_mismatch(xs, os_, rtol, seen, priority_of)
    if d is not None and d[2] is not None and ({d[2][6], *d[2][7]} & triton or d[2][5].startswith("triton")):
        return "triton fusion: " + d[0], d[1]
    return None if d is None else d[:2]


def _first_mismatch(xs: list[tuple], os_: list[tuple], rtol: float, seen: set, priority_of):
    """`_match_segment`'s search: (cause, what, XLA's event or None), or None."""
    pool = list(os_)
    for x in xs:
        if x[0] == "ineligible" and x[5] == "producer-not-fusible" and x[6] not in seen:
            continue  # never a candidate of ours: not fusible either
        same = [o for o in pool if o[0] == x[0] and o[1] == x[1] and (x[0] == "ineligible" or o[2] == x[2])]
        if x[0] == "ineligible":
            same_rule = [o for o in same if o[5] == x[5]]
            if same_rule:
                pool.remove(same_rule[0])
                continue
            if same:
                return "ineligibility reason", f"XLA: {_fmt(x)}; ours: {same[0][5]}", x
            priced = [o for o in pool if o[0] == "price" and o[1] == x[1]]
            if priced:
                return "legality", f"XLA: {_fmt(x)}; ours priced it: {_fmt(priced[0])}", x
            return "missing event", f"XLA: {_fmt(x)}; ours: nothing for this producer", x
        if not same:
            if x[0] == "price":
                other = [o for o in pool if o[1] == x[1]]
                if other:
                    return ("consumers" if other[0][0] == "price" else "legality",
                            f"XLA: {_fmt(x)}; ours: {_fmt(other[0])}", x)
                return "missing event", f"XLA: {_fmt(x)}; ours: nothing for this producer", x
            ours_first = next((o for o in os_ if o[0] == "fusion"), None)
            if ours_first is None:
                return "order of fusions", f"XLA: {_fmt(x)}; ours: nothing", x
            why = f"XLA: {_fmt(x)}; ours: {_fmt(ours_first)}"
            if x[6].startswith("bitcast") and ours_first[6].startswith("bitcast"):
                return "order of fusions (bitcasts: ties at +inf broken by unique ids)", why, x
            px, po = priority_of(x[1]), priority_of(ours_first[1])
            cause = "order of fusions (tie: equal priorities, broken by XLA's unique ids)" if px == po \
                else "order of fusions"
            return cause, why + f" (our priorities: {x[6]} {px}, {ours_first[6]} {po})", x
        if x[0] == "price":
            ok = [o for o in same if _close(o[3], x[3], rtol) and _close(o[4], x[4], rtol)]
            if not ok:
                o = same[0]
                which = [w for w, a, b in (("unfused", o[3], x[3]), ("fused", o[4], x[4])) if not _close(a, b, rtol)]
                return f"price ({' and '.join(which)})", f"XLA: {_fmt(x)}; ours: {_fmt(o)}", x
            pool.remove(ok[0])
        else:
            pool.remove(same[0])
    if pool:
        return "extra event", f"ours: {_fmt(pool[0])}; XLA: nothing", pool[0]
    return None


@dataclass(frozen=True)
class FusionConformance:
    """How our priority fusion, run on XLA's exact input, agrees with XLA's own run of one module.

    - `prices`: one row per candidate price XLA logged (`producer`, `consumers`,
      `xla_unfused_us`, `xla_fused_us`, `ours_unfused_us`, `ours_fused_us`,
      `within`: both within `rtol`; NaN where we logged no price for the same
      producer and consumers); `before_divergence`: logged before the first
      round where the runs diverge (later ones are priced in a different
      graph on one side, and incremental updates against different steps).
    - `first_divergence`: (round, cause, what) of the first round of the pass
      where the logs differ, or None; `rounds`: rounds compared.
    - `same_partition`: the same kernels (member sets) with the same fusion
      kinds after priority fusion; `kernels_xla`, `kernels_ours`; `partition_diff`:
      kernels only in XLA's / only in ours (a few, as text).
    - `fusions_xla`, `fusions_ours`: fusion events; `same_fusion_order`.
    """

    program: str
    device: str
    prices: pd.DataFrame
    first_divergence: tuple[int, str, str] | None
    rounds: int
    same_partition: bool
    kernels_xla: int
    kernels_ours: int
    partition_diff: tuple[str, ...] = ()
    fusions_xla: int = 0
    fusions_ours: int = 0
    same_fusion_order: bool = False
    simulate_s: float = math.nan
    compile_s: float = math.nan
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def price_agreement(self) -> float:
        """Share of XLA's candidate prices we reproduce within the tolerance."""
        return float(self.prices["within"].fillna(False).astype(bool).mean()) if len(self.prices) else math.nan

    def summary(self) -> dict[str, Any]:
        fd = self.first_divergence
        return {
            "program": self.program, "device": self.device,
            "candidates_xla": len(self.prices),
            "candidates_matched": int(self.prices["ours_fused_us"].notna().sum()) if len(self.prices) else 0,
            "candidates_within": int(self.prices["within"].fillna(False).astype(bool).sum()) if len(self.prices) else 0,
            "candidates_before_divergence": int(self.prices["before_divergence"].sum()) if len(self.prices) else 0,
            "within_before_divergence": int((self.prices["within"].fillna(False).astype(bool)
                                             & self.prices["before_divergence"]).sum()) if len(self.prices) else 0,
            "same_partition": self.same_partition,
            "kernels_xla": self.kernels_xla, "kernels_ours": self.kernels_ours,
            "fusions_xla": self.fusions_xla, "fusions_ours": self.fusions_ours,
            "same_fusion_order": self.same_fusion_order,
            "first_divergence_round": fd[0] if fd else None,
            "first_divergence_cause": fd[1] if fd else "",
            "first_divergence": fd[2] if fd else "",
            "simulate_s": self.simulate_s, "compile_s": self.compile_s,
        }


def compare_fusion_logs(dump: GpuCompileDump, *, model: Any = "xla-gpu", rtol: float = 0.01) -> FusionConformance:
    """Run `simulate_fusion` on XLA's input to priority fusion (`dump.before_fusion_text`) for the
    dump's device and compare with XLA's log and output (see the module doc)."""
    from ..hlo import parse_hlo
    from ._simulate import simulate_fusion

    before = parse_hlo(dump.before_fusion_text)
    t0 = time.perf_counter()
    ours = simulate_fusion(before, device=dump.device, model=model, price_totals=False,
                           unique_ids=dump.unique_ids or None, multi_output=False)  # against after_priority-fusion
    simulate_s = time.perf_counter() - t0
    xla_log = read_fusion_log(dump.fusion_log_text)
    cx, co = _canonical(xla_log), _canonical(ours.log)

    # candidate prices: each XLA price against ours for the same (producer, consumers), nearest in order
    ours_prices: dict[tuple, list[tuple]] = {}
    for e in co:
        if e[0] == "price":
            ours_prices.setdefault((e[1], e[2]), []).append(e)
    rows = []
    for x in cx:
        if x[0] != "price":
            continue
        cands = ours_prices.get((x[1], x[2]), [])
        best = None
        for o in cands:
            if _close(o[3], x[3], rtol) and _close(o[4], x[4], rtol):
                best = o
                break
        if best is None and cands:
            best = cands[0]
        within = (best is not None and _close(best[3], x[3], rtol) and _close(best[4], x[4], rtol))
        rows.append((x[6], ", ".join(x[7]), x[3] * 1e6, x[4] * 1e6,
                     best[3] * 1e6 if best else math.nan, best[4] * 1e6 if best else math.nan,
                     within if best else math.nan, id(x)))

    # first divergence, round by round
    # computation by computation (XLA's log names none: producers are named uniquely in the module)
    comp_of = {i.name: c.name for c, i in before.instructions()}
    for e in xla_log.itertuples(index=False):
        if e.event == "fusion":
            comp_of.setdefault(e.fusion, comp_of.get(str(e.consumers).split(", ")[0], ""))
    order = list(dict.fromkeys(ours.log.computation))
    by_comp_x: dict[str, list] = {}
    for e in cx:
        by_comp_x.setdefault(comp_of.get(e[6], ""), []).append(e)
    by_comp_o: dict[str, list] = {}
    for e, comp in zip(co, ours.log.computation):
        by_comp_o.setdefault(comp, []).append(e)
    order += [c for c in by_comp_x if c not in order]
    seen = {e[6] for e in co}
    triton = frozenset(i.name for _, i in before.instructions() if _is_generic_triton(i))
    first = None
    last_price: dict = {}

    def priority_of(key) -> str:
        e = last_price.get(key)
        return "unpriced" if e is None else f"{(e[8] - e[9]) * 1e6:.4g} us"
    rounds = 0
    position: dict[int, int] = {}  # id(XLA event) -> its round, counted over the computations in order
    first_at = math.inf
    for comp in order:
        sx, so = _segments(by_comp_x.get(comp, [])), _segments(by_comp_o.get(comp, []))
        for r, seg in enumerate(sx):
            for e in seg:
                position[id(e)] = rounds + r
        for r in range(max(len(sx), len(so))):
            for e in (so[r - 1] if 0 < r <= len(so) else []):
                if e[0] == "price":
                    last_price[e[1]] = e
            d = _match_segment(sx[r] if r < len(sx) else [], so[r] if r < len(so) else [], rtol, seen, triton,
                               priority_of)
            if d is not None and first is None:
                first = (rounds + r, d[0], f"{comp}: {d[1]}")
                first_at = rounds + r
        rounds += max(len(sx), len(so))

    prices = pd.DataFrame(
        [r[:-1] + (position.get(r[-1], -1) < first_at,) for r in rows],
        columns=["producer", "consumers", "xla_unfused_us", "xla_fused_us", "ours_unfused_us", "ours_fused_us",
                 "within", "before_divergence"])

    # fusion order and final partition
    fx = [(e[1], e[2]) for e in cx if e[0] == "fusion"]
    fo = [(e[1], e[2]) for e in co if e[0] == "fusion"]
    after = parse_hlo(dump.after_fusion_text) if dump.after_fusion_text else None
    px = _kernel_sets(after, xla_log) if after is not None else {}
    po = _kernel_sets(ours.module, ours.log)
    only_x = [k for k in px if px.get(k) != po.get(k)]
    only_o = [k for k in po if po.get(k) != px.get(k)]
    diff = tuple([f"XLA {px[k]} {{{', '.join(sorted(k)[:6])}}}" for k in only_x[:3]]
                 + [f"ours {po[k]} {{{', '.join(sorted(k)[:6])}}}" for k in only_o[:3]])
    return FusionConformance(
        program=dump.program, device=dump.device, prices=prices, first_divergence=first,
        rounds=rounds, same_partition=bool(px) and px == po,
        kernels_xla=len(px), kernels_ours=len(po), partition_diff=diff,
        fusions_xla=len(fx), fusions_ours=len(fo), same_fusion_order=fx == fo,
        simulate_s=simulate_s, compile_s=dump.compile_s,
    )


def _is_generic_triton(instr) -> bool:
    """A kCustom Triton fusion other than a GEMM (`SoftmaxRewriterTriton`, the block-level rewriter)."""
    if instr.opcode != "fusion" or str(instr.attribute("kind", "")) != "kCustom":
        return False
    config = instr.raw_attributes.get("backend_config", "")
    return '"__triton"' in config or '"kind":"__triton"' in config


def _kernel_sets(module, log: pd.DataFrame) -> dict[frozenset, str]:
    """Kernels of a fused module (`fusible_computations`) as sets of input instructions -> fusion kind
    (`op` for an unfused instruction), members followed through the run's fusion events."""
    from ..analysis.opcodes import NOT_KERNELS_IN_FUSION_PASS
    from ._simulate import fusible_computations

    members = _Members()
    for e in log.itertuples(index=False):
        if e.event == "fusion":
            members.fuse(e.producer, str(e.consumers).split(", ")[0], e.fusion)
    # computations reachable from the entry (XLA's dump before DCE keeps bodies of fusions it merged)
    live, todo = set(), [module.entry]
    while todo:
        c = todo.pop()
        if c is None or id(c) in live:
            continue
        live.add(id(c))
        todo.extend(cc for i in c.instructions for cc in i.called_computations)
    unlogged: dict = {}

    def key_of(i) -> frozenset:
        key = members.key(i.name)
        if i.opcode == "fusion" and (key == frozenset((i.name,)) or i.name in members.fused_away):
            # made outside the log (small constants are fused at the end unlogged), or under the name of a
            # producer fused away earlier (a producer that stayed for its bitcast users is keyed so on
            # both sides): known by its operands
            k = unlogged.get(id(i))
            if k is None:
                ops = sorted(",".join(sorted(key_of(o))) for o in i.operands if o.opcode != "constant")
                k = unlogged[id(i)] = frozenset((f"{i.shape} <- [{' | '.join(ops)}]",))
            return k
        return key

    out: dict[frozenset, str] = {}
    for comp in fusible_computations(module):
        if id(comp) not in live:
            continue
        for i in comp.instructions:
            if i.opcode in NOT_KERNELS_IN_FUSION_PASS or i.opcode in ("bitcast", "constant", "parameter", "tuple",
                                                                      "get-tuple-element"):
                continue
            key = key_of(i)
            # bitcasts fused along are layout-only: leave them out of the comparison
            out[frozenset(n for n in key if not n.startswith("bitcast")) or key] = (
                str(i.attribute("kind", "kLoop")) if i.opcode == "fusion" else "op")
    return out


def summarize(results: list[FusionConformance]) -> dict[str, Any]:
    """Headline figures over many modules: share of candidates within tolerance, share of modules with
    the same partition, first-divergence causes by frequency."""
    n_cand = sum(len(r.prices) for r in results)
    within = sum(int(r.prices["within"].fillna(False).astype(bool).sum()) for r in results if len(r.prices))
    matched = sum(int(r.prices["ours_fused_us"].notna().sum()) for r in results if len(r.prices))
    causes = Counter(r.first_divergence[1] for r in results if r.first_divergence)
    pre = [r.prices[r.prices["before_divergence"]] for r in results if len(r.prices)]
    n_pre = sum(len(p) for p in pre)
    within_pre = sum(int(p["within"].fillna(False).astype(bool).sum()) for p in pre)
    return {
        "modules": len(results),
        "candidates_xla": n_cand,
        "candidates_with_our_price": matched,
        "candidates_within_1pct": within,
        "share_within_1pct": within / n_cand if n_cand else math.nan,
        "candidates_before_divergence": n_pre,
        "within_1pct_before_divergence": within_pre,
        "same_partition": sum(r.same_partition for r in results),
        "share_same_partition": sum(r.same_partition for r in results) / len(results) if results else math.nan,
        "no_divergence": sum(r.first_divergence is None for r in results),
        "first_divergence_causes": dict(causes.most_common()),
    }


# ---------------------------------------------------------------------------
# Multi-output fusion: our pass on XLA's input to it, against XLA's output

# XLA names an instruction cloned into a multi-output fusion after the original, with `.clone` (and a
# number when that is taken); a lone instruction fused in keeps its name plus a number.
_CLONE_SUFFIX = re.compile(r"\.clone(\.\d+)?$")
_NUMBER_SUFFIX = re.compile(r"\.\d+$")


def _mof_kernels(module) -> dict[str, Any]:
    """Top-level kernels of `module`'s fusible computations by name (fusions and unfused ops)."""
    from ..analysis.opcodes import NOT_KERNELS_IN_FUSION_PASS
    from ._simulate import fusible_computations

    skip = set(NOT_KERNELS_IN_FUSION_PASS) | {"bitcast", "constant", "parameter", "tuple", "get-tuple-element"}
    return {i.name: i for comp in fusible_computations(module) for i in comp.instructions if i.opcode not in skip}


def _kind_of(instr) -> str:
    return str(instr.attribute("kind", "kLoop")) if instr.opcode == "fusion" else "op"


def _xla_mof_groups(before_kernels: dict, after) -> tuple[dict[frozenset, str], list[str]]:
    """XLA's kernels after multi-output fusion as sets of the kernels before it -> fusion kind, and the
    kernels before that could not be found after. A merged kernel is recognized by the names of its
    body's instructions (`_CLONE_SUFFIX`)."""
    owner: dict[str, str] = {}
    for name, k in before_kernels.items():
        body = k.fused_computation
        if body is None:
            owner[name] = name
            continue
        for i in body.instructions:
            if i.opcode != "parameter":
                owner[i.name] = name
    after_kernels = _mof_kernels(after)
    lone: dict[tuple[str, str], list[str]] = {}  # unfused kernels merged away, by opcode and name less its number
    for name, k in before_kernels.items():
        if k.fused_computation is None and name not in after_kernels:
            lone.setdefault((k.opcode, _NUMBER_SUFFIX.sub("", name)), []).append(name)
    groups: dict[frozenset, str] = {}
    found: set[str] = set()
    for name, k in after_kernels.items():
        members = {name} if name in before_kernels else set()
        body = k.fused_computation
        if body is not None and body.root is not None and body.root.opcode == "tuple":
            for i in body.instructions:
                if i.opcode == "parameter":
                    continue
                base = i.name
                while _CLONE_SUFFIX.search(base):
                    base = _CLONE_SUFFIX.sub("", base)
                k2 = owner.get(base)
                if k2 is None:
                    # a lone instruction cloned in: XLA renumbers its name ("abs.1.0" -> "abs.1.1")
                    ops = [n for n in lone.get((i.opcode, _NUMBER_SUFFIX.sub("", i.name)), ()) if n not in found]
                    k2 = ops[0] if ops else None
                if k2 is not None and (k2 == name or k2 not in after_kernels):
                    members.add(k2)
                    found.add(k2)
        if not members:
            members = {name}  # made by the pass (a consumer wrapped in a fusion): known by its members only
        found |= members
        groups[frozenset(members)] = _kind_of(k)
    missing = [n for n in before_kernels if n not in found]
    return groups, missing


@dataclass(frozen=True)
class MultiOutputConformance:
    """How our multi-output fusion, run on XLA's input to it, agrees with XLA's output for one module.

    Kernels are compared as sets of the kernels before the pass. `same_partition`: the same sets
    with the same fusion kinds; `same_members`: the same sets, kinds aside. `merges_xla`,
    `merges_ours`: kernels merged away. `first_divergence`: `(cause, what)` of the first merge one
    side made and the other did not (ours in the order we made them; then XLA's), the cause being
    the rule that refused it on our side, `"ours only: <kind>"`, or `"other consumer"` (we kept a
    producer as an output of one consumer, XLA of another: among candidates of equal rank XLA takes
    the first in its own order of users, which its dump does not show); None when the partitions agree.
    `unmapped`: kernels before the pass that XLA's output could not be traced back to.
    """

    program: str
    device: str
    kernels_before: int
    kernels_xla: int
    kernels_ours: int
    same_partition: bool
    same_members: bool
    first_divergence: tuple[str, str] | None
    merges_xla: int = 0
    merges_ours: int = 0
    unmapped: tuple[str, ...] = ()
    simulate_s: float = math.nan

    def summary(self) -> dict[str, Any]:
        fd = self.first_divergence
        return {
            "program": self.program, "device": self.device, "kernels_before": self.kernels_before,
            "kernels_xla": self.kernels_xla, "kernels_ours": self.kernels_ours,
            "merges_xla": self.merges_xla, "merges_ours": self.merges_ours,
            "same_partition": self.same_partition, "same_members": self.same_members,
            "first_divergence_cause": fd[0] if fd else "", "first_divergence": fd[1] if fd else "",
            "unmapped": len(self.unmapped), "simulate_s": self.simulate_s,
        }


def compare_multi_output(dump: GpuCompileDump, *, model: Any = "xla-gpu") -> MultiOutputConformance:
    """Run our multi-output fusion (`fusion._multi_output`) on XLA's input to its multi-output
    fusion (`dump.before_mof_text`) for the dump's device, and compare the kernels with XLA's
    output (`dump.after_mof_text`)."""
    from ..devices import get_device
    from ..hlo import parse_hlo
    from ..models import get_model
    from ._multi_output import MultiOutputFusionPass
    from ._simulate import fusible_computations

    if not dump.before_mof_text or not dump.after_mof_text:
        raise GpuCompileError(f"{dump.program}: no module around multi-output fusion was dumped")
    before = parse_hlo(dump.before_mof_text)
    after = parse_hlo(dump.after_mof_text)
    before_kernels = _mof_kernels(before)
    xla, missing = _xla_mof_groups(before_kernels, after)

    work = parse_hlo(dump.before_mof_text)
    t0 = time.perf_counter()
    mof = MultiOutputFusionPass(get_model(model), get_device(dump.device))
    mof.run(fusible_computations(work))
    simulate_s = time.perf_counter() - t0
    current = {n: {n} for n in before_kernels}
    for st in mof.steps:
        current[st.fusion] = current.pop(st.into, {st.into}) | current.pop(st.fused, {st.fused})
    work_kernels = _mof_kernels(work)
    ours = {frozenset(m): _kind_of(work_kernels[n]) if n in work_kernels else "?" for n, m in current.items()}

    def group_of(groups, name):
        return next((g for g in groups if name in g), frozenset((name,)))

    first = None
    if xla != ours:
        # our merges in order, then XLA's merges we did not make
        held = {n: {n} for n in before_kernels}
        for st in mof.steps:
            x, y = held.pop(st.into, {st.into}), held.pop(st.fused, {st.fused})
            held[st.fusion] = x | y
            if group_of(xla, min(x)) != group_of(xla, min(y)):
                other = group_of(xla, min(y)) - y
                if st.kind == "producer-consumer" and other:
                    # XLA kept the producer as an output of another consumer: of candidates of equal rank
                    # it takes the first in its own order of users, which the dumped text does not carry
                    first = ("other consumer", f"'{st.fused}' into '{st.into}' ({st.computation}); XLA: with "
                                               f"{{{', '.join(sorted(other)[:6])}}}")
                else:
                    first = (f"ours only: {st.kind}", f"'{st.fused}' into '{st.into}' ({st.computation})")
                break
        if first is None:
            for g in xla:
                if len(g) < 2 or g in ours:
                    continue
                names = sorted(g)
                pairs = [(x, y) for x in names for y in names if x < y and group_of(ours, x) != group_of(ours, y)]
                if not pairs:
                    continue
                why = _our_refusal(mof.rejections, pairs)
                first = (why[0], why[1]) if why else ("not tried", f"XLA merged {{{', '.join(names[:6])}}}")
                break
        if first is None:
            diff = [g for g in xla if xla[g] != ours.get(g)]
            if diff:
                g = diff[0]
                first = ("fusion kind", f"{{{', '.join(sorted(g)[:6])}}}: XLA {xla[g]}, ours {ours.get(g, '-')}")
    return MultiOutputConformance(
        program=dump.program, device=dump.device, kernels_before=len(before_kernels), kernels_xla=len(xla),
        kernels_ours=len(ours), same_partition=xla == ours, same_members=set(xla) == set(ours),
        first_divergence=first, merges_xla=len(before_kernels) - len(xla),
        merges_ours=len(before_kernels) - len(ours), unmapped=tuple(missing), simulate_s=simulate_s)


def _our_refusal(rejections, pairs) -> tuple[str, str] | None:
    """The last rule our pass gave for refusing one of `pairs` (names of kernels before the pass)."""
    wanted = {frozenset(p) for p in pairs}
    for comp, kind, a, b, why in reversed(rejections):
        if frozenset((a, b)) in wanted:
            return why.rule, f"{kind} '{a}' and '{b}' ({comp}): {why.detail}"
    return None


def summarize_multi_output(results: list[MultiOutputConformance]) -> dict[str, Any]:
    """Headline figures over many modules: the share with XLA's partition, and divergence causes."""
    causes = Counter(r.first_divergence[0] for r in results if r.first_divergence)
    n = len(results)
    return {
        "modules": n,
        "same_partition": sum(r.same_partition for r in results),
        "share_same_partition": sum(r.same_partition for r in results) / n if n else math.nan,
        "same_members": sum(r.same_members for r in results),
        "merges_xla": sum(r.merges_xla for r in results),
        "merges_ours": sum(r.merges_ours for r in results),
        "modules_with_merges_xla": sum(r.merges_xla > 0 for r in results),
        "unmapped_kernels": sum(len(r.unmapped) for r in results),
        "first_divergence_causes": dict(causes.most_common()),
    }


def _preset_names() -> set[str]:
    from ..devices import device_names

    return set(device_names())


if __name__ == "__main__":  # the compile process (`_compile_in_child`)
    _child_main(json.loads(sys.argv[1]))
