"""FRONT-END HELPERS: small additions to `xla_costmodel.hlo` that the cost analysis needs.

They live here, not in `xla_costmodel/hlo/`, because that package has another
owner. Each reads a private slot of `HloInstruction` when it is there and
falls back to the public API otherwise, so a change in the front end can only
make them slower, never wrong. Candidates for the front end proper:

- `may_have_attribute(instr, name)`: "could `instr` have attribute `name`?"
  without splitting a lazily parsed attribute list (the fast parser keeps the
  list unsplit until someone asks; splitting costs more than costing the
  instruction, and a module has hundreds of thousands of instructions).
- `int_list_attribute(instr, name)`: an integer-list attribute such as
  `lhs_contracting_dims={1}` or `dimensions={1,0}` without the general
  attribute lexer, which costs ~20 us per value.
- `word_attribute(instr, name)`: a one-word attribute such as `kind=kLoop`,
  likewise.
- `backend_config(instr)`: the backend config as a dict, read as XLA's
  protobuf JSON reader reads it (bare keys allowed).
- `compiled_for(module)`: which backend's XLA optimized a module, from the
  marks only its pipeline leaves.
"""

from __future__ import annotations

import json
import re

__all__ = ["backend_config", "compiled_for", "custom_call_target", "fusion_backend_kind", "int_list_attribute",
           "may_have_attribute", "word_attribute"]

_INT_LIST = re.compile(r"\s*\{\s*(-?\d+(?:\s*,\s*-?\d+)*)?\s*\}\s*")


def may_have_attribute(instr, name: str) -> bool:
    """False only when `instr` certainly has no attribute `name` (cheap)."""
    store = getattr(instr, "_raw_store", None)
    if isinstance(store, dict):
        return name in store
    return instr.has_attribute(name)


def int_list_attribute(instr, name: str, default=()):
    """The integer list attribute `name` of `instr` as a tuple, or `default` when absent."""
    cache = getattr(instr, "_cache", None)
    if cache and name in cache:
        return cache[name]
    if not may_have_attribute(instr, name):
        return default
    raw = None
    try:
        raw = instr._raw.get(name)
    except AttributeError:
        pass
    if isinstance(raw, str):
        m = _INT_LIST.fullmatch(raw)
        if m:
            body = m.group(1)
            return tuple(int(x) for x in body.split(",")) if body else ()
    value = instr.attribute(name, default)
    if isinstance(value, int):
        return (value,)
    return tuple(value) if value is not None else default


_WORD = re.compile(r"[\w$.\-]+")


def word_attribute(instr, name: str, default=None):
    """A one-word attribute value (`kind=kLoop` -> `"kLoop"`), or `default` when absent."""
    cache = getattr(instr, "_cache", None)
    if cache and name in cache:
        return cache[name]
    store = getattr(instr, "_raw_store", None)
    if isinstance(store, dict):
        raw = store.get(name)
        if raw is None and name not in store:
            return default
        if isinstance(raw, str):
            word = raw.strip()
            if _WORD.fullmatch(word):
                return word
    return instr.attribute(name, default)


def backend_config(instr) -> dict | None:
    """The instruction's `backend_config` as a dict, or None; XLA's protobuf JSON reader also takes
    bare keys (`{kind: "__triton"}`), so this does too."""
    cfg = instr.attribute("backend_config", None) if instr.has_attribute("backend_config") else None
    if isinstance(cfg, str):
        try:
            cfg = json.loads(re.sub(r'([{,]\s*)([A-Za-z_][A-Za-z0-9_]*)\s*:', r'\1"\2":', cfg))
        except ValueError:
            return None
    return cfg if isinstance(cfg, dict) else None


def custom_call_target(instr) -> str:
    """A custom call's `custom_call_target` ("" for any other instruction or none written): the one
    reader of the target, for the cost analysis, every model and the fitted features."""
    if instr.opcode != "custom-call" or not instr.has_attribute("custom_call_target"):
        return ""
    return str(instr.attribute("custom_call_target", "") or "")


def fusion_backend_kind(instr) -> str:
    """The kind XLA:GPU writes into a fusion's `backend_config.fusion_backend_config.kind`
    (`"__triton"`, `"__triton_gemm"`, `"__triton_nested_gemm_fusion"`, `"__cudnn$fusion"`, ...),
    "" when it wrote none: the one reader of it. (XLA:CPU's `fusion_config` is read the same way.)"""
    if instr.opcode != "fusion":
        return ""
    cfg = backend_config(instr)
    if cfg is None:
        return ""
    fc = cfg.get("fusion_backend_config") or cfg.get("fusion_config") or {}
    return str(fc.get("kind", "") or "") if isinstance(fc, dict) else ""


# Marks only one backend's compiler leaves in an optimized module: library fusions and backend
# configs of XLA:CPU, library custom calls and backend configs of XLA:GPU.
_CPU_FUSION_MARKS = ("__ynn_fusion", "__onednn", "outer_dimension_partitions")
_GPU_FUSION_MARKS = ("fusion_backend_config", "operation_queue_id")
_CPU_TARGETS = ("lapack_", "__onednn$", "__xnn")
_GPU_TARGETS = ("__cublas$", "__cudnn$", "__triton", "cusolver_", "__gpu$", "cu_threefry")


def compiled_for(module) -> tuple[str, str] | None:
    """The kind of backend (`"cpu"` or `"gpu"`) whose XLA optimized `module`, and the evidence, or None.

    Read from marks only that backend's pipeline leaves: XLA:CPU's library
    fusions (YNNPACK `__ynn_fusion`, oneDNN) and its `outer_dimension_partitions`
    backend config, LAPACK and oneDNN custom calls; XLA:GPU's fusion backend
    configs and its cuBLAS, cuDNN, cuSolver and Triton calls. None when the
    module shows none of them (unoptimized, or optimized without any).
    """
    for _comp, instr in module.instructions():
        op = instr.opcode
        if op == "fusion" and may_have_attribute(instr, "backend_config"):
            text = str(instr.raw_attributes.get("backend_config", ""))
            for kind, marks in (("cpu", _CPU_FUSION_MARKS), ("gpu", _GPU_FUSION_MARKS)):
                found = next((m for m in marks if m in text), None)
                if found is not None:
                    return kind, f"fusion '{instr.name}' carries XLA:{kind.upper()}'s {found}"
        elif op == "custom-call":
            target = custom_call_target(instr)
            for kind, prefixes in (("cpu", _CPU_TARGETS), ("gpu", _GPU_TARGETS)):
                if target.startswith(prefixes):
                    return kind, f"custom call '{instr.name}' targets XLA:{kind.upper()}'s {target}"
    return None
