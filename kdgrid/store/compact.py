"""Merging the store's many small files into a few large ones without losing or repeating a row.

The steps, each safe to crash after:
1. list the per-trial files (and compacted files smaller than the target) - the *inputs*;
2. read them, drop repeated row ids, write the merged rows as new ``compacted/part-*.parquet`` files
   (temporary name, fsync of the file, rename, fsync of the folder: a part is there whole or not at all);
3. read every new part back and check that together they hold every row id of the inputs, each once;
4. only then delete the inputs.

A failure in steps 2-3 (a full disk, a read-only store, a part that does not read back whole) removes the new
parts and deletes nothing. A crash after step 3 leaves some rows in both an input and a part: readers drop
repeated row ids, and the next compaction merges them away. A reader that listed an input deleted in step 4
re-reads (see `kdgrid.store.read`). Writers are never blocked: files written after step 1 are simply left for
the next compaction.

`write_verified` and `delete_inputs` (steps 2-4) are also the path of `kdgrid.store.forget`, which rewrites
parts without a trial's rows. Compactions share the store's maintenance lock (``<store>/_maintenance.lock``, an
advisory ``flock``) and `forget` holds it alone, so a compaction never writes back rows a concurrent `forget`
removed.

Only row files are inputs (the store's one listing, `kdgrid.store.listing`): a file that is not a kdgrid row is
never merged or deleted; it stays where it is, reported by name, for ``kdgrid store check --quarantine``.

The inputs are read by the readers' own path (`kdgrid.store.read.read_rows`: the same schema, the same
schema-version check, loose files the read cache holds taken from it); after step 4 the read cache, whose rows
are now in the parts, is deleted (`kdgrid.store.read_cache.clear`).
"""

from __future__ import annotations

import contextlib
import fcntl
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from kdgrid.atomic_files import TMP_PREFIX, fsync_dir
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.store import layout, read_cache
from kdgrid.store.listing import StrayFile, list_store, report_strays
from kdgrid.store.read import (
    MAX_READ_ATTEMPTS,
    StoreBusyError,
    UnreadableFilesError,
    drop_repeated_rows,
    read_rows,
)
from kdgrid.store.schema import SCHEMA
from kdgrid.store.write import write_table_atomically

DEFAULT_TARGET_ROWS = 100_000
MIN_TARGET_ROWS = 1
STALE_TMP_SECONDS = 3600.0
MAINTENANCE_LOCK = "_maintenance.lock"  # at the store's root; `_` hides it from every listing


class StoreMaintenanceError(KdgridError):
    """A compaction or a `forget` could not finish safely (a read-only store, a full disk, a part that did not
    read back whole, an input row without a row id). The message names the store and says what was changed."""


@dataclass(frozen=True)
class CompactionReport:
    """What a compaction did: files merged and removed, rows kept, parts written, stale temporary files removed."""

    files_merged: int
    rows: int
    parts_written: int
    stale_tmp_removed: int


def check_target_rows(value: int, *, name: str = "target_rows") -> None:
    """Refuse a part size that is not a whole number of rows >= `MIN_TARGET_ROWS` (``name``: how the caller
    calls it, e.g. ``--target-rows``)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_TARGET_ROWS:
        raise ConfigError(f"{name} {value!r}: must be a whole number of rows, at least {MIN_TARGET_ROWS}")


@contextlib.contextmanager
def maintenance_lock(store: Path, *, exclusive: bool) -> Iterator[None]:
    """Hold the store's maintenance lock: shared by compactions, exclusive for `forget`; waits for the other
    kind. Released when the process ends, however it ends. Raises `StoreMaintenanceError` when the store
    cannot be written (the lock file cannot be created): a read-only store cannot be maintained."""
    path = store / MAINTENANCE_LOCK
    try:
        handle = open(path, "a+b")  # noqa: SIM115 - closed by the `with` below, after the lock is taken
    except OSError as error:
        raise StoreMaintenanceError(
            f"the store {store} cannot be changed ({error.strerror or error}: {path}); compacting or forgetting "
            "needs write access to the store. Nothing was changed."
        ) from error
    with handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield


def new_part_path(store: Path) -> Path:
    """A fresh name for a compacted part: ``compacted/part-<utc>-<uuid>.parquet``."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return layout.compacted_dir(store) / f"part-{stamp}-{uuid.uuid4().hex[:12]}{layout.SUFFIX}"


