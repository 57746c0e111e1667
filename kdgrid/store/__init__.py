"""The results store: one Parquet file per finished or failed trial attempt, read back as one dataset.

The store is the only truth (docs/design.md says why). `write_result` writes a row atomically; `read_store` reads
every row exactly once; `latest_state` says which trials are done or failed; `compact` merges small files safely.
"""

from kdgrid.store.compact import CompactionReport, compact
from kdgrid.store.read import (
    StoreBusyError,
    StoreSchemaError,
    latest_state,
    read_store,
    read_table,
    scores_long,
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
    "failure_result",
    "latest_state",
    "read_store",
    "read_table",
    "result_row",
    "scores_long",
    "write_result",
]
