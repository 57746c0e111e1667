"""Tidy pandas frames of a results store for your own analysis: one row per trial, per cell of a sweep's table,
per curve point. Every column is plain (text, numbers, booleans; a list setting as one joined label), so
``pivot_table``, ``groupby`` and ``query`` work on them without unpacking anything (docs/python.md).

- `trial_frame`: one row per trial (its latest done row, else its latest failed one): identity, state, every
  setting of its trial (its canonical JSON, options flattened in by name), its score and a few facts.
- `cell_frame`: one row per cell of a sweep's own table, seeds aggregated, with the interval, the test against
  the reference, the correction and the marks of ``kdgrid tables --sweep NAME`` (the same computation:
  `kdgrid.analysis.sweep_tables.sweep_table`, never a second one).
- `comparison_frame`: one row per cell two sweeps share, with the difference and its test of
  ``kdgrid tables --sweep A --sweep B``.
- `curve_frame`: one row per point of each trial's curves (``source`` ``epoch``: the per-epoch curve every row
  holds; ``step``: step-level curves, where the rows hold them).

Conventions:
    settings: each `Trial` field in its order, then its options by name (an option whose name is a field's is
        ``option.NAME``). Numbers stay numbers, booleans booleans, nothing is None (NaN in a numeric column);
        ``knowledge`` is the names sorted and joined by ``+`` (``""`` for none: the label ``kdgrid tables``
        prints), any other list its items joined by ``+``, a mapping its canonical JSON.
    score: the metric the task reports (`kdgrid.paper.reported_metric`; for a regression task without one, the
        first of Pearson and Spearman it has) on its first dev set, at the best epoch (``kind="best"``) or the
        last; NaN for a failed trial.
    a cell's axis values: the labels the table prints them with (`kdgrid.analysis.sweep_tables.field_label`:
        ``"0.001"``, ``"hidden_mse+mmd"``, ``""`` for nothing), so a cell frame joins the table's CSV export.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from kdgrid.analysis.sweep_compare import DIFFERENCE, compared_sweeps
from kdgrid.analysis.sweep_tables import (
    REGRESSION_METRICS,
    SweepTable,
    field_label,
    sweep_table,
    sweep_trial_ids,
)
from kdgrid.analysis.tables_report import filter_rows
from kdgrid.errors import KdgridError
from kdgrid.paper import reported_metric
from kdgrid.store import read_store
from kdgrid.store.membership import read_memberships
from kdgrid.store.read import latest_state
from kdgrid.store.schema import SCHEMA
from kdgrid.trial import Trial

TRIAL_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Trial) if f.name != "options")
"""The trial's own fields, in `Trial`'s order: the first settings columns of `trial_frame`."""

TRIAL_ID_COLUMNS: tuple[str, ...] = ("trial_id", "row_id", "sweep", "study", "state")
TRIAL_FACT_COLUMNS: tuple[str, ...] = (
    "dev_set",
    "metric",
    "score",
    "best_epoch",
    "degenerate",
    "wall_time_s",
    "student_params",
    "error_type",
)
"""`trial_frame`'s columns after the settings: the score (`score` in the module's conventions) and facts."""

CELL_COLUMNS: tuple[str, ...] = (
    "value",
    "std",
    "n_seeds",
    "ci_low",
    "ci_high",
    "uncertainty",
    "reference",
    "p_raw",
    "p_adjusted",
    "significant",
    "direction",
    "mark",
    "degenerate",
    "best",
    "trial_ids",
)
"""`cell_frame`'s columns after the cell's place (``sweep, block, row, column``) and its axis values."""

CURVE_COLUMNS: tuple[str, ...] = (
    "trial_id",
    "row_id",
    "source",
    "epoch",
    "step",
    "series",
    "dev_set",
    "term",
    "value",
)

STEP_CURVES_COLUMN = "step_curves_json"
"""Where rows of a newer schema keep their step-level curves (read when the store's schema has the column)."""

# A step-curve record's keys that are not series: its format, the step numbers, how often it samples, and a learned
# mapping's snapshots (a matrix per snapshot, at steps of its own).
_STEP_META = frozenset({"format", "v", "version", "steps", "every", "from_epochs", "mapping"})


# --- values -----------------------------------------------------------------------------------------------------


def plain_value(name: str, value: Any) -> Any:
    """A setting as a plain column value: lists joined (``knowledge`` sorted, as `field_label`), mappings as
    canonical JSON, everything else as it is."""
    if isinstance(value, (list, tuple, dict)):
        return field_label(name, value)
    return value


def settings_of(trial_json: Any) -> dict[str, Any]:
    """A trial's settings (its canonical JSON, bookkeeping left out), options flattened in by name."""
    config = json.loads(trial_json) if isinstance(trial_json, str) else {}
    options = config.pop("options", None) or {}
    config.pop("v", None)
    out = {name: plain_value(name, value) for name, value in config.items()}
    if "knowledge" in out and out["knowledge"] is None:
        out["knowledge"] = ""
    pairs = options.items() if isinstance(options, dict) else options
    for name, value in pairs:
        out[f"option.{name}" if name in out else str(name)] = plain_value(str(name), value)
    return out


def primary_score(task: Any, scores_json: Any) -> tuple[str, str, float]:
    """(dev set, metric, value) of the score the module reports for a row (`score` in its conventions);
    ``("", "", nan)`` when the row has none."""
    scores = json.loads(scores_json) if isinstance(scores_json, str) else {}
    if not isinstance(scores, dict) or not scores:
        return "", "", math.nan
    dev_set, metrics = next(iter(scores.items()))
    if not isinstance(metrics, dict):
        return str(dev_set), "", math.nan
    wanted = [reported_metric(str(task)), *REGRESSION_METRICS]
    for metric in wanted:
        if isinstance(metrics.get(metric), (int, float)):
            return str(dev_set), metric, float(metrics[metric])
    return str(dev_set), "", math.nan


def _fact(value: Any) -> Any:
    """A store cell as a plain value: pandas' NA and None as None."""
    return None if value is None or value is pd.NA else value


def _degenerate(text: Any) -> bool:
    try:
        return bool(json.loads(text)) if isinstance(text, str) else False
    except ValueError:
        return False


# --- trials -----------------------------------------------------------------------------------------------------


def _store_rows(
    store: Path | str, sweep: str | None, where: Iterable[str], columns: Iterable[str] | None = None
) -> pd.DataFrame:
    """The store's rows (those of ``sweep``'s trials when given), filtered by ``where`` (FIELD=VALUE)."""
    store = Path(store)
    if not store.exists():
        raise KdgridError(f"no results store at {store} (run a sweep first, or pass the store's folder)")
    rows = filter_rows(read_store(store, columns, flatten_scores=False), list(where))
    if sweep is not None:
        ids = sweep_trial_ids(rows, read_memberships(store, skip_bad=True), sweep)
        rows = rows[rows["trial_id"].astype(str).isin(ids)]
    return rows


def trial_frame(
    store: Path | str, *, sweep: str | None = None, where: Iterable[str] = (), kind: str = "best"
) -> pd.DataFrame:
    """One row per trial of the store (of ``sweep`` when given; ``where``: ``["lr=0.001", ...]`` as
    ``kdgrid tables --where``): ``trial_id, row_id, sweep, study, state``, the settings (the module's
    conventions), then `TRIAL_FACT_COLUMNS`. ``kind``: the best epoch's score or the last one's.

    Raises:
        KdgridError: no store there, or no trial of ``sweep`` (naming the store's sweeps).
    """
    if kind not in ("best", "last"):
        raise KdgridError(f"unknown kind {kind!r}; allowed: best, last")
    rows = _store_rows(store, sweep, where)
    state = latest_state(rows)
    chosen = rows.set_index("row_id", drop=False).loc[list(state["row_id"])] if len(state) else rows.iloc[:0]
    scores_column = "scores_json" if kind == "best" else "last_scores_json"
    records = []
    for trial_id, row_state, row in zip(state.index, state["state"], chosen.to_dict("records"), strict=True):
        dev_set, metric, score = primary_score(row["task"], row.get(scores_column))
        record = {
            "trial_id": str(trial_id),
            "row_id": str(row["row_id"]),
            "sweep": _fact(row.get("sweep")) or "",
            "study": _fact(row.get("study")) or "",
            "state": row_state,
            **settings_of(row["trial_json"]),
            "dev_set": dev_set,
            "metric": metric,
            "score": score if row_state == "done" else math.nan,
            "best_epoch": _fact(row.get("best_epoch")),
            "degenerate": row_state == "done" and _degenerate(row.get("degenerate_json")),
            "wall_time_s": _fact(row.get("wall_time_s")),
            "student_params": _fact(row.get("student_params")),
            "error_type": (_fact(row.get("error_type")) or "") if row_state == "failed" else "",
        }
        records.append(record)
    return _ordered_frame(records)


def _ordered_frame(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Records as a frame in the documented column order; settings absent from a trial are None (NaN)."""
    settings = list(
        dict.fromkeys(k for r in records for k in r if k not in (*TRIAL_ID_COLUMNS, *TRIAL_FACT_COLUMNS))
    )
    fields = [f for f in TRIAL_FIELDS if f in settings]
    columns = [*TRIAL_ID_COLUMNS, *fields, *sorted(set(settings) - set(fields)), *TRIAL_FACT_COLUMNS]
    frame = pd.DataFrame.from_records(list(records), columns=columns)
    for name in ("best_epoch", "student_params"):
        frame[name] = pd.array(frame[name].tolist(), dtype="Int64")
    frame["wall_time_s"] = frame["wall_time_s"].astype(float)
    frame["score"] = frame["score"].astype(float)
    return frame


# --- cells ------------------------------------------------------------------------------------------------------


def mark_of(cell: Any) -> str:
    """The table's mark of a cell as text: ``ref``, ``▲`` / ``▼`` (beyond noise after the correction), ``""``."""
    if cell.is_reference:
        return "ref"
    if cell.significant and cell.direction:
        return "▲" if cell.direction > 0 else "▼"
    return ""


def cells_of(table: SweepTable) -> pd.DataFrame:
    """The cells of a sweep's table (its own rows x columns, not its marginal or pairwise blocks) as a frame:
    ``sweep, block, row, column``, the table's axes (`TableView.axes`: task, dev set, block axes, row and column
    axes, metric), then `CELL_COLUMNS`. The one reading of a table's cells into a frame: `cell_frame` and the
    report's pivot page use it."""
    view = table.view
    records = []
    for block in view.blocks[: table.main_blocks]:
        for (row, column), cell in block.cells.items():
            if column.fact or cell.missing:
                continue
            record: dict[str, Any] = {
                "sweep": view.name,
                "block": block.title,
                "row": row,
                "column": column.label,
            }
            record |= {axis: _axis_value(cell.config.get(axis)) for axis in view.axes}
            record |= {
                "value": cell.value,
                "std": cell.std,
                "n_seeds": cell.n_seeds,
                "ci_low": cell.ci_low,
                "ci_high": cell.ci_high,
                "uncertainty": cell.uncertainty,
                "reference": cell.is_reference,
                "p_raw": cell.p_raw,
                "p_adjusted": cell.p_vs_reference,
                "significant": bool(cell.significant),
                "direction": int(cell.direction),
                "mark": mark_of(cell),
                "degenerate": bool(cell.degenerate),
                "best": bool(cell.bold),
                "trial_ids": "+".join(cell.trial_ids),
            }
            records.append(record)
    columns = ["sweep", "block", "row", "column", *view.axes, *CELL_COLUMNS]
    return pd.DataFrame.from_records(records, columns=columns)


def _axis_value(value: Any) -> Any:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else value


def cell_frame(
    store: Path | str,
    sweep: str,
    *,
    rows: str | None = None,
    cols: str | None = None,
    reference: str | None = None,
    kind: str = "best",
    where: Iterable[str] = (),
    family: str = "condition",
    correction: str = "holm",
    intervals: str = "auto",
) -> pd.DataFrame:
    """One row per cell of ``kdgrid tables --sweep SWEEP`` with the same options (`cells_of`): the mean over
    seeds, its standard deviation and seed count, the 95% interval, its level (``seed-level`` or
    ``run-to-run``), the test against the reference (raw and corrected p), the mark, and the cell's trials
    (``trial_ids``: ids joined by ``+``).

    Raises:
        KdgridError, ConfigError: as ``kdgrid tables --sweep`` refuses (`kdgrid.analysis.sweep_tables.sweep_table`).
    """
    built = sweep_table(
        Path(store),
        sweep,
        kind=kind,
        where=where,
        rows=rows,
        cols=cols,
        reference=reference,
        intervals=intervals,
        family=family,
        correction=correction,
    )
    return cells_of(built)


def comparison_frame(sweeps: Sequence[str], store: Path | str, **options: Any) -> pd.DataFrame:
    """One row per cell two sweeps share, as ``kdgrid tables --sweep A --sweep B`` lays them out
    (`kdgrid.analysis.sweep_compare`; ``sweeps``: the two ``--sweep`` values, ``NAME`` or ``NAME@DIR``;
    ``options``: its keyword options, e.g. ``family``, ``correction``, ``kind``): the cell's settings (the labels
    that tell the shared cells apart, and task, dev set, metric), ``first_value, first_n_seeds, second_value,
    second_n_seeds``, and the difference (second minus first) with ``ci_low, ci_high, p_raw, p_adjusted,
    uncertainty, mark`` (``▲``/``▼``: higher/lower beyond noise after the correction).

    Raises:
        KdgridError, ConfigError: as the command refuses (other than two sweeps, no shared cell, ...).
    """
    built = compared_sweeps(list(sweeps), Path(store), **options)
    records = []
    for block in built.view.blocks:
        first_column, second_column = block.columns[0], block.columns[1]
        for row in block.rows:
            first, second = block.cells[(row, first_column)], block.cells[(row, second_column)]
            difference = block.cells[(row, DIFFERENCE)]
            record = {axis: _axis_value(difference.config.get(axis)) for axis in built.view.axes}
            record |= {
                "first_value": first.value,
                "first_n_seeds": first.n_seeds,
                "second_value": second.value,
                "second_n_seeds": second.n_seeds,
                "difference": difference.value,
                "ci_low": difference.ci_low,
                "ci_high": difference.ci_high,
                "p_raw": difference.p_raw,
                "p_adjusted": difference.p_vs_reference,
                "uncertainty": difference.uncertainty,
                "mark": mark_of(difference),
            }
            records.append(record)
    return pd.DataFrame.from_records(records)


# --- curves -----------------------------------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def epoch_points(curve: Any) -> list[tuple[int | None, str, str, str, float]]:
    """(epoch, series, dev set, term, value) of a per-epoch curve (``[{"epoch", "scores", "loss_terms", ...}]``).
    ``scores`` give series ``score`` (dev set, metric); ``loss_terms`` series ``loss``; any other key a series of
    its own (a number: term = the key; a mapping of numbers: one term each). Anything that is not a number is
    left out, so rows written by another kdgrid read without error."""
    points: list[tuple[int | None, str, str, str, float]] = []
    if not isinstance(curve, list):
        return points
    for entry in curve:
        if not isinstance(entry, dict):
            continue
        epoch = entry.get("epoch")
        epoch = int(epoch) if isinstance(epoch, (int, float)) and not isinstance(epoch, bool) else None
        for key, value in entry.items():
            if key == "epoch":
                continue
            if key == "scores" and isinstance(value, dict):
                for dev_set, metrics in value.items():
                    for metric, number in (metrics or {}).items() if isinstance(metrics, dict) else ():
                        if _number(number) is not None:
                            points.append((epoch, "score", str(dev_set), str(metric), _number(number)))
                continue
            series = "loss" if key == "loss_terms" else str(key)
            if isinstance(value, dict):
                for term, number in value.items():
                    if _number(number) is not None:
                        points.append((epoch, series, "", str(term), _number(number)))
            elif _number(value) is not None:
                points.append((epoch, series, "", str(key), _number(value)))
    return points


def step_points(record: Any) -> list[tuple[int, str, str, float]]:
    """(step, series, term, value) of a step-level curve record (``{"steps": [...], SERIES: [...] or {TERM:
    [...]}, ...}``): each list as long as ``steps`` is a series (a mapping of them: one term each); a None point
    (not measured there) and every other key (a matrix, the format) are left out."""
    if not isinstance(record, dict) or not isinstance(record.get("steps"), list):
        return []
    steps = record["steps"]
    points: list[tuple[int, str, str, float]] = []

    def add(series: str, term: str, values: Any) -> None:
        if not isinstance(values, list) or len(values) != len(steps):
            return
        for step, value in zip(steps, values, strict=True):
            number = _number(value)
            if number is not None and _number(step) is not None:
                points.append((int(step), series, term, number))

    for key, value in record.items():
        if key in _STEP_META:
            continue
        if isinstance(value, dict):
            for term, values in value.items():
                add(str(key), str(term), values)
        else:
            add(str(key), str(key), value)
    return points


def curve_frame(store: Path | str, *, sweep: str | None = None, where: Iterable[str] = ()) -> pd.DataFrame:
    """One row per curve point of each done trial (its latest done row): `CURVE_COLUMNS`. ``source`` ``epoch``
    (``epoch`` set, ``step`` NaN): the row's per-epoch curve, series ``score`` (``dev_set`` and the metric as
    ``term``) and ``loss`` (each loss term, unweighted mean over the epoch); ``source`` ``step`` (``step`` set):
    the row's step-level curves where its schema has them (series as recorded: ``terms``, ``weighted``,
    ``total``, ``lr``, ...).

    Raises:
        KdgridError: no store there, or no trial of ``sweep``.
    """
    columns = [name for name in SCHEMA.names if name != "predictions"]
    rows = _store_rows(store, sweep, where, columns)
    done = rows[rows["status"] == "done"]
    state = latest_state(done)
    chosen = done.set_index("row_id", drop=False).loc[list(state["row_id"])] if len(state) else done.iloc[:0]
    records: list[tuple[Any, ...]] = []
    for row in chosen.to_dict("records"):
        trial_id, row_id = str(row["trial_id"]), str(row["row_id"])
        for epoch, series, dev_set, term, value in epoch_points(_parsed(row.get("curve_json"))):
            records.append((trial_id, row_id, "epoch", epoch, None, series, dev_set, term, value))
        for step, series, term, value in step_points(_parsed(row.get(STEP_CURVES_COLUMN))):
            records.append((trial_id, row_id, "step", None, step, series, "", term, value))
    frame = pd.DataFrame.from_records(records, columns=list(CURVE_COLUMNS))
    frame["epoch"] = pd.array(frame["epoch"].tolist(), dtype="Int64")
    frame["step"] = pd.array(frame["step"].tolist(), dtype="Int64")
    frame["value"] = frame["value"].astype(float)
    return frame


def _parsed(text: Any) -> Any:
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
