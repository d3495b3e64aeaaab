#!/usr/bin/env python
"""How well a host calibration carries from one measuring of a CPU to another (issue 26 §1).

    .venv/bin/python scripts/bench_host_transfer.py OTHER_DIR      # OTHER_DIR: a `calibrate --device host` data dir

Two measurings of the suite: the shipped one (`calibration/host_cpu.parquet`,
the reference host) and another (`OTHER_DIR/host_cpu.parquet`, e.g. made by
`XLA_COSTMODEL_DATA_DIR=OTHER_DIR xla-costmodel calibrate --device host`),
and the host microbenchmarks of each (the shipped `roofline-calibrated`
calibration's starting spec, and this machine's `get_device("host")`).
Printed:

1. the drift: the same suite case (kernel, dtype, size) timed in both, as the
   ratio other / shipped (geometric mean, the share within 1.25x and 2x);
2. the microbenchmark constants of both (copy bandwidth, matmul peaks,
   elementwise rates, launch cost) and their ratio;
3. transfer of each fittable model: fitted to the suite rows of one
   measuring and scored on the suite rows of the other (`sk_error`, Kendall's
   tau), next to the fit scored on its own rows;
4. constants per device, weights carried: the shipped `roofline-calibrated`
   fit is a factor on each microbenchmark constant (Stevens & Klöckner's
   form: the device's constants measured, the model's weights fitted); its
   factors applied to this machine's measured constants, against the shipped
   fitted rates used as they are, both scored on the other measuring's suite.

Neither the corpus nor any program is used: the suite is the data both
measurings share.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHIPPED = ROOT / "calibration"
CONSTANTS = ("copy_bandwidth_bytes_per_s", "matmul_f32_flops_per_s", "matmul_f64_flops_per_s",
             "elementwise_f32_elements_per_s", "exp_f32_elements_per_s", "kernel_launch_overhead_s")


def _suite(path: Path):
    from xla_costmodel.datasets import SUITE, load_rows, row_roles

    rows = load_rows(path)
    return rows[(row_roles(rows) == SUITE) & (rows["source"].astype(str) != "extra")]


def _drift(shipped, other) -> dict:
    import numpy as np

    key = ["case", "hlo_op"]
    a = shipped.groupby(key)["min_per_run_s"].min()
    b = other.groupby(key)["min_per_run_s"].min()
    both = a.index.intersection(b.index)
    r = (b[both] / a[both]).to_numpy(float)
    r = r[np.isfinite(r) & (r > 0)]
    lr = np.abs(np.log(r))
    return {"kernels": int(len(r)), "geomean_other_over_shipped": float(np.exp(np.log(r).mean())),
            "within_1.25x": float((lr <= math.log(1.25)).mean()), "within_2x": float((lr <= math.log(2)).mean()),
            "worst_factor": float(np.exp(lr.max()))}


def _score(model_name, train, test, device):
    """Fit `model_name` to `train` rows and score it on `test` rows (and on `train` itself)."""
    import numpy as np

    from xla_costmodel.fit import CalibratedModel
    from xla_costmodel.features import prepare
    from xla_costmodel.fit import accuracy, FittedModel, LearnedModel

    tr, te = prepare(train, device), prepare(test, device)
    if model_name == "roofline-calibrated":
        m = CalibratedModel("roofline").fit(tr.kernels, tr.y, device)

        def predict(p):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return np.array([_time(m, k, device) for k in p.kernels])
    else:
        m = {"fitted": FittedModel, "learned": LearnedModel}[model_name]().fit(tr.X, tr.y)

        def predict(p):
            return m.predict(p.X[m.feature_names_])
    return accuracy(predict(te), te.y), accuracy(predict(tr), tr.y)


def _time(model, kernel, device) -> float:
    try:
        e = model.estimate(kernel, device)
        return float(e.time_s) if e.priced else math.nan
    except Exception:
        return math.nan


def _carried_factors(test, device) -> list[dict]:
    """The shipped roofline-calibrated factors on this machine's measured constants, against its fitted rates."""
    import numpy as np

    from xla_costmodel.devices import DeviceSpec
    from xla_costmodel.fit.calibration import AnalyticalOnDevice, base_model as _base_model
    from xla_costmodel.features import prepare
    from xla_costmodel.fit import accuracy

    data = json.loads((SHIPPED / "host_roofline-calibrated.json").read_text())
    fitted = DeviceSpec.from_dict(data["device_spec"])
    f = data["factors"]
    carried = device.replace(
        clock_rate_ghz=device.clock_rate_ghz * f["vector_rate"],
        memory_bandwidth_bytes_per_s=device.memory_bandwidth_bytes_per_s * f["bandwidth"],
        peak_matmul_flops_per_s={k: v * f["matmul_rate"] for k, v in device.peak_matmul_flops_per_s.items()},
        kernel_launch_overhead_s=f["launch_s"],
    )
    te = prepare(test, device)
    out = []
    for label, spec in (("shipped fitted rates, as they are", fitted),
                        ("shipped factors x this machine's measured constants", carried)):
        model = AnalyticalOnDevice(_base_model("roofline", data.get("constants")), spec)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pred = np.array([_time(model, k, spec) for k in te.kernels])
        acc = accuracy(pred, te.y)
        out.append({"roofline on": label, "bandwidth_GB_s": spec.memory_bandwidth_bytes_per_s / 1e9,
                    "matmul_f32_GFLOP_s": spec.peak_matmul_flops_per_s.get("f32", math.nan) / 1e9,
                    "sk_error": acc["sk_error"], "kendall_tau": acc["kendall_tau"], "within_2x": acc["within_2x"]})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("other", help="a data directory holding another measuring's host_cpu.parquet")
    args = p.parse_args(argv)
    other_path = Path(args.other) / "host_cpu.parquet"
    if not other_path.is_file():
        print(f"bench_host_transfer: {other_path} does not exist", file=sys.stderr)
        return 2

    import pandas as pd
    from threadpoolctl import threadpool_limits

    from xla_costmodel import get_device
    from xla_costmodel.devices import describe_machine, machine_record

    device = get_device("host")
    shipped, other = _suite(SHIPPED / "host_cpu.parquet"), _suite(other_path)
    print(f"this machine: {describe_machine(machine_record())}; shipped suite: {len(shipped)} rows "
          f"({shipped['device'].iloc[0]}), other: {len(other)} rows ({other['device'].iloc[0]})")
    print("\n== 1. the same suite kernels timed in both measurings")
    print(pd.Series(_drift(shipped, other)).round(3).to_string())

    ref = json.loads((SHIPPED / "host_roofline-calibrated.json").read_text())["device_spec"]["measurements"]
    here = device.measurements
    print("\n== 2. host microbenchmark constants (the shipped calibration's starting spec, and this machine's now)")
    print(pd.DataFrame([{"constant": c, "shipped": ref.get(c), "this machine": here.get(c),
                         "this / shipped": (here.get(c) or math.nan) / (ref.get(c) or math.nan)}
                        for c in CONSTANTS]).to_string(index=False))

    rows = []
    with threadpool_limits(limits=1, user_api="blas"):
        for model in ("fitted", "learned", "roofline-calibrated"):
            for train_label, train, test_label, test in (("shipped", shipped, "other", other),
                                                         ("other", other, "shipped", shipped)):
                on_test, on_train = _score(model, train, test, device)
                rows.append({"model": model, "fitted on": train_label, "scored on": test_label,
                             "sk_error": on_test["sk_error"], "kendall_tau": on_test["kendall_tau"],
                             "within_2x": on_test["within_2x"], "sk_error on own rows": on_train["sk_error"],
                             "tau on own rows": on_train["kendall_tau"]})
        print("\n== 3. a fit carried from one measuring's suite to the other's")
        print(pd.DataFrame(rows).round(3).to_string(index=False))
        print("\n== 4. constants per device, weights carried (roofline), scored on the other measuring's suite")
        print(pd.DataFrame(_carried_factors(other, device)).round(3).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
