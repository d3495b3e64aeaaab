"""Saved calibrations: one small JSON file per (device, model) under `calibration/`.

A file is `<dir>/<device>_<model>.json`, where `<dir>` is the project's
`calibration/` folder (or `$XLA_COSTMODEL_CALIBRATION_DIR`). Every file has a
common header (`format`, `model`, `device`, `date`, `jax_version`,
`jaxlib_version`, `training_rows`, `datasets`) and the model's own payload
(`weights`, `params`, ...). `xla_costmodel.calibrate(device=...)` writes them;
the `fitted`, `learned` and `*-calibrated` models read them when used
without being fitted first.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["CalibrationError", "calibration_dir", "calibration_path", "save_calibration", "load_calibration"]

FORMAT = "xla_costmodel.calibration-model/1"
DIR_ENV = "XLA_COSTMODEL_CALIBRATION_DIR"
_REQUIRED = ("format", "model", "device", "date", "training_rows")


class CalibrationError(ValueError):
    """A calibration that is missing or cannot be used; the message says how to make one."""


def calibration_dir() -> Path:
    """Where calibrations live: `$XLA_COSTMODEL_CALIBRATION_DIR`, else the project's `calibration/`."""
    env = os.environ.get(DIR_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "calibration"


def _device_name(device) -> str:
    name = device if isinstance(device, str) else getattr(device, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"expected a device name or DeviceSpec, got {device!r}")
    return name


def calibration_path(model: str, device, directory=None) -> Path:
    """The file of `model`'s calibration for `device` (name or `DeviceSpec`)."""
    safe = re.sub(r"[^\w.\-]+", "_", _device_name(device))
    return Path(directory or calibration_dir()) / f"{safe}_{model}.json"


def _how(device: str) -> str:
    return (
        f"make one with xla_costmodel.calibrate(device={device!r}) "
        f"or `xla-costmodel calibrate --device {device}`"
    )


def file_sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def header(model: str, device, training_rows: int, datasets: list[dict]) -> dict[str, Any]:
    """The common fields of a calibration file."""
    try:
        import jax
        import jaxlib

        jax_version, jaxlib_version = jax.__version__, getattr(jaxlib, "__version__", "")
    except ImportError:  # pragma: no cover - jax is a dependency
        jax_version = jaxlib_version = ""
    desc = getattr(device, "description", "") if not isinstance(device, str) else ""
    return {
        "format": FORMAT,
        "model": model,
        "device": _device_name(device),
        "device_description": desc,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "jax_version": jax_version,
        "jaxlib_version": jaxlib_version,
        "training_rows": int(training_rows),
        "datasets": datasets,
    }


def save_calibration(payload: dict[str, Any], directory=None) -> Path:
    """Write a calibration file atomically; `payload` must have the header fields.

    **Returns:** the path written.
    """
    missing = [k for k in _REQUIRED if k not in payload]
    if missing:
        raise ValueError(f"calibration payload lacks {', '.join(missing)}")
    path = calibration_path(payload["model"], payload["device"], directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(payload, indent=1, sort_keys=False, allow_nan=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def load_calibration(model: str, device, directory=None) -> dict[str, Any]:
    """Read `model`'s calibration for `device`.

    **Returns:** the JSON object. **Raises:** `CalibrationError` when the file
    is missing, not JSON, of another format, or for another model/device; the
    message names the file and says how to make a calibration.
    """
    name = _device_name(device)
    path = calibration_path(model, name, directory)
    if not path.is_file():
        raise CalibrationError(f"no '{model}' calibration for device '{name}' ({path} does not exist); {_how(name)}")
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
    return data
