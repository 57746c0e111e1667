"""Merging the store's many small files into a few large ones without losing or repeating a row.

The steps, each safe to crash after:
1. list the per-trial files (and compacted files smaller than the target) - the *inputs*;
2. read them, drop repeated row ids, write the merged rows as new ``compacted/part-*.parquet`` files
   (temporary name, fsync, rename: a part is there whole or not at all);
3. only then delete the inputs.

A crash after step 2 leaves some rows in both an input and a part: readers drop repeated row ids, and the next
compaction merges them away. A reader that listed an input deleted in step 3 re-reads (see `kdgrid.store.read`).
Writers are never blocked: files written after step 1 are simply left for the next compaction.

The inputs are read by the readers' own path (`kdgrid.store.read._read_rows`: the same schema, the same
schema-version check, loose files the read cache holds taken from it); after step 3 the read cache, whose rows
are now in the parts, is deleted (`kdgrid.store.read_cache.clear`).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from kdgrid.store import layout, read_cache
from kdgrid.store.read import _drop_repeated_rows, _read_rows
from kdgrid.store.schema import SCHEMA
from kdgrid.store.write import write_table_atomically

DEFAULT_TARGET_ROWS = 100_000
STALE_TMP_SECONDS = 3600.0


@dataclass(frozen=True)
class CompactionReport:
    """What a compaction did: files merged and removed, rows kept, parts written, stale temporary files removed."""

    files_merged: int
    rows: int
    parts_written: int
    stale_tmp_removed: int


def _part_rows(path: Path) -> int:
    return pq.ParquetFile(path).metadata.num_rows


def _remove_stale_tmp(folder: Path, now: float) -> int:
    removed = 0
    if not folder.is_dir():
        return 0
    for path in folder.glob(f"{layout.TMP_PREFIX}*"):
        try:
            if now - path.stat().st_mtime > STALE_TMP_SECONDS:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed


def compact(
    store_dir: Path | str,
    *,
    target_rows: int = DEFAULT_TARGET_ROWS,
    _crash_before_delete: bool = False,
) -> CompactionReport:
    """Merge every per-trial file, and every compacted part below ``target_rows`` rows, into parts of at most
    ``target_rows`` rows; then delete what was merged. Also removes temporary files older than an hour (left by
    writers that crashed). ``_crash_before_delete`` stops after step 2, as a crash there would (for tests)."""
    store = Path(store_dir)
    rows_folder, parts_folder = layout.rows_dir(store), layout.compacted_dir(store)
    loose = layout.visible_names(rows_folder)
    small_parts = [
        n for n in layout.visible_names(parts_folder) if _part_rows(parts_folder / n) < target_rows
    ]
    inputs = [rows_folder / n for n in loose] + [parts_folder / n for n in small_parts]
    now = time.time()
    stale = _remove_stale_tmp(layout.rows_dir(store), now) + _remove_stale_tmp(
        layout.compacted_dir(store), now
    )
    if len(inputs) <= 1 and not loose:
        return CompactionReport(0, 0, 0, stale)
    table = _read_rows(store, loose, small_parts, SCHEMA, read_cache.ReadCache(store, writable=False))
    table = _drop_repeated_rows(table)
    parts = 0
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    for start in range(0, table.num_rows, target_rows):
        chunk: pa.Table = table.slice(start, target_rows)
        name = f"part-{stamp}-{uuid.uuid4().hex[:12]}{layout.SUFFIX}"
        write_table_atomically(chunk, layout.compacted_dir(store) / name)
        parts += 1
    if _crash_before_delete:
        return CompactionReport(len(inputs), table.num_rows, parts, stale)
    for path in inputs:
        path.unlink(missing_ok=True)  # a concurrent compaction may have removed it already
    layout.fsync_dir(layout.rows_dir(store))
    read_cache.clear(store)
    return CompactionReport(len(inputs), table.num_rows, parts, stale)
