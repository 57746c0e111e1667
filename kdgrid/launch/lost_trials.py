"""The rows a run wrote, and failure rows for trials whose job died without a word (SIGKILL, scancel, out of
requeues, a dead Ray actor, a dead local worker process).

A job that is killed cannot write anything, so its unfinished trials would just have no row. The executor that
saw the job end badly writes a ``failed`` row for each trial of that job that got no row during this run, with
the reason (the SLURM state, Ray's error, the worker's exit): ``kdgrid status`` then shows why, and
``kdgrid resume`` retries them. `RunRows` is the one answer to "which trials got a row during this run, and are
they done?" (the local executor's progress bar and summary read it too); done or failed is decided by the
store's one rule, `kdgrid.store.trial_states`.

A trial that still holds a live claim (`kdgrid.store.claims`) is never recorded lost: another process is training
it (an earlier submission's task still running, a concurrent run) and its row will come from there. A lost trial's
stale claim is deleted with its ``JobLost`` row.

"This run" is decided by the run's ledger where the run has one (`kdgrid.store.run_ledger`: the rows its own
processes wrote, whatever other runs write meanwhile); else on the store's own filesystem: a row file is the run's
when it was not in ``rows/`` when the run began (`RunRows.start`), or, given only the run's marker (``<store>/_runs/<name>``, touched before
submission), when its mtime is not older than the marker's; so clocks of the submitting host and the nodes need
not agree.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Container, Iterable, Mapping, Sequence
from pathlib import Path

from kdgrid.launch.failure_rows import write_failure_rows
from kdgrid.store import layout
from kdgrid.store.claims import read_claims, release, stale_reason
from kdgrid.store.read import trial_states
from kdgrid.store.run_ledger import RUNS_DIR, read_ledger
from kdgrid.trial import Trial


def touch_run_marker(store_dir: Path, name: str) -> Path:
    """Create (or refresh) ``<store>/_runs/<name>``; its mtime is this run's start on the store's clock."""
    folder = Path(store_dir) / RUNS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / name
    marker.touch()
    os.utime(marker)
    return marker


class RunRows:
    """The per-trial row files a run wrote (listed by name, never opened; each file looked at once).

    Args:
        store_dir: the store.
        marker: the run's marker (`touch_run_marker`): a file not older than it is the run's.
        before: names ``rows/`` held when the run began: never the run's, whatever their mtime.
        run_id: the run's ledger (`kdgrid.store.run_ledger`), where every process of the run records its rows
            (the local executor's): its rows are exactly the ledger's.
    """

    def __init__(
        self, store_dir: Path, marker: Path, *, before: Iterable[str] = (), run_id: str | None = None
    ) -> None:
        self.folder = layout.rows_dir(Path(store_dir))
        self.marker = marker
        self.since = marker.stat().st_mtime
        self.seen: set[str] = set(before)
        self.rows: list[tuple[str, str]] = []  # (trial id, status) of the run's rows
        self.run_id = run_id  # a run with a ledger: its rows are the ledger's

    @classmethod
    def start(cls, store_dir: Path, name: str, *, run_id: str | None = None) -> RunRows:
        """A run beginning now: ``rows/`` listed, then its marker touched."""
        before = layout.visible_names(layout.rows_dir(Path(store_dir)))
        return cls(store_dir, touch_run_marker(store_dir, name), before=before, run_id=run_id)

    def refresh(self) -> RunRows:
        """Look at the row files that appeared since the last look; returns self."""
        if self.run_id is not None:
            self.rows = read_ledger(self.folder.parent, self.run_id).rows
            return self
        for name in layout.visible_names(self.folder):
            if name in self.seen:
                continue
            self.seen.add(name)
            parts = layout.RowFileName.parse(name)
            if parts is None:
                continue
            try:
                mine = (self.folder / name).stat().st_mtime >= self.since
            except FileNotFoundError:  # moved by a compaction meanwhile: it was written, and counted there
                mine = True
            if mine:
                self.rows.append((parts.trial_id, parts.status))
        return self

    def states(self, among: Container[str] | None = None) -> dict[str, str]:
        """trial id -> ``done`` / ``failed`` for the trials with a row from this run (`trial_states`), only
        those of ``among`` (trial ids) when given."""
        return trial_states(row for row in self.rows if among is None or row[0] in among)

    def without_rows(self, trials: Iterable[Trial]) -> list[Trial]:
        """The trials with no row (done or failed) from this run, order kept."""
        reported = {trial_id for trial_id, _ in self.rows}
        return [trial for trial in trials if trial.trial_id not in reported]

    def close(self) -> None:
        """The run has ended: remove its marker."""
        self.marker.unlink(missing_ok=True)


def trials_without_rows_since(store_dir: Path, trials: Sequence[Trial], marker: Path) -> list[Trial]:
    """The trials with no per-trial row file (done or failed) written at or after ``marker``'s mtime."""
    return RunRows(store_dir, marker).refresh().without_rows(trials)


def record_lost_trials(
    store_dir: Path,
    trials: Sequence[Trial],
    *,
    marker: Path,
    sweep: str,
    studies: Mapping[str, str] | None,
    reason: str,
    finished_jobs: Collection[str] = (),
) -> list[Trial]:
    """Write a failed row (error type ``JobLost``) for each trial of a dead job that got no row since
    ``marker`` and holds no live claim; each row records its trial's study from ``studies`` (trial id -> study,
    as `run_job_to_store` writes it). ``finished_jobs``: executor job ids (`kdgrid.store.claims.executor_job_id`)
    the executor saw end, whose claims are stale whatever their heartbeat says. The stale claims of the trials
    recorded are deleted.

    Returns the trials recorded.
    """
    unreported = trials_without_rows_since(store_dir, trials, marker)
    claims = read_claims(store_dir, {trial.trial_id for trial in unreported})
    stale = {
        trial_id: claim
        for trial_id, claim in claims.items()
        if stale_reason(claim, finished_jobs=finished_jobs) is not None
    }
    lost = [trial for trial in unreported if trial.trial_id not in claims or trial.trial_id in stale]
    recorded = write_failure_rows(
        store_dir, lost, sweep=sweep, studies=studies, error_type="JobLost", message=reason
    )
    for trial in recorded:
        if trial.trial_id in stale:
            release(store_dir, stale[trial.trial_id])
    return recorded
