"""Which trials each sweep lists, and the study of each, recorded in the store when the sweep runs.

```
<store>/memberships/<sweep name>.<content hash>.json
    {"sweep": name, "table": "5", "studies": [study, ...], "trials": {trial_id: study}}
```

``studies``: the sweep's studies in its file's order (tables laid out by study list them so, and test each
against the first that is soft labels only); written only for a sweep of several studies, and absent in files
written before it was recorded (analysis then orders the studies by their names' first appearance).

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
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from kdgrid.atomic_files import write_file_atomically
from kdgrid.errors import KdgridError
from kdgrid.store.layout import CHECK_COMMAND

logger = logging.getLogger("kdgrid.store")

MEMBERSHIPS_DIR = "memberships"
SUFFIX = ".json"
MAX_NAME_PART = (
    160  # characters of the escaped sweep name in a file name (readers take the name from the content)
)


@dataclass(frozen=True)
class SweepMembership:
    """The trials one run of a sweep listed.

    Attributes:
        sweep: the sweep's name, as its rows record it in the ``sweep`` column.
        trials: trial id -> the study (of that sweep) the trial belongs to.
        table: the table the sweep file declares (``"5"``, ``"demo"``); None when it declares none or the file
            was written before sweeps declared their table.
        studies: the sweep's studies in its file's order; empty for a sweep of one study, or a file written
            before the order was recorded.
    """

    sweep: str
    trials: Mapping[str, str]
    table: str | None = None
    studies: tuple[str, ...] = ()


def memberships_dir(store: Path | str) -> Path:
    return Path(store) / MEMBERSHIPS_DIR


def _file_name(sweep: str, content: bytes) -> str:
    # The sweep's name, escaped to one safe file name (never hidden), then the content's hash.
    safe = quote(sweep, safe="")
    if safe.startswith("."):
        safe = "%2E" + safe[1:]
    if (
        len(safe) > MAX_NAME_PART
    ):  # a long or non-ASCII name escapes to more than a file name holds (255 bytes)
        safe = f"{safe[:MAX_NAME_PART]}~{hashlib.sha256(sweep.encode()).hexdigest()[:8]}"
    return f"{safe}.{hashlib.sha256(content).hexdigest()[:16]}{SUFFIX}"


def record_membership(
    store: Path | str,
    sweep: str,
    trials: Mapping[str, str],
    table: str | None = None,
    studies: tuple[str, ...] = (),
) -> Path:
    """Record that sweep ``sweep`` (declaring ``table``, if any; of ``studies`` in its file's order) lists
    ``trials`` (trial id -> study) in ``store``; returns the file.

    Idempotent: the file is named by its content, and an existing one is left as it is. Without a table, and for
    a sweep of one study, the content is what it was before these keys existed (the same file name for the same
    membership)."""
    declared = {"table": table} if table is not None else {}
    ordered = {"studies": list(studies)} if len(studies) > 1 else {}
    content = json.dumps(
        {"sweep": sweep, **declared, **ordered, "trials": dict(sorted(trials.items()))}, indent=0
    ).encode()
    folder = memberships_dir(store)
    final = folder / _file_name(sweep, content)
    if final.is_file():
        return final
    return write_file_atomically(final, lambda handle: handle.write(content))


def _parse(path: Path) -> SweepMembership | str:
    """The membership in ``path``, or why it is not one."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        return f"not a sweep membership file of a kdgrid store ({error})"
    sweep, trials = (data.get("sweep"), data.get("trials")) if isinstance(data, dict) else (None, None)
    table = data.get("table") if isinstance(data, dict) else None
    studies = data.get("studies", []) if isinstance(data, dict) else None
    if not (
        isinstance(sweep, str)
        and isinstance(trials, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in trials.items())
        and (table is None or isinstance(table, str))
        and isinstance(studies, list)
        and all(isinstance(s, str) for s in studies)
    ):
        return (
            'not a sweep membership file of a kdgrid store (expected {"sweep": name, "table": table (optional), '
            '"studies": [study, ...] (optional), "trials": {trial_id: study}})'
        )
    return SweepMembership(sweep, trials, table, tuple(studies))


def _membership_files(store: Path | str) -> list[Path]:
    folder = memberships_dir(store)
    try:
        return [folder / n for n in sorted(os.listdir(folder)) if not n.startswith(".")]
    except (FileNotFoundError, NotADirectoryError):
        return []


def membership_problems(store: Path | str) -> list[tuple[Path, str]]:
    """(file, why) for every visible file of ``memberships/`` that is not a membership (`kdgrid store check`)."""
    found = []
    for path in _membership_files(store):
        if not path.name.endswith(SUFFIX):
            found.append((path, f"not a sweep membership file (its name does not end in {SUFFIX})"))
            continue
        parsed = _parse(path)
        if isinstance(parsed, str):
            found.append((path, parsed))
    return found


def read_memberships(store: Path | str, *, skip_bad: bool = False) -> list[SweepMembership]:
    """Every membership recorded in ``store`` (one per file, in file-name order); empty for a store written
    before memberships were recorded, or by code that never ran a sweep.

    ``skip_bad``: a file that is not a membership is left out and named in one warning (logger
    ``kdgrid.store``, once per process), as a bad row file is; `kdgrid store check` lists it.

    Raises:
        KdgridError: without ``skip_bad``, a file that is not a membership (not JSON, or not ``{"sweep": str,
            "trials": {str: str}}``).
    """
    found: list[SweepMembership] = []
    bad: list[str] = []
    for path in _membership_files(store):
        if not path.name.endswith(SUFFIX):
            continue
        parsed = _parse(path)
        if isinstance(parsed, SweepMembership):
            found.append(parsed)
        elif skip_bad:
            bad.append(f"{path}: {parsed}")
        else:
            raise KdgridError(f"{path}: {parsed}")
    if bad:
        message = (
            f"kdgrid: left out {len(bad)} file(s) of {memberships_dir(store)}: "
            + "; ".join(bad[:3])
            + (" ..." if len(bad) > 3 else "")
            + f"; `{CHECK_COMMAND}` lists them and `--quarantine` moves them aside"
        )
        if message not in _reported:
            _reported.add(message)
            logger.warning(message)
    return found


_reported: set[str] = set()
