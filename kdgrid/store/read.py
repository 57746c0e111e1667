"""Reading the store back: the whole store as one DataFrame, tidy scores, and each trial's latest state.

The one answer to "is this trial done?" lives here: `trial_states` (a trial is ``done`` when any of its rows
is done - done wins over failed - else ``failed``; no row: not in the answer). `done_trial_ids` (executors
skipping finished trials), `latest_state` (``kdgrid status``, `kdgrid.grid.state.sweep_state`) and the rows a
run wrote (`kdgrid.launch.job.RunRows`) all apply it. The one "latest done row wins" rule is
`latest_done_rows` (scores and the analysis tables read a trial's latest done row).

Exactly once: rows are immutable and carry a unique ``row_id``; a reader drops repeated row ids (a crashed or
concurrent compaction can leave a row in two files for a while) and re-reads when a file it listed was removed
under it (a compaction finished meanwhile), so every row is seen exactly once. See `kdgrid.store.compact`.

Which files are read is decided by the store's one listing and its one rule of what a row file is
(`kdgrid.store.listing.list_store`): a file that is not a kdgrid row (a bad name, a truncated or foreign
Parquet file) is left out and reported in one warning (`kdgrid.store.listing.report_strays`), never read as
an all-null row and never stopping the read. A file whose footer passes but whose pages cannot be decoded is
left out and reported the same way.

One reading path, `read_rows`, used by `read_table` and by `compact`: the listed files are decoded with one
pyarrow dataset of the known schema (columns a file lacks are nulls), loose files that the read cache holds
are taken from it instead (`kdgrid.store.read_cache`), and every row's ``schema_version`` is checked: rows of
a newer schema than this kdgrid's raise `StoreSchemaError` rather than being read half-understood.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from kdgrid.errors import KdgridError
from kdgrid.store import layout, read_cache
from kdgrid.store.listing import CHECK_COMMAND, StrayFile, list_store, report_strays
from kdgrid.store.read_cache import FILE_COLUMN, ReadCache
from kdgrid.store.schema import LARGE_COLUMNS, NAME_COLUMNS, READ_SCHEMA, SCHEMA, SCHEMA_VERSION, SUPERSEDED

logger = logging.getLogger("kdgrid.store")

MAX_READ_ATTEMPTS = 20
_DECODE_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError)


class StoreBusyError(KdgridError):
    """The store kept changing under a reader (files removed between listing and reading) for too long."""


class StoreSchemaError(KdgridError):
    """A store file holds rows this kdgrid cannot read faithfully: a newer schema version, a column whose type
    cannot be converted to this schema's, or not Parquet at all. The message names the file."""


class UnreadableFilesError(StoreSchemaError):
    """Files whose footer passed the listing's rule but whose rows cannot be decoded (``strays``: each file and
    why). `read_table` and `compact` leave them out and report them; `forget` refuses."""

    def __init__(self, strays: list[StrayFile]) -> None:
        self.strays = strays
        named = "; ".join(f"{s.path}: {s.reason}" for s in strays)
        super().__init__(
            f"{named}. Run `{CHECK_COMMAND}` to list such files and `--quarantine` to move them aside"
        )


class NewerSchemaError(StoreSchemaError):
    """Rows of a newer schema version than this kdgrid's (``strays``: each file holding some, and why). Every
    read refuses them; `kdgrid store check` lists them (and ``--quarantine`` moves them aside)."""

    def __init__(self, strays: list[StrayFile]) -> None:
        self.strays = strays
        super().__init__("; ".join(f"{s.path}: {s.reason}" for s in strays))


def _listing(store: Path) -> tuple[list[str], list[str]]:
    """The visible file names of ``rows/`` and of ``compacted/``, each sorted (names, not paths: a listing of
    26,000 files is taken twice per read, and Path objects would cost more than the listing)."""
    # rows/ before compacted/: a compaction renames its merged file into compacted/ before it deletes the
    # originals from rows/, so a row missing from this rows/ listing is in the later compacted/ listing.
    return layout.visible_names(layout.rows_dir(store)), layout.visible_names(layout.compacted_dir(store))


def _schema_for(columns: Iterable[str] | None) -> pa.Schema:
    """The schema of a read of ``columns``; None: `READ_SCHEMA` (every column but the large ones, which are read
    only when named)."""
    if columns is None:
        return READ_SCHEMA
    wanted = set(columns)
    unknown = wanted - set(SCHEMA.names)
    if unknown:
        raise KdgridError(
            f"unknown store column(s) {sorted(unknown)}; the columns are {', '.join(SCHEMA.names)}"
        )
    return pa.schema([f for f in SCHEMA if f.name in wanted])


