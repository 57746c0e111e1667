"""Reading the step-level curves of chosen rows back (the store's ``step_curves_json`` column), and the one
reader of every row's curves, old rows included.

`read_store` leaves the step curves out (a few kB a row; `kdgrid.store.schema.LARGE_COLUMNS`): the trial page, the
exports and the diagnosis of a row ask for the rows they show here, through the store's one reading path
(`kdgrid.store.read.read_table`). `row_curves` gives any row's curves in one format
(`kdgrid.core.training.step_curves`): the recorded ones, or for a row of schema version 2 or older (or one that recorded
none) its per-epoch curve as one point per epoch (`kdgrid.diagnosis.record_from_epochs`, marked
``from_epochs``). `row_diagnosis` gives a row's flags: the stored ``diagnosis_json``, or for an older row the
rules applied to its epoch curve on read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kdgrid import store as store_rows  # its readers (pandas, pyarrow) are imported when first called
from kdgrid.core.data import get_task
from kdgrid.diagnosis import Flag, diagnose, record_from_epochs
from kdgrid.errors import KdgridError
from kdgrid.store.schema import STEP_CURVES_COLUMN

_COLUMNS = ("row_id", STEP_CURVES_COLUMN)


def read_step_curves(store_dir: Path | str, row_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{row_id: record}`` for the rows of ``row_ids`` that recorded step curves (others are absent).

    Raises:
        StoreSchemaError: a stored value is not JSON (the message names the row).
    """
    wanted = set(row_ids)
    if not wanted or not Path(store_dir).exists():
        return {}
    table = store_rows.read_table(store_dir, _COLUMNS, row_ids=wanted)
    found = table.filter(table.column(STEP_CURVES_COLUMN).is_valid())
    answer: dict[str, dict[str, Any]] = {}
    for row_id, text in zip(
        found.column("row_id").to_pylist(), found.column(STEP_CURVES_COLUMN).to_pylist(), strict=True
    ):
        try:
            answer[row_id] = json.loads(text)
        except ValueError as error:
            message = f"row {row_id} of {store_dir}: unreadable step curves ({error})"
            raise store_rows.StoreSchemaError(message) from error
    return answer


def _parsed(row: Mapping[str, Any], column: str, default: Any) -> Any:
    value = row.get(column)
    if not isinstance(value, str):
        return default
    try:
        return json.loads(value)
    except ValueError:
        return default


def row_curves(row: Mapping[str, Any], recorded: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A row's curves: ``recorded`` (its `read_step_curves` entry) when given, else its per-epoch curve as
    points (`kdgrid.diagnosis.record_from_epochs`), with ``num_labels`` from its task where it can be found."""
    if recorded:
        return dict(recorded)
    extra = _parsed(row, "extra_json", {})
    record = record_from_epochs(_parsed(row, "curve_json", []), _parsed(row, "weights_json", {}), extra)
    try:
        record["num_labels"] = get_task(str(row.get("task"))).num_labels
    except (KdgridError, KeyError, ValueError):
        record["num_labels"] = None
    return record


def row_diagnosis(row: Mapping[str, Any]) -> list[Flag]:
    """A row's diagnosis flags: its ``diagnosis_json`` (schema version 3), else the rules on its epoch curve."""
    stored = _parsed(row, "diagnosis_json", None)
    if isinstance(stored, list):
        return stored
    return diagnose(
        row_curves(row),
        status=str(row.get("status")),
        weights=_parsed(row, "weights_json", {}),
        extra=_parsed(row, "extra_json", {}),
    )


def curve_series(record: Mapping[str, Any]) -> dict[str, list[tuple[int, float]]]:
    """A record's curves as named series of (optimizer step, value), what the exports write: ``loss/<term>``
    (unweighted), ``weighted/<term>``, ``total``, ``lr``, ``grad_norm``, ``cosine``, and a learned gate's weights
    ``mapping/S<i>/T<t>`` (student layer i, teacher layer t, both 1-based). Points without a value are left
    out; term names are as the objective writes them (``hidden_mse@1-6``)."""
    steps = [int(s) for s in record.get("steps") or []]
    series: dict[str, list[tuple[int, float]]] = {}

    def add(name: str, values: Any) -> None:
        points = [(s, float(v)) for s, v in zip(steps, values or [], strict=False) if isinstance(v, (int, float))]
        if points:
            series[name] = points

    for prefix, key in (("loss", "terms"), ("weighted", "weighted")):
        for term, values in sorted((record.get(key) or {}).items()):
            add(f"{prefix}/{term}", values)
    for name in ("total", "lr", "grad_norm", "cosine"):
        add(name, record.get(name))
    mapping = record.get("mapping") or {}
    for step, value in zip(mapping.get("steps") or [], mapping.get("values") or [], strict=False):
        rows = value.get("weights") if isinstance(value, Mapping) else None
        for i, row in enumerate(rows or [], start=1):
            for t, weight in enumerate(row if isinstance(row, list) else [], start=1):
                if isinstance(weight, (int, float)):
                    series.setdefault(f"mapping/S{i}/T{t}", []).append((int(step), float(weight)))
    return series
