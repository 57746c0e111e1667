"""The read cache: rows readers already decoded from per-trial files, so each loose file is decoded once.

Why: a per-trial file holds one row, but decoding it costs ~2.5 ms (a Parquet footer of 57 column chunks and a
zstd frame per page), so a store of 26,000 loose files took ~70 s to read - at every `kdgrid tables` or
`status` during a long run, until `compact` merged them. With the cache, a read decodes only the files that
arrived since the last read.

What makes it safe (it never decides which rows a read returns; the reader's listing of ``rows/`` does):
- a per-trial file never changes once visible: it is written under a hidden name and renamed, and its name
  ``<trial_id>.<status>.<row_id>.parquet`` carries its row's uuid4 row id. So its name identifies its content
  for good. A row is cached only when its file holds exactly that one row and the name matches the row's
  ``trial_id``, ``status`` and ``row_id``; a cached row is used only for a file in the reader's listing.
- segments (Arrow IPC files, ``<store>/_read_cache/rows-<schema fingerprint>-<uuid>.arrow``, zstd) are written
  like rows: hidden name, fsync, rename. A segment that cannot be read is ignored (its files are decoded again).
- each segment is stamped (in its name, and checked against its schema) with a fingerprint of the row schema
  it was decoded with; a kdgrid with another schema ignores it.
- nothing else in the store is ever changed: writers and `compact` do not read the cache (`compact` deletes
  it once the files it holds are merged); a reader that cannot write the cache (a read-only store) only goes
  without the speed-up. Deleting ``_read_cache/`` at any time is safe.

Only reads of every `READ_SCHEMA` column add to the cache (a narrower read decodes fewer column chunks and would cache
incomplete rows); every read uses it.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import os
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc

from kdgrid.atomic_files import TMP_PREFIX, write_file_atomically
from kdgrid.store import layout
from kdgrid.store.schema import READ_SCHEMA, SCHEMA_VERSION

CACHE_FORMAT = 1  # bump when what a segment holds changes
FILE_COLUMN = "_file"  # the per-trial file a cached row was decoded from (its name in rows/)
# Every column readers read unless they name others (not the large per-example predictions), plus ``_file``.
CACHED_SCHEMA = READ_SCHEMA.append(pa.field(FILE_COLUMN, pa.string()))
MIN_FILES_TO_CACHE = 64  # a read that decoded fewer new files leaves them for a later read (no tiny segments)
SEGMENT_FILES = 1024  # files decoded and cached at a time: bounds memory, keeps an interrupted read's work
MAX_SEGMENTS = 32  # more are merged into one by the next read of every column
STALE_TMP_SECONDS = 3600.0


def schema_fingerprint() -> str:
    """16 hex digits identifying `READ_SCHEMA` (names, types, nullability, version) and the cache format."""
    text = f"{CACHE_FORMAT}|{SCHEMA_VERSION}|{CACHED_SCHEMA.to_string(show_schema_metadata=False)}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _expected_names(table: pa.Table) -> pa.Array:
    """The per-trial file name each row of ``table`` would have: ``<trial_id>.<status>.<row_id>.parquet``."""
    joined = pc.binary_join_element_wise(
        table.column("trial_id"), table.column("status"), table.column("row_id"), "."
    )
    return pc.binary_join_element_wise(joined, pa.scalar(layout.SUFFIX), "")


def cacheable_rows(table: pa.Table) -> pa.Table:
    """The rows of ``table`` (`CACHED_SCHEMA`, freshly decoded) that may be cached: those whose file holds that
    one row alone and is named after the row's trial id, status and row id."""
    files = table.column(FILE_COLUMN).to_pylist()
    per_file = collections.Counter(files)
    matches = pc.fill_null(pc.equal(_expected_names(table), table.column(FILE_COLUMN)), False).to_pylist()
    keep = [i for i, (name, ok) in enumerate(zip(files, matches, strict=True)) if ok and per_file[name] == 1]
    if len(keep) == table.num_rows:
        return table
    return table.take(pa.array(keep, type=pa.int64()))