def _rows_from_names(names: list[str], schema: pa.Schema) -> pa.Table:
    parts = [layout.RowFileName.parse(name) for name in names]
    columns: dict[str, list[Any]] = {name: [] for name in schema.names}
    for part in parts:
        if part is None:
            continue
        for name in schema.names:
            columns[name].append(getattr(part, name) if name in NAME_COLUMNS else None)
    return pa.table(
        {name: pa.array(values, type=schema.field(name).type) for name, values in columns.items()}
    )


def _with_file_column(schema: pa.Schema) -> pa.Schema:
    return schema.append(pa.field(FILE_COLUMN, pa.string()))


def _unreadable_files(paths: list[Path], schema: pa.Schema, error: Exception) -> StoreSchemaError:
    """The error naming every one of ``paths`` that cannot be decoded with ``schema`` (looked for one file at a
    time: only after a decode of them all failed)."""
    strays = []
    for path in paths:
        try:
            ds.dataset([str(path)], format="parquet", schema=schema).to_table(columns=schema.names)
        except _DECODE_ERRORS as one:
            reason = f"cannot be read as kdgrid store rows (schema version {SCHEMA_VERSION}): {one}"
            strays.append(StrayFile(path, reason))
    if strays:
        return UnreadableFilesError(strays)
    return StoreSchemaError(f"{len(paths)} store files could not be read together: {error}")


def _decode(paths: list[Path], schema: pa.Schema, row_filter: pc.Expression | None = None) -> pa.Table:
    """The rows of ``paths`` decoded with ``schema`` (a file's missing columns are nulls, other types cast), in
    the order of ``paths``, plus ``_file``: the name of each row's file; only those ``row_filter`` keeps (rows
    dropped batch by batch: a part's large columns are never held whole). One pyarrow dataset, threaded as
    pyarrow's CPU pool allows; a file removed meanwhile raises FileNotFoundError."""
    if not paths:
        return _with_file_column(schema).empty_table()
    dataset = ds.dataset([str(p) for p in paths], format="parquet", schema=schema)
    batches: list[pa.RecordBatch] = []
    files: list[str] = []
    try:
        for tagged in dataset.scanner(columns=schema.names, filter=row_filter).scan_batches():
            batches.append(tagged.record_batch)
            files.extend([os.path.basename(tagged.fragment.path)] * tagged.record_batch.num_rows)
    except _DECODE_ERRORS as error:
        raise _unreadable_files(paths, schema, error) from error
    table = pa.Table.from_batches(batches, schema=schema).combine_chunks()
    return table.append_column(FILE_COLUMN, pa.array(files, type=pa.string()))


def _check_schema_version(table: pa.Table, folder: Path) -> None:
    """Raise `NewerSchemaError` naming every file (in ``folder``) of ``table`` holding rows written by a newer
    schema (null versions: files from before the column existed, read with nulls like any missing column)."""
    versions = table.column("schema_version")
    newest = pc.max(versions).as_py()
    if newest is None or newest <= SCHEMA_VERSION:
        return
    newer = table.filter(pc.greater(versions, SCHEMA_VERSION))
    found: dict[str, int] = {}
    for name, version in zip(newer.column(FILE_COLUMN).to_pylist(), newer.column("schema_version").to_pylist(),
                             strict=True):  # fmt: skip
        found[name] = max(found.get(name, version), version)
    raise NewerSchemaError([
        StrayFile(folder / name, f"a row of store schema version {version}, newer than this kdgrid's "
                  f"{SCHEMA_VERSION}; read this store with the kdgrid that wrote it (or a newer one)",
                  stops_reads=True)
        for name, version in found.items()
    ])  # fmt: skip


def _without_large_values(cached: pa.Table, schema: pa.Schema) -> tuple[pa.Table, list[str]]:
    """(the cached rows that need no large column of ``schema`` decoded, those columns added as nulls; the files
    of the others). The cache holds no large column (`kdgrid.store.schema.LARGE_COLUMNS`), but knows from each
    one's presence column which rows have none."""
    large = [name for name in schema.names if name in LARGE_COLUMNS]
    if not large:
        return cached, []
    has_value = functools.reduce(pc.or_, [pc.is_valid(cached.column(LARGE_COLUMNS[name])) for name in large])
    undecoded = cached.filter(has_value).column(FILE_COLUMN).to_pylist()
    kept = cached.filter(pc.invert(has_value))
    for name in large:
        kept = kept.append_column(schema.field(name), pa.nulls(kept.num_rows, schema.field(name).type))
    return kept, undecoded


