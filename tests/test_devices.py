"""Device presets, XLA's op profiles, the registry and the measured host.

Expected numbers are XLA's own: the spec files under
xla/backends/gpu/target_config/specs/, TestGpuDeviceInfo in
xla/service/gpu/gpu_device_info_for_tests.cc, cuda_core_info_table_test.cc,
hlo_op_profiles_test.cc and entries read from hlo_op_profiles_data.h.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
import os
import pickle
from pathlib import Path

import pytest

import xla_costmodel as xc
import xla_costmodel.devices as devices
from xla_costmodel.devices import (
    DeviceSpec,
    HostCacheError,
    device_names,
    get_device,
    load_op_profile,
    op_profile_name_for,
    op_profile_names,
    register_device,
)
from xla_costmodel.devices import _host, _registry
from xla_costmodel.measure import measure_host

# What `xla_costmodel.get_device("host")` runs when the host has no usable measurement (`measure.host_device`);
# `xla_costmodel.measure` is shadowed on the package by the `measure` function, hence importlib.
_measuring = importlib.import_module("xla_costmodel.measure._host")

KiB = 1024
MiB = 1024 * 1024
GPU_PRESETS = ("a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "v100", "rtx-a6000", "rtx-a6000-xla-test",
               "b200", "gb200", "gb300")


# ---------------------------------------------------------------- presets


def test_rtx_a6000_xla_test_is_xlas_test_device():
    # TestGpuDeviceInfo::RTXA6000DeviceInfo(), default cc 8.9.
    d = get_device("rtx-a6000-xla-test")
    assert d.kind == "gpu"
    assert d.compute_capability == (8, 9)
    assert d.core_count == 84
    assert d.fpus_per_core == 128
    assert d.clock_rate_ghz == 1.41
    assert d.memory_bandwidth_bytes_per_s == 768_096_000_000
    assert d.l2_cache_bytes == 6 * MiB
    assert d.shared_memory_per_block_bytes == 48 * KiB
    assert d.shared_memory_per_block_optin_bytes == 99 * KiB
    assert d.shared_memory_per_core_bytes == 100 * KiB
    assert d.threads_per_block_limit == 1024
    assert d.warp_size == 32
    assert d.threads_per_core_limit == 1536
    assert d.block_dim_limit == (2_147_483_647, 65_535, 65_535)
    assert d.registers_per_core_limit == 65_536
    assert d.registers_per_block_limit == 65_536
    assert d.device_memory_bytes == 51_050_250_240
    # No sm_89 table in XLA: the default sm_86 applies.
    assert d.op_profile_name == "sm_86"
    assert d.kernel_launch_overhead_s == 1e-6


def test_rtx_a6000_xla_test_derived_numbers_match_worked_checks():
    d = get_device("rtx-a6000-xla-test")
    # 2 * 1.41 * 128 * 84 flops/ns, truncated to int64 by XLA: 30,320.
    assert int(d.flops_per_ns) == 30_320
    # L1 re-read threshold 2 KiB * 84 SMs = 168 KiB.
    assert d.l1_cache_bytes == 168 * KiB
    # Per-block cap 1.41 GHz * 32 B = 45.12 GB/s.
    assert d.per_block_bandwidth_cap_bytes_per_s == pytest.approx(45.12e9)
    assert (d.dram_to_l2_transaction_bytes, d.memory_transactions_per_clock) == (64, 32)


@pytest.mark.parametrize(
    "name, cc, sms, fpus, clock, bandwidth, l2, smem_core, optin, memory, flops_per_ns",
    [
        # specs/a100_sxm_40.txtpb
        ("a100-40gb", (8, 0), 108, 64, 1.41, 1_555_200_000_000, 40 * MiB, 167_936, 166_912, 42_331_013_120, 19_491),
        # specs/a100_sxm_80.txtpb
        ("a100-80gb", (8, 0), 108, 64, 1.41, 2_039_040_000_000, 40 * MiB, 167_936, 166_912, 85_100_068_864, 19_491),
        # specs/h100_sxm.txtpb
        ("h100-sxm", (9, 0), 132, 128, 1.98, 3_352_320_000_000, 50 * MiB, 233_472, 232_448, 84_942_979_072, 66_908),
        # specs/h200.txtpb
        ("h200", (9, 0), 132, 128, 1.98, 4_800_000_000_000, 50 * MiB, 233_472, 232_448, 151_397_597_184, 66_908),
        # specs/v100.txtpb
        ("v100", (7, 0), 80, 64, 1.53, 898_048_000_000, 6 * MiB, 98_304, 98_304, 16_935_682_048, 15_667),
    ],
)
def test_presets_match_xla_spec_files(name, cc, sms, fpus, clock, bandwidth, l2, smem_core, optin, memory,
                                      flops_per_ns):
    d = get_device(name)
    assert d.compute_capability == cc
    assert (d.core_count, d.fpus_per_core, d.clock_rate_ghz) == (sms, fpus, clock)
    assert d.memory_bandwidth_bytes_per_s == bandwidth
    assert d.l2_cache_bytes == l2
    assert (d.shared_memory_per_core_bytes, d.shared_memory_per_block_optin_bytes) == (smem_core, optin)
    assert d.shared_memory_per_block_bytes == 48 * KiB
    assert d.device_memory_bytes == memory
    assert (d.threads_per_block_limit, d.threads_per_core_limit, d.warp_size) == (1024, 2048, 32)
    assert d.l1_cache_bytes_per_core == 2 * KiB
    assert int(d.flops_per_ns) == flops_per_ns
    assert d.op_profile_name == f"sm_{cc[0]}{cc[1]}"
    assert d.kernel_launch_overhead_s == 1e-6


def test_h100_peaks_match_xla_core_info_table_test():
    # cuda_core_info_table_test.cc, CalculatePeakOpsPerNsH100: TFLOP/s within 2 %.
    d = get_device("h100-sxm")
    expected = {"f8e4m3fn": 1979.0, "s8": 1979.0, "f16": 989.0, "bf16": 989.0, "f32": 495.0, "f64": 67.0}
    for dtype, tflops in expected.items():
        assert d.peak_matmul_flops_per_s[dtype] / 1e12 == pytest.approx(tflops, rel=0.02), dtype
    assert d.peak_fp32_flops_per_s / 1e12 == pytest.approx(67.0, rel=0.02)
    assert d.peak_vector_flops_per_s == d.peak_fp32_flops_per_s


def test_a100_and_v100_peaks_match_nvidia_datasheets():
    a100 = get_device("a100-40gb")
    for dtype, tflops in {"bf16": 312, "f16": 312, "f32": 156, "f64": 19.5, "s8": 624}.items():
        assert a100.peak_matmul_flops_per_s[dtype] / 1e12 == pytest.approx(tflops, rel=0.01), dtype
    assert a100.peak_fp32_flops_per_s / 1e12 == pytest.approx(19.5, rel=0.01)
    v100 = get_device("v100")
    assert v100.peak_matmul_flops_per_s["f16"] / 1e12 == pytest.approx(125, rel=0.01)
    assert v100.peak_fp32_flops_per_s / 1e12 == pytest.approx(15.7, rel=0.01)
    # No bf16 tensor cores on Volta: matmuls fall back to the vector peak.
    assert v100.matmul_flops_per_s("bf16") == v100.peak_fp32_flops_per_s


# ---------------------------------------------------------------- op profiles


@pytest.mark.parametrize(
    "profile, opcode, dtype, cycles",
    [
        # Read from xla/service/gpu/model/hlo_op_profiles_data.h.
        ("sm_80", "divide", "f64", 831),  # also hlo_op_profiles_test.cc GetProfileA6000
        ("sm_80", "log", "f32", 259),
        ("sm_80", "tanh", "f16", 499),
        ("sm_90", "multiply", "f32", 3),  # also hlo_op_profiles_test.cc GetProfileH100
        ("sm_90", "divide", "s32", 297),
        ("sm_90", "add", "f32", 7),
        ("sm_90", "exponential", "f32", 79),
        ("sm_90", "divide", "f64", 526),
        ("sm_86", "power", "f32", 925),
        ("sm_86", "exponential", "f32", 86),
        ("sm_86", "add", "f64", 97),
        ("sm_86", "atan2", "c128", 39027),
        ("sm_75", "exponential", "f32", 83),
        ("sm_70", "divide", "s8", 336),
        ("sm_60", "add", "s8", 2),
        ("sm_60", "power", "c128", 17893),
        ("sm_100", "erf", "f32", 161),
    ],
)
def test_op_profile_entries_match_xla_source(profile, opcode, dtype, cycles):
    assert load_op_profile(profile)[(opcode, dtype)] == cycles


def test_op_profile_tables_are_complete():
    assert op_profile_names() == ("sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_103")
    # Entry counts of the tables in hlo_op_profiles_data.h.
    assert len(load_op_profile("sm_80")) == 42
    assert len(load_op_profile("sm_75")) == 84
    assert len(load_op_profile("sm_60")) == 110
    # XLA profiled no bf16 op anywhere, so bf16 always costs the default.
    for name in op_profile_names():
        assert not any(dt == "bf16" for _, dt in load_op_profile(name)), name
    source = devices.op_profile_source("sm_80")
    assert source["path"] == "xla/service/gpu/model/hlo_op_profiles_data.h"
    assert source["profiled_on"] == "NVIDIA A100-SXM4-40GB"


@pytest.mark.parametrize(
    "cc, profile",
    [((8, 0), "sm_80"), ((9, 0), "sm_90"), ((7, 5), "sm_75"), ((10, 0), "sm_100"),
     ((8, 9), "sm_86"), ((8, 5), "sm_86"), ((12, 0), "sm_86")],
)
def test_profile_lookup_rule(cc, profile):
    # sm_<major><minor> when XLA has it, else the default sm_86.
    assert op_profile_name_for(cc) == profile
    assert load_op_profile(cc) is load_op_profile(profile)


def test_op_cycles_uses_xla_default_for_missing_pairs():
    a100 = get_device("a100-40gb")
    assert a100.op_cycles("add", "f32") == 3  # sm_80 has no f32 add
    assert a100.op_cycles("exponential", "f32") == 3
    assert a100.op_cycles("log", "F32") == 259
    assert a100.op_cycles("multiply", "bf16") == 3
    # The MultiOutputWrite check: power 925 + compare/select/subtract at 3 each = 934.
    a6000 = get_device("rtx-a6000-xla-test")
    per_element = sum(a6000.op_cycles(op, dt) for op, dt in
                      [("power", "f32"), ("compare", "pred"), ("select", "f32"), ("subtract", "f32")])
    assert per_element == 934


def test_unknown_op_profile_name():
    with pytest.raises(ValueError, match="sm_86"):
        load_op_profile("sm_99")


# ---------------------------------------------------------------- registry


@pytest.fixture
def clean_registry(monkeypatch):
    monkeypatch.setattr(_registry, "_USER_DEVICES", {})


def test_unknown_device_lists_valid_names():
    with pytest.raises(ValueError) as err:
        get_device("a200")
    for name in (*GPU_PRESETS, "host"):
        assert name in str(err.value)
    with pytest.raises(TypeError):
        get_device(3)


def test_device_names_and_lookup_spelling():
    assert device_names() == (*GPU_PRESETS, "host")
    assert get_device("A100_40GB") is get_device("a100-40gb")
    spec = get_device("h200")
    assert get_device(spec) is spec


def test_register_device(clean_registry):
    spec = get_device("h100-sxm").replace(name="h100-slow", clock_rate_ghz=1.5)
    assert register_device(spec) is spec
    assert get_device("h100-slow") is spec
    assert "h100-slow" in device_names()
    with pytest.raises(ValueError, match="already registered"):
        register_device(spec)
    faster = spec.replace(clock_rate_ghz=1.6)
    register_device(faster, overwrite=True)
    assert get_device("h100-slow").clock_rate_ghz == 1.6
    with pytest.raises(ValueError, match="built-in"):
        register_device(spec.replace(name="v100"))
    with pytest.raises(ValueError, match="built-in"):
        register_device(spec.replace(name="host"))
    with pytest.raises(TypeError):
        register_device({"name": "x"})


# ---------------------------------------------------------------- DeviceSpec


def test_spec_is_frozen_keyword_only_and_validated():
    d = get_device("a100-40gb")
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.core_count = 1
    with pytest.raises(TypeError):
        d.op_profile[("add", "f32")] = 1
    with pytest.raises(TypeError):
        DeviceSpec("x", "gpu")  # keyword-only
    with pytest.raises(ValueError, match="core_count"):
        d.replace(core_count=0)
    with pytest.raises(ValueError, match="kind"):
        d.replace(kind="tpu")
    with pytest.raises(ValueError, match="memory_bandwidth_bytes_per_s"):
        d.replace(memory_bandwidth_bytes_per_s=-1.0)
    with pytest.raises(ValueError, match="compute_capability"):
        d.replace(compute_capability=(8,))


def test_spec_hash_equality_and_replace():
    d = get_device("a100-80gb")
    same = d.replace()
    assert same == d and hash(same) == hash(d)
    other = d.replace(clock_rate_ghz=1.5)
    assert other != d
    assert other.peak_fp32_flops_per_s == pytest.approx(2 * 1.5e9 * 64 * 108)
    assert {d: 1}[same] == 1
    assert pickle.loads(pickle.dumps(d)) == d


@pytest.mark.parametrize("name", GPU_PRESETS)
def test_spec_json_round_trip(name):
    d = get_device(name)
    assert DeviceSpec.from_dict(json.loads(json.dumps(d.to_dict()))) == d


def test_from_dict_names_bad_fields():
    data = get_device("v100").to_dict()
    with pytest.raises(ValueError, match="unknown DeviceSpec field"):
        DeviceSpec.from_dict({**data, "sm_count": 3})
    with pytest.raises(ValueError, match="missing"):
        DeviceSpec.from_dict({k: v for k, v in data.items() if k != "core_count"})
    with pytest.raises(TypeError, match="fpus_per_core"):
        DeviceSpec.from_dict({**data, "fpus_per_core": "64"})


def test_repr_and_html():
    d = get_device("h100-sxm")
    assert "h100-sxm" in repr(d) and "sm_90" in repr(d)
    page = d._repr_html_()
    assert page.startswith("<table>") and "h100-sxm" in page
    assert "66.9 TFLOP/s" in page and "3.35 TB/s" in page and "50 MiB" in page


# ---------------------------------------------------------------- host


@pytest.fixture(scope="module")
def host_cache(tmp_path_factory):
    """One fast host measurement for the module, cached in a private directory."""
    directory = tmp_path_factory.mktemp("host-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(_host.CACHE_DIR_ENV, str(directory))
        spec = measure_host(fast=True, progress=False)
        path = _host.host_cache_path()
    return directory, path, spec


@pytest.fixture
def cache_env(host_cache, monkeypatch):
    directory, path, spec = host_cache
    monkeypatch.setenv(_host.CACHE_DIR_ENV, str(directory))
    return path, spec


def test_host_measurement(host_cache):
    _, path, spec = host_cache
    assert spec.name == "host" and spec.kind == "cpu"
    assert spec.core_count == len(os.sched_getaffinity(0))
    assert spec.fpus_per_core >= 1 and spec.clock_rate_ghz > 0
    for key in ("copy_bandwidth_bytes_per_s", "matmul_f32_flops_per_s", "matmul_bf16_flops_per_s",
                "matmul_f64_flops_per_s", "matmul_s8_flops_per_s", "ynn_grouped_conv_elements_per_s",
                "eigen_grouped_conv_elements_per_s", "loop_conv_macs_per_s",
                "elementwise_f32_elements_per_s", "exp_f32_elements_per_s"):
        assert spec.measurements[key] > 0, key
    assert set(spec.peak_matmul_flops_per_s) == {"f32", "bf16", "f64", "s8"}
    assert spec.memory_bandwidth_bytes_per_s == spec.measurements["copy_bandwidth_bytes_per_s"]
    # A jitted no-op takes microseconds to dispatch, not nanoseconds or seconds.
    assert 1e-7 < spec.kernel_launch_overhead_s < 1e-2
    assert spec.measurements["fast_mode"] == 1.0
    assert spec.op_profile == {} and spec.compute_capability is None
    l1 = Path("/sys/devices/system/cpu/cpu0/cache/index0")
    if (l1 / "type").exists() and (l1 / "type").read_text().strip() == "Data":
        assert spec.l1_cache_bytes_per_core == _host._parse_size((l1 / "size").read_text())
    assert path.name.startswith("host-") and path.exists()


def test_host_benchmarks_run_where_measure_runs_programs(monkeypatch):
    """In a process that did not start with the steady allocator, the benchmarks run in the measuring
    worker (as `measure_kernels()` runs programs there), and the spec says so."""
    from xla_costmodel.measure import _host as host_module
    from xla_costmodel.measure import steady_from_start

    if steady_from_start():
        pytest.skip("this process started with the steady allocator: the benchmarks run here")
    handlers = []
    real = host_module.measuring_worker

    class Recording:
        def call(self, handler, *args, **kwargs):
            handlers.append(handler)
            return real().call(handler, *args, **kwargs)

    monkeypatch.setattr(host_module, "measuring_worker", Recording)
    spec = measure_host(fast=True, progress=False, save=False)
    assert handlers == ["xla_costmodel.measure._host:host_benchmarks"]
    assert spec.measurements["measured_in_worker"] == 1.0 and spec.measurements["copy_bandwidth_bytes_per_s"] > 0


def test_host_measurement_logs_each_benchmark(caplog):
    with caplog.at_level(logging.INFO, logger="xla_costmodel.devices"):
        measure_host(fast=True, progress=True, save=False)
    lines = [r.getMessage() for r in caplog.records]
    for label in ("copy bandwidth", "matmul f32", "matmul bf16", "matmul f64", "elementwise", "dispatch overhead"):
        assert any(line.startswith(f"host {label}:") for line in lines), label


def test_host_cache_round_trip(cache_env, monkeypatch):
    path, spec = cache_env
    monkeypatch.setattr(_measuring, "measure_host", _must_not_measure)
    assert xc.get_device("host", fast=True) == spec
    assert get_device("host", fast=True) == spec  # the devices layer reads the cache too
    assert _host.read_host_cache(path) == spec


def test_fast_cache_not_used_for_full_request(cache_env, monkeypatch):
    _, spec = cache_env
    calls = []

    def fake_measure(*, fast, progress, save):
        calls.append(fast)
        return spec

    monkeypatch.setattr(_measuring, "measure_host", fake_measure)
    xc.get_device("host", progress=False)
    assert calls == [False]


def test_the_devices_layer_never_measures_and_says_who_does(monkeypatch, tmp_path):
    """No hook lets `devices` reach up to `measure`: without a usable cache its `get_device("host")` names
    the call that measures (`xla_costmodel.get_device`, the front door) instead of measuring."""
    monkeypatch.setenv(_host.CACHE_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(_measuring, "measure_host", _must_not_measure)
    with pytest.raises(RuntimeError, match=r"no usable measurement .*xla_costmodel.get_device\('host'\) measures it"):
        get_device("host")
    assert not hasattr(_host, "register_host_measurer")


def test_host_cache_location(monkeypatch, tmp_path):
    monkeypatch.setenv(_host.CACHE_DIR_ENV, str(tmp_path / "elsewhere"))
    assert _host.host_cache_path().parent == tmp_path / "elsewhere"
    monkeypatch.delenv(_host.CACHE_DIR_ENV)
    monkeypatch.setenv("HOME", str(tmp_path))
    path = _host.host_cache_path()
    assert path.parent == tmp_path / ".cache" / "xla_costmodel"
    assert path.name == f"host-{_host.host_key()}.json"


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"format": "xla_costmodel.host/1", "spec": {', r":1:\d+: corrupt host cache"),
        ("[1, 2]", "not a host cache"),
        ('{"format": "xla_costmodel.host/1", "spec": {"name": "host"}}', "corrupt host cache.*missing"),
    ],
)
def test_corrupt_host_cache_names_the_file(monkeypatch, tmp_path, content, message):
    monkeypatch.setenv(_host.CACHE_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(_measuring, "measure_host", _must_not_measure)
    path = _host.host_cache_path()
    path.write_text(content)
    with pytest.raises(HostCacheError, match=message) as err:
        xc.get_device("host", fast=True)
    assert str(path) in str(err.value)
    assert "remeasure=True" in str(err.value)


def test_remeasure_replaces_corrupt_cache(monkeypatch, tmp_path, host_cache):
    _, _, spec = host_cache
    monkeypatch.setenv(_host.CACHE_DIR_ENV, str(tmp_path))
    path = _host.host_cache_path()
    path.write_text("garbage")
    monkeypatch.setattr(_measuring, "measure_host",
                        lambda **kw: (_host.save_host_cache(spec, _host.host_cache_path()), spec)[1])
    assert xc.get_device("host", remeasure=True, fast=True) == spec
    assert _host.read_host_cache(path) == spec


def _must_not_measure(**kwargs):
    raise AssertionError("the host should have come from the cache")
