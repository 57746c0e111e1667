"""Where things live inside a store directory, and how a per-trial file is named.

```
<store>/
  rows/<trial_id>.<status>.<row_id>.parquet   one file per attempt, written by the worker that ran it
  compacted/part-<utc>-<uuid>.parquet         many rows each, written by `compact`
  _checkpoints/<group hash>/                  epoch checkpoints of running jobs (not results)
  _read_cache/rows-<schema>-<uuid>.arrow      rows readers already decoded from rows/ (not results: a cache,
                                              see `kdgrid.store.read_cache`; safe to delete at any time)
  _read_cache/verified-<format>-<uuid>.txt    row files whose footer already passed the listing's check
  _forgotten/forgotten-<utc>-<uuid>.parquet   rows removed by `kdgrid store forget` (kept, never read)
  _quarantine/rows/..., _quarantine/compacted/...  files that are not kdgrid rows, moved aside by
                                              `kdgrid store check --quarantine` (kept, never read)
```

A file is first written under a name starting with ``.`` in its final folder and then renamed (atomic on POSIX
and NFS within one folder); readers skip names starting with ``.`` or ``_``, so they never see half a file.
Which listed files are rows (and what happens to the others) is decided in one place, `kdgrid.store.listing`.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path

ROWS_DIR = "rows"
COMPACTED_DIR = "compacted"
CHECKPOINTS_DIR = "_checkpoints"
READ_CACHE_DIR = "_read_cache"
CHECK_COMMAND = "kdgrid store check"  # lists and quarantines what a read leaves out (kdgrid.store.listing)
SUFFIX = ".parquet"


@dataclass(frozen=True)
class RowFileName:
    """The parts of a per-trial file's name: ``<trial_id>.<status>.<row_id>.parquet``."""

    trial_id: str
    status: str
    row_id: str

    @property
    def name(self) -> str:
        return f"{self.trial_id}.{self.status}.{self.row_id}{SUFFIX}"

    @classmethod
    def parse(cls, name: str) -> RowFileName | None:
        """The parts of a name, or None for a name that is not a per-trial file."""
        if not name.endswith(SUFFIX) or name.startswith((".", "_")):
            return None
        parts = name[: -len(SUFFIX)].split(".")
        if len(parts) != 3 or not all(parts):
            return None
        return cls(*parts)


def rows_dir(store: Path) -> Path:
    return Path(store) / ROWS_DIR


def compacted_dir(store: Path) -> Path:
    return Path(store) / COMPACTED_DIR


def checkpoints_dir(store: Path) -> Path:
    return Path(store) / CHECKPOINTS_DIR


def read_cache_dir(store: Path) -> Path:
    return Path(store) / READ_CACHE_DIR


def new_row_id() -> str:
    return uuid.uuid4().hex


def visible_names(folder: Path) -> list[str]:
    """The names of the finished Parquet files of a folder (temporary and hidden names skipped), sorted."""
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []  # no folder yet, or a file in its place (`kdgrid.store.listing` reports that)
    return sorted(n for n in names if n.endswith(SUFFIX) and not n.startswith((".", "_")))


HIDDEN_PREFIXES = (".", "_")  # names a read never lists: temporary files, the read cache, quarantine


def listed_entries(folder: Path) -> list[str]:
    """The names of every entry of ``folder`` a read lists (`kdgrid.store.listing`): row files and strays
    alike, hidden and temporary names skipped; none when the folder is missing or a file."""
    try:
        return sorted(name for name in os.listdir(folder) if not name.startswith(HIDDEN_PREFIXES))
    except (FileNotFoundError, NotADirectoryError):
        return []


def visible_files(folder: Path) -> list[Path]:
    """The finished Parquet files of a folder (temporary and hidden names skipped), sorted by name."""
    return [folder / n for n in visible_names(folder)]