def _row_id_filter(row_ids: frozenset[str] | None) -> pc.Expression | None:
    if row_ids is None:
        return None
    return pc.field("row_id").isin(pa.array(sorted(row_ids), type=pa.string()))


def read_rows(
    store: Path,
    loose: list[str],
    parts: list[str],
    schema: pa.Schema,
    cache: ReadCache | None,
    row_ids: frozenset[str] | None = None,
) -> pa.Table:
    """The rows of per-trial files ``loose`` (names in ``rows/``) then of compacted ``parts`` (names in
    ``compacted/``), with ``schema``'s columns, in listing order; repeated row ids are kept (see
    `drop_repeated_rows`). Loose files the cache holds are not decoded (unless ``schema`` names a large column,
    `kdgrid.store.schema.LARGE_COLUMNS`, and the file's row has a value there); when ``schema`` is every `READ_SCHEMA` column, the rows
    of the others are added to the cache as they are decoded, `SEGMENT_FILES` at a time.
    ``row_ids``: only the rows of these ids (None: every row); such a read adds nothing to the cache.
    Raises `StoreSchemaError` for rows of a newer schema version, `UnreadableFilesError` naming the files that
    cannot be decoded."""
    read_schema = (
        schema if "schema_version" in schema.names else schema.append(SCHEMA.field("schema_version"))
    )
    every_column = set(read_schema.names) == set(READ_SCHEMA.names)
    names = [*read_schema.names, FILE_COLUMN]
    row_filter = _row_id_filter(row_ids)
    cached, fresh = cache.split(loose) if cache is not None and loose else (None, loose)
    loose_rows = []
    if cached is not None:
        if row_filter is not None:
            cached = cached.filter(row_filter)
        _check_schema_version(cached, layout.rows_dir(store))
        cached, undecoded = _without_large_values(cached, read_schema)
        fresh = [*fresh, *undecoded]  # order: restored by file name below
        loose_rows.append(cached.select(names))
    enough = every_column and row_ids is None and len(fresh) >= read_cache.MIN_FILES_TO_CACHE
    to_fill = cache if cache is not None and cache.writable and enough else None
    step = read_cache.SEGMENT_FILES
    for start in range(0, len(fresh), step):
        paths = [layout.rows_dir(store) / name for name in fresh[start : start + step]]
        rows = _decode(paths, READ_SCHEMA if every_column else read_schema, row_filter)
        # before caching: rows of a newer schema are never cached
        _check_schema_version(rows, layout.rows_dir(store))
        if to_fill is not None:
            to_fill.add(rows)
        loose_rows.append(rows.select(names))
    table = pa.concat_tables(loose_rows) if loose_rows else _with_file_column(read_schema).empty_table()
    if cached is not None:
        # listing order (files sorted by name, a file's rows in its order): the stable sort by file name does it
        table = table.take(pc.sort_indices(table, sort_keys=[(FILE_COLUMN, "ascending")]))
    compacted = _decode([layout.compacted_dir(store) / name for name in parts], read_schema, row_filter)
    _check_schema_version(compacted, layout.compacted_dir(store))
    table = pa.concat_tables([table, compacted]).combine_chunks()
    return table.select(schema.names)


def read_table(
    store_dir: Path | str,
    columns: Iterable[str] | None = None,
    *,
    open_row_file: Callable[[layout.RowFileName], bool] | None = None,
    row_ids: Iterable[str] | None = None,
) -> pa.Table:
    """The store as one Arrow table, each row exactly once, in a stable order (rows of files not opened, then
    of opened per-trial files by name, then of compacted parts by name; a repeated row id keeps its first).

    Args:
        columns: the columns to read (default: every column of `kdgrid.store.schema.READ_SCHEMA`, i.e. all but
            the per-example predictions, read only when named). When they are only ``trial_id`` / ``status`` / ``row_id``,
            per-trial files are not opened at all: their names carry these (their footers are checked).
        row_ids: only the rows of these ids (None: every row): only their per-trial files are opened, and the
            other rows of compacted parts are dropped as they are decoded.
        open_row_file: given a per-trial file's name parts, whether to open it; a file not opened contributes
            its name columns and nulls. Lets ``status`` open only the failed rows of a store of 30,000 files.

    Only row files are read (`kdgrid.store.listing.list_store`); the others are left out and reported in one
    warning (`read_with_strays` returns them instead). Per-trial files already decoded by an earlier read come
    from the read cache (`kdgrid.store.read_cache`); a read of every default column adds the files it decodes to it.
    Raises `StoreSchemaError` for rows written by a newer schema version, `StoreBusyError` when the store kept
    changing, `kdgrid.store.listing.StoreLayoutError` when the store is a file.
    """
    table, strays = read_with_strays(store_dir, columns, open_row_file=open_row_file, row_ids=row_ids)
    report_strays(store_dir, strays)
    return table


