"""Saved calibrations and the user's data: where they are read, where they are written.

Two places hold calibrations and measurement datasets, with one layout
(`<device>_<model>.json`, `host_cpu.parquet`, ...):

- **the user's data directory** (`user_data_dir()`): `$XLA_COSTMODEL_DATA_DIR`
  when set, else the platform's per-user data folder (`platformdirs`:
  `~/.local/share/xla_costmodel` on Linux). Everything the library writes
  by default goes here: `calibrate`'s files, the suite measurements of
  `xla-costmodel measure`, a fleet's dataset. Point the variable at a
  shared folder for the workers of a cluster.
- **the shipped calibrations** (`shipped_dir()`): the project's
  `calibration/` folder, measured on the reference host. The library reads
  it and never writes it unless a caller names it as the place to write
  (`out_dir=`, `--out`).

Reading (`load_calibration`, `find_data_file`) looks in the user's
directory first, then in the shipped one (`calibration_in_use` says which
file a model reads). Two sub-folders of the user's directory hold
calibrations that no model reads unless asked (by pointing
`$XLA_COSTMODEL_DATA_DIR` at the sub-folder, or `load_calibration(...,
directory=...)`):

- `quick/` (`quick_dir()`): what `calibrate --quick` fits, a smoke test on
  the quick suite alone;
- `held-back/` (`held_back_dir()`): a calibration that scored worse on its
  own held-out rows than the calibration it would have replaced
  (`fit._calibrate`), kept so that it can be inspected. Every write goes through a
temporary file and a rename (`xla_costmodel._atomic.write_atomically`), so
a reader never sees half a file.

Every calibration file has a common header (`format`, `model`, `device`,
`date`, `jax_version`, `jaxlib_version`, `training_rows`, `datasets`,
`measured_on`: the devices its rows were measured on, and for rows timed on
a CPU `machine`: its CPU model, cores and cache sizes,
`devices.host.machine_record`) and the model's own payload (`weights`,
`params`, ...). `xla_costmodel.calibrate(device=...)` writes them; the
`fitted`, `learned` and `*-calibrated` models read them when used without
being fitted first.

A `host` calibration measured on another machine than this one (another CPU
model, core count or cache size) still loads, since it is the best there is
until this machine is calibrated, but says so once per process
(`MachineMismatchWarning`).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import warnings
from pathlib import Path
from typing import Any

from .._atomic import write_atomically

__all__ = ["CalibrationError", "DATA_DIR_ENV", "DeviceMismatchError", "MachineMismatchWarning", "calibration_in_use",
           "calibration_path", "held_back_dir", "measuring_device", "quick_dir",
           "dataset_devices", "rows_machine",
           "find_data_file", "load_calibration", "save_calibration", "shipped_dir", "user_data_dir",
           "write_atomically"]

FORMAT = "xla_costmodel.calibration-model/1"
#: The user's data directory (calibrations, datasets); see the module docstring.
DATA_DIR_ENV = "XLA_COSTMODEL_DATA_DIR"
_APP = "xla_costmodel"
_REQUIRED = ("format", "model", "device", "date", "training_rows")


class CalibrationError(ValueError):
    """A calibration that is missing or cannot be used; the message says how to make one."""


class DeviceMismatchError(CalibrationError):
    """Measurements of one device offered as another's: calibrating `h100-sxm` from this CPU's runs,
    or a saved calibration whose rows were measured on another device. The message names both."""


class MachineMismatchWarning(UserWarning):
    """A `host` calibration measured on another machine (CPU model, cores or caches) is used here: its
    kernel times are that machine's. The message names both machines and how to calibrate this one."""


# --------------------------------------------------------------------------- where


def user_data_dir() -> Path:
    """The user's data directory: `$XLA_COSTMODEL_DATA_DIR`, else platformdirs'."""
    value = os.environ.get(DATA_DIR_ENV)
    if value:
        return Path(value).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir(_APP, appauthor=False))


