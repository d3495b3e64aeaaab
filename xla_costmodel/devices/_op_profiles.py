"""XLA's per-op clock-cycle tables and the rule XLA uses to pick one for a GPU.

The tables are `kDeviceHloOpProfiles` from XLA's
`xla/service/gpu/model/hlo_op_profiles_data.h`, one JSON file per profile under
`data/op_profiles/` (each file's `"source"` says which XLA build and commit it
was taken from and how it was checked). XLA's `GpuHloCostAnalysis` prices an
elementwise instruction at `table[(opcode, output dtype)]` "flops" per element,
and at 3 when the pair is not in the table.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from importlib import resources
from types import MappingProxyType
from typing import Any

__all__ = [
    "DEFAULT_OP_CYCLES",
    "DEFAULT_OP_PROFILE",
    "load_op_profile",
    "op_profile_name_for",
    "op_profile_names",
    "op_profile_source",
]

# `HloOpProfiles::Singleton()` loads the tables with "sm_86" as the default
# profile, used for every compute capability that has no table of its own.
DEFAULT_OP_PROFILE = "sm_86"

# `GpuHloCostAnalysis::GetFlopsPerElementwiseOpElement`: cost of an
# (opcode, dtype) pair that the device's profile does not list.
DEFAULT_OP_CYCLES = 3

_DATA = resources.files(__package__).joinpath("data", "op_profiles")


@functools.cache
def op_profile_names() -> tuple[str, ...]:
    """Names of the bundled profiles (`"sm_60"`, ..., `"sm_103"`), sorted by compute capability."""
    names = [p.name[: -len(".json")] for p in _DATA.iterdir() if p.name.endswith(".json")]
    return tuple(sorted(names, key=lambda n: int(n.split("_")[1])))


def op_profile_name_for(compute_capability: tuple[int, int]) -> str:
    """The profile XLA uses for a CUDA compute capability.

    XLA (`HloOpProfiles::GetProfileName` / `GetProfile`) looks for
    `"sm_<major><minor>"` and falls back to `"sm_86"` when there is no such
    table. So sm_89 (and the RTX A6000 test device at 8.9) gets sm_86.

    **Arguments:**

    - `compute_capability`: `(major, minor)`, e.g. `(8, 0)`.

    **Returns:** the profile name.
    """
    try:
        major, minor = (int(x) for x in compute_capability)
    except (TypeError, ValueError):
        raise ValueError(f"compute_capability must be (major, minor), got {compute_capability!r}") from None
    name = f"sm_{major}{minor}"
    return name if name in op_profile_names() else DEFAULT_OP_PROFILE


@functools.cache
def _read(name: str) -> dict[str, Any]:
    path = _DATA.joinpath(f"{name}.json")
    text = path.read_text(encoding="utf-8")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{e.lineno}:{e.colno}: bad op-profile JSON: {e.msg}") from None
    table: dict[tuple[str, str], int] = {}
    for i, entry in enumerate(doc.get("entries", [])):
        try:
            # Later entries win, as in XLA's `HloOpProfiles::Load`.
            table[(entry["opcode"], entry["dtype"])] = int(entry["clock_cycles"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{path}: entry {i} is not {{opcode, dtype, clock_cycles}}: {entry!r}") from None
    doc["table"] = MappingProxyType(table)
    return doc


def _resolve(profile: str | tuple[int, int]) -> str:
    if isinstance(profile, str):
        if profile not in op_profile_names():
            raise ValueError(
                f"unknown op profile {profile!r}; bundled profiles: {', '.join(op_profile_names())}"
            )
        return profile
    return op_profile_name_for(profile)


def load_op_profile(profile: str | tuple[int, int]) -> Mapping[tuple[str, str], int]:
    """One of XLA's clock-cycle tables, as a read-only mapping.

    **Arguments:**

    - `profile`: a profile name (`"sm_90"`) or a compute capability (`(9, 0)`),
      which is resolved with XLA's rule (`op_profile_name_for`).

    **Returns:** `{(opcode, dtype): clock_cycles}` with lower-case HLO dtype names.
    """
    return _read(_resolve(profile))["table"]


def op_profile_source(profile: str | tuple[int, int]) -> dict[str, Any]:
    """Provenance of a profile: the GPU it was measured on and the XLA source it was taken from."""
    doc = _read(_resolve(profile))
    return {"profile": doc["profile"], "profiled_on": doc.get("profiled_on"), **doc["source"]}
