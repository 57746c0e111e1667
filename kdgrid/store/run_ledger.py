"""Which rows one run wrote and which claims it took over: the run's ledger, so that its summary counts only
what it did itself, whatever other runs of the same sweep write into the store meanwhile.

A run names itself in the environment (``KDGRID_RUN_ID``, set by `kdgrid.sweep_run.run_sweep` and inherited by
the processes that run its jobs); every row written while it is set (`kdgrid.store.write.write_result`) and
every stale claim taken over (`kdgrid.store.claims.try_claim`) leaves an empty file named after it in
``<store>/_runs/<run id>.ledger/`` (``row.<row file name>``, ``reclaimed.<trial id>``). Empty files, one per
event, created atomically: concurrent job processes (on other nodes too) never write into a shared file. The
run reads its ledger when it ends and removes it. Without the variable nothing is recorded (a job function
called directly, `kdgrid trial`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from kdgrid.store import layout

RUNS_DIR = "_runs"  # starts with "_": store readers never look inside
RUN_ENV = "KDGRID_RUN_ID"
LEDGER_SUFFIX = ".ledger"
ROW_PREFIX = "row."
RECLAIMED_PREFIX = "reclaimed."


def ledger_dir(store: Path | str, run_id: str) -> Path:
    return Path(store) / RUNS_DIR / f"{run_id}{LEDGER_SUFFIX}"


def current_run() -> str | None:
    """This process's run (``KDGRID_RUN_ID``), or None."""
    run_id = os.environ.get(RUN_ENV, "").strip()
    return run_id if run_id and "/" not in run_id and run_id not in (".", "..") else None


def note(store: Path | str, entry: str) -> None:
    """Record ``entry`` in the current run's ledger (nothing outside a run; a failure to record is ignored: the
    ledger only feeds the run's summary)."""
    run_id = current_run()
    if run_id is None:
        return
    folder = ledger_dir(store, run_id)
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / entry).touch()


def note_row(store: Path | str, row_file: str) -> None:
    note(store, f"{ROW_PREFIX}{row_file}")


def note_reclaimed(store: Path | str, trial_id: str) -> None:
    note(store, f"{RECLAIMED_PREFIX}{trial_id}")


@dataclass
class RunLedger:
    """What one run did: ``rows`` (trial id, status) of the rows it wrote, ``reclaimed`` the trials whose stale
    claims it took over."""

    rows: list[tuple[str, str]] = field(default_factory=list)
    reclaimed: set[str] = field(default_factory=set)

    def trials(self, status: str) -> set[str]:
        return {trial_id for trial_id, row_status in self.rows if row_status == status}


def read_ledger(store: Path | str, run_id: str) -> RunLedger:
    ledger = RunLedger()
    try:
        names = os.listdir(ledger_dir(store, run_id))
    except OSError:
        return ledger
    for name in sorted(names):
        if name.startswith(ROW_PREFIX):
            parts = layout.RowFileName.parse(name[len(ROW_PREFIX) :])
            if parts is not None:
                ledger.rows.append((parts.trial_id, parts.status))
        elif name.startswith(RECLAIMED_PREFIX):
            ledger.reclaimed.add(name[len(RECLAIMED_PREFIX) :])
    return ledger


def remove_ledger(store: Path | str, run_id: str) -> None:
    shutil.rmtree(ledger_dir(store, run_id), ignore_errors=True)
