"""Every GPU preset has an XLA:GPU target, and its facts are XLA's (tests/data/xla_target_specs, XLA's own
spec files): `devices.gpu_target_config` checked field by field against them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from xla_costmodel.devices import DeviceSpec, device_names, get_device, gpu_target_config

SPECS = Path(__file__).parent / "data" / "xla_target_specs"

#: The spec file of each GPU preset; None where XLA publishes none (with the reason).
SPEC_OF = {
    "a100-40gb": "a100_sxm_40", "a100-80gb": "a100_sxm_80", "h100-sxm": "h100_sxm", "h100-pcie": "h100_pcie",
    "h200": "h200", "v100": "v100", "rtx-a6000": "a6000", "b200": "b200", "gb200": "gb200", "gb300": "gb300",
    "rtx-a6000-xla-test": None,  # XLA's test device (gpu_device_info_for_tests.cc), not a spec file
}

#: XLA's `PrimitiveType` numbers (xla_data.proto) of the dtypes our presets hold matrix peaks for.
PRIMITIVE_TYPE = {2: "s8", 6: "u8", 10: "f16", 11: "f32", 12: "f64", 16: "bf16", 19: "f8e5m2", 20: "f8e4m3fn",
                  32: "f4e2m1fn"}

_TOKEN = re.compile(r'\s*(?:#[^\n]*\n\s*)*("(?:[^"\\]|\\.)*"|[{}:]|[^\s{}:"]+)')


def read_text_proto(text: str) -> dict:
    """A protobuf text message as `{field: [values]}`; a message value is such a dict, scalars stay strings."""
    tokens = [m.group(1) for m in _TOKEN.finditer(text) if m.group(1)]
    pos = 0

    def message(end: str | None) -> dict:
        nonlocal pos
        out: dict = {}
        while pos < len(tokens) and tokens[pos] != end:
            name = tokens[pos]
            pos += 1
            if tokens[pos] == ":":
                pos += 1
            if tokens[pos] == "{":
                pos += 1
                value = message("}")
                pos += 1
            else:
                value = tokens[pos].strip('"')
                pos += 1
            out.setdefault(name, []).append(value)
        return out

    return message(None)


def _one(msg: dict, name: str, default=None):
    values = msg.get(name)
    return values[0] if values else default


GPU_PRESETS = [n for n in device_names() if n != "host" and get_device(n).kind == "gpu"]


def test_every_gpu_preset_is_mapped_to_xlas_spec_or_said_why_not():
    assert sorted(GPU_PRESETS) == sorted(SPEC_OF), "a GPU preset without a spec file entry here"


@pytest.mark.parametrize("name", GPU_PRESETS)
def test_gpu_preset_target_matches_xla_spec(name):
    ours = read_text_proto(gpu_target_config(get_device(name)))
    info = _one(ours, "gpu_device_info")
    assert _one(ours, "platform_name") == "CUDA"
    assert _one(ours, "device_description_str") == get_device(name).description
    if SPEC_OF[name] is None:
        return
    spec = read_text_proto((SPECS / f"{SPEC_OF[name]}.txtpb").read_text())
    xla = _one(spec, "gpu_device_info")
    for field, values in info.items():
        if field in ("cuda_compute_capability", "device_interconnect_info", "name"):
            continue
        mine, theirs = values[0], _one(xla, field)
        if field == "pcie_bandwidth" and theirs is None:
            pytest.fail(f"{name}: pcie_bandwidth {mine}, XLA's spec has none")
        assert theirs is not None, f"{name}: {field} is not in XLA's spec"
        assert float(mine) == float(theirs), f"{name}: {field} {mine}, XLA says {theirs}"
    # What XLA's spec has and the target lacks: only facts our DeviceSpec does not hold.
    pcie = int(_one(xla, "pcie_bandwidth", "0"))
    assert int(_one(info, "pcie_bandwidth", "0")) == max(pcie, 0)  # -1 in XLA's spec means unknown
    links = _one(xla, "device_interconnect_info", {})
    assert _one(info, "device_interconnect_info", {}).get("active_links") == links.get("active_links")
    cc, xla_cc = _one(info, "cuda_compute_capability"), _one(xla, "cuda_compute_capability")
    assert (_one(cc, "major"), _one(cc, "minor", "0")) == (_one(xla_cc, "major"), _one(xla_cc, "minor", "0"))
    assert _one(cc, "feature_extension", "NONE") == _one(xla_cc, "feature_extension", "NONE")
    assert _one(info, "name") == _one(xla, "name", _one(spec, "device_description_str"))
    assert _one(ours, "device_description_str") == _one(spec, "device_description_str")


@pytest.mark.parametrize("name", [n for n in GPU_PRESETS if SPEC_OF[n] is not None])
def test_gpu_preset_matrix_peaks_match_xla_spec(name):
    """Where XLA's spec has the tensor cores' rates, the preset's peaks are `2 · units · ops · clock · SMs`."""
    d = get_device(name)
    xla = _one(read_text_proto((SPECS / f"{SPEC_OF[name]}.txtpb").read_text()), "gpu_device_info")
    matrix = _one(xla, "matrix_unit_description")
    if matrix is None:
        pytest.skip(f"XLA's {SPEC_OF[name]}.txtpb has no matrix_unit_description")
    checked = 0
    for rate in matrix["rate_infos"]:
        dtype = PRIMITIVE_TYPE.get(int(_one(rate, "key")))
        if dtype is None:
            continue
        value = _one(rate, "value")
        flops = (2 * float(_one(value, "units_per_core")) * float(_one(value, "ops_per_clock"))
                 * float(_one(value, "clock_rate_ghz")) * 1e9 * d.core_count)
        assert d.peak_matmul_flops_per_s[dtype] == pytest.approx(flops, rel=1e-6), dtype
        checked += 1
    assert checked >= 7


def test_target_of_a_cpu_or_incomplete_gpu_is_refused():
    with pytest.raises(ValueError, match="cpu"):
        gpu_target_config(DeviceSpec(name="box", kind="cpu", core_count=4, fpus_per_core=8, clock_rate_ghz=3.0,
                                     memory_bandwidth_bytes_per_s=50e9, l2_cache_bytes=1 << 20,
                                     kernel_launch_overhead_s=1e-6))
    with pytest.raises(ValueError, match="compute_capability"):
        gpu_target_config(get_device("h100-sxm").replace(name="mystery", compute_capability=None))
    with pytest.raises(ValueError, match="threads_per_core_limit"):
        gpu_target_config(get_device("h100-sxm").replace(name="odd", threads_per_core_limit=0))
    with pytest.raises(TypeError):
        gpu_target_config("h100-sxm")


def test_text_proto_reader_reads_nested_and_repeated_fields():
    msg = read_text_proto('a { b: 1 b: 2 c { d: "x y" } }  # note\ne: -1\n')
    assert msg == {"a": [{"b": ["1", "2"], "c": [{"d": ["x y"]}]}], "e": ["-1"]}
