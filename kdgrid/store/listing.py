"""The one listing of a store, and the one rule of what a row file is.

Every command reads the store through `list_store` (``status``, ``plan``, ``run`` and ``resume`` through
`kdgrid.grid.state`, ``tables`` and the executors through `kdgrid.store.read`, ``store compact``, ``store forget``,
``store check``). A file it lists is read as rows only when it passes `name_problem` and `content_problem`:

- in ``rows/``: a name ``<trial_id>.<status>.<row_id>.parquet`` with a status of `STATUSES`;
  in ``compacted/``: a name ending in ``.parquet``; both folders must be folders;
- a Parquet footer that reads (a truncated or corrupt file fails here), holding the identity columns
  `IDENTITY_COLUMNS` (a Parquet file of some other program has none), every column that kdgrid also stores of a
  type convertible to kdgrid's, and, for a per-trial file, at least one row.

Names starting with ``.`` (files being written) or ``_`` are not listed. A file that fails the rule is a *stray*:
it is left out of every read, and every command reports it the same way (`report_strays`: one warning line
naming the files and ``kdgrid store check``), so ``status`` never counts a file that ``tables`` cannot read and
no command is stopped by one bad file. ``kdgrid store check --quarantine`` moves strays aside
(`kdgrid.store.check`). A file that passes the footer check but whose pages cannot be decoded is found by the
reader and reported the same way (`kdgrid.store.read`).

The footer check costs about 0.3 ms a file; files that passed are remembered by name, size and modification
time in ``_read_cache/verified-*.txt`` (`VerifiedFiles`, a cache like the read cache: safe to delete), so a
read checks only the files that arrived since the last one.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from kdgrid.atomic_files import write_file_atomically
from kdgrid.errors import KdgridError
from kdgrid.store import layout
from kdgrid.store.layout import CHECK_COMMAND
from kdgrid.store.schema import SCHEMA, STATUSES

logger = logging.getLogger("kdgrid.store")

IDENTITY_COLUMNS = ("row_id", "trial_id", "status")  # without them a row cannot be told apart or classified
QUARANTINE_DIR = "_quarantine"
MAX_NAMED_IN_WARNING = 5
VERIFY_FORMAT = 1  # bump when `content_problem` changes what it accepts: older verifications are then ignored
MIN_NEW_TO_REMEMBER = (
    64  # fewer newly verified files are verified again by the next read (no tiny cache files)
)
MAX_VERIFIED_FILES = 32  # more are merged into one
_FOOTER_ERRORS = (OSError, pa.ArrowException)
_KDGRID_TYPES = {f.name: f.type for f in SCHEMA}
_reported: set[str] = (
    set()
)  # warnings already printed by this process (a command reads the store several times)


class StoreLayoutError(KdgridError):
    """The store's path exists but is not a directory."""


@dataclass(frozen=True)
class StrayFile:
    """A file (or folder) where the store expects rows, that is not a kdgrid row file, and why."""

    path: Path
    reason: str
    # True for a file whose rows every read refuses instead of leaving it out (rows of a newer schema version:
    # reading the rest would count its trials as not run)
    stops_reads: bool = False

    def describe(self, store: Path) -> str:
        """``rows/<name>: <reason>`` (the path relative to the store)."""
        try:
            where = self.path.relative_to(store)
        except ValueError:
            where = self.path
        return f"{where}: {self.reason}"


@dataclass
class StoreListing:
    """The store's row files: ``loose`` (names in ``rows/``) and ``parts`` (names in ``compacted/``), each
    sorted, every one a row file by `name_problem` and `content_problem`; and the ``strays``, which no read uses."""

    loose: list[str] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)
    strays: list[StrayFile] = field(default_factory=list)


def name_problem(name: str, *, loose: bool) -> str | None:
    """Why ``name`` (of an entry of ``rows/`` when ``loose``, else of ``compacted/``) is not a row file's, or
    None when it is."""
    if not name.endswith(layout.SUFFIX):
        return f"not a Parquet file name (*{layout.SUFFIX})"
    if not loose:
        return None
    parts = layout.RowFileName.parse(name)
    if parts is None or parts.status not in STATUSES:
        return f"not a row file name (<trial_id>.<{'|'.join(STATUSES)}>.<row_id>{layout.SUFFIX})"
    return None


def _schema_problem(schema: pa.Schema) -> str | None:
    """Why rows of ``schema`` are not kdgrid rows (an identity column missing, a column of kdgrid's name whose
    type cannot become kdgrid's), or None."""
    names = set(schema.names)
    missing = [name for name in IDENTITY_COLUMNS if name not in names]
    if missing:
        return f"not kdgrid rows (no {', '.join(missing)} column)"
    for own in schema:
        expected = _KDGRID_TYPES.get(own.name)
        if expected is None or own.type == expected:
            continue
        try:
            pa.array([], own.type).cast(expected)
        except pa.ArrowException:
            return f"not kdgrid rows (column {own.name} is {own.type}, kdgrid stores {expected})"
    return None


@functools.cache
def _kdgrid_parquet_schema() -> pq.ParquetSchema:
    """The Parquet schema kdgrid writes `SCHEMA` as (whatever the compression)."""
    buffer = io.BytesIO()
    pq.write_table(SCHEMA.empty_table(), buffer)
    buffer.seek(0)
    return pq.read_metadata(buffer).schema


