"""The results store: one Parquet file per finished or failed trial attempt, read back as one dataset.

The store is the truth (see docs/design.md). `write_result` writes a row atomically; `read_store` reads every row
exactly once; `trial_states` is the one rule of "is this trial done?" (`done_trial_ids`, `latest_state` apply it);
`latest_done_rows` is the one "latest done row wins"; `compact` merges small files safely.

The names below are imported when first used (PEP 562): a light module of the store (``layout``, ``claims``)
is imported without pandas and pyarrow, so a command that needs only those (``kdgrid --help``, ``sweeps``)
starts fast.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_HOMES = {
    "CompactionReport": "compact", "compact": "compact",
    "StoreBusyError": "read", "StoreSchemaError": "read", "done_trial_ids": "read", "latest_done_rows": "read",
    "latest_state": "read", "read_store": "read", "read_table": "read", "scores_long": "read",
    "trial_states": "read",
    "COLUMNS": "schema", "SCHEMA": "schema", "SCHEMA_VERSION": "schema",
    "failure_result": "write", "result_row": "write", "write_result": "write",
}  # fmt: skip

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


class _StorePackage(types.ModuleType):
    """The package's module type: the name ``compact`` stays the function when the ``compact`` submodule is
    first imported (the import system binds a submodule on its package; the eager import of the function used to
    rebind it, and a name imported on first use must not lose it)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "compact" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _StorePackage


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
