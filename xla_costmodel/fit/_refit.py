"""The rows a saved calibration was fitted to, and the `learned` models refitted from them.

A `learned` (or `learned-context`) calibration keeps no trees: it names its
datasets (paths relative to the calibration's folder), the suite runs it
used, a SHA-256 of those rows and a few check predictions. Loading refits
the trees on the same rows (`refit_learned`) and verifies the checks; rows
appended later are ignored, a change to the rows fitted on is an error.
`calibrate` writes these entries (`dataset_entry`); the models read them.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..datasets import SUITE, TRAINING_PROGRAM, CalibrationError, load_calibration, load_rows, own_program_rows, row_roles
from ..features import prepare

__all__ = ["CONTEXT_ROWS_RULE", "context_training_rows", "dataset_entry", "refit_learned", "relative_path",
           "rows_sha256", "used_roles", "used_rows"]


def relative_path(path: Path, base: Path) -> str:
    try:
        return os.path.relpath(Path(path).resolve(), base.resolve())
    except ValueError:  # another drive (Windows)
        return str(Path(path).resolve())


#: The `rows_rule` of a calibration fitted to the suite and this project's own programs (context models).
CONTEXT_ROWS_RULE = "suite and own programs"


def context_training_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows the context models' saved calibrations are fitted to: the suite's (role `suite`) and this
    project's own programs as compiled (`own_program_rows`); never a corpus program."""
    return df[(row_roles(df) == SUITE) | own_program_rows(df)]


def used_roles(include_programs: bool) -> tuple[str, ...]:
    """The roles of the rows a calibration is fitted to (`datasets.row_roles`)."""
    return (SUITE, TRAINING_PROGRAM) if include_programs else (SUITE,)


def used_rows(df: pd.DataFrame, excluded, suite_runs=None, rule=None, roles=None) -> pd.DataFrame:
    """The rows of a dataset a calibration was fitted to: by its `rows_rule` (the context models'), else
    those of `roles` (files since roles were recorded), else those whose `kernel_class` is not `excluded`;
    and of the `suite_runs` it used."""
    if rule == CONTEXT_ROWS_RULE:
        df = context_training_rows(df)
    elif roles is not None:
        df = df[np.isin(row_roles(df), list(roles))]
    elif excluded and "kernel_class" in df:
        df = df[~df["kernel_class"].isin(list(excluded))]
    if suite_runs is not None and "suite_run" in df:
        df = df[df["suite_run"].astype(str).isin(set(suite_runs))]
    return df


def rows_sha256(df: pd.DataFrame) -> str:
    """A fingerprint of the rows a model was fitted on (order-independent)."""
    import hashlib

    # `min_per_run_s` holds what schema 1 called `min_s`, so fingerprints of either schema agree.
    cols = [c for c in ("suite_run", "case", "hlo_op", "min_per_run_s", "launches") if c in df]
    keys = sorted("\x1f".join(repr(v) for v in row) for row in df[cols].itertuples(index=False))
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()


def dataset_entry(path: Path, out: Path, include_programs: bool, rule: str | None = None) -> dict:
    """Where a training dataset is, which of its suite runs were used, and a fingerprint of those rows.

    Later appends (new suite runs) leave the calibration valid; a change to the
    rows it was fitted on is detected when the `learned` model refits.
    """
    rows = used_rows(load_rows(path), None, rule=rule, roles=used_roles(include_programs))
    runs = sorted(set(rows["suite_run"].astype(str))) if "suite_run" in rows else None
    return {"path": relative_path(path, out), "suite_runs": runs, "rows": int(len(rows)), "rows_sha256": rows_sha256(rows)}


# Refitted models by (calibration file, its mtime): refitting takes seconds, and
# every `get_model("learned")` is a new, unfitted instance.
_REFITS: dict = {}


def refit_learned(device, model_class):
    """The model of `model_class` (`LearnedModel`, `LearnedContextModel`) saved for `device`, refitted from
    its datasets (see module docstring).

    Refits are cached per calibration file (and its modification time) in this process.
    """
    data = load_calibration(model_class.name, device)
    where = data.get("_path")
    key = (where, os.stat(where).st_mtime_ns)
    if key not in _REFITS:
        _REFITS[key] = _refit_learned(data, device, model_class)
    return _REFITS[key]


def _refit_learned(data: dict, device, model_class):
    from ..measure import resolve_device
    from ..features import device_facts

    where = data.get("_path")
    if data.get("form") == "base-efficiency":
        # (a learned efficiency over an analytical model, `fit._efficiency`: the H100's shipped form)
        from ._efficiency import refit_efficiency

        return refit_efficiency(data, device)
    how = f"make a new one with xla_costmodel.calibrate(device={data.get('device')!r})"
    base = Path(where).parent
    excluded = data.get("excluded_classes", [])
    frames = []
    for d in data.get("datasets", []):
        p = Path(d["path"])
        p = p if p.is_absolute() else base / p
        if not p.is_file():
            raise CalibrationError(f"{where}: its training dataset {p} is missing; {how}")
        try:
            rows = used_rows(load_rows(p), excluded, d.get("suite_runs"), data.get("rows_rule"),
                              data.get("rows_roles"))
        except ValueError as exc:
            raise CalibrationError(f"{where}: its training dataset cannot be read ({exc}); {how}") from None
        if d.get("rows_sha256") and rows_sha256(rows) != d["rows_sha256"]:
            raise CalibrationError(f"{where}: the rows of its training dataset {p} changed since calibration; {how}")
        frames.append(rows)
    if not frames:
        raise CalibrationError(f"{where}: names no training dataset; {how}")
    df = pd.concat(frames, ignore_index=True)
    facts = data.get("device_facts")
    dev = facts if isinstance(facts, dict) and facts else device_facts(resolve_device(device))
    prep = prepare(df, dev)
    try:
        params = dict(data["params"])
        model = model_class(**params).fit(prep.X, prep.y)
    except (KeyError, TypeError, ValueError) as exc:
        raise CalibrationError(f"{where}: unusable 'learned' calibration ({exc}); {how}") from None
    pred = model.predict(prep.X)
    lookup = {(str(r.get("case", "")), str(r.get("hlo_op", "")), str(r.get("suite_run", ""))): i
              for i, (_, r) in enumerate(prep.rows.iterrows())}
    for c in data.get("checks", []):
        i = lookup.get((c["case"], c["hlo_op"], c["suite_run"]))
        if i is None or not math.isclose(pred[i], c["prediction_s"], rel_tol=1e-6):
            raise CalibrationError(f"{where}: refitting did not reproduce the saved predictions; {how}")
    return model
