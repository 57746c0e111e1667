"""Forgetting trials: every row of the given trials leaves the store, so that `resume` trains them again.

A trial's rows may be loose (``rows/<trial_id>.<status>.<row_id>.parquet``) or inside compacted parts that also
hold other trials' rows. Forgetting goes through compaction's durable path (`kdgrid.store.compact`):
1. under the store's maintenance lock held alone (no compaction can write the rows back meanwhile), find the
   files holding a row of the trials: their loose files, and the parts whose ``trial_id`` column names one;
2. write the other rows of those parts as new parts, and the forgotten rows as one file
   ``_forgotten/forgotten-<utc>-<uuid>.parquet``; read both back and check that together they hold every row id
   of the files found;
3. only then delete those files, and clear the read cache.

Nothing is deleted outright: the forgotten rows stay in ``_forgotten/``, which no reader lists. Moving that file
into ``compacted/`` undoes the forget. A crash at any point loses no row (before step 3 the old files still hold
every row; readers drop the repeats). Epoch checkpoints are kept: a forgotten trial that was interrupted
mid-training resumes from its last checkpoint (see `kdgrid.core.training.checkpoint`).

Forget trials that are not running: a trial still training writes its row after the forget.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kdgrid.errors import ConfigError
from kdgrid.store import layout
from kdgrid.store.compact import (
    DEFAULT_TARGET_ROWS,
    check_row_ids,
    chunks,
    delete_inputs,
    input_row_ids,
    maintenance_lock,
    new_part_path,
    write_verified,
)
from kdgrid.store.listing import list_store, report_strays
from kdgrid.store.read import drop_repeated_rows, read_rows, read_table
from kdgrid.store.schema import SCHEMA

FORGOTTEN_DIR = "_forgotten"  # `_`: no reader lists it
MAX_IDS_IN_MESSAGE = 10


@dataclass(frozen=True)
class ForgetReport:
    """What a forget did: the trials forgotten (sorted), their rows, the loose files and parts removed, the
    parts written with the other rows of those parts, and the file now keeping the forgotten rows."""

    trials: list[str]
    rows: int
    loose_files: int
    parts_rewritten: int
    parts_written: int
    kept_in: Path


def forgotten_dir(store: Path) -> Path:
    return Path(store) / FORGOTTEN_DIR


def _listed(ids: Iterable[str]) -> str:
    ids = sorted(ids)
    shown = ", ".join(ids[:MAX_IDS_IN_MESSAGE])
    return shown + (f" and {len(ids) - MAX_IDS_IN_MESSAGE} more" if len(ids) > MAX_IDS_IN_MESSAGE else "")


def select_trials(store: Path, trial_ids: Iterable[str], sweep: str | None) -> set[str]:
    """The trial ids to forget: ``trial_ids``, or with ``sweep`` alone every trial with a row written by that
    sweep; with both, ``trial_ids`` must all have such a row. `ConfigError` names ids with no row (or none of
    the sweep), and refuses an empty selection."""
    wanted = set(trial_ids)
    if not wanted and sweep is None:
        raise ConfigError("name the trials to forget (trial ids), or a sweep (--sweep)")
    table = read_table(store, ["trial_id", "sweep"])
    known = set(table.column("trial_id").to_pylist())
    if sweep is not None:
        in_sweep = set(table.filter(pc.equal(table.column("sweep"), sweep)).column("trial_id").to_pylist())
        if not in_sweep:
            raise ConfigError(f"--sweep {sweep}: no row of the store {store} was written by this sweep")
        if not wanted:
            return in_sweep
        outside = wanted - in_sweep
        if outside:
            raise ConfigError(
                f"trial id(s) with no row of sweep {sweep} in the store {store}: {_listed(outside)}"
            )
    unknown = wanted - known
    if unknown:
        raise ConfigError(f"trial id(s) with no row in the store {store}: {_listed(unknown)}")
    return wanted


def _loose_files_of(names: list[str], trial_ids: set[str]) -> list[str]:
    """The loose files (row files of the listing: their names parse) holding a row of ``trial_ids``."""
    found = []
    for name in names:
        parts = layout.RowFileName.parse(name)
        if parts is not None and parts.trial_id in trial_ids:
            found.append(name)
    return found


def _parts_of(store: Path, names: list[str], trial_ids: set[str]) -> list[str]:
    found = []
    for name in names:
        column = pq.read_table(layout.compacted_dir(store) / name, columns=["trial_id"]).column("trial_id")
        if set(column.to_pylist()) & trial_ids:
            found.append(name)
    return found


def forget(store_dir: Path | str, trial_ids: Iterable[str] = (), *, sweep: str | None = None) -> ForgetReport:
    """Remove every row of the selected trials (`select_trials`) from ``rows/`` and ``compacted/``, keeping
    every other row, so that the trials read as pending. Returns what was done.

    Raises `ConfigError` for an unknown trial id or sweep (nothing changed) and
    `kdgrid.store.compact.StoreMaintenanceError` for a store that cannot be written (nothing deleted)."""
    store = Path(store_dir)
    if not store.is_dir():
        raise ConfigError(f"the store {store} is not a directory")
    with maintenance_lock(store, exclusive=True):
        wanted = select_trials(store, trial_ids, sweep)
        listing = list_store(store)  # only row files: the others are left where they are, reported
        report_strays(store, listing.strays)
        loose = _loose_files_of(listing.loose, wanted)
        parts = _parts_of(store, listing.parts, wanted)
        inputs = [layout.rows_dir(store) / n for n in loose] + [
            layout.compacted_dir(store) / n for n in parts
        ]
        table = read_rows(store, loose, parts, SCHEMA, None)
        check_row_ids(table, inputs)
        expected = input_row_ids(table, loose)
        mask = pc.is_in(table.column("trial_id"), value_set=pa.array(sorted(wanted), type=pa.string()))
        forgotten = drop_repeated_rows(table.filter(mask))
        others = drop_repeated_rows(table.filter(pc.invert(mask)))
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
        kept_in = forgotten_dir(store) / f"forgotten-{stamp}-{uuid.uuid4().hex[:12]}{layout.SUFFIX}"
        writes = [(kept_in, forgotten)] + [
            (new_part_path(store), chunk) for chunk in chunks(others, DEFAULT_TARGET_ROWS)
        ]
        write_verified(store, writes, expected)
        delete_inputs(store, inputs)
        return ForgetReport(
            trials=sorted(wanted),
            rows=forgotten.num_rows,
            loose_files=len(loose),
            parts_rewritten=len(parts),
            parts_written=len(writes) - 1,
            kept_in=kept_in,
        )