def read_with_strays(
    store_dir: Path | str,
    columns: Iterable[str] | None = None,
    *,
    open_row_file: Callable[[layout.RowFileName], bool] | None = None,
    row_ids: Iterable[str] | None = None,
    skip_newer: bool = False,
) -> tuple[pa.Table, list[StrayFile]]:
    """`read_table`'s table, and the files it left out (not reported: the caller says what it does with them).
    ``skip_newer``: files with rows of a newer schema version are left out too (listed with the others) instead
    of refusing the read (`kdgrid store check`)."""
    store = Path(store_dir)
    wanted = None if row_ids is None else frozenset(row_ids)
    schema = _schema_for(columns)
    if columns is not None and "row_id" not in schema.names:
        schema = schema.append(SCHEMA.field("row_id"))
    names_only = set(schema.names) <= NAME_COLUMNS
    cache = ReadCache(store)
    unreadable: dict[Path, StrayFile] = {}  # files the listing accepted that did not decode: left out
    attempts = 0
    while attempts < MAX_READ_ATTEMPTS:
        try:
            listing = list_store(store)
            loose = [n for n in listing.loose if layout.rows_dir(store) / n not in unreadable]
            compacted = [n for n in listing.parts if layout.compacted_dir(store) / n not in unreadable]
            if wanted is not None:
                loose = [n for n in loose if _row_id_of(n) in wanted]
            if names_only:
                opened, by_name = [], loose
            elif open_row_file is None:
                opened, by_name = loose, []
            else:
                opened, by_name = [], []
                for name in loose:
                    parts = layout.RowFileName.parse(name)
                    (opened if parts is not None and open_row_file(parts) else by_name).append(name)
            tables = [
                _rows_from_names(by_name, schema),
                read_rows(store, opened, compacted, schema, cache, wanted),
            ]
        except FileNotFoundError:
            attempts += 1
            continue  # a compaction removed a file we listed; its rows are in a new file now
        except UnreadableFilesError as error:
            unreadable.update({stray.path: stray for stray in error.strays})
            continue  # read again without them (each pass leaves out at least one more file: it ends)
        except NewerSchemaError as error:
            if not skip_newer:
                raise
            unreadable.update({stray.path: stray for stray in error.strays})
            continue
        now_loose, now_compacted = _listing(store)
        if set(loose) <= set(now_loose) and set(compacted) <= set(now_compacted):
            if set(schema.names) == set(READ_SCHEMA.names):
                cache.tidy(now_loose)
            table = pa.concat_tables(tables).combine_chunks()
            return drop_repeated_rows(table), [*listing.strays, *unreadable.values()]
        attempts += 1
    raise StoreBusyError(f"the store {store} kept changing while being read; try again")


def _row_id_of(name: str) -> str | None:
    parts = layout.RowFileName.parse(name)
    return None if parts is None else parts.row_id


def drop_repeated_rows(table: pa.Table) -> pa.Table:
    row_ids = table.column("row_id").to_pylist()
    seen: set[str] = set()
    keep: list[int] = []
    for index, row_id in enumerate(row_ids):
        if row_id not in seen:
            seen.add(row_id)
            keep.append(index)
    if len(keep) == len(row_ids):
        return table
    return table.take(pa.array(keep, type=pa.int64()))