#: Sub-folders of the user's data directory that no model reads unless asked (see the module docstring).
QUICK_SUBDIR = "quick"
HELD_BACK_SUBDIR = "held-back"


def quick_dir() -> Path:
    """Where `calibrate --quick` writes: `user_data_dir()/quick`, read by no model unless asked."""
    return user_data_dir() / QUICK_SUBDIR


def held_back_dir(base=None) -> Path:
    """Where a calibration worse than the one in use is kept: `base/held-back` (default the user's data
    directory's), read by no model unless asked."""
    return Path(base if base is not None else user_data_dir()) / HELD_BACK_SUBDIR


def calibration_in_use(model: str, device) -> tuple[Path | None, str]:
    """Which file `model` reads for `device` when it is used without being fitted first, and whose it is.

    **Returns:** `(path, whose)`: `whose` is `"yours"` (the user's data
    directory), `"shipped"` (the project's `calibration/`) or `"none"`
    (path None: the model cannot be used unfitted on this device).
    """
    file_name = _file_name(model, device)
    for d in _search_path():
        if (d / file_name).is_file():
            return d / file_name, ("shipped" if _same_dir(d, shipped_dir()) else "yours")
    return None, "none"


def calibration_measured_on(path) -> str:
    """Where the rows of the calibration file `path` were measured, in words (its `measured_on` devices,
    `; `-separated), or "" when the file does not say or cannot be read."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return ""
    seen = data.get("measured_on") if isinstance(data, dict) else None
    if not isinstance(seen, list):
        return ""
    return "; ".join(str(m.get("device") or m.get("device_kind") or "") for m in seen if isinstance(m, dict))


#: In a folder of host datasets: the device description of the machine that measured them (the shipped
#: `calibration/` has the reference host's, `scripts/ship_reference_host.py`).
MEASURING_DEVICE_FILE = "host_device.json"
_MEASURING_FORMAT = "xla_costmodel.measuring-device/1"


def measuring_device(paths):
    """The `host` `DeviceSpec` of the machine that measured the dataset files `paths`, or None.

    Rows measured on one machine and priced on another's microbenchmarks
    score differently on every machine; the rows' own machine gives the same
    figures everywhere. A folder that holds `host_device.json` (the shipped
    `calibration/` does) says which machine measured its host datasets.

    **Returns:** the spec when every path is a file in a folder with that
    file, all the same; None for a DataFrame, files measured here (the
    user's data directory has none), or files of several machines.
    **Raises:** `CalibrationError` when the description cannot be read.
    """
    if paths is None or not isinstance(paths, (str, os.PathLike, list, tuple)):
        return None
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not paths or not all(isinstance(p, (str, os.PathLike)) for p in paths):
        return None
    files = {Path(p).resolve().parent / MEASURING_DEVICE_FILE for p in paths}
    if len(files) != 1:
        return None
    (file,) = files
    if not file.is_file():
        return None
    from ..devices import DeviceSpec

    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
        if doc.get("format") != _MEASURING_FORMAT:
            raise ValueError(f"format {doc.get('format')!r} is not {_MEASURING_FORMAT!r}")
        spec = DeviceSpec.from_dict(doc["spec"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CalibrationError(f"{file}: not a readable description of the measuring machine ({exc})") from None
    if spec.name != "host" or spec.kind != "cpu":
        raise CalibrationError(f"{file}: describes device {spec.name!r} of kind {spec.kind!r}, not a 'host' CPU")
    return spec


def shipped_dir() -> Path:
    """The calibrations and datasets that ship with the project (`calibration/`): read only."""
    return Path(__file__).resolve().parents[2] / "calibration"


def _search_path(directory=None) -> list[Path]:
    """The folders a read looks in, in order: `directory` alone when given, else user then shipped."""
    if directory is not None:
        return [Path(directory)]
    out: list[Path] = []
    for d in (user_data_dir(), shipped_dir()):
        if not any(_same_dir(d, seen) for seen in out):
            out.append(d)
    return out


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def find_data_file(name: str, directory=None) -> Path:
    """The file `name` in the user's data directory if it is there, else the shipped one's.

    **Returns:** the first existing path, or (none exists) the path in the
    first folder searched, so that an error names where it was expected.
    """
    folders = _search_path(directory)
    for d in folders:
        if (d / name).is_file():
            return d / name
    return folders[0] / name


def _device_name(device) -> str:
    name = device if isinstance(device, str) else getattr(device, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"expected a device name or DeviceSpec, got {device!r}")
    return name


def _file_name(model: str, device) -> str:
    safe = re.sub(r"[^\w.\-]+", "_", _device_name(device))
    return f"{safe}_{model}.json"


def calibration_path(model: str, device, directory=None) -> Path:
    """The file of `model`'s calibration for `device` (name or `DeviceSpec`).

    With `directory`, the file there. Without, the file a read uses (the
    user's, else the shipped one), or where `calibrate` would write it when
    there is none.
    """
    if directory is not None:
        return Path(directory) / _file_name(model, device)
    return find_data_file(_file_name(model, device))


def _how(device: str) -> str:
    if device == "host":
        return ("make one with xla_costmodel.calibrate(device='host') or `xla-costmodel calibrate --device host` "
                "(measures this machine)")
    # Calibrating another device from this machine's runs would label this machine's times as that
    # device's: the advice is to measure on the device and fit those measurements.
    return (f"make one from measurements taken on a '{device}': run `xla-costmodel measure --out DATA.parquet` "
            f"on that machine, then xla_costmodel.calibrate(device='{device}', dataset='DATA.parquet') or "
            f"`xla-costmodel calibrate --device {device} --dataset DATA.parquet`")


# --------------------------------------------------------------------------- writing


def file_sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def header(model: str, device, training_rows: int, datasets: list[dict], measured_on=None) -> dict[str, Any]:
    """The common fields of a calibration file.

    `measured_on`: the distinct `{backend, device_kind, device}` of the rows
    fitted (`measured_on(df)`), so that a reader can tell which hardware the
    times came from; for rows of a CPU, `machine` records which one
    (`rows_machine`).
    """
    try:
        import jax
        import jaxlib

        jax_version, jaxlib_version = jax.__version__, getattr(jaxlib, "__version__", "")
    except ImportError:  # pragma: no cover - jax is a dependency
        jax_version = jaxlib_version = ""
    desc = getattr(device, "description", "") if not isinstance(device, str) else ""
    out = {
        "format": FORMAT,
        "model": model,
        "device": _device_name(device),
        "device_description": desc,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "jax_version": jax_version,
        "jaxlib_version": jaxlib_version,
        "training_rows": int(training_rows),
        "datasets": datasets,
        "measured_on": list(measured_on or []),
    }
    machine = rows_machine(measured_on or [])
    if machine is not None:
        out["machine"] = machine
    return out


_CPU_DEVICE = re.compile(r"cpu: (?P<model>.*), (?P<cores>\d+) cores")


def rows_machine(entries) -> dict | None:
    """The machine rows were timed on, from their `measured_on` entries: this machine's record
    (`devices.host.machine_record`) when their CPU model and core count are this machine's, else the
    model and cores their `device` names (`"cpu: AMD EPYC, 2 cores"`) with the caches `UNKNOWN`; None
    for rows of no CPU, or of several."""
    from ..devices.host import MACHINE_FACTS, UNKNOWN, cpu_model, machine_record

    cpus = {str(e.get("device", "")) for e in entries if str(e.get("backend", "cpu")).lower() == "cpu"}
    if len(cpus) != 1 or len(cpus) != len(entries):
        return None
    found = _CPU_DEVICE.fullmatch(cpus.pop())
    if found is None:
        return None
    model, cores = found["model"], int(found["cores"])
    if model == cpu_model() and cores == (os.cpu_count() or 1):  # as `measure.device_description` counts
        return machine_record()
    return {"cpu_model": model, "cores": cores, **{f: UNKNOWN for f in MACHINE_FACTS[2:]}}


def measured_on(df) -> list[dict[str, str]]:
    """The distinct devices rows were measured on: `[{backend, device_kind, device}]` (columns that exist)."""
    cols = [c for c in ("backend", "device_kind", "device") if c in getattr(df, "columns", ())]
    if not cols or not len(df):
        return []
    seen = df[cols].astype(str).drop_duplicates()
    return [dict(zip(cols, row)) for row in seen.itertuples(index=False)]


def dataset_devices(df) -> list[str]:
    """The distinct devices rows were measured on (the `device` column, as read on each node), in order."""
    if "device" not in getattr(df, "columns", ()):
        return []
    return list(dict.fromkeys(df["device"].dropna().astype(str)))


def save_calibration(payload: dict[str, Any], directory=None) -> Path:
    """Write a calibration file atomically; `payload` must have the header fields.

    **Arguments:** `directory`: where to write (default `user_data_dir()`;
    the shipped calibrations are never written unless named here).

    **Returns:** the path written.
    """
    missing = [k for k in _REQUIRED if k not in payload]
    if missing:
        raise ValueError(f"calibration payload lacks {', '.join(missing)}")
    path = Path(directory if directory is not None else user_data_dir()) / _file_name(payload["model"], payload["device"])
    text = json.dumps(payload, indent=1, sort_keys=False, allow_nan=False) + "\n"
    return write_atomically(path, text)


# --------------------------------------------------------------------------- reading


def load_calibration(model: str, device, directory=None) -> dict[str, Any]:
    """Read `model`'s calibration for `device`: the user's, else the shipped one.

    **Arguments:** `device`: a name or `DeviceSpec`; `directory`: read from
    this folder only.

    **Returns:** the JSON object, with `_path` (the file read) added.
    **Raises:** `CalibrationError` when no file exists, or it is not JSON, of
    another format, or for another model/device; `DeviceMismatchError` when
    its rows were measured on another kind of device than `device` (a CPU's
    times saved as a GPU's). The message names the file and says how to
    make a calibration.
    """
    name = _device_name(device)
    file_name = _file_name(model, name)
    folders = _search_path(directory)
    path = next((d / file_name for d in folders if (d / file_name).is_file()), None)
    if path is None:
        places = [str(d / file_name) for d in folders]
        where = f"{places[0]} does not exist" if len(places) == 1 else f"neither {' nor '.join(places)} exists"
        raise CalibrationError(f"no '{model}' calibration for device '{name}' ({where}); {_how(name)}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CalibrationError(f"{path}: not a readable calibration ({exc}); {_how(name)}") from None
    if not isinstance(data, dict):
        raise CalibrationError(f"{path}: not a calibration (expected a JSON object); {_how(name)}")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise CalibrationError(f"{path}: not a calibration (missing {', '.join(missing)}); {_how(name)}")
    if data["format"] != FORMAT:
        raise CalibrationError(f"{path}: format {data['format']!r} is not {FORMAT!r}; {_how(name)}")
    if data["model"] != model or data["device"] != name:
        raise CalibrationError(
            f"{path}: holds model {data['model']!r} for device {data['device']!r}, "
            f"expected {model!r} for {name!r}; {_how(name)}"
        )
    data["_path"] = str(path)
    _check_measured_on(data, path, device)
    if name == "host":
        _warn_other_machine(data, path)
    return data


#: The machines (CPU model, cores) `_warn_other_machine` has warned about in this process.
_WARNED_MACHINES: set[tuple] = set()


def _warn_other_machine(data: dict, path: Path) -> None:
    """Warn (`MachineMismatchWarning`, once per recorded machine) when a `host` calibration's rows were
    timed on another machine than this one: by its `machine`, or, in files from before that was
    recorded, by the CPU model and cores of its `measured_on`."""
    from ..devices.host import machine_differences, machine_record

    record = data.get("machine")
    if not isinstance(record, dict):
        record = rows_machine([e for e in data.get("measured_on") or [] if not e.get("device_map")]) or {}
    here = machine_record()
    differences = machine_differences(record, here)
    key = (record.get("cpu_model"), record.get("cores"))
    if not differences or key in _WARNED_MACHINES:
        return
    _WARNED_MACHINES.add(key)
    warnings.warn(
        f"{path} was measured on another machine ({'; '.join(differences)}), so its kernel times are that "
        f"machine's; calibrate this one: `xla-costmodel calibrate --device host` (minutes; it writes to "
        f"{user_data_dir()}, read before the shipped calibrations where they score better on held-out rows)",
        MachineMismatchWarning,
        stacklevel=3,
    )


def _spec_of(device):
    """The `DeviceSpec` of `device` without measuring anything (None for `host` by name, or unknown names)."""
    if not isinstance(device, str):
        return device
    if device == "host":
        return None
    from ..devices import get_device

    try:
        return get_device(device)
    except ValueError:
        return None


def rows_device_matches(entry: dict, spec) -> bool:
    """Whether rows measured on `entry` (`{backend, device_kind, device}`) are measurements of `spec`.

    A CPU spec takes rows of a CPU backend; a GPU spec takes rows whose jax
    `device_kind` is the spec's `description` (XLA's name for the device).
    """
    backend = str(entry.get("backend", "")).lower()
    device = str(entry.get("device", ""))
    if spec.kind == "cpu":
        return backend == "cpu" or (not backend and device.startswith("cpu"))
    return bool(spec.description) and str(entry.get("device_kind", "")) == spec.description


def _check_measured_on(data: dict, path: Path, device) -> None:
    """Refuse a calibration whose rows were measured on another kind of device than `device`."""
    # Rows the user assigned to this device (`--device-map`) are its rows by their word.
    entries = [e for e in data.get("measured_on") or [] if not e.get("device_map")]
    spec = _spec_of(device)
    if spec is None:  # `host` by name (not measured here just to check), or a name no registry knows
        if _device_name(device) == "host" and not all(str(e.get("backend", "cpu")).lower() == "cpu" for e in entries):
            raise DeviceMismatchError(f"{path}: its rows were measured on {_describe(entries)}, not on a CPU; "
                                      f"{_how('host')}")
        return
    if not data.get("measured_on") and spec.kind == "gpu":
        # Written before `measured_on` existed (when `calibrate --device h100-sxm` could save this
        # CPU's times as an H100's): the device columns of its datasets tell.
        entries = _dataset_devices(data, path)
    if not all(rows_device_matches(e, spec) for e in entries):
        what = spec.description or spec.name
        raise DeviceMismatchError(
            f"{path}: its rows were measured on {_describe(entries)}, not on a {what}, so it does not price "
            f"'{spec.name}'; {_how(spec.name)}"
        )


def _describe(entries) -> str:
    return "; ".join(str(e.get("device") or e.get("device_kind") or e.get("backend")) for e in entries)


def _dataset_devices(data: dict, path: Path) -> list[dict]:
    """`measured_on` from the device columns of the datasets a calibration names (those that still exist)."""
    import pandas as pd

    import pyarrow.parquet as pq

    frames = []
    for d in data.get("datasets") or []:
        p = Path(str(d.get("path", "")))
        p = p if p.is_absolute() else path.parent / p
        if p.suffix != ".parquet" or not p.is_file():
            continue
        try:
            names = pq.read_schema(p).names
            cols = [c for c in ("backend", "device_kind", "device") if c in names]
            if cols:  # only the device columns: the file may be large
                frames.append(pd.read_parquet(p, columns=cols))
        except Exception:  # an unreadable or foreign file says nothing about the device
            continue
    return measured_on(pd.concat(frames, ignore_index=True)) if frames else []
