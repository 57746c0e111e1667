"""Which trials each sweep lists, and the study of each, recorded in the store when the sweep runs.

```
<store>/memberships/<sweep name>.<content hash>.json   {"sweep": name, "table": "5", "trials": {trial_id: study}}
```

``table``: the table the sweep file declares (its ``table:`` key, `kdgrid.grid.spec`); absent when it declares
none, and in files written before the key existed (analysis then maps the sweep's name to its table,
`kdgrid.analysis.tidy.legacy_table_of`).

A trial two sweeps share runs once (the second sweep finds it done), so its rows name only the sweep that ran
it; the membership files let analysis count it in both sweeps' tables without reading any sweep file
(`kdgrid.analysis.tidy.membership_tables`). `kdgrid run` and `kdgrid resume` (`kdgrid.sweep_run.run_sweep`) record a
sweep's membership before they run anything, also when there is nothing left to run. A store written before
memberships were recorded has none: analysis then goes by the ``sweep`` and ``study`` columns of the rows alone,
and running each sweep again (`kdgrid resume`, which reruns nothing done) records its membership.

The files are immutable and named by their content: recording the same membership again writes nothing, two
runs of different sweeps (or of one sweep) never write the same file with different content, and an edited sweep
adds a file beside the old one. A reader takes the union of every file of a sweep: a trial counts in a sweep that
listed it at any run, just as its rows keep the sweep that ran it. Like rows, a file is written under a hidden
temporary name in its final folder and renamed, so readers never see half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from kdgrid.atomic_files import write_file_atomically
from kdgrid.errors import KdgridError

MEMBERSHIPS_DIR = "memberships"
SUFFIX = ".json"


@dataclass(frozen=True)
class SweepMembership:
    """The trials one run of a sweep listed.

    Attributes:
        sweep: the sweep's name, as its rows record it in the ``sweep`` column.
        trials: trial id -> the study (of that sweep) the trial belongs to.
        table: the table the sweep file declares (``"5"``, ``"demo"``); None when it declares none or the file
            was written before sweeps declared their table.
    """

    sweep: str
    trials: Mapping[str, str]
    table: str | None = None


def memberships_dir(store: Path | str) -> Path:
    return Path(store) / MEMBERSHIPS_DIR


def _file_name(sweep: str, content: bytes) -> str:
    # The sweep's name, escaped to one safe file name (never hidden), then the content's hash.
    safe = quote(sweep, safe="")
    if safe.startswith("."):
        safe = "%2E" + safe[1:]
    return f"{safe}.{hashlib.sha256(content).hexdigest()[:16]}{SUFFIX}"


def record_membership(
    store: Path | str, sweep: str, trials: Mapping[str, str], table: str | None = None
) -> Path:
    """Record that sweep ``sweep`` (declaring ``table``, if any) lists ``trials`` (trial id -> study) in
    ``store``; returns the file.

    Idempotent: the file is named by its content, and an existing one is left as it is. Without a table the
    content is what it was before sweeps declared tables (the same file name for the same membership)."""
    declared = {"table": table} if table is not None else {}
    content = json.dumps(
        {"sweep": sweep, **declared, "trials": dict(sorted(trials.items()))}, indent=0
    ).encode()
    folder = memberships_dir(store)
    final = folder / _file_name(sweep, content)
    if final.is_file():
        return final
    return write_file_atomically(final, lambda handle: handle.write(content))


def read_memberships(store: Path | str) -> list[SweepMembership]:
    """Every membership recorded in ``store`` (one per file, in file-name order); empty for a store written
    before memberships were recorded, or by code that never ran a sweep.

    Raises:
        KdgridError: a file that is not a membership (not JSON, or not ``{"sweep": str, "trials": {str: str}}``).
    """
    folder = memberships_dir(store)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(SUFFIX) and not n.startswith("."))
    except FileNotFoundError:
        return []
    found: list[SweepMembership] = []
    for name in names:
        path = folder / name
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise KdgridError(f"{path}: not a sweep membership file of a kdgrid store ({error})") from error
        sweep, trials = (data.get("sweep"), data.get("trials")) if isinstance(data, dict) else (None, None)
        table = data.get("table") if isinstance(data, dict) else None
        if not (
            isinstance(sweep, str)
            and isinstance(trials, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in trials.items())
            and (table is None or isinstance(table, str))
        ):
            raise KdgridError(
                f'{path}: not a sweep membership file of a kdgrid store (expected {{"sweep": name, '
                '"table": table (optional), "trials": {trial_id: study}})'
            )
        found.append(SweepMembership(sweep, trials, table))
    return found