def _flatten_scores(frame: pd.DataFrame) -> pd.DataFrame:
    """Add one column per (kind, dev set, metric): ``best/validation/accuracy``, ``last/validation/accuracy``."""
    new: dict[str, list[float | None]] = {}
    for kind, column in (("best", "scores_json"), ("last", "last_scores_json")):
        if column not in frame.columns:
            continue
        parsed = [json.loads(text) if isinstance(text, str) else {} for text in frame[column]]
        for index, scores in enumerate(parsed):
            for dev_set, metrics in scores.items():
                for metric, value in metrics.items():
                    key = f"{kind}/{dev_set}/{metric}"
                    if key not in new:
                        new[key] = [None] * len(frame)
                    new[key][index] = value
    if not new:
        return frame
    extra = pd.DataFrame({k: pd.array(v, dtype="Float64") for k, v in sorted(new.items())}, index=frame.index)
    return pd.concat([frame, extra], axis=1)


def read_store(
    store_dir: Path | str,
    columns: Iterable[str] | None = None,
    *,
    flatten_scores: bool = True,
    open_row_file: Callable[[layout.RowFileName], bool] | None = None,
) -> pd.DataFrame:
    """The whole store as one DataFrame: one row per attempt (done or failed), each exactly once.

    Columns are `kdgrid.store.schema.READ_SCHEMA`'s unless ``columns`` names others (the per-example
    ``predictions`` are read only when named; `kdgrid.store.predictions.read_predictions` decodes them); with ``flatten_scores`` (default) also one nullable float column
    per score, named ``best/<dev_set>/<metric>`` and ``last/<dev_set>/<metric>``. An empty or missing store
    gives an empty frame with the schema's columns.
    """
    table = read_table(store_dir, columns, open_row_file=open_row_file)
    frame = table.to_pandas(types_mapper=_nullable_types)
    if flatten_scores:
        frame = _flatten_scores(frame)
    return frame


def _nullable_types(arrow_type: pa.DataType) -> Any:
    # Nullable pandas dtypes keep integer columns (best_epoch, relation_heads) integers when some are null.
    if pa.types.is_integer(arrow_type):
        return pd.Int64Dtype()
    if pa.types.is_boolean(arrow_type):
        return pd.BooleanDtype()
    if pa.types.is_floating(arrow_type):
        return pd.Float64Dtype()
    return None


def scores_long(df: pd.DataFrame) -> pd.DataFrame:
    """Tidy scores of the done trials: columns ``trial_id, dev_set, metric, value, kind`` (kind ``best`` = at the
    best epoch, ``last`` = after the last epoch). A trial with several done rows contributes its latest one."""
    done = latest_done_rows(df)
    records: list[tuple[str, str, str, float, str]] = []
    for trial_id, best, last in zip(
        done["trial_id"], done["scores_json"], done["last_scores_json"], strict=True
    ):
        for kind, text in (("best", best), ("last", last)):
            if not isinstance(text, str):
                continue
            for dev_set, metrics in json.loads(text).items():
                for metric, value in metrics.items():
                    records.append((trial_id, dev_set, metric, float(value), kind))
    return pd.DataFrame.from_records(records, columns=["trial_id", "dev_set", "metric", "value", "kind"])


def _order_by_time(df: pd.DataFrame) -> pd.DataFrame:
    if "written_at" in df.columns:
        return df.assign(_order=range(len(df))).sort_values(["written_at", "_order"], na_position="first")
    return df


def done_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Every done row of ``df`` (rows of the store's schema; a frame without a ``status`` column is taken as done
    rows already), failed ones dropped: the rows a trial that `trial_states` calls done is done by."""
    if "status" not in df.columns:
        return df
    return df[df["status"] == "done"]


SHOWN_DUPLICATES = 5  # a warning names this many trials with two done rows, then counts the rest


def duplicate_done_trials(df: pd.DataFrame) -> dict[str, list[str]]:
    """``{trial id: its done rows' row ids}`` for every trial of ``df`` with more than one done row (whatever
    their origin: a stalled holder's row that escaped the claim's fence, a store merged from two copies)."""
    done = done_rows(df)
    if done.empty:
        return {}
    counts = done["trial_id"].value_counts()
    twice = set(counts[counts > 1].index)
    if not twice:
        return {}
    rows = done[done["trial_id"].isin(twice)]
    found: dict[str, list[str]] = {}
    for trial_id, row_id in zip(rows["trial_id"], rows["row_id"] if "row_id" in rows else [""] * len(rows),
                                strict=True):  # fmt: skip
        found.setdefault(trial_id, []).append(str(row_id))
    return dict(sorted(found.items()))


def duplicate_warning(duplicates: dict[str, list[str]]) -> str:
    """The one-line warning naming trials with more than one done row (`duplicate_done_trials`)."""
    named = ", ".join(f"{t} ({len(r)} done rows)" for t, r in list(duplicates.items())[:SHOWN_DUPLICATES])
    more = len(duplicates) - SHOWN_DUPLICATES
    return (
        f"kdgrid: {len(duplicates)} trial(s) have more than one done row (trained twice); each counts once, "
        f"by its latest done row: {named}"
        + (f" and {more} more" if more > 0 else "")
        + f"; `{CHECK_COMMAND}` lists them"
    )


def report_duplicates(duplicates: dict[str, list[str]]) -> None:
    """Log `duplicate_warning` (logger ``kdgrid.store``, WARNING), once per process for the same trials."""
    if not duplicates:
        return
    message = duplicate_warning(duplicates)
    if message not in _reported_duplicates:
        _reported_duplicates.add(message)
        logger.warning(message)


_reported_duplicates: set[str] = set()


def latest_done_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The latest done row of each trial of ``df`` (rows of the store's schema): a trial with two done rows
    counts once, by the one written last (by ``written_at``, then by order in ``df``), and is named in a
    warning (`report_duplicates`). Failed and superseded rows are dropped. The frame keeps ``df``'s columns."""
    report_duplicates(duplicate_done_trials(df))
    done = _order_by_time(done_rows(df))
    return done.drop_duplicates("trial_id", keep="last").drop(columns="_order", errors="ignore")


