"""`evaluate`: measure a program and predict it with cost models, kernel by kernel, in one table.

The measurement (`measure_program`, the project's one methodology) and the
predictions (`analyze` on the very module that ran) are joined on the
kernel's instruction name. Both sides are per program run: a kernel launched
several times in one run (a loop body) has its measured launches summed,
and its prediction is `analyze`'s `total_s` (time per launch × executions).
The metrics are `compare`'s (`accuracy`): no second implementation.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

import pandas as pd

from .._text import count
from ..analysis import CONTROL_FLOW_OPCODES

__all__ = ["evaluate", "Evaluation", "DEFAULT_EVALUATION_MODELS", "SUMMARY_COLUMNS", "measured_trip_counts"]

DEFAULT_EVALUATION_MODELS = ("fitted", "learned", "roofline")

#: Columns of `Evaluation.summary`, in order (indexed by model).
SUMMARY_COLUMNS = ("kernels", "unpriced", "sk_error", "ratio_error", "kendall_tau", "within_2x",
                   "predicted_total_s", "measured_total_s", "predicted_wall_s", "measured_wall_s")



@dataclass(frozen=True)
class Evaluation:
    """Measured and predicted times of one program, joined.

    **Attributes:**

    - `kernels`: one row per measured kernel, in execution order: `kernel`
      (the HLO instruction), `opcode`, `fusion_kind`, `launches` (per
      program run), `measured_s` (minimum over the kept runs, per program
      run), and `<model>_s` for each model (per program run:
      `analyze(...)["total_s"]` of that kernel; NaN where the model could
      not price it).
    - `summary`: one row per model (`SUMMARY_COLUMNS`): `kernels` scored,
      `unpriced`, `sk_error` (Stevens & Klöckner's geometric-mean relative
      error), `ratio_error` (exp(mean |ln p/m|) − 1), `kendall_tau`,
      `within_2x`, `predicted_total_s` (the model's whole-program time per
      run, `KernelTable.total_time_s`), `measured_total_s` (the measured
      kernels added up, per run), `predicted_wall_s` (the predicted kernels
      plus the device's per-run program overhead, `fit._program`; NaN when
      the device has no saved overhead, and `notes` says so) and
      `measured_wall_s` (the program's fastest kept run, wall clock, per run).
    - `measurement`: the `Measurement`; `tables`: model → `KernelTable`;
      `device`: the device name the models priced.
    - `notes`: sentences on what the tables leave out and why (e.g. why
      `predicted_wall_s` is NaN, or which loop counts were measured), shown with them.
    - `trip_counts`: `{while loop: trips per execution}` for the loops whose
      trip count the module does not say (it depends on the data): counted
      from the measured launches of their bodies' kernels and given to
      `analyze` as `trip_counts`, so the predictions price the run that was
      measured (`measured_trip_counts`). `analyze` alone keeps its lower
      bound for such loops.
    """

    kernels: pd.DataFrame
    summary: pd.DataFrame
    measurement: object = field(repr=False)
    tables: dict = field(repr=False)
    device: str = "host"
    notes: tuple[str, ...] = ()
    trip_counts: dict = field(default_factory=dict)

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(self.summary.index)

    def plot(self, model: str | None = None, ax=None):
        """Predicted against measured time per kernel (`xla_costmodel.plot.predicted_vs_measured`).

        **Arguments:** `model`: one model (default: every model, one panel
        each); `ax`: the Axes to draw on (with one model only).

        **Returns:** the Axes (one model) or a list of Axes.
        """
        from ..plot import predicted_vs_measured

        models = [model] if model is not None else list(self.models)
        unknown = [m for m in models if m not in self.models]
        if unknown:
            raise ValueError(f"no model {unknown[0]!r} in this evaluation; models: {', '.join(self.models)}")
        kind = self.kernels["fusion_kind"].fillna(self.kernels["opcode"]).astype(str)
        name = getattr(self.measurement.module, "name", "program")
        if len(models) == 1:
            return predicted_vs_measured(self.kernels["measured_s"], self.kernels[f"{models[0]}_s"], kind=kind,
                                         ax=ax, title=f"{name}: {models[0]} on {self.device}")
        if ax is not None:
            raise ValueError("pass ax= together with a single model=")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(models), figsize=(5.2 * len(models), 4.8), squeeze=False)
        for a, m in zip(axes[0], models):
            predicted_vs_measured(self.kernels["measured_s"], self.kernels[f"{m}_s"], kind=kind, ax=a,
                                  title=f"{name}: {m} on {self.device}")
        fig.tight_layout()
        return list(axes[0])

    def _repr_html_(self) -> str:
        m = self.measurement
        head = (f"<p><b>{html.escape(m.module.name)}</b>: {count(len(self.kernels), 'kernel')} measured on "
                f"{html.escape(m.device)} ({html.escape(m.method.allocator)} allocator, minimum of "
                f"{m.method.kept} runs), predicted on <b>{html.escape(self.device)}</b>; times per program run</p>")
        notes = "".join(f"<p><i>{html.escape(n)}</i></p>" for n in self.notes)
        return head + self.summary._repr_html_() + notes + self.kernels._repr_html_()


def _calibrations_used(models, dev) -> tuple[str, ...]:
    """One sentence per calibrated model: which saved calibration it priced with, the user's or the shipped one
    (`fit.calibration_in_use`), so that a prediction's source is never a guess."""
    from ..fit import FITTABLE_MODELS
    from ..fit import calibration_in_use, calibration_measured_on

    said = []
    for name in models:
        if name in FITTABLE_MODELS:
            path, whose = calibration_in_use(name, dev)
            if path is not None:
                where = calibration_measured_on(path)
                said.append(f"{name} priced with {'your' if whose == 'yours' else 'the shipped'} calibration {path}"
                            + (f", measured on {where}" if where else ""))
    return tuple(said)


def evaluate(
    fn,
    *args,
    device="host",
    models=DEFAULT_EVALUATION_MODELS,
    repeats: int | None = None,
    discard: int | None = None,
    allocator: str | None = None,
    in_process: bool | None = None,
) -> Evaluation:
    """Measure a program on this machine and predict the same compiled module with cost models.

    **Arguments:**

    - `fn`, `*args`: the program (a function, jitted here, or a jitted one)
      and example arguments, as for `measure`.
    - `device`: the device the models price (default `"host"`, this
      machine). It must be of the kind the program runs on: a CPU
      measurement is not compared with a GPU's prediction.
    - `models`: names for `get_model` (`models.resolve_model`; default `fitted`, `learned`,
      `roofline`; the fitted ones use the device's saved calibration).
    - `repeats`, `discard`, `allocator`: the measurement's (default: the
      project's methodology, `DEFAULT_METHOD`); `in_process`: where it runs,
      as for `measure`.

    **Returns:** an `Evaluation`.

    **Raises:** `UserProgramError` (`xla_costmodel.measure`, a `ValueError`)
    naming the user's file, line and exception when jax cannot trace or
    lower the program; `ValueError` for an unknown model or device, a device of
    another kind than the one measured, or no model; `MeasurementError` when
    the trace cannot be trusted.
    """
    from ..metrics import accuracy
    from ..hlo import parse_hlo
    from ..measure import DEFAULT_METHOD, device_description, measure_program
    from .._user_program import lower_user_program
    from ..measure import resolve_device
    from ..models import check_prices_device, resolve_model
    from ._analyze import analyze

    models = (models,) if isinstance(models, str) else tuple(models)
    if not models:
        raise ValueError("evaluate needs at least one model")
    if len(set(models)) != len(models):
        raise ValueError(f"models repeat: {list(models)}")
    # A program jax cannot trace is the user's error: say so before the device is measured (seconds).
    lower_user_program(fn, args)
    dev = resolve_device(device)
    for name in models:
        # Unknown names, and models that do not price the device, fail here, before anything is measured.
        check_prices_device(resolve_model(name), dev)
    backend = device_description()["backend"]
    measured_kind = "cpu" if backend == "cpu" else "gpu"
    if dev.kind != measured_kind:
        raise ValueError(
            f"evaluate measures on this machine ({backend}) but device {dev.name!r} is a {dev.kind}: its "
            f"predictions would price kernels XLA compiled for another backend; evaluate on the device 'host'"
            if backend == "cpu" else f"device {dev.name!r} is a {dev.kind}, the program runs on {backend}")

    m = measure_program(
        fn, *args,
        repeats=DEFAULT_METHOD.repeats if repeats is None else repeats,
        discard=DEFAULT_METHOD.discard if discard is None else discard,
        allocator=DEFAULT_METHOD.allocator if allocator is None else allocator,
        check="warn",
        in_process=in_process,
    )
    module = parse_hlo(m.hlo_text, source="<evaluated module>")
    # `Measurement.kernels` holds kernels only (a while/conditional/call's span, which contains its
    # body's kernels, is in `control_flow`); the filter keeps older measurements right too.
    measured = m.kernels[~m.kernels["opcode"].isin(CONTROL_FLOW_OPCODES)]
    trip_counts = measured_trip_counts(module, m)
    kernels = pd.DataFrame({
        "kernel": measured["hlo_op"].to_numpy(),
        "opcode": measured["opcode"].to_numpy(),
        "fusion_kind": measured["fusion_kind"].to_numpy(),
        "launches": measured["launches"].to_numpy(float),
        "measured_s": measured["min_per_run_s"].to_numpy(float),
    })
    tables = {}
    rows = []
    measured_total = float(kernels["measured_s"].sum())
    kept = m.runs[m.runs["kept"]]
    wall = float(kept["wall_s"].min()) if len(kept) else math.nan
    overhead, missing_overhead = _saved_overhead(dev)
    for name in models:
        table = analyze(module, device=dev, model=name, trip_counts=trip_counts or None)
        table.priced_module = "the module measured"
        tables[name] = table
        # A kernel reached from several call sites has one row per site: add them up.
        per_run = pd.DataFrame(table)[["kernel", "total_s"]].groupby("kernel", sort=False)["total_s"].sum(min_count=1)
        kernels[f"{name}_s"] = kernels["kernel"].map(per_run).to_numpy(float)
        timed = kernels["measured_s"] > 0  # a kernel under the trace clock's tick has no relative error
        acc = accuracy(kernels.loc[timed, f"{name}_s"].to_numpy(float), kernels.loc[timed, "measured_s"].to_numpy(float))
        rows.append({
            "model": name,
            "kernels": acc["n"],
            "unpriced": acc["unpriced"],
            "sk_error": acc["sk_error"],
            "ratio_error": acc["ratio_error"],
            "kendall_tau": acc["kendall_tau"],
            "within_2x": acc["within_2x"],
            "predicted_total_s": table.total_time_s,
            "measured_total_s": measured_total,
            "predicted_wall_s": (table.total_time_s + float(overhead(len(kernels)))) if overhead else math.nan,
            "measured_wall_s": wall,
        })
    summary = pd.DataFrame(rows, columns=["model", *SUMMARY_COLUMNS]).set_index("model")
    notes = tuple(f"trip count of '{loop}' depends on the data: {count(n, 'trip')} per execution, counted from the "
                  f"measured launches of its body's kernels (analyze alone assumes 1 and calls its total a lower "
                  f"bound)" for loop, n in trip_counts.items())
    notes += ((missing_overhead,) if missing_overhead else ()) + _calibrations_used(models, dev)
    return Evaluation(kernels=kernels.reset_index(drop=True), summary=summary, measurement=m, tables=tables,
                      device=dev.name, notes=notes, trip_counts=trip_counts)


def measured_trip_counts(module, measurement) -> dict[str, int]:
    """`{while loop: trips per execution}` for the loops of `module` whose count it does not say,
    counted from what ran: the launches per run of the kernels in the loop's body (or, when its body
    launched none, its condition's, which run once more), divided by how often the loop itself ran
    (its own row in `measurement.control_flow` where XLA:CPU traced it, else its computation's count,
    found from the outside in). Loops that did not run, share their body, or whose body's kernels
    disagree on a count are left out (`analyze` then assumes its default and says so).
    """
    from ..analysis import while_trip_count

    launches: dict[str, float] = {}
    for table in (measurement.kernels, getattr(measurement, "control_flow", None)):
        if table is not None and len(table):
            launches.update(zip(table["hlo_op"], table["launches"].astype(float)))
    bodies = [i.attribute("body").name for _, i in module.instructions() if i.opcode == "while"]
    shared = {b for b in bodies if bodies.count(b) > 1}
    found: dict[str, int] = {}

    def trips(comp, runs: float) -> int | None:
        counts = sorted(launches[i.name] for i in comp.instructions if i.name in launches)
        if not counts or counts[0] != counts[-1]:
            return None  # nothing measured there, or kernels that disagree: no single count to read
        n = counts[0] / runs
        return int(round(n)) if abs(n - round(n)) < 1e-6 else None

    def visit(comp, runs: float | None, depth: int = 0) -> None:
        if depth > 64:
            return
        for instr in comp.instructions:
            if instr.opcode == "while":
                body, cond = instr.attribute("body"), instr.attribute("condition")
                own = launches.get(instr.name, runs)
                n, _ = while_trip_count(instr)
                if n is None and own and body.name not in shared:
                    n = trips(body, own)
                    if n is None and (c := trips(cond, own)) is not None and c >= 1:
                        n = c - 1
                    if n is not None:
                        found[instr.name] = n
                visit(body, own * n if own is not None and n is not None else None, depth + 1)
            elif instr.opcode in ("call", "async-start"):
                for callee in instr.called_computations:
                    visit(callee, runs, depth + 1)
            elif instr.opcode == "conditional":
                for branch in instr.called_computations:
                    visit(branch, None, depth + 1)  # how often a branch ran is not the caller's count

    visit(module.entry, 1.0)
    return found


def _saved_overhead(dev):
    """`(overhead, None)`: the device's saved per-run program overhead; `(None, why)` when it has none,
    `why` saying what `predicted_wall_s` lacks and where the overhead would come from."""
    from ..fit import PROGRAM_OVERHEAD, CalibrationError, ProgramOverhead

    try:
        return ProgramOverhead.from_calibration(dev), None
    except CalibrationError:
        # A device's overhead is fitted to wall times of whole programs measured on it (`calibrate`
        # saves it as `<device>_program-overhead.json`); a device measured nowhere has none.
        return None, (f"predicted_wall_s is NaN: no per-run program overhead is known for device {dev.name!r} "
                      f"(no '{PROGRAM_OVERHEAD}' calibration for it); the kernels' time is predicted_total_s")