def chunks(table: pa.Table, rows: int) -> list[pa.Table]:
    """``table`` in consecutive slices of at most ``rows`` rows (none for an empty table)."""
    check_target_rows(rows)
    return [table.slice(start, rows) for start in range(0, table.num_rows, rows)]


def check_row_ids(table: pa.Table, inputs: Sequence[Path]) -> None:
    """Refuse rows without a row id (a Parquet file that is not a kdgrid row file): merging them would make
    them indistinguishable, and deleting their file would lose it. Names the files."""
    if table.num_rows == 0 or table.column("row_id").null_count == 0:
        return
    culprits = []
    for path in inputs:
        ids = pq.read_table(path, columns=["row_id"]) if "row_id" in pq.read_schema(path).names else None
        if ids is None or ids.column("row_id").null_count:
            culprits.append(str(path))
    raise StoreMaintenanceError(
        f"rows without a row id (not kdgrid store rows) in {', '.join(culprits) or 'the inputs'}; move them out "
        "of the store and run again. Nothing was changed."
    )


def input_row_ids(table: pa.Table, loose_names: Iterable[str]) -> set[str]:
    """Every row id the inputs hold: those read from them plus those their per-trial file names promise (so a
    file whose rows were not read fails the verification instead of being deleted unread)."""
    ids = set(table.column("row_id").to_pylist())
    for name in loose_names:
        parts = layout.RowFileName.parse(name)
        if parts is not None:
            ids.add(parts.row_id)
    return ids