def content_problem(path: Path, *, loose: bool) -> str | None:
    """Why the file at ``path`` is not kdgrid rows judging by its Parquet footer, or None when it is (see the
    module's rule). Raises FileNotFoundError when the file is gone (a compaction merged it meanwhile)."""
    try:
        metadata = pq.read_metadata(path)
        if metadata.schema.equals(_kdgrid_parquet_schema()):
            schema = SCHEMA  # what every kdgrid writer writes: no need to convert it (2/3 of the cost)
        else:
            schema = metadata.schema.to_arrow_schema()
    except FileNotFoundError:
        raise
    except _FOOTER_ERRORS as error:
        return f"not a readable Parquet file (truncated or corrupt: {error})"
    if schema is not SCHEMA:
        problem = _schema_problem(schema)
        if problem is not None:
            return problem
    if loose and metadata.num_rows == 0:
        return "holds no row (a row file holds the row its name promises)"
    return None


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    try:
        return sorted(
            (e for e in os.scandir(folder) if not e.name.startswith(layout.HIDDEN_PREFIXES)), key=lambda e: e.name
        )
    except FileNotFoundError:
        return []


class VerifiedFiles:
    """The row files whose footer already passed `content_problem`, as ``<folder>/<name> <size> <mtime ns>``
    keys (a file rewritten in place is checked again). Kept in ``_read_cache/verified-<format>-<uuid>.txt``;
    a store that cannot be written only loses the speed-up."""

    def __init__(self, store: Path) -> None:
        self.folder = layout.read_cache_dir(store)
        self.prefix = f"verified-{VERIFY_FORMAT}-"
        self.files: list[Path] = []
        self.keys: set[str] = set()
        self.new: list[str] = []
        with contextlib.suppress(OSError):
            for name in sorted(os.listdir(self.folder)):
                if name.startswith(self.prefix) and name.endswith(".txt"):
                    with contextlib.suppress(OSError, UnicodeDecodeError):
                        self.keys.update((self.folder / name).read_text().splitlines())
                        self.files.append(self.folder / name)

    @staticmethod
    def key(entry: os.DirEntry[str], folder_name: str) -> str:
        stat = entry.stat()
        return f"{folder_name}/{entry.name} {stat.st_size} {stat.st_mtime_ns}"

    def remember(self, key: str) -> None:
        self.keys.add(key)
        self.new.append(key)

    def save(self, live: set[str]) -> None:
        """Write the newly verified keys (when there are enough), or merge every file down to the ``live`` keys
        (those of files listed now) when there are too many files or most keys are of files gone."""
        stale = len(self.keys - live)
        if len(self.files) >= MAX_VERIFIED_FILES or stale > max(len(live), MIN_NEW_TO_REMEMBER):
            if self._write(sorted(self.keys & live)):
                for old in self.files:
                    with contextlib.suppress(OSError):  # another reader may have merged it already
                        old.unlink()
        elif len(self.new) >= MIN_NEW_TO_REMEMBER:
            self._write(self.new)

    def _write(self, keys: list[str]) -> bool:
        text = "".join(f"{key}\n" for key in keys).encode()
        try:
            final = self.folder / f"{self.prefix}{uuid.uuid4().hex[:12]}.txt"
            write_file_atomically(final, lambda handle: handle.write(text))
        except OSError:
            return False  # a read-only store (or a full disk): verify again next time
        return True


def list_store(store: Path | str, *, verify: bool = True) -> StoreListing:
    """The store's row files and strays (see the module's rule). ``verify=False`` judges by names alone.

    A missing store is empty. Raises `StoreLayoutError` when ``store`` is not a directory, and
    FileNotFoundError when a listed file disappears while its footer is checked (a compaction merged it: list
    again)."""
    store = Path(store)
    if store.exists() and not store.is_dir():
        raise StoreLayoutError(
            f"the store {store} is a file, not a directory: pass the store's folder (--store DIR)"
        )
    listing = StoreListing()
    verified = VerifiedFiles(store) if verify else None
    live: set[str] = set()
    for folder, loose, names in (
        (layout.rows_dir(store), True, listing.loose),
        (layout.compacted_dir(store), False, listing.parts),
    ):
        if folder.exists() and not folder.is_dir():
            listing.strays.append(StrayFile(folder, f"not a directory ({folder.name}/ holds the row files)"))
            continue
        for entry in _entries(folder):
            path = folder / entry.name
            problem = name_problem(entry.name, loose=loose)
            if problem is None and entry.is_dir():
                problem = "a directory, not a row file"
            if problem is None and verified is not None:
                key = VerifiedFiles.key(entry, folder.name)
                live.add(key)
                if key not in verified.keys:
                    problem = content_problem(path, loose=loose)
                    if problem is None:
                        verified.remember(key)
            if problem is None:
                names.append(entry.name)
            else:
                listing.strays.append(StrayFile(path, problem))
    if verified is not None:
        verified.save(live)
    return listing


def stray_warning(store: Path, strays: Iterable[StrayFile]) -> str:
    """The one warning every command prints for ``strays``: their names and reasons (the first
    `MAX_NAMED_IN_WARNING`), and the way forward."""
    strays = list(strays)
    shown = "; ".join(s.describe(store) for s in strays[:MAX_NAMED_IN_WARNING])
    more = f"; and {len(strays) - MAX_NAMED_IN_WARNING} more" if len(strays) > MAX_NAMED_IN_WARNING else ""
    return (
        f"warning: the store {store} holds {len(strays)} file(s) that are not kdgrid rows, left out of every "
        f"read: {shown}{more}. Run `{CHECK_COMMAND} --store {store}` to list them; `--quarantine` moves them "
        f"to {store / QUARANTINE_DIR} (the trials whose rows they held then read as not run)"
    )


def report_strays(store: Path | str, strays: Iterable[StrayFile]) -> None:
    """Log `stray_warning` (logger ``kdgrid.store``, level WARNING: printed on stderr when logging is not
    configured), once per process for the same files."""
    strays = list(strays)
    if not strays:
        return
    message = stray_warning(Path(store), strays)
    if message in _reported:
        return
    _reported.add(message)
    logger.warning(message)
