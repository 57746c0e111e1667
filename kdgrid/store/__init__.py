"""The results store: one Parquet file per finished or failed trial attempt, read back as one dataset.

The store is the truth (see docs/design.md). `write_result` writes a row atomically; `read_store` reads every row
exactly once; `trial_states` is the one rule of "is this trial done?" (`done_trial_ids`, `latest_state` apply it);
`latest_done_rows` is the one "latest done row wins"; `compact` merges small files safely.
"""

from kdgrid.store.compact import CompactionReport, compact
from kdgrid.store.read import (
    StoreBusyError,
    StoreSchemaError,
    done_trial_ids,
    latest_done_rows,
    latest_state,
    read_store,
    read_table,
    scores_long,
    trial_states,
)
from kdgrid.store.schema import COLUMNS, SCHEMA, SCHEMA_VERSION
from kdgrid.store.write import failure_result, result_row, write_result

__all__ = [
    "COLUMNS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "CompactionReport",
    "StoreBusyError",
    "StoreSchemaError",
    "compact",
    "done_trial_ids",
    "failure_result",
    "latest_done_rows",
    "latest_state",
    "read_store",
    "read_table",
    "result_row",
    "scores_long",
    "trial_states",
    "write_result",
]
