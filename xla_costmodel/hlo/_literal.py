"""The range checks XLA's parser applies to each value of a literal.

From `HloParserImpl::CheckParsedValueIsInRange` and `SetValueInLiteralHelper`:

- integers must fit the element type (an unsigned type takes the 64-bit
  pattern of the value: `u64[] constant(-1)` is 2^64-1); `pred` takes any
  integer;
- a float is first rounded to the element type; it is refused only when the
  rounding overflows (f16 65519 rounds to 65504 and is kept, 65520 rounds to
  infinity and is refused); inf and nan are always accepted;
- complex parts are checked against the component type's range as written;
- a NaN payload must fit the type's payload bits; types with a single NaN
  take no payload.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np

_INT_RANGES = {
    "s1": (-1, 0), "s2": (-2, 1), "s4": (-8, 7), "s8": (-(1 << 7), (1 << 7) - 1),
    "s16": (-(1 << 15), (1 << 15) - 1), "s32": (-(1 << 31), (1 << 31) - 1), "s64": (-(1 << 63), (1 << 63) - 1),
    "u1": (0, 1), "u2": (0, 3), "u4": (0, 15), "u8": (0, 255), "u16": (0, 65535), "u32": (0, (1 << 32) - 1),
    "u64": (0, (1 << 64) - 1),
}
# NaN payload bits (XLA's NanPayloadBits: the mantissa bits of types with signaling NaNs, else 0).
_NAN_PAYLOAD_BITS = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52, "f8e5m2": 2, "f8e4m3": 3, "f8e3m4": 4,
                     "c64": 23, "c128": 52}
_DOUBLE_QUIET = 1 << 51  # QuietNanWithoutPayload<double>
_PAYLOAD = re.compile(r"\(0x([0-9a-fA-F]+)\)")


def _ml_dtypes():
    import ml_dtypes

    return ml_dtypes


# XLA's narrow float types, by their `ml_dtypes` names.
_ML_FLOAT_NAMES = {"bf16": "bfloat16", "f8e5m2": "float8_e5m2", "f8e4m3": "float8_e4m3", "f8e4m3fn": "float8_e4m3fn",
                   "f8e4m3b11fnuz": "float8_e4m3b11fnuz", "f8e3m4": "float8_e3m4", "f8e5m2fnuz": "float8_e5m2fnuz",
                   "f8e4m3fnuz": "float8_e4m3fnuz", "f4e2m1fn": "float4_e2m1fn", "f8e8m0fnu": "float8_e8m0fnu",
                   "f6e2m3fn": "float6_e2m3fn", "f6e3m2fn": "float6_e3m2fn"}
_NUMPY_NAMES = {"pred": "bool", "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64", "u8": "uint8",
                "u16": "uint16", "u32": "uint32", "u64": "uint64", "f16": "float16", "f32": "float32",
                "f64": "float64"}
_DTYPES: dict[str, object] = {}


def numpy_dtype(et: str):
    """The numpy dtype of an HLO element type (`ml_dtypes`' for bf16 and the 8-, 6- and 4-bit floats), or
    None for the others (complex, sub-byte integers, token, opaque)."""
    dt = _DTYPES.get(et)
    if dt is None:
        if et in _NUMPY_NAMES:
            dt = np.dtype(_NUMPY_NAMES[et])
        elif et in _ML_FLOAT_NAMES:
            try:
                dt = np.dtype(getattr(_ml_dtypes(), _ML_FLOAT_NAMES[et]))
            except (ImportError, AttributeError):  # jax depends on ml_dtypes; an older one may lack a type
                return None
        else:
            return None
        _DTYPES[et] = dt
    return dt


_dtype = numpy_dtype  # the float types whose literal values the range checks below round


def _finite_max(et: str) -> float:
    if et in ("f16", "f32", "f64"):
        return float(np.finfo(_dtype(et)).max)
    return float(_ml_dtypes().finfo(_dtype(et)).max)


def _g(v: float) -> str:
    """A double as absl::StrCat writes it (%g with 6 digits)."""
    return f"{v:g}"


def _payload_of(token: str) -> int:
    """The NaN payload of a `nan` token as XLA's GetNanPayload reads it."""
    m = _PAYLOAD.search(token)
    return int(m.group(1), 16) if m else _DOUBLE_QUIET


def check_literal_value(et: str, value, token: str, shape, index: int, nan_texts=None) -> str | None:
    """Why XLA refuses `value` (read from `token`) at linear `index` of a literal of `shape`, or None."""
    if isinstance(value, bool):
        return None
    if et == "pred":
        return None
    if et in _INT_RANGES:
        lo, hi = _INT_RANGES[et]
        if et[0] == "u":
            if value % (1 << 64) > hi:
                return (f"value {value} is out of range for literal's primitive type {et.upper()} namely "
                        f"[0, {hi}].")
            return None
        if not lo <= value <= hi:
            return f"value {value} is out of range for literal's primitive type {et.upper()} namely [{lo}, {hi}]."
        return None
    if et in ("c64", "c128"):
        component = "f32" if et == "c64" else "f64"
        top = _finite_max(component)
        for part, v in (("real", value.real), ("imaginary", value.imag)):
            if math.isfinite(v) and not -top <= v <= top:
                return (f"{part} part {_g(v)} is out of range for literal's primitive type {et.upper()}, "
                        f"namely [{_g(-top)}, {_g(top)}].")
        return _nan_problem(et, value.real, token, shape, index)
    value = float(value)
    if math.isfinite(value):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            rounded = float(np.array(value, dtype=np.float64).astype(_dtype(et)))
        if not math.isfinite(rounded):
            top = _finite_max(et)
            return (f"value {_g(value)} is out of range for literal's primitive type {et.upper()} namely "
                    f"[{_g(-top)}, {_g(top)}].")
        return None
    return _nan_problem(et, value, token, shape, index)


def _nan_problem(et: str, value: float, token: str, shape, index: int) -> str | None:
    if not math.isnan(value):
        return None
    payload = _payload_of(token)
    bits = _NAN_PAYLOAD_BITS.get(et, 0)
    if bits:
        if payload == _DOUBLE_QUIET:
            return None
        largest = (1 << bits) - 1
        if payload > largest:
            return (f"tries to set NaN payload 0x{payload:x} to a literal in shape {shape.without_layout()} at "
                    f"linear index {index}, but the NaN payload is out of range (0x{largest:x})")
        return None
    if payload != _DOUBLE_QUIET:
        return (f"tries to set NaN payload 0x{payload:x} to a literal in shape {shape.without_layout()} at "
                f"linear index {index}, but {et} does not support payloads")
    return None
