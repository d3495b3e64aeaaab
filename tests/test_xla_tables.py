"""XLA's measured GEMM and collective tables as shipped data, and the presets of the GPUs they cover.

Expected figures are XLA's: counts and values read from
`default_matmul_perf_table.txtpb` / `default_collective_perf_table.txtpb`
(openxla/xla@6b73c4c4), the check values of `collective_interpolator_test.cc`
(49.312 µs / 45.024 µs for a 1 KiB all-reduce over 8 GPUs), and the spec files
`specs/{b200,gb200,gb300}.txtpb`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import load_script

from xla_costmodel.devices import collective_table, gemm_table, get_device, xla_table_key, xla_tables_source

ROOT = Path(__file__).resolve().parent.parent
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def _convert_module():
    return load_script("convert_xla_tables")


# ---------------------------------------------------------------- GEMM


def test_gemm_table_has_the_full_grid_per_gpu():
    g = gemm_table()
    assert set(g["table_key"]) == {"sm_90", "sm_100_B200"}
    dtypes = {"bf16xbf16->bf16", "f32xf32->f32", "f8e4m3fnxf8e4m3fn->bf16", "f8e4m3fnxf8e5m2->bf16",
              "f8e5m2xf8e4m3fn->bf16"}
    sizes = {256, 512, 1024, 2048, 4096}
    for key in ("sm_90", "sm_100_B200"):
        part = g[g["table_key"] == key]
        assert len(part) == 375 * 5
        assert set(part["dtype_key"]) == dtypes
        assert set(part["b"]) == {1, 2, 4}
        assert set(part["m"]) == set(part["n"]) == set(part["k"]) == sizes
        assert not part.duplicated(["b", "m", "n", "k", "dtype_key"]).any()


def test_gemm_peaks_and_floor_match_the_table():
    g = gemm_table()
    peak = g.groupby(["table_key", "dtype_key"])["flops_per_s"].max()
    assert peak["sm_90", "bf16xbf16->bf16"] == 804_715_405_124_361
    assert peak["sm_90", "f32xf32->f32"] == 403_149_640_735_319
    assert peak["sm_100_B200", "bf16xbf16->bf16"] == 1_670_467_342_710_337
    assert peak["sm_100_B200", "f32xf32->f32"] == 869_747_066_286_761
    # The first B200 row of the file: (1, 256, 256, 256) bf16 at 6.765 TFLOP/s.
    row = g[(g.table_key == "sm_100_B200") & (g.b == 1) & (g.m == 256) & (g.n == 256) & (g.k == 256)
            & (g.dtype_key == "bf16xbf16->bf16")].iloc[0]
    assert row.flops_per_s == 6_765_006_451_612
    assert row.time_s == pytest.approx(2 * 256 ** 3 / 6_765_006_451_612)
    assert (row.lhs_type, row.rhs_type, row.out_type) == ("bf16", "bf16", "bf16")


def test_f32_rates_are_tensor_core_rates():
    # The measured f32 rates exceed the FP32 vector peak many times: TF32 on the tensor cores.
    for name in ("h100-sxm", "b200"):
        d = get_device(name)
        f32 = gemm_table(name).query("dtype_key == 'f32xf32->f32'")["flops_per_s"].max()
        assert f32 > 5 * d.peak_fp32_flops_per_s
        assert f32 < d.matmul_flops_per_s("f32")  # below the TF32 peak of the preset


def test_table_for_a_device_and_for_an_uncovered_one():
    assert len(gemm_table("h100-sxm")) == len(gemm_table("sm_90")) == 1875
    assert len(gemm_table("h200")) == 1875  # XLA's key rule: sm_90 is sm_90
    empty = gemm_table("a100-80gb")
    assert empty.empty and list(empty.columns) == list(gemm_table().columns)
    with pytest.raises(ValueError, match="unknown device"):
        gemm_table("no-such-gpu")


# ---------------------------------------------------------------- collectives


def test_collective_table_counts():
    c = collective_table()
    counts = c.groupby("table_key").size().to_dict()
    assert counts == {"sm_90": 330, "sm_100_B200": 330, "sm_100_GB200": 1148, "sm_103": 1148}
    h100 = c[c.table_key == "sm_90"]
    assert set(h100.opcode) == {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute"}
    sizes = sorted(h100[h100.opcode == "all-reduce"].transfer_bytes.unique())
    assert sizes == [1 << i for i in range(10, 32)]  # 22 sizes, 1 KiB .. 2 GiB
    assert set(h100.replica_groups) == {"", "[1,8]<=[8]", "[2,4]<=[8]", "[4,2]<=[8]"}
    assert set(c[c.opcode == "collective-permute"].group_size) == {2}


def test_one_kib_all_reduce_rates_give_xlas_check_values():
    # collective_interpolator_test.cc: f32[256] all-reduce, [1,8]<=[8]: 49.312 µs (sm_90), 45.024 µs (B200).
    c = collective_table()
    ar = c[(c.opcode == "all-reduce") & (c.replica_groups == "[1,8]<=[8]") & (c.transfer_bytes == KiB)]
    times = dict(zip(ar.table_key, ar.time_s))
    assert times["sm_90"] * 1e6 == pytest.approx(49.312, abs=5e-4)
    assert times["sm_100_B200"] * 1e6 == pytest.approx(45.024, abs=5e-4)


def test_one_gib_bandwidths_and_transfer_bytes():
    c = collective_table()
    big = c[(c.replica_groups == "[1,8]<=[8]") & (c.transfer_bytes == GiB)]
    bw = {(r.table_key, r.opcode): r.throughput_bytes_per_s for r in big.itertuples()}
    assert bw["sm_90", "all-reduce"] == pytest.approx(227e9, rel=0.01)
    assert bw["sm_90", "all-gather"] == pytest.approx(393e9, rel=0.01)
    assert bw["sm_90", "reduce-scatter"] == pytest.approx(368e9, rel=0.01)
    assert bw["sm_100_B200", "all-reduce"] == pytest.approx(345e9, rel=0.01)
    # A reduce-scatter row stores its output; the bytes transferred are its input.
    rs = big[big.opcode == "reduce-scatter"].iloc[0]
    assert rs.transfer_bytes == rs.output_bytes * 8


def test_rows_without_a_throughput_are_flagged_not_priced():
    c = collective_table()
    missing = c[~c.measured]
    assert len(missing) == 2 and set(missing.table_key) == {"sm_100_GB200", "sm_103"}
    assert missing.time_s.isna().all() and c[c.measured].time_s.gt(0).all()


def test_provenance():
    src = xla_tables_source()
    assert src["repository"] == "openxla/xla"
    assert src["commit"] == "6b73c4c49eb0c5aee1963c1e34c7cc8ba92ac202"
    assert src["licence"].startswith("Apache-2.0")
    assert src["tables"]["gemm"]["path"] == "xla/service/gpu/model/default_matmul_perf_table.txtpb"
    assert src["tables"]["gemm"]["rows"] == len(gemm_table())
    assert src["tables"]["collective"]["rows"] == len(collective_table())


# ---------------------------------------------------------------- the converter


_GEMM_TXTPB = """# proto-message: xla.GemmPerfTable
entries {
  key: "sm_90"
  value {
    entries {
      b: 1
      m: 256
      n: 512
      k: 256
      flops { key: "bf16xbf16->bf16" value: 1000 }
    }
  }
}
"""

_COLL_TXTPB = """entries {
  key: "sm_90"
  value {
    entries {
      instruction {
        opcode: "collective-permute"
        shape { element_type: F32 dimensions: 256 layout { minor_to_major: 0 } }
        channel_id: 1
        source_target_pairs { target: 1 }
        source_target_pairs { source: 1 }
      }
      network_throughput_bytes_per_sec: 2048
    }
    entries {
      instruction {
        opcode: "reduce-scatter"
        shape { element_type: F32 dimensions: 64 }
        dimensions: 0
        use_global_device_ids: true
        iota_collective_device_list { num_replica_groups: 2 num_devices_per_group: 4
          iota_reshape_dims: 4 iota_reshape_dims: 2 iota_transpose_perm: 1 iota_transpose_perm: 0 }
      }
      network_throughput_bytes_per_sec: 1024
    }
  }
}
"""


def test_converter_reads_a_checkout_and_the_older_headers(tmp_path):
    conv = _convert_module()
    tree = tmp_path / "xla"
    model = tree / "xla/service/gpu/model"
    model.mkdir(parents=True)
    (model / "default_matmul_perf_table.txtpb").write_text(_GEMM_TXTPB)
    # The collective table only in the older header form (a raw string).
    (model / "collective_interpolator_data.h").write_text(
        'constexpr char kDefaultCollectivePTable[] = R"pb(\n' + _COLL_TXTPB + ')pb";\n')
    out = tmp_path / "out"
    assert conv.main(["--checkout", str(tree), "--out", str(out)]) == 0
    prov = json.loads((out / "PROVENANCE.json").read_text())
    assert prov["tables"]["collective"]["path"].endswith("collective_interpolator_data.h")
    gemm = (out / "gemm.csv").read_text().splitlines()
    assert gemm == ["table_key,b,m,n,k,dtype_key,flops_per_s", "sm_90,1,256,512,256,bf16xbf16->bf16,1000"]
    rows = (out / "collective.csv").read_text().splitlines()
    # Unset proto3 fields are 0: `{ target: 1 }` is the pair 0 -> 1.
    assert rows[1].startswith("sm_90,collective-permute,f32,256,1,False,,,,,0>1 1>0,2048")
    assert rows[2] == "sm_90,reduce-scatter,f32,64,0,True,2,4,4 2,1 0,,1024"


def test_converter_errors_name_the_place(tmp_path, capsys):
    conv = _convert_module()
    tree = tmp_path / "xla"
    model = tree / "xla/service/gpu/model"
    model.mkdir(parents=True)
    (model / "default_matmul_perf_table.txtpb").write_text('entries {\n  key: "sm_90"\n  value { entries { b: } }\n}\n')
    (model / "default_collective_perf_table.txtpb").write_text(_COLL_TXTPB)
    assert conv.main(["--checkout", str(tree), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "default_matmul_perf_table.txtpb:3:" in err and "Traceback" not in err
    assert conv.main(["--checkout", str(tmp_path / "missing")]) == 2
    assert "no such directory" in capsys.readouterr().err


# ---------------------------------------------------------------- presets


@pytest.mark.parametrize("name, key", [("h100-sxm", "sm_90"), ("h200", "sm_90"), ("b200", "sm_100_B200"),
                                       ("gb200", "sm_100_GB200"), ("gb300", "sm_103"), ("a100-40gb", "sm_80")])
def test_table_keys(name, key):
    assert xla_table_key(name) == key


def test_blackwell_presets_match_xla_spec_files():
    b = get_device("b200")
    assert (b.description, b.compute_capability, b.core_count, b.clock_rate_ghz) == ("NVIDIA B200", (10, 0), 148, 1.965)
    assert b.memory_bandwidth_bytes_per_s == 7_672_320_000_000 and b.l2_cache_bytes == 132_644_864
    assert b.device_memory_bytes == 191_514_411_008 and b.op_profile_name == "sm_100"
    assert (b.nvlink_links, b.pcie_bandwidth_bytes_per_s) == (18, 68_719_476_736)
    # 2 x 4 tensor cores x 1024 FMA x 1.8353101 GHz x 148 SMs: NVIDIA's 2.25 PFLOP/s dense BF16 class.
    assert b.matmul_flops_per_s("bf16") == pytest.approx(2 * 4 * 1024 * 1.8353101e9 * 148)
    assert b.matmul_flops_per_s("f32") == pytest.approx(b.matmul_flops_per_s("bf16") / 2)
    assert b.matmul_flops_per_s("f8e4m3fn") == pytest.approx(b.matmul_flops_per_s("bf16") * 2)
    gb3 = get_device("gb300")
    assert gb3.compute_capability == (10, 3) and gb3.op_profile_name == "sm_103" and gb3.core_count == 152
    gb2 = get_device("gb200")
    assert gb2.clock_rate_ghz == 2.062 and gb2.memory_bandwidth_bytes_per_s == 7_928_064_000_000
    # Every measured B200 rate sits below the preset's peak for its dtype.
    g = gemm_table("b200")
    for lhs, part in g.groupby("lhs_type"):
        assert part.flops_per_s.max() < b.matmul_flops_per_s(lhs)
    assert not math.isnan(get_device("h100-sxm").pcie_bandwidth_bytes_per_s)
