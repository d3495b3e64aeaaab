"""A scatter fusion writes into its first operand's buffer: `xla-gpu` prices only the elements its updates
touch (`XlaGpuModel.in_place_scatter`), held to the H100's measured time of such a kernel."""

from __future__ import annotations

import gzip
import warnings
from pathlib import Path

import pandas as pd
import pytest

import xla_costmodel as xc
from xla_costmodel.hlo import parse_hlo
from xla_costmodel.models import XlaGpuModel

ROOT = Path(__file__).resolve().parents[1]
CASE = "optax_softmax_cross_entropy_grad@large"


def _scatter_fusion():
    m = parse_hlo(gzip.open(ROOT / "hlo_fixtures" / "gpu_h100" / f"{CASE}.post.hlo.gz", "rt").read())
    return next(i for i in m.entry.instructions if i.name == "input_scatter_fusion")


def test_the_captured_scatter_fusion_is_priced_near_its_measured_time():
    rows = pd.read_parquet(ROOT / "calibration" / "h100-sxm_corpus.parquet")
    measured = rows[(rows["case"] == CASE) & (rows["hlo_op"] == "input_scatter_fusion")]["min_per_run_s"]
    assert len(measured) == 1
    measured = float(measured.iloc[0])
    kernel, h100 = _scatter_fusion(), xc.get_device("h100-sxm")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        in_place = XlaGpuModel().estimate(kernel, h100)
        whole = XlaGpuModel(in_place_scatter=False).estimate(kernel, h100)
    # the f32[1024,32000] buffer read and written (262 MB) is XLA's fusion cost analysis; 1024 updates are not
    assert whole.details["bytes_accessed"] > 2.6e8 and whole.time_s > 100 * measured
    assert in_place.details["bytes_written"] == 1024 * 4
    assert measured / 3 < in_place.time_s < 3 * measured


def test_fusion_prices_keep_xlas_count():
    """XLA's fusion decisions price the whole buffer: the pair prices are unchanged."""
    kernel, h100 = _scatter_fusion(), xc.get_device("h100-sxm")
    producer = kernel.operands[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = XlaGpuModel().estimate_fusion(producer, [kernel], h100)
        b = XlaGpuModel(in_place_scatter=False).estimate_fusion(producer, [kernel], h100)
    assert a == b


@pytest.mark.parametrize("updates,rows", [(1, 4096), (64, 4096), (64, 16)])
def test_a_scatter_fusion_written_by_hand(updates, rows):
    """XLA's `HandleScatter` count: the buffer read and the result written are the updates' bytes, also when
    there are more updates than rows (each update element is one read-modify-write of its target)."""
    text = f"""HloModule m
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}}
fused {{
  p0 = f32[{rows},4096] parameter(0)
  p1 = s32[{updates},1] parameter(1)
  p2 = f32[{updates},4096] parameter(2)
  n = f32[{updates},4096] negate(p2)
  ROOT s = f32[{rows},4096] scatter(p0, p1, n), update_window_dims={{1}}, inserted_window_dims={{0}},
      scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=add
}}
ENTRY e {{
  x = f32[{rows},4096] parameter(0)
  i = s32[{updates},1] parameter(1)
  u = f32[{updates},4096] parameter(2)
  ROOT f = f32[{rows},4096] fusion(x, i, u), kind=kInput, calls=fused
}}"""
    kernel = parse_hlo(text).entry.root
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e = XlaGpuModel().estimate(kernel, xc.get_device("h100-sxm"))
    assert e.details["bytes_written"] == updates * 4096 * 4
    assert e.details["bytes_read"] == 2 * updates * 4096 * 4 + updates * 4


def test_a_segment_sum_is_priced_as_one_read_modify_write_per_update():
    """`jax.ops.segment_sum` / `segment_max` of 262,144 rows of 64 floats into 4,096 segments: 64 updates per
    element. XLA's count (each update read and written once) against the H100's measured kernels; capping the
    traffic at the 1 MiB buffer priced them 0.58x and 0.37x."""
    case = "jax_ops_segment_sum@large"
    rows = pd.read_parquet(ROOT / "calibration" / "h100-sxm_corpus.parquet")
    rows = rows[rows["case"] == case].set_index("hlo_op")["min_per_run_s"]
    m = parse_hlo(gzip.open(ROOT / "hlo_fixtures" / "gpu_h100" / f"{case}.post.hlo.gz", "rt").read())
    h100 = xc.get_device("h100-sxm")
    for name in ("input_scatter_fusion", "input_scatter_fusion.1"):
        kernel = next(i for i in m.entry.instructions if i.name == name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            e = XlaGpuModel().estimate(kernel, h100)
        assert e.details["bytes_written"] == 262144 * 64 * 4
        measured = float(rows[name])
        assert measured / 1.5 < e.time_s < 1.5 * measured, (name, e.time_s, measured)
