#!/usr/bin/env python
"""Where XLA's dot-fusion model misprices the H100 capture's Triton GEMMs: each term switched off in turn.

    .venv/bin/python scripts/diagnose_gemm_prices.py

Prices the corpus modules (`hlo_fixtures/gpu_h100/*.post.hlo.gz`, configurations as XLA chose them on the
H100) with `xla-gpu`, and again with one term of `models._dot_fusion` replaced: no loop latency tax (the
1.3 us per K iteration, paid in full at num_stages <= 1, which most of the H100's chosen configurations
have); HBM at the curve's 1 GiB plateau for every transfer size (XLA's curve gives small transfers a few
percent of peak). A diagnosis, not a model: nothing here changes what `xla-gpu` prices. Prints the median
ratio (predicted / measured per execution) of the Triton GEMM kernels of >= 5 us and of all of them, and
the share of the >= 5 us ones within 2x.
"""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_gpu as bench  # noqa: E402


def main() -> int:
    import numpy as np

    from xla_costmodel.models import pricing as dot
    from xla_costmodel.hlo import parse_hlo

    rows = bench.load_corpus(None)
    cases = list(dict.fromkeys(rows["case"]))
    modules = {c: parse_hlo(bench.read_module_text(c, "post"), source=c) for c in cases}
    kernels = bench.measured_kernels(rows, modules)

    def score(label: str) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = bench.score_table(kernels, bench.price(modules, "xla-gpu"))
        t = t[t["category"] == "Triton GEMMs"]
        r = (t["predicted_s"] / t["measured_s"]).to_numpy(float)
        long = (t["measured_s"] >= bench.LONG_S).to_numpy()
        within = float(np.mean(np.abs(np.log(r[long])) <= math.log(2.0)))
        print(f"{label:<48} median >= 5 us {np.median(r[long]):6.3f}   all {np.median(r):6.3f}   "
              f">= 5 us within 2x {within:5.1%}   ({int(long.sum())} of {len(r)} kernels)")

    loop, hbm = dot.pipelined_loop_time, dot.effective_hbm_bandwidth
    score("as XLA states it")
    dot.pipelined_loop_time = lambda s, i, c, r, w, tax_s=0.0: loop(s, i, c, r, w, 0.0)
    score("no loop latency tax")
    dot.pipelined_loop_time = loop
    dot.effective_hbm_bandwidth = lambda n, d: 0.9324885 * d.memory_bandwidth_bytes_per_s
    score("HBM at the curve's 1 GiB plateau for every size")
    dot.pipelined_loop_time = lambda s, i, c, r, w, tax_s=0.0: loop(s, i, c, r, w, 0.0)
    score("both")
    dot.pipelined_loop_time, dot.effective_hbm_bandwidth = loop, hbm
    return 0


if __name__ == "__main__":
    sys.exit(main())
