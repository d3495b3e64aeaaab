"""Calibration-dataset rows as kernels (`kernel_from_row`) and feature tables (`kernel_features`)."""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from typing import Any

import pandas as pd

from ._counting import features_of
from ._features import FEATURES, TASK_BYTES, FeatureError, device_facts


# --------------------------------------------------------------------------- dataset rows

_MODULE_CACHE: "OrderedDict[str, Any]" = OrderedDict()
_MODULE_CACHE_SIZE = 64


def _parse_cached(text: str, source: str):
    from ..hlo import parse_hlo

    key = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
    mod = _MODULE_CACHE.get(key)
    if mod is None:
        mod = parse_hlo(text, source=source)
        _MODULE_CACHE[key] = mod
        if len(_MODULE_CACHE) > _MODULE_CACHE_SIZE:
            _MODULE_CACHE.popitem(last=False)
    else:
        _MODULE_CACHE.move_to_end(key)
    return mod


_LINE_RE = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s+=\s+(.*?)\s+([a-z][\w\-]*)\((.*)$")
_SIG_RE = re.compile(r"^%?([\w.\-]+)\s+\((.*)\)\s+->\s+(.*?)\s*\{\s*$")


def _split_top(text: str) -> list[str]:
    """Split at top-level commas (outside brackets/braces/parentheses)."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _module_from_kernel_text(hlo_text: str, where: str):
    """Parse a dataset row's `hlo_text` (an instruction line and the computations it calls).

    The operands of the instruction are not in the text; for a fusion their
    shapes are the fused computation's parameter types, so an entry
    computation with one parameter per operand is made up around the line.
    """
    lines = hlo_text.strip().splitlines()
    if not lines:
        raise FeatureError(f"{where}: empty hlo_text")
    head = lines[0]
    m = _LINE_RE.match(head)
    if not m:
        raise FeatureError(f"{where}: the first line of hlo_text is not an instruction: {head[:120]!r}")
    name = m.group(1)
    rest = hlo_text.strip()[len(head):]
    calls = re.search(r"calls=%?([\w.\-]+)", head)
    operands = _split_top(m.group(4).split(")", 1)[0]) if m.group(4) else []
    operand_names = [o.split()[-1].lstrip("%") for o in operands if o]
    param_types: list[str] = []
    if calls:
        comp = calls.group(1)
        sig = re.search(r"^%?" + re.escape(comp) + r"\s+\((.*)\)\s+->", rest, re.M)
        if sig:
            for part in _split_top(sig.group(1)):
                if ":" in part:
                    param_types.append(part.split(":", 1)[1].strip())
        if len(param_types) != len(operand_names):
            # Fall back to the parameter instructions of the fused computation.
            body = re.search(r"^%?" + re.escape(comp) + r"\s+\(.*?\{\n(.*?)^\}", rest, re.M | re.S)
            found: dict[int, str] = {}
            if body:
                for line in body.group(1).splitlines():
                    pm = re.match(r"\s*%?[\w.\-]+\s+=\s+(.*?)\s+parameter\((\d+)\)", line)
                    if pm:
                        found[int(pm.group(2))] = pm.group(1)
            param_types = [found[i] for i in sorted(found)]
    if len(param_types) != len(operand_names):
        raise FeatureError(
            f"{where}: cannot tell the operand shapes of '{name}' from hlo_text alone "
            f"(not a fusion); give the row's module_text"
        )
    params = "\n".join(
        f"  {n} = {t} parameter({i})" for i, (n, t) in enumerate(zip(operand_names, param_types))
    )
    head_root = head.strip()
    if not head_root.startswith("ROOT"):
        head_root = "ROOT " + head_root
    text = f"HloModule kernel_text\n\n{rest.strip()}\n\nENTRY %kernel_entry {{\n{params}\n  {head_root}\n}}\n"
    return _parse_cached(text, where), name


def kernel_from_row(row, where: str = "row"):
    """The kernel instruction of one dataset row, parsed from its HLO text.

    Uses `module_text` (the whole compiled module, which knows the operand
    shapes of every kind of kernel) when the row has it, else `hlo_text`.

    **Returns:** the `HloInstruction`. **Raises:** `FeatureError` naming the row.
    """
    get = row.get if hasattr(row, "get") else (lambda k, d=None: getattr(row, k, d))
    name = get("hlo_op", None)
    module_text = get("module_text", None)
    hlo_text = get("hlo_text", None)
    if isinstance(module_text, str) and module_text.strip() and isinstance(name, str) and name:
        try:
            mod = _parse_cached(module_text, f"{where} (module_text)")
        except ValueError as exc:
            raise FeatureError(f"{where}: module_text does not parse: {exc}") from None
        for comp in mod.computations:
            if name in comp:
                return comp.instruction(name)
        raise FeatureError(f"{where}: instruction '{name}' is not in module_text")
    if not isinstance(hlo_text, str) or not hlo_text.strip():
        raise FeatureError(f"{where}: no hlo_text (nor module_text) to compute features from")
    try:
        mod, iname = _module_from_kernel_text(hlo_text, where)
    except ValueError as exc:
        if isinstance(exc, FeatureError):
            raise
        raise FeatureError(f"{where}: hlo_text does not parse: {exc}") from None
    return mod.entry.instruction(iname)


def kernel_features(kernels, device="host", *, task_bytes: int = TASK_BYTES) -> pd.DataFrame:
    """The feature table of kernels, one row per kernel, columns `FEATURES`.

    **Arguments:**

    - `kernels`: an `HloInstruction`, a list of them, or calibration-dataset
      rows (a DataFrame, a Series or a dict with `hlo_text`, plus `hlo_op`
      and `module_text` when available).
    - `device`: `DeviceSpec` or name whose cache sizes and cores classify
      accesses (default `"host"`).
    - `task_bytes`: output bytes per parallel task of an emitted loop.

    **Returns:** a DataFrame of floats; its index is the rows' index for a
    DataFrame, else the kernel names.

    **Raises:** `FeatureError` naming the kernel or row that cannot be read.
    """
    dev = device_facts(device)
    if isinstance(kernels, pd.DataFrame):
        rows = []
        for idx, row in kernels.iterrows():
            k = kernel_from_row(row, where=f"row {idx}" + (f" ({row['case']})" if "case" in row else ""))
            rows.append(features_of(k, dev, task_bytes=task_bytes))
        return pd.DataFrame(rows, index=kernels.index, columns=list(FEATURES), dtype=float)
    if isinstance(kernels, (pd.Series, dict)):
        k = kernel_from_row(kernels)
        name = kernels.get("hlo_op", k.name)
        return pd.DataFrame([features_of(k, dev, task_bytes=task_bytes)], index=[name], columns=list(FEATURES), dtype=float)
    if hasattr(kernels, "opcode"):
        kernels = [kernels]
    ks = list(kernels)
    rows = [features_of(k, dev, task_bytes=task_bytes) for k in ks]
    return pd.DataFrame(rows, index=[k.name for k in ks], columns=list(FEATURES), dtype=float)