class ReadCache:
    """The read cache of one store, loaded on first use; ``writable=False`` only reads it.

    Rows are held as one Arrow table of `CACHED_SCHEMA` (every `READ_SCHEMA` column plus ``_file``).
    """

    def __init__(self, store: Path | str, *, writable: bool = True) -> None:
        self.folder = layout.read_cache_dir(Path(store))
        self.writable = writable
        self.fingerprint = schema_fingerprint()
        self._tables: list[pa.Table] = []  # loaded segments, then segments this reader wrote
        self._segments: list[Path] = []  # their files
        self._names: set[str] | None = None  # files with a cached row

    def _segment_files(self) -> list[Path]:
        prefix = f"rows-{self.fingerprint}-"
        try:
            names = os.listdir(self.folder)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [self.folder / n for n in sorted(names) if n.startswith(prefix) and n.endswith(".arrow")]

    def _load(self) -> set[str]:
        if self._names is not None:
            return self._names
        for path in self._segment_files():
            try:
                with pa.OSFile(str(path), "rb") as source:
                    table = pa.ipc.open_file(source).read_all()
            except (OSError, pa.ArrowException):
                continue  # removed by a merge or a compaction meanwhile, or torn by a crash: decode its files
            if table.schema.equals(CACHED_SCHEMA):
                self._tables.append(table)
                self._segments.append(path)
        self._names = set()
        for table in self._tables:
            self._names.update(table.column(FILE_COLUMN).to_pylist())
        return self._names

    def split(self, names: list[str]) -> tuple[pa.Table | None, list[str]]:
        """(the cached rows of the per-trial files ``names``, in `CACHED_SCHEMA`, or None; the names of those
        with no cached row, in their order)."""
        cached = self._load()
        hits = [name for name in names if name in cached]
        if not hits:
            return None, names
        wanted = pa.array(hits, type=pa.string())
        rows = pa.concat_tables(
            [t.filter(pc.is_in(t.column(FILE_COLUMN), value_set=wanted)) for t in self._tables]
        )
        return rows, [name for name in names if name not in cached]

    def add(self, rows: pa.Table) -> None:
        """Remember freshly decoded rows (`CACHED_SCHEMA`); those `cacheable_rows` keeps are written as a segment."""
        rows = cacheable_rows(rows)
        if rows.num_rows == 0:
            return
        names = self._load()
        self._tables.append(rows)
        names.update(rows.column(FILE_COLUMN).to_pylist())
        path = self._write(rows)
        if path is not None:
            self._segments.append(path)

    def tidy(self, listed: Iterable[str]) -> None:
        """Merge the segments into one when there are more than `MAX_SEGMENTS`, or when most cached rows are of
        files no longer in ``rows/`` (``listed``: the names there now) or cached twice."""
        if not self.writable or not self._segments:
            return
        live = self._load() & set(listed)
        cached_rows = sum(t.num_rows for t in self._tables)
        waste = cached_rows - len(live)
        if len(self._segments) <= MAX_SEGMENTS and waste <= max(len(live), MIN_FILES_TO_CACHE):
            return
        rows = pa.concat_tables(self._tables)
        rows = rows.filter(pc.is_in(rows.column(FILE_COLUMN), value_set=pa.array(sorted(live), pa.string())))
        first: dict[str, int] = {}
        for index, name in enumerate(rows.column(FILE_COLUMN).to_pylist()):
            first.setdefault(name, index)
        rows = rows.take(pa.array(sorted(first.values()), type=pa.int64()))
        merged = self._write(rows) if rows.num_rows else None
        if rows.num_rows and merged is None:
            return  # could not write: keep the old segments
        for path in self._segments:
            with contextlib.suppress(OSError):  # another reader may have merged it already
                path.unlink()
        self._tables, self._segments = ([rows], [merged]) if merged is not None else ([], [])

    def _write(self, rows: pa.Table) -> Path | None:
        if not self.writable:
            return None
        final = self.folder / f"rows-{self.fingerprint}-{uuid.uuid4().hex[:12]}.arrow"

        def fill(handle: BinaryIO) -> None:
            options = pa.ipc.IpcWriteOptions(compression="zstd")
            with pa.ipc.new_file(handle, CACHED_SCHEMA, options=options) as writer:
                writer.write_table(rows)

        try:
            write_file_atomically(final, fill)
        except OSError:
            self.writable = False  # a read-only store (or a full disk): read without caching
            return None
        return final


def clear(store: Path | str, *, now: float | None = None) -> int:
    """Delete the store's cache segments (of any schema), the listing's verified files, and temporary files
    older than an hour (a live reader may be writing a young one). Returns the files removed; nothing when the cache cannot be changed."""
    folder = layout.read_cache_dir(Path(store))
    now = time.time() if now is None else now
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return 0
    for entry in entries:
        try:
            if entry.name.startswith(TMP_PREFIX):
                if now - entry.stat().st_mtime <= STALE_TMP_SECONDS:
                    continue
            elif not entry.name.endswith((".arrow", ".txt")):
                continue  # segments, and the listing's verified files (`kdgrid.store.listing`)
            os.unlink(entry.path)
            removed += 1
        except OSError:
            continue
    return removed
