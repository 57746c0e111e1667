"""The report's read of a store: every row as one DataFrame, incrementally, without writing a byte into the store.

`kdgrid.store.read_store` may add to the store's read cache and to its memo of verified files; a report (often
run by another user, on a login node, against a store a sweep is writing) must leave the store as it found it.
So this reader lists the store by file names (`list_store(verify=False)`), decodes with the store's own
`read_rows`, and uses the read cache read-only. Between refreshes it keeps what it decoded: `--watch` decodes
only the per-trial files that arrived since (and every compacted part again when the parts changed).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kdgrid.report.gather import NoRowsError
from kdgrid.store import layout
from kdgrid.store.listing import StrayFile, list_store, report_strays
from kdgrid.store.read import UnreadableFilesError, drop_repeated_rows, read_rows
from kdgrid.store.read_cache import ReadCache
from kdgrid.store.schema import SCHEMA

# Files decoded at a time: bounds the memory of one decode step on a 30,000-file store.
_CHUNK = 4096
_ATTEMPTS = 5


def _nullable(arrow_type: pa.DataType) -> pd.api.extensions.ExtensionDtype | None:
    # As `read_store`: integer columns (best_epoch, pid) stay integers where some rows are null.
    return pd.Int64Dtype() if pa.types.is_integer(arrow_type) else None


class StoreRows:
    """The rows of the store at ``store``, kept between `refresh` calls."""

    def __init__(self, store: Path) -> None:
        self.store = Path(store)
        self._cache = ReadCache(self.store, writable=False)
        self._loose: pa.Table | None = None  # rows of per-trial files
        self._loose_names: set[str] = set()
        self._parts: tuple[str, ...] = ()
        self._parts_rows: pa.Table | None = None
        self.frame: pd.DataFrame = pd.DataFrame(columns=list(SCHEMA.names))

    def refresh(self) -> bool:
        """Read what changed since the last call; True when the rows changed (always on the first call).

        A file listed then removed before it was decoded (a compaction merged it) makes the read start again.

        Raises:
            NoRowsError: there is no store (yet) at ``store``.
            KdgridError: the store is a file; `StoreSchemaError` (a `KdgridError`) for rows of a newer schema
                than this kdgrid reads.
        """
        require_store(self.store)
        for _ in range(_ATTEMPTS - 1):
            try:
                return self._refresh()
            except FileNotFoundError:
                continue
        return self._refresh()

    def _refresh(self) -> bool:
        first = self._parts_rows is None
        listing = list_store(self.store, verify=False)
        names = set(listing.loose)
        gone = self._loose_names - names
        new = sorted(names - self._loose_names)
        loose = self._loose
        if gone and loose is not None:
            # a per-trial file's name carries its row's id (`RowFileName`): keep the rows of the files still listed
            live = [parsed.row_id for parsed in map(layout.RowFileName.parse, names) if parsed is not None]
            loose = loose.filter(pc.is_in(loose.column("row_id"), value_set=pa.array(live, pa.string())))
        chunks = [loose] if loose is not None else []
        for start in range(0, len(new), _CHUNK):
            chunks.append(self._read(new[start : start + _CHUNK], []))
        if chunks:
            self._loose = pa.concat_tables(chunks)
        self._loose_names = names
        parts = tuple(listing.parts)
        parts_changed = parts != self._parts or self._parts_rows is None
        if parts_changed:
            self._parts_rows = self._read([], list(parts))
            self._parts = parts
        if not (first or gone or new or parts_changed):
            return False
        assert self._parts_rows is not None
        tables = [t for t in (self._loose, self._parts_rows) if t is not None]
        table = pa.concat_tables(tables).combine_chunks()
        self.frame = drop_repeated_rows(table).to_pandas(types_mapper=_nullable)
        return True

    def _read(self, loose: list[str], parts: list[str]) -> pa.Table:
        """`read_rows` of these files, leaving out (and reporting once, as every reader does) the files whose rows
        cannot be decoded: a truncated or foreign file never stops the report."""
        skipped: list[StrayFile] = []
        while True:
            try:
                table = read_rows(self.store, loose, parts, SCHEMA, self._cache if loose else None)
                break
            except UnreadableFilesError as error:
                skipped.extend(error.strays)
                bad = {stray.path.name for stray in error.strays}
                left = (
                    [name for name in loose if name not in bad],
                    [name for name in parts if name not in bad],
                )
                if len(left[0]) + len(left[1]) == len(loose) + len(parts):
                    raise  # nothing named that this read holds: not a file to skip
                loose, parts = left
        report_strays(self.store, skipped)
        return table


def require_store(store: Path) -> None:
    """Raise `NoRowsError` when there is no store (yet) at ``store``."""
    if not Path(store).is_dir():
        raise NoRowsError(f"no results store at {store} (pass the store's folder with --store DIR)")
