"""pandas in: a DataFrame of metrics as a Run (`stabdiag.load(df)`).  The way out is on the types
themselves: `Run.to_frame()` (one row per step) and `Diagnosis.to_frame()` (one row per finding).

A DataFrame cannot tell a NaN the run logged from a cell it did not log: by default a NaN cell is a
value (a NaN is a finding, never dropped in silence, even when every metric of a row is NaN), and a
column whose NaN cells sit between finite ones gets a note that says how to read them as not logged
(`nan="missing"`, what `pd.read_csv` of a sparse wide CSV needs; or give the CSV's path instead).
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError, InputError
from .run import Run, Series, StepError, as_steps

NAN_MODES = ("value", "missing")


def is_frame(obj) -> bool:
    """A pandas DataFrame, checked without importing pandas for every other kind of source."""
    return type(obj).__name__ == "DataFrame" and type(obj).__module__.startswith("pandas")


def _step_column(frame, step_col: str | None) -> str | None:
    from .formats.tabular._columns import STEP_COLUMNS

    if step_col is not None:
        if step_col not in frame.columns:
            raise ConfigError(f"--step-col {step_col}: the DataFrame has no column '{step_col}'")
        return step_col
    lower = {str(c).lower(): c for c in frame.columns}
    return next((lower[n.lower()] for n in STEP_COLUMNS if n.lower() in lower), None)


def run_from_frame(frame, *, name: str = "dataframe", step_col: str | None = None, nan: str = "value") -> Run:
    """The Run a DataFrame holds: steps from a step column (`step`, `_step`, `global_step`, ... or
    `step_col`; `"@row"` numbers the rows), else from the index; every numeric (or boolean) column a metric."""
    import pandas as pd

    if nan not in NAN_MODES:
        raise ConfigError(f"nan: expected one of {', '.join(NAN_MODES)}; got {nan!r}")
    from .formats.tabular._columns import ROW_STEP

    by_row = step_col == ROW_STEP                 # the row number, whatever the index holds
    column = None if by_row else _step_column(frame, step_col)
    raw_steps = (np.arange(len(frame)) if by_row else frame[column].to_numpy() if column is not None
                 else frame.index.to_numpy())
    where = f"DataFrame {name}" + (f" column '{column}'" if column is not None else " index")
    try:
        steps = as_steps(raw_steps)
    except (StepError, TypeError, ValueError) as exc:
        raise InputError(where, f"the steps must be integers: {exc}") from None
    metrics = [c for c in frame.columns if c != column and (pd.api.types.is_numeric_dtype(frame[c])
                                                             or pd.api.types.is_bool_dtype(frame[c]))]
    if not metrics:
        raise InputError(f"DataFrame {name}", "no numeric column to read as a metric")
    values = {str(c): frame[c].to_numpy(dtype=np.float64, na_value=np.nan) for c in metrics}
    series: dict[str, Series] = {}
    notes: list[str] = []
    for key, v in values.items():
        keep = ~np.isnan(v) if nan == "missing" else np.ones(len(v), dtype=bool)
        if not keep.any():
            continue
        series[key] = Series.from_points(key, steps[keep], v[keep])
        finite = np.flatnonzero(~np.isnan(v))
        if nan == "value" and len(finite) and np.isnan(v[finite[0]:finite[-1] + 1]).any():
            notes.append(f"{key}: NaN cells between finite values are read as NaN values; if the run did "
                         "not log those steps, load(df, nan='missing')")
    meta = {"format": "dataframe"}
    return Run(name=name, series=series, sources=(f"<DataFrame {name}>",), meta=meta, notes=tuple(notes[:3]))