def trial_states(rows: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The one rule of "is this trial done?": ``{trial id: "done" | "failed"}`` from (trial id, status) pairs,
    ``done`` when any row of the trial is done (done wins over failed, whatever the order), else ``failed``.
    ``superseded`` rows (written under a lost claim) are never counted. Trials without a counted row are absent
    (pending)."""
    states: dict[str, str] = {}
    for trial_id, status in rows:
        if status == SUPERSEDED:
            continue
        if states.get(trial_id) != "done":
            states[trial_id] = "done" if status == "done" else "failed"
    return states


def done_trial_ids(store_dir: Path | str) -> set[str]:
    """Ids of the trials `trial_states` calls done in the store (read from file names and the compacted
    files' name columns: cheap, no per-trial file is opened). A missing store has none."""
    if not Path(store_dir).exists():
        return set()
    table = read_table(store_dir, ["trial_id", "status"])
    pairs = zip(table.column("trial_id").to_pylist(), table.column("status").to_pylist(), strict=True)
    return {trial_id for trial_id, state in trial_states(pairs).items() if state == "done"}


def latest_state(df: pd.DataFrame) -> pd.DataFrame:
    """Each trial's state, indexed by ``trial_id``.

    Columns: ``state`` (``done`` if any attempt is done - done wins over failed - else ``failed``), ``attempts``
    (rows of this trial), ``failures`` (failed rows), ``error_type`` / ``error_message`` (of its latest failed
    attempt, when the frame has them; null for done trials) and ``row_id`` (the row that decided the state:
    the latest done row, else the latest failed row).
    """
    columns = ["state", "attempts", "failures", "error_type", "error_message", "row_id"]
    df = df[df["status"] != SUPERSEDED] if "status" in df.columns else df
    if df.empty:
        return pd.DataFrame(columns=columns, index=pd.Index([], name="trial_id"))
    ordered = _order_by_time(df)
    decided = trial_states(zip(ordered["trial_id"], ordered["status"], strict=True))
    attempts = ordered.groupby("trial_id").size()
    failures = (ordered["status"] == "failed").groupby(ordered["trial_id"]).sum()
    latest_failed = ordered[ordered["status"] == "failed"].drop_duplicates("trial_id", keep="last")
    latest_failed = latest_failed.set_index("trial_id")
    latest_done = latest_done_rows(ordered).set_index("trial_id")
    state = pd.DataFrame(index=attempts.index)
    state["state"] = [decided[t] for t in state.index]
    state["attempts"] = attempts.astype(int)
    state["failures"] = failures.reindex(state.index).fillna(0).astype(int)
    for column in ("error_type", "error_message"):
        values = latest_failed[column] if column in latest_failed.columns else pd.Series(dtype=object)
        state[column] = [
            None if s == "done" else values.get(t) for t, s in zip(state.index, state["state"], strict=True)
        ]
    state["row_id"] = [
        latest_done.at[t, "row_id"] if s == "done" else latest_failed.at[t, "row_id"]
        for t, s in zip(state.index, state["state"], strict=True)
    ]
    state.index.name = "trial_id"
    return state[columns]
