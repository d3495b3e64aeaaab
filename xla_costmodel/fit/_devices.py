"""`calibrate_devices`: a dataset measured on several devices, fitted per device and across devices.

A fleet run (`xla-costmodel measure --engine ray`) merges the measurements
of every device into one dataset, each row tagged with the device it ran on
(`device`, `device_kind`, read on the node). Stevens & Klöckner's model is
*unified*: one set of features for every GPU, with weights fitted per
device from the same measurement kernels. So:

- per device: `calibrate(device, dataset=its rows)` for each device in the
  data, the usual `calibration/<device>_<model>.json` files;
- across devices: one `fitted` model (one weight table) fitted to the rows
  of every device, each row's features computed with its own device's
  facts, saved as device `fleet` (`FittedModel.from_calibration("fleet")`),
  and scored on each device's rows next to that device's own fit, which
  says how much one weight table for all devices costs.

A row's device is matched to a `DeviceSpec`: a GPU preset whose description
is jax's `device_kind` (`"NVIDIA H100 80GB HBM3"` -> `h100-sxm`), `host` for
rows measured on this machine's CPU, or what `devices` maps it to.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from .._text import count
from ..datasets import dataset_devices, header, load_rows, measured_on, save_calibration, training_rows, user_data_dir
from ._calibrate import FITTABLE_MODELS, _train_accuracy, fit_and_save
from ..features import prepare
from ._refit import dataset_entry, used_roles

__all__ = ["CROSS_DEVICE", "calibrate_devices", "dataset_devices", "device_for_rows"]

#: The device name the across-devices calibration is saved under.
CROSS_DEVICE = "fleet"


def device_for_rows(device: str, device_kind: str, devices=None):
    """The `DeviceSpec` of rows measured on `device` (with jax's `device_kind`).

    **Arguments:** `device`, `device_kind`: the rows' columns; `devices`: a
    mapping from a `device` or `device_kind` value to a device name or
    `DeviceSpec`, which comes first.

    **Raises:** `ValueError` naming the device when nothing matches.
    """
    from ..devices import get_device
    from ..devices import PRESETS

    for key in (device, device_kind):
        if devices and key in devices:
            return get_device(devices[key])
    for spec in PRESETS.values():
        if spec.description and spec.description == device_kind:
            return spec
    if device.startswith("cpu:"):
        from ..measure import device_description

        if device == _this_cpu(device_description):
            return get_device("host")
    raise ValueError(
        f"rows measured on {device!r} (device_kind {device_kind!r}) match no device preset and are not this "
        f"machine's CPU; map them to a device (register_device), e.g. devices={{{device!r}: 'my-device'}} "
        f"(--device-map '{device}=my-device')"
    )


def _this_cpu(device_description) -> str:
    try:
        return device_description()["device"]
    except RuntimeError:  # no jax backend here: not this CPU either
        return ""


def calibrate_devices(dataset, *, models=FITTABLE_MODELS, devices=None, out_dir=None,
                      include_programs: bool = False, progress: bool = True) -> pd.DataFrame:
    """Fit every fittable model per device, and the `fitted` model across devices (see the module docstring).

    **Arguments:**

    - `dataset`: a dataset path, a list of them, or a DataFrame, with rows
      of one or more devices (e.g. a fleet run's merged dataset).
    - `models`: the models to fit per device (`calibrate`'s); the
      cross-device fit is made when `fitted` is among them and there are
      rows of two devices or more.
    - `devices`: `{device or device_kind value: device name or DeviceSpec}`
      for rows no preset matches.
    - `out_dir`, `include_programs`, `progress`: as for `calibrate` (each
      device's calibrations written to the user's data directory are judged
      against the ones in use, and a worse one goes to `held-back/`).

    **Returns:** a DataFrame, one row per (fit, device, model): `fit`
    (`per-device` or `cross-device`), `device` (the spec's name),
    `measured_on` (the rows' `device`), `model`, `file`, `training_rows`,
    the training-set `ratio_error` and `within_2x` on that device's rows, `fit_s`.

    **Raises:** `ValueError` for rows of a device that matches no spec, or a
    dataset without rows.
    """
    from ._fitted import FittedModel

    df = load_rows(dataset)
    paths = [] if isinstance(dataset, pd.DataFrame) else (
        [Path(dataset)] if isinstance(dataset, (str, os.PathLike)) else [Path(p) for p in dataset])
    if not include_programs:
        df = training_rows(df)
    names = dataset_devices(df)
    if not names:
        raise ValueError("the dataset has no rows with a device to calibrate")
    kinds = df.groupby("device", sort=False)["device_kind"].first() if "device_kind" in df else {}
    specs = {name: device_for_rows(name, str(kinds.get(name, "")), devices) for name in names}
    taken = {}
    for name, spec in specs.items():
        if spec.name in taken:
            raise ValueError(f"rows of {taken[spec.name]!r} and of {name!r} both map to device {spec.name!r}")
        taken[spec.name] = name
    out = Path(out_dir) if out_dir is not None else user_data_dir()

    results = []
    for name, spec in specs.items():
        rows = df[df["device"].astype(str) == name]
        # The rows were matched to `spec` above (by preset or by `devices`): fitted as its own.
        mapped = bool(devices) and any(k in devices for k in (name, str(kinds.get(name, ""))))
        # Into the user's data directory only if no worse than the calibration in use (`fit._calibrate`).
        per = fit_and_save(spec, rows, paths=[], models=models, out=out, include_programs=include_programs,
                           progress=progress, device_map=mapped, judge=out_dir is None)
        results.append(per.assign(fit="per-device", device=spec.name, measured_on=name))

    if "fitted" in models and len(specs) > 1:
        t0 = time.perf_counter()
        preps = {name: prepare(df[df["device"].astype(str) == name], spec) for name, spec in specs.items()}
        X = pd.concat([p.X for p in preps.values()])
        y = np.concatenate([p.y for p in preps.values()])
        model = FittedModel().fit(X, y)
        payload = {**header("fitted", CROSS_DEVICE, len(y), [dataset_entry(p, out, include_programs) for p in paths],
                            measured_on(df)),
                   **model.to_calibration(), "devices": [s.name for s in specs.values()],
                   "rows_roles": list(used_roles(include_programs)),
                   "train_metrics": _train_accuracy(model.predict(X), y)}
        path = save_calibration(payload, out)
        fit_s = time.perf_counter() - t0
        for name, prep in preps.items():
            acc = _train_accuracy(model.predict(prep.X), prep.y)
            results.append(pd.DataFrame([{
                "fit": "cross-device", "device": specs[name].name, "measured_on": name, "model": "fitted",
                "file": str(path), "training_rows": int(len(y)), "ratio_error": acc.get("ratio_error"),
                "within_2x": acc.get("within_2x"), "fit_s": fit_s,
            }]))
        if progress:
            print(f"  fitted across {len(specs)} devices ({count(len(y), 'kernel')}) -> {path}", file=sys.stderr)
    table = pd.concat(results, ignore_index=True)
    return table[["fit", "device", "measured_on", "model", "file", "training_rows", "ratio_error", "within_2x", "fit_s"]]
