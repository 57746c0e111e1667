"""Reading the per-example dev predictions of chosen rows back (the store's ``predictions`` column).

`read_store` leaves the predictions out (tens of kB per MNLI row; see `kdgrid.store.schema.READ_SCHEMA`):
statistics pick the rows they need from a table first, then ask for those rows' predictions here. Only the
per-trial files of the rows asked are opened (their names carry the row id); compacted parts are read for
their ``row_id`` and ``predictions`` columns alone. Reads go through the store's one reading path
(`kdgrid.store.read.read_table`: each row exactly once, strays reported, a concurrent compaction retried).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pyarrow.compute as pc

from kdgrid.predictions import TrialPredictions, decode_predictions
from kdgrid.store import layout
from kdgrid.store.read import StoreSchemaError, read_table
from kdgrid.store.schema import PREDICTIONS_COLUMN

_COLUMNS = ("row_id", "status", PREDICTIONS_COLUMN)


def read_predictions(store_dir: Path | str, row_ids: Iterable[str]) -> dict[str, TrialPredictions]:
    """``{row_id: {dev_set: DevSetPredictions}}`` for the done rows of ``row_ids`` that carry predictions.

    Rows that have none are simply absent from the answer: failed rows, rows of schema version 1 (written before
    predictions were recorded), and row ids the store does not hold. A missing store gives ``{}``.

    Raises:
        StoreSchemaError: a stored value is not in the form `kdgrid.predictions.encode_predictions` writes
            (the message names the row).
    """
    wanted = set(row_ids)
    if not wanted or not Path(store_dir).exists():
        return {}

    def asked_for(parts: layout.RowFileName) -> bool:
        return parts.row_id in wanted and parts.status == "done"

    table = read_table(store_dir, _COLUMNS, open_row_file=asked_for)
    mask = pc.and_(
        pc.is_in(table.column("row_id"), value_set=pc.cast(list(wanted), "string")),
        pc.and_(pc.equal(table.column("status"), "done"), pc.is_valid(table.column(PREDICTIONS_COLUMN))),
    )
    found = table.filter(pc.fill_null(mask, False))
    answer: dict[str, TrialPredictions] = {}
    for row_id, blob in zip(
        found.column("row_id").to_pylist(), found.column(PREDICTIONS_COLUMN).to_pylist(), strict=True
    ):
        try:
            answer[row_id] = decode_predictions(blob)
        except ValueError as error:
            raise StoreSchemaError(
                f"row {row_id} of {store_dir}: unreadable predictions ({error})"
            ) from error
    return answer
