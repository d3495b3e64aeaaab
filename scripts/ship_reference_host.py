"""Write `calibration/host_device.json`: the device description of the reference host, the machine that
measured the shipped host datasets (`calibration/host_cpu*.parquet`).

Scores of the shipped corpus must not depend on the machine that computes them, so its rows are priced with
the description of the machine that measured them (`xla_costmodel.datasets.measuring_device`), not this
machine's microbenchmarks. That machine's `measure_host()` result was not kept by itself, but the shipped
`host_roofline-calibrated.json` holds it: its `device_spec` is the measured spec with four rates fitted
(`factors`), and its `measurements` are the raw benchmark results. This script undoes the fit (the clock
from the fitted vector rate, the rest from the raw measurements), checks that each fitted field is its factor
times the restored one, and writes the spec.

    .venv/bin/python scripts/ship_reference_host.py [--check]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "calibration" / "host_roofline-calibrated.json"
TARGET = ROOT / "calibration" / "host_device.json"


def reference_spec() -> dict:
    data = json.loads(SOURCE.read_text())
    fitted, factors = data["device_spec"], data["factors"]
    raw = fitted["measurements"]
    spec = dict(fitted)
    spec["clock_rate_ghz"] = fitted["clock_rate_ghz"] / factors["vector_rate"]
    spec["memory_bandwidth_bytes_per_s"] = raw["copy_bandwidth_bytes_per_s"]
    spec["peak_matmul_flops_per_s"] = {d: raw[f"matmul_{d}_flops_per_s"] for d in ("f32", "bf16", "f64")}
    spec["kernel_launch_overhead_s"] = raw["kernel_launch_overhead_s"]
    spec["source"] = fitted["source"].split(";")[0] + " (the reference host; restored by scripts/ship_reference_host.py)"
    # The fit scaled what `measure_host` measured; restored, each field is what that function derives.
    checks = {
        "bandwidth": (fitted["memory_bandwidth_bytes_per_s"], factors["bandwidth"] * spec["memory_bandwidth_bytes_per_s"]),
        "matmul": (fitted["peak_matmul_flops_per_s"]["f32"], factors["matmul_rate"] * spec["peak_matmul_flops_per_s"]["f32"]),
        "fpus": (spec["fpus_per_core"],
                 max(1, round(raw["matmul_f32_flops_per_s"] / (2 * spec["clock_rate_ghz"] * 1e9 * spec["core_count"])))),
    }
    for name, (a, b) in checks.items():
        if not math.isclose(a, b, rel_tol=1e-9):
            raise SystemExit(f"{SOURCE.name}: {name} does not restore ({a} vs {b})")
    return {"format": "xla_costmodel.measuring-device/1",
            "what": "the device description (measure_host) of the machine that measured the host datasets in this "
                    "folder; the rows of those datasets are priced with it on device 'host'",
            "machine": data.get("machine"), "spec": spec}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only check that the shipped file is what this writes")
    args = p.parse_args()
    text = json.dumps(reference_spec(), indent=1) + "\n"
    if args.check:
        same = TARGET.is_file() and TARGET.read_text() == text
        print(f"{TARGET.name}: {'up to date' if same else 'differs'}")
        return 0 if same else 1
    TARGET.write_text(text)
    print(f"wrote {TARGET.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