def _remove_quietly(paths: Iterable[Path]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def _verify(written: Sequence[Path], expected: set[str]) -> None:
    held: list[str | None] = []
    for path in written:
        try:
            held.extend(pq.read_table(path, columns=["row_id"]).column("row_id").to_pylist())
        except pa.ArrowException as error:
            raise StoreMaintenanceError(
                f"{path}: just written, it does not read back ({error}); the files written were removed and no "
                "input was deleted"
            ) from error
    found = set(held)
    missing, unexpected, repeated = expected - found, found - expected, len(held) - len(found)
    if missing or unexpected or repeated:
        raise StoreMaintenanceError(
            f"the {len(written)} file(s) just written do not read back as the inputs' rows ({len(missing)} row "
            f"id(s) missing, {len(unexpected)} unexpected, {repeated} repeated); they were removed and no input "
            "was deleted"
        )


def write_verified(store: Path, writes: Sequence[tuple[Path, pa.Table]], expected: set[str]) -> list[Path]:
    """Write each ``(path, table)`` durably (temporary name, fsync, rename, fsync of the folder), read every
    written file back and check that together they hold exactly the row ids ``expected``, each once. Returns
    the written paths. On any failure the written files are removed (the inputs still hold every row) and
    `StoreMaintenanceError` names the store."""
    written: list[Path] = []
    try:
        for final, table in writes:
            written.append(write_table_atomically(table, final))
        _verify(written, expected)
    except OSError as error:
        _remove_quietly(written)
        raise StoreMaintenanceError(
            f"cannot write to the store {store} ({error.strerror or error}: {error.filename or ''}); the files "
            "written so far were removed and no input was deleted"
        ) from error
    except BaseException:
        _remove_quietly(written)
        raise
    return written


def delete_inputs(store: Path, inputs: Sequence[Path]) -> None:
    """Delete ``inputs`` (their rows are verified to be in new files), make that durable, clear the read cache."""
    try:
        for path in inputs:
            path.unlink(missing_ok=True)  # a concurrent compaction may have removed it already
    except OSError as error:
        raise StoreMaintenanceError(
            f"the rows are safely merged, but {error.filename} could not be deleted ({error.strerror}); readers "
            f"drop the repeated rows, and the next `kdgrid store compact --store {store}` removes them"
        ) from error
    for folder in sorted({path.parent for path in inputs}):
        fsync_dir(folder)
    read_cache.clear(store)


def _part_rows(path: Path) -> int:
    return pq.ParquetFile(path).metadata.num_rows


def _remove_stale_tmp(folder: Path, now: float) -> int:
    removed = 0
    if not folder.is_dir():
        return 0
    for path in folder.glob(f"{TMP_PREFIX}*"):
        try:
            if now - path.stat().st_mtime > STALE_TMP_SECONDS:
                path.unlink()
                removed += 1
        except OSError:
            continue  # gone meanwhile, or not ours to remove
    return removed


def _read_inputs(store: Path, target_rows: int) -> tuple[list[str], list[str], pa.Table]:
    """(loose names, small part names, their rows), listed and read again while a concurrent compaction
    removes files under us. Only row files are inputs (`kdgrid.store.listing.list_store`): the others stay where
    they are and are reported, like files whose rows cannot be decoded."""
    parts_folder = layout.compacted_dir(store)
    unreadable: dict[Path, StrayFile] = {}
    attempts = 0
    while attempts < MAX_READ_ATTEMPTS:
        try:
            listing = list_store(store)
            loose = [n for n in listing.loose if layout.rows_dir(store) / n not in unreadable]
            small = [
                n
                for n in listing.parts
                if parts_folder / n not in unreadable and _part_rows(parts_folder / n) < target_rows
            ]
            if len(loose) + len(small) <= 1 and not loose:
                table = SCHEMA.empty_table()
            else:
                cache = read_cache.ReadCache(store, writable=False)
                table = read_rows(store, loose, small, SCHEMA, cache)
        except FileNotFoundError:
            attempts += 1
            continue  # another compaction merged a file we listed
        except UnreadableFilesError as error:
            unreadable.update({stray.path: stray for stray in error.strays})
            continue  # read again without them
        report_strays(store, [*listing.strays, *unreadable.values()])
        return loose, small, table
    raise StoreBusyError(f"the store {store} kept changing while being compacted; try again")


def compact(
    store_dir: Path | str,
    *,
    target_rows: int = DEFAULT_TARGET_ROWS,
) -> CompactionReport:
    """Merge every per-trial file, and every compacted part below ``target_rows`` rows, into parts of at most
    ``target_rows`` rows (>= 1, else `ConfigError`); then, once the parts read back whole, delete what was
    merged. Also removes temporary files older than an hour (left by writers that crashed).

    Raises `StoreMaintenanceError` (nothing deleted) for a store that cannot be written, a failed write or
    verification, or rows without a row id."""
    check_target_rows(target_rows)
    store = Path(store_dir)
    if not store.is_dir():
        return CompactionReport(0, 0, 0, 0)
    with maintenance_lock(store, exclusive=False):
        loose, small_parts, table = _read_inputs(store, target_rows)
        inputs = [layout.rows_dir(store) / n for n in loose] + [
            layout.compacted_dir(store) / n for n in small_parts
        ]
        now = time.time()
        stale = _remove_stale_tmp(layout.rows_dir(store), now) + _remove_stale_tmp(
            layout.compacted_dir(store), now
        )
        if len(inputs) <= 1 and not loose:
            return CompactionReport(0, 0, 0, stale)
        check_row_ids(table, inputs)
        expected = input_row_ids(table, loose)
        table = drop_repeated_rows(table)
        writes = [(new_part_path(store), chunk) for chunk in chunks(table, target_rows)]
        write_verified(store, writes, expected)
        report = CompactionReport(len(inputs), table.num_rows, len(writes), stale)
        delete_inputs(store, inputs)
        return report
